"""Training of CO2 Forest (Norouzi et al.): bagged trees of CCCP-optimised
oblique stumps, grown breadth-first, for classes (the paper's log loss) or
regression targets (squared loss, ours; :mod:`obliquetrees._training.targets`).

Pure functions over arrays. The estimator (``obliquetrees/co2/_estimator.py``) validates
the data and builds one :class:`CO2Params`; :func:`fit_co2` computes the
features' standardisation once, which the kernels apply to the caller's ``X``
as they read its rows (no standardised copy of ``X`` is made), draws each
tree's bootstrap as integer counts, grows the trees in parallel with joblib
threads (each tree breadth-first in one numba kernel on the shared grower's
mechanics, which releases the GIL) and returns :class:`ObliqueTree` objects
whose weights act on the raw input (the standardisation is folded in).
A canonical CSR ``X`` is never densified: the trees grow on its stored
entries divided by the feature scale (:mod:`obliquetrees.co2._sparse_kernels`).

Importing this module imports numba.
"""

import collections
import dataclasses

import numpy as np
import scipy.sparse as sp

from obliquetrees._core._random import legacy_generator
from obliquetrees._core.forest import return_freed_memory
from obliquetrees._core.tree import (
    ObliqueTree,
    check_centred_range,
    feature_moments,
    standardization,
)
from obliquetrees._training._parallel import parallel_map, shared_arguments
from obliquetrees._training._progress import Progress
from obliquetrees._training._weights import balanced_class_weight
from obliquetrees._training.grower import limit
from obliquetrees.co2._grow import fold_split_weights
from obliquetrees.co2._grow import grow_tree as _grow_tree
from obliquetrees.co2._node import dense_source
from obliquetrees.co2._oob import OUT_OF_BAG, no_out_of_bag, out_of_bag


@dataclasses.dataclass(frozen=True, kw_only=True)
class CO2Params:
    """Parameters of a CO2 fit, named as :class:`obliquetrees.CO2ForestClassifier`'s.

    Built by the estimator from its (validated) parameters; ``max_features``
    is the resolved number ``q`` of candidate features and ``max_samples``
    the resolved number of bootstrap draws per tree (None: as many as rows,
    also the kernels' -1); ``max_cccp_samples`` None (-1) fits every node's
    CCCP on all its rows. Values are cast to
    the types the kernels are compiled for (so e.g. ``nu=10`` and
    ``nu=10.0`` share one compiled kernel).
    """

    max_features: int
    max_depth: int | None
    min_samples_split: int
    min_samples_leaf: int
    max_leaf_nodes: int | None
    min_impurity_decrease: float
    nu: float
    learning_rate: float
    batch_size: int
    momentum: float
    cccp_epochs: int
    max_cccp_iter: int
    tol: float
    bootstrap: bool
    max_samples: int | None
    max_cccp_samples: int | None
    max_split_features: int | None
    min_samples_oblique: int
    oblique_penalty: float | None
    oblique_test: str

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.type in (int, float, bool):
                value = field.type(value)
            elif field.name == "oblique_penalty":
                value = None if value is None else float(value)
            elif field.name == "oblique_test":
                value = str(value)
            elif value is not None:  # growth limits, max_samples, ...: None or int
                value = int(value)
            object.__setattr__(self, field.name, value)

    @property
    def tests_out_of_bag(self):
        """Whether the axis-or-oblique choice is made on each tree's out-of-bag rows."""
        return self.oblique_test == "out_of_bag" and self.oblique_penalty is not None

    def kernel_args(self):
        """These parameters as one :class:`CO2KernelParams` record for the numba kernels.

        The growth limits, ``max_samples``, ``max_cccp_samples`` and
        ``max_split_features`` ``None`` become -1 (:func:`limit`), an
        ``oblique_penalty`` of None -1.0 (no test), ``oblique_test`` 0
        (``"fit"``) or :data:`~obliquetrees.co2._oob.OUT_OF_BAG`; every other
        value keeps its type, so the kernels see int64, float64 and bool
        scalars under the estimator's names.
        """
        kernel_values = {
            name: limit(getattr(self, name))
            for name in (
                "max_depth",
                "max_leaf_nodes",
                "max_samples",
                "max_cccp_samples",
                "max_split_features",
            )
        }
        kernel_values["oblique_penalty"] = (
            -1.0 if self.oblique_penalty is None else self.oblique_penalty
        )
        kernel_values["oblique_test"] = OUT_OF_BAG if self.oblique_test == "out_of_bag" else 0
        return CO2KernelParams(**(dataclasses.asdict(self) | kernel_values))


#: :class:`CO2Params` as the numba kernels take it (:meth:`CO2Params.kernel_args`):
#: a namedtuple of scalars, which numba passes by value and reads by field name
#: (``params.nu``), so the names stay the estimator's down to the kernels.
CO2KernelParams = collections.namedtuple(
    "CO2KernelParams", [f.name for f in dataclasses.fields(CO2Params)]
)


def bootstrap_counts(n_samples, seed, n_draws=None):
    """Number of times each of ``n_samples`` rows is drawn by ``n_draws`` uniform draws.

    ``n_draws=None`` draws ``n_samples`` times (the classic bootstrap).
    """
    rng = legacy_generator(seed)
    draws = rng.randint(0, n_samples, n_samples if n_draws is None else n_draws)
    return np.bincount(draws, minlength=n_samples).astype(np.float64)


def _tree_seeds(seed):
    """The bootstrap seed and the growth seed of the tree drawn from ``seed``."""
    boot_seed, grow_seed = legacy_generator(seed).randint(np.iinfo(np.int32).max, size=2)
    return boot_seed, grow_seed


def tree_bootstrap_counts(n_samples, seed, n_draws=None):
    """Bootstrap counts of the tree grown from ``seed`` (zero: out of bag)."""
    return bootstrap_counts(n_samples, _tree_seeds(seed)[0], n_draws)


def grow_tree(
    Xs, y, row_weight, n_classes, seed, params, capacity=0, oob_weight=None, cst=None,
    column_order=None,
):  # fmt: skip
    """Grow one tree breadth-first on the standardised input ``Xs`` with per-row weights.

    Rows with zero weight are left out. The growth runs in one numba kernel
    (:func:`obliquetrees.co2._grow.grow_tree`) on the shared
    grower's mechanics; each node is one split kernel, which partitions
    the node's slice of the row indices in place.

    Parameters
    ----------
    Xs : ndarray of float64, shape (n_samples, n_features), C-contiguous, or tuple
        The standardised dense ``X``; or ``(X, mean, scale)``, a dense ``X``
        standardised as ``(X - mean) / scale`` by the kernels as they read it
        (:func:`~obliquetrees.co2._node.dense_source`: the same bits,
        no copy); or for sparse input the CSR triple
        ``(indptr, indices, data)`` of ``X / scale`` (int64 indices; see
        :func:`scaled_csr`) followed by ``n_features``.
    y : ndarray of int64, shape (n_samples,), or of float64, shape (n_samples, n_outputs)
        Class indices, or standardised regression targets.
    row_weight : ndarray of float64, shape (n_samples,)
    n_classes : int
        Number of classes (targets: of outputs).
    seed : int
        The tree's growth seed (each node's seed is hashed from it).
    params : CO2Params
    capacity : int, default=0
        Nodes the growth table is first allocated for (a guess: it grows as
        needed; the result does not depend on it).
    oob_weight : ndarray of float64, shape (n_samples,), default=None
        The weights of the tree's out-of-bag rows (0 for the others), which
        ``params.oblique_test="out_of_bag"`` tests the oblique splits on
        (:mod:`obliquetrees.co2._oob`); None (or the test off): none.
    cst : ndarray of int8, shape (n_features,), default=None
        Monotonic constraints of the inputs (:mod:`obliquetrees.co2._monotone`;
        None: none, the tree grown as without the parameter).
    column_order : ndarray of int32, shape (n_features, n_samples), default=None
        :func:`column_order` of ``X`` (dense or CSR). The axis-aligned
        searches then read each node's rows in order of every feature from
        it, kept partitioned down the tree, instead of sorting them in every
        node (:func:`obliquetrees.co2._grow.presorted_rows`). None: they sort.

    Returns
    -------
    children_left, children_right : ndarray of int64, shape (n_nodes,)
    weights : ndarray of float64, shape (n_nodes, n_features), or tuple
        Dense input: a view of the growth table (whose capacity may exceed
        ``n_nodes``); rows of leaves are zero. CSR input: the same weights
        as CSR ``(indptr, index, value)`` (int64, int32, float64; each
        node's nonzero weights in feature order, none on leaves), which is
        O(the nodes' distinct stored features), not O(nodes x n_features)
        (see :mod:`obliquetrees.co2._grow`).
    bias : ndarray of float64, shape (n_nodes,)
    value : ndarray of float64, shape (n_nodes, n_classes)
        Weighted class distribution (normalised) of each node, or its
        weighted mean target.
    n_node_samples : ndarray of float64, shape (n_nodes,)
        Weighted number of training samples of each node.
    depth : ndarray of int64, shape (n_nodes,)
    stats : ndarray of int64, shape (3,)
        CCCP outer iterations, oblique splits, axis-aligned fallbacks.
    """
    rows = np.flatnonzero(row_weight > 0)
    tested = oob_weight is not None and params.tests_out_of_bag
    oob = out_of_bag(oob_weight) if tested else no_out_of_bag()
    if isinstance(Xs, tuple) and len(Xs) == 4:  # CSR
        source, n_features = Xs[:3], Xs[3]
    else:
        source = dense_source(*Xs) if isinstance(Xs, tuple) else dense_source(Xs)
        n_features = source[0].shape[1]
    return _grow_tree(
        source,
        y,
        row_weight,
        rows,
        n_features,
        np.uint64(seed),
        n_classes,
        params.kernel_args(),
        int(capacity),
        oob,
        cst,
        column_order,
    )


#: The most entries (rows x features) of a dense ``X`` whose trees grow on presorted rows
#: (:func:`column_order`): the order takes 4 bytes an entry (half of ``X``), and each tree
#: in flight 4 bytes per entry of its distinct rows. Above this (``X`` of 128 MB) the
#: nodes sort their rows instead, which adds no memory.
MAX_PRESORTED_ENTRIES = 1 << 24


def column_order(X):
    """Every row of ``X`` (dense or CSR) in increasing order of each column, ties by row id.

    int32, ``(n_features, n_samples)``: what :func:`grow_tree` takes as
    ``column_order``; None when ``X`` has more than :data:`MAX_PRESORTED_ENTRIES`
    entries, stored or not (its trees then sort in every node). The order of ``X``'s columns
    is that of the standardised columns the trees split (a positive scale),
    up to values that standardising makes equal, which every sort of the
    node's values may put in either order.
    """
    n, p = X.shape
    if n * p > MAX_PRESORTED_ENTRIES or n >= np.iinfo(np.int32).max:
        return None
    if not sp.issparse(X):
        return np.ascontiguousarray(np.argsort(X, axis=0, kind="stable").T, dtype=np.int32)
    order = np.empty((p, n), dtype=np.int32)
    columns = X.tocsc()
    column = np.zeros(n)
    for f in range(p):  # one dense column at a time: O(n) extra memory
        rows = columns.indices[columns.indptr[f] : columns.indptr[f + 1]]
        column[rows] = columns.data[columns.indptr[f] : columns.indptr[f + 1]]
        order[f] = np.argsort(column, kind="stable")
        column[rows] = 0.0
    return order


def scaled_csr(X, scale):
    """``X / scale`` of a canonical CSR as the tuple :func:`grow_tree` takes.

    Only the stored values are divided (a feature with infinite scale, constant
    in training, becomes 0); the index arrays are ``X``'s own, not copied.
    """
    data = X.data / scale[X.indices]
    return X.indptr, X.indices, data, X.shape[1]


def _fit_one_tree(
    Xs,
    y,
    sample_weight,
    class_weight,
    n_classes,
    seed,
    params,
    prior,
    mean,
    scale,
    target,
    node_counts=None,
    cst=None,
    column_order=None,
):
    """Bootstrap, grow and package one tree (module level for joblib/dask).

    ``Xs`` is the dense ``X`` itself (standardised with ``mean`` and ``scale``
    by the kernels) or the CSR triple of :func:`fit_co2`. ``target`` is
    ``(mean, scale)`` of the standardised targets, None for classes.
    ``node_counts``, a list shared by the fit's tasks (threads), holds the
    node counts of the trees grown so far: the growth table starts at the
    largest plus an eighth (see :func:`grow_tree`'s ``capacity``), and this
    tree's count is appended. With ``params.tests_out_of_bag`` the rows the
    bootstrap left out are grown along, weighted by ``sample_weight`` times
    ``class_weight`` (the tree's, for ``"balanced_subsample"``). ``cst`` and
    ``column_order``: :func:`grow_tree`'s.
    """
    n = y.shape[0]
    boot_seed, grow_seed = _tree_seeds(seed)
    if params.bootstrap:
        row_weight = bootstrap_counts(n, boot_seed, params.max_samples)
    else:
        row_weight = np.ones(n)
    oob_weight = (row_weight == 0) * sample_weight if params.tests_out_of_bag else None
    if class_weight is not None:
        if isinstance(class_weight, str):  # "balanced_subsample"
            per_row = balanced_class_weight(y, row_weight, n_classes)[y]
        else:
            per_row = class_weight[y]
        row_weight = row_weight * per_row
        if oob_weight is not None:  # the out-of-bag rows weigh as the tree's classes do
            oob_weight = oob_weight * per_row
    row_weight = row_weight * sample_weight
    # a dense X comes alone (joblib's dask backend scatters a top-level array once, not
    # one inside a tuple) and is standardised by the kernels as they read it
    source = Xs if isinstance(Xs, tuple) else (Xs, mean, scale)
    # the trees of one fit have similar sizes: a table sized after them is not
    # reallocated and holds few spare rows
    largest = max(node_counts, default=0) if node_counts is not None else 0
    left, right, weights, bias, value, nns, depth, stats = grow_tree(
        source,
        y,
        row_weight,
        n_classes,
        grow_seed,
        params,
        largest + largest // 8,
        oob_weight=oob_weight,
        cst=cst,
        column_order=column_order,
    )
    del row_weight, oob_weight
    if node_counts is not None:
        node_counts.append(left.shape[0])
    _fill_empty_nodes(left, right, value, nns, prior)
    if target is not None:  # leaf values back to the units of y
        value = target[0] + target[1] * value
    tree = stored_tree(left, right, weights, bias, value, nns, depth, mean, scale)
    del weights  # the growth table
    # the growth's temporaries (node table, row indices: tens of MB at 100k rows) are
    # freed in this thread's malloc arena, which glibc keeps: hand them back, else the
    # fit's resident size grows by them per tree in flight
    return_freed_memory()
    return tree, stats


def stored_tree(left, right, weights, bias, value, nns, depth, mean, scale):
    """The :class:`ObliqueTree` of :func:`grow_tree`'s arrays, in raw input units.

    The tree of ``fold_standardization(ObliqueTree.from_dense(left, right,
    weights, bias, value, nns, depth), mean, scale)``, bit for bit, with the
    dense ``weights`` read once by a kernel
    (:func:`~obliquetrees.co2._grow.fold_split_weights`) instead of
    through per-weight temporaries (about 30 MB per tree at 100k rows);
    ``weights`` may also be :func:`grow_tree`'s CSR form (the same tree).
    Raises the same ``ValueError`` when a weight in raw units overflows.
    """
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    indptr, index, weight, bias, compact, finite = fold_split_weights(
        left, weights, bias, mean, scale
    )
    if not finite:
        raise ValueError(
            "a split's weights in raw input units overflow float64 (a feature's "
            f"scale is too small for its weight, scales down to {np.min(scale):.3g}); "
            "rescale X."
        )
    if compact:
        terms = {"missing_fill": mean}
    else:  # fold_standardization's zero terms plus the centring products
        terms = {"weight_missing": 0.0 + weight * mean[index]}
    return ObliqueTree(
        left,
        right,
        indptr,
        index,
        weight,
        bias,
        value,
        nns,
        n_features=mean.shape[0],
        depth=depth,
        **terms,
    )


def class_prior(y, n_classes, sample_weight, class_weight=None):
    """Weighted class distribution of the whole training set.

    Weights are ``sample_weight`` times ``class_weight`` (``"balanced_subsample"``
    counts as balanced over the whole set). Raises a ``ValueError`` when they
    sum to zero: no class has any weight to learn from.
    """
    w = sample_weight
    if isinstance(class_weight, str):
        w = w * balanced_class_weight(y, np.ones(y.shape[0]), n_classes)[y]
    elif class_weight is not None:
        w = w * class_weight[y]
    peak = w.max() if w.size else 0.0
    if not peak > 0:
        raise ValueError(
            "sample_weight times class_weight is zero for every training sample: "
            "the weights must not sum to zero."
        )
    prior = np.bincount(y, weights=w / peak, minlength=n_classes)  # w / peak: no overflow
    return prior / prior.sum()


def standardize_targets(y, sample_weight, params):
    """Regression targets centred and scaled for the kernels, and ``params`` to match.

    Each output is centred on its weighted mean; all share one scale ``s``,
    the root of the mean over outputs of their weighted variances (1 for
    targets constant up to rounding). One scale keeps the squared loss of
    the standardised targets proportional to that of ``y`` (outputs weigh as scikit-learn's
    ``criterion="squared_error"`` weighs them), so ``min_impurity_decrease``,
    given in the units of ``y``, is divided by ``s^2``. The CCCP's step size
    and ``nu`` then mean the same on any target scale.

    Returns
    -------
    ys : ndarray of float64, shape (n_samples, n_outputs), C-contiguous
    target : tuple of (ndarray of shape (n_outputs,), float)
        The mean and the scale ``s``: ``y = mean + s * ys``.
    params : CO2Params
    """
    y = y.reshape(y.shape[0], -1)
    # pre-scaled moments: no overflow or underflow at any magnitude of y
    mean, std = feature_moments(y, sample_weight)
    check_centred_range(y, mean, name="y")  # y - mean beyond float64 is a ValueError
    peak = float(np.max(std))
    scale = peak * float(np.sqrt(np.mean((std / peak) ** 2))) if peak > 0 else 0.0
    if not scale > 1e-12 * float(np.max(np.abs(mean))):
        scale = 1.0  # constant targets (up to rounding of the mean): nothing to scale
    ys = np.ascontiguousarray((y - mean) / scale)
    params = dataclasses.replace(
        params, min_impurity_decrease=params.min_impurity_decrease / scale / scale
    )
    return ys, (mean, scale), params


def _fill_empty_nodes(left, right, value, nns, prior):
    """Give nodes without training weight a class distribution, in place.

    A node whose rows all have zero weight (a bootstrap that drew only rows
    of zero ``sample_weight`` or ``class_weight``) has no class histogram. It
    takes its parent's distribution, the root the class prior of the whole
    training set (:func:`class_prior`), so every stored node holds a proper
    distribution. Nodes with positive weight are untouched.
    """
    empty = np.flatnonzero(nns == 0)
    if empty.size == 0:
        return
    parent = np.full(nns.shape[0], -1, dtype=np.int64)
    inner = np.flatnonzero(left >= 0)
    parent[left[inner]] = inner
    parent[right[inner]] = inner
    for node in empty:  # ids grow from parent to child: parents are filled first
        value[node] = prior if parent[node] < 0 else value[parent[node]]


def fit_co2(
    X,
    y,
    sample_weight,
    params,
    seeds,
    *,
    n_classes,
    class_weight=None,
    monotonic_cst=None,
    n_jobs=None,
    verbose=0,
    name="CO2",
):
    """Fit one CO2 tree per seed.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features), C-contiguous, or CSR matrix
        Dense: read in place, standardised by the kernels as they read it
        (another dtype or layout is copied once to float64 C order). A CSR
        must be canonical (float64 data, int64 sorted indices, no
        duplicates). It is never densified: the trees grow on its stored
        entries divided by the feature scale (:mod:`obliquetrees.co2._sparse_kernels`),
        which equals the dense fit up to rounding.
    y : ndarray of int64, shape (n_samples,), or of float64, shape (n_samples, n_outputs)
        Class indices in ``[0, n_classes)``, or regression targets
        (:func:`standardize_targets`; the leaves fit them by squared loss).
    sample_weight : ndarray of float64, shape (n_samples,)
        The validated weights: ones when the user gave none
        (:func:`~obliquetrees.utils.validation.validate_fit_data`).
    params : CO2Params
    seeds : sequence of int
        One seed per tree (bootstrap and growth are drawn from it).
    n_classes : int or None
        None for regression targets.
    class_weight : None, ndarray of shape (n_classes,) or "balanced_subsample"
    monotonic_cst : None or ndarray of int8, shape (n_features,)
        Monotonic constraint of each column of ``X`` (None: none); with
        constraints, ``y`` must be binary classes (the constrained value is
        the fraction of class 1) or one regression output.
    n_jobs, verbose, name
        How the trees are grown in parallel and reported: see
        :func:`~obliquetrees._training._parallel.parallel_map`.

    Returns
    -------
    trees : list of ObliqueTree
        Weights act on the raw ``X``. Nodes without training weight hold
        their parent's class distribution (the root: the weighted class
        distribution of the whole training set; for targets, their weighted
        mean). Regression leaves hold mean targets in the units of ``y``.
    info : dict
        ``stats``: ndarray of int64, shape (n_trees, 3); per tree, CCCP
        outer iterations, oblique splits, axis-aligned fallbacks.
    """
    data = CO2TrainingData(
        X,
        y,
        sample_weight,
        params,
        n_classes=n_classes,
        class_weight=class_weight,
        monotonic_cst=monotonic_cst,
    )
    progress = Progress(name, len(seeds), unit="tree", verbose=verbose)
    trees, stats = data.grow(seeds, n_jobs=n_jobs, progress=progress)
    return trees, {"stats": stats}


class CO2TrainingData:
    """The data of a CO2 fit, prepared once for every tree grown from it.

    :func:`fit_co2` in two steps, for a fit that grows its trees in more than
    one parallel call (``oblique_penalty="auto"``: pilot trees at each margin,
    then the rest at the chosen one). The features' standardisation, the
    standardised targets, the class prior and the column order are computed
    once; :meth:`shipped` sends the large arrays to a dask cluster once for
    all the calls. Parameters: :func:`fit_co2`'s.
    """

    def __init__(
        self, X, y, sample_weight, params, *, n_classes, class_weight=None, monotonic_cst=None
    ):
        self.target = None
        if n_classes is None:
            y, self.target, params = standardize_targets(y, sample_weight, params)
            # the weighted mean of the standardised targets
            self.prior = np.zeros(y.shape[1])
            n_classes = y.shape[1]
        else:
            self.prior = class_prior(y, n_classes, sample_weight, class_weight)
            y = np.ascontiguousarray(y, dtype=np.int64)
        self.y, self.sample_weight, self.params = y, sample_weight, params
        self.n_classes, self.class_weight, self.monotonic_cst = (
            n_classes,
            class_weight,
            monotonic_cst,
        )
        self.mean, self.scale = standardization(X, sample_weight)
        if sp.issparse(X):
            # the sparse kernels centre each node on its own mean: the global mean cancels
            self.X = scaled_csr(X, self.scale)
            self.mean = np.zeros_like(self.mean)
        else:
            # no standardised copy (1 X of memory): the kernels compute (x - mean) / scale,
            # the bits of that copy, as they read the rows (co2._node.dense_source)
            self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.order = column_order(X if sp.issparse(X) else self.X)
        self.node_counts = []  # shared by the threads: sizes the growth tables

    def shipped(self):
        """A context in which the training arrays reach a dask cluster once for every call.

        See :func:`~obliquetrees._training._parallel.shared_arguments`. A
        CSR triple is not among them: it travels inside its tuple, pickled
        with each task, as in a fit of one call.
        """
        arrays = (self.X, self.y, self.sample_weight, self.order)
        return shared_arguments(*(a for a in arrays if isinstance(a, np.ndarray)))

    def grow(self, seeds, *, margins=None, n_jobs=None, progress=None):
        """One tree per seed, in parallel.

        Parameters
        ----------
        seeds : sequence of int
        margins : sequence of (float or None), or None
            The ``oblique_penalty`` of each seed's tree (None:
            ``params.oblique_penalty`` for every tree).
        n_jobs : int or None
        progress : Progress or None
            Reports each finished tree (:func:`~obliquetrees._training._parallel.parallel_map`).

        Returns
        -------
        trees : list of ObliqueTree
        stats : ndarray of int64, shape (n_trees, 3)
            As :func:`fit_co2`'s ``info["stats"]``.
        """
        if margins is None:
            margins = [self.params.oblique_penalty] * len(seeds)
        params = {m: dataclasses.replace(self.params, oblique_penalty=m) for m in margins}
        results = parallel_map(
            _fit_one_tree,
            [
                (
                    self.X,
                    self.y,
                    self.sample_weight,
                    self.class_weight,
                    self.n_classes,
                    int(s),
                    params[m],
                    self.prior,
                    self.mean,
                    self.scale,
                    self.target,
                    self.node_counts,
                    self.monotonic_cst,
                    self.order,
                )
                for s, m in zip(seeds, margins, strict=True)
            ],
            n_jobs=n_jobs,
            progress=progress,
        )
        trees = [r[0] for r in results]
        stats = np.array([r[1] for r in results], dtype=np.int64).reshape(-1, 3)
        return trees, stats
