"""numba kernels of E2EDT training (Hehn, Kooij & Hamprecht, 2019).

Notation (paper): split ``i`` sends ``x`` right with probability
``sigma(gamma_i * a_i)``, ``a_i = w_i . x + b_i``; the path probability of leaf
``l`` is ``mu_l(x)`` (eq. 1), leaves hold class distributions ``pi_l``. Every
kernel that reads labels is generic over the leaf model, chosen at compile
time from the type of ``y`` (:mod:`obliquetrees._training.leaf_models`): int64 class indices
(the paper's categorical leaves) or float64 (n, d) standardised targets
(Gaussian leaves, regression); ``pi`` then holds each leaf's parameter row
and ``counts`` its sufficient statistics.

Tree layout taken by the kernels (``tree`` tuple): nodes in an order where a
parent comes before its children (node 0 is the root)::

    left, right : int64 (n_nodes,)   children, -1 at leaves
    split_col   : int64 (n_nodes,)   column of the split in the activation
                                     matrix A (internal nodes), -1 at leaves
    leaf_col    : int64 (n_nodes,)   column of the leaf in h / pi, -1 inside

Kind of work: the activations ``A = W @ X_b.T + b`` and the weight gradient
``G @ X_b`` are BLAS GEMMs done by the caller (split-major: ``A``, ``E`` and
``G`` have shape (n_splits, n)); the kernels here are the element-wise,
per-sample parts (path probabilities level by level, the E-step, the
per-split gradient factors of eq. 14) and the whole schedule of one greedy
stump (Adam from :mod:`obliquetrees._training._optim`). They work on chunks
of ``CHUNK`` samples, node by node, with loops over the chunk's samples that
LLVM turns into SIMD code (rows are sliced per chunk so that indices are
provably non-negative: otherwise numba's wrap-around of negative indices
makes LLVM fall back to gathers and scatters).
They are serial (``nogil``): a forest trains one tree per joblib thread.
Every output row is written by its own sample and every reduction runs in
sample order, so results are reproducible bit for bit.

Path probabilities are products of split probabilities computed from
``E = exp(-gamma |a|)`` without cancellation in either tail; a sample whose
total underflows (below the smallest normal double, :data:`SMALLEST_TOTAL`)
is redone in log space with the stable
``log sigma(z) = min(z, 0) - log1p(exp(-|z|))``. No clamping is needed and
nothing divides by zero (E-step rows whose labels have zero probability in
every leaf fall back to the label-free path posterior; empty leaves keep
their previous distribution).
"""

import numpy as np

# numpy's error model lets LLVM vectorise the sample loops that divide. No
# kernel here divides by zero: denominators are ``1 + exp(.) >= 1`` or guarded.
from obliquetrees._core._jit import jit_inline
from obliquetrees._core._jit import jit_numpy_errors as jit
from obliquetrees._core._math import log_sigmoid_pair, sigmoid
from obliquetrees._training._optim import adam_update
from obliquetrees._training.leaf_models import (
    add_statistics,
    empty_statistics,
    leaf_likelihood,
    leaf_log_likelihood,
    leaf_m_step,
    m_step,
    update_leaves,
)
from obliquetrees.e2edt._stump_rows import (
    all_activations,
    batch_activations,
    batch_weight_gradient,
    stump_scratch,
)

__all__ = ["leaf_m_step", "update_leaves"]  # re-exported: the M-steps live with the leaf models

#: Samples processed together by the tree kernels (per-node scratch of
#: n_nodes x CHUNK doubles). Larger chunks amortise the per-node work; 256 was
#: measured 1.1-1.4x faster than 32-128 on a depth-10 usps tree (1655 nodes)
#: although its scratch (3.4 MB) exceeds L2.
CHUNK = 256
#: Gradient factors below this magnitude are stored as 0 (no denormals).
TINY = 1e-30
#: The smallest E-step total ``sum_l pi_l[y] mu_l`` normalised by its reciprocal: the
#: smallest normal double. Below it (a subnormal) the reciprocal can overflow to inf and
#: turn the responsibilities into inf and NaN, so the sample is redone in log space as
#: one whose total underflows to 0 (seen with Gaussian leaves of precision 361 at depth 10).
SMALLEST_TOTAL = float(np.finfo(np.float64).tiny)


@jit
def _row_log_paths(A, r, gamma, left, right, split_col, leaf_col, node_lp, out):
    """``log mu_l`` (eq. 1) of sample ``r`` of split-major ``A`` into ``out[leaf]``."""
    node_lp[0] = 0.0
    for node in range(left.shape[0]):
        c = split_col[node]
        if c >= 0:
            lr, ll = log_sigmoid_pair(gamma[c] * A[c, r])
            node_lp[right[node]] = node_lp[node] + lr
            node_lp[left[node]] = node_lp[node] + ll
        else:
            out[leaf_col[node]] = node_lp[node]


def steep_activations(A, gamma):
    """``E = exp(-gamma[:, None] * |A|)`` for split-major activations ``A``.

    ``A`` has shape (n_splits, n) and is not modified; ``gamma > 0``, so the
    sign of ``gamma * a`` is the sign of ``a``. Plain numpy: its SIMD ``exp``
    is about 4x faster than numba's scalar one, and every split probability
    follows from ``a`` and ``E`` without another transcendental
    (``sigma(t) = 1 / (1 + E)`` if ``a >= 0`` else ``E / (1 + E)``, and the
    complement the other way round: both accurate in the tails).
    """
    E = np.abs(A)
    E *= -gamma.astype(A.dtype)[:, None]
    np.exp(E, out=E)
    return E


@jit_inline
def _split_probs(t, e):
    """``(P(right), P(left))`` of a split from ``e = exp(-|gamma a|)``.

    ``t`` is ``gamma a`` or ``a`` (the same sign); at ``t = 0`` both are 1/2.
    Inlined into the vectorised sample loops of the chunk kernels; the test
    is hard routing's (right iff ``t > 0``), which the pruned kernels' loops
    also branch on.
    """
    big = 1.0 / (1.0 + e)
    small = e * big
    if t > 0.0:
        return big, small
    return small, big


@jit
def _leaf_nodes(leaf_col, n_leaves):
    """Node index of every leaf column."""
    out = np.empty(n_leaves, dtype=np.int64)
    for node in range(leaf_col.shape[0]):
        if leaf_col[node] >= 0:
            out[leaf_col[node]] = node
    return out


@jit
def e_step(A, E, gamma, left, right, split_col, leaf_col, pi, y, sw, h, counts):
    """E-step (eq. 10) and the sufficient statistics of the leaf M-step (eq. 13).

    Sample-major loops inside a node loop: path probabilities are products of
    split probabilities, level by level from the root (parents precede
    children), each node's product computed for a chunk of samples at once. A
    sample whose total ``sum_l pi_l[y] mu_l`` underflows (to 0 or below
    :data:`SMALLEST_TOTAL`, whose reciprocal can overflow) is redone in log
    space; one whose label has probability 0 in every leaf gets the label-free
    path posterior ``h = mu``.

    Parameters
    ----------
    A, E : ndarray (n_splits, n)
        Split activations ``w_i . x_n + b_i`` and ``exp(-gamma_i |a|)``
        (:func:`steep_activations`).
    gamma : ndarray (n_splits,)
    left, right, split_col, leaf_col : tree layout.
    pi : ndarray (n_leaves, n_classes)
        Leaf class distributions of the previous iteration (Gaussian
        leaves: their parameter rows, :mod:`obliquetrees._training.leaf_models`).
    y : int64 (n,) or float64 (n, d)
        Class indices, or standardised regression targets.
    sw : float64 (n,)
        Sample weights.
    h : ndarray (n_leaves, n) or (n_leaves, 0), output
        Responsibilities ``h_{n,l}`` (leaf-major); not written if it has no
        columns.
    counts : ndarray (n_leaves, n_classes), accumulated into
        ``counts[leaf, k] += sw_n h_{n,l} [y_n = k]`` (Gaussian leaves:
        ``sw_n h_{n,l} (1, y_n, y_n^2)``).

    Returns
    -------
    loglik : float
        ``sum_n sw_n log p(y_n | x_n)`` (eq. 4) under the current parameters
        (``-inf`` if a weighted sample's label is impossible; for targets, the
        log density of the Gaussian mixture).
    """
    no_grad = np.empty((0, 0), dtype=A.dtype)
    return _em_chunks(
        A, E, gamma, left, right, split_col, leaf_col, pi, y, sw, counts, h, sw, no_grad, sw
    )


@jit
def _em_chunks(A, E, gamma, left, right, split_col, leaf_col, pi, y, sw, counts, h, coef, G, gsum):
    """:func:`e_step` chunk by chunk, each chunk followed by its gradient factors.

    ``h`` is written only if it has columns, ``G`` and ``gsum`` only if ``G``
    has rows (:func:`em_batch`); ``coef`` is read only then.
    """
    n_leaves = pi.shape[0]
    leaf_nodes = _leaf_nodes(leaf_col, n_leaves)
    buf = np.empty((left.shape[0], CHUNK))  # one chunk of samples stays in cache
    tot = np.empty(CHUNK)
    loglik = 0.0
    for r0 in range(0, A.shape[1], CHUNK):
        m = min(CHUNK, A.shape[1] - r0)
        loglik += _estep_chunk(
            A,
            E,
            gamma,
            left,
            right,
            split_col,
            leaf_col,
            leaf_nodes,
            pi,
            y,
            sw,
            counts,
            r0,
            m,
            buf,
            tot,
        )
        if h.shape[1] > 0:
            for leaf in range(n_leaves):
                src = buf[leaf_nodes[leaf]]
                for q in range(m):
                    h[leaf, r0 + q] = src[q]
        if G.shape[0] > 0:
            _grad_chunk(A, E, gamma, left, right, split_col, coef, G, r0, m, buf, gsum)
    return loglik


@jit
def _estep_chunk(
    A, E, gamma, left, right, split_col, leaf_col, leaf_nodes, pi, y, sw, counts, r0, m, buf, tot
):
    """E-step of samples ``r0 : r0 + m`` (``m <= CHUNK``) into ``buf``.

    Row ``node`` of ``buf`` ends holding the path probabilities of internal
    nodes and the responsibilities ``h`` of leaves; ``counts`` is accumulated
    leaf by leaf, each cell in sample order. Returns the chunk's weighted
    log-likelihood.
    """
    n_nodes = left.shape[0]
    n_leaves = pi.shape[0]
    # chunk views indexed from 0: provably non-negative indices let LLVM use
    # contiguous vector loads instead of gathers
    yc = y[r0 : r0 + m]
    swc = sw[r0 : r0 + m]
    loglik = 0.0
    for q in range(m):
        buf[0, q] = 1.0
        tot[q] = 0.0
    for node in range(n_nodes):
        c = split_col[node]
        src = buf[node]
        if c >= 0:
            dr = buf[right[node]]
            dl = buf[left[node]]
            a_row = A[c, r0 : r0 + m]
            e_row = E[c, r0 : r0 + m]
            for q in range(m):
                p_right, p_left = _split_probs(a_row[q], np.float64(e_row[q]))
                v = src[q]
                dr[q] = v * p_right
                dl[q] = v * p_left
        else:
            pl = pi[leaf_col[node]]
            for q in range(m):
                v = leaf_likelihood(pl, yc, q) * src[q]
                src[q] = v
                tot[q] += v
    rescue = np.empty(n_leaves)
    for q in range(m):
        r = r0 + q
        if tot[q] >= SMALLEST_TOTAL:
            loglik += swc[q] * np.log(tot[q])
            tot[q] = 1.0 / tot[q]
        else:
            # underflow (to 0 or a subnormal) or impossible label: redo the sample in log space
            tot[q] = 1.0
            if _estep_log_row(A, gamma, left, right, split_col, leaf_col, pi, y, r, rescue):
                if sw[r] > 0.0:
                    loglik = -np.inf
            else:
                loglik += sw[r] * _row_log_evidence(
                    A, gamma, left, right, split_col, leaf_col, pi, y, r
                )
            for leaf in range(n_leaves):
                buf[leaf_nodes[leaf], q] = rescue[leaf]
    for leaf in range(n_leaves):
        hl = buf[leaf_nodes[leaf]]
        for q in range(m):
            hl[q] *= tot[q]
        if counts.shape[0] > 0:
            cl = counts[leaf]
            for q in range(m):
                add_statistics(cl, yc, q, swc[q] * hl[q])
    return loglik


@jit
def _row_log_terms(A, gamma, left, right, split_col, leaf_col, pi, y, r):
    """``log pi_l[y_r] + log mu_l`` of one sample (log space) and ``log mu_l``."""
    n_leaves = pi.shape[0]
    lp = np.empty(n_leaves)
    _row_log_paths(A, r, gamma, left, right, split_col, leaf_col, np.empty(left.shape[0]), lp)
    terms = np.empty(n_leaves)
    for leaf in range(n_leaves):
        terms[leaf] = leaf_log_likelihood(pi[leaf], y, r) + lp[leaf]
    return terms, lp


@jit
def _row_log_evidence(A, gamma, left, right, split_col, leaf_col, pi, y, r):
    terms, _ = _row_log_terms(A, gamma, left, right, split_col, leaf_col, pi, y, r)
    m = terms.max()
    return m + np.log(np.exp(terms - m).sum())


@jit
def _estep_log_row(A, gamma, left, right, split_col, leaf_col, pi, y, r, out):
    """Responsibilities of sample ``r`` in log space into ``out`` (n_leaves,).

    Returns True if its label is impossible (``out`` is then the path posterior).
    """
    terms, lp = _row_log_terms(A, gamma, left, right, split_col, leaf_col, pi, y, r)
    m = terms.max()
    impossible = m == -np.inf
    if impossible:
        terms = lp.copy()
        m = terms.max()
    e = np.exp(terms - m)
    e /= e.sum()
    for leaf in range(e.shape[0]):
        out[leaf] = e[leaf]
    return impossible


@jit
def split_gradient_factors(A, E, gamma, left, right, split_col, leaf_col, h, coef, G):
    """Per-split, per-sample derivative of eq. 14 with respect to ``a_i``.

    ``G[i, n] = coef_n * d/da_i sum_l h_{n,l} log mu_l(x_n)
    = coef_n * gamma_i * (H_R(i) * (1 - s_i) - H_L(i) * s_i)`` with
    ``s_i = sigma(gamma_i a_i)`` and ``H_R(i)``, ``H_L(i)`` the sums of
    ``h_{n,l}`` over the leaves of the right and left subtrees (accumulated
    from the leaves up, a chunk of samples at once). The weight gradient is
    then ``G @ X`` and the bias gradient ``G.sum(1)``.

    Parameters
    ----------
    A, E : ndarray (n_splits, n)
        Activations and ``exp(-gamma |A|)`` (:func:`steep_activations`).
    gamma : ndarray (n_splits,)
    left, right, split_col, leaf_col : tree layout.
    h : ndarray (n_leaves, n)
    coef : ndarray (n,)
        Per-sample factor (sample weight / batch weight).
    G : ndarray (n_splits, n), output.
    """
    n_leaves = h.shape[0]
    leaf_nodes = _leaf_nodes(leaf_col, n_leaves)
    buf = np.empty((left.shape[0], CHUNK))
    gsum = np.zeros(A.shape[0])
    for r0 in range(0, A.shape[1], CHUNK):
        m = min(CHUNK, A.shape[1] - r0)
        for leaf in range(n_leaves):
            dst = buf[leaf_nodes[leaf]]
            for q in range(m):
                dst[q] = h[leaf, r0 + q]
        _grad_chunk(A, E, gamma, left, right, split_col, coef, G, r0, m, buf, gsum)


@jit
def _grad_chunk(A, E, gamma, left, right, split_col, coef, G, r0, m, buf, gsum):
    """Gradient factors of samples ``r0 : r0 + m`` from the leaves up.

    The leaf rows of ``buf`` hold the responsibilities; each internal row is
    overwritten with the sum over its subtree. ``gsum[c]`` is accumulated with
    the factors of split ``c`` (in sample order).
    """
    coefc = coef[r0 : r0 + m]
    for node in range(left.shape[0] - 1, -1, -1):
        c = split_col[node]
        if c < 0:
            continue
        dst = buf[node]
        hr_ = buf[right[node]]
        hl_ = buf[left[node]]
        g = gamma[c]
        a_row = A[c, r0 : r0 + m]  # chunk views: see _estep_chunk
        e_row = E[c, r0 : r0 + m]
        g_row = G[c, r0 : r0 + m]
        acc = 0.0
        for q in range(m):
            p_right, p_left = _split_probs(a_row[q], np.float64(e_row[q]))
            hr = hr_[q]
            hl = hl_[q]
            dst[q] = hr + hl
            v = coefc[q] * g * (hr * p_left - hl * p_right)
            # flush negligible factors to 0: denormals in G (float32 data)
            # would slow the gradient GEMM down by an order of magnitude
            v = v if abs(v) > TINY else 0.0
            g_row[q] = v
            acc += v
        gsum[c] += acc


@jit
def em_batch(A, E, gamma, left, right, split_col, leaf_col, pi, y, sw, coef, counts, G, gsum):
    """Fused E-step and gradient factors of one minibatch at the same parameters.

    Equivalent to :func:`e_step` followed by :func:`split_gradient_factors`
    on the responsibilities it produced, chunk by chunk while the chunk's
    path probabilities are in cache (the responsibilities are never stored
    for the whole batch). ``gsum`` (n_splits,) is accumulated with the
    row sums of ``G`` in float64, before ``G`` is rounded to the dtype of
    ``A`` (the bias gradient). Returns the weighted log-likelihood.
    """
    no_h = np.empty((pi.shape[0], 0))
    return _em_chunks(
        A, E, gamma, left, right, split_col, leaf_col, pi, y, sw, counts, no_h, coef, G, gsum
    )


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
def stump_e_step(act, b0, gamma, pi, y, sw, hr, counts):
    """E-step of a stump: ``hr[r] = P(right | x_r, y_r)`` and the leaf statistics.

    ``act`` holds ``w . x_r`` (without the bias ``b0``) for every row; ``counts``
    (2, n_classes) is overwritten with ``sum_r sw_r h_r [y_r = k]`` (row 0 left,
    row 1 right).
    """
    for c in range(2):
        for q in range(counts.shape[1]):
            counts[c, q] = 0.0
    for r in range(act.shape[0]):
        t = gamma * (np.float64(act[r]) + b0)
        sr, sl = _split_probs(t, np.exp(-abs(t)))
        num_r = leaf_likelihood(pi[1], y, r) * sr
        tot = num_r + leaf_likelihood(pi[0], y, r) * sl
        if tot > 0.0:
            hv = num_r / tot
        else:  # underflow or impossible label: log space / path posterior
            lsr, lsl = log_sigmoid_pair(t)
            log_r = leaf_log_likelihood(pi[1], y, r)
            log_l = leaf_log_likelihood(pi[0], y, r)
            if log_r > -np.inf or log_l > -np.inf:
                tr = log_r + lsr
                tl = log_l + lsl
            else:
                tr = lsr
                tl = lsl
            hv = sigmoid(tr - tl)
        hr[r] = hv
        add_statistics(counts[1], y, r, sw[r] * hv)
        add_statistics(counts[0], y, r, sw[r] * (1.0 - hv))


@jit
def stump_coefficients(act_b, rows, b0, gamma, hr, sw, total, coef):
    """Per-sample derivative of a stump's minibatch objective w.r.t. its activation.

    ``coef[q]`` (rounded to the dtype of ``coef``) for the minibatch rows
    ``rows`` whose ``w . x`` are ``act_b``; returns their float64 sum (the
    bias gradient).
    """
    gsum = 0.0
    for q in range(rows.shape[0]):
        r = rows[q]
        # minimisation: -d/da [h log s + (1 - h) log(1 - s)] / total
        t = gamma * (np.float64(act_b[q]) + b0)
        c = -sw[r] * gamma * (hr[r] - sigmoid(t)) / total
        coef[q] = c
        gsum += c
    return gsum


@jit
def stump_adam_step(
    w, b, gw, gb, mw, vw, mb, vb, step, lr, beta1, beta2, eps, lam, nb_indptr, nb_indices
):
    """Adds the spatial penalty's gradient to ``gw`` (``lam > 0``), then one Adam step."""
    if lam > 0.0:
        for j in range(w.shape[0]):
            acc = 0.0
            for q in range(nb_indptr[j], nb_indptr[j + 1]):
                acc += w[j] - w[nb_indices[q]]
            gw[j] += 2.0 * lam * acc
    adam_update(w, gw, mw, vw, step, lr, beta1, beta2, eps)
    adam_update(b, gb, mb, vb, step, lr, beta1, beta2, eps)


@jit
def fit_stump(X, y, sw, w, b, pi, gamma0, dgamma, n_epochs, order, batch_size, *adam):
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
    X : ndarray (n, k) of float32 or float64, or a CSR tuple
        The node's samples, restricted to the split's features: dense (the
        activations and the weight gradient are BLAS gemv in this dtype; the
        rest is float64), or CSR rows standardised on the fly
        (:mod:`obliquetrees.e2edt._stump_rows`).
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
    *adam : lr, beta1, beta2, eps, lam, nb_indptr, nb_indices
        Adam parameters, the spatial regularisation strength and the CSR
        adjacency between the k features (pixels), as :func:`stump_adam_step`
        takes them.

    Returns
    -------
    gamma : float
        Steepness after the last epoch.
    """
    n = sw.shape[0]
    k = w.shape[0]
    hr = np.empty(n)
    counts = empty_statistics(pi, y)
    gw = np.empty(k)
    gb = np.zeros(1)
    scratch = stump_scratch(X, w, min(batch_size, n))
    mw = np.zeros(k)
    vw = np.zeros(k)
    mb = np.zeros(1)
    vb = np.zeros(1)
    gamma = gamma0
    step = 0
    for epoch in range(n_epochs):
        stump_e_step(all_activations(X, w, scratch), b[0], gamma, pi, y, sw, hr, counts)
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
                rows = perm[start:stop]
                act_b, coef = batch_activations(X, rows, w, scratch)
                gb[0] = stump_coefficients(act_b, rows, b[0], gamma, hr, sw, total, coef)
                batch_weight_gradient(X, rows, coef, gb[0], scratch, gw)
                step += 1
                stump_adam_step(w, b, gw, gb, mw, vw, mb, vb, step, *adam)
        # M-step, leaves
        m_step(counts, pi, y)
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
