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
from obliquetrees._core._random import node_seed
from obliquetrees._training._optim import momentum_step, momentum_velocity
from obliquetrees._training.axis_split import (
    THETA_PRIOR,
    best_axis_split,
    init_theta,
    node_column,
)
from obliquetrees._training.targets import copy_target, empty_targets, finish_leaf_gradient
from obliquetrees.co2._kernels import (
    accept,
    draw_order,
    epoch_rate,
    first_best,
    minibatch_leaves,
    project_ball,
    restore,
    row_at,
    surrogate_of,
)
from obliquetrees.co2._node import cccp_rows, partition_by_side, splittable


@jit_inline
def sparse_dot(w, indptr, indices, data, i, b):
    """``b + w . u_i`` over the stored entries of row ``i``."""
    s = b
    for k in range(indptr[i], indptr[i + 1]):
        s += w[indices[k]] * data[k]
    return s


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
def sparse_margins(block, order, lo, hi, w, c, zs):
    """``zs[t] = c + w . u`` of the row at position ``t`` (:func:`row_at`), ``lo <= t < hi``.

    ``block`` is :func:`gather_node`'s; ``c`` is the bias on ``u`` (``b - w.mu``).
    """
    lptr, lidx, lval = block[0], block[1], block[2]
    for t in range(lo, hi):
        zs[t] = sparse_dot(w, lptr, lidx, lval, row_at(order, t), c)


@jit
def surrogate_sparse(block, m, w, c, theta0, theta1, signs, zs):
    """:func:`~obliquetrees.co2._kernels.surrogate` on a sparse node.

    ``c`` is the bias on ``u`` (``b - w.mu``). Writes the signs of ``z`` (and
    each row's ``z`` to ``zs``) and returns the weighted means of the
    surrogate and of the empirical loss.
    """
    sparse_margins(block, None, 0, m, w, c, zs)
    return surrogate_of(block[4], block[5], m, zs, theta0, theta1, signs)


@jit_inline
def minibatch_gradient_sparse(block, order, lo, hi, w, c, theta0, theta1, signs, grads, bufs):
    """:func:`~obliquetrees.co2._kernels.minibatch_leaves` and the weight gradient on a sparse node.

    The minibatch is ``order[lo:hi]``; ``c`` is the bias on ``u``. ``grads``
    is ``(acc, g0, g1, prob0, prob1)``: the weighted sum of ``coef_i u_i``
    is scattered into ``acc`` (which must be zero on entry; the caller's
    step zeroes it), the theta gradients go to ``g0``/``g1``. ``bufs`` is
    scratch ``(cbuf, rbuf, zs)``. Returns ``(gb, run, wsum)``: the mean bias
    gradient, the weighted sum of the surrogate and the total weight; the
    weight gradient is ``acc / wsum - mu * gb``.
    """
    lptr, lidx, lval, _, yb, wb = block
    acc, g0, g1, prob0, prob1 = grads
    cbuf, rbuf, zs = bufs
    sparse_margins(block, order, lo, hi, w, c, zs)
    gb, n0, n1, wsum, run, na = minibatch_leaves(
        yb, wb, order, lo, hi, zs, signs, theta0, theta1, g0, g1, prob0, prob1, cbuf, rbuf
    )
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


@jit
def cccp_sparse(block, m, w, b, theta0, theta1, params, state, history):
    """:func:`~obliquetrees.co2._kernels.cccp` on a sparse node.

    ``block`` is :func:`gather_node`'s result; ``(w, b)`` act on the
    node-centred ``u - mu``. Same iterations, random draws, learning-rate
    schedule and stopping rule as the dense kernel; minibatches are read
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
    border = np.empty(n_batches, dtype=np.int64)
    acc = np.zeros(p)
    per_class = np.empty((4, n_classes))
    grads = (acc, per_class[0], per_class[1], per_class[2], per_class[3])
    g0, g1 = per_class[0], per_class[1]
    zs = np.empty(m)  # z of the rows of the last pass, by position
    bufs = (np.empty(params.batch_size), np.empty(params.batch_size, dtype=np.int64), zs)
    vw = np.zeros(p)
    v0 = np.zeros(n_classes)
    v1 = np.zeros(n_classes)
    vb = 0.0
    best_w = w.copy()
    best_t0 = theta0.copy()
    best_t1 = theta1.copy()
    stump = (w, theta0, theta1)
    kept = (best_w, best_t0, best_t1)
    b = project_ball(w, b, params.nu)
    wmu = 0.0
    for j in range(p):
        wmu += w[j] * mu[j]
    first, _ = surrogate_sparse(block, m, w, b - wmu, theta0, theta1, signs, zs)
    best = first_best(first, b, history)
    eta, prev_run, n_up = params.learning_rate, np.inf, 0  # the schedule's (epoch_rate)
    n_iter = 0
    for _ in range(params.max_cccp_iter):
        n_iter += 1
        if n_batches > 1:
            # the dense kernel reorders its copy of the rows by each new shuffle:
            # compose the shuffles so that the minibatches hold the same rows
            draw_order(perm, m, state)
            for t in range(m):
                reordered[t] = order[perm[t]]
            order, reordered = reordered, order
        for _ in range(params.cccp_epochs):
            draw_order(border, n_batches, state)
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
            eta, prev_run, n_up = epoch_rate(run, tot, prev_run, n_up, eta)
        prev_signs[:] = signs
        current, _ = surrogate_sparse(block, m, w, b - wmu, theta0, theta1, signs, zs)
        best, stop = accept(current, b, best, signs, prev_signs, params, stump, kept, history)
        if stop:
            break
    return restore(stump, kept, best, n_iter)


@jit
def take_block_sparse(block, pick):
    """Rows ``pick`` of :func:`gather_node`'s block (a new local CSR; ``mu`` is the node's)."""
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
    return sptr, sidx, sval, mu, ys, ws


@jit
def stump_start(block, m, n_classes, p, params, state):
    """The initial axis-aligned split of :func:`gather_node`'s ``block`` and its leaf parameters.

    Returns ``(feature, threshold, theta0, theta1)``; ``feature`` is -1 (and the
    leaves meaningless) when the block has no valid split.
    """
    lptr, lidx, lval, mu, yb, wb = block
    node_columns = (transpose(lptr, lidx, lval, m, p), mu)
    feature, threshold, _ = best_axis_split(
        node_columns, yb, wb, m, n_classes, params.max_features, params.min_samples_leaf, state
    )
    column = np.empty((m, 1))
    node_column(node_columns, max(feature, 0), m, column[:, 0])
    theta0, theta1 = init_theta(column, yb, wb, m, 0, threshold, n_classes, THETA_PRIOR)
    return feature, threshold, theta0, theta1


@jit
def split_node_sparse(data, start, end, node, tree_seed, table, params):
    """:func:`~obliquetrees.co2._node.split_node` for CSR input.

    ``data`` is ``((indptr, indices, u), y, row_weight, rows)`` with ``u``
    the stored entries divided by the feature scale (see the module
    docstring). ``table`` is ``(w, bias, value, n_node_samples)`` with ``w``
    the grower's scratch row of ``n_features`` weights, not a row per node
    (:func:`~obliquetrees.co2._grow.keep_split` stores its nonzero
    entries). Writes the node's distribution, for a split its hyperplane on
    ``u`` to ``w`` (zeroed first) and ``bias[node]``, partitions
    ``rows[start:end]`` (left rows first) and returns ``(n_left, n_iter,
    oblique)`` as the dense kernel; a leaf leaves ``w`` as it was.
    """
    if not splittable(data, start, end, node, table, params):
        return -1, 0, False
    source, y, row_weight, rows = data
    w, bias, value = table[0], table[1], table[2]
    m = end - start
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
    if 0 <= params.max_cccp_samples < m:
        pick = cccp_rows(m, params.max_cccp_samples, state)
        sub = take_block_sparse(block, pick)
        s = pick.shape[0]
    feature, threshold, theta0, theta1 = stump_start(sub, s, n_classes, p, params, state)
    if feature < 0 and s < m:  # (dense: split_block)
        state[0] = node_seed(tree_seed, node)
        feature, threshold, theta0, theta1 = stump_start(block, m, n_classes, p, params, state)
        if feature >= 0:  # (no split: a leaf, nothing more to draw)
            pick = cccp_rows(m, params.max_cccp_samples, state)
            sub = take_block_sparse(block, pick)
    if feature < 0:
        return -1, 0, False
    w[:] = 0.0
    w[feature] = 1.0
    history = np.empty(params.max_cccp_iter + 1)
    b, n_iter, _ = cccp_sparse(sub, s, w, -threshold, theta0, theta1, params, state, history)
    for j in range(p):
        b -= w[j] * mu[j]  # bias on u, no longer centred
    # the side of each row (row t of the local CSR is rows[start + t], its stored entries
    # in the same order: the bits of reading it from source), then the dense kernel's partition
    right = np.empty(m, dtype=np.bool_)
    n_right = 0
    for t in range(m):
        right[t] = sparse_dot(w, lptr, lidx, lval, t, b) > 0.0
        n_right += right[t]
    oblique = min(n_right, m - n_right) >= max(params.min_samples_leaf, 1)
    if not oblique:
        w[:] = 0.0
        w[feature] = 1.0
        b = -threshold - mu[feature]
        for t in range(m):
            right[t] = sparse_dot(w, lptr, lidx, lval, t, b) > 0.0
    bias[node] = b
    return partition_by_side(rows, start, right), n_iter, oblique
