"""numba kernels of E2EDT's pruned finetune routing (``prune_threshold > 0``).

The E-step and split gradient of one minibatch (:func:`pruned_em_batch`)
walk each sample from the root into every child whose path probability is
at least ``eps``, and always into the child that hard routing picks, so a
sample reaches at least one leaf; responsibilities are normalised over the
leaves it reached (exact when routing is hard). A split costs one dot
product where a sample goes, instead of a GEMM row over all samples. The
tree layout, the leaf models and the log-space rescue are those of
:mod:`obliquetrees.e2edt._kernels`; results are reproducible bit for bit (every
reduction runs in sample order).
"""

import numpy as np

# numpy's error model lets LLVM vectorise the sample loops that divide. No
# kernel here divides by zero: denominators are ``1 + exp(.) >= 1`` or guarded.
from obliquetrees._core._jit import jit_inline
from obliquetrees._core._jit import jit_numpy_errors as jit
from obliquetrees._training.leaf_models import (
    add_statistics,
    leaf_likelihood,
    leaf_log_likelihood,
)
from obliquetrees.e2edt._kernels import SMALLEST_TOTAL, _split_probs
from obliquetrees.e2edt._simd import block_dot, block_dot_pair, four_sum_dot

#: Minibatch positions :func:`pruned_em_batch` takes through the tree together.
BLOCK = 256


@jit_inline
def _split_probabilities(gamma_c, a):
    """``(t, e, P(right), P(left))`` of activation ``a``: ``t = gamma_c a``, ``e = exp(-|t|)``."""
    t = gamma_c * a
    e = np.exp(-abs(t))
    p_right, p_left = _split_probs(t, e)
    return t, e, p_right, p_left


@jit
def _pruned_route(Z, r, q, route, eps, pi, y, logspace, scratch):
    """Pruned routing of row ``r`` of ``Z`` (see :func:`pruned_em_batch`).

    ``route`` holds the tree arguments of :func:`pruned_em_batch` (``W``
    to ``feat_idx``), ``scratch`` is ``(visit, seen, mu, p_r, p_l, H)``.
    Fills ``visit[:nv]`` (parents first), ``seen[node] = q`` for visited
    nodes, the split probabilities ``p_r``, ``p_l`` of visited splits and
    ``H`` of visited leaves: ``pi_l[y] mu_l``, or in log space (``logspace``,
    ``eps`` then a log) ``log pi_l[y] + log mu_l``. Returns ``nv``.
    """
    W, b, gamma, left, right, split_col, leaf_col, feat_ptr, feat_idx = route
    visit, seen, mu, p_r, p_l, H = scratch
    full = feat_ptr.shape[0] == 0
    visit[0] = 0
    mu[0] = 0.0 if logspace else 1.0
    seen[0] = q
    nv = 1
    i = 0
    while i < nv:
        node = visit[i]
        i += 1
        c = split_col[node]
        if c < 0:
            if logspace:
                H[node] = leaf_log_likelihood(pi[leaf_col[node]], y, r) + mu[node]
            else:
                H[node] = leaf_likelihood(pi[leaf_col[node]], y, r) * mu[node]
            continue
        if full:
            a = b[c] + four_sum_dot(W, c, Z, r, None, 0, Z.shape[1])
        else:
            a = b[c] + four_sum_dot(W, c, Z, r, feat_idx, feat_ptr[c], feat_ptr[c + 1])
        t, e, pr, pl = _split_probabilities(gamma[c], a)
        p_r[node] = pr
        p_l[node] = pl
        if logspace:
            l_big = -np.log1p(e)
            l_small = -abs(t) + l_big
            m_r = mu[node] + (l_big if t > 0.0 else l_small)
            m_l = mu[node] + (l_small if t > 0.0 else l_big)
        else:
            m_r = mu[node] * pr
            m_l = mu[node] * pl
        if t > 0.0 or m_r >= eps:  # hard routing sends the sample right
            child = right[node]
            mu[child] = m_r
            seen[child] = q
            visit[nv] = child
            nv += 1
        if t <= 0.0 or m_l >= eps:
            child = left[node]
            mu[child] = m_l
            seen[child] = q
            visit[nv] = child
            nv += 1
    return nv


@jit
def _pruned_rows(Z, rows, q0, q1, route, batch, loglik, scratch):
    """Minibatch positions ``q0:q1`` of :func:`pruned_em_batch`, sample by sample.

    Its row-wise form (``rowwise=True``, and the fallback of blocks that need
    the log-space rescue). ``batch`` is ``(eps, pi, y, sw, coef, counts, gW,
    gb)`` and ``loglik`` the running log-likelihood of the positions before
    ``q0``; ``scratch`` is :func:`_pruned_route`'s (``seen`` never holding a
    position of ``q0:q1``). Returns the running log-likelihood and the visits
    of these positions.
    """
    _, _, gamma, left, right, split_col, leaf_col, feat_ptr, feat_idx = route
    eps, pi, y, sw, coef, counts, gW, gb = batch
    visit, seen, mu, p_r, p_l, H = scratch
    p = Z.shape[1]
    full = feat_ptr.shape[0] == 0
    grad = gW.shape[0] > 0
    log_eps = np.log(eps)
    visits = 0
    for q in range(q0, q1):
        r = rows[q]
        nv = _pruned_route(Z, r, q, route, eps, pi, y, False, scratch)
        total = 0.0
        for k in range(nv):
            node = visit[k]
            if split_col[node] < 0:
                total += H[node]
        if total >= SMALLEST_TOTAL:
            loglik += sw[r] * np.log(total)
        else:  # underflow (to 0 or a subnormal) or impossible label: log space
            nv = _pruned_route(Z, r, q, route, log_eps, pi, y, True, scratch)
            top = -np.inf
            for k in range(nv):
                node = visit[k]
                if split_col[node] < 0 and H[node] > top:
                    top = H[node]
            impossible = top == -np.inf
            if impossible:  # label-free path posterior
                for k in range(nv):
                    node = visit[k]
                    if split_col[node] < 0:
                        H[node] = mu[node]
                        top = max(top, mu[node])
            total = 0.0
            for k in range(nv):
                node = visit[k]
                if split_col[node] < 0:
                    H[node] = np.exp(H[node] - top)
                    total += H[node]
            if impossible:
                if sw[r] > 0.0:
                    loglik = -np.inf
            else:
                loglik += sw[r] * (top + np.log(total))
        visits += nv
        inv = 1.0 / total
        for k in range(nv):
            node = visit[k]
            if split_col[node] < 0:
                H[node] *= inv
                if counts.shape[0] > 0:
                    add_statistics(counts[leaf_col[node]], y, r, sw[r] * H[node])
        if not grad:
            continue
        cq = coef[q]
        for k in range(nv - 1, -1, -1):  # children before parents
            node = visit[k]
            c = split_col[node]
            if c < 0:
                continue
            hr = H[right[node]] if seen[right[node]] == q else 0.0
            hl = H[left[node]] if seen[left[node]] == q else 0.0
            H[node] = hr + hl
            g = cq * gamma[c] * (hr * p_l[node] - hl * p_r[node])
            if g == 0.0:
                continue
            gb[c] -= g
            if full:
                for j in range(p):
                    gW[c, j] -= g * Z[r, j]
            else:
                for k2 in range(feat_ptr[c], feat_ptr[c + 1]):
                    gW[c, feat_idx[k2]] -= g * Z[r, feat_idx[k2]]
    return loglik, visits


@jit
def visit_order(split_col, left, right):
    """Every node in the order :func:`_pruned_route` visits them: breadth first, right child first.

    A sample's visit list is this order restricted to the nodes it visits
    (by induction over the levels: its level ``d + 1`` lists the visited
    children of its level ``d`` in that level's order, right before left).
    """
    order = np.empty(left.shape[0], dtype=np.int64)
    order[0] = 0
    k = 1
    i = 0
    while i < k:
        node = order[i]
        i += 1
        if split_col[node] >= 0:
            order[k] = right[node]
            order[k + 1] = left[node]
            k += 2
    return order[:k]


@jit
def pruned_em_batch(
    Z,
    rows,
    W,
    b,
    gamma,
    left,
    right,
    split_col,
    leaf_col,
    feat_ptr,
    feat_idx,
    eps,
    pi,
    y,
    sw,
    coef,
    counts,
    gW,
    gb,
    rowwise=False,
):
    """E-step and split gradient of a minibatch with pruned routing.

    Sample ``r`` visits the root, and below a visited split each child whose
    path probability ``mu`` is at least ``eps``, and always the more probable
    child (the child of hard routing: right iff ``a > 0``), so at least one
    leaf is reached. The activation ``a_i = w_i . x_r + b_i`` is computed only
    at visited splits (a dot product over the split's features); the
    responsibilities (eq. 10) are normalised over the visited leaves; pruned
    subtrees carry no responsibility and no gradient, which is exact when
    routing is hard (every pruned subtree has ``mu < eps``). Products of
    probabilities as in :func:`e_step`; a sample whose visited terms
    ``pi_l[y] mu_l`` underflow (their sum below ``SMALLEST_TOTAL``) is redone
    in log space (and one whose
    label is impossible in every visited leaf gets the path posterior).

    The row-wise form (``rowwise=True``, :func:`_pruned_rows`) takes the
    samples one by one, each through its visited nodes. The blocked form
    (default) returns the same bits: blocks of :data:`BLOCK` minibatch
    positions are processed in order; within a block, nodes are taken in
    :func:`visit_order` (forward: path probabilities, leaf terms) and in its
    reverse (backward: subtree sums, gradient), each node over the block's
    samples that visit it, in minibatch order: a split's weight row and its
    gradient row stay in cache across those samples instead of being fetched
    once per sample and node. Every per-sample quantity is the same
    arithmetic as the row-wise form's (each sample's leaf terms are summed
    in its visit order), and every accumulation into ``counts``, ``gW``,
    ``gb`` and the log-likelihood runs in minibatch order, so the bits are
    the same. A block holding a sample that needs the log-space rescue is
    run row-wise instead (nothing of the block was accumulated yet).

    Parameters
    ----------
    Z : ndarray (N, p) of float32 or float64
        Standardised inputs (all rows; the minibatch is ``rows``).
    rows : int64 (n,)
        The minibatch, in processing order.
    W : float64 (n_splits, p)
    b, gamma : float64 (n_splits,)
    left, right, split_col, leaf_col : tree layout.
    feat_ptr, feat_idx : int64
        CSR lists of each split's features (by split column); an empty
        ``feat_ptr`` means every split uses all ``p`` features.
    eps : float
        Path-probability threshold, in (0, 1).
    pi : ndarray (n_leaves, n_statistics)
    y : int64 (N,) or float64 (N, d)
    sw : float64 (N,)
    coef : float64 (n,)
        Per-sample gradient factor of the minibatch (weight / batch weight).
    counts : ndarray, accumulated into (as :func:`e_step`).
    gW : float64 (n_splits, p) or (0, 0)
        Accumulated with ``-coef_n G[i, n] x_n`` (``G`` as in
        :func:`split_gradient_factors`) over the visited splits; no gradient
        if it has no rows.
    gb : float64 (n_splits,)
        Accumulated with ``-coef_n G[i, n]``.
    rowwise : bool
        Take the samples one by one (the reference of the blocked form).

    Returns
    -------
    loglik : float
        Weighted log-likelihood over the visited leaves.
    visits : int
        Visited nodes, summed over the minibatch.
    """
    n_nodes = left.shape[0]
    n = rows.shape[0]
    p = Z.shape[1]
    full = feat_ptr.shape[0] == 0
    grad = gW.shape[0] > 0
    route = (W, b, gamma, left, right, split_col, leaf_col, feat_ptr, feat_idx)
    batch = (eps, pi, y, sw, coef, counts, gW, gb)
    # the row-wise form's scratch: visit, seen, mu, p_r, p_l, H
    scratch = (
        np.empty(n_nodes, dtype=np.int64),
        np.full(n_nodes, -1, dtype=np.int64),
        np.empty(n_nodes),
        np.empty(n_nodes),
        np.empty(n_nodes),
        np.empty(n_nodes),
    )
    if rowwise:
        return _pruned_rows(Z, rows, 0, n, route, batch, 0.0, scratch)
    order = visit_order(split_col, left, right)
    # the block's rows, and one entry per (node, sample) visit: a node's
    # entries are contiguous, in minibatch order
    Xb = np.empty((BLOCK, p))
    first = np.zeros(n_nodes, dtype=np.int64)
    count = np.zeros(n_nodes, dtype=np.int64)
    cap = 16 * BLOCK
    e_q = np.empty(cap, dtype=np.int64)  # position in the block
    e_mu = np.empty(cap)  # path probability
    e_h = np.empty(cap)  # leaf term, responsibility, subtree sum
    e_pr = np.empty(cap)  # split probabilities
    e_pl = np.empty(cap)
    goes = np.empty(BLOCK, dtype=np.uint8)
    dots = np.empty(BLOCK)
    reached = np.empty(n_nodes, dtype=np.int64)  # nodes the block visits, in visit order
    n_reached = 0
    count[:] = 0
    total = np.empty(BLOCK)
    loglik = 0.0
    visits = 0
    for s0 in range(0, n, BLOCK):
        m = min(BLOCK, n - s0)
        for q in range(m):
            r = rows[s0 + q]
            for j in range(p):
                Xb[q, j] = Z[r, j]
            total[q] = 0.0
            e_q[q] = q
            e_mu[q] = 1.0
        for i in range(n_reached):  # the previous block's nodes and their children
            node = reached[i]
            count[node] = 0
            if split_col[node] >= 0:
                count[left[node]] = 0
                count[right[node]] = 0
        n_reached = 0
        count[0] = m
        first[0] = 0
        top = m
        block_visits = 0
        # forward, parents first
        for i in range(order.shape[0]):
            node = order[i]
            if count[node] == 0:
                continue
            reached[n_reached] = node  # in visit order
            n_reached += 1
            k0 = first[node]
            k1 = k0 + count[node]
            block_visits += k1 - k0
            c = split_col[node]
            if c < 0:
                pl = pi[leaf_col[node]]
                for e in range(k0, k1):
                    q = e_q[e]
                    v = leaf_likelihood(pl, y, rows[s0 + q]) * e_mu[e]
                    e_h[e] = v
                    total[q] += v
                continue
            if full:  # two samples at a time: twice the independent sums in flight
                for e in range(k0, k1 - 1, 2):
                    dots[e - k0], dots[e + 1 - k0] = block_dot_pair(W, c, Xb, e_q[e], e_q[e + 1])
                if (k1 - k0) % 2:
                    dots[k1 - 1 - k0] = block_dot(W, c, Xb, e_q[k1 - 1])
            else:
                for e in range(k0, k1):
                    dots[e - k0] = four_sum_dot(
                        W, c, Xb, e_q[e], feat_idx, feat_ptr[c], feat_ptr[c + 1]
                    )
            n_right = 0
            n_left = 0
            for e in range(k0, k1):
                t, _, pr, pll = _split_probabilities(gamma[c], b[c] + dots[e - k0])
                e_pr[e] = pr
                e_pl[e] = pll
                go_r = t > 0.0 or e_mu[e] * pr >= eps
                go_l = t <= 0.0 or e_mu[e] * pll >= eps
                goes[e - k0] = np.uint8(go_r) + 2 * np.uint8(go_l)
                n_right += go_r
                n_left += go_l
            if top + n_right + n_left >= cap:  # >=: room for the spare write
                cap = 2 * (top + n_right + n_left)
                e_q = _grown(e_q, cap, top)
                e_mu = _grown(e_mu, cap, top)
                e_h = _grown(e_h, cap, top)
                e_pr = _grown(e_pr, cap, top)
                e_pl = _grown(e_pl, cap, top)
            rc = right[node]
            lc = left[node]
            first[rc] = top
            count[rc] = n_right
            first[lc] = top + n_right
            count[lc] = n_left
            ir = top
            il = top + n_right
            top += n_right + n_left
            # without data-dependent branches: each entry is written, and the
            # position advances when the sample goes that way (a spare write lands
            # on the next free entry, overwritten next or by the left pass)
            for e in range(k0, k1):
                e_q[ir] = e_q[e]
                e_mu[ir] = e_mu[e] * e_pr[e]
                ir += goes[e - k0] & 1
            for e in range(k0, k1):
                e_q[il] = e_q[e]
                e_mu[il] = e_mu[e] * e_pl[e]
                il += goes[e - k0] >> 1
        rescue = False
        for q in range(m):
            if not total[q] >= SMALLEST_TOTAL:
                rescue = True
        if rescue:  # underflow or impossible label in the block: the row-wise kernel
            loglik, nv = _pruned_rows(Z, rows, s0, s0 + m, route, batch, loglik, scratch)
            visits += nv
            continue
        visits += block_visits
        for q in range(m):
            loglik += sw[rows[s0 + q]] * np.log(total[q])
            total[q] = 1.0 / total[q]
        # responsibilities and leaf statistics
        for i in range(n_reached):
            node = reached[i]
            if split_col[node] >= 0:
                continue
            for e in range(first[node], first[node] + count[node]):
                q = e_q[e]
                e_h[e] *= total[q]
                if counts.shape[0] > 0:
                    r = rows[s0 + q]
                    add_statistics(counts[leaf_col[node]], y, r, sw[r] * e_h[e])
        if not grad:
            continue
        # backward, children first: subtree sums and the gradient
        for i in range(n_reached - 1, -1, -1):
            node = reached[i]
            c = split_col[node]
            if c < 0:
                continue
            ir = first[right[node]]
            er = ir + count[right[node]]
            il = first[left[node]]
            el = il + count[left[node]]
            g_c = gamma[c]
            pending = -1  # a sample whose gradient row update waits for the next one
            g_pending = 0.0
            for e in range(first[node], first[node] + count[node]):
                q = e_q[e]
                hr = 0.0
                if ir < er and e_q[ir] == q:
                    hr = e_h[ir]
                    ir += 1
                hl = 0.0
                if il < el and e_q[il] == q:
                    hl = e_h[il]
                    il += 1
                e_h[e] = hr + hl
                g = coef[s0 + q] * g_c * (hr * e_pl[e] - hl * e_pr[e])
                if g == 0.0:
                    continue
                gb[c] -= g
                if not full:
                    for k2 in range(feat_ptr[c], feat_ptr[c + 1]):
                        gW[c, feat_idx[k2]] -= g * Xb[q, feat_idx[k2]]
                elif pending < 0:  # wait for a second sample: one pass over the row for both
                    pending = q
                    g_pending = g
                else:  # the same two subtractions per cell, in sample order
                    for j in range(p):
                        gW[c, j] = (gW[c, j] - g_pending * Xb[pending, j]) - g * Xb[q, j]
                    pending = -1
            if pending >= 0:
                for j in range(p):
                    gW[c, j] -= g_pending * Xb[pending, j]
    return loglik, visits


@jit
def _grown(a, cap, used):
    """``a`` copied into an array of ``cap`` entries (its first ``used`` ones)."""
    out = np.empty(cap, dtype=a.dtype)
    out[:used] = a[:used]
    return out
