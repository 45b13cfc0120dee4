"""E2EDT training: greedy growth of probabilistic stumps, then joint finetune.

Hehn, Kooij & Hamprecht, "End-to-End Learning of Decision Trees and Forests",
IJCV 2019 (sect. 2). Pure functions over arrays that return
:class:`~obliquetrees._core.tree.ObliqueTree` objects; :func:`fit_e2edt` is
the entry point (one tree per seed).

Training model: split ``i`` sends ``x`` right with probability
``sigma(gamma_i * (w_i . x + b_i))``; leaves hold class distributions (or, for
regression, Gaussians with a shared variance: :mod:`obliquetrees._training.leaf_models`); EM with
closed-form leaves (eq. 13) and Adam on the split objective (eq. 14), with the
steepness ``gamma_i`` raised after every epoch (annealing).

1. Greedy (sect. 2.5): one stump per leaf (:mod:`obliquetrees.e2edt._greedy`).
2. Finetune (sect. 2.3): all splits and leaves of the tree jointly, with
   probabilistic routing of all data, for ``finetune_epochs`` epochs; every
   split keeps its own steepness and keeps gaining ``steepness_increase`` per
   epoch. Per minibatch the activations and the weight gradient are GEMMs, one
   per band of feature columns (:class:`TrainingTree`). Two extensions bound
   its cost on large data: pruned routing (``prune_threshold``) and a row
   budget per epoch (``max_finetune_samples``), see :func:`finetune`. Above
   that budget the greedy phase also grows on the budget's rows
   (:func:`growth_rows`).

Training runs on the standardised data (or the raw data, with mean 0 and
scale 1, when ``standardize=False``) held in float32; the stored trees have
the standardisation folded into their weights. Soft evaluation of a stored
tree with its final steepness is :func:`obliquetrees._core.soft.soft_predict`.
"""

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from scipy import sparse
from scipy.special import expit

from obliquetrees._core import traversal
from obliquetrees._core._jit import numba_threads
from obliquetrees._core._random import generator
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.graft import graft_soft_predict, graft_sum, split_graft
from obliquetrees._core.tree import ObliqueTree, fold_standardization, standardization
from obliquetrees._training._optim import (
    ADAM_BETA1,
    ADAM_BETA2,
    ADAM_EPS,
    adam_update,
    adam_update_2d,
)
from obliquetrees._training._parallel import parallel_map
from obliquetrees._training._progress import Progress
from obliquetrees._training._weights import balanced_class_weight
from obliquetrees._training.leaf_models import as_leaf_model, leaf_model
from obliquetrees._training.monotonic import (
    constraint_signs,
    leaf_bounds,
    least_squares_leaves,
    mixed_free_inputs,
    normal_equations,
    order_leaves,
    project_weights,
)
from obliquetrees.e2edt import _kernels as K
from obliquetrees.e2edt import _pruned_kernels as PK
from obliquetrees.e2edt import _sparse as S
from obliquetrees.e2edt._greedy import (  # noqa: F401  (grow_greedy & co: public here)
    draw_features,
    grid_adjacency,
    grow_greedy,
    induced_adjacency,
    init_split,
)

#: Rows per block of the E-step pass of the first finetune epoch.
ESTEP_BLOCK = 2048
#: Cells (rows x nodes) of the path probabilities held at once by :func:`_soft_gram`.
SOFT_GRAM_CELLS = 1 << 22
#: Second entropy word of the bootstrap's generator (the tree's growth uses the seed alone).
BOOTSTRAP_STREAM = 1
#: Its third: the greedy phase's rows above the row budget (:func:`growth_rows`).
GROWTH_STREAM = 2
#: Its fourth: the seeds of a constrained tree's extra fits (:func:`_with_free_tree`,
#: :func:`_logit_sum`).
FREE_TREE_STREAM = 3
#: Its fifth: the seeds of a constrained tree's restarts (:func:`_least_loss_fit`).
RESTART_STREAM = 4
#: Fits of a constrained tree, each from its own seed, of which the one of least
#: training loss is kept (:func:`_least_loss_fit`), by task; chosen on validation
#: parts (``benchmarks/results/monotonic_defaults_e2edt-restarts*.md``).
CONSTRAINED_RESTARTS = {"regression": 3, "classification": 5}
#: Largest depth of a constrained regressor's tree of the free inputs
#: (:func:`_with_free_tree`; None: no free tree), chosen on validation parts
#: (``benchmarks/results/monotonic_defaults_e2edt-free-depth.md``).
FREE_TREE_DEPTH = 6
#: Backfitting rounds of the constrained tree and the free tree (the study's two).
BACKFIT_ROUNDS = 2
#: Rounds of a constrained binary classifier's backfitted Newton steps of its
#: constrained tree and its tree of the free inputs (:func:`_logit_sum`; 0: no free
#: tree, the single constrained classification tree), chosen on validation parts
#: (``benchmarks/results/monotonic_defaults_e2edt-logit-rounds.md``).
LOGIT_ROUNDS = 1
#: A constrained binary classifier's Newton step (:func:`_logit_sum`): the least
#: weight ``p (1 - p)`` of a row and the largest working response, in logits.
MIN_NEWTON_WEIGHT = 1e-3
MAX_LOGIT = 8.0
#: How far beyond the fitted targets' range a constrained regressor's soft leaf
#: refit may move a leaf, in widths of that range each side
#: (:func:`~obliquetrees._training.monotonic.leaf_bounds`), chosen on validation
#: parts (``benchmarks/results/monotonic_defaults_e2edt-leaf-margin.md``).
LEAF_RANGE_MARGIN = 0.0


@dataclass(frozen=True)
class E2EDTParams:
    """Resolved hyper-parameters of E2EDT training.

    Names and meanings are those of :class:`obliquetrees.E2EDTClassifier`,
    resolved: ``finetune_epochs`` is an int, ``max_features`` the number of
    features of each split's random subset (None: all features),
    ``image_shape`` a pair of ints or None. ``bootstrap``: every tree trains
    on a bootstrap sample (:func:`tree_weights`); ``balanced_subsample``:
    its class weights are then balanced over that sample.
    ``finetune_steepness_increase`` and ``finetune_learning_rate``: the
    finetune's own (``finetune_epochs="auto"`` above the row budget); None
    means ``steepness_increase`` and ``learning_rate``, as in greedy growth.
    ``soft_routing``: the probabilistic outputs route softly (``routing``
    ``"soft"``, or a classifier's ``"hybrid"``, whose ``predict_proba`` is
    soft); a regressor's constrained leaves are then fitted to the soft
    prediction (:func:`to_oblique_tree`), and a constrained tree's free tree
    to the soft residual (:func:`_with_free_tree`, :func:`_logit_sum`). No
    field has a default: the estimators build it from their parameters
    (``_resolve_params``), so there is one set of defaults, theirs.
    """

    max_depth: int
    max_leaf_nodes: int | None
    min_samples_split: int
    max_epochs: int
    finetune_epochs: int
    initial_steepness: float
    steepness_increase: float
    learning_rate: float
    batch_size: int
    max_attempts: int
    max_features: int | None
    image_shape: tuple | None
    patch_size: int | None
    spatial_reg: float
    standardize: bool
    bootstrap: bool
    balanced_subsample: bool
    prune_threshold: float
    max_finetune_samples: int | None
    finetune_steepness_increase: float | None
    finetune_learning_rate: float | None
    soft_routing: bool


# ------------------------------------------------------------------ driver
def fit_e2edt(
    X,
    y,
    sample_weight,
    params,
    seeds,
    *,
    n_classes,
    n_jobs=None,
    verbose=0,
    name="E2EDT",
    monotonic_cst=None,
):
    """Fit one E2EDT tree per seed (joblib over trees).

    Every tree trains on all the data (as in the paper) unless
    ``params.bootstrap``; trees differ by their seeds (initial splits,
    feature subsets or patches, minibatch order, bootstrap).

    Parameters
    ----------
    X : ndarray or canonical CSR matrix of shape (n_samples, n_features)
        Raw training inputs, finite (with ``standardize=False``, small enough
        for float32 margins: the estimator checks). A CSR matrix (float64
        data, int64 indices, sorted, no duplicates) is never densified: the
        standardisation is applied algebraically (:mod:`obliquetrees.e2edt._sparse`) and
        the products run in float64 on its entries.
    y : ndarray of int64, shape (n_samples,), or of float64, shape (n_samples, n_outputs)
        Class indices in ``[0, n_classes)``, or regression targets (raw
        units: standardised here with the weights ``sample_weight``, and the
        stored leaf values are folded back).
    sample_weight : ndarray of float64, shape (n_samples,)
        Ones when the user gave none. Also the weights of the standardisation
        statistics, shared by all trees (a bootstrap multiplies it per tree).
    params : E2EDTParams
    seeds : sequence of int
        One seed per tree.
    n_classes : int or None
        None for regression targets (Gaussian leaves).
    n_jobs, verbose, name
        How the trees are trained in parallel and reported: see
        :func:`~obliquetrees._training._parallel.parallel_map`.
    monotonic_cst : ndarray of int8 or None, default=None
        The checked constraints of the first ``len(monotonic_cst)`` inputs
        (the others, missing-value indicators, are free), enforced by
        projection (:class:`TrainingTree`); None: none.

    Returns
    -------
    trees : list of ObliqueTree
        Weights in raw input units (see :func:`to_oblique_tree`).
    info : dict
        ``steepness``: list of ndarray of shape (n_nodes,), the final
        ``gamma`` of every split of each tree (0 at leaves), for soft
        evaluation.
    """
    n_samples, n_features = X.shape
    if params.standardize:  # (weighted) training statistics, as the paper does
        mean, scale = standardization(X, sample_weight)
    else:  # unscaled, but constant features still get no weight (infinite scale)
        mean = np.zeros(n_features)
        scale = np.where(np.isinf(standardization(X, sample_weight)[1]), np.inf, 1.0)
    if sparse.issparse(X):
        Z = S.StandardizedCSR.from_scale(X, mean, scale)
    else:
        Z = _standardized_float32(X, mean, scale)
    leaves = leaf_model(y, n_classes, sample_weight)
    y = leaves.training_targets(y)
    sign = constraint_signs(monotonic_cst, n_features)
    # epoch lines: at verbose=1 for a single tree, at verbose=2 for a forest's trees
    per_epoch = verbose >= (1 if len(seeds) == 1 else 2)
    labels = [
        name if len(seeds) == 1 else f"{name} tree {k + 1}/{len(seeds)}" for k in range(len(seeds))
    ]
    args = [
        (
            X,
            Z,
            y,
            sample_weight,
            leaves,
            mean,
            scale,
            params,
            int(seed),
            label if per_epoch else None,
            sign,
        )
        for seed, label in zip(seeds, labels, strict=True)
    ]
    results = parallel_map(_fit_one_tree, args, n_jobs=n_jobs, verbose=verbose, name=name)
    return [tree for tree, _ in results], {"steepness": [steep for _, steep in results]}


def _standardized_float32(X, mean, scale, block=4096):
    """``((X - mean) / scale).astype(float32)``, the same bits, a block of rows at a time.

    The float64 temporaries are one block's, not two copies of ``X`` (whose
    fresh pages cost more than the arithmetic: 0.1 s at 100k x 40, measured).
    """
    Z = np.empty(X.shape, dtype=np.float32)
    buf = np.empty((min(block, X.shape[0]), X.shape[1]))
    for s in range(0, X.shape[0], block):
        e = min(s + block, X.shape[0])
        np.subtract(X[s:e], mean, out=buf[: e - s])
        np.divide(buf[: e - s], scale, out=buf[: e - s])
        Z[s:e] = buf[: e - s]
    return Z


def _fit_one_tree(
    X, Z, y, sample_weight, leaves, mean, scale, params, seed, progress_label=None, sign=None
):
    """Grow and finetune one tree (module level: picklable for joblib/dask).

    Parameters
    ----------
    X : ndarray or CSR matrix (n, p)
        Raw training inputs (for the hard-routed node statistics).
    Z : ndarray (n, p) or StandardizedCSR
        Standardised inputs ``(X - mean) / scale``, C-contiguous float32 or
        float64 (the BLAS products run in its dtype), or their algebraic
        stand-in for a CSR ``X``.
    y : int64 (n,) or float64 (n, n_outputs)
        Class indices or standardised targets, as ``leaves`` takes them.
    sample_weight : float64 (n,)
    leaves : Categorical, Gaussian or int
        The leaf model (:mod:`obliquetrees._training.leaf_models`); an int is a number of classes.
    mean, scale : ndarray (p,)
    params : E2EDTParams
    seed : int
    progress_label : str or None
        When given, a line after greedy growth and after every finetune
        epoch (:class:`Progress`), prefixed with it.
    sign : ndarray (p,) or None
        Monotonic constraints of the inputs
        (:func:`~obliquetrees._training.monotonic.constraint_signs`), or None.

    Returns
    -------
    tree : ObliqueTree
        A tree whose bootstrap drew only rows of zero weight is a single
        leaf holding the weighted class distribution (or target mean) of
        all rows.
    steepness : ndarray (n_nodes,)
    """
    leaves = as_leaf_model(leaves)
    row_weight = tree_weights(sample_weight, y, leaves.n_classes, params, seed)
    if not row_weight.any():
        prior = leaves.prior_value(y, sample_weight)
        leaf = [-1], [-1], np.zeros((1, X.shape[1])), [0.0], prior[None, :], [0.0]
        return ObliqueTree.from_dense(*leaf), np.zeros(1)
    fit = partial(
        _fit_weighted_rows, X, Z, y, sample_weight, row_weight, leaves, mean, scale, params
    )
    if sign is None:
        return fit(seed, progress_label, None)
    return _least_loss_fit(fit, seed, progress_label, sign, X, y, row_weight, leaves, params)


def _fit_weighted_rows(
    X, Z, y, sample_weight, row_weight, leaves, mean, scale, params, seed, progress_label, sign
):  # fmt: skip
    """One tree on the rows weighted ``row_weight`` (:func:`_fit_one_tree`'s arguments):
    ``(tree, steepness)``, with a tree of the free inputs when constrained
    (:func:`_with_free_tree`, :func:`_logit_sum`)."""
    free = free_columns(sign, leaves)
    if free is not None and leaves.n_classes is not None:
        return _logit_sum(
            X, Z, y, row_weight, leaves, mean, scale, params, seed, progress_label, sign, free
        )
    fitted = _grow_and_finetune(
        X, Z, y, row_weight, leaves, mean, scale, params, seed, progress_label, sign
    )
    if free is None:
        return fitted
    return _with_free_tree(
        fitted, X, Z, y, sample_weight, row_weight, leaves, mean, scale, params, seed,
        progress_label, sign, free,
    )  # fmt: skip


def _least_loss_fit(fit, seed, progress_label, sign, X, y, row_weight, leaves, params):
    """The constrained fit ``fit(seed, progress_label, sign)`` of least training loss
    among :data:`CONSTRAINED_RESTARTS` seeds.

    Ours (issue 41), as k-means' ``n_init``: the projected steps of a
    constrained fit end in local optima that depend on the seed, and the
    training loss can tell them apart; whether it pays was chosen per task
    on validation parts (``benchmarks/results/monotonic_defaults_e2edt-restarts*.md``).
    The first fit has ``seed`` (one restart is the single fit), the others
    seeds of stream :data:`RESTART_STREAM`; each is scored on its own rows
    ``row_weight`` as the estimator's probabilistic output gives it
    (:func:`_training_loss`); the first of least loss is kept.
    """
    task = "regression" if leaves.n_classes is None else "classification"
    restarts = CONSTRAINED_RESTARTS[task]
    best = best_loss = None
    for r in range(restarts):
        label = progress_label if r == 0 else _extra_label(progress_label, f"restart {r + 1}")
        fitted = fit(seed if r == 0 else _restart_seed(seed, r), label, sign)
        if restarts == 1:
            return fitted
        loss = _training_loss(*fitted, X, y, row_weight, leaves, params)
        if best is None or loss < best_loss:
            best, best_loss = fitted, loss
    return best


def _training_loss(tree, steepness, X, y, row_weight, leaves, params):
    """The mean training loss, weighted by ``row_weight``, of a fitted tree's
    probabilistic output (soft unless ``routing="hard"``): a classifier's log-loss, a
    regressor's squared error summed over the outputs."""
    rule = "soft" if params.soft_routing else "hard"
    out = tree_output(tree, steepness, X, rule)
    if leaves.n_classes is not None:
        chosen = out[np.arange(y.shape[0]), y]
        per_row = -np.log(np.maximum(chosen, np.finfo(np.float64).tiny))
    else:
        per_row = np.square(out - (y * leaves.scale + leaves.mean)).sum(axis=1)
    return float(np.average(per_row, weights=row_weight))


def _grow_and_finetune(
    X, Z, y, row_weight, leaves, mean, scale, params, seed, progress_label, sign
):
    """Greedy growth, finetune and storing of one tree on the rows weighted ``row_weight``
    (:func:`_fit_one_tree`'s arguments): ``(tree, steepness)``."""
    rng = generator(seed)
    adjacency = grid_adjacency(params.image_shape) if params.image_shape else None
    verbose = progress_label is not None
    growth = Progress(progress_label, 1, unit="greedy growth", verbose=verbose)
    grow = growth_rows(Z.shape[0], params.max_finetune_samples, seed)
    if grow is None:
        greedy = grow_greedy(Z, y, row_weight, leaves, params, rng, adjacency, sign)
    else:  # above the row budget: the stumps see the budget's rows
        rows = (Z[grow], y[grow], row_weight[grow])
        greedy = grow_greedy(*rows, leaves, params, rng, adjacency, sign)
    band_width = params.image_shape[1] if params.patch_size is not None else None
    tt = TrainingTree(greedy, Z.shape[1], band_width, sign)
    growth.update(detail=f"{tt.n_splits} splits")
    epochs = Progress(
        progress_label, params.finetune_epochs, unit="finetune epoch", verbose=verbose
    )
    finetune(tt, Z, y, row_weight, params, rng, adjacency, progress=epochs)
    return to_oblique_tree(tt, X, y, row_weight, leaves, mean, scale, params.soft_routing)


def growth_rows(n_samples, budget, seed):
    """Rows the greedy phase of the tree grown from ``seed`` sees: None (all), or a subset.

    Above the row budget (``n_samples > budget``, an extension for scale):
    ``budget`` rows drawn uniformly without replacement, in increasing
    order, from their own stream of ``seed`` (:data:`GROWTH_STREAM`).
    """
    if budget is None or n_samples <= budget:
        return None
    rows = generator(seed, GROWTH_STREAM).choice(n_samples, budget, replace=False)
    return np.sort(rows)


# --------------------------------------------------------------- bootstrap
def bootstrap_counts(n_samples, seed):
    """How often the bootstrap of the tree grown from ``seed`` draws each row (0: out of bag).

    Its own stream of ``seed``: the growth stream, so ``bootstrap=False`` trees, keep their bits.
    """
    draws = generator(seed, BOOTSTRAP_STREAM).integers(0, n_samples, n_samples)
    return np.bincount(draws, minlength=n_samples).astype(np.float64)


def tree_weights(sample_weight, y, n_classes, params, seed):
    """Row weights of the tree grown from ``seed``: ``sample_weight``, times its bootstrap if any.

    The bootstrap is integer weights (``X`` is never copied per tree); with
    ``balanced_subsample`` also times the class weights ``n / (n_classes *
    count_c)`` of the bootstrap (scikit-learn's ``"balanced_subsample"``).
    """
    if not params.bootstrap:
        return sample_weight
    counts = bootstrap_counts(y.shape[0], seed)
    weight = sample_weight * counts
    if params.balanced_subsample:
        weight *= balanced_class_weight(y, counts, n_classes)[y]
    return weight


# ---------------------------------------------------------------- finetune
class TrainingTree:
    """A tree during finetune: split parameters + kernel layout.

    The weights are stored dense, ``W`` of shape (n_splits, n_features), but
    splits restricted to feature subsets (forests) are ordered into *bands*:
    consecutive rows ``r0:r1`` whose features all lie in the column range
    ``c0:c1``. The activation and weight-gradient products run band by band
    on ``W[r0:r1, c0:c1]``, so columns a band never uses cost nothing (a
    10x10 patch of a 16x16 image spans at most 10 image rows: 160 of 256
    columns). Entries outside a split's features are exactly zero and stay
    so (their gradient is zero, and so is their Adam update).

    Parameters
    ----------
    greedy : GreedyTree
        The tree of the greedy phase, parents before children.
    n_features : int
    band_width : int or None
        Splits whose first feature falls in the same block of ``band_width``
        columns (an image row, for patches) form a band; None: one band.
    sign : ndarray (n_features,) or None
        Monotonic constraints of the inputs (None: none). They are kept by
        projection (:mod:`obliquetrees._training.monotonic`): the weights
        after every Adam step (:meth:`project_weights`), the leaves after
        every M-step and when stored (:meth:`order_leaves`), with the greedy
        phase's ``ordered`` flag of every split.
    """

    def __init__(self, greedy, n_features, band_width=None, sign=None):
        self.left = np.array(greedy.children_left, dtype=np.int64)
        self.right = np.array(greedy.children_right, dtype=np.int64)
        n_nodes = self.left.shape[0]
        internal = self.left >= 0
        split_nodes = np.flatnonzero(internal)
        feats = [greedy.features[i] for i in split_nodes]
        any_subset = any(f is not None for f in feats)
        lo = np.array([0 if f is None else f.min() for f in feats], dtype=np.int64)
        hi = np.array([n_features if f is None else f.max() + 1 for f in feats], dtype=np.int64)
        key = lo // band_width if band_width else np.zeros_like(lo)
        order = np.argsort(key, kind="stable")
        self.split_nodes = split_nodes[order]
        self.leaf_nodes = np.flatnonzero(~internal)
        self.split_col = np.full(n_nodes, -1, dtype=np.int64)
        self.leaf_col = np.full(n_nodes, -1, dtype=np.int64)
        self.split_col[self.split_nodes] = np.arange(self.split_nodes.shape[0])
        self.leaf_col[self.leaf_nodes] = np.arange(self.leaf_nodes.shape[0])
        key, lo, hi = key[order], lo[order], hi[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else []
        ends = list(starts[1:]) + [key.size] if key.size else []
        #: (r0, r1, c0, c1) of every band
        self.bands = [
            (int(r0), int(r1), int(lo[r0:r1].min()), int(hi[r0:r1].max()))
            for r0, r1 in zip(starts, ends, strict=True)
        ]
        self.n_splits = n_splits = self.split_nodes.shape[0]
        self.n_leaves = self.leaf_nodes.shape[0]
        self.W = np.zeros((n_splits, n_features))
        self.mask = np.zeros((n_splits, n_features), dtype=np.uint8) if any_subset else None
        for c, i in enumerate(self.split_nodes):
            features = greedy.features[i]
            if features is None:
                self.W[c] = greedy.weights[i]
                if self.mask is not None:
                    self.mask[c] = 1
            else:
                self.W[c, features] = greedy.weights[i]
                self.mask[c, features] = 1
        self.b = greedy.bias[self.split_nodes]
        self.gamma = greedy.gamma[self.split_nodes]
        self.pi = greedy.value[self.leaf_nodes]  # a copy (fancy indexing)
        self.sign = sign
        #: per node: whether the split is ordered (monotonic constraints)
        self.ordered = np.zeros(n_nodes, dtype=bool)
        self.ordered[self.split_nodes] = [greedy.ordered[i] for i in self.split_nodes]

    def project_weights(self):
        """Project the split weights onto the monotonic constraints (none: nothing to do)."""
        if self.sign is not None:
            project_weights(self.W, self.sign, self.ordered[self.split_nodes])

    def order_leaves(self, values, weight, classes):
        """Project leaf values onto the ordering of the monotonic constraints, in place.

        ``values`` (n_leaves, width): a binary classifier's class distributions
        (``classes``: column 1 projected, column 0 its complement) or Gaussian
        rows / raw leaf values (column 0: the mean); ``weight`` (n_leaves,) weighs the
        projection (:func:`~obliquetrees._training.monotonic.order_leaves`:
        weighted isotonic regression when every split is ordered). Nothing
        to do without constraints.
        """
        if self.sign is None or self.n_splits == 0:
            return
        column = 1 if classes else 0
        value = np.zeros(self.left.shape[0])
        value[self.leaf_nodes] = values[:, column]
        mass = np.zeros(self.left.shape[0])
        mass[self.leaf_nodes] = weight
        order_leaves(self.left, self.right, self.ordered, value, mass)
        values[:, column] = value[self.leaf_nodes]
        if classes:
            values[:, 0] = 1.0 - values[:, 1]

    def em_args(self, A):
        """The leading arguments of the EM kernels for activations ``A``."""
        E = K.steep_activations(A, self.gamma)
        return A, E, self.gamma, self.left, self.right, self.split_col, self.leaf_col, self.pi

    def activations(self, X):
        """Split-major activations ``W @ X.T + b``, shape (n_splits, n).

        One GEMM per band, in the dtype of ``X`` (float32 data: float32
        activations); for a StandardizedCSR, one CSR x dense product in float64.
        """
        if isinstance(X, S.StandardizedCSR):
            return X.activations(self.W, self.b)
        Wx = self.W.astype(X.dtype, copy=False)
        XT = np.ascontiguousarray(X.T)  # contiguous bands: ~20 % faster GEMMs (measured)
        A = np.empty((self.n_splits, X.shape[0]), dtype=X.dtype)
        for r0, r1, c0, c1 in self.bands:
            np.matmul(Wx[r0:r1, c0:c1], XT[c0:c1], out=A[r0:r1])
        A += self.b.astype(X.dtype)[:, None]
        return A

    def minus_weight_gradient(self, G, X, out):
        """``out = -(G @ X)`` inside the bands (GEMM per band); rest untouched.

        For a StandardizedCSR ``X``: one sparse product over all columns, masked.
        """
        if isinstance(X, S.StandardizedCSR):
            return X.minus_weight_gradient(G, self.mask, out)
        for r0, r1, c0, c1 in self.bands:
            np.negative(G[r0:r1] @ X[:, c0:c1], out=out[r0:r1, c0:c1])
            if self.mask is not None:
                out[r0:r1, c0:c1] *= self.mask[r0:r1, c0:c1]


def finetune(tt, Z, y, row_weight, params, rng, adjacency, progress=None):
    """Joint EM of all splits and leaves of ``tt`` (in place).

    Epoch: for each shuffled minibatch, E-step (eq. 10) of its samples with
    the current split parameters and the leaves of the previous epoch, then
    one Adam step on eq. 14 (minus eq. 15) with those responsibilities; at the
    end of the epoch, closed-form leaves (eq. 13) from the statistics of all
    minibatches, then every split's steepness grows by ``steepness_increase``
    (``finetune_steepness_increase`` and ``finetune_learning_rate``, when set,
    replace that and the Adam step).
    The first epoch updates only the leaves, as in the official code. (The
    official code computes all responsibilities once at the start of the
    epoch; computing them per minibatch at the parameters the step starts
    from saves one activation GEMM per minibatch, stores no
    ``n x n_leaves`` matrix, and is what the paper's "each iteration
    evaluates eqs. 10 and 13 and at least one update of eq. 14" allows.)

    With ``params.prune_threshold > 0`` and a dense ``Z`` the E-step and the
    gradient use pruned routing (:func:`PK.pruned_em_batch`: each sample visits
    only the nodes of path probability >= the threshold, and its hard path);
    otherwise every sample passes through every node (GEMMs + :func:`K.em_batch`).
    With ``params.max_finetune_samples`` below ``N`` each epoch runs over
    that many rows drawn anew without replacement, in random order, each
    minibatch's rows sorted (the first epoch, leaves only, over them all
    sorted), and a last leaves-only pass over every row sets the leaves (the
    estimators' Notes).
    ``progress`` (a :class:`Progress`, optional) is told of every epoch.
    """
    p = params
    N = Z.shape[0]
    if tt.n_splits == 0 or p.finetune_epochs <= 0:
        return tt
    lam = p.spatial_reg if adjacency is not None else 0.0
    increase = p.steepness_increase
    if p.finetune_steepness_increase is not None:
        increase = p.finetune_steepness_increase
    lr = p.learning_rate if p.finetune_learning_rate is None else p.finetune_learning_rate
    mask = tt.mask
    if lam > 0 and mask is None:
        mask = np.ones(tt.W.shape, dtype=np.uint8)
    mW = np.zeros_like(tt.W)
    vW = np.zeros_like(tt.W)
    mb = np.zeros_like(tt.b)
    vb = np.zeros_like(tt.b)
    gW = np.zeros_like(tt.W)  # zero outside the bands, always
    gb = np.empty_like(tt.b)
    step = 0
    pruned = p.prune_threshold > 0 and isinstance(Z, np.ndarray)
    if pruned:
        route = _pruned_routing(tt, p.prune_threshold)
    capped = p.max_finetune_samples is not None and N > p.max_finetune_samples

    def leaf_statistics(rows=None):
        return _leaf_statistics(tt, Z, y, row_weight, rows, route if pruned else None, gb)

    for epoch in range(p.finetune_epochs):
        if epoch == 0 and capped:  # leaves only, from the budget's rows at the initial splits
            counts = leaf_statistics(np.sort(rng.choice(N, p.max_finetune_samples, replace=False)))
        elif epoch == 0:  # leaves only, from every row at the initial splits
            counts = leaf_statistics()
        else:  # an E-step and an Adam step per minibatch
            counts = K.empty_statistics(tt.pi, y)
            if capped:  # the budget's rows in random order (O(budget), not O(N) draws)
                perm = rng.choice(N, p.max_finetune_samples, replace=False)
            else:
                perm = rng.permutation(N)
            for s in range(0, perm.shape[0], p.batch_size):
                rows = perm[s : s + p.batch_size]
                if capped:  # a minibatch is a set: its rows in memory order (fewer cache misses)
                    rows = np.sort(rows)
                swb = row_weight[rows]
                total = swb.sum()
                if total <= 0:
                    continue
                route_now = route() if pruned else None
                _em_minibatch(
                    tt, Z, y, row_weight, rows, swb, swb / total, route_now, counts, gW, gb
                )
                if lam > 0:
                    K.add_laplacian_grad(tt.W, mask, adjacency[0], adjacency[1], lam, gW)
                step += 1
                _adam_step(tt, gW, gb, mW, vW, mb, vb, step, lr)
                tt.project_weights()
        _update_leaves(tt, counts, y)
        tt.gamma += increase
        if progress is not None:
            progress.update()
    if capped and p.finetune_epochs > 1:  # the leaves from every row at the final splits
        _update_leaves(tt, leaf_statistics(), y)
    return tt


def _update_leaves(tt, counts, y):
    """The M-step of the leaves from their statistics ``counts``, then their ordering.

    Under monotonic constraints the new leaves are projected with the
    leaves' weights (:meth:`TrainingTree.order_leaves`): when every split is
    ordered this is the exact constrained M-step of Bernoulli leaves and of
    the means of Gaussian leaves (weighted isotonic regression); the shared
    variance stays the pooled one about the unconstrained means (ours).
    """
    K.update_leaves(counts, tt.pi, y)
    if tt.sign is not None:
        classes = y.ndim == 1
        tt.order_leaves(tt.pi, counts.sum(axis=1) if classes else counts[:, 0], classes)


def _leaf_statistics(tt, Z, y, row_weight, rows, route, gb):
    """The leaves' EM statistics of every row (or of ``rows``) at the current splits.

    ``route`` is :func:`_pruned_routing`'s callable for pruned routing (then
    ``gb`` is scratch its kernel writes), or None for the whole tree.
    """
    N = Z.shape[0]
    counts = K.empty_statistics(tt.pi, y)
    if route is not None:
        every = np.arange(N, dtype=np.int64) if rows is None else rows
        PK.pruned_em_batch(
            Z, every, *route(), y, row_weight, row_weight, counts, np.empty((0, 0)), gb
        )
        return counts
    no_h = np.empty((tt.n_leaves, 0))  # only the leaf statistics are wanted
    if rows is None:
        for s in range(0, N, ESTEP_BLOCK):
            e = min(s + ESTEP_BLOCK, N)
            A = tt.activations(Z[s:e])
            K.e_step(*tt.em_args(A), y[s:e], row_weight[s:e], no_h, counts)
    else:
        for s in range(0, rows.shape[0], ESTEP_BLOCK):
            block = rows[s : s + ESTEP_BLOCK]
            A = tt.activations(Z[block])
            K.e_step(*tt.em_args(A), y[block], row_weight[block], no_h, counts)
    return counts


def _em_minibatch(tt, Z, y, row_weight, rows, swb, coef, route, counts, gW, gb):
    """One minibatch's E-step (into ``counts``) and the loss gradient (into ``gW``, ``gb``).

    ``swb`` is ``row_weight[rows]`` (the caller has it), ``coef`` the rows' weights over
    their sum; ``route`` the pruned
    routing's arrays (``route()`` of :func:`_pruned_routing`) or None for the
    whole tree (GEMMs and :func:`K.em_batch`).
    """
    if route is not None:
        gW[:] = 0.0
        gb[:] = 0.0
        PK.pruned_em_batch(Z, rows, *route, y, row_weight, coef, counts, gW, gb)
        return
    Xb = Z[rows]
    A = tt.activations(Xb)
    G = np.empty_like(A)  # dtype of the data, for the GEMM below
    gb[:] = 0.0
    K.em_batch(*tt.em_args(A), y[rows], swb, coef, counts, G, gb)
    np.negative(gb, out=gb)
    tt.minus_weight_gradient(G, Xb, gW)


def _pruned_routing(tt, threshold):
    """Closure giving the tree arguments of :func:`PK.pruned_em_batch` (current parameters)."""
    if tt.mask is None:
        feat_ptr = np.empty(0, dtype=np.int64)
        feat_idx = np.empty(0, dtype=np.int64)
    else:
        nz = tt.mask != 0
        feat_ptr = np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int64)
        feat_idx = np.nonzero(nz)[1].astype(np.int64)

    def route():
        return (
            tt.W,
            tt.b,
            tt.gamma,
            tt.left,
            tt.right,
            tt.split_col,
            tt.leaf_col,
            feat_ptr,
            feat_idx,
            float(threshold),
            tt.pi,
        )

    return route


def _adam_step(tt, gW, gb, mW, vW, mb, vb, step, lr):
    """One Adam step of the split weights (band by band) and biases."""
    whole = [tt.W, gW, mW, vW]
    if tt.bands == [(0, tt.W.shape[0], 0, tt.W.shape[1])] and all(
        a.flags.c_contiguous for a in whole
    ):
        # one band over the whole matrix: the same step on flat views (same bits),
        # which compiles to a loop over contiguous memory (3x faster than 2-D blocks)
        flat = [a.reshape(-1) for a in whole]
        adam_update(*flat, step, lr, ADAM_BETA1, ADAM_BETA2, ADAM_EPS)
        adam_update(tt.b, gb, mb, vb, step, lr, ADAM_BETA1, ADAM_BETA2, ADAM_EPS)
        return
    for r0, r1, c0, c1 in tt.bands:
        adam_update_2d(
            tt.W[r0:r1, c0:c1],
            gW[r0:r1, c0:c1],
            mW[r0:r1, c0:c1],
            vW[r0:r1, c0:c1],
            step,
            lr,
            ADAM_BETA1,
            ADAM_BETA2,
            ADAM_EPS,
        )
    adam_update(tt.b, gb, mb, vb, step, lr, ADAM_BETA1, ADAM_BETA2, ADAM_EPS)


# ---------------------------------------------------------- storing
def to_oblique_tree(tt, X, y, row_weight, leaves, mean, scale, soft_routing=False):
    """Store a finetuned tree as an ObliqueTree acting on raw inputs.

    Leaf ``value`` from the leaf model (:meth:`leaf_values`: the trained
    class distributions ``pi``, or the mean target of the training rows
    that hard routing sends to the leaf); internal ``value`` and
    ``n_node_samples`` from hard routing of the training data ``X``. Returns
    the tree and the final steepness of every node (0 at leaves). A split
    weight or bias that training left non-finite raises ``ValueError``.

    Under monotonic constraints the leaves are ordered
    (:meth:`TrainingTree.order_leaves`), and a regressor's with
    ``soft_routing`` are then refitted to the soft prediction it makes
    (:func:`_soft_least_squares`).
    """
    leaves = as_leaf_model(leaves)
    if not (np.isfinite(tt.W).all() and np.isfinite(tt.b).all()):
        # said here: folding into raw units would report it as an overflow of X's scale
        raise ValueError(
            "E2EDT training diverged (non-finite split weights after finetuning); "
            "lower learning_rate."
        )
    n_nodes = tt.left.shape[0]
    weights = np.zeros((n_nodes, tt.W.shape[1]))
    weights[tt.split_nodes] = tt.W
    bias = np.zeros(n_nodes)
    bias[tt.split_nodes] = tt.b
    value = np.zeros((n_nodes, leaves.n_outputs))
    tree = ObliqueTree.from_dense(tt.left, tt.right, weights, bias, value, np.zeros(n_nodes))
    tree = fold_standardization(tree, mean, scale)
    weight, sums, parent = _hard_routed_statistics(tree, X, y, row_weight, leaves)
    leaf = tt.leaf_nodes
    values = leaves.leaf_values(tt.pi, weight[leaf], sums[leaf])
    # monotonic constraints: the stored leaves ordered, weighted by their hard-routed rows
    tt.order_leaves(values, weight[leaf], leaves.n_classes is not None)
    steepness = np.zeros(n_nodes)
    steepness[tt.split_nodes] = tt.gamma
    if soft_routing and tt.sign is not None and leaves.n_classes is None and tt.n_splits:
        values[:, 0] = _soft_least_squares(tt, tree, steepness, X, y, row_weight, leaves, values)
    tree.value[leaf] = values
    _set_internal_values(tree, tt.split_nodes, weight, sums, parent, leaves)
    return tree, steepness


def _hard_routed_statistics(tree, X, y, row_weight, leaves):
    """``(weight, sums, parent)`` per node of ``tree`` from hard routing of the training rows.

    ``weight`` and ``sums`` are :meth:`node_sums` of the leaf model (the rows
    reach their leaves through the shared traversal); ``weight`` also
    becomes ``tree.n_node_samples``. ``parent`` is every node's parent (-1:
    the root).
    """
    reached = traversal.apply(ObliqueForest.from_trees([tree], validate=False), X, 1)[:, 0]
    internal = np.flatnonzero(tree.children_left >= 0)
    parent = np.full(tree.node_count, -1, dtype=np.int64)
    parent[tree.children_left[internal]] = internal
    parent[tree.children_right[internal]] = internal
    weight, sums = leaves.node_sums(np.ascontiguousarray(reached), parent, y, row_weight)
    tree.n_node_samples = np.ascontiguousarray(weight)
    return weight, sums, parent


def _set_internal_values(tree, split_nodes, weight, sums, parent, leaves):
    """The value of every node of ``split_nodes``: the leaf model's value of its
    hard-routed rows; when none reaches it, its nearest reached ancestor's (the
    leaf model's fallback when that would be above the root)."""
    reached = weight[split_nodes] > 0
    nodes = split_nodes[reached]
    tree.value[nodes] = leaves.sums_value(sums[nodes], weight[nodes][:, None])
    # The rows reaching a node reach its parent, so an empty node's ancestors are
    # empty up to a reached one: climb one level per pass (depth passes, not nodes).
    empty = split_nodes[~reached]
    ancestor = parent[empty]
    climbing = (ancestor >= 0) & ~(weight[np.maximum(ancestor, 0)] > 0)
    while climbing.any():
        ancestor[climbing] = parent[ancestor[climbing]]
        climbing = (ancestor >= 0) & ~(weight[np.maximum(ancestor, 0)] > 0)
    found = ancestor >= 0
    tree.value[empty[found]] = tree.value[ancestor[found]]
    tree.value[empty[~found]] = leaves.fallback_value()


def _soft_least_squares(tt, tree, steepness, X, y, row_weight, leaves, values):
    """A constrained regressor's leaves refitted to its soft prediction (raw units).

    Ours. Under soft routing the prediction is ``P v``, ``P`` the rows' leaf
    path probabilities (:func:`~obliquetrees._core.soft.path_probabilities`,
    with the final steepness), while the ordered hard-routed means
    ``values`` fit the hard partition. Unconstrained, the paper's leaves are
    kept; constrained, the ordering already moves them, and moving them to
    the weighted least-squares fit of ``P v`` under the same ordering
    (:func:`~obliquetrees._training.monotonic.least_squares_leaves`, from the
    ordered means) lowers the training error of what is predicted: test
    R^2 x 100 +2.4 on california_housing and +1.1 on concrete in
    ``benchmarks/results/monotonic.md``'s setting (E2EDT at its defaults,
    3 seeds). Done on the standardised targets ``y`` (rows of ``P`` sum to 1,
    so the fit commutes with the affine map back), every leaf kept within
    :func:`~obliquetrees._training.monotonic.leaf_bounds` of the targets of
    the rows it fits (a leaf few rows reach could otherwise take any value).
    Returns the leaves' column 0 in raw units.
    """
    leaf = tt.leaf_nodes
    gram, rhs = _soft_gram(tree, steepness, X, y[:, 0], row_weight, leaf)
    start = (values[:, 0] - leaves.mean[0]) / leaves.scale[0]
    bounds = leaf_bounds(y[:, 0], row_weight, LEAF_RANGE_MARGIN)
    fitted = least_squares_leaves(tt.left, tt.right, tt.ordered, leaf, gram, rhs, start, bounds)
    return fitted * leaves.scale[0] + leaves.mean[0]


def _soft_gram(tree, steepness, X, target, row_weight, leaf):
    """:func:`~obliquetrees._training.monotonic.normal_equations` of the rows of positive
    weight, ``P`` their path probabilities of the nodes ``leaf``; the rows are
    taken in blocks of :data:`SOFT_GRAM_CELLS` cells, on one thread (trees may
    train in parallel)."""
    from obliquetrees._core.soft import path_probabilities

    rows = np.flatnonzero(row_weight > 0)
    block = max(1, SOFT_GRAM_CELLS // tree.node_count)

    def blocks():
        for start in range(0, rows.shape[0], block):
            part = rows[start : start + block]
            with numba_threads(1):
                yield part, path_probabilities(tree, X[part], steepness)[:, leaf]

    return normal_equations(blocks(), row_weight, target, leaf.shape[0])


# ---------------------------------------------- constrained trees: the free tree
def free_columns(sign, leaves):
    """The unconstrained inputs that a constrained tree's free tree sees, or None.

    None (no free tree) without constraints, when every input is
    constrained or none is (an all-zero ``monotonic_cst`` fits as
    unconstrained), for more than two classes (constraints refuse them) and
    when :data:`FREE_TREE_DEPTH` is None (for a classifier also when
    :data:`LOGIT_ROUNDS` is 0). A regressor's free tree is added
    to its output (:func:`_with_free_tree`), a binary classifier's to its
    logit (:func:`_logit_sum`).
    """
    if FREE_TREE_DEPTH is None or sign is None or leaves.n_classes not in (None, 2):
        return None
    if leaves.n_classes is not None and not LOGIT_ROUNDS:
        return None
    return mixed_free_inputs(sign)


def _with_free_tree(
    fitted, X, Z, y, sample_weight, row_weight, leaves, mean, scale, params, seed,
    progress_label, sign, free,
):  # fmt: skip
    """A constrained regressor's tree plus a tree of the free inputs, as one tree.

    Ours (issue 41; ``benchmarks/monotone_additive.py`` is the study). An
    ordered split keeps every leaf of one side below every leaf of the
    other, so the part of the target that varies with the free inputs alone
    can only be modelled inside each ordered subtree's interval
    (``benchmarks/results/monotonic.md``: E2EDT's constraint cost). The
    model is instead ``f(x) = T(x) + F(x_free)``: ``T`` the constrained
    tree, ``F`` an unconstrained tree of the free columns ``free`` (depth at
    most :data:`FREE_TREE_DEPTH`). ``F`` does not move along a constrained
    input, so ``f`` is monotone whenever ``T`` is. They are backfitted for
    :data:`BACKFIT_ROUNDS` rounds (``fitted``, the constrained tree of ``y``,
    is round one's ``T``; ``F`` fits ``y - T(x)``; ``T`` then refits
    ``y - F(x_free)``, and so on), each fit on its own standardised target,
    with its own seed of stream :data:`FREE_TREE_STREAM`, on the same rows
    ``row_weight``; each tree is evaluated as the estimator predicts
    (``params.soft_routing``). The sum is stored as the tree
    :func:`graft_sum` makes, exact under hard and soft routing.
    """
    raw = y * leaves.scale + leaves.mean  # the targets in raw units
    rule = "soft" if params.soft_routing else "hard"
    free_params = _free_tree_params(params, free)
    X_free = X[:, free]
    Z_free = _free_inputs(Z, free)
    tree, steepness = fitted
    free_tree = free_steepness = None
    for k in range(BACKFIT_ROUNDS):
        if free_tree is not None:  # T refitted to what F leaves
            target = raw - tree_output(free_tree, free_steepness, X_free, rule)
            tree_leaves = leaf_model(target, None, sample_weight)
            tree, steepness = _grow_and_finetune(
                X,
                Z,
                tree_leaves.training_targets(target),
                row_weight,
                tree_leaves,
                mean,
                scale,
                params,
                _round_seed(seed, 2 * k),
                _extra_label(progress_label, f"constrained tree, round {k + 1}"),
                sign,
            )
        residual = raw - tree_output(tree, steepness, X, rule)
        free_leaves = leaf_model(residual, None, sample_weight)
        free_tree, free_steepness = _grow_and_finetune(
            X_free,
            Z_free,
            free_leaves.training_targets(residual),
            row_weight,
            free_leaves,
            mean[free],
            scale[free],
            free_params,
            _round_seed(seed, 2 * k + 1),
            _extra_label(progress_label, f"free tree, round {k + 1}"),
            None,
        )
    grafted, grafted_steepness = graft_sum(
        tree, steepness, _on_columns(free_tree, free, X.shape[1]), free_steepness
    )
    return _with_training_statistics(grafted, X, y, row_weight, leaves), grafted_steepness


def _logit_sum(
    X, Z, y, row_weight, leaves, mean, scale, params, seed, progress_label, sign, free
):  # fmt: skip
    """A constrained binary classifier's tree: ``P(classes_[1]) = sigma(T(x) + F(x_free))``.

    Ours (issue 41), the classifier's form of :func:`_with_free_tree`: the
    two trees are additive in the logit, where a sum of a monotone ``T`` and
    an ``F`` of the free inputs stays monotone through the increasing
    ``sigma`` (a sum of probabilities would leave [0, 1]). They are
    backfitted by Newton steps of the logistic loss (IRLS): each round
    refits ``T`` (all inputs, under the constraints ``sign``) with ``F``
    fixed, then ``F`` (the free inputs ``free``, depth at most
    :data:`FREE_TREE_DEPTH`, unconstrained) with ``T`` fixed, each as a
    weighted least-squares regression tree (:func:`_grow_and_finetune` with
    Gaussian leaves, as a regressor's trees are fitted) of its part of the
    working response at the current ``f = T + F``: ``f + (y - p) / w``
    clipped to ``[-MAX_LOGIT, MAX_LOGIT]``, minus the other tree, with
    weights ``w = p (1 - p)`` (at least :data:`MIN_NEWTON_WEIGHT`) times the
    row weights. :data:`LOGIT_ROUNDS` rounds from ``f = 0``; each fit has its
    own seed (``seed`` for the first ``T``, then stream
    :data:`FREE_TREE_STREAM`, as the regressor's). Both trees are fitted for
    the routing of the probabilities (``params.soft_routing``: soft unless
    ``routing="hard"``; ``"hybrid"`` trains the probabilistic model and
    predicts the deterministic one, as without constraints).

    The two are stored as one tree (:func:`graft_sum`) whose leaf ``(l,
    k)`` holds the class distribution ``(1 - sigma(c_lk), sigma(c_lk))``,
    ``c_lk`` the sum ``a_l + b_k`` of the two leaves clipped to ``[-MAX_LOGIT,
    MAX_LOGIT]`` as the responses are (clipping keeps the order): hard
    routing predicts ``sigma(T(x) + F(x))`` (so clipped) exactly; soft
    routing, a mixture of leaves like every E2EDT tree, is
    ``sum_l sum_k p_l q_k sigma(c_lk)``, monotone because ``sigma(c_lk)``
    keeps the order of ``a_l`` for every ``k`` and ``F``'s path
    probabilities ``q_k`` do not move along a constrained input.
    """
    positive = (y == 1).astype(np.float64)[:, None]
    rule = "soft" if params.soft_routing else "hard"
    X_free, Z_free = X[:, free], _free_inputs(Z, free)
    free_params = _free_tree_params(params, free)
    logit_tree = np.zeros_like(positive)
    logit_free = np.zeros_like(positive)
    for k in range(LOGIT_ROUNDS):
        response, weight = _newton_step(logit_tree + logit_free, positive, row_weight)
        tree, steepness = _regression_tree(
            X, Z, response - logit_free, weight, mean, scale, params,
            seed if k == 0 else _round_seed(seed, 2 * k),
            _extra_label(progress_label, f"constrained tree, round {k + 1}"), sign,
        )  # fmt: skip
        logit_tree = tree_output(tree, steepness, X, rule)
        response, weight = _newton_step(logit_tree + logit_free, positive, row_weight)
        free_tree, free_steepness = _regression_tree(
            X_free, Z_free, response - logit_tree, weight, mean[free], scale[free], free_params,
            _round_seed(seed, 2 * k + 1),
            _extra_label(progress_label, f"free tree, round {k + 1}"), None,
        )  # fmt: skip
        logit_free = tree_output(free_tree, free_steepness, X_free, rule)
    grafted, grafted_steepness = graft_sum(
        tree, steepness, _on_columns(free_tree, free, X.shape[1]), free_steepness
    )
    # the sum clipped as the working responses are: a leaf that few rows reach can hold
    # an extrapolated logit (seen: 33 and 328 from responses within +-2 and +-8)
    proba = expit(np.clip(grafted.value[:, 0], -MAX_LOGIT, MAX_LOGIT))
    grafted.value = np.column_stack([1.0 - proba, proba])
    return _with_training_statistics(grafted, X, y, row_weight, leaves), grafted_steepness


def _newton_step(logit, positive, row_weight):
    """The logistic loss's working response and weights at ``logit`` (n, 1), for the 0/1
    labels ``positive`` (n, 1): ``(response (n, 1), row_weight * w (n,))``."""
    p = expit(logit)
    w = np.maximum(p * (1.0 - p), MIN_NEWTON_WEIGHT)
    response = np.clip(logit + (positive - p) / w, -MAX_LOGIT, MAX_LOGIT)
    return response, row_weight * w[:, 0]


def _regression_tree(X, Z, target, weight, mean, scale, params, seed, progress_label, sign):
    """A tree with Gaussian leaves fitted to ``target`` (n, 1) on the rows weighted
    ``weight`` (:func:`_grow_and_finetune`): ``(tree, steepness)``."""
    target_leaves = leaf_model(target, None, weight)
    return _grow_and_finetune(
        X, Z, target_leaves.training_targets(target), weight, target_leaves, mean, scale,
        params, seed, progress_label, sign,
    )  # fmt: skip


def _free_tree_params(params, free):
    """The training parameters of a free tree on the inputs ``free``: ``params`` at
    most :data:`FREE_TREE_DEPTH` deep, with no image layout."""
    return replace(
        params,
        max_depth=min(params.max_depth, FREE_TREE_DEPTH),
        max_features=None if params.max_features is None else min(params.max_features, free.size),
        image_shape=None,
        patch_size=None,
        spatial_reg=0.0,
    )


def _free_inputs(Z, free):
    """The standardised inputs ``Z`` (array or StandardizedCSR) of the columns ``free``."""
    if isinstance(Z, S.StandardizedCSR):
        return Z.columns(free)
    return np.ascontiguousarray(Z[:, free])


def _round_seed(seed, k):
    """The seed of the ``k``-th extra fit of :func:`_with_free_tree` or :func:`_logit_sum`
    (stream :data:`FREE_TREE_STREAM` of the tree's ``seed``)."""
    return int(generator(seed, FREE_TREE_STREAM, k).integers(1 << 62))


def _restart_seed(seed, r):
    """The seed of restart ``r`` of :func:`_least_loss_fit` (stream :data:`RESTART_STREAM`)."""
    return int(generator(seed, RESTART_STREAM, r).integers(1 << 62))


def _extra_label(progress_label, fit):
    """The progress label of an extra fit (None: no progress lines)."""
    return None if progress_label is None else f"{progress_label} ({fit})"


def tree_output(tree, steepness, X, rule, n_threads=1):
    """One stored tree's leaf values of ``X`` under ``rule``, shape (n, n_outputs).

    ``rule`` is "hard" (the deterministic tree) or "soft" (the probabilistic
    model with the final ``steepness``; a grafted tree, :func:`graft_sum`,
    through its two parts, :func:`~obliquetrees._core.graft.split_graft`).
    One thread by default: trees may train in parallel.
    """
    if rule == "hard":
        forest = ObliqueForest.from_trees([tree], validate=False)
        return traversal.predict_value(forest, X, n_threads)
    from obliquetrees._core.soft import soft_predict

    graft = split_graft(tree, steepness)
    with numba_threads(n_threads):  # results do not depend on it
        if graft is not None:
            return graft_soft_predict(graft, X, tree.value)
        return soft_predict(tree, X, tree.value, steepness=steepness)


def _on_columns(tree, columns, n_features):
    """``tree`` (fitted on ``X[:, columns]``) as a tree of all ``n_features`` inputs."""
    return ObliqueTree(
        tree.children_left,
        tree.children_right,
        tree.weight_indptr,
        columns[tree.weight_index],
        tree.weight_value,
        tree.bias,
        tree.value,
        tree.n_node_samples,
        n_features=n_features,
        depth=tree.depth,
        weight_missing=tree.weight_missing,
    )


def _with_training_statistics(tree, X, y, row_weight, leaves):
    """``tree`` with ``n_node_samples`` and internal values from hard routing of the
    training rows, as :func:`to_oblique_tree` sets them (leaf values kept)."""
    weight, sums, parent = _hard_routed_statistics(tree, X, y, row_weight, leaves)
    _set_internal_values(
        tree, np.flatnonzero(tree.children_left >= 0), weight, sums, parent, leaves
    )
    return tree
