"""Numba kernels of CO2 Forest (Norouzi et al.): one node's work.

:func:`split_node` is the per-node kernel that the breadth-first grower
(:func:`obliquetrees._training.co2.grow_tree`) calls on every node the growth
limits let it split: the node's class histogram, the leaf tests, the gathered
and centred copy of its rows, the best axis-aligned split that initialises the
stump, the CCCP (:mod:`obliquetrees._training._co2_kernels`), the fallback to
the axis-aligned split when the optimised one leaves a side too small, and
the in-place partition of the node's rows. Nodes the limits keep as leaves
only get their histogram (:func:`node_value`).

The node table is the grower's (``obliquetrees._training.grower``): this
module writes one row of its payload arrays ``weights``, ``bias``, ``value``
and ``n_node_samples`` per node and reorders the node's slice
``rows[start:end]`` of the tree's one row-index array.

Importing this module imports numba; the estimator imports it lazily.
"""

import numpy as np

from obliquetrees._core._jit import jit
from obliquetrees._core._random import node_seed, random_int
from obliquetrees._training._co2_kernels import cccp

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
def best_axis_split(Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state):
    """Best axis-aligned split by information gain among random features.

    Features are drawn without replacement (partial Fisher-Yates with
    ``state``) until ``max_features`` non-constant ones have been evaluated or
    all features have been drawn, as scikit-learn's splitter does. A sample
    goes right iff ``x[f] > threshold``.

    Returns
    -------
    feature : int
        -1 if no valid split exists.
    threshold : float
    impurity : float
        Weighted entropy ``N_L H_L + N_R H_R`` (nats) of the best split.
    """
    p = Xb.shape[1]
    feats = np.arange(p)
    vals = np.empty(m)
    cl = np.zeros(n_classes)
    cr = np.zeros(n_classes)
    xl = np.zeros(n_classes)
    xr = np.zeros(n_classes)
    hist = class_histogram(yb, wb, m, n_classes)
    total = 0.0
    s_tot = 0.0
    for k in range(n_classes):
        total += hist[k]
        s_tot += xlogx(hist[k])
    best_f = -1
    best_thr = 0.0
    best_imp = np.inf
    n_visited = 0
    for k in range(p):
        if n_visited >= max_features:
            break
        j = k + random_int(state, p - k)
        f = feats[j]
        feats[j] = feats[k]
        feats[k] = f
        lo = np.inf
        hi = -np.inf
        for i in range(m):
            v = Xb[i, f]
            vals[i] = v
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        if hi <= lo + FEATURE_THRESHOLD:
            continue  # constant in this node: does not count
        n_visited += 1
        order = np.argsort(vals[:m])
        for c in range(n_classes):
            cl[c] = 0.0
            cr[c] = hist[c]
            xl[c] = 0.0
            xr[c] = xlogx(hist[c])
        s_l = 0.0
        s_r = s_tot
        n_l = 0.0
        n_r = total
        for t in range(m - 1):
            i = order[t]
            c = yb[i]
            wt = wb[i]
            # xl/xr cache xlogx of the current counts: two logs per step, not four
            s_l -= xl[c]
            cl[c] += wt
            xl[c] = xlogx(cl[c])
            s_l += xl[c]
            s_r -= xr[c]
            cr[c] -= wt
            xr[c] = xlogx(cr[c])
            s_r += xr[c]
            n_l += wt
            n_r -= wt
            v_next = vals[order[t + 1]]
            if v_next <= vals[i] + FEATURE_THRESHOLD:
                continue
            if t + 1 < min_samples_leaf or m - t - 1 < min_samples_leaf:
                continue
            imp = (xlogx(n_l) - s_l) + (xlogx(n_r) - s_r)
            if imp < best_imp:
                best_imp = imp
                best_f = f
                thr = 0.5 * (vals[i] + v_next)
                if thr >= v_next or thr < vals[i]:
                    thr = vals[i]
                best_thr = thr
    return best_f, best_thr, best_imp


@jit
def init_theta(Xb, yb, wb, m, feature, threshold, n_classes, prior):
    """Leaf logits from the class frequencies on each side of an axis split."""
    c0 = np.full(n_classes, prior)
    c1 = np.full(n_classes, prior)
    for i in range(m):
        if Xb[i, feature] > threshold:
            c1[yb[i]] += wb[i]
        else:
            c0[yb[i]] += wb[i]
    s0 = 0.0
    s1 = 0.0
    for k in range(n_classes):
        s0 += c0[k]
        s1 += c1[k]
    theta0 = np.empty(n_classes)
    theta1 = np.empty(n_classes)
    for k in range(n_classes):
        theta0[k] = np.log(c0[k] / s0)
        theta1[k] = np.log(c1[k] / s1)
    return theta0, theta1


# ----------------------------------------------------------------- nodes
@jit
def node_value(y, row_weight, rows, start, end, node, value, n_node_samples):
    """Class distribution of one node, written to the node table.

    The node's rows are ``rows[start:end]``. Writes their weighted class
    histogram, normalised, to ``value[node]`` (left at zero when the weight
    is zero) and its total to ``n_node_samples[node]``; returns the number of
    classes with positive weight.
    """
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


@jit
def split_node(
    X,
    y,
    row_weight,
    rows,
    start,
    end,
    node,
    tree_seed,
    weights,
    bias,
    value,
    n_node_samples,
    max_features,
    min_samples_split,
    min_samples_leaf,
    nu,
    learning_rate,
    batch_size,
    momentum,
    cccp_epochs,
    max_cccp_iter,
    tol,
):
    """Fit the CO2 stump of one node and partition its rows in place.

    The node's rows are ``rows[start:end]`` of ``X`` (standardised) with
    labels ``y`` and weights ``row_weight``. Writes the node's class
    distribution (:func:`node_value`) and, for a split, its hyperplane to
    ``weights[node]`` and ``bias[node]``; reorders ``rows[start:end]`` so
    that the left child's rows come first. The node's random numbers are
    drawn from ``node_seed(tree_seed, node)``. The remaining parameters are
    :class:`obliquetrees._training.co2.CO2Params` fields.

    The stump is optimised on the node's rows centred on their weighted mean
    (the homogeneous coordinate relative to the node's centre; see the
    estimator's notes); the centring is folded into the stored bias.

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
    m = end - start
    n_present = node_value(y, row_weight, rows, start, end, node, value, n_node_samples)
    if n_present <= 1 or m < min_samples_split or m < 2 * min_samples_leaf:
        return -1, 0, False
    n_classes = value.shape[1]
    p = X.shape[1]
    yb = np.empty(m, dtype=np.int64)
    wb = np.empty(m)
    Xb = np.empty((m, p))
    for t in range(m):
        r = rows[start + t]
        yb[t] = y[r]
        wb[t] = row_weight[r]
        for j in range(p):
            Xb[t, j] = X[r, j]
    # centre on the weighted mean of the node
    mu = np.zeros(p)
    tw = 0.0
    for t in range(m):
        tw += wb[t]
        for j in range(p):
            mu[j] += wb[t] * Xb[t, j]
    for j in range(p):
        mu[j] /= tw
    for t in range(m):
        for j in range(p):
            Xb[t, j] -= mu[j]
    state = np.empty(1, dtype=np.uint64)
    state[0] = node_seed(tree_seed, node)
    feature, threshold, _ = best_axis_split(
        Xb, yb, wb, m, n_classes, max_features, min_samples_leaf, state
    )
    if feature < 0:
        return -1, 0, False
    # initial stump: unit vector on the feature, bias = -threshold
    w = weights[node]
    w[:] = 0.0
    w[feature] = 1.0
    theta0, theta1 = init_theta(Xb, yb, wb, m, feature, threshold, n_classes, THETA_PRIOR)
    history = np.empty(max_cccp_iter + 1)
    b, n_iter, _ = cccp(
        Xb,
        yb,
        wb,
        m,
        w,
        -threshold,
        theta0,
        theta1,
        nu,
        learning_rate,
        batch_size,
        momentum,
        cccp_epochs,
        max_cccp_iter,
        tol,
        state,
        history,
    )
    n_right = 0
    for t in range(m):
        z = b
        for j in range(p):
            z += w[j] * Xb[t, j]
        if z > 0.0:
            n_right += 1
    oblique = min(n_right, m - n_right) >= max(min_samples_leaf, 1)
    if not oblique:
        w[:] = 0.0
        w[feature] = 1.0
        b = -threshold
    for j in range(p):
        b -= w[j] * mu[j]  # back to uncentred inputs
    bias[node] = b
    # in-place partition of rows[start:end]: left rows first
    lo = start
    hi = end - 1
    while lo <= hi:
        r = rows[lo]
        z = b
        for j in range(p):
            z += w[j] * X[r, j]
        if z > 0.0:
            rows[lo] = rows[hi]
            rows[hi] = r
            hi -= 1
        else:
            lo += 1
    return lo - start, n_iter, oblique
