"""Monotonic constraints in CO2's growth (``monotonic_cst``; the derivation is in the
estimator's Notes).

A constraint vector ``cst`` (int8, one entry per training input: 1 the
prediction may only rise with the input, -1 only fall, 0 free) is handed to
the kernels, or None for an unconstrained fit. Every function here is a
no-op (or True) for None, chosen by numba at compile time, so an
unconstrained fit compiles to the kernels it had before the parameter
existed and grows the same trees, bit for bit.

The rule every split follows: the right child (``w.x + b > 0``) holds the
larger values. A split is *compatible* when ``cst[j] * w[j] >= 0`` for every
input: then raising an input constrained 1 (or lowering one constrained
-1) can only move a row from left to right. A split that weighs a
constrained input (:func:`constrained_split`) is *ordered* when the mean
value of its left rows is at most that of its right rows (:func:`ordered`,
:func:`keeps_order`); once the tree is grown its leaf values are made to
keep every such split's order (:func:`order_leaves`), which makes each tree,
and so the forest's average, monotone.

The value constrained is what a leaf predicts: a binary classifier's
fraction of class 1 (``value[node, 1]``, its probability of ``classes_[1]``),
a regressor's mean target (``value[node, 0]``; the targets are standardised
by a positive scale, which keeps their order).

Importing this module imports numba.
"""

import numpy as np

from obliquetrees._core._jit import is_none_type, jit, jit_overload
from obliquetrees._training.targets import _by_target, _is_classes, _stub


def free_type(cst):
    """Whether the numba type ``cst`` is None (an unconstrained fit)."""
    return is_none_type(cst)


start_sign = _stub("start_sign")


@jit_overload(start_sign, inline="always")
def _start_sign(cst, f):
    """The sign of the axis-aligned start's weight on ``f``: -1.0 if ``f`` is constrained
    to fall (its right child is then the smaller values), else 1.0."""
    if free_type(cst):
        return lambda cst, f: 1.0
    return lambda cst, f: -1.0 if cst[f] < 0 else 1.0


#: The entry of :func:`node_constraints` that holds its input's weight at 0.
PINNED = 2

node_constraints = _stub("node_constraints")


@jit_overload(node_constraints)
def _node_constraints(cst, feature):
    """The constraints of the CCCP of a node whose axis-aligned start is on ``feature``.

    ``cst`` itself when ``feature`` is constrained: the split may weigh every
    input, the constrained ones with their signs, and its children are
    ordered. When ``feature`` is free, every constrained input is
    :data:`PINNED` (its weight held at 0): the split weighs free inputs only,
    needs no order and passes its bounds on, as scikit-learn's split on a
    free feature does. (Else the CCCP gives nearly every split a small weight
    on some constrained input, which would bound every node's children.)
    None for None.
    """
    if free_type(cst):
        return lambda cst, feature: None

    def per_node(cst, feature):
        if cst[feature] != 0:
            return cst
        pinned = np.zeros_like(cst)
        for j in range(cst.shape[0]):
            if cst[j] != 0:
                pinned[j] = PINNED
        return pinned

    return per_node


project_signs = _stub("project_signs")


@jit_overload(project_signs, inline="always")
def _project_signs(w, vw, cst):
    """Project ``w`` on the compatible set ``cst[j] * w[j] >= 0``, in place; True if it moved.

    The set is a closed convex cone (an orthant in the constrained inputs, a
    subspace in the :data:`PINNED` ones), so the Euclidean projection sets
    each wrong-signed constrained weight, and every pinned one, to 0; its
    momentum velocity ``vw[j]`` is zeroed too (it pointed out of the set).
    Composed with the projection on the ``nu``-ball after it, this is the
    projection on their intersection: the ball's projection is a scaling,
    which keeps a cone's points in it.
    """
    if free_type(cst):
        return lambda w, vw, cst: False

    def project(w, vw, cst):
        moved = False
        for j in range(w.shape[0]):
            if cst[j] * w[j] < 0.0 or (cst[j] == PINNED and w[j] != 0.0):
                w[j] = 0.0
                vw[j] = 0.0
                moved = True
        return moved

    return project


on_support = _stub("on_support")


@jit_overload(on_support)
def _on_support(cst, support):
    """The constraints of the features ``support`` (in that order), None for None."""
    if free_type(cst):
        return lambda cst, support: None
    return lambda cst, support: cst[support]


@jit
def constrained_split(cst, w):
    """Whether the split ``w`` weighs a constrained input."""
    for j in range(w.shape[0]):
        if cst[j] != 0 and w[j] != 0.0:
            return True
    return False


monotone_target = _stub("monotone_target")


@_by_target(monotone_target, inline="always")
def _monotone_target(y, r):
    """The value a row adds to its leaf's constrained value: 1 for class 1, its target."""
    if _is_classes(y):
        return lambda y, r: 1.0 if y[r] == 1 else 0.0
    return lambda y, r: y[r, 0]


@jit
def side_means(y, weight, rows, start, right):
    """The weighted mean constrained value of the left and of the right rows.

    Row ``t`` is ``rows[start + t]`` of ``y`` and ``weight`` (``t`` itself when
    ``rows`` is empty) and goes right when ``right[t]``.
    """
    sums = np.zeros(2)
    totals = np.zeros(2)
    for t in range(right.shape[0]):
        r = rows[start + t] if rows.shape[0] > 0 else t
        side = int(right[t])
        sums[side] += weight[r] * monotone_target(y, r)
        totals[side] += weight[r]
    return sums[0] / totals[0], sums[1] / totals[1]


ordered = _stub("ordered")


@jit_overload(ordered)
def _ordered(cst, w, y, weight, rows, start, right):
    """Whether the split ``w`` with sides ``right`` keeps the order its constraints ask
    (:func:`side_means`; True for a split of free inputs, or without constraints)."""
    if free_type(cst):
        return lambda cst, w, y, weight, rows, start, right: True

    def check(cst, w, y, weight, rows, start, right):
        if not constrained_split(cst, w):
            return True
        left_mean, right_mean = side_means(y, weight, rows, start, right)
        return left_mean <= right_mean

    return check


# ------------------------------------------------------------ the grown tree's leaf values
keeps_order = _stub("keeps_order")


@jit_overload(keeps_order)
def _keeps_order(cst, y, row_weight, rows, start, middle, end, w):
    """Whether a split ``w`` with left rows ``rows[start:middle]`` and right rows
    ``rows[middle:end]`` keeps its order (:func:`ordered`), as the grower checks it."""
    if free_type(cst):
        return lambda cst, y, row_weight, rows, start, middle, end, w: True

    def check(cst, y, row_weight, rows, start, middle, end, w):
        right = np.arange(end - start) >= middle - start
        return ordered(cst, w, y, row_weight, rows, start, right)

    return check


@jit
def _leaf_ranges(children_left, children_right):
    """The leaves in right-first depth-first order from the root, and each node's slice of it.

    ``leaves[first[node]:stop[node]]`` are the leaves under ``node``, in the
    order a depth-first walk from ``node`` that visits right children first
    lists them: a walk from the root lists every subtree contiguously, in
    that same order. (The order fixes the order of the sums in
    :func:`meeting_value`.)
    """
    n_nodes = children_left.shape[0]
    leaves = np.empty(n_nodes, dtype=np.int64)
    first = np.empty(n_nodes, dtype=np.int64)
    stop = np.empty(n_nodes, dtype=np.int64)
    stack = np.empty(n_nodes + 1, dtype=np.int64)
    n_leaves = 0
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        t = stack[top]
        if children_left[t] < 0:
            leaves[n_leaves] = t
            first[t] = n_leaves
            stop[t] = n_leaves + 1
            n_leaves += 1
        else:
            stack[top] = children_left[t]
            stack[top + 1] = children_right[t]
            top += 2
    for node in range(n_nodes - 1, -1, -1):  # children after parents
        if children_left[node] >= 0:
            first[node] = first[children_right[node]]
            stop[node] = stop[children_left[node]]
    return leaves[:n_leaves], first, stop


@jit
def _excess(value, weight, k, left, right, t):
    """How much the left leaves above ``t`` outweigh the right leaves below it:
    ``sum_L w (v - t)_+ - sum_R w (t - v)_+``, decreasing in ``t``."""
    g = 0.0
    for leaf in left:
        g += weight[leaf] * max(value[leaf, k] - t, 0.0)
    for leaf in right:
        g -= weight[leaf] * max(t - value[leaf, k], 0.0)
    return g


@jit
def meeting_value(value, weight, k, left, right, low, high):
    """The ``t`` in ``[low, high]`` that clamps the ``left`` leaves to ``<= t`` and the
    ``right`` ones to ``>= t`` at the least weighted squared change: the root of
    :func:`_excess` (the derivative of that change, halved), by bisection."""
    for _ in range(100):
        t = 0.5 * (low + high)
        if not low < t < high:
            break
        if _excess(value, weight, k, left, right, t) > 0.0:
            low = t
        else:
            high = t
    return 0.5 * (low + high)


@jit
def _clamp(value, k, leaves, low, high):
    """Clamp the constrained value of ``leaves`` into ``[low, high]``."""
    for leaf in leaves:
        v = value[leaf, k]
        if v < low or v > high:
            value[leaf, k] = low if v < low else high
            if k == 1:  # binary classes: the distribution stays one
                value[leaf, 0] = 1.0 - value[leaf, 1]


@jit
def order_leaves(constrained, children_left, children_right, value, weight):
    """Make a grown tree's leaf values keep the order of its ``constrained`` splits, in place.

    At every split weighing a constrained input every leaf under its left child
    must be at most every leaf under its right child (the tree is then
    monotone: :mod:`obliquetrees.co2._monotone`). The splits are visited from
    the deepest (ids decrease from child to parent); one whose left leaves
    reach above its right leaves (``max_L > min_R``) clamps the left leaves to
    ``<= t`` and the right ones to ``>= t``, with ``t`` in ``[min_R, max_L]``
    changing their values least (weighted by ``weight``, the leaves' training
    weight; :func:`meeting_value`). A clamp is a monotone map of a whole
    subtree, so it keeps the order of the splits below, visited before;
    splits that are already in order change nothing. ``value[:, 1]`` (binary
    classes, ``value[:, 0]`` following) or ``value[:, 0]`` (targets) is
    constrained; internal nodes keep their values.
    """
    n_nodes = children_left.shape[0]
    k = 1 if value.shape[1] == 2 else 0
    low = np.empty(n_nodes)  # the smallest and largest leaf value under each node
    high = np.empty(n_nodes)
    leaves, first, stop = _leaf_ranges(children_left, children_right)
    for node in range(n_nodes - 1, -1, -1):
        left = children_left[node]
        if left < 0:
            low[node] = high[node] = value[node, k]
            continue
        right = children_right[node]
        if constrained[node] and high[left] > low[right]:
            lefts = leaves[first[left] : stop[left]]
            rights = leaves[first[right] : stop[right]]
            t = meeting_value(value, weight, k, lefts, rights, low[right], high[left])
            _clamp(value, k, lefts, -np.inf, t)
            _clamp(value, k, rights, t, np.inf)
            low[left] = min(low[left], t)
            high[left] = t
            low[right] = t
            high[right] = max(high[right], t)
        low[node] = min(low[left], low[right])
        high[node] = max(high[left], high[right])
