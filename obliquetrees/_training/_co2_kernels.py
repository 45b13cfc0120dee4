"""Numba kernels of CO2 Forest (Norouzi et al.): stump initialisation, the
convex-concave procedure (CCCP) for one node, and breadth-first tree growth.

Notation (paper, Sec. 4). A node's stump has a hyperplane ``(w, b)`` and two
leaf logit vectors ``theta0`` (left, ``z = w.x + b <= 0``) and ``theta1``
(right, ``z > 0``), with the softmax log loss
``l(theta, y) = logsumexp(theta) - theta[y]``. The surrogate (Eq. 10) of one
sample is ``max(-z + l(theta0, y), z + l(theta1, y)) - |z|``; it upper-bounds the
stump's loss (Eq. 2). CCCP fixes ``s = sgn(z_old)`` and minimises the convex
``max(-z + l0, z + l1) - s z`` (Eq. 11) by minibatch subgradient descent with
momentum, projecting ``(w, b)`` on the ball ``||(w, b)||^2 <= nu`` after each
step (Alg. 1).

Everything here works on standardised inputs. The paper's split sends
``w.x >= 0`` right; this package sends ``w.x + b > 0`` right, and the stump is
trained with that convention from the start (``s = +1`` iff ``z > 0``), so the
two differ only on exact ties.

All randomness comes from a splitmix64 generator with an explicit integer
state (``tests/reference.py`` re-implements it in Python), so a node's result
depends only on its data and its seed, never on the thread that runs it.

Helpers called per sample or per minibatch with array arguments (the RNG,
``row_dot``, the softmax, the projection and the minibatch gradient) use the
``jit_inline`` preset: as ordinary calls each paid reference counting on its
array arguments, and inlining them made a letter tree about 1.2x faster (CPU
time, interleaved A/B, 6 trees each) with bit-identical trees (same
operations in the same order).

Importing this module imports numba; the estimator imports it lazily.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline

#: Two values closer than this are treated as equal by the axis-aligned
#: split search (scikit-learn's FEATURE_THRESHOLD).
FEATURE_THRESHOLD = 1e-7

#: Pseudo-count added to the class counts of each side of the initial
#: axis-aligned split before taking logs (theta0/theta1 initialisation): the
#: paper initialises with the empirical class log-probabilities, which are
#: -inf for absent classes.
THETA_PRIOR = 1.0

#: Learning-rate schedule (the paper: "when it oscillates for more than a
#: number of iterations we reduce the learning rate"). After every epoch the
#: running surrogate of that epoch is compared with the previous epoch's; once
#: it has gone up OSC_PATIENCE times the rate is multiplied by LR_DECAY.
OSC_PATIENCE = 2
LR_DECAY = 0.5

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


# --------------------------------------------------------------------- RNG
@jit_inline
def rng_next(state):
    """splitmix64: advance ``state[0]`` and return a 64-bit random integer."""
    state[0] = state[0] + np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit_inline
def rng_int(state, n):
    """Random integer in ``[0, n)`` (``n >= 1``)."""
    return np.int64(rng_next(state) % np.uint64(n))


@jit
def node_seed(tree_seed, node_id):
    """Seed of one node, a hash of the tree seed and the node id."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(tree_seed) * np.uint64(0x100000001B3) + np.uint64(node_id)
    return rng_next(state)


@jit
def shuffle(perm, m, state):
    """Fisher-Yates shuffle of ``perm[:m]`` in place."""
    for i in range(m - 1, 0, -1):
        j = rng_int(state, i + 1)
        tmp = perm[i]
        perm[i] = perm[j]
        perm[j] = tmp


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


@jit_inline
def logsumexp(theta):
    mx = theta[0]
    for k in range(1, theta.shape[0]):
        if theta[k] > mx:
            mx = theta[k]
    acc = 0.0
    for k in range(theta.shape[0]):
        acc += np.exp(theta[k] - mx)
    return mx + np.log(acc)


@jit_inline
def softmax_lse(theta, prob):
    """Write ``softmax(theta)`` to ``prob`` and return ``logsumexp(theta)``."""
    mx = theta[0]
    for k in range(1, theta.shape[0]):
        if theta[k] > mx:
            mx = theta[k]
    acc = 0.0
    for k in range(theta.shape[0]):
        e = np.exp(theta[k] - mx)
        prob[k] = e
        acc += e
    inv = 1.0 / acc
    for k in range(theta.shape[0]):
        prob[k] *= inv
    return mx + np.log(acc)


@jit_inline
def row_dot(w, Xb, i, b):
    """``b + w . Xb[i]`` with four partial sums (no fastmath: fixed order)."""
    p = w.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    j = 0
    while j + 4 <= p:
        s0 += w[j] * Xb[i, j]
        s1 += w[j + 1] * Xb[i, j + 1]
        s2 += w[j + 2] * Xb[i, j + 2]
        s3 += w[j + 3] * Xb[i, j + 3]
        j += 4
    while j < p:
        s0 += w[j] * Xb[i, j]
        j += 1
    return b + ((s0 + s1) + (s2 + s3))


@jit_inline
def project_ball(w, b, nu):
    """Project ``(w, b)`` on ``||(w, b)||^2 <= nu``; returns the new ``b``."""
    sq = b * b
    for j in range(w.shape[0]):
        sq += w[j] * w[j]
    if sq > nu:
        r = np.sqrt(nu / sq)
        for j in range(w.shape[0]):
            w[j] *= r
        b *= r
    return b


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
        j = k + rng_int(state, p - k)
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


# ------------------------------------------------------------ surrogate
@jit
def surrogate(Xb, yb, wb, m, w, b, theta0, theta1, signs):
    """Weighted mean of the surrogate (Eq. 10) over the first ``m`` samples.

    Also writes ``signs[i] = +1`` if ``z_i > 0`` else ``-1`` (the CCCP
    linearisation point) and returns the weighted mean of the stump's
    empirical loss (Eq. 2) as the second value.
    """
    lse0 = logsumexp(theta0)
    lse1 = logsumexp(theta1)
    acc = 0.0
    emp = 0.0
    tot = 0.0
    for i in range(m):
        z = row_dot(w, Xb, i, b)
        l0 = lse0 - theta0[yb[i]]
        l1 = lse1 - theta1[yb[i]]
        a0 = -z + l0
        a1 = z + l1
        top = a0 if a0 >= a1 else a1
        wt = wb[i]
        acc += wt * (top - abs(z))
        if z > 0.0:
            signs[i] = 1.0
            emp += wt * l1
        else:
            signs[i] = -1.0
            emp += wt * l0
        tot += wt
    if tot <= 0.0:
        return 0.0, 0.0
    return acc / tot, emp / tot


@jit_inline
def minibatch_gradient(
    Xb, yb, wb, perm, lo, hi, w, b, theta0, theta1, signs, gw, g0, g1, prob0, prob1, cbuf, rbuf
):
    """Subgradient of the CCCP objective (Eq. 11) averaged over a minibatch.

    The minibatch is ``perm[lo:hi]``. Writes the weighted mean gradients in
    ``gw`` (w), ``g0`` (theta0) and ``g1`` (theta1); ``prob0``/``prob1`` are
    scratch for the leaf softmaxes, ``cbuf``/``rbuf`` (``hi - lo`` entries)
    for the active samples' coefficients and rows. The weight gradient is
    summed over samples in batch order for each feature, eight features at a
    time (register accumulators instead of a read-modify-write of ``gw`` per
    sample).

    Returns
    -------
    gb : float
        Gradient for the bias.
    run : float
        Weighted sum of the surrogate (Eq. 10) over the minibatch at the
        current parameters (used to detect oscillation).
    wsum : float
        Total weight of the minibatch (0 means no update).
    """
    p = Xb.shape[1]
    n_classes = theta0.shape[0]
    lse0 = softmax_lse(theta0, prob0)
    lse1 = softmax_lse(theta1, prob1)
    for k in range(n_classes):
        g0[k] = 0.0
        g1[k] = 0.0
    gb = 0.0
    n0 = 0.0
    n1 = 0.0
    wsum = 0.0
    run = 0.0
    na = 0
    for t in range(lo, hi):
        i = perm[t]
        wt = wb[i]
        yi = yb[i]
        z = row_dot(w, Xb, i, b)
        a0 = -z + lse0 - theta0[yi]
        a1 = z + lse1 - theta1[yi]
        s = signs[i]
        # branch-free: the active leaf is data dependent and unpredictable
        left = a0 >= a1
        w0 = wt if left else 0.0
        w1 = wt - w0
        coef = -(1.0 + s) if left else 1.0 - s
        top = a0 if left else a1
        n0 += w0
        n1 += w1
        g0[yi] -= w0
        g1[yi] -= w1
        run += wt * (top - abs(z))
        wsum += wt
        cw = wt * coef
        cbuf[na] = cw
        rbuf[na] = i
        na += coef != 0.0
        gb += cw
    j = 0
    while j + 8 <= p:
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        s5 = 0.0
        s6 = 0.0
        s7 = 0.0
        for u in range(na):
            r = rbuf[u]
            c = cbuf[u]
            s0 += c * Xb[r, j]
            s1 += c * Xb[r, j + 1]
            s2 += c * Xb[r, j + 2]
            s3 += c * Xb[r, j + 3]
            s4 += c * Xb[r, j + 4]
            s5 += c * Xb[r, j + 5]
            s6 += c * Xb[r, j + 6]
            s7 += c * Xb[r, j + 7]
        gw[j] = s0
        gw[j + 1] = s1
        gw[j + 2] = s2
        gw[j + 3] = s3
        gw[j + 4] = s4
        gw[j + 5] = s5
        gw[j + 6] = s6
        gw[j + 7] = s7
        j += 8
    while j < p:
        s0 = 0.0
        for u in range(na):
            s0 += cbuf[u] * Xb[rbuf[u], j]
        gw[j] = s0
        j += 1
    if wsum <= 0.0:
        return 0.0, run, wsum
    inv = 1.0 / wsum
    # softmax part of the log-loss gradient: n_leaf * softmax(theta) - counts
    for k in range(n_classes):
        g0[k] = (g0[k] + n0 * prob0[k]) * inv
        g1[k] = (g1[k] + n1 * prob1[k]) * inv
    for j in range(p):
        gw[j] *= inv
    return gb * inv, run, wsum


# ------------------------------------------------------------------ CCCP
@jit
def cccp(
    Xb,
    yb,
    wb,
    m,
    w,
    b,
    theta0,
    theta1,
    nu,
    learning_rate,
    batch_size,
    momentum,
    n_epochs,
    max_iter,
    tol,
    state,
    history,
):
    """Minimise the surrogate of one stump by CCCP (Alg. 1 with minibatches).

    Parameters ``w``, ``theta0`` and ``theta1`` are updated in place and the
    new bias is returned. Each outer iteration fixes the signs of
    ``z = w.x + b`` at the current iterate and runs ``n_epochs`` epochs of
    minibatch subgradient descent with momentum on Eq. 11, projecting
    ``(w, b)`` on the ``nu``-ball after every step. The learning rate is
    halved when the running surrogate of an epoch has gone up
    ``OSC_PATIENCE`` times. After each outer iteration the exact surrogate is
    evaluated: if it improved by less than ``tol`` (relative) the loop stops;
    if it did not improve at all, the previous iterate is restored, so the
    returned parameters are the best seen and the recorded sequence is
    non-increasing.

    ``history[0]`` receives the initial surrogate and ``history[t]`` the
    surrogate after accepted outer iteration ``t`` (``history`` needs
    ``max_iter + 1`` entries).

    Returns
    -------
    b : float
        The bias of the best iterate.
    n_iter : int
        Number of outer iterations run.
    n_hist : int
        Number of entries written to ``history``.
    """
    p = w.shape[0]
    n_classes = theta0.shape[0]
    # private copies, physically reordered at each outer iteration so that
    # minibatches read contiguous rows (random row access dominated big nodes)
    Xc = Xb[:m].copy()
    yc = yb[:m].copy()
    wc = wb[:m].copy()
    Xt = np.empty_like(Xc)
    yt = np.empty_like(yc)
    wt = np.empty_like(wc)
    signs = np.empty(m)
    st = np.empty(m)
    perm = np.arange(m)
    ident = np.arange(m)
    n_batches = (m + batch_size - 1) // batch_size
    border = np.arange(n_batches)
    gw = np.empty(p)
    g0 = np.empty(n_classes)
    g1 = np.empty(n_classes)
    prob0 = np.empty(n_classes)
    prob1 = np.empty(n_classes)
    cbuf = np.empty(batch_size)
    rbuf = np.empty(batch_size, dtype=np.int64)
    vw = np.zeros(p)
    v0 = np.zeros(n_classes)
    v1 = np.zeros(n_classes)
    vb = 0.0
    best_w = w.copy()
    best_t0 = theta0.copy()
    best_t1 = theta1.copy()
    b = project_ball(w, b, nu)
    best_b = b
    best, _ = surrogate(Xc, yc, wc, m, w, b, theta0, theta1, signs)
    history[0] = best
    n_hist = 1
    eta = learning_rate
    prev_run = np.inf
    n_up = 0
    n_iter = 0
    for _ in range(max_iter):
        n_iter += 1
        if n_batches > 1:
            for t in range(m):
                perm[t] = t
            shuffle(perm, m, state)
            for t in range(m):
                r = perm[t]
                for j in range(p):
                    Xt[t, j] = Xc[r, j]
                yt[t] = yc[r]
                wt[t] = wc[r]
                st[t] = signs[r]
            Xc, Xt = Xt, Xc
            yc, yt = yt, yc
            wc, wt = wt, wc
            signs, st = st, signs
        for _ in range(n_epochs):
            if n_batches > 1:
                for k in range(n_batches):
                    border[k] = k
                shuffle(border, n_batches, state)
            run = 0.0
            tot = 0.0
            for kb in range(n_batches):
                lo = border[kb] * batch_size
                hi = min(lo + batch_size, m)
                gb, r, ws = minibatch_gradient(
                    Xc,
                    yc,
                    wc,
                    ident,
                    lo,
                    hi,
                    w,
                    b,
                    theta0,
                    theta1,
                    signs,
                    gw,
                    g0,
                    g1,
                    prob0,
                    prob1,
                    cbuf,
                    rbuf,
                )
                run += r
                tot += ws
                if ws <= 0.0:
                    continue
                for j in range(p):
                    vw[j] = momentum * vw[j] - eta * gw[j]
                    w[j] += vw[j]
                vb = momentum * vb - eta * gb
                b += vb
                for k in range(n_classes):
                    v0[k] = momentum * v0[k] - eta * g0[k]
                    theta0[k] += v0[k]
                    v1[k] = momentum * v1[k] - eta * g1[k]
                    theta1[k] += v1[k]
                b = project_ball(w, b, nu)
            if tot > 0.0:
                run /= tot
            if run > prev_run:
                n_up += 1
                if n_up >= OSC_PATIENCE:
                    eta *= LR_DECAY
                    n_up = 0
            prev_run = run
        current, _ = surrogate(Xc, yc, wc, m, w, b, theta0, theta1, signs)
        if current < best:
            gain = best - current
            best = current
            best_b = b
            best_w[:] = w
            best_t0[:] = theta0
            best_t1[:] = theta1
            history[n_hist] = best
            n_hist += 1
            if gain <= tol * abs(best):
                break
        else:
            break
    w[:] = best_w
    theta0[:] = best_t0
    theta1[:] = best_t1
    return best_b, n_iter, n_hist


# ----------------------------------------------------------------- nodes
@jit
def split_node(
    X,
    y,
    cw,
    idx,
    start,
    end,
    n_classes,
    can_split,
    max_features,
    min_samples_split,
    min_samples_leaf,
    nu,
    learning_rate,
    batch_size,
    momentum,
    n_epochs,
    max_iter,
    tol,
    seed,
    w_out,
    hist_out,
    options,
    theta_prior,
):
    """Fit the CO2 stump of one node and partition its samples in place.

    The node's samples are the rows ``idx[start:end]`` of ``X`` (standardised)
    with labels ``y`` and per-row weights ``cw``. Writes the node's weighted
    class histogram to ``hist_out`` and, for a split, the hyperplane to
    ``w_out``; reorders ``idx[start:end]`` so that the left child's rows come
    first.

    Returns
    -------
    n_left : int
        Number of rows going left; -1 if the node is a leaf.
    b : float
        Bias of the split.
    n_iter : int
        CCCP outer iterations run.
    oblique : bool
        False if the CCCP split was degenerate (one side empty or smaller
        than ``min_samples_leaf``) and the initial axis-aligned split is
        used instead.
    """
    p = X.shape[1]
    m = end - start
    yb = np.empty(m, dtype=np.int64)
    wb = np.empty(m)
    for t in range(m):
        r = idx[start + t]
        yb[t] = y[r]
        wb[t] = cw[r]
    for k in range(n_classes):
        hist_out[k] = 0.0
    n_nonzero = 0
    for t in range(m):
        hist_out[yb[t]] += wb[t]
    for k in range(n_classes):
        if hist_out[k] > 0.0:
            n_nonzero += 1
    if not can_split or n_nonzero <= 1 or m < min_samples_split or m < 2 * min_samples_leaf:
        return -1, 0.0, 0, False
    n_local = n_classes
    Xb = np.empty((m, p))
    for t in range(m):
        r = idx[start + t]
        for j in range(p):
            Xb[t, j] = X[r, j]
    mu = np.zeros(p)
    if options & 1:
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
    state[0] = seed
    feature, threshold, axis_imp = best_axis_split(
        Xb, yb, wb, m, n_local, max_features, min_samples_leaf, state
    )
    if feature < 0:
        return -1, 0.0, 0, False
    # initial stump: unit vector on the feature, bias = -threshold
    for j in range(p):
        w_out[j] = 0.0
    w_out[feature] = 1.0
    theta0, theta1 = init_theta(Xb, yb, wb, m, feature, threshold, n_local, theta_prior)
    history = np.empty(max_iter + 1)
    b, n_iter, _ = cccp(
        Xb,
        yb,
        wb,
        m,
        w_out,
        -threshold,
        theta0,
        theta1,
        nu,
        learning_rate,
        batch_size,
        momentum,
        n_epochs,
        max_iter,
        tol,
        state,
        history,
    )
    n_right = 0
    cl = np.zeros(n_local)
    cr = np.zeros(n_local)
    for t in range(m):
        z = b
        for j in range(p):
            z += w_out[j] * Xb[t, j]
        if z > 0.0:
            n_right += 1
            cr[yb[t]] += wb[t]
        else:
            cl[yb[t]] += wb[t]
    worse = False
    if options & 2:
        nl = 0.0
        nr = 0.0
        sl = 0.0
        sr = 0.0
        for k in range(n_local):
            nl += cl[k]
            nr += cr[k]
            sl += xlogx(cl[k])
            sr += xlogx(cr[k])
        worse = (xlogx(nl) - sl) + (xlogx(nr) - sr) > axis_imp
    oblique = True
    too_small = min(n_right, m - n_right) < max(min_samples_leaf, 1)
    if worse or too_small:
        oblique = False
        for j in range(p):
            w_out[j] = 0.0
        w_out[feature] = 1.0
        b = -threshold
    for j in range(p):
        b -= w_out[j] * mu[j]
    # in-place partition of idx[start:end]: left rows first
    lo = start
    hi = end - 1
    while lo <= hi:
        r = idx[lo]
        z = b
        for j in range(p):
            z += w_out[j] * X[r, j]
        if z > 0.0:
            idx[lo] = idx[hi]
            idx[hi] = r
            hi -= 1
        else:
            lo += 1
    return lo - start, b, n_iter, oblique


@jit
def _grow(arr, new_cap):
    out = np.zeros((new_cap,) + arr.shape[1:], dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@jit
def grow_tree(
    X,
    y,
    cw,
    rows,
    n_classes,
    max_features,
    max_depth,
    min_samples_split,
    min_samples_leaf,
    max_leaf_nodes,
    nu,
    learning_rate,
    batch_size,
    momentum,
    n_epochs,
    max_iter,
    tol,
    seed,
    options,
    theta_prior,
):
    """Grow one CO2 tree breadth-first on the rows ``rows`` of ``X``.

    Node ids are assigned in creation order, so processing ids in increasing
    order is a breadth-first sweep. Each node's rows are the contiguous slice
    of one index array that :func:`split_node` partitions in place.
    ``max_depth < 0`` and ``max_leaf_nodes < 0`` mean unlimited; with
    ``max_leaf_nodes`` a node is split only while the tree has fewer leaves.

    Returns
    -------
    children_left, children_right : int64 arrays (n_nodes,)
    weights : float64 array (n_nodes, n_features)
    bias : float64 array (n_nodes,)
    value : float64 array (n_nodes, n_classes)
        Weighted class distribution (normalised) of each node.
    n_node_samples : float64 array (n_nodes,)
        Weighted number of training samples of each node.
    stats : int64 array (3,)
        Total CCCP outer iterations, oblique splits, axis-aligned fallbacks.
    """
    p = X.shape[1]
    idx = rows.copy()
    n_rows = idx.shape[0]
    cap = 64
    left = np.full(cap, -1, dtype=np.int64)
    right = np.full(cap, -1, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    depth = np.zeros(cap, dtype=np.int64)
    bias = np.zeros(cap)
    weights = np.zeros((cap, p))
    value = np.zeros((cap, n_classes))
    nns = np.zeros(cap)
    stats = np.zeros(3, dtype=np.int64)
    w_buf = np.empty(p)
    hist = np.empty(n_classes)
    end[0] = n_rows
    n_nodes = 1
    n_leaves = 1
    node = 0
    while node < n_nodes:
        can_split = (max_depth < 0 or depth[node] < max_depth) and (
            max_leaf_nodes < 0 or n_leaves < max_leaf_nodes
        )
        n_left, b, n_iter, oblique = split_node(
            X,
            y,
            cw,
            idx,
            start[node],
            end[node],
            n_classes,
            can_split,
            max_features,
            min_samples_split,
            min_samples_leaf,
            nu,
            learning_rate,
            batch_size,
            momentum,
            n_epochs,
            max_iter,
            tol,
            node_seed(seed, node),
            w_buf,
            hist,
            options,
            theta_prior,
        )
        tot = 0.0
        for k in range(n_classes):
            tot += hist[k]
        nns[node] = tot
        if tot > 0.0:
            for k in range(n_classes):
                value[node, k] = hist[k] / tot
        if n_left >= 0:
            stats[0] += n_iter
            if oblique:
                stats[1] += 1
            else:
                stats[2] += 1
            if n_nodes + 2 > cap:
                new_cap = 2 * cap
                left = _grow(left, new_cap)
                right = _grow(right, new_cap)
                start = _grow(start, new_cap)
                end = _grow(end, new_cap)
                depth = _grow(depth, new_cap)
                bias = _grow(bias, new_cap)
                weights = _grow(weights, new_cap)
                value = _grow(value, new_cap)
                nns = _grow(nns, new_cap)
                left[cap:] = -1
                right[cap:] = -1
                cap = new_cap
            lc = n_nodes
            rc = n_nodes + 1
            left[node] = lc
            right[node] = rc
            weights[node, :] = w_buf
            bias[node] = b
            start[lc] = start[node]
            end[lc] = start[node] + n_left
            start[rc] = start[node] + n_left
            end[rc] = end[node]
            depth[lc] = depth[node] + 1
            depth[rc] = depth[node] + 1
            n_nodes += 2
            n_leaves += 1
        node += 1
    return (
        left[:n_nodes].copy(),
        right[:n_nodes].copy(),
        weights[:n_nodes].copy(),
        bias[:n_nodes].copy(),
        value[:n_nodes].copy(),
        nns[:n_nodes].copy(),
        depth[:n_nodes].copy(),
        stats,
    )
