"""numba kernels of the random hinge forest (Lay et al.): traversal with
margin tracking, forward over all trees, exact sparse backward fused with the
optimiser step.

Notation (all arrays C-contiguous):

- ``U`` (n, H) float64: the normalised hinge features of a batch;
- ``thr`` (M, NT) float64 and ``feat`` (M, NT) int64: threshold and feature
  index of each decision, ``NT = 2**D - 1`` for trees (heap order, children of
  ``v`` are ``2v+1`` and ``2v+2``) and ``NT = D`` for ferns (one decision per
  level);
- ``W`` (M, L, C) float64: leaf weights, ``L = 2**D``, ``C`` = number of
  outputs per leaf (K for the summed head, 1 for the linear head);
- ``out`` (n, n_out): tree outputs. With ``stride == 0`` every tree adds its
  ``C``-vector into the same row (summed head, ``n_out = C``); with
  ``stride == 1`` tree ``m`` writes column ``m`` (linear head, ``C = 1``,
  ``n_out = M``).

Traversal (the paper's Algorithm 3): at each level ``r = U[s, f_v] - t_v``;
the signed margin of smallest ``|r|`` along the path is ``r*`` (the first one
wins ties), the sample goes right iff ``r > 0``. A tree outputs
``|r*| W[m, leaf]``.

Parallel shape and determinism: the forward pass is a ``prange`` over
blocks of 4 samples, each block walking all trees in tree order (the 4 walks
of a block are interleaved for instruction-level parallelism); the backward pass is a
``prange`` over trees, each tree visiting the batch's samples in order (a
tree's parameters are owned by one thread; batches are small, so trees are the
wide dimension); the input gradient is then reduced per sample over trees in
tree order. Every sum is taken in a fixed order, so results are bit-identical
for any number of threads.

:func:`train_epoch` runs a whole epoch (gather, linear layer as a BLAS GEMM,
batch norm, forward, loss, backward, optimiser steps, statistics update) in
one compiled call, so there is no Python between minibatches.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_parallel, prange

OPT_ADAM = 0
OPT_LAZY_ADAM = 1
OPT_ADAGRAD = 2
OPT_SGD = 3


OPT_ADAM = 0
OPT_LAZY_ADAM = 1
OPT_ADAGRAD = 2
OPT_SGD = 3
BN_EPS = 1e-7
BN_ALPHA_MAX = 0.99
BLOCK = 4


# ------------------------------------------------------------------ forward
@jit
def _traverse(U, s, thr, feat, m, depth, is_fern):
    """Leaf, signed minimal margin r* and its decision index (Algorithm 3)."""
    leaf = 0
    v = 0
    rs = np.inf
    ds = 0
    for i in range(depth):
        d = i if is_fern else v
        r = U[s, feat[m, d]] - thr[m, d]
        c = abs(r) < abs(rs)
        rs = r if c else rs
        ds = d if c else ds
        b = np.int64(r > 0.0)
        leaf = 2 * leaf + b
        v = 2 * v + 1 + b
    return leaf, rs, ds


@jit
def _traverse4(U, s, thr, feat, m, depth, is_fern):
    """:func:`_traverse` for samples s..s+3 at once (independent chains)."""
    l0 = 0
    l1 = 0
    l2 = 0
    l3 = 0
    v0 = 0
    v1 = 0
    v2 = 0
    v3 = 0
    r0s = np.inf
    r1s = np.inf
    r2s = np.inf
    r3s = np.inf
    d0s = 0
    d1s = 0
    d2s = 0
    d3s = 0
    for i in range(depth):
        if is_fern:
            d0 = i
            d1 = i
            d2 = i
            d3 = i
        else:
            d0 = v0
            d1 = v1
            d2 = v2
            d3 = v3
        r0 = U[s, feat[m, d0]] - thr[m, d0]
        r1 = U[s + 1, feat[m, d1]] - thr[m, d1]
        r2 = U[s + 2, feat[m, d2]] - thr[m, d2]
        r3 = U[s + 3, feat[m, d3]] - thr[m, d3]
        c0 = abs(r0) < abs(r0s)
        c1 = abs(r1) < abs(r1s)
        c2 = abs(r2) < abs(r2s)
        c3 = abs(r3) < abs(r3s)
        r0s = r0 if c0 else r0s
        r1s = r1 if c1 else r1s
        r2s = r2 if c2 else r2s
        r3s = r3 if c3 else r3s
        d0s = d0 if c0 else d0s
        d1s = d1 if c1 else d1s
        d2s = d2 if c2 else d2s
        d3s = d3 if c3 else d3s
        b0 = np.int64(r0 > 0.0)
        b1 = np.int64(r1 > 0.0)
        b2 = np.int64(r2 > 0.0)
        b3 = np.int64(r3 > 0.0)
        l0 = 2 * l0 + b0
        l1 = 2 * l1 + b1
        l2 = 2 * l2 + b2
        l3 = 2 * l3 + b3
        v0 = 2 * v0 + 1 + b0
        v1 = 2 * v1 + 1 + b1
        v2 = 2 * v2 + 1 + b2
        v3 = 2 * v3 + 1 + b3
    return l0, l1, l2, l3, r0s, r1s, r2s, r3s, d0s, d1s, d2s, d3s


@jit
def _emit(s, m, lf, r, vs, W, out, stride, leaf, rstar, vstar, store):
    a = abs(r)
    base = m * stride
    for k in range(W.shape[2]):
        out[s, base + k] += a * W[m, lf, k]
    if store:
        leaf[s, m] = lf
        rstar[s, m] = r
        vstar[s, m] = vs


@jit
def _forward_block(b, n, U, thr, feat, W, depth, is_fern, stride, out, leaf, rstar, vstar, store):
    """Outputs of samples ``4b .. 4b+3`` (< n) over all trees, in tree order."""
    s0 = b * BLOCK
    s1 = min(n, s0 + BLOCK)
    for s in range(s0, s1):
        for k in range(out.shape[1]):
            out[s, k] = 0.0
    for m in range(thr.shape[0]):
        if s1 - s0 == BLOCK:
            l0, l1, l2, l3, r0, r1, r2, r3, d0, d1, d2, d3 = _traverse4(
                U, s0, thr, feat, m, depth, is_fern
            )
            _emit(s0, m, l0, r0, d0, W, out, stride, leaf, rstar, vstar, store)
            _emit(s0 + 1, m, l1, r1, d1, W, out, stride, leaf, rstar, vstar, store)
            _emit(s0 + 2, m, l2, r2, d2, W, out, stride, leaf, rstar, vstar, store)
            _emit(s0 + 3, m, l3, r3, d3, W, out, stride, leaf, rstar, vstar, store)
        else:
            for s in range(s0, s1):
                lf, r, vs = _traverse(U, s, thr, feat, m, depth, is_fern)
                _emit(s, m, lf, r, vs, W, out, stride, leaf, rstar, vstar, store)


@jit_parallel
def forward(U, thr, feat, W, depth, is_fern, stride, out, leaf, rstar, vstar, store):
    """Forest output for every row of ``U`` into ``out`` (overwritten).

    If ``store``, also writes ``leaf``, ``rstar``, ``vstar`` (each (n, M)) for
    the backward pass.
    """
    n = U.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        _forward_block(
            b, n, U, thr, feat, W, depth, is_fern, stride, out, leaf, rstar, vstar, store
        )


# ----------------------------------------------------------------- backward
@jit
def _adam_update(p, mom, vel, g, step_size, bc2_sqrt_inv, beta1, beta2, eps):
    mom_new = beta1 * mom + (1.0 - beta1) * g
    vel_new = beta2 * vel + (1.0 - beta2) * g * g
    p_new = p - step_size * mom_new / (np.sqrt(vel_new) * bc2_sqrt_inv + eps)
    return p_new, mom_new, vel_new


@jit
def _backward_tree(
    m,
    B,
    G,
    leaf,
    rstar,
    vstar,
    feat,
    thr,
    W,
    stride,
    contrib,
    contrib_feat,
    opt,
    opt_W1,
    opt_W2,
    opt_t1,
    opt_t2,
    hp,
    step,
    wmark,
    wslot,
    tmark,
    tslot,
    gW,
    gt,
    touched_w,
    touched_t,
    update,
):
    """Gradients of tree ``m`` over the batch and (if ``update``) its optimiser step."""
    NT = thr.shape[1]
    L = W.shape[1]
    C = W.shape[2]
    lr = hp[0]
    beta1 = hp[1]
    beta2 = hp[2]
    eps = hp[3]
    step_size = hp[4]
    bc2_sqrt_inv = hp[5]
    nw = 0
    nt = 0
    base = m * stride
    for s in range(B):
        lf = leaf[s, m]
        r = rstar[s, m]
        vs = vstar[s, m]
        if wmark[m, lf] != step:
            wmark[m, lf] = step
            wslot[m, lf] = nw
            touched_w[m, nw] = lf
            for k in range(C):
                gW[m, nw, k] = 0.0
            nw += 1
        j = wslot[m, lf]
        a = abs(r)
        d = 0.0
        for k in range(C):
            gk = G[s, base + k]
            gW[m, j, k] += a * gk
            d += W[m, lf, k] * gk
        sg = 1.0 if r > 0.0 else (-1.0 if r < 0.0 else 0.0)
        if tmark[m, vs] != step:
            tmark[m, vs] = step
            tslot[m, vs] = nt
            touched_t[m, nt] = vs
            gt[m, nt] = 0.0
            nt += 1
        gt[m, tslot[m, vs]] -= sg * d
        contrib[s, m] = sg * d
        contrib_feat[s, m] = feat[m, vs]
    touched_w[m, B] = nw
    touched_t[m, B] = nt
    if not update:
        return
    if opt == OPT_ADAM:
        for lf in range(L):
            hit = wmark[m, lf] == step
            j = wslot[m, lf]
            for k in range(C):
                g = gW[m, j, k] if hit else 0.0
                W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k] = _adam_update(
                    W[m, lf, k],
                    opt_W1[m, lf, k],
                    opt_W2[m, lf, k],
                    g,
                    step_size,
                    bc2_sqrt_inv,
                    beta1,
                    beta2,
                    eps,
                )
        for v in range(NT):
            g = gt[m, tslot[m, v]] if tmark[m, v] == step else 0.0
            thr[m, v], opt_t1[m, v], opt_t2[m, v] = _adam_update(
                thr[m, v],
                opt_t1[m, v],
                opt_t2[m, v],
                g,
                step_size,
                bc2_sqrt_inv,
                beta1,
                beta2,
                eps,
            )
    elif opt == OPT_LAZY_ADAM:
        for j in range(nw):
            lf = touched_w[m, j]
            for k in range(C):
                W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k] = _adam_update(
                    W[m, lf, k],
                    opt_W1[m, lf, k],
                    opt_W2[m, lf, k],
                    gW[m, j, k],
                    step_size,
                    bc2_sqrt_inv,
                    beta1,
                    beta2,
                    eps,
                )
        for j in range(nt):
            v = touched_t[m, j]
            thr[m, v], opt_t1[m, v], opt_t2[m, v] = _adam_update(
                thr[m, v],
                opt_t1[m, v],
                opt_t2[m, v],
                gt[m, j],
                step_size,
                bc2_sqrt_inv,
                beta1,
                beta2,
                eps,
            )
    elif opt == OPT_ADAGRAD:
        for j in range(nw):
            lf = touched_w[m, j]
            for k in range(C):
                g = gW[m, j, k]
                opt_W1[m, lf, k] += g * g
                W[m, lf, k] -= lr * g / (np.sqrt(opt_W1[m, lf, k]) + eps)
        for j in range(nt):
            v = touched_t[m, j]
            g = gt[m, j]
            opt_t1[m, v] += g * g
            thr[m, v] -= lr * g / (np.sqrt(opt_t1[m, v]) + eps)
    else:
        for j in range(nw):
            lf = touched_w[m, j]
            for k in range(C):
                W[m, lf, k] -= lr * gW[m, j, k]
        for j in range(nt):
            thr[m, touched_t[m, j]] -= lr * gt[m, j]


@jit_parallel
def backward_update(
    G,
    leaf,
    rstar,
    vstar,
    feat,
    thr,
    W,
    stride,
    contrib,
    contrib_feat,
    opt,
    opt_W1,
    opt_W2,
    opt_t1,
    opt_t2,
    hp,
    step,
    wmark,
    wslot,
    tmark,
    tslot,
    gW,
    gt,
    touched_w,
    touched_t,
    update,
):
    """Exact sparse gradients (eqs. 11-12) and, if ``update``, the optimiser step.

    ``G`` (B, n_out) is dLoss/d(out). For sample s and tree m with leaf l and
    minimal margin r* at decision v*: dL/dW[m, l] += |r*| G_m[s],
    dL/dt[m, v*] -= sgn(r*) (W[m, l] . G_m[s]) and the input feature
    ``feat[m, v*]`` of sample s receives ``+sgn(r*) (W[m, l] . G_m[s])``,
    written to ``contrib[s, m]`` / ``contrib_feat[s, m]`` (summed by
    :func:`input_gradient`). All inner products use the weights before the
    update. ``G_m[s]`` is ``G[s, m*stride : m*stride + C]``.

    Per tree, gradients of the touched leaves/decisions are accumulated in
    slots (``gW[m, j]``, ``gt[m, j]``; ``wslot``/``tslot`` map a leaf/decision
    to its slot, valid where ``wmark``/``tmark`` equals ``step``; the touched
    ids are listed in ``touched_w``/``touched_t``, whose column ``B`` holds
    the count).

    ``hp`` = (lr, beta1, beta2, eps, step_size, bc2_sqrt_inv): optimiser
    hyper-parameters with Adam's bias corrections for this step folded into
    the last two. ``opt``: dense Adam (every parameter moves every step, as
    in the paper), lazy Adam (only touched rows: their moments and values),
    AdaGrad (exactly sparse: untouched parameters have zero gradient and do
    not move), plain SGD.
    """
    B = G.shape[0]
    for m in prange(thr.shape[0]):
        _backward_tree(
            m,
            B,
            G,
            leaf,
            rstar,
            vstar,
            feat,
            thr,
            W,
            stride,
            contrib,
            contrib_feat,
            opt,
            opt_W1,
            opt_W2,
            opt_t1,
            opt_t2,
            hp,
            step,
            wmark,
            wslot,
            tmark,
            tslot,
            gW,
            gt,
            touched_w,
            touched_t,
            update,
        )


@jit
def _input_gradient_row(s, contrib, contrib_feat, gU):
    for h in range(gU.shape[1]):
        gU[s, h] = 0.0
    for m in range(contrib.shape[1]):
        gU[s, contrib_feat[s, m]] += contrib[s, m]


@jit_parallel
def input_gradient(contrib, contrib_feat, gU):
    """``gU[s, f] = sum over trees m (in order) of contrib[s, m]`` at f = contrib_feat[s, m]."""
    for s in prange(contrib.shape[0]):
        _input_gradient_row(s, contrib, contrib_feat, gU)


@jit
def dense_adam(p, mom, vel, g, step_size, bc2_sqrt_inv, beta1, beta2, eps):
    """In-place Adam step on flat contiguous arrays (small parameter blocks)."""
    for i in range(p.shape[0]):
        p[i], mom[i], vel[i] = _adam_update(
            p[i], mom[i], vel[i], g[i], step_size, bc2_sqrt_inv, beta1, beta2, eps
        )


@jit
def dense_adagrad(p, acc, g, lr, eps):
    """In-place AdaGrad step on flat contiguous arrays."""
    for i in range(p.shape[0]):
        acc[i] += g[i] * g[i]
        p[i] -= lr * g[i] / (np.sqrt(acc[i]) + eps)


@jit
def _dense_step(p, s1, s2, g, opt, hp):
    """Optimiser step on a small dense block (flat views)."""
    if opt == OPT_ADAM or opt == OPT_LAZY_ADAM:
        dense_adam(p, s1, s2, g, hp[4], hp[5], hp[1], hp[2], hp[3])
    elif opt == OPT_ADAGRAD:
        dense_adagrad(p, s1, g, hp[0], hp[3])
    else:
        for i in range(p.shape[0]):
            p[i] -= hp[0] * g[i]


@jit
def _bn_update(Hc, bn_mean, bn_var, counters, init):
    """Running statistics update (reference code's schedule, see hinge.py)."""
    Bc = Hc.shape[0]
    if Bc < 2:
        return
    i = counters[0]
    alpha = 0.0 if init else min(i / (i + 1.0), BN_ALPHA_MAX)
    for h in range(Hc.shape[1]):
        mu = 0.0
        for s in range(Bc):
            mu += Hc[s, h]
        mu /= Bc
        var = 0.0
        for s in range(Bc):
            dv = Hc[s, h] - mu
            var += dv * dv
        var /= Bc - 1
        bn_mean[h] = alpha * bn_mean[h] + (1.0 - alpha) * mu
        bn_var[h] = alpha * bn_var[h] + (1.0 - alpha) * var
    if not init:
        counters[0] = i + 1


# -------------------------------------------------------------------- epoch
@jit_parallel
def train_epoch(
    Z,
    Yi,
    Yf,
    w,
    order,
    batch_size,
    classification,
    linear_head,
    learn_A,
    A,
    bn_mean,
    bn_var,
    counters,
    feat,
    thr,
    W,
    Q,
    q,
    depth,
    is_fern,
    opt,
    lr,
    beta1,
    beta2,
    eps,
    A_1,
    A_2,
    W_1,
    W_2,
    t_1,
    t_2,
    Q_1,
    Q_2,
    q_1,
    q_2,
    wmark,
    wslot,
    tmark,
    tslot,
    Zb,
    U,
    out,
    F,
    G,
    Gt,
    leaf,
    rstar,
    vstar,
    contrib,
    contrib_feat,
    gW,
    gt,
    touched_w,
    touched_t,
    gU,
    batch_loss,
):
    """One epoch of minibatch training over ``Z[order]`` (standardised inputs).

    ``Yi`` (n,) class indices (classification) / ``Yf`` (n, K) targets
    (regression); ``w`` per-sample loss weights (mean 1 over the training
    set). ``counters`` = [bn_count, step] (updated). Scratch arrays are sized
    for ``batch_size`` rows. Writes the mean loss of each batch to
    ``batch_loss``. Per batch: gather, ``H = Zb A^T`` (BLAS), ``U = (H - mean)
    / sd``, forward, loss and ``G = dL/dF``, head gradients, per-tree backward
    and step, input gradient, ``gA = (gU / sd)^T Zb`` (BLAS), dense steps of
    A and the head, statistics update.
    """
    n = order.shape[0]
    p = Z.shape[1]
    Hn = A.shape[0]
    M = thr.shape[0]
    K = F.shape[1]
    stride = 1 if linear_head else 0
    nbatch = (n + batch_size - 1) // batch_size
    hp = np.empty(6)
    sd = np.empty(Hn)
    for bi in range(nbatch):
        s0 = bi * batch_size
        Bc = min(n, s0 + batch_size) - s0
        for i in range(Bc):
            r = order[s0 + i]
            for j in range(p):
                Zb[i, j] = Z[r, j]
        Zc = Zb[:Bc]
        Hc = np.dot(Zc, A.T)
        if counters[0] == 0:
            _bn_update(Hc, bn_mean, bn_var, counters, True)
        for h in range(Hn):
            sd[h] = np.sqrt(bn_var[h] + BN_EPS)
        for i in range(Bc):
            for h in range(Hn):
                U[i, h] = (Hc[i, h] - bn_mean[h]) / sd[h]
        Uc = U[:Bc]
        nblk = (Bc + BLOCK - 1) // BLOCK
        for b in prange(nblk):
            _forward_block(
                b, Bc, Uc, thr, feat, W, depth, is_fern, stride, out, leaf, rstar, vstar, True
            )
        # head and loss
        loss = 0.0
        for i in range(Bc):
            if linear_head:
                for k in range(K):
                    acc = q[k]
                    for m in range(M):
                        acc += Q[k, m] * out[i, m]
                    F[i, k] = acc
            else:
                for k in range(K):
                    F[i, k] = out[i, k]
            wi = w[order[s0 + i]] / Bc
            if classification:
                mx = F[i, 0]
                for k in range(1, K):
                    mx = max(mx, F[i, k])
                tot = 0.0
                for k in range(K):
                    G[i, k] = np.exp(F[i, k] - mx)
                    tot += G[i, k]
                yi = Yi[order[s0 + i]]
                loss += wi * (np.log(tot) + mx - F[i, yi])
                for k in range(K):
                    G[i, k] = wi * (G[i, k] / tot - (1.0 if k == yi else 0.0))
            else:
                for k in range(K):
                    dk = F[i, k] - Yf[order[s0 + i], k]
                    loss += wi * dk * dk / K
                    G[i, k] = wi * 2.0 * dk / K
        batch_loss[bi] = loss
        # optimiser constants of this step
        t = counters[1] + 1
        hp[0] = lr
        hp[1] = beta1
        hp[2] = beta2
        hp[3] = eps
        hp[4] = lr / (1.0 - beta1**t)
        hp[5] = 1.0 / np.sqrt(1.0 - beta2**t)
        step = counters[1]
        Gc = G[:Bc]
        if linear_head:
            for i in range(Bc):
                for m in range(M):
                    acc = 0.0
                    for k in range(K):
                        acc += Gc[i, k] * Q[k, m]
                    Gt[i, m] = acc
            Gtree = Gt[:Bc]
        else:
            Gtree = Gc
        for m in prange(M):
            _backward_tree(
                m,
                Bc,
                Gtree,
                leaf,
                rstar,
                vstar,
                feat,
                thr,
                W,
                stride,
                contrib,
                contrib_feat,
                opt,
                W_1,
                W_2,
                t_1,
                t_2,
                hp,
                step,
                wmark,
                wslot,
                tmark,
                tslot,
                gW,
                gt,
                touched_w,
                touched_t,
                True,
            )
        if linear_head:
            gQ = np.dot(Gc.T, out[:Bc])
            gq = np.zeros(K)
            for i in range(Bc):
                for k in range(K):
                    gq[k] += Gc[i, k]
            _dense_step(Q.reshape(-1), Q_1.reshape(-1), Q_2.reshape(-1), gQ.reshape(-1), opt, hp)
            _dense_step(q, q_1, q_2, gq, opt, hp)
        if learn_A:
            for i in range(Bc):  # 5000 scattered adds: not worth a parallel region
                _input_gradient_row(i, contrib, contrib_feat, gU)
            for i in range(Bc):
                for h in range(Hn):
                    gU[i, h] /= sd[h]
            gA = np.dot(gU[:Bc].T, Zc)
            _dense_step(A.reshape(-1), A_1.reshape(-1), A_2.reshape(-1), gA.reshape(-1), opt, hp)
        counters[1] = t
        _bn_update(Hc, bn_mean, bn_var, counters, False)
