"""Numba kernels of CO2 Forest (Norouzi et al.): the stump's starting point.

Each node's stump starts from the best axis-aligned split (by information
gain, or for targets by squared error, among ``max_features`` random
features, as scikit-learn's splitter draws them) and from leaf parameters fit
to each side of it (:func:`init_theta`: log class frequencies, or mean
targets). The CCCP then optimises the stump
(:mod:`obliquetrees.co2._kernels`). :func:`ranked_axis_split` also scores
every candidate (the split's support is chosen from them), and
:func:`split_gain` measures an oblique split against the start (the
axis-or-oblique test).

Importing this module imports numba; the estimator imports it lazily.
"""

from collections import namedtuple

import numpy as np
from numba import types

from obliquetrees._core._jit import is_none_type, jit, jit_inline, jit_overload
from obliquetrees._core._random import random_int
from obliquetrees._training.targets import _by_target, _is_classes, _stub, init_leaves

#: Two values closer than this are treated as equal by the axis-aligned
#: split search (scikit-learn's FEATURE_THRESHOLD).
FEATURE_THRESHOLD = 1e-7

#: Pseudo-count added to the class counts of each side of the initial
#: axis-aligned split before taking logs (theta0/theta1 initialisation): the
#: paper initialises with the empirical class log-probabilities, which are
#: -inf for absent classes.
THETA_PRIOR = 1.0


# ----------------------------------------------------------- small helpers
@jit
def xlogx(x):
    return x * np.log(x) if x > 0.0 else 0.0


@jit
def class_histogram(yb, wb, m, n_classes):
    """Weighted class counts of the first ``m`` samples."""
    hist = np.zeros(n_classes)
    for i in range(m):
        hist[yb[i]] += wb[i]
    return hist


# ------------------------------------------------------ axis-aligned init
@jit
def scan_start(yb, wb, m, n_classes):
    """What every feature's scan of :func:`scan_feature` starts from.

    Returns the node's weighted class histogram, its total, the sum of its
    ``x log x`` terms, scratch for the class counts of the two sides and the
    table ``xlogx(k)`` for ``k = 0 .. total`` when every weight is a whole
    number (bootstrap counts), else an empty table (:func:`xlogx_table`).
    """
    hist = class_histogram(yb, wb, m, n_classes)
    total = 0.0
    s_tot = 0.0
    for k in range(n_classes):
        total += hist[k]
        s_tot += xlogx(hist[k])
    sides = np.zeros((4, n_classes))  # class counts and x log x terms, left and right
    return hist, total, s_tot, sides, xlogx_table(wb, m, total)


#: Largest node weight for which :func:`xlogx_table` builds a table (8 bytes an entry).
MAX_XLOGX_TABLE = 1 << 20


@jit
def xlogx_table(wb, m, total):
    """``xlogx(k)`` for ``k = 0 .. total`` if the first ``m`` weights are whole numbers.

    Then every class count, side count and side total of a scan is a whole
    number no larger than ``total`` (sums and differences of whole float64
    numbers below 2**53 are exact), and looking its ``x log x`` up returns the
    bits :func:`xlogx` computes (the table is made by it): the scan is exact
    with ``total + 1`` logarithms instead of four per sample and feature. Empty
    (the scan takes its logarithms) if a weight is not whole or ``total``
    exceeds :data:`MAX_XLOGX_TABLE`.
    """
    if not total <= MAX_XLOGX_TABLE:
        return np.empty(0)
    for i in range(m):
        if wb[i] != np.floor(wb[i]) or wb[i] < 0.0:
            return np.empty(0)
    n = int(total) + 1
    table = np.empty(n)
    for k in range(n):
        table[k] = xlogx(float(k))
    return table


@jit_inline
def xlogx_lookup(x, table):
    """:func:`xlogx` of a count ``x``, read from :func:`xlogx_table`'s ``table`` when it has one."""
    if table.shape[0] > 0:
        return table[int(x)]
    return xlogx(x)


@jit_inline
def draw_feature(feats, k, state):
    """Draw the ``k``-th feature without replacement (partial Fisher-Yates on ``feats``)."""
    p = feats.shape[0]
    j = k + random_int(state, p - k)
    f = feats[j]
    feats[j] = feats[k]
    feats[k] = f
    return f


def node_order(presorted, vals, f, m):
    """The positions of the node's ``m`` rows in increasing order of feature ``f`` (numba only).

    ``presorted`` None: ``np.argsort(vals[:m])``, ``vals`` holding the
    feature's node values. Otherwise ``(sorted_rows, local)``: the node's
    rows (ids) in increasing order of each feature (``sorted_rows[f, :m]``,
    ties by row id) and each row's position in the node block
    (``local[row]``), read in O(m) instead of sorted in O(m log m). Both are
    orders of the same values; they differ only among equal values.

    ``(sorted_rows, local, walk)`` is a sample of ``m`` of the node's rows
    (``sorted_rows[f]`` all of the node's rows, ``local[row]`` the row's
    position in the sample or -1): with ``walk`` the sample's positions in
    the order of the node's rows (O(node rows), ties by row id), else
    ``np.argsort(vals[:m])``.
    """
    raise NotImplementedError("node_order is only callable from numba kernels")


#: A sparse node's columns as CSC (``cptr``, ``crow``: node-local rows, ``cval``: the
#: stored entries before centring) and ``mu``, its column means (:func:`node_column`):
#: what the axis-aligned search of a sparse node without presorted rows scans, column by
#: column, without writing the node's values (:func:`scan_column`).
SparseColumns = namedtuple("SparseColumns", ["cptr", "crow", "cval", "mu"])


def _is_sparse_columns(presorted):
    return isinstance(presorted, types.BaseNamedTuple) and presorted.instance_class is SparseColumns


@jit_overload(node_order, inline="always")
def _node_order(presorted, vals, f, m):
    if is_none_type(presorted):
        return lambda presorted, vals, f, m: np.argsort(vals[:m])

    if len(presorted) == 3:

        def sampled(presorted, vals, f, m):
            sorted_rows, local, walk = presorted
            if not walk:
                return np.argsort(vals[:m])
            order = np.empty(m, dtype=np.int64)
            k = 0
            for r in sorted_rows[f]:
                t = local[r]
                if t >= 0:
                    order[k] = t
                    k += 1
            return order

        return sampled

    def read(presorted, vals, f, m):
        sorted_rows, local = presorted
        order = np.empty(m, dtype=np.int64)
        for k in range(m):
            order[k] = local[sorted_rows[f, k]]
        return order

    return read


@jit
def scan_feature(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f):
    """Best threshold of one feature whose node values are ``vals[:m]``.

    ``start`` is :func:`scan_start`'s result. Only a split whose impurity is
    below ``best_imp`` (the best of the features scanned before) counts, and
    with a monotonic ``direction`` (1 or -1; 0: none) only a split whose
    sides' fractions of class 1 are in that order (:func:`wrong_order`).
    The values are visited in :func:`node_order` (``presorted``, feature ``f``).

    Returns
    -------
    visited : int
        0 if the feature is constant in the node (it does not count towards
        ``max_features``), else 1.
    impurity : float
        The new best impurity (``best_imp`` if no split of this feature beats it).
    threshold : float
        The threshold of that split (meaningless if none beat ``best_imp``).
    """
    hist, total, s_tot, sides, table = start
    cl, cr, xl, xr = sides[0], sides[1], sides[2], sides[3]
    n_classes = hist.shape[0]
    best_thr = 0.0
    if is_constant(vals, m):
        return 0, best_imp, best_thr  # constant in this node: does not count
    order = node_order(presorted, vals, f, m)
    if n_classes == 2 and table.shape[0] > 0:  # (fractional weights: 6 logs a threshold)
        return scan_binary(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, order)
    reset_sides(hist, cl, cr, xl, xr)
    s_l = 0.0
    s_r = s_tot
    n_l = 0.0
    n_r = total
    for t in range(m - 1):
        i = order[t]
        wt = wb[i]
        c = yb[i]  # move_class's lines, kept in this loop for speed (its docstring)
        s_l -= xl[c]
        cl[c] += wt
        xl[c] = xlogx_lookup(cl[c], table)
        s_l += xl[c]
        s_r -= xr[c]
        cr[c] -= wt
        xr[c] = xlogx_lookup(cr[c], table)
        s_r += xr[c]
        n_l += wt
        n_r -= wt
        v_next = vals[order[t + 1]]
        if v_next <= vals[i] + FEATURE_THRESHOLD:
            continue
        if t + 1 < min_samples_leaf or m - t - 1 < min_samples_leaf:
            continue
        if direction != 0 and wrong_order(direction, cl[1], n_l, cr[1], n_r):
            continue
        imp = (xlogx_lookup(n_l, table) - s_l) + (xlogx_lookup(n_r, table) - s_r)
        if imp < best_imp:
            best_imp = imp
            best_thr = midpoint(vals[i], v_next)
    return 1, best_imp, best_thr


@jit_inline
def scan_binary(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, order):
    """:func:`scan_feature` of two classes and whole weights (an ``x log x`` table),
    the values visited in ``order``.

    The steps only add each row's weight to the left side's total and class-1
    weight (no dependency through memory, no logarithm); each threshold's
    impurity takes the six ``x log x`` terms of the sides' counts afresh, so
    two thresholds that split the rows alike score the same bits.
    """
    hist, total, _, _, table = start
    h1 = hist[1]
    best_thr = 0.0
    n_l = 0.0
    c1_l = 0.0
    for t in range(m - 1):
        i = order[t]
        wt = wb[i]
        n_l += wt
        c1_l += wt * yb[i]  # class index 0 or 1
        v_next = vals[order[t + 1]]
        if v_next <= vals[i] + FEATURE_THRESHOLD:
            continue
        if t + 1 < min_samples_leaf or m - t - 1 < min_samples_leaf:
            continue
        imp = binary_impurity(n_l, c1_l, total, h1, table, direction)
        if imp < best_imp:
            best_imp = imp
            best_thr = midpoint(vals[i], v_next)
    return 1, best_imp, best_thr


@jit_inline
def reset_sides(hist, cl, cr, xl, xr):
    """Every class on the right side: :func:`move_class`'s counts before a scan."""
    for c in range(hist.shape[0]):
        cl[c] = 0.0
        cr[c] = hist[c]
        xl[c] = 0.0
        xr[c] = xlogx(hist[c])


@jit_inline
def move_class(c, wt, cl, cr, xl, xr, s_l, s_r, table):
    """Move weight ``wt`` of class ``c`` from the right side to the left; returns the sides'
    new sums of ``x log x``.

    ``cl``, ``cr`` are the sides' class counts and ``xl``, ``xr`` cache their
    ``x log x`` (:func:`scan_feature`'s ``sides``): two logs a step, not four.
    For :func:`scan_sparse_classes`, whose steps are few. :func:`scan_feature`
    keeps the same lines in its loop: through this helper (and
    :func:`classes_impurity`) its dense scan took up to twice the time
    (measured on 4 classes, 4000 x 20).
    """
    s_l -= xl[c]
    cl[c] += wt
    xl[c] = xlogx_lookup(cl[c], table)
    s_l += xl[c]
    s_r -= xr[c]
    cr[c] -= wt
    xr[c] = xlogx_lookup(cr[c], table)
    s_r += xr[c]
    return s_l, s_r


@jit_inline
def classes_impurity(n_l, n_r, s_l, s_r, sides, table, direction):
    """:func:`scan_feature`'s impurity of the split with side weights ``n_l``, ``n_r`` and sums
    of ``x log x`` ``s_l``, ``s_r`` (``inf`` if out of the monotonic ``direction``)."""
    if direction != 0 and wrong_order(direction, sides[0, 1], n_l, sides[1, 1], n_r):
        return np.inf
    return (xlogx_lookup(n_l, table) - s_l) + (xlogx_lookup(n_r, table) - s_r)


@jit_inline
def binary_impurity(n_l, c1_l, total, h1, table, direction):
    """:func:`scan_binary`'s impurity of the split whose left side weighs ``n_l``, ``c1_l`` of
    it class 1 (``inf`` if the sides are out of the monotonic ``direction``)."""
    n_r = total - n_l
    c1_r = h1 - c1_l
    if direction != 0 and wrong_order(direction, c1_l, n_l, c1_r, n_r):
        return np.inf
    left = xlogx_lookup(n_l, table) - (xlogx_lookup(n_l - c1_l, table) + xlogx_lookup(c1_l, table))
    right = xlogx_lookup(n_r, table) - (xlogx_lookup(n_r - c1_r, table) + xlogx_lookup(c1_r, table))
    return left + right


@jit_inline
def wrong_order(direction, left_sum, left_weight, right_sum, right_weight):
    """Whether the sides' means ``left_sum / left_weight`` and ``right_sum / right_weight``
    are out of the monotonic ``direction`` (1: the left, smaller values, must not be above).

    Compared as products, without a division (weights are positive).
    """
    return direction * (left_sum * right_weight - right_sum * left_weight) > 0.0


def scan_direction(cst, f):
    """The monotonic direction of feature ``f``: ``cst[f]``, 0 when ``cst`` is None (numba only)."""
    raise NotImplementedError("scan_direction is only callable from numba kernels")


@jit_overload(scan_direction, inline="always")
def _scan_direction(cst, f):
    if is_none_type(cst):
        return lambda cst, f: 0
    return lambda cst, f: int(cst[f])


@jit_inline
def is_constant(vals, m):
    """Whether ``vals[:m]`` spans no more than ``FEATURE_THRESHOLD``."""
    lo = np.inf
    hi = -np.inf
    for i in range(m):
        v = vals[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    return hi <= lo + FEATURE_THRESHOLD


@jit_inline
def midpoint(v, v_next):
    """The threshold between consecutive values ``v < v_next`` (``v`` if rounding hits an end)."""
    thr = 0.5 * (v + v_next)
    if thr >= v_next or thr < v:
        thr = v
    return thr


@jit
def scan_start_squared(yb, wb, m, n_outputs):
    """:func:`scan_start` for targets: the weighted target sums, the total weight, 0 and scratch."""
    sums = np.zeros(n_outputs)
    total = 0.0
    for i in range(m):
        total += wb[i]
        for k in range(n_outputs):
            sums[k] += wb[i] * yb[i, k]
    return sums, total, 0.0, np.zeros((2, n_outputs))


@jit
def scan_feature_squared(
    vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f
):
    """:func:`scan_feature` for targets: the squared-error criterion.

    The impurity compared is ``-(||S_L||^2 / N_L + ||S_R||^2 / N_R)`` (``S``:
    weighted target sums, ``N``: weights), the weighted sum of squared errors
    of the two sides up to a constant of the node.
    """
    sums, total, _, sides = start
    sl, sr = sides[0], sides[1]
    n_outputs = sums.shape[0]
    best_thr = 0.0
    if is_constant(vals, m):
        return 0, best_imp, best_thr
    order = node_order(presorted, vals, f, m)
    for k in range(n_outputs):
        sl[k] = 0.0
        sr[k] = sums[k]
    n_l = 0.0
    n_r = total
    for t in range(m - 1):
        i = order[t]
        wt = wb[i]
        for k in range(n_outputs):
            sl[k] += wt * yb[i, k]
            sr[k] -= wt * yb[i, k]
        n_l += wt
        n_r -= wt
        v_next = vals[order[t + 1]]
        if v_next <= vals[i] + FEATURE_THRESHOLD:
            continue
        if t + 1 < min_samples_leaf or m - t - 1 < min_samples_leaf:
            continue
        if not (n_l > 0.0 and n_r > 0.0):
            continue
        if direction != 0 and wrong_order(direction, sl[0], n_l, sr[0], n_r):
            continue
        ql = 0.0
        qr = 0.0
        for k in range(n_outputs):
            ql += sl[k] * sl[k]
            qr += sr[k] * sr[k]
        imp = -(ql / n_l + qr / n_r)
        if imp < best_imp:
            best_imp = imp
            best_thr = midpoint(vals[i], v_next)
    return 1, best_imp, best_thr


@jit
def squared_impurity(sl, sr, n_l, n_r):
    """:func:`scan_feature_squared`'s impurity of the sides with target sums ``sl``, ``sr``
    and weights ``n_l``, ``n_r`` (a call per threshold: for :func:`scan_sparse_targets`,
    whose thresholds are few; the dense scan keeps this loop in its own)."""
    ql = 0.0
    qr = 0.0
    for k in range(sl.shape[0]):
        ql += sl[k] * sl[k]
        qr += sr[k] * sr[k]
    return -(ql / n_l + qr / n_r)


@jit_inline
def _sparse_walk(columns, f, m):
    """The order in which :func:`scan_sparse_classes` and :func:`scan_sparse_targets` visit
    column ``f`` of a sparse node of ``m`` rows (:class:`SparseColumns`).

    A row's node-centred value is its stored entry less the column's mean, or
    the mean's negative when it stores none (:func:`node_column`); subtracting
    the mean keeps the order of floats. So in increasing value: the stored
    entries below 0, the rows without an entry (one value: one group), the
    other stored entries. Returns the first entry's index ``lo``, the number
    ``k`` of entries, their order by value and how many are below 0; the
    groups are read with :func:`_sparse_group`.
    """
    lo = columns.cptr[f]
    k = columns.cptr[f + 1] - lo
    by_value = np.argsort(columns.cval[lo : lo + k])
    n_below = 0
    while n_below < k and columns.cval[lo + by_value[n_below]] < 0.0:
        n_below += 1
    return lo, k, by_value, n_below


@jit_inline
def _sparse_group(columns, f, m, walk, j):
    """Group ``j`` of :func:`_sparse_walk`'s order ``walk``: the stored entry's index (-1 for
    the rows without an entry) and its node-centred value, the bits :func:`node_column`
    writes."""
    lo, k, by_value, n_below = walk
    if k < m:
        if j == n_below:
            return -1, -columns.mu[f]
        if j > n_below:
            j -= 1
    q = lo + by_value[j]
    return q, columns.cval[q] - columns.mu[f]


@jit
def scan_sparse_classes(columns, f, m, yb, wb, start, min_samples_leaf, best_imp, direction):
    """:func:`scan_feature` of column ``f`` of a sparse node (:class:`SparseColumns`), without
    writing the node's values: O(k log k + n_classes) for its ``k`` stored entries, not O(m).

    The rows without an entry hold one value, so no threshold falls among them:
    they move to the left side in one step, their class weights the node's
    less the stored rows'. The same thresholds, in the same order, as
    :func:`scan_feature` reading :func:`node_column`'s values in
    :func:`_sparse_walk`'s order; with two classes and whole weights every sum
    is exact, so the same impurities bit for bit; otherwise the sums are taken
    in another order and may differ from it in the last bits.
    """
    hist, total, s_tot, sides, table = start
    n_classes = hist.shape[0]
    walk = _sparse_walk(columns, f, m)
    n_groups = walk[1] + (1 if walk[1] < m else 0)
    best_thr = 0.0
    lowest = _sparse_group(columns, f, m, walk, 0)[1]
    if _sparse_group(columns, f, m, walk, n_groups - 1)[1] <= lowest + FEATURE_THRESHOLD:
        return 0, best_imp, best_thr  # constant in this node: does not count
    block = hist.copy()  # the class weights of the rows without an entry
    for q in range(walk[0], walk[0] + walk[1]):
        i = columns.crow[q]
        block[yb[i]] -= wb[i]
    binary = n_classes == 2 and table.shape[0] > 0  # as scan_binary: no x log x per step
    cl, cr, xl, xr = sides[0], sides[1], sides[2], sides[3]
    reset_sides(hist, cl, cr, xl, xr)
    s_l = 0.0
    s_r = s_tot
    n_l = 0.0
    n_r = total
    c1_l = 0.0
    n_rows = 0  # rows on the left side
    for j in range(n_groups - 1):
        q, v = _sparse_group(columns, f, m, walk, j)
        if q < 0:
            n_rows += m - walk[1]
            for c in range(n_classes):
                if block[c] != 0.0:
                    n_l += block[c]
                    n_r -= block[c]
                    if not binary:
                        s_l, s_r = move_class(c, block[c], cl, cr, xl, xr, s_l, s_r, table)
            if binary:
                c1_l += block[1]
        else:
            i = columns.crow[q]
            wt = wb[i]
            n_rows += 1
            n_l += wt
            n_r -= wt
            c1_l += wt * yb[i]
            if not binary:
                s_l, s_r = move_class(yb[i], wt, cl, cr, xl, xr, s_l, s_r, table)
        v_next = _sparse_group(columns, f, m, walk, j + 1)[1]
        if v_next <= v + FEATURE_THRESHOLD:
            continue
        if n_rows < min_samples_leaf or m - n_rows < min_samples_leaf:
            continue
        if binary:
            imp = binary_impurity(n_l, c1_l, total, hist[1], table, direction)
        else:
            imp = classes_impurity(n_l, n_r, s_l, s_r, sides, table, direction)
        if imp < best_imp:
            best_imp = imp
            best_thr = midpoint(v, v_next)
    return 1, best_imp, best_thr


@jit
def scan_sparse_targets(columns, f, m, yb, wb, start, min_samples_leaf, best_imp, direction):
    """:func:`scan_sparse_classes` for targets: :func:`scan_feature_squared` of a sparse
    node's column, the rows without an entry moved in one step (their target sums the
    node's less the stored rows'). Its sums may differ from the dense scan's in the last
    bits."""
    sums, total, _, sides = start
    sl, sr = sides[0], sides[1]
    n_outputs = sums.shape[0]
    walk = _sparse_walk(columns, f, m)
    n_groups = walk[1] + (1 if walk[1] < m else 0)
    best_thr = 0.0
    lowest = _sparse_group(columns, f, m, walk, 0)[1]
    if _sparse_group(columns, f, m, walk, n_groups - 1)[1] <= lowest + FEATURE_THRESHOLD:
        return 0, best_imp, best_thr
    block = sums.copy()  # the target sums and weight of the rows without an entry
    block_weight = total
    for q in range(walk[0], walk[0] + walk[1]):
        i = columns.crow[q]
        block_weight -= wb[i]
        for k in range(n_outputs):
            block[k] -= wb[i] * yb[i, k]
    for k in range(n_outputs):
        sl[k] = 0.0
        sr[k] = sums[k]
    n_l = 0.0
    n_r = total
    n_rows = 0
    for j in range(n_groups - 1):
        q, v = _sparse_group(columns, f, m, walk, j)
        if q < 0:
            n_rows += m - walk[1]
            wt = block_weight
            for k in range(n_outputs):
                sl[k] += block[k]
                sr[k] -= block[k]
        else:
            i = columns.crow[q]
            wt = wb[i]
            n_rows += 1
            for k in range(n_outputs):
                sl[k] += wt * yb[i, k]
                sr[k] -= wt * yb[i, k]
        n_l += wt
        n_r -= wt
        v_next = _sparse_group(columns, f, m, walk, j + 1)[1]
        if v_next <= v + FEATURE_THRESHOLD:
            continue
        if n_rows < min_samples_leaf or m - n_rows < min_samples_leaf:
            continue
        if not (n_l > 0.0 and n_r > 0.0):
            continue
        if direction != 0 and wrong_order(direction, sl[0], n_l, sr[0], n_r):
            continue
        imp = squared_impurity(sl, sr, n_l, n_r)
        if imp < best_imp:
            best_imp = imp
            best_thr = midpoint(v, v_next)
    return 1, best_imp, best_thr


def scan_column(node, f, m, vals, yb, wb, start, min_samples_leaf, best_imp, direction,
                presorted):  # fmt: skip
    """:func:`axis_scan_feature` of feature ``f`` of a ``node`` (:func:`node_column`), read in
    order from ``presorted`` (:func:`column_presort`), numba only.

    A :class:`SparseColumns` is scanned from its stored entries
    (:func:`scan_sparse_classes`, :func:`scan_sparse_targets`); otherwise the
    column's values are written to ``vals[:m]`` and scanned.
    """
    raise NotImplementedError("scan_column is only callable from numba kernels")


@jit_overload(scan_column)
def _scan_column(node, f, m, vals, yb, wb, start, min_samples_leaf, best_imp, direction,
                 presorted):  # fmt: skip
    if _is_sparse_columns(presorted):
        scan = scan_sparse_classes if _is_classes(yb) else scan_sparse_targets

        def sparse(node, f, m, vals, yb, wb, start, min_samples_leaf, best_imp, direction,
                   presorted):  # fmt: skip
            return scan(presorted, f, m, yb, wb, start, min_samples_leaf, best_imp, direction)

        return sparse

    def written(node, f, m, vals, yb, wb, start, min_samples_leaf, best_imp, direction,
                presorted):  # fmt: skip
        node_column(node, f, m, vals)
        return axis_scan_feature(
            vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f
        )

    return written


axis_scan_start = _stub("axis_scan_start")
axis_scan_feature = _stub("axis_scan_feature")


@_by_target(axis_scan_start)
def _axis_scan_start(yb, wb, m, n_outputs):
    if _is_classes(yb):
        return lambda yb, wb, m, n_outputs: scan_start(yb, wb, m, n_outputs)
    return lambda yb, wb, m, n_outputs: scan_start_squared(yb, wb, m, n_outputs)


@_by_target(axis_scan_feature)
def _axis_scan_feature(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f):
    scan = scan_feature if _is_classes(yb) else scan_feature_squared

    def call(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f):
        return scan(vals, m, yb, wb, start, min_samples_leaf, best_imp, direction, presorted, f)

    return call


def node_column(node, f, m, vals):
    """Write feature ``f``'s node-centred values to ``vals[:m]`` (numba only).

    ``node`` is the node's dense block ``Xb`` (rows already centred) or, for
    sparse input, ``((cptr, crow, cval), mu)``: its stored entries as CSC and
    its mean, the rows without an entry holding ``-mu[f]``
    (:mod:`obliquetrees.co2._sparse_kernels`).
    """
    raise NotImplementedError("node_column is only callable from numba kernels")


@jit_overload(node_column)
def _node_column(node, f, m, vals):
    if isinstance(node, types.Array):

        def dense(node, f, m, vals):
            for i in range(m):
                vals[i] = node[i, f]

        return dense

    def sparse(node, f, m, vals):
        columns, mu = node
        cptr, crow, cval = columns
        for i in range(m):
            vals[i] = -mu[f]
        for k in range(cptr[f], cptr[f + 1]):
            vals[crow[k]] = cval[k] - mu[f]

    return sparse


def is_empty_column(node, f):
    """Whether feature ``f`` of a sparse ``node`` (:func:`node_column`) has no stored entry:
    a constant column, read in O(1). Always False for a dense block (numba only)."""
    raise NotImplementedError("is_empty_column is only callable from numba kernels")


@jit_overload(is_empty_column, inline="always")
def _is_empty_column(node, f):
    if isinstance(node, types.Array):
        return lambda node, f: False

    def sparse(node, f):
        cptr = node[0][0]
        return cptr[f + 1] == cptr[f]

    return sparse


def column_presort(node, presorted, m):
    """What :func:`node_order` reads a ``node``'s columns in order from (numba only).

    ``presorted`` itself, unless the node is sparse and nothing is presorted
    (None): then its columns as :class:`SparseColumns`, scanned without sorting the
    node's values (:func:`scan_column`).
    """
    raise NotImplementedError("column_presort is only callable from numba kernels")


@jit_overload(column_presort, inline="always")
def _column_presort(node, presorted, m):
    if isinstance(node, types.Array) or not is_none_type(presorted):
        return lambda node, presorted, m: presorted

    def sparse(node, presorted, m):
        cptr, crow, cval = node[0]
        return SparseColumns(cptr, crow, cval, node[1])

    return sparse


def n_columns(node):
    """Number of features of a ``node`` as :func:`node_column` takes it (numba only)."""
    raise NotImplementedError("n_columns is only callable from numba kernels")


@jit_overload(n_columns)
def _n_columns(node):
    if isinstance(node, types.Array):
        return lambda node: node.shape[1]
    return lambda node: node[1].shape[0]


@jit
def best_axis_split(Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state):
    """Best axis-aligned split by information gain (targets: squared error) among random features.

    Features are drawn without replacement (partial Fisher-Yates with
    ``state``) until ``max_features`` non-constant ones have been evaluated or
    all features have been drawn, as scikit-learn's splitter does. A sample
    goes right iff ``x[f] > threshold``. ``Xb`` is the node's dense block or
    its sparse form (:func:`node_column`).

    Returns
    -------
    feature : int
        -1 if no valid split exists.
    threshold : float
    impurity : float
        Weighted entropy ``N_L H_L + N_R H_R`` (nats) of the best split
        (targets: :func:`scan_feature_squared`'s criterion).
    """
    no_scores = np.empty(0)
    return ranked_axis_split(
        Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state, no_scores
    )


#: The most rows (of the sample it is searched on) of a node whose axis-aligned split may
#: be on a monotonically constrained feature while a free feature can split it
#: (:func:`ranked_axis_split`). Chosen on validation parts, and left one data set out, by
#: ``benchmarks/monotonic_validation.py``, which reruns candidates on a copy of this line.
MAX_CONSTRAINED_START_ROWS = 150


def has_free(cst):
    """Whether ``cst`` leaves a column free (``cst[j] == 0``); False for None (numba only)."""
    raise NotImplementedError("has_free is only callable from numba kernels")


@jit_overload(has_free)
def _has_free(cst):
    if is_none_type(cst):
        return lambda cst: False

    def any_free(cst):
        for j in range(cst.shape[0]):
            if cst[j] == 0:
                return True
        return False

    return any_free


@jit
def ranked_axis_split(
    Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state, scores, cst=None,
    presorted=None,
):  # fmt: skip
    """:func:`best_axis_split`, writing each candidate feature's own best impurity to ``scores``.

    ``scores`` has one entry per feature, or none (nothing is written). A
    feature drawn and scanned gets the impurity of its best split (``inf``
    when it is constant or has no split leaving ``min_samples_leaf`` on each
    side); the entries of features not drawn are left as they were. The same
    draws, and the same split returned, as without ``scores``: a feature's
    scan is the same whatever impurity it has to beat, which only decides
    whether its best counts.

    ``cst``, the monotonic constraint of each column (int8; None: none),
    leaves out the thresholds of a constrained feature whose sides' values
    (binary classes: the fraction of class 1; targets: the mean) are out
    of its order, as scikit-learn's splitter does (:func:`wrong_order`). A
    node of more than :data:`MAX_CONSTRAINED_START_ROWS` rows is split on a
    free feature (constrained ones are drawn but not scanned) unless none
    splits it; then the features are drawn again, all of them candidates.

    ``presorted`` (None: each feature's values are sorted) gives the node's
    rows in order of every feature (:func:`node_order`). A sparse node
    without it scans each column from its stored entries, the rows without
    one in a single step (:func:`scan_column`); a column without a stored
    entry is constant and is skipped without being read.
    """
    defer = m > MAX_CONSTRAINED_START_ROWS and has_free(cst)
    found = _draw_and_scan(
        Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state, scores, cst, defer,
        presorted,
    )  # fmt: skip
    if found[0] < 0 and defer:
        found = _draw_and_scan(
            Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state, scores, cst, False,
            presorted,
        )  # fmt: skip
    return found


@jit
def _draw_and_scan(
    Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state, scores, cst, defer,
    presorted,
):  # fmt: skip
    """The draws and scans of :func:`ranked_axis_split`; constrained features skipped if
    ``defer``. Returns ``(feature, threshold, impurity)``."""
    p = n_columns(Xb)
    ranking = scores.shape[0] > 0
    feats = np.arange(p)
    vals = np.empty(m)
    start = axis_scan_start(yb, wb, m, n_classes)
    best_f = -1
    best_thr = 0.0
    best_imp = np.inf
    n_visited = 0
    order_from = column_presort(Xb, presorted, m)
    for k in range(p):
        if n_visited >= max_features:
            break
        f = draw_feature(feats, k, state)
        direction = scan_direction(cst, f)
        if defer and direction != 0:
            continue
        if is_empty_column(Xb, f):  # constant, as the scan would find in O(m)
            if ranking:
                scores[f] = np.inf
            continue
        bound = np.inf if ranking else best_imp
        visited, imp, thr = scan_column(
            Xb, f, m, vals, yb, wb, start, min_samples_leaf, bound, direction, order_from
        )
        n_visited += visited
        if ranking:
            scores[f] = imp
        if imp < best_imp:
            best_f = f
            best_imp = imp
            best_thr = thr
    return best_f, best_thr, best_imp


@jit
def init_theta(Xb, yb, wb, m, feature, threshold, n_classes, prior):
    """Leaf parameters from each side of an axis split: log class frequencies
    (``prior`` pseudo-counts) or, for targets, mean targets
    (:func:`~obliquetrees._training.targets.init_leaves`)."""
    return init_leaves(Xb, yb, wb, m, feature, threshold, n_classes, prior)


# ------------------------------------------- an oblique split against the axis start
@jit
def _entropy_of_sides(yb, wb, m, right, n_classes):
    """Weighted entropy ``N_L H_L + N_R H_R`` (nats) of the classes on the sides ``right[:m]``."""
    counts = np.zeros((2, n_classes))
    for i in range(m):
        counts[int(right[i]), yb[i]] += wb[i]
    imp = 0.0
    for side in range(2):
        total = 0.0
        for c in range(n_classes):
            total += counts[side, c]
            imp -= xlogx(counts[side, c])
        imp += xlogx(total)
    return imp


@jit
def _squared_error_of_sides(yb, wb, m, right):
    """Weighted squared error of the targets about the mean of their side (``right[:m]``)."""
    n_outputs = yb.shape[1]
    sums = np.zeros((2, n_outputs))
    totals = np.zeros(2)
    for i in range(m):
        side = int(right[i])
        totals[side] += wb[i]
        for k in range(n_outputs):
            sums[side, k] += wb[i] * yb[i, k]
    for side in range(2):
        if totals[side] > 0.0:
            for k in range(n_outputs):
                sums[side, k] /= totals[side]
    sse = 0.0  # about each side's mean (two passes: no cancellation on large targets)
    for i in range(m):
        side = int(right[i])
        for k in range(n_outputs):
            d = yb[i, k] - sums[side, k]
            sse += wb[i] * d * d
    return sse


split_gain = _stub("split_gain")


@_by_target(split_gain)
def _split_gain(yb, wb, m, right_from, right_to, n_classes):
    """Log-likelihood gained (nats) by the sides ``right_to`` over the sides ``right_from``.

    Classes: the drop of the weighted entropy of the sides, which is the negative
    log-likelihood of the labels under each side's class frequencies.
    Targets: ``N / 2 log(SSE_from / SSE_to)``, the same ratio for a Gaussian
    per side with the sides' maximum-likelihood variance (``N`` the total
    weight); ``inf`` when ``right_to`` fits exactly and ``right_from`` does not,
    0 when both do.
    """
    if _is_classes(yb):

        def classes(yb, wb, m, right_from, right_to, n_classes):
            return _entropy_of_sides(yb, wb, m, right_from, n_classes) - _entropy_of_sides(
                yb, wb, m, right_to, n_classes
            )

        return classes

    def targets(yb, wb, m, right_from, right_to, n_classes):
        sse_from = _squared_error_of_sides(yb, wb, m, right_from)
        sse_to = _squared_error_of_sides(yb, wb, m, right_to)
        if sse_to <= 0.0:
            return 0.0 if sse_from <= 0.0 else np.inf
        total = 0.0
        for i in range(m):
            total += wb[i]
        return 0.5 * total * (np.log(sse_from) - np.log(sse_to)) if sse_from > 0.0 else -np.inf

    return targets
