"""The tasks a dask worker runs to grow CO2 trees node by node (:mod:`obliquetrees.dask`).

:func:`node_pass` is a pass's work on one partition, :func:`grow_node` the
decision of one node from its partitions' pieces, and :func:`grow_rows` the
in-memory training step (missing-value plan, growth, folding) on a node's
rows, from a :class:`NodeStep` rather than the estimator: a worker that runs
them imports numpy, numba and this package's training code, not
scikit-learn (:mod:`obliquetrees._core.row_checks` says why).
"""

import dataclasses
import math

import numpy as np

from obliquetrees._core.forest import ObliqueForest, return_freed_memory
from obliquetrees._core.missing import MissingValues
from obliquetrees._core.row_checks import PartitionRows
from obliquetrees._core.traversal import apply
from obliquetrees._core.validation import bounded_weights
from obliquetrees._training.features import resolve_max_features
from obliquetrees._training.partitions import ALL_ZERO_WEIGHT, drawn_rows
from obliquetrees.co2 import training as co2
from obliquetrees.co2._distributed import node_rows, node_seed, subsample


@dataclasses.dataclass(frozen=True)
class NodeStep:
    """What a worker needs to grow a CO2 node: the in-memory training step's inputs.

    Attributes
    ----------
    rows : PartitionRows
        The checks of a partition's rows.
    params : dict
        :class:`~obliquetrees.co2.training.CO2Params`' fields, as the
        estimator's attributes, but ``max_features``, ``max_split_features``
        and ``max_samples``, resolved per node (``max_samples``: None, the
        rows come drawn).
    max_features, max_split_features
        The estimator's parameters, resolved against each node's inputs
        (features and missing-value indicators).
    classes : ndarray or None
        The classes (None: a regressor).
    n_outputs : int
        Outputs of the node statistics: classes, or targets.
    class_weight : ndarray, "balanced_subsample" or None
        The growth's class weights (encoded order), as the estimator's
        ``_class_weight_vector`` gives them.
    node_class_weight : ndarray or None
        Per-class weights of the nodes' exact statistics.
    monotonic_cst : ndarray of int8 or None
        The checked constraints.
    name : str
        The estimator's class name (progress and errors).
    """

    rows: PartitionRows
    params: dict
    max_features: object
    max_split_features: object
    classes: np.ndarray | None
    n_outputs: int
    class_weight: object
    node_class_weight: np.ndarray | None
    monotonic_cst: np.ndarray | None
    name: str


def grow_rows(step, X, y, sample_weight, seed, limits):
    """One tree grown on validated rows as the in-memory fit grows it: ``(tree, stats,
    (max_features_, max_split_features_))``.

    ``limits`` overrides ``params`` fields (a node's share of the tree's limits,
    :func:`node_limits`). ``stats``: CCCP iterations and axis-aligned fallbacks.
    """
    missing = MissingValues.from_data(X, sample_weight, y, step.classes is not None)
    resolved = {
        "max_features": resolve_max_features(step.max_features, missing.n_inputs),
        "max_split_features": resolve_max_features(step.max_split_features, missing.n_inputs),
        "max_samples": None,
    }
    params = co2.CO2Params(**{**step.params, **limits, **resolved})
    cst = step.monotonic_cst
    n_free = missing.n_inputs - X.shape[1]  # the indicators, unconstrained
    trees, info = co2.fit_co2(
        missing.augment(X),
        y,
        sample_weight,
        params,
        [seed],
        n_classes=None if step.classes is None else len(step.classes),
        class_weight=step.class_weight,
        monotonic_cst=None if cst is None else np.r_[cst, np.zeros(n_free, np.int8)],
        n_jobs=1,
        verbose=0,
        name=step.name,
    )
    tree = missing.fold(trees.pop())
    return_freed_memory()  # the unfolded tree's terms (see obliquetrees.co2._estimator)
    return (
        tree,
        info["stats"][0, [0, 2]],
        (resolved["max_features"], resolved["max_split_features"]),
    )


def node_limits(step, stats, root_weight, depth, n_rows, stump=False):
    """The limits of a node's subtree (``n_rows``: all its rows) or its stump (``n_rows``: its
    sample's), as a share of the tree's.

    ``max_depth`` is the tree's less the node's depth (1 for a stump);
    ``min_impurity_decrease``, which the growth weighs by a split's share of
    its root's weight, is scaled by the tree's root weight over the node's,
    so a split's decrease counts as a share of the tree's root, as in
    memory; a stump, fitted on a sample, asks of each child
    ``min_samples_leaf`` (and of the node ``min_samples_split``) times the
    sample's share of the node's rows, at least 1 (and 2).
    """
    params, limits = step.params, {}
    if stump:
        share = n_rows / stats[3]
        limits["max_depth"] = 1
        limits["min_samples_leaf"] = max(1, math.ceil(params["min_samples_leaf"] * share))
        limits["min_samples_split"] = max(2, math.ceil(params["min_samples_split"] * share))
    elif params["max_depth"] is not None:
        limits["max_depth"] = params["max_depth"] - depth
    if root_weight is not None and params["min_impurity_decrease"]:
        limits["min_impurity_decrease"] = params["min_impurity_decrease"] * root_weight / stats[1]
    return limits


def node_pass(X, y, sample_weight, partition, step, plan):
    """One partition's share of a pass of node growth (:mod:`obliquetrees.co2._distributed`).

    ``plan`` lists ``(seed, counts, replace, routing, requests)`` per tree
    served by the pass (``routing`` and ``requests`` as
    :func:`~obliquetrees.co2._distributed.node_rows` takes them): the
    partition is validated, each tree's rows drawn
    (:func:`~obliquetrees._training.partitions.drawn_rows`) and handed to
    ``node_rows``. Returns one dict per tree.
    """
    empty = (0.0, 0.0, np.zeros(step.n_outputs), 0)
    if X.shape[0] == 0:
        return [{path: (empty, None) for path, _ in tree[4].values()} for tree in plan]
    X, y, weights = step.rows.fit_rows(X, y, sample_weight)
    X = np.ascontiguousarray(X, dtype=np.float64)
    if step.classes is not None:
        y = np.searchsorted(step.classes, y).astype(np.int64)
    out = []
    for seed, counts, replace, routing, requests in plan:
        n_draw = int(counts[partition])
        if not n_draw:
            out.append({path: (empty, None) for path, _ in requests.values()})
            continue
        rows, times = drawn_rows(seed, partition, n_draw, replace, X.shape[0])
        stat_weights = weights[rows] * times
        if step.node_class_weight is not None:
            stat_weights = stat_weights * step.node_class_weight[y[rows]]
        out.append(
            node_rows(
                X[rows],
                y[rows],
                weights[rows],
                stat_weights,
                times,
                routing,
                requests,
                seed,
                partition,
                step.n_outputs,
            )
        )
    return_freed_memory()  # the partition's temporaries: glibc keeps freed heap pages
    return out


def node_piece(taken, tree, path):
    """A partition's ``(statistics, rows)`` of node ``path`` of the pass's tree ``tree``."""
    return taken[tree][path]


def grow_node(step, seed, path, depth, request, sizes, *pieces):
    """Decide one node of a tree's node growth from its partitions' ``pieces`` (of
    :func:`node_pass`).

    ``request`` is ``(keep, final, root_weight)``: the probability with which
    the rows were kept, whether it was computed from the node's exact rows,
    and the weight of the tree's root (None for the root itself); ``sizes``
    is ``(rows_per_task, split_rows)``. Returns ``(kind, stats, ...)``:

    - ``("retry", stats)`` when the kept rows are not what the node needs (all
      of them for a node of at most ``rows_per_task`` rows, about
      ``split_rows`` for a larger one) because its rows were estimated;
    - ``("leaf", stats[, growth])``;
    - ``("subtree", stats, tree, growth)`` for a node whose every row came,
      grown as the in-memory training step grows a tree;
    - ``("split", stats, stump, estimates, growth)`` for a node split as the
      root of a tree of depth 1 fitted on (a subsample of ``split_rows`` of)
      its rows, with the rows each child is expected to hold
      (:meth:`~obliquetrees.co2._distributed.NodeTree.set_split`).

    ``growth`` is ``(stats, resolution)`` of :func:`grow_rows`.
    ``stats`` are the node's exact statistics (draws, weight, sums, rows).
    """
    keep, final, root_weight = request
    rows_per_task, split_rows = sizes
    stats = tuple(sum(piece[0][i] for piece in pieces) for i in range(4))
    taken = [piece[1] for piece in pieces if piece[1] is not None]
    n_kept = sum(t[0].shape[0] for t in taken)
    if not final and keep < 1 and (stats[3] <= rows_per_task or n_kept < split_rows // 4):
        return ("retry", stats)
    if not stats[1] > 0 and path == 1:
        raise ValueError(ALL_ZERO_WEIGHT)
    if keep == 0 or not taken or not stats[1] > 0:
        return ("leaf", stats)
    X, y, weights, times = (np.concatenate([t[i] for t in taken]) for i in range(4))
    del taken, pieces
    weights = weights * times  # the bootstrap's counts, as the in-memory fit weighs rows
    if keep >= 1 and X.shape[0] <= rows_per_task:  # every row: grow the subtree
        limits = node_limits(step, stats, root_weight, depth, X.shape[0])
        tree, *growth = grow_rows(
            step, X, y, bounded_weights(weights), node_seed(seed, path), limits
        )
        return ("subtree", stats, _terms_of_rows(tree, X), growth)
    if X.shape[0] > split_rows:
        rows = subsample(seed, path, X.shape[0], split_rows)
        X, y, weights = X[rows], y[rows], weights[rows]
    if not np.any(weights > 0):  # a sample of rows of zero weight only (rare): no split
        return ("leaf", stats)
    limits = node_limits(step, stats, root_weight, depth, X.shape[0], stump=True)
    stump, *growth = grow_rows(step, X, y, bounded_weights(weights), node_seed(seed, path), limits)
    stump = _terms_of_rows(stump, X)
    if stump.node_count == 1:
        return ("leaf", stats, growth)
    return ("split", stats, stump, _child_estimates(stump, X, stats[3]), growth)


def _terms_of_rows(tree, X):
    """``tree`` with explicit missing-value terms if its rows ``X`` had NaN.

    A tree grown on rows with NaN counted them as its rows' mean (the compact
    form) and routed them so; it keeps those terms. One grown on rows
    without NaN keeps the compact form, which the joined tree replaces by
    the mean of all rows (:class:`~obliquetrees.co2._distributed.NodeTree`).
    """
    if tree.missing_fill is not None and np.isnan(X).any():
        tree.weight_missing = tree.weight_missing  # the products, stored
        tree.missing_fill = None
    return tree


def _child_estimates(stump, X, n_rows):
    """The rows each child of a stump fitted on the sample ``X`` of a node of ``n_rows``
    distinct rows is expected to hold, with the standard error: ``((left, se), (right, se))``."""
    left = apply(ObliqueForest.from_trees([stump]), X)[:, 0] == stump.children_left[0]
    share = np.count_nonzero(left) / X.shape[0]
    error = n_rows * math.sqrt(share * (1.0 - share) / X.shape[0])
    return (n_rows * share, error), (n_rows * (1.0 - share), error)
