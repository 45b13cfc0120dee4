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
value of its left rows is at most that of its right rows; its children's
values are then bounded as scikit-learn bounds them (:func:`split_order`,
:func:`set_child_bounds`, :func:`clip_value`), which makes each tree, and
so the forest's average, monotone.

The value constrained is what a leaf predicts: a binary classifier's
fraction of class 1 (``value[node, 1]``, its probability of ``classes_[1]``),
a regressor's mean target (``value[node, 0]``; the targets are standardised
by a positive scale, which keeps their order).

Importing this module imports numba.
"""

import numpy as np
from numba import types

from obliquetrees._core._jit import jit, jit_overload
from obliquetrees._training.grower import grow_capacity
from obliquetrees._training.targets import _by_target, _is_classes, _stub


def _free(cst):
    """Whether the numba type ``cst`` is None (an unconstrained fit)."""
    return isinstance(cst, (types.NoneType, types.Omitted))


start_sign = _stub("start_sign")


@jit_overload(start_sign, inline="always")
def _start_sign(cst, f):
    """The sign of the axis-aligned start's weight on ``f``: -1.0 if ``f`` is constrained
    to fall (its right child is then the smaller values), else 1.0."""
    if _free(cst):
        return lambda cst, f: 1.0
    return lambda cst, f: -1.0 if cst[f] < 0 else 1.0


project_signs = _stub("project_signs")


@jit_overload(project_signs, inline="always")
def _project_signs(w, vw, cst):
    """Project ``w`` on the compatible set ``cst[j] * w[j] >= 0``, in place; True if it moved.

    The set is a closed convex cone (an orthant in the constrained inputs), so
    the Euclidean projection sets each wrong-signed constrained weight to 0;
    its momentum velocity ``vw[j]`` is zeroed too (it pointed out of the set).
    Composed with the projection on the ``nu``-ball after it, this is the
    projection on their intersection: the ball's projection is a scaling,
    which keeps a cone's points in it.
    """
    if _free(cst):
        return lambda w, vw, cst: False

    def project(w, vw, cst):
        moved = False
        for j in range(w.shape[0]):
            if cst[j] * w[j] < 0.0:
                w[j] = 0.0
                vw[j] = 0.0
                moved = True
        return moved

    return project


on_support = _stub("on_support")


@jit_overload(on_support)
def _on_support(cst, support):
    """The constraints of the features ``support`` (in that order), None for None."""
    if _free(cst):
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
    if _free(cst):
        return lambda cst, w, y, weight, rows, start, right: True

    def check(cst, w, y, weight, rows, start, right):
        if not constrained_split(cst, w):
            return True
        left_mean, right_mean = side_means(y, weight, rows, start, right)
        return left_mean <= right_mean

    return check


# ------------------------------------------------------------ the grower's value bounds
value_bounds = _stub("value_bounds")


@jit_overload(value_bounds)
def _value_bounds(cst, capacity):
    """The growth's monotone state: ``(cst, bounds)``, ``bounds[node]`` the node's
    ``[low, high]`` (the root's unbounded); None without constraints."""
    if _free(cst):
        return lambda cst, capacity: None

    def new(cst, capacity):
        bounds = np.empty((capacity, 2))
        bounds[:, 0] = -np.inf
        bounds[:, 1] = np.inf
        return cst, bounds

    return new


grow_bounds = _stub("grow_bounds")


@jit_overload(grow_bounds)
def _grow_bounds(mono, capacity):
    """``mono`` with bounds for ``capacity`` nodes."""
    if _free(mono):
        return lambda mono, capacity: mono
    return lambda mono, capacity: (mono[0], grow_capacity(mono[1], capacity, 0.0))


clip_value = _stub("clip_value")


@jit_overload(clip_value)
def _clip_value(mono, value, node):
    """Clip ``node``'s constrained value into its bounds (classes: ``value[node, 0]``
    follows as ``1 - value[node, 1]``)."""
    if _free(mono):
        return lambda mono, value, node: None

    def clip(mono, value, node):
        k = 1 if value.shape[1] == 2 else 0  # binary classes: class 1; targets: the output
        low, high = mono[1][node, 0], mono[1][node, 1]
        v = value[node, k]
        if v < low or v > high:
            value[node, k] = low if v < low else high
            if k == 1:
                value[node, 0] = 1.0 - value[node, 1]

    return clip


split_order = _stub("split_order")


@jit_overload(split_order)
def _split_order(mono, y, row_weight, rows, start, middle, end, w, node):
    """``(keep, mid)`` of ``node``'s split ``w``: left rows ``rows[start:middle]``, right
    ``rows[middle:end]``.

    A split of free inputs is kept and its children inherit the node's bounds
    (``mid`` NaN). A split weighing a constrained input is dropped (``keep``
    False) when its left rows' mean value is above its right rows'; else its
    children are bounded at ``mid``, the middle of the two means clipped into
    the node's bounds (scikit-learn rejects a split whose means leave the
    bounds instead; clipping keeps it and is as safe).
    """
    if _free(mono):
        return lambda mono, y, row_weight, rows, start, middle, end, w, node: (True, np.nan)

    def order(mono, y, row_weight, rows, start, middle, end, w, node):
        cst, bounds = mono
        if not constrained_split(cst, w):
            return True, np.nan
        right = np.arange(end - start) >= middle - start
        left_mean, right_mean = side_means(y, row_weight, rows, start, right)
        if not left_mean <= right_mean:
            return False, np.nan
        mid = 0.5 * (left_mean + right_mean)
        return True, min(max(mid, bounds[node, 0]), bounds[node, 1])

    return order


set_child_bounds = _stub("set_child_bounds")


@jit_overload(set_child_bounds)
def _set_child_bounds(mono, node, left, mid):
    """Bound ``node``'s children ``left`` and ``left + 1``: ``[low, mid]`` and ``[mid, high]``
    of the node's ``[low, high]``, or the node's own bounds when ``mid`` is NaN."""
    if _free(mono):
        return lambda mono, node, left, mid: None

    def bound(mono, node, left, mid):
        bounds = mono[1]
        low, high = bounds[node, 0], bounds[node, 1]
        split = not np.isnan(mid)
        bounds[left, 0] = low
        bounds[left, 1] = mid if split else high
        bounds[left + 1, 0] = mid if split else low
        bounds[left + 1, 1] = high

    return bound
