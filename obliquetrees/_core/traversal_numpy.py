"""Hard traversal in plain numpy, for small batches before numba is loaded.

The numba kernels of :mod:`obliquetrees._core.traversal` are the fast path,
but the first call in a process pays for importing numba and loading their
cached machine code (about 0.8 s here; ``benchmarks/results/startup.md``),
which dominates "load a pickled model, predict a few rows". This module walks
every (row, tree) pair level by level with vectorised gathers instead, so a
small batch costs milliseconds and never imports numba.

Once the numpy walks of a process have taken ``RENT_SECONDS`` in total, it
stops choosing them (ski rental): a process serving one small batch after
another then loads the kernels once instead of paying numpy's per-level
overhead forever, and never spends more than about twice the cheaper choice.

It reads the same routing layout (``ObliqueForest.routing_arrays``) and adds
in the same order as the kernels: the margin is ``w0 * x[f0]``, then each
further weight in storage order, then the bias (a NaN ``x`` contributes the
weight's missing-value term instead of its product); leaf values are summed in tree
order. Results are therefore bit-identical to the kernels'.

The public functions (:func:`apply`, :func:`predict_value`) take ``forest``
(an ObliqueForest) and ``X`` (a float32 or float64 array of shape
(n_samples, n_features)).
"""

import sys
import time

import numpy as np

from obliquetrees._core.tree import missing_kernel_arrays
from obliquetrees._core.validation import check_n_features

#: Largest modelled work (row-steps plus extra weights read, see
#: :func:`use_for_batch`) for which this path is taken while the numba
#: kernels are not loaded yet: 0.04-0.12 s of numpy here (measured on
#: forests of 5-30 dense and sparse oblique trees), a tenth of the kernels'
#: one-off loading cost or less.
MAX_WORK = 500_000

#: Total time the numpy walks of a process may take before batches go to the
#: kernels anyway: about half their loading cost.
RENT_SECONDS = 0.4

_spent_seconds = 0.0  # time taken by this process's numpy walks so far


def kernels_loaded():
    """Whether the numba traversal kernels already run in this process.

    False while another thread is still importing the kernels' module: it is
    in ``sys.modules`` before its kernels are defined (two dask worker
    threads predicting at once in a fresh process met it).
    """
    module = sys.modules.get("obliquetrees._core.traversal")
    kernel = getattr(module, "_traverse_dense", None)
    return kernel is not None and bool(kernel.signatures)


def use_for_batch(forest, X):
    """Whether to route this batch here rather than through the numba kernels.

    Only while the kernels are not loaded (afterwards they are faster at any
    size) and the numpy walks have not used up ``RENT_SECONDS``, for dense
    input, and when the batch is small enough that numpy beats the kernels'
    loading cost.
    """
    if _spent_seconds > RENT_SECONDS or kernels_loaded() or not isinstance(X, np.ndarray):
        return False
    nodes = forest.children_left.shape[0]
    # per row: one step per level of each tree, plus every extra weight read
    depth_sum = float(forest.depth.max(initial=0)) * forest.n_trees
    extra_per_node = max(forest.weight_value.shape[0] / max(nodes, 1) - 1.0, 0.0)
    work = X.shape[0] * depth_sum * (1.0 + extra_per_node)
    return work <= MAX_WORK


def _terms(weight, x, missing, position, feature):
    """``weight * x``, or the missing-value term at ``position`` where ``x`` is NaN.

    ``missing`` is ``(terms, fill)``: the stored terms, or (when ``terms`` is
    empty, the compact form) ``weight * fill[feature]``.
    """
    term = weight * x
    nan = np.isnan(x)
    if nan.any():
        terms, fill = missing
        if terms.shape[0]:
            term[nan] = terms[position[nan]]
        else:
            term[nan] = weight[nan] * fill[feature[nan]]
    return term


def _reached_nodes(forest, X):
    """Global id of the leaf each (row, tree) pair reaches: shape (n_rows, n_trees)."""
    global _spent_seconds
    check_n_features(X, forest.n_features)
    started = time.perf_counter()
    roots, nodes, extra_start, extra_index, weights, _ = forest.routing_arrays()
    missing = missing_kernel_arrays(forest)
    n_rows, n_trees = X.shape[0], roots.shape[0] - 1
    node = np.tile(roots[:-1], n_rows)  # pair p = row p // n_trees, tree p % n_trees
    row = np.repeat(np.arange(n_rows), n_trees)
    active = np.arange(node.shape[0])
    while active.shape[0]:
        rec = nodes[node[active]]
        internal = rec["left"] != -1
        active, rec = active[internal], rec[internal]
        if not active.shape[0]:
            break
        r = row[active]
        start = extra_start[node[active]]
        id_start = extra_index[node[active]]
        n_extra = rec["n_extra"]
        margin = _terms(rec["weight"], X[r, rec["feature"]], missing, start - 1, rec["feature"])
        margin[n_extra < 0] = 0.0  # splits without weights: the bias alone
        max_extra = int(n_extra.max())
        if max_extra > 0:
            for j in range(max_extra):
                has = np.flatnonzero(n_extra > j)
                at = start[has] + j
                feature = weights[0][id_start[has] + j]
                margin[has] += _terms(weights[1][at], X[r[has], feature], missing, at, feature)
        margin += rec["bias"]
        node[active] = np.where(margin > 0.0, rec["right"], rec["left"])
    _spent_seconds += time.perf_counter() - started
    return node.reshape(n_rows, n_trees)


def apply(forest, X):
    """Leaf reached by every sample in every tree (like ``traversal.apply``).

    Returns
    -------
    leaves : ndarray of int64, shape (n_samples, n_trees)
        Node ids local to each tree.
    """
    return _reached_nodes(forest, X) - forest.node_offset[:-1][None, :]


def predict_value(forest, X):
    """Sum over the trees of the reached leaves' values (like ``traversal.predict_value``).

    Returns
    -------
    total : ndarray of float64, shape (n_samples, n_outputs)
        Trees are added in tree order; divide by ``forest.n_trees`` for the mean.
    """
    _, nodes, _, _, _, leaf_value = forest.routing_arrays()
    leaf_rows = nodes["feature"][_reached_nodes(forest, X)]
    total = np.zeros((X.shape[0], forest.n_outputs))
    for t in range(forest.n_trees):  # tree order, as the kernels add
        total += leaf_value[leaf_rows[:, t]]
    return total
