"""Numba kernels of CO2 Forest: the per-node kernel of growth.

:func:`split_node` is the kernel the breadth-first grower
(:func:`obliquetrees.co2._grow.grow_tree`) calls on every node the
growth limits let it split: the node's class histogram (:func:`node_value`),
the leaf tests, the initial axis-aligned split
(:mod:`obliquetrees._training.axis_split`), the CCCP
(:func:`~obliquetrees.co2._kernels.cccp`), the fallback to the
axis-aligned split when the optimised one leaves a side too small, and the
in-place partition of the node's rows. The node table is the grower's
(:mod:`obliquetrees._training.grower`): these kernels write one row of its
payload arrays ``weights``, ``bias``, ``value`` and ``n_node_samples`` per
node and reorder the node's slice ``rows[start:end]`` of the tree's one
row-index array.

The dense input is the triple ``(X, mean, scale)`` of :func:`dense_source`:
the caller's ``X`` and the fit's feature standardisation, applied as the rows
are read (:func:`standardized_row`), so no standardised copy of ``X`` is ever
made. The passes over a node's rows read random rows of ``X``; each asks the
cache for the row it will read some steps later (:func:`prefetch_ahead`).

A node of at most ``max_cccp_samples`` rows (or any node when it is -1) is
split on a gathered, centred copy of all its rows (:func:`split_block`). A
larger node fits its stump on a uniform sample of that many rows
(:func:`split_sampled`): the initial axis-aligned split and the CCCP both run
on the sample, and the node's rows are only read twice from ``X`` (their
weighted mean, and the side of each under the fitted split), so no copy of
all of its rows is made.

Importing this module imports numba; the estimator imports it lazily.
"""

import numpy as np

from obliquetrees._core._jit import (
    is_none_type,
    jit,
    jit_inline,
    jit_numpy_errors,
    jit_overload,
)
from obliquetrees._core._random import node_seed, random_int
from obliquetrees._training._prefetch import prefetch
from obliquetrees._training.axis_split import (
    THETA_PRIOR,
    init_theta,
    ranked_axis_split,
    split_gain,
)
from obliquetrees._training.targets import copy_target, empty_targets, leaf_value
from obliquetrees.co2._kernels import cccp
from obliquetrees.co2._monotone import node_constraints, on_support, ordered, start_sign
from obliquetrees.co2._oob import oob_keeps, tests_out_of_bag
from obliquetrees.co2._rows import standardized, standardized_row

#: How many rows ahead :func:`prefetch_ahead` asks the cache for the row a pass will read.
PREFETCH_DISTANCE = 16


@jit_inline
def prefetch_row(source, r):
    """Start loading row ``r`` of ``X`` into cache: each of its cache lines, no effect on results.

    One prefetch every 8 float64 (a 64-byte line) and one of the last entry
    (a row need not start on a line).
    """
    X = source[0]
    p = X.shape[1]
    for j in range(0, p, 8):
        prefetch(X, (r, j))
    prefetch(X, (r, p - 1))


@jit_inline
def prefetch_ahead(source, rows, t, end):
    """:func:`prefetch_row` of ``rows[t + PREFETCH_DISTANCE]`` if that is before ``end``.

    A pass over a node's rows reads them in the order of ``rows``: random rows
    of an ``X`` far larger than the cache, each read waiting for memory. The
    row the pass reads ``PREFETCH_DISTANCE`` steps later is requested now, so
    the loads overlap. A weighted-mean pass over 63k shuffled rows of 100k x 40
    took 2.3 ms against 5.5 ms without (AMD EPYC).
    """
    ahead = t + PREFETCH_DISTANCE
    if ahead < end:
        prefetch_row(source, rows[ahead])


@jit_inline
def standardized_row_at(source, r, out, t):
    """:func:`standardized_row` written to row ``t`` of the 2-D ``out``."""
    X, mean, scale = source
    for j in range(out.shape[1]):
        out[t, j] = (X[r, j] - mean[j]) / scale[j]


def dense_source(X, mean=None, scale=None):
    """The dense input of the growth kernels: ``(X, mean, scale)``, checked.

    The kernels read ``(X[r, j] - mean[j]) / scale[j]`` wherever they read the
    standardised input, so the trees are those grown on a standardised copy
    of ``X``, bit for bit, without making it. ``mean`` and ``scale`` default
    to 0 and 1 (``X`` already standardised: ``(x - 0) / 1`` is ``x`` exactly).

    Raises a ``ValueError`` unless ``X`` is a 2-D C-contiguous float64 array
    and ``mean`` and ``scale`` are float64 vectors of one entry per column.
    """
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64):
        raise ValueError("X must be a 2-D float64 array.")
    if not X.flags.c_contiguous:
        raise ValueError("X must be C-contiguous.")
    p = X.shape[1]
    mean = np.zeros(p) if mean is None else mean
    scale = np.ones(p) if scale is None else scale
    for name, v in (("mean", mean), ("scale", scale)):
        if not (isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (p,)):
            raise ValueError(f"{name} must be a float64 array of shape ({p},).")
    return X, np.ascontiguousarray(mean), np.ascontiguousarray(scale)


#: Largest block (rows x features) of which :func:`split_block` keeps the
#: standardised, uncentred rows for its partition (8 MB), which then divides
#: nothing; a larger one standardises its rows again as it partitions them.
MAX_KEPT_BLOCK = 1 << 20

#: The ``rows`` of :func:`~obliquetrees.co2._monotone.ordered` for a node's own block (row
#: ``t`` of the block is ``t``).
NO_ROWS = np.empty(0, dtype=np.int64)

#: What :func:`split_sampled` returns as ``n_left`` when the sample has no
#: axis-aligned split (the node is then split on all its rows).
NO_SAMPLE_SPLIT = -2


@jit
def cccp_rows(m, max_samples, state):
    """The rows of a node of ``m`` rows that its CCCP fits on, ascending.

    All ``m`` when ``max_samples < 0`` or ``m <= max_samples`` (no random draw);
    otherwise ``max_samples`` distinct rows drawn uniformly with ``state``
    (partial Fisher-Yates). Ascending keeps the gather of their rows sequential.
    """
    pick = np.arange(m)
    if max_samples < 0 or m <= max_samples:
        return pick
    for k in range(max_samples):
        j = k + random_int(state, m - k)
        tmp = pick[k]
        pick[k] = pick[j]
        pick[j] = tmp
    return np.sort(pick[:max_samples])


@jit
def take_block(Xb, yb, wb, pick):
    """Rows ``pick`` of a node's dense block, targets and weights (copies)."""
    s = pick.shape[0]
    Xs = np.empty((s, Xb.shape[1]))
    ys = empty_targets(yb, s)
    ws = np.empty(s)
    p = Xb.shape[1]
    for t in range(s):
        r = pick[t]
        for j in range(p):  # not Xs[t] = Xb[r]: a view per row costs atomic reference counts
            Xs[t, j] = Xb[r, j]
        copy_target(ys, t, yb, r)
        ws[t] = wb[r]
    return Xs, ys, ws


@jit
def node_value(y, row_weight, rows, start, end, node, value, n_node_samples):
    """Leaf value of one node, written to the node table.

    The node's rows are ``rows[start:end]``. Writes their weighted class
    histogram, normalised (targets: their weighted mean), to ``value[node]``
    (left at zero when the weight is zero) and its total weight to
    ``n_node_samples[node]``; returns the number of classes with positive
    weight (targets: 2 if they vary, else 1;
    :func:`~obliquetrees._training.targets.leaf_value`).
    """
    return leaf_value(y, row_weight, rows, start, end, node, value, n_node_samples)


@jit
def candidate_scores(p, params):
    """Room for the candidates' axis-split impurities when the split's support is chosen.

    ``p`` entries (``inf``: not a candidate) when ``params.max_split_features``
    is below ``p``; none otherwise (every feature is in the support, nothing
    to rank).
    """
    if 0 <= params.max_split_features < p:
        return np.full(p, np.inf)
    return np.empty(0)


@jit
def split_support(scores, feature, p, m, params):
    """The features the oblique split of a node of ``m`` rows may weigh, ``feature`` first.

    None (an empty support) when ``m`` is below ``params.min_samples_oblique``:
    the node keeps its axis-aligned start, of ``feature``. Otherwise every
    feature, in order, when ``scores`` is empty (:func:`candidate_scores`);
    else the start's ``feature`` and the candidates of the next best impurities
    (``scores``, from :func:`~obliquetrees._training.axis_split.ranked_axis_split`;
    ties in feature order), at most ``params.max_split_features`` in all.
    """
    if m < params.min_samples_oblique:
        return np.empty(0, dtype=np.int64)
    if scores.shape[0] == 0:
        return np.arange(p)
    k = max(params.max_split_features, 1)
    support = np.empty(k, dtype=np.int64)
    support[0] = feature
    n = 1
    for f in np.argsort(scores, kind="mergesort"):
        if n >= k or not scores[f] < np.inf:
            break
        if f != feature:
            support[n] = f
            n += 1
    return support[:n]


@jit
def support_rows(Xc, yc, wc, s, support):
    """Copies of the fit rows' columns ``support`` (in that order), targets and weights."""
    k = support.shape[0]
    Xs = np.empty((s, k))
    ys = empty_targets(yc, s)
    ws = np.empty(s)
    for t in range(s):
        for j in range(k):
            Xs[t, j] = Xc[t, support[j]]
        copy_target(ys, t, yc, t)
        ws[t] = wc[t]
    return Xs, ys, ws


@jit
def fit_support(
    Xs, ys, ws, s, sign, threshold, theta0, theta1, n_classes, params, state, history, cst
):
    """The stump on a chosen support: the CCCP on the support's columns ``Xs`` of the fit rows.

    Column 0 of ``Xs`` is the axis-aligned start's feature (threshold
    ``threshold``, weight ``sign``: :func:`oriented_start`); ``Xs``, ``ys``
    and ``ws`` are the caller's copies, which
    :func:`~obliquetrees.co2._kernels.cccp` reorders together; ``cst`` the
    support's monotonic constraints (None: none). A support of one feature
    is the start itself (no CCCP).

    Returns
    -------
    wk : ndarray of shape (k,)
        The split's weights on the support's features.
    b : float
        Its bias on the centred rows.
    n_iter : int
        CCCP outer iterations run.
    pays : bool
        Whether the split beats the start (:func:`dense_oblique_pays`).
    """
    k = Xs.shape[1]
    wk = np.zeros(k)
    wk[0] = sign
    if k == 1:
        return wk, -threshold * sign, 0, False
    b, n_iter, _ = cccp(
        Xs, ys, ws, s, wk, -threshold * sign, theta0, theta1, params, state, history, cst
    )
    pays = dense_oblique_pays(Xs, ys, ws, s, wk, b, 0, threshold, n_classes, params)
    return wk, b, n_iter, pays


@jit_inline
def place_support(w, support, wk):
    """Write the support's weights ``wk`` to ``w`` (every feature; 0 off the support)."""
    w[:] = 0.0
    for j in range(support.shape[0]):
        w[support[j]] = wk[j]


@jit
def oriented_start(w, feature, cst, theta0, theta1):
    """Write the axis-aligned start on ``feature`` to ``w``; its leaf parameters, oriented.

    The start sends a row right when ``sign * (x[feature] - threshold) > 0``,
    ``sign`` 1 unless ``feature`` is constrained to fall (-1: the right child
    holds the smaller values, which then predict more, the orientation every
    split of a constrained fit keeps; :mod:`obliquetrees.co2._monotone`).
    ``w`` is zero but ``w[feature] = sign``; ``theta0, theta1`` (fit left and
    right of ``x[feature] <= threshold``) are returned swapped when ``sign``
    is -1. Returns ``(theta0, theta1)``.
    """
    sign = axis_split_weights(w, feature, cst)
    if sign < 0.0:
        return theta1, theta0
    return theta0, theta1


@jit_inline
def axis_split_weights(w, feature, cst):
    """``w`` the axis-aligned split on ``feature`` (:func:`oriented_start`); returns its sign."""
    sign = start_sign(cst, feature)
    w[:] = 0.0
    w[feature] = sign
    return sign


@jit
def fit_stump(
    Xc, yc, wc, s, w, support, feature, threshold, theta0, theta1, n_classes, params, state,
    history, cst,
):  # fmt: skip
    """The node's stump on its ``s`` centred fit rows ``Xc``: CCCP on every feature or a support.

    ``w`` holds the axis-aligned start (:func:`oriented_start`) and
    receives the stump's weights on every feature (0 off the ``support``,
    :func:`split_support`; an empty one keeps the start, no CCCP). With
    every feature in the support this is the paper's
    stump on the block itself, whose rows the CCCP reorders in place with
    ``yc`` and ``wc``; otherwise :func:`fit_support` on a copy of the
    support's columns, and the rows keep their order.

    The CCCP keeps the split compatible with the monotonic constraints ``cst``
    (None: none; :func:`~obliquetrees.co2._kernels.cccp`), on the inputs
    :func:`~obliquetrees.co2._monotone.node_constraints` leaves it.

    Returns ``(b, n_iter, pays)``: the bias on the centred rows, the CCCP's
    outer iterations and whether the split beats the start
    (:func:`dense_oblique_pays`; False for a support of at most one feature).
    """
    p = w.shape[0]
    sign = w[feature]
    fit_cst = node_constraints(cst, feature)
    if support.shape[0] == 0:
        return -threshold * sign, 0, False
    if support.shape[0] == p:
        b, n_iter, _ = cccp(
            Xc, yc, wc, s, w, -threshold * sign, theta0, theta1, params, state, history, fit_cst
        )
        pays = dense_oblique_pays(Xc, yc, wc, s, w, b, feature, threshold, n_classes, params)
        return b, n_iter, pays
    Xs, ys, ws = support_rows(Xc, yc, wc, s, support)
    wk, b, n_iter, pays = fit_support(
        Xs, ys, ws, s, sign, threshold, theta0, theta1, n_classes, params, state, history,
        on_support(fit_cst, support),
    )  # fmt: skip
    place_support(w, support, wk)
    return b, n_iter, pays


@jit
def oblique_pays(yc, wc, s, right_axis, right, k_used, n_classes, params):
    """Whether the oblique split beats the axis-aligned start by ``params.oblique_penalty``.

    ``right`` and ``right_axis`` are the sides of the node's ``s`` fit rows
    (targets ``yc``, weights ``wc``) under the oblique split, of ``k_used``
    nonzero weights, and under the axis-aligned start. The oblique split is
    kept when the log-likelihood it gains over the start
    (:func:`~obliquetrees._training.axis_split.split_gain`, nats) exceeds
    ``oblique_penalty`` per weight beyond the first. Always True when
    ``oblique_penalty`` is negative (None: the paper's rule, the oblique
    split is always taken).
    """
    if params.oblique_penalty < 0.0:
        return True
    penalty = params.oblique_penalty * (k_used - 1)
    return split_gain(yc, wc, s, right_axis, right, n_classes) > penalty


@jit
def dense_oblique_pays(X, yc, wc, s, w, b, feature, threshold, n_classes, params):
    """:func:`oblique_pays` of the split ``(w, b)`` on the centred fit rows ``X[:s]``.

    The axis-aligned start sends a row right when its column ``feature``
    exceeds ``threshold``.
    """
    if params.oblique_penalty < 0.0 or tests_out_of_bag(params):
        return True
    right = np.empty(s, dtype=np.bool_)
    right_axis = np.empty(s, dtype=np.bool_)
    k = X.shape[1]
    for t in range(s):
        z = b
        for j in range(k):
            z += w[j] * X[t, j]
        right[t] = z > 0.0
        right_axis[t] = X[t, feature] > threshold
    return oblique_pays(yc, wc, s, right_axis, right, np.count_nonzero(w), n_classes, params)


def node_presorted(presorted, rows, start, end):
    """The node's view of the tree's presorted rows, for the axis-aligned search (numba only).

    ``presorted`` None gives None (the search sorts each feature's values).
    Otherwise :func:`~obliquetrees.co2._grow.presorted_rows`'s tuple, whose
    first two entries are ``sorted_rows`` and ``local``: records each of the
    node's rows ``rows[start:end]`` at its position in the node block
    (``local[row] = t``, the block's rows being gathered in that order) and
    returns ``(sorted_rows[:, start:end], local)``, what
    :func:`~obliquetrees._training.axis_split.node_order` reads.
    """
    raise NotImplementedError("node_presorted is only callable from numba kernels")


@jit_overload(node_presorted, inline="always")
def _node_presorted(presorted, rows, start, end):
    if is_none_type(presorted):
        return lambda presorted, rows, start, end: None

    def view(presorted, rows, start, end):
        sorted_rows, local = presorted[0], presorted[1]
        for t in range(end - start):
            local[rows[start + t]] = t
        return sorted_rows[:, start:end], local

    return view


#: A sampled node's axis-aligned search walks the presorted rows of the whole node
#: (:func:`sample_presorted`) while the node has at most this many rows per sampled row:
#: a walk costs about 1 ns per node row, numba's argsort of the sample 35-90 ns per
#: sampled row (measured on node-sized arrays), so up to 16 the walk is the cheaper.
SAMPLE_WALK_RATIO = 16


def sample_presorted(presorted, rows, start, end, pick):
    """A sampled node's view of the tree's presorted rows (numba only).

    As :func:`node_presorted` for the sample ``rows[start + pick]`` of the
    node's rows, gathered in the order of ``pick``: records each sampled
    row's position in the sample (``local[row] = k``, -1 for the node's
    other rows) and returns ``(sorted_rows[:, start:end], local, walk)``,
    ``walk`` true when the node has at most :data:`SAMPLE_WALK_RATIO` rows
    per sampled row (:func:`~obliquetrees._training.axis_split.node_order`
    then walks the node's order instead of sorting the sample's values).
    None for None.
    """
    raise NotImplementedError("sample_presorted is only callable from numba kernels")


@jit_overload(sample_presorted, inline="always")
def _sample_presorted(presorted, rows, start, end, pick):
    if is_none_type(presorted):
        return lambda presorted, rows, start, end, pick: None

    def view(presorted, rows, start, end, pick):
        sorted_rows, local = presorted[0], presorted[1]
        walk = end - start <= SAMPLE_WALK_RATIO * pick.shape[0]
        if walk:
            for t in range(start, end):
                local[rows[t]] = -1
            for k in range(pick.shape[0]):
                local[rows[start + pick[k]]] = k
        return sorted_rows[:, start:end], local, walk

    return view


@jit
def split_node(data, start, end, node, tree_seed, table, params, cst=None, presorted=None):
    """Fit the CO2 stump of one node and partition its rows in place.

    ``data`` is ``(source, y, row_weight, rows, oob)``: the node's rows are
    ``rows[start:end]`` of the standardised input ``source``
    (:func:`dense_source`'s ``(X, mean, scale)``) with labels ``y`` and weights
    ``row_weight``; ``oob`` its out-of-bag rows, which
    ``oblique_test="out_of_bag"`` judges the oblique split on
    (:func:`~obliquetrees.co2._oob.oob_keeps`). ``table`` is the node
    table's payload ``(weights, bias, value, n_node_samples)``. Writes the
    node's class distribution (:func:`node_value`) and, for a split, its
    hyperplane to ``weights[node]`` and ``bias[node]``; reorders ``rows[start:end]`` so
    that the left child's rows come first. The node's random numbers are
    drawn from ``node_seed(tree_seed, node)``. ``params`` is the fit's
    :class:`~obliquetrees.co2.training.CO2KernelParams` (the estimator's
    parameters by their names; :func:`~obliquetrees.co2._kernels.cccp`
    gets it too).

    A node of more than ``params.max_cccp_samples`` rows (when not -1) fits
    its stump, the initial axis-aligned split and the CCCP, on that many of
    its rows (:func:`split_sampled`); the centring, the degenerate-split test
    and the partition use all of them. Otherwise, or when the sample has no
    axis-aligned split, the stump is fit on all rows (:func:`split_block`).

    ``cst``, the monotonic constraint of each input (int8; None: none), keeps
    the split compatible (:mod:`obliquetrees.co2._monotone`): the
    axis-aligned start among the thresholds whose sides are in order,
    oriented (:func:`oriented_start`), the CCCP projected on the compatible
    weights, and an optimised split whose sides are out of order falls back
    to the start.

    The stump is optimised on the node's rows centred on their weighted mean
    (the homogeneous coordinate relative to the node's centre; see the
    estimator's notes); the centring is folded into the stored bias.

    ``presorted``, the tree's rows in order of every feature
    (:func:`~obliquetrees.co2._grow.presorted_rows`; None: none), spares the
    axis-aligned search of a node searched on all its rows its sorts
    (:func:`node_presorted`); a sampled node's search walks them for its
    sample when that is cheaper than sorting it (:func:`sample_presorted`).

    Returns
    -------
    n_left : int
        Number of rows going left; -1 if the node is a leaf.
    n_iter : int
        CCCP outer iterations run.
    oblique : bool
        False if the CCCP split was degenerate (one side smaller than
        ``min_samples_leaf``, or empty) and the initial axis-aligned split is
        used instead.
    """
    _, y, row_weight, rows, _ = data
    weights, bias, value, n_node_samples = table
    m = end - start
    n_present = node_value(y, row_weight, rows, start, end, node, value, n_node_samples)
    if n_present <= 1 or m < params.min_samples_split or m < 2 * params.min_samples_leaf:
        return -1, 0, False
    if 0 <= params.max_cccp_samples < m:
        n_left, n_iter, oblique = split_sampled(
            data, start, end, node, tree_seed, table, params, cst, presorted
        )
        if n_left != NO_SAMPLE_SPLIT:
            return n_left, n_iter, oblique
    return split_block(data, start, end, node, tree_seed, table, params, cst, presorted)


@jit_numpy_errors  # vectorised standardisation (standardized_row); node weight > 0
def split_sampled(data, start, end, node, tree_seed, table, params, cst=None, presorted=None):
    """:func:`split_node` for a node above ``params.max_cccp_samples`` rows.

    The stump (initial axis-aligned split, leaf parameters and CCCP) is fit
    on ``max_cccp_samples`` distinct rows drawn uniformly
    (:func:`cccp_rows`), centred on the sample's weighted mean (the centring
    only conditions the CCCP, the stored bias is uncentred; the mean of all
    the node's rows cost a pass over them; a sample of zero weight is not
    centred).
    The split found is then applied to every row of the node, read from
    ``X`` without a copy: the side of each row is computed once, on the
    standardised (uncentred) rows with the centring folded into the bias, and both the
    degenerate-split test and the partition use it. Returns
    ``(NO_SAMPLE_SPLIT, 0, False)``, writing nothing, when the sample has no
    axis-aligned split (e.g. ``min_samples_leaf`` above half the sample), else
    :func:`split_node`'s values. ``presorted`` as :func:`split_node`'s: the
    sample's axis-aligned search reads it (:func:`sample_presorted`).
    """
    source, y, row_weight, rows, _ = data
    # indexed, not unpacked: with ``weights, bias, value, _ = table`` numba 0.68's dead-code
    # elimination dropped the store to ``bias`` in this kernel (its alias analysis lost the
    # argument behind the unpacked name; test_grown_tree_partitions_as_stored pins it)
    weights, bias, value = table[0], table[1], table[2]
    m = end - start
    p = source[0].shape[1]
    n_classes = value.shape[1]
    xr = np.empty(p)
    state = np.empty(1, dtype=np.uint64)
    state[0] = node_seed(tree_seed, node)
    pick = cccp_rows(m, params.max_cccp_samples, state)
    s = pick.shape[0]
    Xc = np.empty((s, p))
    yc = empty_targets(y, s)
    wc = np.empty(s)
    # the sample, standardised, and its weighted mean summed in the same loop
    mu = np.zeros(p)
    tw = 0.0
    for t in range(s):
        if t + PREFETCH_DISTANCE < s:  # the sample's rows: ascending in rows, random in X
            prefetch_row(source, rows[start + pick[t + PREFETCH_DISTANCE]])
        r = rows[start + pick[t]]
        copy_target(yc, t, y, r)
        wt = row_weight[r]
        wc[t] = wt
        tw += wt
        standardized_row_at(source, r, Xc, t)
        for j in range(p):
            mu[j] += wt * Xc[t, j]
    for j in range(p):
        mu[j] = mu[j] / tw if tw > 0.0 else 0.0
    for t in range(s):
        for j in range(p):
            Xc[t, j] -= mu[j]
    scores = candidate_scores(p, params)
    feature, threshold, _ = ranked_axis_split(
        Xc, yc, wc, s, n_classes, params.max_features, params.min_samples_leaf, state, scores,
        cst, sample_presorted(presorted, rows, start, end, pick),
    )  # fmt: skip
    if feature < 0:
        return NO_SAMPLE_SPLIT, 0, False
    w = weights[node]
    theta0, theta1 = oriented_start(
        w, feature, cst, *init_theta(Xc, yc, wc, s, feature, threshold, n_classes, THETA_PRIOR)
    )
    history = np.empty(params.max_cccp_iter + 1)
    support = split_support(scores, feature, p, m, params)
    b, n_iter, pays = fit_stump(
        Xc, yc, wc, s, w, support, feature, threshold, theta0, theta1, n_classes, params, state,
        history, cst,
    )  # fmt: skip
    pays = pays and oob_keeps(data, w, b, mu, feature, threshold, n_classes, params)
    for j in range(p):
        b -= w[j] * mu[j]  # back to uncentred inputs
    right = np.empty(m, dtype=np.bool_)
    n_right = 0
    for t in range(m if pays else 0):  # the oblique split's sides, if it may be kept
        prefetch_ahead(source, rows, start + t, end)
        standardized_row(source, rows[start + t], xr)
        z = b
        for j in range(p):
            z += w[j] * xr[j]
        right[t] = z > 0.0
        n_right += right[t]
    oblique = pays and min(n_right, m - n_right) >= max(params.min_samples_leaf, 1)
    oblique = oblique and ordered(cst, w, y, row_weight, rows, start, right)
    if not oblique:  # the axis-aligned split, on the uncentred rows
        sign = axis_split_weights(w, feature, cst)
        b = sign * (-threshold - mu[feature])
        for t in range(m):
            right[t] = b + sign * standardized(source, rows[start + t], feature) > 0.0
    bias[node] = b
    return partition_by_side(rows, start, right), n_iter, oblique


@jit_numpy_errors  # vectorised standardisation (standardized_row); node weight > 0
def split_block(data, start, end, node, tree_seed, table, params, cst=None, presorted=None):
    """:func:`split_node` on a gathered, centred copy of all the node's rows.

    The caller has written the node's value and made the leaf tests. A node
    of more than ``params.max_cccp_samples`` rows (when not -1) that comes
    here (its sample had no axis-aligned split) runs its CCCP on that many
    of them (:func:`cccp_rows`, drawn after the axis-aligned search).

    The rows are standardised once as they are gathered; a block of at most
    :data:`MAX_KEPT_BLOCK` entries keeps them (before centring) for the
    partition, which then needs no division (the same bits as standardising
    them again).
    """
    source, y, row_weight, rows, _ = data
    weights, bias, value, _ = table
    m = end - start
    n_classes = value.shape[1]
    p = source[0].shape[1]
    # the node's rows, centred on their weighted mean: gathered standardised, their
    # mean summed in the same loop, then subtracted
    yb = empty_targets(y, m)
    wb = np.empty(m)
    Xb = np.empty((m, p))
    keep = m * p <= MAX_KEPT_BLOCK
    Xu = np.empty((m if keep else 0, p))  # the uncentred rows, for the partition
    mu = np.zeros(p)
    tw = 0.0
    for t in range(m):
        prefetch_ahead(source, rows, start + t, end)
        r = rows[start + t]
        copy_target(yb, t, y, r)
        wt = row_weight[r]
        wb[t] = wt
        tw += wt
        # into the block's row t, not through a view of it (a view per row costs two
        # atomic reference counts)
        xt = Xu if keep else Xb
        standardized_row_at(source, r, xt, t)
        for j in range(p):
            mu[j] += wt * xt[t, j]
    for j in range(p):
        mu[j] /= tw
    for t in range(m):
        if keep:
            for j in range(p):
                Xb[t, j] = Xu[t, j] - mu[j]
        else:
            for j in range(p):
                Xb[t, j] -= mu[j]
    state = np.empty(1, dtype=np.uint64)
    state[0] = node_seed(tree_seed, node)
    scores = candidate_scores(p, params)
    feature, threshold, _ = ranked_axis_split(
        Xb, yb, wb, m, n_classes, params.max_features, params.min_samples_leaf, state, scores,
        cst, node_presorted(presorted, rows, start, end),
    )  # fmt: skip
    if feature < 0:
        return -1, 0, False
    # initial stump: unit vector on the feature (oriented), bias = -threshold
    w = weights[node]
    theta0, theta1 = oriented_start(
        w, feature, cst, *init_theta(Xb, yb, wb, m, feature, threshold, n_classes, THETA_PRIOR)
    )
    history = np.empty(params.max_cccp_iter + 1)
    pick = cccp_rows(m, params.max_cccp_samples, state)
    if pick.shape[0] < m:  # a large node: the CCCP fits on a uniform subsample of its rows
        Xc, yc, wc = take_block(Xb, yb, wb, pick)
    else:
        Xc, yc, wc = Xb, yb, wb
    s = pick.shape[0]
    support = split_support(scores, feature, p, m, params)
    b, n_iter, pays = fit_stump(
        Xc, yc, wc, s, w, support, feature, threshold, theta0, theta1, n_classes, params, state,
        history, cst,
    )  # fmt: skip
    pays = pays and oob_keeps(data, w, b, mu, feature, threshold, n_classes, params)
    n_right = 0
    right = np.empty(m, dtype=np.bool_)
    for t in range(m if pays else 0):  # the oblique split's sides, if it may be kept
        z = b
        for j in range(p):
            z += w[j] * Xb[t, j]
        right[t] = z > 0.0
        n_right += right[t]
    oblique = pays and min(n_right, m - n_right) >= max(params.min_samples_leaf, 1)
    oblique = oblique and ordered(cst, w, yb, wb, NO_ROWS, 0, right)
    if not oblique:
        b = -threshold * axis_split_weights(w, feature, cst)
    for j in range(p):
        b -= w[j] * mu[j]  # back to uncentred inputs
    bias[node] = b
    if keep:
        return partition_kept(Xu, w, b, rows, start, end), n_iter, oblique
    # in-place partition of rows[start:end]: left rows first
    xr = np.empty(p)
    lo = start
    hi = end - 1
    while lo <= hi:
        prefetch_ahead(source, rows, lo, hi + 1)
        r = rows[lo]
        standardized_row(source, r, xr)
        z = b
        for j in range(p):
            z += w[j] * xr[j]
        if z > 0.0:
            rows[lo] = rows[hi]
            rows[hi] = r
            hi -= 1
        else:
            lo += 1
    return lo - start, n_iter, oblique


@jit
def partition_kept(Xu, w, b, rows, start, end):
    """Partition ``rows[start:end]`` by ``w.x + b > 0``, row ``t`` of the node in ``Xu[t]``.

    ``Xu`` holds the node's standardised, uncentred rows in their order before
    the partition. Reorders the rows as :func:`split_block`'s partition of
    re-standardised rows does (the same swaps: each row's side is computed
    first, then the sides move with the rows) and returns the number of rows
    going left.
    """
    m = end - start
    p = w.shape[0]
    right = np.empty(m, dtype=np.bool_)
    for t in range(m):
        z = b
        for j in range(p):
            z += w[j] * Xu[t, j]
        right[t] = z > 0.0
    return partition_by_side(rows, start, right)


@jit_inline
def partition_by_side(rows, start, right):
    """Reorder ``rows[start:start + m]`` in place, left rows first (``right[t]``: row ``t``'s side).

    ``right`` (length ``m``) is overwritten: the sides move with their rows.
    Returns the number of rows going left.
    """
    lo = 0
    hi = right.shape[0] - 1
    while lo <= hi:
        if right[lo]:
            r = rows[start + lo]
            rows[start + lo] = rows[start + hi]
            rows[start + hi] = r
            right[lo] = right[hi]
            right[hi] = True
            hi -= 1
        else:
            lo += 1
    return lo
