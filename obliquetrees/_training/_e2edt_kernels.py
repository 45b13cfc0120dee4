"""numba kernels of E2EDT training (Hehn, Kooij & Hamprecht, 2019).

Notation (paper): split ``i`` sends ``x`` right with probability
``sigma(gamma_i * a_i)``, ``a_i = w_i . x + b_i``; the path probability of leaf
``l`` is ``mu_l(x)`` (eq. 1), leaves hold class distributions ``pi_l``.

Tree layout taken by the kernels (``tree`` tuple): nodes in an order where a
parent comes before its children (node 0 is the root)::

    left, right : int64 (n_nodes,)   children, -1 at leaves
    split_col   : int64 (n_nodes,)   column of the split in the activation
                                     matrix A (internal nodes), -1 at leaves
    leaf_col    : int64 (n_nodes,)   column of the leaf in h / pi, -1 inside

Kind of work: the activations ``A = X_b @ W.T + b`` and the weight gradient
``G.T @ X_b`` are BLAS GEMMs done by the caller; the kernels here are the
element-wise, per-sample parts (log path probabilities level by level, the
E-step, the per-split gradient factors of eq. 14, the Adam update). They are
serial (``nogil``): a forest trains one tree per joblib thread. Every output
row is written by its own sample and every reduction runs in sample order,
so results are reproducible bit for bit.

All path products are computed in log space with the stable
``log sigma(z) = min(z, 0) - log1p(exp(-|z|))``; no clamping is needed and
nothing divides by zero (E-step rows whose labels have zero probability in
every leaf fall back to the label-free path posterior; empty leaves keep
their previous distribution).
"""

import numpy as np

# numpy's error model lets LLVM vectorise the sample loops that divide. No
# kernel here divides by zero: denominators are ``1 + exp(.) >= 1`` or guarded.
from obliquetrees._core._jit import jit_numpy_errors as jit

#: Samples processed together by the tree kernels (their per-node scratch,
#: n_nodes x CHUNK doubles, stays in L2 for trees of ~1000 nodes).
CHUNK = 128
#: Gradient factors below this magnitude are stored as 0 (no denormals).
TINY = 1e-30


@jit
def _log_sigmoid_pair(z):
    """``(log sigma(z), log sigma(-z))`` without overflow."""
    e = np.log1p(np.exp(-abs(z)))
    if z >= 0.0:
        return -e, -z - e
    return z - e, -e


@jit
def _sigmoid(z):
    if z >= 0.0:
        return 1.0 / (1.0 + np.exp(-z))
    e = np.exp(z)
    return e / (1.0 + e)


@jit
def _row_log_paths(A, r, gamma, left, right, split_col, leaf_col, node_lp, out, out_row):
    """Log path probabilities of row ``r`` of ``A``: ``out[out_row, leaf]``."""
    node_lp[0] = 0.0
    for node in range(left.shape[0]):
        c = split_col[node]
        if c >= 0:
            lr, ll = _log_sigmoid_pair(gamma[c] * A[r, c])
            node_lp[right[node]] = node_lp[node] + lr
            node_lp[left[node]] = node_lp[node] + ll
        else:
            out[out_row, leaf_col[node]] = node_lp[node]


@jit
def log_path_probs(A, gamma, left, right, split_col, leaf_col, n_leaves):
    """``log mu_l(x_n)`` for every row of the activations ``A`` (eq. 1).

    Parameters
    ----------
    A : ndarray (n, n_splits)
        Split activations ``w_i . x_n + b_i``.
    gamma : ndarray (n_splits,)
        Steepness of each split.
    left, right, split_col, leaf_col : tree layout (see module docstring).
    n_leaves : int

    Returns
    -------
    log_mu : ndarray (n, n_leaves)
    """
    n = A.shape[0]
    out = np.empty((n, n_leaves))
    node_lp = np.empty(left.shape[0])
    for r in range(n):
        _row_log_paths(A, r, gamma, left, right, split_col, leaf_col, node_lp, out, r)
    return out


def steep_activations(A, gamma):
    """``T = gamma[:, None] * A`` (in place: ``A`` is overwritten), ``E = exp(-|T|)``.

    ``A`` is split-major, shape (n_splits, n). Plain numpy: its SIMD ``exp``
    is about 4x faster than numba's scalar one, and every split probability
    follows from ``T`` and ``E`` without another transcendental
    (``sigma(T) = 1 / (1 + E)`` if ``T >= 0`` else ``E / (1 + E)``, and the
    complement the other way round: both accurate in the tails).
    """
    T = A
    T *= gamma.astype(A.dtype)[:, None]
    E = np.abs(T)
    np.negative(E, out=E)
    np.exp(E, out=E)
    return T, E


@jit
def _split_probs(t, e):
    """``(P(right), P(left))`` of a split from ``t = gamma a``, ``e = exp(-|t|)``."""
    big = 1.0 / (1.0 + e)
    small = e * big
    if t >= 0.0:
        return big, small
    return small, big


@jit
def e_step(T, E, left, right, split_col, leaf_col, pi, y, sw, h, counts):
    """E-step (eq. 10) and the sufficient statistics of the leaf M-step (eq. 13).

    Sample-major loops inside a node loop: path probabilities are products of
    split probabilities, level by level from the root (parents precede
    children), each node's product computed for all samples at once. A sample
    whose total ``sum_l pi_l[y] mu_l`` underflows to 0 is redone in log space;
    one whose label has probability 0 in every leaf gets the label-free path
    posterior ``h = mu``.

    Parameters
    ----------
    T, E : ndarray (n_splits, n)
        Steep activations and ``exp(-|T|)`` (:func:`steep_activations`).
    left, right, split_col, leaf_col : tree layout.
    pi : ndarray (n_leaves, n_classes)
        Leaf class distributions of the previous iteration.
    y : int64 (n,)
    sw : float64 (n,)
        Sample weights.
    h : ndarray (n_leaves, n), output
        Responsibilities ``h_{n,l}`` (leaf-major).
    counts : ndarray (n_leaves, n_classes), accumulated into
        ``counts[leaf, k] += sw_n h_{n,l} [y_n = k]``.

    Returns
    -------
    loglik : float
        ``sum_n sw_n log p(y_n | x_n)`` (eq. 4) under the current parameters
        (``-inf`` if a weighted sample's label is impossible).
    """
    n_nodes = left.shape[0]
    mu = np.empty((n_nodes, CHUNK))  # one chunk of samples stays in cache
    tot = np.empty(CHUNK)
    loglik = 0.0
    for r0 in range(0, T.shape[1], CHUNK):
        loglik += _estep_chunk(T, E, left, right, split_col, leaf_col, pi, y, sw, h,
                               counts, r0, mu, tot)
    return loglik


@jit
def _estep_chunk(T, E, left, right, split_col, leaf_col, pi, y, sw, h, counts, r0, mu, tot):
    """E-step of samples ``r0 : r0 + CHUNK``; returns their weighted log-likelihood."""
    n = T.shape[1]
    n_nodes = left.shape[0]
    n_leaves = pi.shape[0]
    loglik = 0.0
    m = min(CHUNK, n - r0)
    for q in range(m):
        mu[0, q] = 1.0
        tot[q] = 0.0
    for node in range(n_nodes):
        c = split_col[node]
        src = mu[node]
        if c >= 0:
            dr = mu[right[node]]
            dl = mu[left[node]]
            for q in range(m):
                e = np.float64(E[c, r0 + q])
                big = 1.0 / (1.0 + e)
                small = e * big
                pos = T[c, r0 + q] >= 0.0
                v = src[q]
                dr[q] = v * (big if pos else small)
                dl[q] = v * (small if pos else big)
        else:
            leaf = leaf_col[node]
            for q in range(m):
                v = pi[leaf, y[r0 + q]] * src[q]
                h[leaf, r0 + q] = v
                tot[q] += v
    for q in range(m):
        r = r0 + q
        if tot[q] > 0.0:
            loglik += sw[r] * np.log(tot[q])
            tot[q] = 1.0 / tot[q]
        else:
            # underflow or impossible label: redo the sample in log space
            tot[q] = 1.0
            if _estep_log_row(T, left, right, split_col, leaf_col, pi, y, r, h):
                if sw[r] > 0.0:
                    loglik = -np.inf
            else:
                loglik += sw[r] * _row_log_evidence(T, left, right, split_col,
                                                    leaf_col, pi, y, r)
    for leaf in range(n_leaves):
        for q in range(m):
            h[leaf, r0 + q] *= tot[q]
    if counts.shape[0] > 0:
        for q in range(m):
            k = y[r0 + q]
            wq = sw[r0 + q]
            for leaf in range(n_leaves):
                counts[leaf, k] += wq * h[leaf, r0 + q]
    return loglik


@jit
def _row_log_terms(T, left, right, split_col, leaf_col, pi, y, r):
    """``log pi_l[y_r] + log mu_l`` of one sample (log space) and ``log mu_l``."""
    n_nodes = left.shape[0]
    n_leaves = pi.shape[0]
    node_lp = np.empty(n_nodes)
    lp = np.empty((1, n_leaves))
    ones = np.ones(T.shape[0])
    Tr = np.ascontiguousarray(T[:, r]).reshape(1, -1)
    _row_log_paths(Tr, 0, ones, left, right, split_col, leaf_col, node_lp, lp, 0)
    terms = np.empty(n_leaves)
    for leaf in range(n_leaves):
        p = pi[leaf, y[r]]
        terms[leaf] = np.log(p) + lp[0, leaf] if p > 0.0 else -np.inf
    return terms, lp[0]


@jit
def _row_log_evidence(T, left, right, split_col, leaf_col, pi, y, r):
    terms, _ = _row_log_terms(T, left, right, split_col, leaf_col, pi, y, r)
    m = terms.max()
    return m + np.log(np.exp(terms - m).sum())


@jit
def _estep_log_row(T, left, right, split_col, leaf_col, pi, y, r, h):
    """Responsibilities of sample ``r`` in log space; True if its label is impossible."""
    terms, lp = _row_log_terms(T, left, right, split_col, leaf_col, pi, y, r)
    m = terms.max()
    impossible = m == -np.inf
    if impossible:
        terms = lp.copy()
        m = terms.max()
    e = np.exp(terms - m)
    e /= e.sum()
    for leaf in range(e.shape[0]):
        h[leaf, r] = e[leaf]
    return impossible


@jit
def leaf_m_step(counts, pi):
    """Closed-form leaf update (eq. 13), in place; empty leaves keep ``pi``."""
    for leaf in range(counts.shape[0]):
        total = 0.0
        for k in range(counts.shape[1]):
            total += counts[leaf, k]
        if total > 0.0:
            for k in range(counts.shape[1]):
                pi[leaf, k] = counts[leaf, k] / total


@jit
def split_gradient_factors(T, E, gamma, left, right, split_col, leaf_col, h, coef, G):
    """Per-split, per-sample derivative of eq. 14 with respect to ``a_i``.

    ``G[i, n] = coef_n * d/da_i sum_l h_{n,l} log mu_l(x_n)
    = coef_n * gamma_i * (H_R(i) * (1 - s_i) - H_L(i) * s_i)`` with
    ``s_i = sigma(gamma_i a_i)`` and ``H_R(i)``, ``H_L(i)`` the sums of
    ``h_{n,l}`` over the leaves of the right and left subtrees (accumulated
    from the leaves up, all samples at once). The weight gradient is then the
    GEMM ``G @ X`` and the bias gradient ``G.sum(1)``.

    Parameters
    ----------
    T, E : ndarray (n_splits, n)
        Steep activations and ``exp(-|T|)`` (:func:`steep_activations`).
    gamma : ndarray (n_splits,)
    left, right, split_col, leaf_col : tree layout.
    h : ndarray (n_leaves, n)
    coef : ndarray (n,)
        Per-sample factor (sample weight / batch weight).
    G : ndarray (n_splits, n), output.
    """
    H = np.empty((left.shape[0], CHUNK))  # one chunk of samples stays in cache
    for r0 in range(0, T.shape[1], CHUNK):
        _grad_chunk(T, E, gamma, left, right, split_col, leaf_col, h, coef, G, r0, H)


@jit
def _grad_chunk(T, E, gamma, left, right, split_col, leaf_col, h, coef, G, r0, H):
    """Gradient factors of samples ``r0 : r0 + CHUNK`` (leaves up)."""
    n = T.shape[1]
    n_nodes = left.shape[0]
    m = min(CHUNK, n - r0)
    for node in range(n_nodes - 1, -1, -1):
        c = split_col[node]
        dst = H[node]
        if c < 0:
            leaf = leaf_col[node]
            for q in range(m):
                dst[q] = h[leaf, r0 + q]
        else:
            hr_ = H[right[node]]
            hl_ = H[left[node]]
            g = gamma[c]
            for q in range(m):
                e = np.float64(E[c, r0 + q])
                big = 1.0 / (1.0 + e)
                small = e * big
                pos = T[c, r0 + q] >= 0.0
                hr = hr_[q]
                hl = hl_[q]
                dst[q] = hr + hl
                # hr * P(left) - hl * P(right)
                v = coef[r0 + q] * g * (
                    hr * (small if pos else big) - hl * (big if pos else small)
                )
                # flush negligible factors to 0: denormals in G (float32 data)
                # would slow the gradient GEMM down by an order of magnitude
                G[c, r0 + q] = v if abs(v) > TINY else 0.0


@jit
def em_batch(T, E, gamma, left, right, split_col, leaf_col, pi, y, sw, coef, h, counts, G):
    """Fused E-step and gradient factors of one minibatch at the same parameters.

    Equivalent to :func:`e_step` followed by :func:`split_gradient_factors`
    on the responsibilities it produced, chunk by chunk while the chunk's
    activations are in cache. Returns the weighted log-likelihood.
    """
    n_nodes = left.shape[0]
    mu = np.empty((n_nodes, CHUNK))
    tot = np.empty(CHUNK)
    loglik = 0.0
    for r0 in range(0, T.shape[1], CHUNK):
        loglik += _estep_chunk(T, E, left, right, split_col, leaf_col, pi, y, sw, h,
                               counts, r0, mu, tot)
        _grad_chunk(T, E, gamma, left, right, split_col, leaf_col, h, coef, G, r0, mu)
    return loglik


@jit
def adam_update(param, grad, m, v, step, lr, beta1, beta2, eps):
    """One Adam step (Kingma & Ba) minimising, in place, on flat arrays.

    ``step`` is the 1-based step count used for the bias corrections.
    """
    bc1 = 1.0 - beta1**step
    bc2 = np.sqrt(1.0 - beta2**step)
    a = lr / bc1
    for j in range(param.shape[0]):
        g = grad[j]
        mj = beta1 * m[j] + (1.0 - beta1) * g
        vj = beta2 * v[j] + (1.0 - beta2) * g * g
        m[j] = mj
        v[j] = vj
        param[j] -= a * mj / (np.sqrt(vj) / bc2 + eps)


@jit
def add_laplacian_grad(W, mask, nb_indptr, nb_indices, lam, out):
    """``out += d/dW lam * sum_i w_i^T M_i w_i`` for the grid-graph Laplacian.

    ``M_i`` is the Laplacian of the 4-neighbour pixel graph restricted to the
    features split ``i`` may use (``mask[i] != 0``): ``(M w)_j = sum over
    neighbours j' of j in the mask of (w_j - w_j')``.

    Parameters
    ----------
    W : ndarray (n_splits, n_features)
    mask : ndarray (n_splits, n_features) of uint8
    nb_indptr, nb_indices : CSR adjacency of the pixel grid (n_features rows).
    lam : float
    out : ndarray (n_splits, n_features), accumulated into.
    """
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            if mask[i, j] == 0:
                continue
            acc = 0.0
            for q in range(nb_indptr[j], nb_indptr[j + 1]):
                jn = nb_indices[q]
                if mask[i, jn] != 0:
                    acc += W[i, j] - W[i, jn]
            out[i, j] += 2.0 * lam * acc


@jit
def laplacian_penalty(W, mask, nb_indptr, nb_indices):
    """``sum_i w_i^T M_i w_i`` (sum of squared differences over mask edges)."""
    total = 0.0
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            if mask[i, j] == 0:
                continue
            for q in range(nb_indptr[j], nb_indptr[j + 1]):
                jn = nb_indices[q]
                if jn > j and mask[i, jn] != 0:
                    d = W[i, j] - W[i, jn]
                    total += d * d
    return total


@jit
def fit_stump(
    X, y, sw, w, b, pi, gamma0, dgamma, n_epochs, order, batch_size,
    lr, beta1, beta2, eps, lam, nb_indptr, nb_indices,
):
    """Train one stump (a split and two leaves) by EM with Adam, in place.

    Runs the whole schedule of one greedy split (sect. 2.5) in one call.
    Epoch ``e`` (0-based): E-step on all rows with the current parameters
    (eq. 10); for ``e >= 1`` Adam over the shuffled minibatches of
    ``order[e - 1]`` on eq. 14 (mean over the batch, minus the spatial
    penalty eq. 15); closed-form leaf update (eq. 13) from the E-step
    responsibilities; then ``gamma += dgamma``. The first epoch updates only
    the leaves: with uniform initial leaves the split gradient is zero there
    (the official code does the same).

    Parameters
    ----------
    X : ndarray (n, k) of float32 or float64
        The node's samples, restricted to the split's features (the
        activations and the weight gradient are BLAS gemv in this dtype; the
        rest is float64).
    y : int64 (n,)
    sw : float64 (n,)
    w : ndarray (k,), in/out
    b : ndarray (1,), in/out
    pi : ndarray (2, n_classes), in/out
        Leaf distributions, row 0 = left leaf, row 1 = right leaf.
    gamma0, dgamma : float
        Initial steepness and its increase per epoch.
    n_epochs : int
    order : int64 (n_epochs - 1, n)
        Row order of each Adam epoch.
    batch_size : int
    lr, beta1, beta2, eps : Adam parameters.
    lam : float
        Spatial regularisation strength.
    nb_indptr, nb_indices : CSR adjacency between the k features (pixels).

    Returns
    -------
    gamma : float
        Steepness after the last epoch.
    """
    n, k = X.shape
    n_classes = pi.shape[1]
    hr = np.empty(n)
    counts = np.zeros((2, n_classes))
    gw = np.empty(k)
    gb = np.zeros(1)
    bs = min(batch_size, n)
    buf = np.empty((bs, k), dtype=X.dtype)
    coef = np.empty(bs, dtype=X.dtype)
    mw = np.zeros(k)
    vw = np.zeros(k)
    mb = np.zeros(1)
    vb = np.zeros(1)
    gamma = gamma0
    step = 0
    for epoch in range(n_epochs):
        # E-step
        for c in range(2):
            for q in range(n_classes):
                counts[c, q] = 0.0
        act = np.dot(X, w.astype(X.dtype))  # BLAS gemv
        for r in range(n):
            t = gamma * (np.float64(act[r]) + b[0])
            sr, sl = _split_probs(t, np.exp(-abs(t)))
            num_r = pi[1, y[r]] * sr
            tot = num_r + pi[0, y[r]] * sl
            if tot > 0.0:
                hv = num_r / tot
            else:  # underflow or impossible label: log space / path posterior
                lsr, lsl = _log_sigmoid_pair(t)
                if pi[1, y[r]] > 0.0 or pi[0, y[r]] > 0.0:
                    tr = np.log(pi[1, y[r]]) + lsr if pi[1, y[r]] > 0.0 else -np.inf
                    tl = np.log(pi[0, y[r]]) + lsl if pi[0, y[r]] > 0.0 else -np.inf
                else:
                    tr = lsr
                    tl = lsl
                hv = _sigmoid(tr - tl)
            hr[r] = hv
            counts[1, y[r]] += sw[r] * hv
            counts[0, y[r]] += sw[r] * (1.0 - hv)
        # M-step, splits
        if epoch >= 1:
            perm = order[epoch - 1]
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                total = 0.0
                for q in range(start, stop):
                    total += sw[perm[q]]
                if total <= 0.0:
                    continue
                m = stop - start
                for q in range(m):
                    r = perm[start + q]
                    for j in range(k):
                        buf[q, j] = X[r, j]
                act_b = np.dot(buf[:m], w.astype(X.dtype))  # BLAS gemv
                gb[0] = 0.0
                for q in range(m):
                    r = perm[start + q]
                    # minimisation: -d/da [h log s + (1 - h) log(1 - s)] / total
                    t = gamma * (np.float64(act_b[q]) + b[0])
                    c = -sw[r] * gamma * (hr[r] - _sigmoid(t)) / total
                    coef[q] = c
                    gb[0] += c
                gw[:] = np.dot(coef[:m], buf[:m])  # BLAS gemv (transposed)
                if lam > 0.0:
                    for j in range(k):
                        acc = 0.0
                        for q in range(nb_indptr[j], nb_indptr[j + 1]):
                            acc += w[j] - w[nb_indices[q]]
                        gw[j] += 2.0 * lam * acc
                step += 1
                adam_update(w, gw, mw, vw, step, lr, beta1, beta2, eps)
                adam_update(b, gb, mb, vb, step, lr, beta1, beta2, eps)
        # M-step, leaves
        leaf_m_step(counts, pi)
        gamma += dgamma
    return gamma


@jit
def count_right(X, w, b):
    """Number of rows with ``X[r] . w + b > 0`` and the boolean mask."""
    n, k = X.shape
    right = np.empty(n, dtype=np.bool_)
    count = 0
    act = np.dot(X, w.astype(X.dtype))
    for r in range(n):
        a = np.float64(act[r]) + b
        right[r] = a > 0.0
        if a > 0.0:
            count += 1
    return count, right
