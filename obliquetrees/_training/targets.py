"""The two leaf models of a CO2 stump, chosen at compile time from the type of ``y``.

A CO2 stump (:mod:`obliquetrees.co2._kernels`) has a hyperplane and
two leaf parameter vectors ``theta0`` (left) and ``theta1`` (right), and the
CCCP minimises a bound on the loss ``l(theta, y)`` of the leaf a sample
reaches. The bound (Norouzi et al., Eq. 10) holds for any loss with leaf
parameters; two are implemented:

- **classes** (the paper): ``y`` is a 1-D int64 array of class indices,
  ``theta`` holds class logits and ``l(theta, y) = logsumexp(theta) - theta[y]``
  (softmax log loss). Leaf values are class distributions.
- **targets** (ours, :class:`obliquetrees.CO2ForestRegressor`): ``y`` is a
  2-D float64 array of (standardised) targets, ``theta`` holds one value per
  output and ``l(theta, y) = 0.5 * ||theta - y||^2`` (squared loss). Leaf
  values are weighted means.

Every kernel that touches ``y`` goes through the functions here, and numba
picks each one's implementation from ``y``'s type, so the growth, the CCCP and
the sparse kernels exist once for both. The class implementations perform the
operations of the classification kernels in the same order, so classifiers are
bit-identical to those before regression was added.

Importing this module imports numba; the estimator imports it lazily.
"""

import functools

import numpy as np
from numba import types

from obliquetrees._core._jit import jit, jit_inline, jit_overload
from obliquetrees._core._math import logsumexp, vector_max
from obliquetrees._training.grower import entropy_decrease

#: ``@_by_target(stub)``: a numba implementation of ``stub`` chosen from the argument types.
_by_target = jit_overload
#: The same, inlined into its callers at numba-IR level: for the per-sample
#: functions (no call and no reference counting per sample). Only for
#: implementations without loops of their own: numba's IR inliner loses a
#: loop's variables when it inlines one into another loop
#: (NumbaIRAssumptionWarning), so those call a ``jit`` function instead.
_by_target_inline = functools.partial(jit_overload, inline="always")


def _is_classes(y):
    """Whether the numba type ``y`` is class indices (1-D) rather than targets (2-D)."""
    return isinstance(y, types.Array) and y.ndim == 1


def _stub(name):
    """A distinct stub per overloaded name (numba keys overloads by the function object)."""

    def stub(*args):
        raise NotImplementedError(f"{name} is only callable from numba kernels")

    stub.__name__ = stub.__qualname__ = name
    return stub


empty_targets = _stub("empty_targets")
copy_target = _stub("copy_target")
leaf_offset = _stub("leaf_offset")
leaf_prepare = _stub("leaf_prepare")
leaf_loss = _stub("leaf_loss")
side_arg = _stub("side_arg")
add_leaf_gradient = _stub("add_leaf_gradient")
finish_leaf_gradient = _stub("finish_leaf_gradient")
init_leaves = _stub("init_leaves")
leaf_value = _stub("leaf_value")
impurity_decrease = _stub("impurity_decrease")
present_leaves = _stub("present_leaves")
restore_leaves = _stub("restore_leaves")


@jit_inline
def softmax_lse(theta, prob):
    """Write ``softmax(theta)`` to ``prob`` and return ``logsumexp(theta)``."""
    mx = vector_max(theta)
    acc = 0.0
    for k in range(theta.shape[0]):
        e = np.exp(theta[k] - mx)
        prob[k] = e
        acc += e
    inv = 1.0 / acc
    for k in range(theta.shape[0]):
        prob[k] *= inv
    return mx + np.log(acc)


# ----------------------------------------- implementations (inlined by the overloads)
@jit_inline
def _copy_class(dst, t, src, r):
    dst[t] = src[r]


@jit
def _copy_row(dst, t, src, r):
    for k in range(dst.shape[1]):
        dst[t, k] = src[r, k]


@jit  # not inlined: numba's IR inliner loses its loop's accumulator (NumbaIRAssumptionWarning)
def _squared(y, i, offset, theta):
    acc = 0.0
    for k in range(theta.shape[0]):
        d = theta[k] - y[i, k]
        acc += d * d
    return 0.5 * acc


@jit_inline
def _subtract_count(g, y, i, wt, theta):
    g[y[i]] -= wt


@jit
def _residual(g, y, i, wt, theta):
    for k in range(g.shape[0]):
        g[k] += wt * (theta[k] - y[i, k])


@jit_inline
def _softmax_part(y, g, n, prob, inv):
    for k in range(g.shape[0]):
        g[k] = (g[k] + n * prob[k]) * inv


@jit_inline
def _scale_gradient(y, g, n, prob, inv):
    for k in range(g.shape[0]):
        g[k] *= inv


@jit_inline
def _log_frequencies(Xb, yb, wb, m, feature, threshold, n_outputs, prior):
    c0 = np.full(n_outputs, prior)
    c1 = np.full(n_outputs, prior)
    for i in range(m):
        if Xb[i, feature] > threshold:
            c1[yb[i]] += wb[i]
        else:
            c0[yb[i]] += wb[i]
    s0 = 0.0
    s1 = 0.0
    for k in range(n_outputs):
        s0 += c0[k]
        s1 += c1[k]
    theta0 = np.empty(n_outputs)
    theta1 = np.empty(n_outputs)
    for k in range(n_outputs):
        theta0[k] = np.log(c0[k] / s0)
        theta1[k] = np.log(c1[k] / s1)
    return theta0, theta1


@jit_inline
def _side_means(Xb, yb, wb, m, feature, threshold, n_outputs, prior):
    theta = np.zeros((2, n_outputs))
    side_weight = np.zeros(2)
    for i in range(m):
        s = 1 if Xb[i, feature] > threshold else 0
        side_weight[s] += wb[i]
        for k in range(n_outputs):
            theta[s, k] += wb[i] * yb[i, k]
    for s in range(2):
        if side_weight[s] > 0.0:
            for k in range(n_outputs):
                theta[s, k] /= side_weight[s]
    return theta[0].copy(), theta[1].copy()


@jit_inline
def _class_distribution(y, row_weight, rows, start, end, node, value, n_node_samples):
    hist = value[node]
    hist[:] = 0.0
    for t in range(start, end):
        r = rows[t]
        hist[y[r]] += row_weight[r]
    total = 0.0
    n_present = 0
    for k in range(hist.shape[0]):
        total += hist[k]
        if hist[k] > 0.0:
            n_present += 1
    n_node_samples[node] = total
    if total > 0.0:
        for k in range(hist.shape[0]):
            hist[k] = hist[k] / total
    return n_present


@jit_inline
def _weighted_mean(y, row_weight, rows, start, end, node, value, n_node_samples):
    mean = value[node]
    mean[:] = 0.0
    total = 0.0
    varies = False
    for t in range(start, end):
        r = rows[t]
        total += row_weight[r]
        for k in range(mean.shape[0]):
            mean[k] += row_weight[r] * y[r, k]
            varies |= y[r, k] != y[rows[start], k]
    n_node_samples[node] = total
    if not total > 0.0:
        return 0
    for k in range(mean.shape[0]):
        mean[k] /= total
    return 2 if varies else 1


@jit_inline
def _variance_decrease(y, row_weight, rows, start, mid, end, n_outputs, total_weight):
    # per side (0 left, 1 right, 2 node): weight, sums and sums of squares
    w = np.zeros(3)
    s1 = np.zeros((3, n_outputs))
    s2 = np.zeros((3, n_outputs))
    for t in range(start, end):
        r = rows[t]
        side = 0 if t < mid else 1
        wt = row_weight[r]
        w[side] += wt
        for k in range(n_outputs):
            s1[side, k] += wt * y[r, k]
            s2[side, k] += wt * y[r, k] * y[r, k]
    w[2] = w[0] + w[1]
    if not w[2] > 0.0:
        return 0.0
    impurity = np.zeros(3)
    for side in range(3):
        if side == 2:
            for k in range(n_outputs):
                s1[2, k] = s1[0, k] + s1[1, k]
                s2[2, k] = s2[0, k] + s2[1, k]
        if w[side] > 0.0:
            for k in range(n_outputs):
                mean = s1[side, k] / w[side]
                impurity[side] += s2[side, k] / w[side] - mean * mean
            impurity[side] /= n_outputs
    decrease = impurity[2] - (w[1] / w[2] * impurity[1] + w[0] / w[2] * impurity[0])
    return w[2] / total_weight * decrease


# ------------------------------------------------------------------ overloads
@_by_target(empty_targets)
def _empty_targets(y, m):
    """Room for the targets of ``m`` samples, shaped as ``y``'s."""
    if _is_classes(y):
        return lambda y, m: np.empty(m, dtype=np.int64)
    return lambda y, m: np.empty((m, y.shape[1]))


@_by_target_inline(copy_target)
def _copy_target(dst, t, src, r):
    """``dst[t] = src[r]`` (a row of targets)."""
    if _is_classes(dst):
        return lambda dst, t, src, r: _copy_class(dst, t, src, r)

    return lambda dst, t, src, r: _copy_row(dst, t, src, r)


@_by_target(leaf_offset)
def _leaf_offset(y, theta):
    """The part of a leaf's loss shared by all samples: ``logsumexp(theta)`` or 0."""
    if _is_classes(y):
        return lambda y, theta: logsumexp(theta)
    return lambda y, theta: 0.0


@_by_target(leaf_prepare)
def _leaf_prepare(y, theta, prob):
    """:func:`leaf_offset`, and for classes ``softmax(theta)`` written to ``prob``."""
    if _is_classes(y):
        return lambda y, theta, prob: softmax_lse(theta, prob)
    return lambda y, theta, prob: 0.0


@_by_target_inline(leaf_loss)
def _leaf_loss(y, i, offset, theta):
    """Loss of sample ``i`` at a leaf ``theta`` (``offset``: from :func:`leaf_offset`)."""
    if _is_classes(y):
        return lambda y, i, offset, theta: offset - theta[y[i]]

    return lambda y, i, offset, theta: _squared(y, i, offset, theta)


@_by_target_inline(side_arg)
def _side_arg(zs, y, i, offset, theta):
    """``zs + l(theta, y_i)``: one argument of the surrogate's max (``zs`` is ``-z`` or ``z``).

    For classes in the order ``(zs + offset) - theta[y_i]`` of the gradient kernels.
    """
    if _is_classes(y):
        return lambda zs, y, i, offset, theta: zs + offset - theta[y[i]]
    return lambda zs, y, i, offset, theta: zs + _squared(y, i, offset, theta)


@_by_target_inline(add_leaf_gradient)
def _add_leaf_gradient(g, y, i, wt, theta):
    """Add sample ``i``'s loss gradient with weight ``wt`` to ``g`` (classes: its count part)."""
    if _is_classes(y):
        return lambda g, y, i, wt, theta: _subtract_count(g, y, i, wt, theta)

    return lambda g, y, i, wt, theta: _residual(g, y, i, wt, theta)


@_by_target(finish_leaf_gradient)
def _finish_leaf_gradient(y, g, n, prob, inv):
    """Turn :func:`add_leaf_gradient`'s sums over a leaf's weight ``n`` into a mean gradient.

    Classes add the softmax part ``n * softmax(theta)`` (``prob``); both scale by ``inv``.
    """
    if _is_classes(y):
        return lambda y, g, n, prob, inv: _softmax_part(y, g, n, prob, inv)

    return lambda y, g, n, prob, inv: _scale_gradient(y, g, n, prob, inv)


@_by_target(init_leaves)
def _init_leaves(Xb, yb, wb, m, feature, threshold, n_outputs, prior):
    """Starting leaf parameters from the two sides of the axis split ``x[feature] > threshold``.

    Classes: log class frequencies with ``prior`` pseudo-counts (the paper
    starts from the empirical log-probabilities). Targets: each side's
    weighted mean (the squared loss's minimiser).
    """
    if _is_classes(yb):
        return lambda Xb, yb, wb, m, feature, threshold, n_outputs, prior: _log_frequencies(
            Xb, yb, wb, m, feature, threshold, n_outputs, prior
        )

    return lambda Xb, yb, wb, m, feature, threshold, n_outputs, prior: _side_means(
        Xb, yb, wb, m, feature, threshold, n_outputs, prior
    )


@_by_target(leaf_value)
def _leaf_value(y, row_weight, rows, start, end, node, value, n_node_samples):
    """Write a node's leaf value to ``value[node]`` and its weight to ``n_node_samples[node]``.

    The node's rows are ``rows[start:end]``. Classes: the weighted class
    histogram, normalised (left at zero when the weight is zero); returns the
    number of classes with positive weight. Targets: the weighted mean;
    returns 2 if the rows hold more than one target value, else 1 (0 without
    weight), so that ``<= 1`` means "nothing to split" for both.
    """
    if _is_classes(y):
        return lambda y, row_weight, rows, start, end, node, value, n_node_samples: (
            _class_distribution(y, row_weight, rows, start, end, node, value, n_node_samples)
        )

    return lambda y, row_weight, rows, start, end, node, value, n_node_samples: _weighted_mean(
        y, row_weight, rows, start, end, node, value, n_node_samples
    )


@_by_target(impurity_decrease)
def _impurity_decrease(y, row_weight, rows, start, mid, end, n_outputs, total_weight):
    """Weighted impurity decrease of a split, as scikit-learn's ``min_impurity_decrease``.

    ``rows[start:mid]`` go left, ``rows[mid:end]`` right; ``N_t / N * (I -
    N_t_R / N_t * I_R - N_t_L / N_t * I_L)``. Classes: ``I`` is the entropy in
    bits (:func:`~obliquetrees._training.grower.entropy_decrease`). Targets:
    ``I`` is the weighted variance averaged over the outputs (scikit-learn's
    ``criterion="squared_error"``), in the units of ``y``.
    """
    if _is_classes(y):
        return lambda y, row_weight, rows, start, mid, end, n_outputs, total_weight: (
            entropy_decrease(y, row_weight, rows, start, mid, end, n_outputs, total_weight)
        )

    return lambda y, row_weight, rows, start, mid, end, n_outputs, total_weight: _variance_decrease(
        y, row_weight, rows, start, mid, end, n_outputs, total_weight
    )


# ------------------------------------------ a stump's leaves over the classes present
@jit
def _compact_classes(y, m, theta0, theta1):
    n_classes = theta0.shape[0]
    if n_classes <= 2:  # (two classes or one: nothing to leave out, no pass over the rows)
        return np.empty(0, dtype=np.int64), theta0, theta1
    code = np.full(n_classes, -1, dtype=np.int64)
    for i in range(m):
        code[y[i]] = 0
    c = 0
    for k in range(n_classes):
        if code[k] == 0:
            code[k] = c
            c += 1
    if c < 2 or c == n_classes:
        return np.empty(0, dtype=np.int64), theta0, theta1
    present = np.empty(c, dtype=np.int64)
    t0 = np.empty(c)
    t1 = np.empty(c)
    for k in range(n_classes):
        if code[k] >= 0:
            present[code[k]] = k
            t0[code[k]] = theta0[k]
            t1[code[k]] = theta1[k]
    for i in range(m):
        y[i] = code[y[i]]
    return present, t0, t1


@jit
def _expand_classes(y, m, present, t0, t1, theta0, theta1):
    if present.shape[0] == 0:
        return
    for i in range(m):
        y[i] = present[y[i]]
    theta0[:] = -np.inf
    theta1[:] = -np.inf
    for k in range(present.shape[0]):
        theta0[present[k]] = t0[k]
        theta1[present[k]] = t1[k]


@_by_target(present_leaves)
def _present_leaves(y, m, theta0, theta1):
    """A stump's leaf parameters over the classes present among its ``m`` rows.

    Returns ``(present, t0, t1)``. Classes, when between 2 and all but one
    of the ``n`` classes occur in ``y[:m]``: ``present`` the classes that do
    (ascending), ``t0`` and ``t1`` copies of ``theta0`` and ``theta1`` at
    them, and ``y[:m]`` relabelled in place to positions in ``present``
    (:func:`restore_leaves` undoes it). Otherwise (and always for targets)
    ``present`` is empty and ``t0, t1`` are ``theta0, theta1`` themselves.
    """
    if _is_classes(y):
        return lambda y, m, theta0, theta1: _compact_classes(y, m, theta0, theta1)
    return lambda y, m, theta0, theta1: (np.empty(0, dtype=np.int64), theta0, theta1)


@_by_target(restore_leaves)
def _restore_leaves(y, m, present, t0, t1, theta0, theta1):
    """Undo :func:`present_leaves`: ``y[:m]`` back to classes, ``t0, t1`` into ``theta0, theta1``.

    A class absent from the rows gets logit ``-inf`` on both sides (where the
    log loss of the rows is least: its softmax share is taken from the
    present classes). Nothing when ``present`` is empty.
    """
    if _is_classes(y):
        return lambda y, m, present, t0, t1, theta0, theta1: _expand_classes(
            y, m, present, t0, t1, theta0, theta1
        )
    return lambda y, m, present, t0, t1, theta0, theta1: None
