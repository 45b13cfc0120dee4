"""The safety boundary: checks of containers and of prediction input width.

The numba kernels read their arrays without bounds checks, so every array
set that reaches them from outside the package's own training code (an
unpickled model, a container handed to a public function) goes through
:func:`check_forest_arrays` first, and every prediction entry checks the
width of its input with :func:`check_n_features`. All checks are vectorised
numpy (O(nodes), no Python loop over trees or nodes); a failure raises a
``ValueError`` that names the defect. This module imports numpy only.
"""

import numbers

import numpy as np

from obliquetrees._core.feature_ids import (
    FEATURE_DTYPE,
    explicit_feature_ids,
    is_implicit,
    node_weight_counts,
)

INDEX_DTYPE = np.dtype(np.int64)
VALUE_DTYPE = np.dtype(np.float64)
#: Widest input a container can refer to (feature ids are ``FEATURE_DTYPE``).
MAX_FEATURES = int(np.iinfo(np.int32).max)
#: Weights whose missing-value terms are checked per chunk (bounds the temporary).
_TERM_CHUNK = 1 << 16
#: The traversal kernels' routing layout stores global node ids as int32.
MAX_TOTAL_NODES = np.iinfo(np.int32).max - 1
_ARRAY_NAMES = (
    "children_left",
    "children_right",
    "weight_indptr",
    "weight_index",
    "weight_value",
    "weight_missing",
    "missing_fill",
    "bias",
    "value",
    "n_node_samples",
    "depth",
)


def check_n_features(X, n_features, what="the model"):
    """Raise ``ValueError`` unless ``X`` has ``n_features`` columns.

    Parameters
    ----------
    X : ndarray or sparse matrix, shape (n_samples, n_features)
    n_features : int
        Width the container's weights refer to.
    what : str, default="the model"
        Name of the container, for the message.
    """
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {shape}.")
    if shape[1] != n_features:
        raise ValueError(
            f"X has {shape[1]} features, but {what} was fitted with {n_features} features."
        )


def check_int(value, name, low=0):
    """``value`` as a Python int, or ``ValueError`` if it is not an integer >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")
    return int(value)


def check_array(arr, name, dtype, ndim, shape=None):
    """Raise ``ValueError`` unless ``arr`` is an ndarray of this dtype, ndim and shape.

    ``shape`` may hold None for a free dimension.
    """
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{name} must be a numpy array; got {type(arr).__name__}.")
    if arr.dtype != dtype or arr.ndim != ndim:
        raise ValueError(
            f"{name} must be a {ndim}-D {np.dtype(dtype).name} array; got {arr.ndim}-D {arr.dtype}."
        )
    if shape is not None and shape[0] is not None and arr.shape[0] != shape[0]:
        raise ValueError(f"{name} has {arr.shape[0]} rows, expected {shape[0]}.")
    pairs = zip(shape or (), arr.shape, strict=False)  # ndim already matches
    if any(s is not None and s != a for s, a in pairs):
        want = tuple("*" if s is None else s for s in shape)
        raise ValueError(f"{name} has shape {arr.shape}, expected {want}.")


def check_finite(arr, name):
    """Raise ``ValueError`` if ``arr`` holds NaN or infinity.

    A finite sum implies finite entries (NaN and infinities propagate), so
    the common case reads the array once without a temporary mask.
    """
    with np.errstate(over="ignore"):  # a sum of large finite values may overflow
        total = np.add.reduce(arr, axis=None) if arr.size else 0.0
    if not np.isfinite(total):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinity.")


def check_forest_arrays(arrays, node_offset, weight_offset, n_features, what="forest"):
    """Validate the arrays of one or several packed trees.

    Parameters
    ----------
    arrays : mapping
        ``children_left``, ``children_right``, ``weight_indptr``,
        ``weight_index``, ``weight_value``, ``bias``, ``value``,
        ``n_node_samples``, ``depth`` and either ``weight_missing`` (with
        ``missing_fill`` None or absent) or ``missing_fill`` (with
        ``weight_missing`` None: the compact form) in the packed layout of
        :class:`~obliquetrees._core.forest.ObliqueForest` (a single tree is
        a forest of one tree).
    node_offset, weight_offset : ndarray of int64, shape (n_trees + 1,)
    n_features : int
    what : str
        Name of the container, for messages.

    Raises
    ------
    ValueError
        Naming the first defect found: dtypes and shapes, offsets, child ids
        out of range or not forming a tree (each non-root node reached
        exactly once from its root), depths, the weight CSR, feature indices
        outside ``[0, n_features)``, non-finite numbers, too many nodes for
        the int32 routing layout, ``n_features`` beyond the int32 feature ids.
    """
    try:
        _check_forest_arrays(arrays, node_offset, weight_offset, n_features)
    except ValueError as exc:
        raise ValueError(f"Invalid {what}: {exc}") from None


def check_tree_arrays(arrays, n_features, what="tree"):
    """Validate the arrays of one tree (see :func:`check_forest_arrays`)."""
    # lengths of whatever is there (checked properly below), for the offsets
    n_nodes, n_weights = (
        (getattr(arrays.get(name), "shape", ()) or (0,))[0]
        for name in ("children_left", "weight_value")
    )
    offsets = (np.array([0, n_nodes], dtype=INDEX_DTYPE), np.array([0, n_weights], INDEX_DTYPE))
    check_forest_arrays(arrays, *offsets, n_features, what)


def _check_forest_arrays(arrays, node_offset, weight_offset, n_features):
    arrays = {name: arrays.get(name) for name in _ARRAY_NAMES}  # a missing one is None
    n_features = check_int(n_features, "n_features", low=1)
    if n_features > MAX_FEATURES:
        raise ValueError(f"n_features={n_features} exceeds the limit of {MAX_FEATURES}.")
    _check_forest_shapes(arrays, node_offset, weight_offset, n_features)
    internal = _check_forest_structure(arrays, node_offset)
    _check_forest_weights(arrays, node_offset, weight_offset, n_features, internal)


def _check_forest_shapes(arrays, node_offset, weight_offset, n_features):
    """Dtypes and shapes of every array, against the node and tree counts."""
    check_array(node_offset, "node_offset", INDEX_DTYPE, 1)
    check_array(weight_offset, "weight_offset", INDEX_DTYPE, 1, (node_offset.shape[0],))
    n_trees = node_offset.shape[0] - 1
    if n_trees < 1:
        raise ValueError("a forest needs at least one tree.")
    sizes = np.diff(node_offset)
    if node_offset[0] != 0 or np.any(sizes < 1):
        raise ValueError("node_offset must start at 0 and increase (every tree has a node).")
    n = int(node_offset[-1])
    if n > MAX_TOTAL_NODES:
        raise ValueError(f"{n} nodes exceed the routing layout's limit of {MAX_TOTAL_NODES}.")
    for name in ("children_left", "children_right", "depth"):
        check_array(arrays[name], name, INDEX_DTYPE, 1, (n,))
    for name in ("bias", "n_node_samples"):
        check_array(arrays[name], name, VALUE_DTYPE, 1, (n,))
    value = arrays["value"]
    check_array(value, "value", VALUE_DTYPE, 2, (n, None))
    if value.shape[1] < 1:
        raise ValueError("value needs at least one output column.")
    indptr, index = arrays["weight_indptr"], arrays["weight_index"]
    check_array(indptr, "weight_indptr", INDEX_DTYPE, 1)
    if indptr.shape[0] != n + n_trees:
        raise ValueError(
            f"weight_indptr has {indptr.shape[0]} entries, expected n_nodes + 1 per tree "
            f"= {n + n_trees}."
        )
    check_array(index, "weight_index", FEATURE_DTYPE, 1)
    check_array(arrays["weight_value"], "weight_value", VALUE_DTYPE, 1)
    n_stored = arrays["weight_value"].shape[0]  # the ids may be fewer (format 4)
    missing, fill = arrays["weight_missing"], arrays["missing_fill"]
    if missing is None and fill is not None:  # compact: terms = value * fill[index]
        check_array(fill, "missing_fill", VALUE_DTYPE, 1, (n_features,))
    elif fill is None:
        check_array(missing, "weight_missing", VALUE_DTYPE, 1, (n_stored,))
    else:
        raise ValueError("weight_missing and missing_fill exclude each other (one must be None).")
    n_weights = np.diff(weight_offset)
    if weight_offset[0] != 0 or np.any(n_weights < 0) or weight_offset[-1] != n_stored:
        raise ValueError("weight_offset must rise from 0 to the number of stored weights.")


def _check_forest_structure(arrays, node_offset):
    """Children, parents and depths: every tree is a tree. Returns the internal nodes' ids."""
    n_trees = node_offset.shape[0] - 1
    sizes = np.diff(node_offset)
    n = int(node_offset[-1])
    left, right = arrays["children_left"], arrays["children_right"]
    leaf = left == -1
    if not np.array_equal(leaf, right == -1):
        raise ValueError("a node has exactly one child (-1 marks leaves: both or neither).")
    internal = np.flatnonzero(~leaf)
    per_tree = np.diff(np.searchsorted(internal, node_offset))  # internal nodes per tree
    base = np.repeat(node_offset[:-1], per_tree)  # global id of each internal node's root
    size_of = np.repeat(sizes, per_tree)
    child_left, child_right = left[internal], right[internal]
    for side in (child_left, child_right):
        if side.size and (side.min() < 1 or np.any(side >= size_of)):
            raise ValueError("a child id lies outside [1, n_nodes) of its tree.")
    child_left += base  # global ids (fancy indexing made copies)
    child_right += base
    # node-length temporaries go as soon as they are used: a fresh fit is checked while
    # its whole forest is resident, so they add to its peak memory
    del base, size_of, side
    # Local child ids are >= 1, so no root is anyone's child. Every non-root
    # has exactly one parent iff the n - n_trees child slots cover all of them.
    covered = np.zeros(n, dtype=bool)
    covered[child_left] = True
    covered[child_right] = True
    if 2 * internal.shape[0] != n - n_trees or np.count_nonzero(covered) != n - n_trees:
        raise ValueError("every non-root node must have exactly one parent.")
    del covered
    # Roots at depth 0 and every child one deeper than its parent: walking up
    # from any node the depth falls by one per step, so the walk ends at a
    # root; a cycle (unreachable from the roots) cannot satisfy it. This
    # proves reachability without a sweep and checks the stored depths.
    depth = arrays["depth"]
    below = depth[internal] + 1
    if (
        np.any(depth[node_offset[:-1]] != 0)
        or not np.array_equal(depth[child_left], below)
        or not np.array_equal(depth[child_right], below)
    ):
        raise ValueError(
            "depth does not match the tree structure (or some nodes are not reachable "
            "from their root: a cycle)."
        )
    del below, child_left, child_right
    return internal


def _check_forest_weights(arrays, node_offset, weight_offset, n_features, internal):
    """Split weights: per-node pointers, feature ids in range, finite values."""
    n_trees = node_offset.shape[0] - 1
    sizes = np.diff(node_offset)
    indptr, index = arrays["weight_indptr"], arrays["weight_index"]
    n_stored = arrays["weight_value"].shape[0]
    missing, fill = arrays["weight_missing"], arrays["missing_fill"]
    n_weights = np.diff(weight_offset)
    first = node_offset[:-1] + np.arange(n_trees)
    if np.any(indptr[first] != 0) or np.any(indptr[first + sizes] != n_weights):
        raise ValueError("each tree's weight_indptr must run from 0 to its number of weights.")
    # stored weights per node: the pointer steps, without those between trees
    counts = node_weight_counts(indptr, node_offset)
    if counts.min() < 0:
        raise ValueError("weight_indptr must be non-decreasing.")
    # the counts are non-negative and sum to the number of weights, so the
    # leaves hold none iff the internal nodes hold them all (an index gather
    # is several times cheaper than a masked reduction here)
    if counts[internal].sum() != n_stored:
        raise ValueError("Leaves must not store split weights.")
    # feature ids: one per weight, or none for full rows (container format 4)
    implicit_length = n_stored - n_features * np.count_nonzero(counts == n_features)
    if index.shape[0] not in (n_stored, implicit_length):
        raise ValueError(
            f"weight_index has {index.shape[0]} ids: expected one per stored weight "
            f"({n_stored}) or one per weight outside the full rows ({implicit_length})."
        )
    if index.size and (index.min() < 0 or index.max() >= n_features):
        raise ValueError(f"weight_index must lie in [0, n_features) = [0, {n_features}).")
    for name in ("weight_value", "bias", "value", "n_node_samples"):
        check_finite(arrays[name], name)
    if missing is not None:
        check_finite(missing, "weight_missing")
    else:  # the terms the kernels compute must be finite too
        check_finite(fill, "missing_fill")
        check_compact_terms(arrays["weight_value"], index, fill, counts)


def check_compact_terms(value, index, fill, counts=None):
    """Raise ``ValueError`` unless every ``value[k] * fill[index[k]]`` is finite.

    The missing-value terms of a compact container (see
    :class:`~obliquetrees._core.tree.ObliqueTree`), checked in chunks so the
    products are never all held at once. ``index`` must already be in range;
    in the implicit form of the ids (:mod:`~obliquetrees._core.feature_ids`)
    ``counts`` gives the weights per node. Where ``max |value| * max |fill|``
    is finite every term is, and no term is computed.
    """
    if not value.size:
        return
    with np.errstate(over="ignore"):
        # max and min, not abs(): no temporary as large as the weights
        bound = max(value.max(), -value.min()) * np.abs(fill).max(initial=0.0)
    if np.isfinite(bound):
        return
    if counts is not None and is_implicit(index, value.shape[0]):
        index = explicit_feature_ids(counts, index, fill.shape[0])
    for start in range(0, value.shape[0], _TERM_CHUNK):
        stop = start + _TERM_CHUNK
        with np.errstate(over="ignore"):
            terms = value[start:stop] * fill[index[start:stop]]
        try:
            check_finite(terms, "terms")
        except ValueError:
            raise ValueError(
                "a missing-value term weight_value * missing_fill overflows float64."
            ) from None


def check_parents_first(forest):
    """Raise ``ValueError`` unless every child's id exceeds its parent's.

    Soft evaluation sweeps the nodes in storage order and needs each path
    probability before it is used; every tree the package grows, converts or
    fine-tunes is stored that way.

    Parameters
    ----------
    forest : ObliqueForest
        Already checked with :func:`check_forest_arrays`.
    """
    sizes = np.diff(forest.node_offset)
    local = np.arange(forest.children_left.shape[0]) - np.repeat(forest.node_offset[:-1], sizes)
    internal = forest.children_left != -1
    after = (forest.children_left[internal] > local[internal]) & (
        forest.children_right[internal] > local[internal]
    )
    if not after.all():
        raise ValueError("soft evaluation needs every parent stored before its children.")


#: Sample weights are used as given while their total lies in this range.
WEIGHT_TOTAL_RANGE = (2.0**-128, 2.0**128)


def bounded_weights(weights):
    """``weights`` divided by a power of two if their total is out of :data:`WEIGHT_TOTAL_RANGE`.

    Training sums weights and multiplies them with each other and with
    targets: finite weights whose total overflows float64 (or is near its
    smallest numbers) gave NaN predictions or refused forests. They are
    divided by the power of two that brings the largest to ``[1, 2)``: an
    exact division, which leaves the ratios' bits unchanged (only weights
    below ``2**-1021`` times the largest lose bits), and equal weights become
    ones. Every estimator but ``CO2ForestClassifier`` trains on the ratios
    alone and gives the same model bit for bit; CO2's classifier also moves
    with the weights' overall scale (weights halved change some splits),
    so its model from rescaled weights is a proper fit, not the same bits.
    Weights whose total is in range, every ordinary set, are returned as
    they are.

    Parameters
    ----------
    weights : ndarray of float64, shape (n_samples,)
        Finite, non-negative, with a positive total.

    Returns
    -------
    weights : ndarray of float64, shape (n_samples,)
    """
    low, high = WEIGHT_TOTAL_RANGE
    with np.errstate(over="ignore"):
        total = weights.sum()
    if low <= total <= high:
        return weights
    return np.ldexp(weights, 1 - np.frexp(weights.max())[1])
