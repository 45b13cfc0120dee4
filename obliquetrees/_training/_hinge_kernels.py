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
samples, each sample walking all trees in tree order; the backward pass is a
``prange`` over trees, each tree visiting the batch's samples in order (a
tree's parameters are owned by one thread; batches are small, so trees are the
wide dimension); the input gradient is then reduced per sample over trees in
tree order. Every sum is taken in a fixed order, so results are bit-identical
for any number of threads.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_parallel, prange

OPT_ADAM = 0
OPT_LAZY_ADAM = 1
OPT_ADAGRAD = 2
OPT_SGD = 3


@jit
def _traverse(U, s, thr, feat, m, depth, is_fern):
    """Leaf, signed minimal margin and its decision index for sample s, tree m."""
    leaf = 0
    v = 0
    rstar = 0.0
    vstar = 0
    for i in range(depth):
        d = i if is_fern else v
        r = U[s, feat[m, d]] - thr[m, d]
        if i == 0 or abs(r) < abs(rstar):
            rstar = r
            vstar = d
        bit = 1 if r > 0.0 else 0
        leaf = 2 * leaf + bit
        v = 2 * v + 1 + bit
    return leaf, rstar, vstar


@jit_parallel
def forward(U, thr, feat, W, depth, is_fern, stride, out, leaf, rstar, vstar, store):
    """Forest output for every row of ``U`` into ``out`` (overwritten).

    If ``store``, also writes ``leaf``, ``rstar``, ``vstar`` (each (n, M)) for
    the backward pass.
    """
    n = U.shape[0]
    M = thr.shape[0]
    C = W.shape[2]
    n_out = out.shape[1]
    for s in prange(n):
        for k in range(n_out):
            out[s, k] = 0.0
        for m in range(M):
            lf, r, vs = _traverse(U, s, thr, feat, m, depth, is_fern)
            a = abs(r)
            base = m * stride
            for k in range(C):
                out[s, base + k] += a * W[m, lf, k]
            if store:
                leaf[s, m] = lf
                rstar[s, m] = r
                vstar[s, m] = vs


@jit
def _adam_update(p, mom, vel, g, step_size, bc2_sqrt_inv, beta1, beta2, eps):
    mom_new = beta1 * mom + (1.0 - beta1) * g
    vel_new = beta2 * vel + (1.0 - beta2) * g * g
    p_new = p - step_size * mom_new / (np.sqrt(vel_new) * bc2_sqrt_inv + eps)
    return p_new, mom_new, vel_new


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
    update.

    Per tree, gradients of the touched leaves/decisions are accumulated in
    slots (``gW[m, j]``, ``gt[m, j]``; ``wslot``/``tslot`` map a leaf/decision
    to its slot, valid where ``wmark``/``tmark`` equals ``step``; the touched
    ids are listed in ``touched_w``/``touched_t``).

    ``hp`` = (lr, beta1, beta2, eps, step_size, bc2_sqrt_inv): the optimiser
    hyper-parameters, with Adam's bias corrections for this step folded into
    the last two. ``opt``: dense Adam (every parameter moves every step, as
    in the paper), lazy Adam (only touched rows: their moments and values),
    AdaGrad (exactly sparse: untouched parameters have zero gradient and do
    not move), plain SGD.

    Returns nothing; writes ``W``, ``thr``, optimiser state, ``contrib*``,
    ``gW``/``gt`` and the touched lists (``touched_*[m, B]`` holds the count).
    """
    B = G.shape[0]
    M = thr.shape[0]
    NT = thr.shape[1]
    L = W.shape[1]
    C = W.shape[2]
    lr = hp[0]
    beta1 = hp[1]
    beta2 = hp[2]
    eps = hp[3]
    step_size = hp[4]
    bc2_sqrt_inv = hp[5]
    for m in prange(M):
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
            continue
        if opt == OPT_ADAM:
            for lf in range(L):
                hit = wmark[m, lf] == step
                for k in range(C):
                    g = gW[m, wslot[m, lf], k] if hit else 0.0
                    W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k] = _adam_update(
                        W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k], g,
                        step_size, bc2_sqrt_inv, beta1, beta2, eps,
                    )
            for v in range(NT):
                g = gt[m, tslot[m, v]] if tmark[m, v] == step else 0.0
                thr[m, v], opt_t1[m, v], opt_t2[m, v] = _adam_update(
                    thr[m, v], opt_t1[m, v], opt_t2[m, v], g,
                    step_size, bc2_sqrt_inv, beta1, beta2, eps,
                )
        elif opt == OPT_LAZY_ADAM:
            for j in range(nw):
                lf = touched_w[m, j]
                for k in range(C):
                    W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k] = _adam_update(
                        W[m, lf, k], opt_W1[m, lf, k], opt_W2[m, lf, k], gW[m, j, k],
                        step_size, bc2_sqrt_inv, beta1, beta2, eps,
                    )
            for j in range(nt):
                v = touched_t[m, j]
                thr[m, v], opt_t1[m, v], opt_t2[m, v] = _adam_update(
                    thr[m, v], opt_t1[m, v], opt_t2[m, v], gt[m, j],
                    step_size, bc2_sqrt_inv, beta1, beta2, eps,
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
def input_gradient(contrib, contrib_feat, gU):
    """``gU[s, f] = sum over trees m (in order) of contrib[s, m]`` at f = contrib_feat[s, m]."""
    B = contrib.shape[0]
    M = contrib.shape[1]
    H = gU.shape[1]
    for s in prange(B):
        for h in range(H):
            gU[s, h] = 0.0
        for m in range(M):
            gU[s, contrib_feat[s, m]] += contrib[s, m]


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
