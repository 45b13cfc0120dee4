"""Numba kernels of CO2 Forest on sparse (CSR) input: one node's stump, without densifying.

The sparse counterpart of :func:`obliquetrees.co2._node.split_node`,
for the same algorithm (same feature draws, minibatch orders, centring, CCCP
and fallback; see that module for the notation). The dense kernel gathers a
node's rows as a dense ``(m, n_features)`` block of standardised, node-centred
values; here a node keeps its rows sparse and the centring stays implicit.

Coordinates. The grower passes ``u = x / scale`` as a CSR (``indptr``,
``indices``, ``data``: the stored entries of ``X`` divided by the feature
scale; features constant in training have an infinite scale, so their ``u``
is 0). A node with weighted mean ``mu`` of ``u`` optimises its stump on
``u - mu``: a row's ``z = w.(u - mu) + b = (b - w.mu) + sum over stored
entries of w_j u_j``, and the minibatch subgradient of ``w`` is
``sum_i c_i (u_i - mu) = (scatter of c_i u_i over stored entries) - mu sum_i c_i``.
So a step costs O(stored entries of the batch + n_features), never
O(batch x n_features). The stored split acts on ``u`` (bias ``b - w.mu``);
the caller folds ``scale`` into it. Subtracting the global mean is left out:
it cancels in the node centring.

Floating point. The same quantities are summed in another order than in the
dense kernel (sparse dot products, gradients as scatter minus ``mu`` times a
sum), so a sparse fit equals the dense fit of the same data up to rounding,
not bit for bit.

Importing this module imports numba; the estimator imports it lazily.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline
from obliquetrees._core._random import node_seed, shuffle
from obliquetrees._training._optim import momentum_step, momentum_velocity
from obliquetrees._training.axis_split import (
    THETA_PRIOR,
    init_theta,
    node_column,
    ranked_axis_split,
)
from obliquetrees._training.targets import (
    add_leaf_gradient,
    copy_target,
    empty_targets,
    finish_leaf_gradient,
    leaf_loss,
    leaf_offset,
    leaf_prepare,
    present_leaves,
    restore_leaves,
    side_arg,
)
from obliquetrees.co2._kernels import (
    LR_DECAY,
    OSC_PATIENCE,
    n_changed,
    partition_settled,
    project_ball,
)
from obliquetrees.co2._monotone import node_constraints, on_support, ordered, project_signs
from obliquetrees.co2._node import (
    NO_ROWS,
    axis_split_weights,
    candidate_scores,
    cccp_rows,
    fit_support,
    node_presorted,
    node_value,
    oblique_pays,
    oriented_start,
    place_support,
    sample_presorted,
    split_support,
)
from obliquetrees.co2._oob import oob_keeps, tests_out_of_bag
from obliquetrees.co2._rows import row_side, row_value, sparse_dot


@jit
def gather_node(source, y, row_weight, rows, start, end, n_features):
    """The node's rows ``rows[start:end]`` as a local CSR, with labels, weights and mean.

    Returns ``(lptr, lidx, lval, mu, yb, wb)``: row ``t`` of the local CSR is
    ``rows[start + t]`` of ``source``; ``mu`` is the weighted mean of the
    node's rows (dense, ``n_features``).
    """
    indptr, indices, data = source
    m = end - start
    yb = empty_targets(y, m)
    wb = np.empty(m)
    lptr = np.empty(m + 1, dtype=np.int64)
    lptr[0] = 0
    for t in range(m):
        r = rows[start + t]
        copy_target(yb, t, y, r)
        wb[t] = row_weight[r]
        lptr[t + 1] = lptr[t] + indptr[r + 1] - indptr[r]
    lidx = np.empty(lptr[m], dtype=np.int64)
    lval = np.empty(lptr[m])
    mu = np.zeros(n_features)
    tw = 0.0
    for t in range(m):
        r = rows[start + t]
        k0 = indptr[r]
        wt = wb[t]
        tw += wt
        for k in range(lptr[t], lptr[t + 1]):
            j = indices[k0 + k - lptr[t]]
            v = data[k0 + k - lptr[t]]
            lidx[k] = j
            lval[k] = v
            mu[j] += wt * v
    for j in range(n_features):
        mu[j] /= tw
    return lptr, lidx, lval, mu, yb, wb


@jit
def transpose(lptr, lidx, lval, m, n_features):
    """The local CSR as CSC ``(cptr, crow, cval)``, rows ascending in each column."""
    cptr = np.zeros(n_features + 1, dtype=np.int64)
    for k in range(lptr[m]):
        cptr[lidx[k] + 1] += 1
    for j in range(n_features):
        cptr[j + 1] += cptr[j]
    fill = cptr[:-1].copy()
    crow = np.empty(lptr[m], dtype=np.int64)
    cval = np.empty(lptr[m])
    for t in range(m):
        for k in range(lptr[t], lptr[t + 1]):
            j = lidx[k]
            crow[fill[j]] = t
            cval[fill[j]] = lval[k]
            fill[j] += 1
    return cptr, crow, cval


@jit
def surrogate_sparse(block, m, w, c, theta0, theta1, signs):
    """:func:`~obliquetrees.co2._kernels.surrogate` on a sparse node.

    ``c`` is the bias on ``u`` (``b - w.mu``). Writes the signs of ``z`` and
    returns the weighted means of the surrogate and of the empirical loss.
    """
    lptr, lidx, lval, _, yb, wb = block
    lse0 = leaf_offset(yb, theta0)
    lse1 = leaf_offset(yb, theta1)
    acc = 0.0
    emp = 0.0
    tot = 0.0
    for i in range(m):
        z = sparse_dot(w, lptr, lidx, lval, i, c)
        l0 = leaf_loss(yb, i, lse0, theta0)
        l1 = leaf_loss(yb, i, lse1, theta1)
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
def minibatch_gradient_sparse(block, order, lo, hi, w, c, theta0, theta1, signs, grads, bufs):
    """:func:`~obliquetrees.co2._kernels.minibatch_gradient` on a sparse node.

    The minibatch is ``order[lo:hi]``; ``c`` is the bias on ``u``. ``grads``
    is ``(acc, g0, g1, prob0, prob1)``: the weighted sum of ``coef_i u_i``
    is scattered into ``acc`` (which must be zero on entry; the caller's
    step zeroes it), the theta gradients go to ``g0``/``g1``. Returns
    ``(gb, run, wsum)`` as the dense kernel; the weight gradient is
    ``acc / wsum - mu * gb``.
    """
    lptr, lidx, lval, _, yb, wb = block
    acc, g0, g1, prob0, prob1 = grads
    cbuf, rbuf = bufs
    n_classes = theta0.shape[0]
    lse0 = leaf_prepare(yb, theta0, prob0)
    lse1 = leaf_prepare(yb, theta1, prob1)
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
        i = order[t]
        wt = wb[i]
        z = sparse_dot(w, lptr, lidx, lval, i, c)
        a0 = side_arg(-z, yb, i, lse0, theta0)
        a1 = side_arg(z, yb, i, lse1, theta1)
        s = signs[i]
        left = a0 >= a1
        w0 = wt if left else 0.0
        w1 = wt - w0
        coef = -(1.0 + s) if left else 1.0 - s
        top = a0 if left else a1
        n0 += w0
        n1 += w1
        add_leaf_gradient(g0, yb, i, w0, theta0)
        add_leaf_gradient(g1, yb, i, w1, theta1)
        run += wt * (top - abs(z))
        wsum += wt
        cw = wt * coef
        cbuf[na] = cw
        rbuf[na] = i
        na += coef != 0.0
        gb += cw
    for u in range(na):
        r = rbuf[u]
        cw = cbuf[u]
        for k in range(lptr[r], lptr[r + 1]):
            acc[lidx[k]] += cw * lval[k]
    if wsum <= 0.0:
        return 0.0, run, wsum
    inv = 1.0 / wsum
    finish_leaf_gradient(yb, g0, n0, prob0, inv)
    finish_leaf_gradient(yb, g1, n1, prob1, inv)
    return gb * inv, run, wsum


@jit_inline
def weight_step(w, vw, acc, mu, gb, inv, momentum, step_size):
    """Momentum step of ``w`` on the gradient ``acc * inv - mu * gb``, zeroing ``acc``.

    One pass over the features (gradient, velocity, parameter); returns
    ``||w||^2`` and ``w.mu`` after the step.
    """
    sq = 0.0
    wmu = 0.0
    for j in range(w.shape[0]):
        g = acc[j] * inv - mu[j] * gb
        acc[j] = 0.0
        vw[j] = momentum_velocity(vw[j], g, momentum, step_size)
        w[j] += vw[j]
        sq += w[j] * w[j]
        wmu += w[j] * mu[j]
    return sq, wmu


@jit_inline
def norm_and_shift(w, mu):
    """``(||w||^2, w.mu)``."""
    sq = 0.0
    wmu = 0.0
    for j in range(w.shape[0]):
        sq += w[j] * w[j]
        wmu += w[j] * mu[j]
    return sq, wmu


@jit
def cccp_sparse(block, m, w, b, theta0, theta1, params, state, history, cst=None):
    """:func:`~obliquetrees.co2._kernels.cccp` on a sparse node.

    :func:`cccp_sparse_leaves` on the leaf parameters of the classes present
    among the block's ``m`` rows, as the dense kernel
    (:func:`~obliquetrees._training.targets.present_leaves`).
    """
    yb = block[4]
    present, t0, t1 = present_leaves(yb, m, theta0, theta1)
    b, n_iter, n_hist = cccp_sparse_leaves(block, m, w, b, t0, t1, params, state, history, cst)
    restore_leaves(yb, m, present, t0, t1, theta0, theta1)
    return b, n_iter, n_hist


@jit
def cccp_sparse_leaves(block, m, w, b, theta0, theta1, params, state, history, cst=None):
    """:func:`~obliquetrees.co2._kernels.cccp_leaves` on a sparse node.

    ``block`` is :func:`gather_node`'s result; ``(w, b)`` act on the
    node-centred ``u - mu``. Same iterations, random draws, learning-rate
    schedule, stopping rule and projection on monotonic constraints ``cst``
    as the dense kernel; minibatches are read
    through the (composed) shuffled row order instead of a reordered copy. Returns
    ``(b, n_iter, n_hist)``.
    """
    mu = block[3]
    p = w.shape[0]
    n_classes = theta0.shape[0]
    signs = np.empty(m)
    prev_signs = np.empty(m)
    perm = np.arange(m)
    order = np.arange(m)  # row of the node at each position of the current order
    reordered = np.empty(m, dtype=np.int64)
    n_batches = (m + params.batch_size - 1) // params.batch_size
    border = np.arange(n_batches)
    acc = np.zeros(p)
    per_class = np.empty((4, n_classes))
    grads = (acc, per_class[0], per_class[1], per_class[2], per_class[3])
    g0, g1 = per_class[0], per_class[1]
    bufs = (np.empty(params.batch_size), np.empty(params.batch_size, dtype=np.int64))
    vw = np.zeros(p)
    v0 = np.zeros(n_classes)
    v1 = np.zeros(n_classes)
    vb = 0.0
    best_w = w.copy()
    best_t0 = theta0.copy()
    best_t1 = theta1.copy()
    b = project_ball(w, b, params.nu)
    wmu = 0.0
    for j in range(p):
        wmu += w[j] * mu[j]
    best_b = b
    best, _ = surrogate_sparse(block, m, w, b - wmu, theta0, theta1, signs)
    history[0] = best
    n_hist = 1
    eta = params.learning_rate
    prev_run = np.inf
    n_up = 0
    n_iter = 0
    for _ in range(params.max_cccp_iter):
        n_iter += 1
        if n_batches > 1:
            # the dense kernel reorders its copy of the rows by each new shuffle:
            # compose the shuffles so that the minibatches hold the same rows
            for t in range(m):
                perm[t] = t
            shuffle(perm, m, state)
            for t in range(m):
                reordered[t] = order[perm[t]]
            order, reordered = reordered, order
        for _ in range(params.cccp_epochs):
            if n_batches > 1:
                for k in range(n_batches):
                    border[k] = k
                shuffle(border, n_batches, state)
            run = 0.0
            tot = 0.0
            for kb in range(n_batches):
                lo = border[kb] * params.batch_size
                hi = min(lo + params.batch_size, m)
                gb, r, ws = minibatch_gradient_sparse(
                    block, order, lo, hi, w, b - wmu, theta0, theta1, signs, grads, bufs
                )
                run += r
                tot += ws
                if ws <= 0.0:
                    continue
                sq, wmu = weight_step(w, vw, acc, mu, gb, 1.0 / ws, params.momentum, eta)
                if project_signs(w, vw, cst):  # (never without constraints)
                    sq, wmu = norm_and_shift(w, mu)
                vb = momentum_velocity(vb, gb, params.momentum, eta)
                b += vb
                momentum_step(theta0, v0, g0, params.momentum, eta)
                momentum_step(theta1, v1, g1, params.momentum, eta)
                sq += b * b
                if sq > params.nu:  # project_ball, with w.mu kept in step
                    ratio = np.sqrt(params.nu / sq)
                    for j in range(p):
                        w[j] *= ratio
                    b *= ratio
                    wmu *= ratio
            if tot > 0.0:
                run /= tot
            if run > prev_run:
                n_up += 1
                if n_up >= OSC_PATIENCE:
                    eta *= LR_DECAY
                    n_up = 0
            prev_run = run
        prev_signs[:] = signs
        current, _ = surrogate_sparse(block, m, w, b - wmu, theta0, theta1, signs)
        n_flipped = n_changed(signs, prev_signs, m)
        if current < best:
            gain = best - current
            best = current
            best_b = b
            best_w[:] = w
            best_t0[:] = theta0
            best_t1[:] = theta1
            history[n_hist] = best
            n_hist += 1
            if gain <= params.tol * abs(best) or partition_settled(n_flipped, m, params):
                break
        else:
            break
    w[:] = best_w
    theta0[:] = best_t0
    theta1[:] = best_t1
    return best_b, n_iter, n_hist


@jit
def take_block_sparse(block, pick, own_mean=False):
    """Rows ``pick`` of :func:`gather_node`'s block (a new local CSR).

    ``mu`` is the node's, or with ``own_mean`` the weighted mean of the rows
    picked (0 if their weight is), as the dense kernel centres a sampled node
    (:func:`~obliquetrees.co2._node.split_sampled`).
    """
    lptr, lidx, lval, mu, yb, wb = block
    s = pick.shape[0]
    sptr = np.empty(s + 1, dtype=np.int64)
    sptr[0] = 0
    for t in range(s):
        r = pick[t]
        sptr[t + 1] = sptr[t] + lptr[r + 1] - lptr[r]
    sidx = np.empty(sptr[s], dtype=np.int64)
    sval = np.empty(sptr[s])
    ys = empty_targets(yb, s)
    ws = np.empty(s)
    for t in range(s):
        r = pick[t]
        copy_target(ys, t, yb, r)
        ws[t] = wb[r]
        k0 = lptr[r] - sptr[t]
        for k in range(sptr[t], sptr[t + 1]):
            sidx[k] = lidx[k0 + k]
            sval[k] = lval[k0 + k]
    if own_mean:
        mu = np.zeros(mu.shape[0])
        tw = 0.0
        for t in range(s):
            tw += ws[t]
            for k in range(sptr[t], sptr[t + 1]):
                mu[sidx[k]] += ws[t] * sval[k]
        for j in range(mu.shape[0]):
            mu[j] = mu[j] / tw if tw > 0.0 else 0.0
    return sptr, sidx, sval, mu, ys, ws


@jit
def stump_start(block, m, n_classes, p, params, state, scores, cst, presorted=None):
    """The initial axis-aligned split of :func:`gather_node`'s ``block`` and its leaf parameters.

    Returns ``(feature, threshold, theta0, theta1)``; ``feature`` is -1 (and the
    leaves meaningless) when the block has no valid split. The candidates'
    impurities go to ``scores`` (:func:`~obliquetrees.co2._node.candidate_scores`).
    ``cst`` (monotonic constraints, None: none) as in the dense kernel: the
    thetas are those of the oriented start
    (:func:`~obliquetrees.co2._node.oriented_start`, which the caller applies).
    ``presorted``: the block's rows in order of every feature
    (:func:`~obliquetrees.co2._node.node_presorted`), None to scan each
    column from its stored entries
    (:func:`~obliquetrees._training.axis_split.scan_column`).
    """
    lptr, lidx, lval, mu, yb, wb = block
    node_columns = (transpose(lptr, lidx, lval, m, p), mu)
    feature, threshold, _ = ranked_axis_split(
        node_columns,
        yb,
        wb,
        m,
        n_classes,
        params.max_features,
        params.min_samples_leaf,
        state,
        scores,
        cst,
        presorted,
    )
    column = np.empty((m, 1))
    node_column(node_columns, max(feature, 0), m, column[:, 0])
    theta0, theta1 = init_theta(column, yb, wb, m, 0, threshold, n_classes, THETA_PRIOR)
    return feature, threshold, theta0, theta1


@jit
def support_rows_sparse(block, s, support):
    """:func:`~obliquetrees.co2._node.support_rows` of :func:`gather_node`'s ``block``.

    The dense ``(s, k)`` node-centred columns ``support`` of its rows (a row
    without an entry holds ``-mu``), and copies of its targets and weights.
    """
    lptr, lidx, lval, mu, yb, wb = block
    k = support.shape[0]
    slot = np.full(mu.shape[0], -1, dtype=np.int64)
    for j in range(k):
        slot[support[j]] = j
    Xs = np.empty((s, k))
    ys = empty_targets(yb, s)
    ws = np.empty(s)
    for t in range(s):
        for j in range(k):
            Xs[t, j] = -mu[support[j]]
        for e in range(lptr[t], lptr[t + 1]):
            j = slot[lidx[e]]
            if j >= 0:
                Xs[t, j] += lval[e]
        copy_target(ys, t, yb, t)
        ws[t] = wb[t]
    return Xs, ys, ws


@jit
def sparse_oblique_pays(block, s, w, b, feature, threshold, n_classes, params):
    """:func:`~obliquetrees.co2._node.oblique_pays` of ``(w, b)`` (on centred rows) on ``block``."""
    if params.oblique_penalty < 0.0 or tests_out_of_bag(params):
        return True
    lptr, lidx, lval, mu, yb, wb = block
    rows = (lptr, lidx, lval)  # the block's rows as a CSR source of u
    shift = b  # z = w.(u - mu) + b
    for j in range(w.shape[0]):
        shift -= w[j] * mu[j]
    right = np.empty(s, dtype=np.bool_)
    right_axis = np.empty(s, dtype=np.bool_)
    no_buffer = np.empty(0)  # (CSR rows are read in place)
    for t in range(s):
        right[t] = row_side(rows, t, w, shift, no_buffer)
        right_axis[t] = row_value(rows, t, feature) - mu[feature] > threshold
    return oblique_pays(yb, wb, s, right_axis, right, np.count_nonzero(w), n_classes, params)


@jit
def split_node_sparse(data, start, end, node, tree_seed, table, params, cst=None, presorted=None):
    """:func:`~obliquetrees.co2._node.split_node` for CSR input.

    ``data`` is ``((indptr, indices, u), y, row_weight, rows, oob)`` with ``u``
    the stored entries divided by the feature scale (see the module
    docstring). ``table`` is ``(w, bias, value, n_node_samples)`` with ``w``
    the grower's scratch row of ``n_features`` weights, not a row per node
    (:func:`~obliquetrees.co2._grow.keep_split` stores its nonzero
    entries). Writes the node's distribution, for a split its hyperplane on
    ``u`` to ``w`` (zeroed first) and ``bias[node]``, partitions
    ``rows[start:end]`` (left rows first) and returns ``(n_left, n_iter,
    oblique)`` as the dense kernel; a leaf leaves ``w`` as it was. Monotonic
    constraints ``cst`` are kept as by the dense kernel.
    """
    source, y, row_weight, rows, _ = data
    w, bias, value, n_node_samples = table
    m = end - start
    n_present = node_value(y, row_weight, rows, start, end, node, value, n_node_samples)
    if n_present <= 1 or m < params.min_samples_split or m < 2 * params.min_samples_leaf:
        return -1, 0, False
    n_classes = value.shape[1]
    p = w.shape[0]
    block = gather_node(source, y, row_weight, rows, start, end, p)
    lptr, lidx, lval, mu, yb, wb = block
    state = np.empty(1, dtype=np.uint64)
    state[0] = node_seed(tree_seed, node)
    # as the dense kernel: a node above max_cccp_samples rows fits its stump (axis-aligned
    # start and CCCP) on that many of them, drawn first; all rows if the sample has no split
    sub = block
    s = m
    scores = candidate_scores(p, params)
    if 0 <= params.max_cccp_samples < m:
        pick = cccp_rows(m, params.max_cccp_samples, state)
        sub = take_block_sparse(block, pick, own_mean=True)
        s = pick.shape[0]
        feature, threshold, theta0, theta1 = stump_start(
            sub, s, n_classes, p, params, state, scores, cst,
            sample_presorted(presorted, rows, start, end, pick),
        )  # fmt: skip
    else:  # the whole block: its rows are the node's, in the order of rows[start:end]
        feature, threshold, theta0, theta1 = stump_start(
            sub, s, n_classes, p, params, state, scores, cst,
            node_presorted(presorted, rows, start, end),
        )  # fmt: skip
    if feature < 0 and s < m:  # (dense: split_block)
        state[0] = node_seed(tree_seed, node)
        scores = candidate_scores(p, params)
        feature, threshold, theta0, theta1 = stump_start(
            block, m, n_classes, p, params, state, scores, cst,
            node_presorted(presorted, rows, start, end),
        )  # fmt: skip
        if feature >= 0:  # (no split: a leaf, nothing more to draw)
            pick = cccp_rows(m, params.max_cccp_samples, state)
            sub = take_block_sparse(block, pick)
    if feature < 0:
        return -1, 0, False
    mu = sub[3]  # the centring the start and the CCCP saw (a sample's own, as dense)
    theta0, theta1 = oriented_start(w, feature, cst, theta0, theta1)
    sign = w[feature]
    fit_cst = node_constraints(cst, feature)
    history = np.empty(params.max_cccp_iter + 1)
    support = split_support(scores, feature, p, m, params)
    if support.shape[0] == 0:  # a node below min_samples_oblique keeps its start
        b, n_iter, pays = -threshold * sign, 0, False
    elif support.shape[0] == p:  # the paper's stump, on every feature
        b, n_iter, _ = cccp_sparse(
            sub, s, w, -threshold * sign, theta0, theta1, params, state, history, fit_cst
        )
        pays = sparse_oblique_pays(sub, s, w, b, feature, threshold, n_classes, params)
    else:
        Xs, ys, ws = support_rows_sparse(sub, s, support)
        wk, b, n_iter, pays = fit_support(
            Xs, ys, ws, s, sign, threshold, theta0, theta1, n_classes, params, state, history,
            on_support(fit_cst, support),
        )  # fmt: skip
        place_support(w, support, wk)
    pays = pays and oob_keeps(data, w, b, mu, feature, threshold, n_classes, params)
    for j in range(p):
        b -= w[j] * mu[j]  # bias on u, no longer centred
    n_right = 0
    right = np.empty(m, dtype=np.bool_)
    for t in range(m if pays else 0):  # the oblique split's sides, if it may be kept
        right[t] = sparse_dot(w, lptr, lidx, lval, t, b) > 0.0
        n_right += right[t]
    oblique = pays and min(n_right, m - n_right) >= max(params.min_samples_leaf, 1)
    oblique = oblique and ordered(cst, w, yb, wb, NO_ROWS, 0, right)
    if not oblique:
        b = axis_split_weights(w, feature, cst) * (-threshold - mu[feature])
    bias[node] = b
    indptr, indices, u = source
    lo = start
    hi = end - 1
    while lo <= hi:
        r = rows[lo]
        if sparse_dot(w, indptr, indices, u, r, b) > 0.0:
            rows[lo] = rows[hi]
            rows[hi] = r
            hi -= 1
        else:
            lo += 1
    return lo - start, n_iter, oblique
