"""The fitted-tree container shared by every estimator of the package.

An :class:`ObliqueTree` is a binary tree stored as flat, parallel numpy
arrays (node 0 is the root). Internal node ``i`` holds a hyperplane
``(w_i, b_i)``; a sample ``x`` goes to ``children_right[i]`` iff
``w_i . x + b_i > 0`` and to ``children_left[i]`` otherwise (ties go left).
Leaves have ``children_left == children_right == -1``.

Split weights are stored in CSR form, one row per node (leaves have empty
rows): the weights of node ``i`` are ``weight_value[k]`` on feature
``weight_index[k]`` for ``k`` in ``weight_indptr[i]:weight_indptr[i + 1]``.
A split that uses 3 of 784 features stores 3 numbers.

Missing values: every stored weight also carries a *missing-value term*
``weight_missing[k]``, which replaces ``weight_value[k] * x_j`` in the margin
when ``x_j`` is NaN. It is the oblique form of a default direction: a split
whose only weight is on ``x_j`` sends missing rows right iff
``weight_missing + b > 0``; in general each missing feature shifts the margin
by a learned amount instead of by its weight times a value. A feature without
a stored weight plays no part in the split, missing or not. How each
estimator sets the terms: :mod:`obliquetrees._core.missing`.

Most models store those terms in a *compact* form: when every term is the
weight times a per-feature value, ``weight_missing[k] = weight_value[k] *
missing_fill[weight_index[k]]`` (a NaN counts as the training mean, what every
model trained without informative missingness does), the container keeps
only ``missing_fill`` (one number per feature) and ``weight_missing`` is
computed on access. The kernels compute a term only where they meet a NaN,
with the same product, so both forms give bit-identical results.
Feature ids (``weight_index``) are int32, and a node with one weight per
feature (a dense oblique split) stores none: its ``k``-th weight is on
feature ``k`` (container format 4, :mod:`obliquetrees._core.feature_ids`);
the attribute ``weight_index`` still gives one id per weight.

Only numpy arrays and Python scalars live in the container, so it pickles,
memory-maps (``joblib.load(..., mmap_mode="r")``) and never holds compiled
objects; unpickling validates the arrays. This module imports numpy and scipy only.
"""

import numpy as np
from scipy import sparse

from obliquetrees._core.feature_ids import (
    FeatureIds,
    as_feature_index,
    node_weight_counts,
    stored_feature_ids,
)
from obliquetrees._core.validation import (
    INDEX_DTYPE,
    VALUE_DTYPE,
    check_tree_arrays,
)

#: Version of the array layout. Bump it when the meaning or the set of arrays
#: changes; unpickling a different version raises a clear error.
FORMAT_VERSION = 4
#: Older layouts that still load: version 1 had no ``weight_missing`` (it is
#: set to 0 on load, so a missing value then contributes nothing to a margin);
#: versions 1 and 2 stored ``weight_index`` as int64 and had no ``missing_fill``
#: (their terms stay explicit); versions 1 to 3 stored an id for every weight
#: (the explicit form, which version 4 still reads).
READABLE_VERSIONS = (1, 2, 3, 4)

TREE_LEAF = -1

_NODE_ARRAYS = (
    "children_left",
    "children_right",
    "bias",
    "value",
    "n_node_samples",
    "depth",
)
_WEIGHT_ARRAYS = ("weight_indptr", "weight_index", "weight_value", "weight_missing")
ARRAY_NAMES = _NODE_ARRAYS + _WEIGHT_ARRAYS


class _MissingTerms:
    """The ``weight_missing`` attribute: the stored terms, or the compact form's products.

    The raw value (an array, or None in the compact form) lives in the
    instance ``__dict__`` under the same name, so pickles and the array
    checks see exactly what is stored.
    """

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        stored = obj.__dict__.get("weight_missing")
        if stored is not None:
            return stored
        return obj.weight_value * obj.missing_fill[obj.weight_index]

    def __set__(self, obj, value):
        obj.__dict__["weight_missing"] = value


def missing_terms_at(container, take):
    """``container.weight_missing[take]`` without computing every compact term."""
    stored = container.__dict__.get("weight_missing")
    if stored is not None:
        return stored[take]
    return container.weight_value[take] * container.missing_fill[container.weight_index[take]]


def missing_kernel_arrays(container):
    """``(terms, fill)`` for the kernels: one of them is an empty array.

    ``terms`` are the stored per-weight terms (empty in the compact form),
    ``fill`` the compact form's per-feature values (empty otherwise); a
    kernel meeting a NaN reads ``terms[k]`` if there are terms, else computes
    ``weight_value[k] * fill[weight_index[k]]``.
    """
    stored = container.__dict__.get("weight_missing")
    empty = np.zeros(0, dtype=VALUE_DTYPE)
    if stored is not None:
        return stored, empty
    return empty, container.missing_fill


class ObliqueTree:
    """A fitted oblique decision tree as flat numpy arrays.

    Parameters
    ----------
    children_left, children_right : array-like of int, shape (n_nodes,)
        Child node ids; ``-1`` marks a leaf (both must then be ``-1``).
    weight_indptr : array-like of int, shape (n_nodes + 1,)
        CSR row pointer of the split weights, one row per node.
    weight_index : array-like of int, shape (n_weights,) or fewer
        Feature index of each stored weight; or of each weight outside the
        nodes with exactly ``n_features`` weights, which then lie on features
        ``0 .. n_features - 1`` in order (the implicit form, see
        :mod:`obliquetrees._core.feature_ids`). Stored in the implicit form
        whenever that is exact.
    weight_value : array-like of float, shape (n_weights,)
        Value of each stored weight.
    weight_missing : array-like of float, shape (n_weights,), default=None
        The term that replaces ``weight_value[k] * x_j`` when ``x_j`` is NaN
        (zeros if None and ``missing_fill`` is None: a missing value then
        contributes nothing).
    missing_fill : array-like of float, shape (n_features,), default=None
        The compact form of the terms: ``weight_missing[k] = weight_value[k] *
        missing_fill[weight_index[k]]``. Exclusive with ``weight_missing``.
    bias : array-like of float, shape (n_nodes,)
        Offset ``b`` of each split (0 at leaves).
    value : array-like of float, shape (n_nodes, n_outputs)
        Prediction held by each node: a class distribution for classifiers,
        the regression value(s) for regressors. Internal nodes hold the value
        their training samples would get as a leaf.
    n_node_samples : array-like of float, shape (n_nodes,)
        (Weighted) number of training samples that reached each node.
    n_features : int
        Number of input features the weights refer to.
    depth : array-like of int, shape (n_nodes,), default=None
        Depth of each node (root 0); computed from the children if None.

    Attributes
    ----------
    node_count : int
        Number of nodes.
    n_leaves : int
        Number of leaves.
    max_depth : int
        Depth of the deepest node (0 for a single leaf).
    n_outputs : int
        Number of columns of ``value``.
    weight_index : ndarray of int32, shape (n_weights,)
        Feature id of every stored weight; built on each access when the
        full rows' ids are implicit.
    weight_missing : ndarray of float64, shape (n_weights,)
        The missing-value terms; in the compact form computed on each access
        from ``missing_fill`` (which is None otherwise).

    Notes
    -----
    Routing rule: right iff ``w . x + b > 0``, everywhere in the package,
    where a NaN ``x_j`` contributes ``weight_missing`` instead of ``w_j x_j``.
    A method whose paper uses the other orientation converts when it stores
    its tree.
    """

    weight_index = FeatureIds()
    weight_missing = _MissingTerms()

    def __init__(
        self,
        children_left,
        children_right,
        weight_indptr,
        weight_index,
        weight_value,
        bias,
        value,
        n_node_samples,
        n_features,
        depth=None,
        weight_missing=None,
        missing_fill=None,
    ):
        self.children_left = np.ascontiguousarray(children_left, dtype=INDEX_DTYPE)
        self.children_right = np.ascontiguousarray(children_right, dtype=INDEX_DTYPE)
        self.weight_indptr = np.ascontiguousarray(weight_indptr, dtype=INDEX_DTYPE)
        self.weight_value = np.ascontiguousarray(weight_value, dtype=VALUE_DTYPE)
        self.weight_index = stored_feature_ids(
            self.weight_counts(), as_feature_index(weight_index), int(n_features)
        )
        if missing_fill is not None:
            if weight_missing is not None:
                raise ValueError("pass weight_missing or missing_fill, not both.")
            self.missing_fill = np.ascontiguousarray(missing_fill, dtype=VALUE_DTYPE)
            self.weight_missing = None
        else:
            if weight_missing is None:
                weight_missing = np.zeros_like(self.weight_value)
            self.weight_missing = np.ascontiguousarray(weight_missing, dtype=VALUE_DTYPE)
            self.missing_fill = None
        self.bias = np.ascontiguousarray(bias, dtype=VALUE_DTYPE)
        value = np.asarray(value, dtype=VALUE_DTYPE)
        if value.ndim == 1:
            value = value[:, None]
        self.value = np.ascontiguousarray(value)
        self.n_node_samples = np.ascontiguousarray(n_node_samples, dtype=VALUE_DTYPE)
        self.n_features = int(n_features)
        if depth is None:
            depth = _node_depths(self.children_left, self.children_right)
        self.depth = np.ascontiguousarray(depth, dtype=INDEX_DTYPE)
        self.format_version = FORMAT_VERSION

    # ------------------------------------------------------------------ build
    @classmethod
    def from_dense(
        cls,
        children_left,
        children_right,
        weights,
        bias,
        value,
        n_node_samples,
        depth=None,
        missing=None,
    ):
        """Build a tree from a dense ``(n_nodes, n_features)`` weight matrix.

        Exact zeros are not stored (unless their missing-value term is not
        zero); rows of leaves are ignored.

        Parameters
        ----------
        children_left, children_right, bias, value, n_node_samples, depth
            As in :class:`ObliqueTree`.
        weights : array-like of float, shape (n_nodes, n_features)
            Split weights, one row per node.
        missing : array-like of float, shape (n_nodes, n_features), default=None
            Missing-value terms (see ``weight_missing``); zeros if None.

        Returns
        -------
        tree : ObliqueTree
        """
        weights = np.asarray(weights, dtype=VALUE_DTYPE)
        children_left = np.asarray(children_left, dtype=INDEX_DTYPE)
        mask = weights != 0
        if missing is not None:
            missing = np.asarray(missing, dtype=VALUE_DTYPE)
            mask |= missing != 0
        mask &= (children_left != TREE_LEAF)[:, None]
        counts = np.count_nonzero(mask, axis=1)
        indptr = np.zeros(weights.shape[0] + 1, dtype=INDEX_DTYPE)
        np.cumsum(counts, out=indptr[1:])
        # boolean indexing takes the entries in row-major order, the CSR order;
        # full rows store no feature ids (the implicit form, exact here)
        full = counts == weights.shape[1]
        return cls(
            children_left,
            children_right,
            indptr,
            np.nonzero(mask & ~full[:, None])[1] if full.any() else np.nonzero(mask)[1],
            weights[mask],
            bias,
            value,
            n_node_samples,
            n_features=weights.shape[1],
            depth=depth,
            weight_missing=None if missing is None else missing[mask],
        )

    # ------------------------------------------------------------- properties
    @property
    def node_count(self):
        """Number of nodes (internal nodes and leaves)."""
        return int(self.children_left.shape[0])

    @property
    def n_outputs(self):
        """Number of columns of ``value``."""
        return int(self.value.shape[1])

    @property
    def is_leaf(self):
        """Boolean mask of the leaves, shape (n_nodes,)."""
        return self.children_left == TREE_LEAF

    @property
    def n_leaves(self):
        """Number of leaves."""
        return int(np.count_nonzero(self.is_leaf))

    @property
    def max_depth(self):
        """Depth of the deepest node (0 for a tree that is a single leaf)."""
        return int(self.depth.max()) if self.node_count else 0

    def weight_counts(self):
        """Number of stored weights of every node, shape (n_nodes,)."""
        return node_weight_counts(self.weight_indptr)

    def with_splits(self, indptr, index, value, n_features, bias=None, **terms):
        """A tree of this structure and leaf values with other split weights.

        Parameters
        ----------
        indptr, index, value : ndarray
            The new ``weight_indptr``, ``weight_index`` and ``weight_value``.
        n_features : int
        bias : ndarray, optional
            The new biases (default: this tree's).
        **terms
            ``weight_missing`` or ``missing_fill``, as the constructor takes them.
        """
        return ObliqueTree(
            self.children_left,
            self.children_right,
            indptr,
            index,
            value,
            self.bias if bias is None else bias,
            self.value,
            self.n_node_samples,
            n_features=n_features,
            depth=self.depth,
            **terms,
        )

    def dense_weights(self):
        """Split weights as a dense ``(n_nodes, n_features)`` array."""
        dense = np.zeros((self.node_count, self.n_features), dtype=VALUE_DTYPE)
        rows = np.repeat(np.arange(self.node_count), np.diff(self.weight_indptr))
        dense[rows, self.weight_index] = self.weight_value
        return dense

    # ------------------------------------------------------------- invariants
    def check_invariants(self):
        """Raise ``ValueError`` if the arrays do not form a valid tree.

        Checks shapes, dtypes, that the children describe a binary tree rooted
        at node 0 in which every node is reached exactly once, the depths,
        that leaves have no weights, that the weight CSR is well formed with
        feature indices in ``[0, n_features)`` and that every stored number
        is finite (:func:`obliquetrees._core.validation.check_forest_arrays`).
        """
        check_tree_arrays(self.__dict__, self.n_features)

    # ---------------------------------------------------------------- pickle
    def __getstate__(self):
        return dict(self.__dict__)

    def __setstate__(self, state):
        state = upgrade_state(state, "ObliqueTree")
        # the kernels trust these arrays: check them before anyone can use them
        check_tree_arrays(state, state.get("n_features"), "unpickled ObliqueTree")
        self.__dict__.update(state)

    def __repr__(self):
        return (
            f"ObliqueTree(node_count={self.node_count}, n_leaves={self.n_leaves}, "
            f"max_depth={self.max_depth}, n_features={self.n_features}, "
            f"n_outputs={self.n_outputs})"
        )


def upgrade_state(state, kind):
    """A pickled container's ``__dict__`` in this version's layout.

    Version 1 lacked ``weight_missing``: zeros are filled in (a float64
    array as long as ``weight_value``; a malformed ``weight_value`` is left
    for the array checks to report). Versions 1 and 2 stored ``weight_index``
    as int64: it becomes int32 (ids outside the int32 range raise), and their
    terms stay explicit (``missing_fill`` None).

    Parameters
    ----------
    state : dict
        The pickled ``__dict__``.
    kind : str
        Class name of the container, for the message.

    Returns
    -------
    state : dict
        A new dict; ``format_version`` is the current one.

    Raises
    ------
    ValueError
        If the version is not one this obliquetrees reads.
    """
    version = state.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"This {kind} was saved with container format version "
            f"{version!r}; this obliquetrees reads versions {list(READABLE_VERSIONS)}. "
            "Refit the model with this version of obliquetrees."
        )
    state = dict(state)
    if version == 1:
        weights = state.get("weight_value")
        n = weights.shape[0] if isinstance(weights, np.ndarray) and weights.ndim == 1 else 0
        state["weight_missing"] = np.zeros(n, dtype=VALUE_DTYPE)
    if version in (1, 2):
        index = state.get("weight_index")
        if isinstance(index, np.ndarray) and index.dtype == INDEX_DTYPE and index.ndim == 1:
            try:
                state["weight_index"] = as_feature_index(index)
            except ValueError as exc:
                raise ValueError(f"Invalid unpickled {kind}: {exc}") from None
        state["missing_fill"] = None
    state["format_version"] = FORMAT_VERSION
    return state


def _node_depths(children_left, children_right):
    """Depth of every node, by a breadth-first sweep from the root."""
    n = children_left.shape[0]
    depth = np.zeros(n, dtype=INDEX_DTYPE)
    frontier = np.zeros(1, dtype=INDEX_DTYPE) if n else np.zeros(0, INDEX_DTYPE)
    level = 0
    while frontier.size and level <= n:
        depth[frontier] = level
        internal = frontier[children_left[frontier] != TREE_LEAF]
        frontier = np.concatenate([children_left[internal], children_right[internal]])
        # out-of-range ids are reported by check_invariants, not followed here
        frontier = frontier[(frontier > 0) & (frontier < n)]
        level += 1
    return depth


#: Columns whose largest magnitude lies in ``[2**-_SAFE_EXPONENT, 2**_SAFE_EXPONENT]``
#: (or is 0) have moments whose squares neither overflow nor underflow.
_SAFE_EXPONENT = 400

#: Smallest standard deviation a feature can have and still get a finite weight
#: in raw units (``w / scale``, with standardised weights ``|w|`` up to ~1e7).
MIN_FEATURE_SCALE = 2.0**-1000


def prescale_exponents(X, chunk=4096):
    """Binary exponent of every column's largest ``|x|``, 0 for safe columns.

    ``np.ldexp(X, -exponent)`` brings each column whose largest magnitude is
    outside ``[2**-400, 2**400]`` near 1, exactly, and leaves the others as
    they are (see :func:`feature_moments`).
    """
    peak = np.zeros(X.shape[1])
    if sparse.issparse(X):  # implicit zeros do not raise a peak
        np.maximum.at(peak, X.indices, np.abs(X.data))
    else:
        for start in range(0, X.shape[0], chunk):
            np.maximum(peak, np.abs(X[start : start + chunk]).max(axis=0), out=peak)
    exponent = np.frexp(peak)[1]
    exponent[(peak >= 2.0**-_SAFE_EXPONENT) & (peak <= 2.0**_SAFE_EXPONENT)] = 0
    return exponent


def feature_moments(X, sample_weight=None, chunk=4096, exponent=None):
    """(Weighted) mean and standard deviation of every column of ``X``.

    Computed in row chunks, so no temporary copy of the whole ``X`` is made.
    A column whose largest magnitude is outside ``[2**-400, 2**400]`` (about
    ``[4e-121, 3e120]``, denormals included) is first multiplied by a power
    of two that brings it near 1, so its squares neither overflow nor
    underflow, and the moments are scaled back. Multiplying by a power of
    two is exact, and columns inside that range are summed as given, so
    ordinary data get exactly the moments of the plain formula.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Finite values.
    sample_weight : ndarray of shape (n_samples,), default=None
    chunk : int, default=4096
    exponent : ndarray of int, shape (n_features,), default=None
        :func:`prescale_exponents` of ``X``, when the caller has it already
        (it costs a pass over ``X``).

    Returns
    -------
    mean, std : ndarray of float64, shape (n_features,)
    """
    n = X.shape[0]
    w = np.full(n, 1.0 / n) if sample_weight is None else sample_weight / sample_weight.sum()
    if exponent is None:
        exponent = prescale_exponents(X, chunk)
    if sparse.issparse(X):
        return _sparse_moments(X, w, exponent)
    rescale = bool(exponent.any())

    def block(start):
        rows = X[start : start + chunk]
        return np.ldexp(rows, -exponent) if rescale else rows

    if rescale:
        mean = np.zeros(X.shape[1])
        for start in range(0, n, chunk):
            mean += w[start : start + chunk] @ block(start)
    else:
        mean = w @ X
    var = np.zeros(X.shape[1])
    for start in range(0, n, chunk):
        var += w[start : start + chunk] @ (block(start) - mean) ** 2
    return np.ldexp(mean, exponent), np.ldexp(np.sqrt(var), exponent)


def _sparse_moments(X, w, exponent):
    """:func:`feature_moments` of a CSR matrix without densifying it.

    With ``m`` the column mean, ``sum_i w_i (x_i - m)**2`` over all rows is
    ``m**2 + sum w_i x_i (x_i - 2 m)`` over the stored entries only (the
    weights sum to 1), so implicit zeros cost nothing.
    """
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    data = np.ldexp(X.data, -exponent[X.indices]) if exponent.any() else X.data
    n_features = X.shape[1]
    mean = np.bincount(X.indices, weights=w[rows] * data, minlength=n_features)
    m = mean[X.indices]
    var = mean**2 + np.bincount(
        X.indices, weights=w[rows] * data * (data - 2.0 * m), minlength=n_features
    )
    std = np.sqrt(np.maximum(var, 0.0))  # rounding can make a zero variance negative
    return np.ldexp(mean, exponent), np.ldexp(std, exponent)


def check_centred_range(X, mean, name="X", exponent=None):
    """Refuse columns whose centred values ``x - mean`` overflow float64.

    Only a column holding some ``|x| >= 2**1023`` can overflow (its binary
    exponent is then 1024); the others are not read again.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_columns)
    mean : ndarray of shape (n_columns,)
    name : str, default="X"
        How the error message names ``X`` (``"y"`` for targets).
    exponent : ndarray of int, shape (n_columns,), default=None
        :func:`prescale_exponents` of ``X``, when the caller has it already.

    Raises
    ------
    ValueError
        If some ``|x - mean|`` exceeds the largest float64.
    """
    if exponent is None:
        exponent = prescale_exponents(X)
    top = np.flatnonzero(exponent == 1024)
    if top.size == 0:
        return
    with np.errstate(over="ignore"):
        if sparse.issparse(X):  # stored entries, and the implicit zeros' |mean|
            spread = np.abs(mean).copy()
            np.maximum.at(spread, X.indices, np.abs(X.data - mean[X.indices]))
            spread = spread[top]
        else:
            spread = np.abs(X[:, top] - mean[top]).max(axis=0)
    bad = ~np.isfinite(spread)
    if bad.any():
        raise ValueError(
            f"columns {top[bad].tolist()[:10]} of {name} hold values whose distance to their mean "
            f"exceeds the float64 limit {np.finfo(np.float64).max:.3g}. Rescale {name}."
        )


def standardization(X, sample_weight=None):
    """Per-feature (weighted) mean and scale for internal standardisation.

    Constant features get an infinite scale, so their standardised value
    ``(x - mean) / scale`` is 0 whatever ``x`` is and a weight folded into
    raw units (:func:`fold_standardization`) is 0: a feature that carried no
    information in training carries no weight in the model and cannot move
    its predictions. A feature counts as constant when its standard
    deviation is zero or at rounding level of its mean
    (``std <= 1e-12 * |mean|``); the test is relative, so features measured
    in tiny units (values around 1e-30) keep their own scale. A feature whose
    standard deviation is below ``MIN_FEATURE_SCALE`` (``2**-1000``, about
    1e-301; denormal values) cannot be given a finite weight in raw units and
    is treated as constant too.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,), default=None

    Returns
    -------
    mean, scale : ndarray of float64, shape (n_features,)

    Raises
    ------
    ValueError
        If some features vary but all of them only below
        ``MIN_FEATURE_SCALE`` (the model would silently be constant), or if
        a centred value ``x - mean`` overflows float64.
    """
    exponent = prescale_exponents(X)  # one pass over X serves both calls
    mean, scale = feature_moments(X, sample_weight, exponent=exponent)
    check_centred_range(X, mean, exponent=exponent)
    varies = scale > 1e-12 * np.abs(mean)
    tiny = varies & (scale < MIN_FEATURE_SCALE)
    if tiny.any() and not np.any(varies & ~tiny):
        raise ValueError(
            f"X varies only on scales below {MIN_FEATURE_SCALE:.3g} (largest standard "
            f"deviation {scale[tiny].max():.3g}, features {np.flatnonzero(tiny).tolist()[:10]}): "
            "weights acting on such values would overflow float64. Rescale X."
        )
    scale[~varies | tiny] = np.inf
    return mean, scale


def fold_standardization(tree, mean, scale):
    """Express a tree trained on standardised inputs in the raw input units.

    A split ``w . z + b`` on ``z = (x - mean) / scale`` equals
    ``(w / scale) . x + (b - sum(w * mean / scale))`` on the raw ``x``. The
    bias now holds ``-w_j mean_j / scale_j`` for every feature, so a
    missing-value term ``c_j`` (which replaced ``w_j z_j``) becomes
    ``c_j + w_j mean_j / scale_j``: a tree trained without missing values
    (``c = 0``) sends a NaN where the training mean would go.
    Features with an infinite scale (constant in training, see
    :func:`standardization`) get no weight: their entries are dropped.

    Parameters
    ----------
    tree : ObliqueTree
        Tree whose weights act on standardised inputs.
    mean, scale : ndarray of shape (n_features,)
        The standardisation statistics (``scale`` must be non-zero; infinite
        for features the tree must ignore).

    Returns
    -------
    tree : ObliqueTree
        A new tree with the same structure and leaf values; its terms are in
        the compact form (``missing_fill`` is ``mean``) when they are exactly
        ``value * mean[index]``.

    Raises
    ------
    ValueError
        If a weight in raw units overflows float64 (a scale too small for
        its standardised weight).
    """
    mean = np.asarray(mean, dtype=VALUE_DTYPE)
    scale = np.asarray(scale, dtype=VALUE_DTYPE)
    indptr, index, weight = tree.weight_indptr, tree.weight_index, tree.weight_value
    stored = vars(tree)["weight_index"]  # the same rows keep the same stored form
    missing = tree.weight_missing
    kept = np.isfinite(scale[index])
    if not kept.all():
        rows = np.repeat(np.arange(tree.node_count), np.diff(indptr))
        counts = np.bincount(rows[kept], minlength=tree.node_count)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(tree.weight_indptr.dtype)
        index, weight, missing = index[kept], weight[kept], missing[kept]
        stored = index
    value = weight / scale[index]
    rows = np.repeat(np.arange(tree.node_count), np.diff(indptr))
    centre = value * mean[index]
    shift = np.bincount(rows, weights=centre, minlength=tree.node_count)
    bias = np.where(tree.is_leaf, 0.0, tree.bias - shift)
    missing = missing + centre
    if not (
        np.all(np.isfinite(value)) and np.all(np.isfinite(bias)) and np.all(np.isfinite(missing))
    ):
        raise ValueError(
            "a split's weights in raw input units overflow float64 (a feature's "
            f"scale is too small for its weight, scales down to {np.min(scale):.3g}); "
            "rescale X."
        )
    # A tree trained without missing-value terms has the terms value * mean[index]
    # (bit for bit unless a zero's sign differs): stored compactly as the mean.
    if np.array_equal(missing.view(np.int64), centre.view(np.int64)):
        terms = {"missing_fill": mean}
    else:
        terms = {"weight_missing": missing}
    return tree.with_splits(indptr, stored, value, tree.n_features, bias=bias, **terms)
