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

**Soft routing** (:func:`soft_forest_quantiles`; E2EDT's regressor with
``routing="soft"``, ours): a row reaches every leaf ``l`` of tree ``t`` with
its path probability ``p_l`` (:func:`obliquetrees._core.soft.path_probabilities`),
so entry ``i`` of leaf ``l`` gets ``(p_l / P_t) w_i / W_l``, ``P_t`` the
probability of the tree's leaves that hold rows: each tree again
contributes a distribution of total 1, the hard rule's limit when every
``p_l`` is 0 or 1, and the mixture's mean is ``predict``'s soft mean of the
leaves' weighted mean targets. The entries of all trees are sorted by
target once per call, so a row's quantiles cost one pass over them (no sort
per row); an entry of zero weight (a leaf whose probability underflows) is
left out, as the hard rule leaves out the leaves a row does not reach.

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
#: Most path probabilities held at once by soft routing (rows x nodes of the forest: 16 MB).
SOFT_CHUNK_CELLS = 1 << 21


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


@jit_parallel
def _mixture_quantiles(probability, node, share, values, quantiles, out):
    """Quantiles of every row of ``probability`` (rows x nodes) into ``out`` (rows x quantiles).

    ``values`` are the forest's entries sorted by target; entry ``e``
    belongs to leaf ``node[e]`` and holds ``share[e]`` of its leaf's weight.
    """
    n_entries = values.shape[0]
    for i in prange(probability.shape[0]):
        vals = np.empty(n_entries)
        cum = np.empty(n_entries)
        m = 0
        acc = 0.0
        for e in range(n_entries):
            weight = probability[i, node[e]] * share[e]
            if weight > 0.0:
                acc += weight
                vals[m] = values[e]
                cum[m] = acc
                m += 1
        if m == 0:
            out[i, :] = np.nan
        else:
            _quantiles_of(vals[:m], cum[:m], quantiles, out[i])


def soft_forest_quantiles(trees, steepness, leaf_targets, X, quantiles, n_threads=1):
    """:func:`forest_quantiles` under soft routing (the module's "Soft routing").

    Parameters
    ----------
    trees : list of ObliqueTree
        The forest's trees, parents before children.
    steepness : list of ndarray of float64
        Each tree's per-node steepness.
    leaf_targets : LeafTargets
        Checked against the forest of ``trees``.
    X : ndarray of float32/float64 or CSR matrix, already validated
    quantiles : ndarray of float64, shape (n_quantiles,)
    n_threads : int, default=1

    Returns
    -------
    out : ndarray of float64, shape (n_samples, n_outputs, n_quantiles)
    """
    from obliquetrees._core.soft import path_probabilities

    sizes = np.array([tree.node_count for tree in trees])
    offset = np.concatenate([[0], np.cumsum(sizes)])
    counts = np.diff(leaf_targets.leaf_ptr)
    node_of_entry = np.repeat(np.arange(offset[-1]), counts)
    holds_rows = counts > 0  # internal nodes and empty leaves take no probability
    sorted_entries = []
    for o in range(leaf_targets.n_outputs):
        weights = leaf_targets.weights[o]
        leaf_total = np.bincount(node_of_entry, weights, minlength=offset[-1])
        order = np.argsort(leaf_targets.targets[o], kind="mergesort")
        share = weights / leaf_total[node_of_entry]
        sorted_entries.append((node_of_entry[order], share[order], leaf_targets.targets[o][order]))
    out = np.empty((X.shape[0], leaf_targets.n_outputs, quantiles.shape[0]))
    step = max(1, min(CHUNK_ROWS, SOFT_CHUNK_CELLS // int(offset[-1])))
    for start in range(0, X.shape[0], step):
        rows = slice(start, min(start + step, X.shape[0]))
        probability = np.empty((rows.stop - start, offset[-1]))
        with numba_threads(n_threads):
            for t, (tree, steep) in enumerate(zip(trees, steepness, strict=True)):
                probability[:, offset[t] : offset[t + 1]] = path_probabilities(tree, X[rows], steep)
        probability *= holds_rows
        mass = np.add.reduceat(probability, offset[:-1], axis=1)  # each tree's, rows x trees
        n_parts = np.maximum(np.count_nonzero(mass > 0, axis=1), 1)
        scale = np.divide(1.0, mass * n_parts[:, None], out=np.zeros_like(mass), where=mass > 0)
        probability *= np.repeat(scale, sizes, axis=1)
        for o, (node, share, values) in enumerate(sorted_entries):
            with numba_threads(n_threads):
                _mixture_quantiles(probability, node, share, values, quantiles, out[rows, o])
    return out
