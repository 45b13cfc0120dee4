"""Training of CO2 Forest (Norouzi et al.): bagged trees of CCCP-optimised
oblique stumps, grown breadth-first.

Pure functions over arrays. The estimator (``obliquetrees/_co2.py``) validates
the data and resolves parameters; :func:`fit_forest` standardises the
features once (shared by all trees, never copied per tree), draws each tree's
bootstrap as integer counts, grows the trees in parallel with joblib threads
(the growth kernel releases the GIL) and returns :class:`ObliqueTree` objects
whose weights act on the raw input (the standardisation is folded in).

Importing this module imports numba.
"""

import numpy as np

from obliquetrees._core.tree import ObliqueTree, fold_standardization, standardization
from obliquetrees._training import _co2_kernels as K
from obliquetrees._training._parallel import parallel_map


def bootstrap_counts(n_samples, seed):
    """Number of times each row is drawn by a bootstrap of ``n_samples`` rows."""
    rng = np.random.RandomState(seed)
    draws = rng.randint(0, n_samples, n_samples)
    return np.bincount(draws, minlength=n_samples).astype(np.float64)


def _tree_seeds(seed):
    """The bootstrap seed and the growth seed of the tree drawn from ``seed``."""
    boot_seed, grow_seed = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=2)
    return boot_seed, grow_seed


def tree_bootstrap_counts(n_samples, seed):
    """Bootstrap counts of the tree grown from ``seed`` (zero: out of bag)."""
    return bootstrap_counts(n_samples, _tree_seeds(seed)[0])


def balanced_class_weight(y, counts, n_classes):
    """``n / (n_classes * count_c)`` per class, counts given per row."""
    per_class = np.bincount(y, weights=counts, minlength=n_classes)
    total = per_class.sum()
    weight = np.zeros(n_classes)
    present = per_class > 0
    weight[present] = total / (present.sum() * per_class[present])
    return weight


def grow_tree(Xs, y, row_weight, n_classes, seed, params):
    """Grow one tree on standardised ``Xs`` with per-row weights.

    Rows with zero weight are left out. ``params`` is the dict built by
    :func:`fit_forest`. Returns the raw node arrays (see
    :func:`obliquetrees._training._co2_kernels.grow_tree`).
    """
    rows = np.flatnonzero(row_weight > 0).astype(np.int64)
    return K.grow_tree(
        Xs,
        y,
        row_weight,
        rows,
        n_classes,
        params["max_features"],
        params["max_depth"],
        params["min_samples_split"],
        params["min_samples_leaf"],
        params["max_leaf_nodes"],
        params["nu"],
        params["learning_rate"],
        params["batch_size"],
        params["momentum"],
        params["cccp_epochs"],
        params["max_cccp_iter"],
        params["tol"],
        np.uint64(seed),
        params["options"],
        params["theta_prior"],
    )


def _fit_one_tree(Xs, y, sample_weight, class_weight, n_classes, seed, params, mean, scale):
    """Bootstrap, grow and package one tree (module level for joblib/dask)."""
    n = Xs.shape[0]
    boot_seed, grow_seed = _tree_seeds(seed)
    if params["bootstrap"]:
        row_weight = bootstrap_counts(n, boot_seed)
    else:
        row_weight = np.ones(n)
    if class_weight is not None:
        if isinstance(class_weight, str):  # "balanced_subsample"
            row_weight = row_weight * balanced_class_weight(y, row_weight, n_classes)[y]
        else:
            row_weight = row_weight * class_weight[y]
    if sample_weight is not None:
        row_weight = row_weight * sample_weight
    left, right, weights, bias, value, nns, depth, stats = grow_tree(
        Xs, y, row_weight, n_classes, grow_seed, params
    )
    _fill_empty_nodes(left, right, value, nns, params["prior"])
    tree = ObliqueTree.from_dense(left, right, weights, bias, value, nns, depth)
    return fold_standardization(tree, mean, scale), stats


def class_prior(y, n_classes, sample_weight=None, class_weight=None):
    """Weighted class distribution of the whole training set.

    Weights are ``sample_weight`` times ``class_weight`` (``"balanced_subsample"``
    counts as balanced over the whole set). Raises a ``ValueError`` when they
    sum to zero: no class has any weight to learn from.
    """
    w = np.ones(y.shape[0]) if sample_weight is None else sample_weight
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


def fit_forest(
    X,
    y,
    n_classes,
    seeds,
    *,
    sample_weight=None,
    class_weight=None,
    max_features,
    max_depth=-1,
    min_samples_split=2,
    min_samples_leaf=1,
    max_leaf_nodes=-1,
    nu=10.0,
    learning_rate=0.01,
    batch_size=100,
    momentum=0.9,
    cccp_epochs=1,
    max_cccp_iter=20,
    tol=1e-3,
    options=1,
    theta_prior=1.0,
    bootstrap=True,
    n_jobs=None,
    verbose=0,
):
    """Fit one CO2 tree per seed.

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features), C-contiguous
    y : ndarray of int64, shape (n_samples,)
        Class indices in ``[0, n_classes)``.
    n_classes : int
    seeds : sequence of int
        One seed per tree (bootstrap and growth are drawn from it).
    sample_weight : ndarray of float64 or None
    class_weight : None, ndarray of shape (n_classes,) or "balanced_subsample"
    max_features : int
        Number q of candidate features of the axis-aligned initial split.
    max_depth, max_leaf_nodes : int
        -1 for unlimited.
    Other parameters as in :class:`obliquetrees.CO2ForestClassifier`.

    Returns
    -------
    trees : list of ObliqueTree
        Weights act on the raw ``X``. Nodes without training weight hold
        their parent's class distribution (the root: the weighted class
        distribution of the whole training set).
    stats : ndarray of int64, shape (n_trees, 3)
        Per tree: CCCP outer iterations, oblique splits, axis-aligned
        fallbacks.
    """
    prior = class_prior(y, n_classes, sample_weight, class_weight)
    mean, scale = standardization(X, sample_weight)
    Xs = np.ascontiguousarray((X - mean) / scale)
    params = dict(
        max_features=int(max_features),
        max_depth=int(max_depth),
        min_samples_split=int(min_samples_split),
        min_samples_leaf=int(min_samples_leaf),
        max_leaf_nodes=int(max_leaf_nodes),
        nu=float(nu),
        learning_rate=float(learning_rate),
        batch_size=int(batch_size),
        momentum=float(momentum),
        cccp_epochs=int(cccp_epochs),
        max_cccp_iter=int(max_cccp_iter),
        tol=float(tol),
        bootstrap=bool(bootstrap),
        prior=prior,
        options=int(options),
        theta_prior=float(theta_prior),
    )
    y = np.ascontiguousarray(y, dtype=np.int64)
    results = parallel_map(
        _fit_one_tree,
        [
            (Xs, y, sample_weight, class_weight, n_classes, int(s), params, mean, scale)
            for s in seeds
        ],
        n_jobs=n_jobs,
        verbose=verbose,
    )
    trees = [r[0] for r in results]
    stats = np.array([r[1] for r in results], dtype=np.int64).reshape(-1, 3)
    return trees, stats
