"""numba kernels of E2EDT's pruned finetune routing (``prune_threshold > 0``).

The E-step and split gradient of one minibatch (:func:`pruned_em_batch`)
walk each sample from the root into every child whose path probability is
at least ``eps``, and always into the child that hard routing picks, so a
sample reaches at least one leaf; responsibilities are normalised over the
leaves it reached (exact when routing is hard). A split costs one dot
product where a sample goes, instead of a GEMM row over all samples. The
tree layout, the leaf models and the log-space rescue are those of
:mod:`._e2edt_kernels`; results are reproducible bit for bit (every
reduction runs in sample order).
"""

import numpy as np

# numpy's error model lets LLVM vectorise the sample loops that divide. No
# kernel here divides by zero: denominators are ``1 + exp(.) >= 1`` or guarded.
from obliquetrees._core._jit import jit_inline
from obliquetrees._core._jit import jit_numpy_errors as jit
from obliquetrees._training._e2edt_leaves import (
    add_statistics,
    leaf_likelihood,
    leaf_log_likelihood,
)


@jit_inline
def _row_dot(W, c, x):
    """``W[c] . x`` with four partial sums.

    One running sum is a chain of dependent additions (LLVM does not reorder
    floating-point sums); four independent ones overlap in the pipeline. Row
    ``c`` is indexed in place: a view per call would cost reference counting.
    """
    n = x.shape[0]
    n4 = n - n % 4
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for j in range(0, n4, 4):
        a0 += W[c, j] * x[j]
        a1 += W[c, j + 1] * x[j + 1]
        a2 += W[c, j + 2] * x[j + 2]
        a3 += W[c, j + 3] * x[j + 3]
    for j in range(n4, n):
        a0 += W[c, j] * x[j]
    return (a0 + a1) + (a2 + a3)


@jit_inline
def _row_gather_dot(W, c, x, idx, k0, k1):
    """``W[c, idx[k0:k1]] . x[idx[k0:k1]]`` with four partial sums (see :func:`_row_dot`)."""
    k4 = k1 - (k1 - k0) % 4
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for k in range(k0, k4, 4):
        a0 += W[c, idx[k]] * x[idx[k]]
        a1 += W[c, idx[k + 1]] * x[idx[k + 1]]
        a2 += W[c, idx[k + 2]] * x[idx[k + 2]]
        a3 += W[c, idx[k + 3]] * x[idx[k + 3]]
    for k in range(k4, k1):
        a0 += W[c, idx[k]] * x[idx[k]]
    return (a0 + a1) + (a2 + a3)


@jit
def _pruned_route(
    x,
    r,
    q,
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
    logspace,
    visit,
    seen,
    mu,
    p_r,
    p_l,
    H,
):
    """Pruned routing of one sample (see :func:`pruned_em_batch`).

    Fills ``visit[:nv]`` (parents first), ``seen[node] = q`` for visited
    nodes, the split probabilities ``p_r``, ``p_l`` of visited splits and
    ``H`` of visited leaves: ``pi_l[y] mu_l``, or in log space (``logspace``,
    ``eps`` then a log) ``log pi_l[y] + log mu_l``. Returns ``nv``.
    """
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
            a = b[c] + _row_dot(W, c, x)
        else:
            a = b[c] + _row_gather_dot(W, c, x, feat_idx, feat_ptr[c], feat_ptr[c + 1])
        t = gamma[c] * a
        e = np.exp(-abs(t))
        big = 1.0 / (1.0 + e)
        small = e * big
        if t > 0.0:  # hard routing sends x right
            p_r[node] = big
            p_l[node] = small
        else:
            p_r[node] = small
            p_l[node] = big
        if logspace:
            l_big = -np.log1p(e)
            l_small = -abs(t) + l_big
            m_r = mu[node] + (l_big if t > 0.0 else l_small)
            m_l = mu[node] + (l_small if t > 0.0 else l_big)
        else:
            m_r = mu[node] * p_r[node]
            m_l = mu[node] * p_l[node]
        if t > 0.0 or m_r >= eps:
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
):
    """E-step and split gradient of a minibatch with pruned routing, sample by sample.

    Sample ``r`` visits the root, and below a visited split each child whose
    path probability ``mu`` is at least ``eps``, and always the more probable
    child (the child of hard routing: right iff ``a > 0``), so at least one
    leaf is reached. The activation ``a_i = w_i . x_r + b_i`` is computed only
    at visited splits (a dot product over the split's features); the
    responsibilities (eq. 10) are normalised over the visited leaves; pruned
    subtrees carry no responsibility and no gradient, which is exact when
    routing is hard (every pruned subtree has ``mu < eps``). Products of
    probabilities as in :func:`e_step`; a sample whose visited terms
    ``pi_l[y] mu_l`` all underflow is redone in log space (and one whose
    label is impossible in every visited leaf gets the path posterior).

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

    Returns
    -------
    loglik : float
        Weighted log-likelihood over the visited leaves.
    visits : int
        Visited nodes, summed over the minibatch.
    """
    n_nodes = left.shape[0]
    p = Z.shape[1]
    full = feat_ptr.shape[0] == 0
    grad = gW.shape[0] > 0
    log_eps = np.log(eps)
    visit = np.empty(n_nodes, dtype=np.int64)
    seen = np.full(n_nodes, -1, dtype=np.int64)
    mu = np.empty(n_nodes)  # path probability (log space: its log)
    p_r = np.empty(n_nodes)
    p_l = np.empty(n_nodes)
    H = np.empty(n_nodes)  # leaf terms, then responsibilities, then subtree sums
    x = np.empty(p)
    route = (W, b, gamma, left, right, split_col, leaf_col, feat_ptr, feat_idx)
    loglik = 0.0
    visits = 0
    for q in range(rows.shape[0]):
        r = rows[q]
        for j in range(p):
            x[j] = Z[r, j]
        nv = _pruned_route(x, r, q, *route, eps, pi, y, False, visit, seen, mu, p_r, p_l, H)
        total = 0.0
        for k in range(nv):
            node = visit[k]
            if split_col[node] < 0:
                total += H[node]
        if total > 0.0:
            loglik += sw[r] * np.log(total)
        else:  # underflow or impossible label: log space
            nv = _pruned_route(x, r, q, *route, log_eps, pi, y, True, visit, seen, mu, p_r, p_l, H)
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
                    gW[c, j] -= g * x[j]
            else:
                for k2 in range(feat_ptr[c], feat_ptr[c + 1]):
                    gW[c, feat_idx[k2]] -= g * x[feat_idx[k2]]
    return loglik, visits
