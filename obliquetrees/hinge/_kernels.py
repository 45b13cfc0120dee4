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

Arrays that travel together are passed as tuples: ``walk = (leaf, rstar,
vstar)`` (the forward pass's record, each (n, M)), ``slots = (pos_w,
pos_t)`` (per-chunk maps from a leaf/decision to its gradient slot) and
``grads = (gW, gt, touched_w, touched_t, contrib, contrib_feat)`` (the sparse
gradient slots and the input-gradient contributions, see
:func:`backward_update`), ``optim = (opt, moments, hp)``
with ``moments = (W_1, W_2, t_1, t_2)`` (optimiser code, the optimiser state
of ``W`` and ``thr``, and the step's hyper-parameters).

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
batch norm, :func:`forward`, loss, :func:`backward_update`, optimiser steps,
statistics update) in one compiled call, so there is no Python between
minibatches.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_parallel, prange
from obliquetrees._training._optim import (
    adagrad_scalar,
    adagrad_update,
    adam_corrections,
    adam_scalar_inv,
    adam_update_inv,
    sgd_update,
)
from obliquetrees._training._prefetch import prefetch

#: Optimiser codes (``HingeParams.optimizer`` names map to these).
OPT_ADAM = 0
OPT_LAZY_ADAM = 1
OPT_ADAGRAD = 2
OPT_SGD = 3
#: Batch norm: variance offset, and the cap of the running statistics' momentum.
BN_EPS = 1e-7
BN_ALPHA_MAX = 0.99
#: Samples per forward block (walked together).
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
def _prefetch_leaf(W, m, lf):
    """Prefetch the weights ``W[m, lf, :]`` (a row may straddle two cache lines)."""
    prefetch(W, (m, lf, 0))
    prefetch(W, (m, lf, W.shape[2] - 1))


@jit
def _emit(s, m, lf, r, vs, W, out, stride, walk, store):
    a = abs(r)
    base = m * stride
    for k in range(W.shape[2]):
        out[s, base + k] += a * W[m, lf, k]
    if store:
        leaf, rstar, vstar = walk
        leaf[s, m] = lf
        rstar[s, m] = r
        vstar[s, m] = vs


@jit
def _forward_block(b, n, U, thr, feat, W, depth, is_fern, stride, out, walk, store):
    """Outputs of samples ``4b .. 4b+3`` (< n) over all trees, in tree order.

    A full block emits tree ``m - 1`` after walking tree ``m``, whose leaves'
    weights are prefetched meanwhile: each sample still adds the trees in
    tree order, so the sums are unchanged.
    """
    s0 = b * BLOCK
    s1 = min(n, s0 + BLOCK)
    for s in range(s0, s1):
        for k in range(out.shape[1]):
            out[s, k] = 0.0
    if s1 - s0 < BLOCK:
        for m in range(thr.shape[0]):
            for s in range(s0, s1):
                lf, r, vs = _traverse(U, s, thr, feat, m, depth, is_fern)
                _emit(s, m, lf, r, vs, W, out, stride, walk, store)
        return
    # the previous tree's leaves, margins and decisions, not emitted yet
    p0 = p1 = p2 = p3 = e0 = e1 = e2 = e3 = 0
    q0 = q1 = q2 = q3 = 0.0
    for m in range(thr.shape[0]):
        l0, l1, l2, l3, r0, r1, r2, r3, d0, d1, d2, d3 = _traverse4(
            U, s0, thr, feat, m, depth, is_fern
        )
        _prefetch_leaf(W, m, l0)
        _prefetch_leaf(W, m, l1)
        _prefetch_leaf(W, m, l2)
        _prefetch_leaf(W, m, l3)
        if m > 0:
            _emit(s0, m - 1, p0, q0, e0, W, out, stride, walk, store)
            _emit(s0 + 1, m - 1, p1, q1, e1, W, out, stride, walk, store)
            _emit(s0 + 2, m - 1, p2, q2, e2, W, out, stride, walk, store)
            _emit(s0 + 3, m - 1, p3, q3, e3, W, out, stride, walk, store)
        p0, p1, p2, p3, q0, q1, q2, q3 = l0, l1, l2, l3, r0, r1, r2, r3
        e0, e1, e2, e3 = d0, d1, d2, d3
    m = thr.shape[0] - 1
    _emit(s0, m, p0, q0, e0, W, out, stride, walk, store)
    _emit(s0 + 1, m, p1, q1, e1, W, out, stride, walk, store)
    _emit(s0 + 2, m, p2, q2, e2, W, out, stride, walk, store)
    _emit(s0 + 3, m, p3, q3, e3, W, out, stride, walk, store)


@jit_parallel
def forward(U, thr, feat, W, depth, is_fern, stride, out, walk, store):
    """Forest output for every row of ``U`` into ``out`` (its first ``n`` rows, overwritten).

    ``walk`` = ``(leaf, rstar, vstar)``, each (>= n, M): if ``store``, the
    leaf, minimal margin and its decision of every (sample, tree) are written
    there for the backward pass.
    """
    n = U.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        _forward_block(b, n, U, thr, feat, W, depth, is_fern, stride, out, walk, store)


# ----------------------------------------------------------------- backward
@jit
def _tree_gradients(m, B, G, walk, feat, W, stride, pos_w, pos_t, grads, moments, n_warm):
    """Gradients of tree ``m`` over the batch into its slots; returns their counts.

    ``pos_w``/``pos_t`` (a chunk's rows of ``slots``) map a leaf/decision to
    its slot, -1 where untouched; :func:`_release_slots` resets them. The
    first ``n_warm`` (0, 1 or 2) moment arrays of ``W`` and ``thr`` in
    ``moments`` are prefetched at each touched leaf/decision, for the sparse
    step that follows.
    """
    W_1, W_2, t_1, t_2 = moments
    last = W.shape[2] - 1
    leaf, rstar, vstar = walk
    gW, gt, touched_w, touched_t, contrib, contrib_feat = grads
    C = W.shape[2]
    nw = 0
    nt = 0
    base = m * stride
    for s in range(B):
        lf = leaf[s, m]
        r = rstar[s, m]
        vs = vstar[s, m]
        j = pos_w[lf]
        if j < 0:
            j = nw
            pos_w[lf] = j
            touched_w[m, nw] = lf
            for k in range(C):
                gW[m, nw, k] = 0.0
            nw += 1
            if n_warm > 0:
                prefetch(W_1, (m, lf, 0))
                prefetch(W_1, (m, lf, last))
            if n_warm > 1:
                prefetch(W_2, (m, lf, 0))
                prefetch(W_2, (m, lf, last))
        a = abs(r)
        d = 0.0
        for k in range(C):
            gk = G[s, base + k]
            gW[m, j, k] += a * gk
            d += W[m, lf, k] * gk
        sg = 1.0 if r > 0.0 else (-1.0 if r < 0.0 else 0.0)
        jt = pos_t[vs]
        if jt < 0:
            jt = nt
            pos_t[vs] = jt
            touched_t[m, nt] = vs
            gt[m, nt] = 0.0
            nt += 1
            if n_warm > 0:
                prefetch(t_1, (m, vs))
            if n_warm > 1:
                prefetch(t_2, (m, vs))
        gt[m, jt] -= sg * d
        contrib[s, m] = sg * d
        contrib_feat[s, m] = feat[m, vs]
    touched_w[m, B] = nw
    touched_t[m, B] = nt
    return nw, nt


@jit
def _release_slots(m, pos_w, pos_t, grads, nw, nt):
    """Reset the slot maps of tree ``m``'s touched leaves and decisions to -1."""
    touched_w, touched_t = grads[2], grads[3]
    for j in range(nw):
        pos_w[touched_w[m, j]] = -1
    for j in range(nt):
        pos_t[touched_t[m, j]] = -1


@jit
def _dense_adam_tree(m, thr, W, moments, hp, pos_w, pos_t, grads):
    """Adam on every leaf weight and threshold of tree ``m`` (zero gradient if untouched)."""
    W_1, W_2, t_1, t_2 = moments
    gW, gt = grads[0], grads[1]
    for lf in range(W.shape[1]):
        j = pos_w[lf]
        hit = j >= 0
        for k in range(W.shape[2]):
            g = gW[m, j, k] if hit else 0.0
            W[m, lf, k], W_1[m, lf, k], W_2[m, lf, k] = adam_scalar_inv(
                W[m, lf, k], g, W_1[m, lf, k], W_2[m, lf, k], hp[4], hp[5], hp[1], hp[2], hp[3]
            )
    for v in range(thr.shape[1]):
        j = pos_t[v]
        g = gt[m, j] if j >= 0 else 0.0
        thr[m, v], t_1[m, v], t_2[m, v] = adam_scalar_inv(
            thr[m, v], g, t_1[m, v], t_2[m, v], hp[4], hp[5], hp[1], hp[2], hp[3]
        )


@jit
def _sparse_tree_step(m, thr, W, opt, moments, hp, grads, nw, nt):
    """Lazy Adam, AdaGrad or SGD on the touched leaves and thresholds of tree ``m``."""
    W_1, W_2, t_1, t_2 = moments
    gW, gt, touched_w, touched_t = grads[0], grads[1], grads[2], grads[3]
    lr = hp[0]
    eps = hp[3]
    for j in range(nw):
        lf = touched_w[m, j]
        for k in range(W.shape[2]):
            g = gW[m, j, k]
            if opt == OPT_LAZY_ADAM:
                W[m, lf, k], W_1[m, lf, k], W_2[m, lf, k] = adam_scalar_inv(
                    W[m, lf, k], g, W_1[m, lf, k], W_2[m, lf, k], hp[4], hp[5], hp[1], hp[2], eps
                )
            elif opt == OPT_ADAGRAD:
                W[m, lf, k], W_1[m, lf, k] = adagrad_scalar(W[m, lf, k], g, W_1[m, lf, k], lr, eps)
            else:
                W[m, lf, k] -= lr * g
    for j in range(nt):
        v = touched_t[m, j]
        g = gt[m, j]
        if opt == OPT_LAZY_ADAM:
            thr[m, v], t_1[m, v], t_2[m, v] = adam_scalar_inv(
                thr[m, v], g, t_1[m, v], t_2[m, v], hp[4], hp[5], hp[1], hp[2], eps
            )
        elif opt == OPT_ADAGRAD:
            thr[m, v], t_1[m, v] = adagrad_scalar(thr[m, v], g, t_1[m, v], lr, eps)
        else:
            thr[m, v] -= lr * g


@jit_parallel
def backward_update(G, walk, feat, thr, W, stride, slots, grads, update, optim):
    """Exact sparse gradients (eqs. 11-12) and, if ``update``, the optimiser step.

    ``G`` (B, n_out) is dLoss/d(out). For sample s and tree m with leaf l and
    minimal margin r* at decision v*: dL/dW[m, l] += |r*| G_m[s],
    dL/dt[m, v*] -= sgn(r*) (W[m, l] . G_m[s]) and the input feature
    ``feat[m, v*]`` of sample s receives ``+sgn(r*) (W[m, l] . G_m[s])``,
    written to ``contrib[s, m]`` / ``contrib_feat[s, m]`` (summed by
    :func:`input_gradient`). All inner products use the weights before the
    update. ``G_m[s]`` is ``G[s, m*stride : m*stride + C]``.

    Per tree, gradients of the touched leaves/decisions are accumulated in
    slots (``gW[m, j]``, ``gt[m, j]``; the touched ids are listed in
    ``touched_w``/``touched_t``, whose column ``B`` holds the count).
    ``slots = (pos_w, pos_t)``, int32 of shapes (n_chunks, L) and (n_chunks,
    NT), all -1 on entry and on return: the trees are split into
    ``n_chunks`` contiguous chunks, one per parallel iteration, and the
    chunk's row maps a leaf/decision of the current tree to its slot. The rows
    are a few kB, so these lookups stay in the core's L1 cache (per-tree maps
    the size of the model, as before, cost random main-memory accesses);
    results do not depend on ``n_chunks``.

    ``optim = (opt, moments, hp)``, ``hp`` = (lr, beta1, beta2, eps,
    step_size, inv_bc2): optimiser hyper-parameters with Adam's bias
    corrections for this step folded into the last two. ``opt``: dense Adam
    (every parameter moves every step, as in the paper), lazy Adam (only
    touched rows: their moments and values), AdaGrad (exactly sparse:
    untouched parameters have zero gradient and do not move), plain SGD.
    Without ``update``, ``optim`` only has to have the right types.
    """
    B = G.shape[0]
    opt, moments, hp = optim
    pos_w, pos_t = slots
    M = thr.shape[0]
    n_chunks = pos_w.shape[0]
    # moments the sparse steps read at random: Adam's two, AdaGrad's sum
    n_warm = 0
    if update and opt == OPT_LAZY_ADAM:
        n_warm = 2
    elif update and opt == OPT_ADAGRAD:
        n_warm = 1
    for c in prange(n_chunks):
        for m in range(c * M // n_chunks, (c + 1) * M // n_chunks):
            nw, nt = _tree_gradients(
                m, B, G, walk, feat, W, stride, pos_w[c], pos_t[c], grads, moments, n_warm
            )
            if update:
                if opt == OPT_ADAM:
                    _dense_adam_tree(m, thr, W, moments, hp, pos_w[c], pos_t[c], grads)
                else:
                    _sparse_tree_step(m, thr, W, opt, moments, hp, grads, nw, nt)
            _release_slots(m, pos_w[c], pos_t[c], grads, nw, nt)


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
def _dense_step(p, s1, s2, g, opt, hp):
    """Optimiser step on a small dense block (flat views)."""
    if opt == OPT_ADAM or opt == OPT_LAZY_ADAM:
        adam_update_inv(p, g, s1, s2, hp[4], hp[5], hp[1], hp[2], hp[3])
    elif opt == OPT_ADAGRAD:
        adagrad_update(p, g, s1, hp[0], hp[3])
    else:
        sgd_update(p, g, hp[0])


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


# --------------------------------------------------------------- monotonic
#: Sign rules of a constrained parameter (see :mod:`obliquetrees.hinge._monotonic`):
#: free, kept >= 0, kept <= 0, kept at 0.
RULE_FREE = 2
RULE_UP = 1
RULE_DOWN = -1
RULE_ZERO = 0


@jit
def _project_effective(v, rule):
    """Project ``v`` (1 or 2 entries) so its effective value obeys ``rule``, in place.

    The effective value is ``v[0]`` (one output), or ``v[1] - v[0]`` (two
    outputs: the logit difference of a binary classifier), whose Euclidean
    projection onto a sign constraint moves both entries to their mean.
    """
    if rule == RULE_FREE:
        return
    if v.shape[0] == 1:
        if rule == RULE_ZERO or rule * v[0] < 0.0:
            v[0] = 0.0
        return
    if rule == RULE_ZERO or rule * (v[1] - v[0]) < 0.0:
        mid = 0.5 * (v[0] + v[1])
        v[0] = mid
        v[1] = mid


@jit
def project_leaves(W, m, leaves, n, leaf_rule):
    """Project the leaf weights ``W[m, leaves[:n]]`` onto their rules ``leaf_rule[m]``."""
    for i in range(n):
        lf = leaves[i]
        _project_effective(W[m, lf], leaf_rule[m, lf])


@jit
def project_dense(W, Q, A, mono, linear_head, learn_A):
    """Project every leaf weight, the linear head and the linear layer (``mono`` as in
    :func:`train_epoch`)."""
    leaf_rule, a_rule = mono[1], mono[2]
    every = np.arange(W.shape[1])
    for m in range(W.shape[0]):
        project_leaves(W, m, every, every.shape[0], leaf_rule)
    _project_head_and_layer(Q, A, a_rule, linear_head, learn_A)


@jit
def _project_head_and_layer(Q, A, a_rule, linear_head, learn_A):
    """The linear head's effective weight of every tree ``>= 0``; ``A`` by ``a_rule``."""
    if linear_head:
        for m in range(Q.shape[1]):
            _project_effective(Q[:, m], RULE_UP)
    if learn_A:
        for h in range(A.shape[0]):
            for j in range(A.shape[1]):
                _project_effective(A[h, j : j + 1], a_rule[h, j])


@jit
def _project_step(W, Q, A, mono, grads, Bc, dense, linear_head, learn_A):
    """Projected step: the leaves a step moved (all under dense Adam), the head, the layer."""
    if dense:
        project_dense(W, Q, A, mono, linear_head, learn_A)
        return
    touched_w = grads[2]
    for m in range(W.shape[0]):
        project_leaves(W, m, touched_w[m], touched_w[m, Bc], mono[1])
    _project_head_and_layer(Q, A, mono[2], linear_head, learn_A)


# -------------------------------------------------------------------- epoch
@jit
def _head_and_loss(loss, i, wi, target, classification, linear_head, out, Q, q, Yf, F, G):
    """Head output ``F[i]`` and ``G[i] = dLoss/dF[i]`` of batch row ``i``.

    Returns ``loss`` plus the row's loss times its weight ``wi``; ``target``
    is the sample's class index (classification) or row of ``Yf``.
    """
    K = F.shape[1]
    if linear_head:
        for k in range(K):
            acc = q[k]
            for m in range(Q.shape[1]):
                acc += Q[k, m] * out[i, m]
            F[i, k] = acc
    else:
        for k in range(K):
            F[i, k] = out[i, k]
    if classification:
        mx = F[i, 0]
        for k in range(1, K):
            mx = max(mx, F[i, k])
        tot = 0.0
        for k in range(K):
            G[i, k] = np.exp(F[i, k] - mx)
            tot += G[i, k]
        loss += wi * (np.log(tot) + mx - F[i, target])
        for k in range(K):
            G[i, k] = wi * (G[i, k] / tot - (1.0 if k == target else 0.0))
    else:
        for k in range(K):
            dk = F[i, k] - Yf[target, k]
            loss += wi * dk * dk / K
            G[i, k] = wi * 2.0 * dk / K
    return loss


@jit
def _sparse_hidden(csr, order, s0, Bc, A, learn_A, Hc):
    """``Hc[:Bc] = Z_b A^T`` for batch rows ``order[s0:s0 + Bc]`` of a raw CSR ``X``.

    ``csr = (indptr, indices, values, inv_scale, shift)`` with ``z_j = x_j
    inv_scale_j - shift_j`` (``inv_scale = 1 / z_scale``, ``shift = x_mean /
    z_scale``, both 0 for ignored features): ``(Z A^T)_ih = sum over row i's
    stored entries of A_hj x_j inv_scale_j - (A shift)_h``, never forming the
    centred row. With the
    identity layer (``learn_A`` False) ``Hc`` is ``z`` itself (dense, ``H =
    p``: the model's own width).
    """
    indptr, indices, values, inv_scale, shift = csr
    Hn = A.shape[0]
    if learn_A:
        c = np.dot(A, shift)
    for i in range(Bc):
        r = order[s0 + i]
        if learn_A:
            for h in range(Hn):
                Hc[i, h] = -c[h]
            for k in range(indptr[r], indptr[r + 1]):
                j = indices[k]
                v = values[k] * inv_scale[j]
                for h in range(Hn):
                    Hc[i, h] += A[h, j] * v
        else:
            for h in range(Hn):
                Hc[i, h] = -shift[h]
            for k in range(indptr[r], indptr[r + 1]):
                j = indices[k]
                Hc[i, j] += values[k] * inv_scale[j]


@jit
def _sparse_weight_gradient(csr, order, s0, Bc, gU, gA):
    """``gA = gU[:Bc]^T Z_b`` for the batch rows of a raw CSR ``X`` (see :func:`_sparse_hidden`).

    The centring is a rank-one term ``-(sum_i gU_i) shift^T``; the rest reads
    each row's stored entries only.
    """
    indptr, indices, values, inv_scale, shift = csr
    Hn, p = gA.shape
    for h in range(Hn):
        col = 0.0
        for i in range(Bc):
            col += gU[i, h]
        for j in range(p):
            gA[h, j] = -col * shift[j]
    for i in range(Bc):
        r = order[s0 + i]
        for k in range(indptr[r], indptr[r + 1]):
            j = indices[k]
            v = values[k] * inv_scale[j]
            for h in range(Hn):
                gA[h, j] += gU[i, h] * v


@jit_parallel
def train_epoch(
    data,
    csr,
    batch_size,
    classification,
    linear_head,
    learn_A,
    net,
    depth,
    is_fern,
    counters,
    opt,
    hyper,
    state,
    scratch,
    batch_loss,
    mono,
):
    """One epoch of minibatch training over ``Z[order]`` (standardised inputs).

    ``data`` = ``(Z, Yi, Yf, w, order)``: ``Z`` the standardised dense
    input, or a (1, 1) placeholder when ``csr = (sparse, (indptr, indices,
    values, inv_scale, shift))`` has ``sparse`` True: the raw CSR rows are
    then read entry by entry (:func:`_sparse_hidden`,
    :func:`_sparse_weight_gradient`), never densified; ``Yi`` (n,) class indices
    (classification) / ``Yf`` (n, K) targets (regression); ``w`` per-sample
    loss weights (mean 1 over the training set). ``net`` = ``(A, bn_mean,
    bn_var, feat, thr, W, Q, q)``, with ``Q`` of shape (1, 1) for the summed
    head (the linear head has ``Q`` (K, M)). ``counters`` = [bn_count, step]
    (updated). ``hyper`` = ``(learning_rate, beta1, beta2, eps)``; ``state`` =
    ``(moments, (A_1, A_2), (Q_1, Q_2), (q_1, q_2))``. ``scratch`` =
    ``(Zb, U, out, F, G, Gt, walk, grads, gU, slots)``, sized for
    ``batch_size`` rows (``slots``: see :func:`backward_update`). Writes the
    mean loss of each batch to ``batch_loss``. ``mono = (constrained,
    leaf_rule, a_rule)``: with ``constrained``, every step ends with the
    projections of :mod:`obliquetrees.hinge._monotonic` (the leaf weights a
    step moved, the linear head, the linear layer); otherwise the rules are
    never read.

    Per batch: gather, ``H = Zb A^T`` (BLAS), ``U = (H - mean) / sd``,
    :func:`forward`, loss and ``G = dL/dF``, head gradients,
    :func:`backward_update` (per-tree gradients and step), input gradient,
    ``gA = (gU / sd)^T Zb`` (BLAS), dense steps of A and the head, the
    monotonic projections, statistics update.
    """
    Z, Yi, Yf, w, order = data
    sparse, rows = csr
    A, bn_mean, bn_var, feat, thr, W, Q, q = net
    lr, beta1, beta2, eps = hyper
    moments, A_m, Q_m, q_m = state
    Zb, U, out, F, G, Gt, walk, grads, gU, slots = scratch
    contrib, contrib_feat = grads[4], grads[5]
    n = order.shape[0]
    p = A.shape[1]
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
        if sparse:
            Zc = Zb[:0]  # unused: the sparse rows are read in place
            Hc = np.empty((Bc, Hn))
            _sparse_hidden(rows, order, s0, Bc, A, learn_A, Hc)
        else:
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
        forward(U[:Bc], thr, feat, W, depth, is_fern, stride, out, walk, True)
        loss = 0.0
        for i in range(Bc):
            s = order[s0 + i]
            target = Yi[s] if classification else s
            loss = _head_and_loss(
                loss, i, w[s] / Bc, target, classification, linear_head, out, Q, q, Yf, F, G
            )
        batch_loss[bi] = loss
        # optimiser constants of this step
        t = counters[1] + 1
        hp[0] = lr
        hp[1] = beta1
        hp[2] = beta2
        hp[3] = eps
        step_size, bc2 = adam_corrections(lr, t, beta1, beta2)
        hp[4] = step_size
        hp[5] = 1.0 / bc2
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
        optim = (opt, moments, hp)
        backward_update(Gtree, walk, feat, thr, W, stride, slots, grads, True, optim)
        if linear_head:
            gQ = np.dot(Gc.T, out[:Bc])
            gq = np.zeros(K)
            for i in range(Bc):
                for k in range(K):
                    gq[k] += Gc[i, k]
            _dense_step(
                Q.reshape(-1), Q_m[0].reshape(-1), Q_m[1].reshape(-1), gQ.reshape(-1), opt, hp
            )
            _dense_step(q, q_m[0], q_m[1], gq, opt, hp)
        if learn_A:
            for i in range(Bc):  # 5000 scattered adds: not worth a parallel region
                _input_gradient_row(i, contrib, contrib_feat, gU)
            for i in range(Bc):
                for h in range(Hn):
                    gU[i, h] /= sd[h]
            if sparse:
                gA = np.empty((Hn, p))
                _sparse_weight_gradient(rows, order, s0, Bc, gU, gA)
            else:
                gA = np.dot(gU[:Bc].T, Zc)
            _dense_step(
                A.reshape(-1), A_m[0].reshape(-1), A_m[1].reshape(-1), gA.reshape(-1), opt, hp
            )
        if mono[0]:
            _project_step(W, Q, A, mono, grads, Bc, opt == OPT_ADAM, linear_head, learn_A)
        counters[1] = t
        _bn_update(Hc, bn_mean, bn_var, counters, False)
