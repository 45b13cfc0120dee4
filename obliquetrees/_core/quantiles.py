"""Quantiles of a forest's leaf co-membership weights: the quantile regression forest kernel.

For a row ``x`` reaching leaf ``l_t`` in tree ``t``, training entry ``i`` of
that leaf (target ``y_i``, weight ``w_i``; :mod:`obliquetrees._core.leaf_targets`)
gets the weight ``w_i / W_t``, ``W_t`` the total weight of the leaf: each
tree whose leaf holds weighted rows contributes a distribution of total 1
(Meinshausen, 2006), so the mixture's mean is the mean of the leaves'
weighted mean targets, which is ``predict`` wherever the leaves hold those
means (CO2, and the fine-tuned and refitted models on their data). A tree
whose leaf holds no row is left out of the mixture; a row that reaches no
such leaf in any tree gets NaN.

**Interpolation: the averaged inverse of the weighted ECDF** (Hyndman and
Fan's definition 2, numpy's ``method="averaged_inverted_cdf"``). With the
entries sorted by target, cumulative weights ``C_1 < ... < C_m = S``, the
``q``-quantile is ``y_k`` for the first ``k`` with ``C_k >= q S``; where
``C_k`` equals ``q S`` (the ECDF is flat at level ``q`` between ``y_k`` and
``y_{k+1}``) it is their midpoint. With unit weights it is numpy's quantile of
that method: the median of an even number of targets is the mean of the
middle two, as ``np.median``. ``C_k`` counts as equal to ``q S`` within
``TIE_TOLERANCE * S`` (the normalised weights ``w_i / W_t`` are rounded, so
``C_k`` of an exact tie can miss ``q S`` by a few ulps). ``q = 0`` gives
the smallest target, ``q = 1`` the largest. Each value is a training target
or the midpoint of two: never outside the targets' range.

Shape of the work: per row a gather of the reached leaves' entries and a
sort (merge of sorted runs: ``np.argsort(kind="mergesort")``), O(m log m)
for ``m`` gathered entries; with one tree the leaf is already sorted. Rows
are independent (``prange`` over rows, each written by one iteration), so
the result is bit-identical for any number of threads.
"""

import numpy as np

from obliquetrees._core import traversal
from obliquetrees._core._jit import jit, jit_parallel, numba_threads, prange

#: Relative tolerance (of the total weight) within which a cumulative weight equals ``q S``.
TIE_TOLERANCE = 1e-9
#: Rows whose leaves are looked up at once (bounds the ``(rows, n_trees)`` leaf ids).
CHUNK_ROWS = 8192


@jit
def _quantiles_of(values, cum, quantiles, out):
    """``out[j]``: quantile ``quantiles[j]`` of sorted ``values``, cumulative weights ``cum``."""
    m = values.shape[0]
    total = cum[m - 1]
    tol = TIE_TOLERANCE * total
    for j in range(quantiles.shape[0]):
        level = quantiles[j] * total
        k = np.searchsorted(cum, level - tol)  # first k with cum[k] >= level - tol
        k = min(k, m - 1)
        value = values[k]
        if abs(cum[k] - level) <= tol and k + 1 < m:
            value = 0.5 * (value + values[k + 1])
        out[j] = value


@jit
def _row_quantiles(nodes, leaf_ptr, targets, weights, quantiles, values, share, cum, out):
    """The quantiles of one row (``out``: n_outputs x n_quantiles) from its reached ``nodes``."""
    for o in range(targets.shape[0]):
        m = 0
        n_parts = 0
        for t in range(nodes.shape[0]):
            start, stop = leaf_ptr[nodes[t]], leaf_ptr[nodes[t] + 1]
            if stop == start:
                continue
            total = 0.0
            for e in range(start, stop):
                total += weights[o, e]
            n_parts += 1
            for e in range(start, stop):
                values[m] = targets[o, e]
                share[m] = weights[o, e] / total
                m += 1
        if m == 0:
            out[o, :] = np.nan
            continue
        vals = values[:m]
        shares = share[:m]
        if n_parts > 1:  # one leaf is stored sorted
            order = np.argsort(vals, kind="mergesort")
            vals = vals[order]
            shares = shares[order]
        acc = 0.0
        for k in range(m):
            acc += shares[k]
            cum[k] = acc
        _quantiles_of(vals, cum[:m], quantiles, out[o])


@jit_parallel
def _forest_quantiles(nodes, leaf_ptr, targets, weights, quantiles, out):
    """Quantiles of every row of ``nodes`` (global leaf ids, rows x trees) into ``out``."""
    for i in prange(nodes.shape[0]):
        m = 0
        for t in range(nodes.shape[1]):
            m += leaf_ptr[nodes[i, t] + 1] - leaf_ptr[nodes[i, t]]
        values = np.empty(m)
        share = np.empty(m)
        cum = np.empty(m)
        _row_quantiles(nodes[i], leaf_ptr, targets, weights, quantiles, values, share, cum, out[i])


def reached_leaves(forest, X, n_threads=1):
    """``(rows, leaves)`` for consecutive slices of :data:`CHUNK_ROWS` rows of ``X``.

    ``leaves`` is :func:`traversal.apply` of the rows (local leaf ids, rows x
    trees): the leaf ids of a whole batch are never held at once.
    """
    n = X.shape[0]
    for start in range(0, n, CHUNK_ROWS):
        rows = slice(start, min(start + CHUNK_ROWS, n))
        yield rows, traversal.apply(forest, X[rows], n_threads)


def forest_quantiles(forest, leaf_targets, X, quantiles, n_threads=1):
    """Weighted quantiles of the training targets sharing a leaf with each row of ``X``.

    Parameters
    ----------
    forest : ObliqueForest
    leaf_targets : LeafTargets
        Checked against ``forest`` (:meth:`LeafTargets.check_forest`).
    X : ndarray of float32/float64 or CSR matrix, already validated
    quantiles : ndarray of float64, shape (n_quantiles,)
        Levels in [0, 1].
    n_threads : int, default=1

    Returns
    -------
    out : ndarray of float64, shape (n_samples, n_outputs, n_quantiles)
    """
    out = np.empty((X.shape[0], leaf_targets.n_outputs, quantiles.shape[0]))
    offset = forest.node_offset[:-1][None, :]
    for rows, leaves in reached_leaves(forest, X, n_threads):
        leaves += offset  # global node ids, in place: one (rows, trees) array per chunk
        with numba_threads(n_threads):
            _forest_quantiles(
                leaves,
                leaf_targets.leaf_ptr,
                leaf_targets.targets,
                leaf_targets.weights,
                quantiles,
                out[rows],
            )
    return out
