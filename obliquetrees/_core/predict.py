"""The one prediction dispatcher: numpy walk, numba traversal or BLAS matrix form.

Every hard-routed estimator predicts the mean over its trees of the value of
the reached leaf (:func:`predict_mean`). Three paths give the same leaves:

- the numpy walk (:mod:`obliquetrees._core.traversal_numpy`) for small
  batches while the numba kernels are not loaded (a model just unpickled);
- the numba traversal (:mod:`obliquetrees._core.traversal`);
- the decision-machine matrix form (:mod:`obliquetrees._core.machine`): one
  BLAS product over all splits, faster for dense oblique splits on shallow
  trees. It reaches the same leaves except where a margin is within rounding
  of 0 (the product sums in another order).

:func:`choose_inference_path` picks between the last two by a cost model
fitted on this repository's benchmark grid. Imports numpy and scipy only.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core import traversal_numpy


def predict_mean(forest, X, n_threads=1):
    """Mean over the trees of the value of the reached leaf, by the fastest path.

    Parameters
    ----------
    forest : ObliqueForest
    X : ndarray of float32/float64 or CSR matrix, already validated
    n_threads : int, default=1

    Returns
    -------
    output : ndarray of float64, shape (n_samples, n_outputs)
    """
    # A small batch in a process that has not loaded the numba kernels yet
    # (typically: a model just unpickled) is walked in numpy, same result.
    if traversal_numpy.use_for_batch(forest, X):
        return traversal_numpy.predict_value(forest, X) / forest.n_trees

    # numba is imported on first use
    from obliquetrees._core import machine, traversal

    # One BLAS product over all splits beats walking the trees for dense
    # oblique splits on shallow trees; the measured rule decides per batch.
    # Both paths reach the same leaves except at exact margin ties.
    path = choose_inference_path(forest, X.shape[0], sparse_input=sp.issparse(X))
    if path == "blas":
        total = machine.predict_value(forest, X, n_threads)
    else:
        total = traversal.predict_value(forest, X, n_threads)
    return total / forest.n_trees


#: Constants of the cost model behind :func:`choose_inference_path`, fitted
#: by ``python -m benchmarks.bench_machine --part inference`` on the
#: development machine (see ``benchmarks/results/decision_machine.md``).
#: Nanoseconds: per call, or per row and unit of work.
COST = {
    "blas_call": 118481.7,  # fixed cost of one BLAS-path call, dense S (BLAS thread limit)
    "blas_call_sparse": 140189.6,  # fixed cost of one BLAS-path call, CSR S
    "blas_flop": 0.05334,  # per multiply-add of the margin product (dense S)
    "blas_sparse": 2.735,  # per stored weight (CSR S, numba margins)
    "blas_row": 1.646,  # per split (sign, margin write)
    "select": 6.741,  # per template entry checked
    "walk_call": 45295.6,  # fixed cost of one traversal call
    "walk_step": 9.064,  # per traversal step (node visited)
    "walk_weight": 1.073,  # per extra weight read in a traversal step
}
#: Batches below this many rows always take the traversal (BLAS set-up costs).
MIN_BLAS_ROWS = 64


def forest_stats(forest):
    """Per-forest quantities of the cost model (cached on the forest).

    Parameters
    ----------
    forest : ObliqueForest

    Returns
    -------
    stats : dict
        Traversal steps and extra weights per row, the margin product's
        work (dense multiply-adds, stored weights), whether the machine's
        ``S`` is CSR, template checks and splits per row.
    """
    return forest.derived("cost_stats", _forest_stats)


def _forest_stats(forest):
    internal = forest.children_left >= 0
    leaf = ~internal
    tree_of = np.repeat(np.arange(forest.n_trees), np.diff(forest.node_offset))
    # traversal steps per row: the mean leaf depth of every tree, summed
    n_leaves_t = np.bincount(tree_of[leaf], minlength=forest.n_trees)
    depth_sum_t = np.bincount(tree_of[leaf], weights=forest.depth[leaf], minlength=forest.n_trees)
    steps = float(np.sum(depth_sum_t / np.maximum(n_leaves_t, 1)))
    pointer_rows = np.arange(internal.shape[0]) + tree_of
    nnz = np.diff(forest.weight_indptr)[pointer_rows][internal].astype(np.float64)
    n_splits = float(internal.sum())
    mean_nnz = float(nnz.mean()) if nnz.size else 0.0
    sparse = nnz.sum() * 12 < n_splits * forest.n_features * 8  # the machine's choice of S
    return {
        "steps": steps,
        "extra_weights": steps * max(mean_nnz - 1.0, 0.0),
        "dense_flops": n_splits * forest.n_features,
        "sparse_nnz": float(nnz.sum()),
        "sparse": bool(sparse),
        # template entries checked per row by the skipping scan: about one per
        # level plus one per skip, i.e. up to twice the path length
        "checks": 2.0 * steps,
        "splits": n_splits,
    }


def inference_costs(forest, n_samples=1):
    """Modelled nanoseconds of both hard paths for a batch of ``n_samples`` rows.

    Returns ``{"blas": .., "traversal": ..}`` for an ObliqueForest.
    """
    return costs_from_stats(forest_stats(forest), n_samples)


def costs_from_stats(s, n, c=None):
    """:func:`inference_costs` from :func:`forest_stats` (``c``: constants, default ``COST``)."""
    c = COST if c is None else c
    if s["sparse"]:
        margin, call = s["sparse_nnz"] * c["blas_sparse"], c["blas_call_sparse"]
    else:
        margin, call = s["dense_flops"] * c["blas_flop"], c["blas_call"]
    blas = call + n * (margin + s["splits"] * c["blas_row"] + s["checks"] * c["select"])
    walk = c["walk_call"] + n * (
        s["steps"] * c["walk_step"] + s["extra_weights"] * c["walk_weight"]
    )
    return {"blas": blas, "traversal": walk}


def choose_inference_path(forest, n_samples, sparse_input=False):
    """``"blas"`` or ``"traversal"``: the faster hard-inference path, by a measured rule.

    Parameters
    ----------
    forest : ObliqueForest
    n_samples : int
        Rows of the batch.
    sparse_input : bool, default=False
        CSR input always takes the traversal.

    Returns
    -------
    path : {"blas", "traversal"}
        The cheaper path under the cost model (:func:`inference_costs`);
        batches under ``MIN_BLAS_ROWS`` rows always traverse. What the rule
        encodes, as measured: :func:`obliquetrees.machine.choose_inference_path`.
    """
    if sparse_input or n_samples < MIN_BLAS_ROWS:  # no statistics needed
        return "traversal"
    return choose_from_stats(forest_stats(forest), n_samples)


def choose_from_stats(stats, n_samples, constants=None):
    """The rule of :func:`choose_inference_path` on :func:`forest_stats` (dense input).

    ``constants`` replaces ``COST`` (the benchmark checks fitted constants).
    """
    if n_samples < MIN_BLAS_ROWS:
        return "traversal"
    costs = costs_from_stats(stats, n_samples, constants)
    return "blas" if costs["blas"] < costs["traversal"] else "traversal"
