"""Numba kernels of CO2 Forest (Norouzi et al.): one node's stump, optimised
by the convex-concave procedure (CCCP).

:func:`cccp` optimises the stump of one node on a block of its rows (centred
on their weighted mean); the per-node kernel of growth that gathers the
block, finds the initial axis-aligned split, calls :func:`cccp` and
partitions the node's rows is :func:`obliquetrees.co2._node.split_node`.

Notation (paper, Sec. 4). A node's stump has a hyperplane ``(w, b)`` and two
leaf logit vectors ``theta0`` (left, ``z = w.x + b <= 0``) and ``theta1``
(right, ``z > 0``), with the softmax log loss
``l(theta, y) = logsumexp(theta) - theta[y]``. The surrogate (Eq. 10) of one
sample is ``max(-z + l(theta0, y), z + l(theta1, y)) - |z|``; it upper-bounds the
stump's loss (Eq. 2). CCCP fixes ``s = sgn(z_old)`` and minimises the convex
``max(-z + l0, z + l1) - s z`` (Eq. 11) by minibatch subgradient descent with
momentum, projecting ``(w, b)`` on the ball ``||(w, b)||^2 <= nu`` after each
step (Alg. 1).

The stump is optimised on standardised, node-centred inputs. The paper's split
sends ``w.x >= 0`` right; this package sends ``w.x + b > 0`` right, and the
stump is trained with that convention from the start (``s = +1`` iff
``z > 0``), so the two differ only on exact ties.

Randomness comes from :mod:`obliquetrees._core._random` with an explicit
state, so a node's result depends only on its data and its seed, never on the
thread that runs it.

Helpers called per sample with array arguments (the leaf losses) use the
``jit_inline`` preset: as ordinary calls each paid reference counting on its
array arguments, and inlining them made a letter tree about 1.2x faster (CPU
time, interleaved A/B, 6 trees each) with bit-identical trees (same
operations in the same order). The per-minibatch code (gradient,
momentum step, projection) is written out in :func:`descend`, which runs all
epochs of an outer iteration in one call: an inlined helper still
reference-counts each array argument once per call.

Importing this module imports numba; the estimator imports it lazily.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline
from obliquetrees._core._random import shuffle
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
    softmax_lse,  # noqa: F401  (re-exported: the sparse kernels and tests import it from here)
)
from obliquetrees.co2._monotone import project_signs

#: Learning-rate schedule (the paper: "when it oscillates for more than a
#: number of iterations we reduce the learning rate"). After every epoch the
#: running surrogate of that epoch is compared with the previous epoch's; once
#: it has gone up OSC_PATIENCE times the rate is multiplied by LR_DECAY.
OSC_PATIENCE = 2
LR_DECAY = 0.5


# ----------------------------------------------------------- small helpers
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


@jit_inline
def n_changed(signs, prev, m):
    """How many of the first ``m`` entries of ``signs`` differ from ``prev``."""
    n = 0
    for i in range(m):
        n += signs[i] != prev[i]
    return n


@jit_inline
def partition_settled(n_flipped, m, params):
    """Whether a node's CCCP stops because its partition has settled.

    True when the node has at least ``params.batch_size`` rows and at most
    ``params.tol * m`` of them changed side in the last outer iteration
    (none below ``1 / tol`` rows). See :func:`cccp`.
    """
    return m >= params.batch_size and n_flipped <= params.tol * m


# ------------------------------------------------------------ surrogate
@jit
def rows_dot(w, Xb, lo, hi, b, zs):
    """``zs[i] = b + w . Xb[i]`` for ``lo <= i < hi``, two rows at a time.

    Each row's sum has four partial sums (features ``j = 0, 1, 2, 3`` mod 4,
    no fastmath: a fixed order), added as ``b + ((s0 + s1) + (s2 + s3))``: the
    bits of the one-row loop this replaced. The two rows' sums are independent
    addition chains the CPU overlaps (one row's chain waits on the latency of
    each addition): about 0.9x the fit CPU of a CO2 forest with the 16-feature
    gradient passes of :func:`descend` (interleaved A/B, 4 trees, 100k x 40).
    A last odd row is computed twice, as both rows of its pair.
    """
    p = w.shape[0]
    i = lo
    while i < hi:
        k = i + 1 if i + 1 < hi else i
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        c3 = 0.0
        j = 0
        while j + 4 <= p:
            a0 += w[j] * Xb[i, j]
            a1 += w[j + 1] * Xb[i, j + 1]
            a2 += w[j + 2] * Xb[i, j + 2]
            a3 += w[j + 3] * Xb[i, j + 3]
            c0 += w[j] * Xb[k, j]
            c1 += w[j + 1] * Xb[k, j + 1]
            c2 += w[j + 2] * Xb[k, j + 2]
            c3 += w[j + 3] * Xb[k, j + 3]
            j += 4
        while j < p:
            a0 += w[j] * Xb[i, j]
            c0 += w[j] * Xb[k, j]
            j += 1
        zs[i] = b + ((a0 + a1) + (a2 + a3))
        zs[k] = b + ((c0 + c1) + (c2 + c3))
        i += 2


@jit
def surrogate(Xb, yb, wb, m, w, b, theta0, theta1, signs):
    """Weighted mean of the surrogate (Eq. 10) over the first ``m`` samples.

    Also writes ``signs[i] = +1`` if ``z_i > 0`` else ``-1`` (the CCCP
    linearisation point) and returns the weighted mean of the stump's
    empirical loss (Eq. 2) as the second value.
    """
    return surrogate_z(Xb, yb, wb, m, w, b, theta0, theta1, signs, np.empty(m))


@jit
def surrogate_z(Xb, yb, wb, m, w, b, theta0, theta1, signs, zs):
    """:func:`surrogate` that also writes each sample's ``z = w.x + b`` to ``zs``.

    :func:`cccp` hands them to the next minibatch gradient when it is taken
    at the same ``(w, b)`` over the same rows (a node of one minibatch), which
    then reads them instead of recomputing the same dot products.
    """
    rows_dot(w, Xb, 0, m, b, zs)
    lse0 = leaf_offset(yb, theta0)
    lse1 = leaf_offset(yb, theta1)
    acc = 0.0
    emp = 0.0
    tot = 0.0
    for i in range(m):
        z = zs[i]
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


@jit
def descend(
    Xc, yc, wc, m, signs, zs, cached, w, b, vb, theta0, theta1, vw, v0, v1,
    gw, g0, g1, prob0, prob1, cbuf, rbuf, border, params, state, eta, prev_run, n_up, cst=None,
):  # fmt: skip
    """The ``cccp_epochs`` epochs of one CCCP outer iteration (the descent on Eq. 11).

    Each epoch visits the minibatches ``[k * batch_size, (k + 1) * batch_size)``
    of the first ``m`` rows in an order drawn from ``state`` (``border``:
    scratch of one entry per minibatch; one minibatch draws nothing). Per
    minibatch: the subgradient of the CCCP objective (Eq. 11) at the signs
    ``signs`` averaged over its rows, a heavy-ball momentum step of ``w``,
    ``b``, ``theta0`` and ``theta1`` (velocities ``vw``, ``vb``, ``v0``, ``v1``)
    and the projection of ``(w, b)`` on the ``nu``-ball. With ``cached`` the
    first minibatch reads its rows' ``z = w.x + b`` from ``zs``
    (:func:`surrogate_z`'s, at this ``(w, b)``: the same bits). After each
    epoch the learning rate ``eta`` is halved once the running surrogate
    (``prev_run``) has gone up ``OSC_PATIENCE`` times (``n_up`` counts).
    With monotonic constraints ``cst`` (one per column; None: none) each
    step is projected on the compatible weights before the ball
    (:func:`~obliquetrees.co2._monotone.project_signs`).

    The gradient, the momentum step and the projection are written out here,
    not called: an inlined helper copies each array argument into a variable
    of its own, which numba reference-counts with atomic instructions, about
    26 arrays per minibatch. On return ``gw``, ``g0`` and ``g1`` hold the last
    minibatch's mean gradients (``prob0``/``prob1``, ``cbuf``/``rbuf`` of
    ``batch_size`` entries are scratch). The weight gradient is summed over
    samples in batch order for each feature, sixteen features at a time
    (register accumulators instead of a read-modify-write of ``gw`` per sample;
    four independent vector addition chains), then eight, then one. The rows'
    ``z`` come from :func:`rows_dot` (two rows at a time) into ``zs``.

    Returns
    -------
    b, vb, eta : float
        The bias, its velocity and the learning rate after the epochs.
    prev_run : float
        The last epoch's running surrogate (Eq. 10, weighted mean over the
        rows at the parameters each minibatch saw).
    n_up : int
        The oscillation count.
    """
    p = Xc.shape[1]
    n_classes = theta0.shape[0]
    momentum = params.momentum
    nu = params.nu
    n_batches = (m + params.batch_size - 1) // params.batch_size
    for _ in range(params.cccp_epochs):
        for k in range(n_batches):
            border[k] = k
        if n_batches > 1:
            shuffle(border, n_batches, state)
        run_all = 0.0
        tot = 0.0
        for kb in range(n_batches):
            lo = border[kb] * params.batch_size
            hi = min(lo + params.batch_size, m)
            # -- the minibatch's subgradient of Eq. 11
            lse0 = leaf_prepare(yc, theta0, prob0)
            lse1 = leaf_prepare(yc, theta1, prob1)
            for k in range(n_classes):
                g0[k] = 0.0
                g1[k] = 0.0
            gb = 0.0
            n0 = 0.0
            n1 = 0.0
            wsum = 0.0
            run = 0.0
            na = 0
            if not cached:  # (zs is rewritten by surrogate_z before it is read again)
                rows_dot(w, Xc, lo, hi, b, zs)
            for i in range(lo, hi):
                wt = wc[i]
                z = zs[i]
                a0 = side_arg(-z, yc, i, lse0, theta0)
                a1 = side_arg(z, yc, i, lse1, theta1)
                s = signs[i]
                # branch-free: the active leaf is data dependent and unpredictable
                left = a0 >= a1
                w0 = wt if left else 0.0
                w1 = wt - w0
                coef = -(1.0 + s) if left else 1.0 - s
                top = a0 if left else a1
                n0 += w0
                n1 += w1
                add_leaf_gradient(g0, yc, i, w0, theta0)
                add_leaf_gradient(g1, yc, i, w1, theta1)
                run += wt * (top - abs(z))
                wsum += wt
                cw = wt * coef
                cbuf[na] = cw
                rbuf[na] = i
                na += coef != 0.0
                gb += cw
            cached = False  # (w, b) move below
            j = 0
            while j + 16 <= p:  # four vector accumulators: independent addition chains
                s0 = 0.0
                s1 = 0.0
                s2 = 0.0
                s3 = 0.0
                s4 = 0.0
                s5 = 0.0
                s6 = 0.0
                s7 = 0.0
                s8 = 0.0
                s9 = 0.0
                s10 = 0.0
                s11 = 0.0
                s12 = 0.0
                s13 = 0.0
                s14 = 0.0
                s15 = 0.0
                for u in range(na):
                    r = rbuf[u]
                    c = cbuf[u]
                    s0 += c * Xc[r, j]
                    s1 += c * Xc[r, j + 1]
                    s2 += c * Xc[r, j + 2]
                    s3 += c * Xc[r, j + 3]
                    s4 += c * Xc[r, j + 4]
                    s5 += c * Xc[r, j + 5]
                    s6 += c * Xc[r, j + 6]
                    s7 += c * Xc[r, j + 7]
                    s8 += c * Xc[r, j + 8]
                    s9 += c * Xc[r, j + 9]
                    s10 += c * Xc[r, j + 10]
                    s11 += c * Xc[r, j + 11]
                    s12 += c * Xc[r, j + 12]
                    s13 += c * Xc[r, j + 13]
                    s14 += c * Xc[r, j + 14]
                    s15 += c * Xc[r, j + 15]
                gw[j] = s0
                gw[j + 1] = s1
                gw[j + 2] = s2
                gw[j + 3] = s3
                gw[j + 4] = s4
                gw[j + 5] = s5
                gw[j + 6] = s6
                gw[j + 7] = s7
                gw[j + 8] = s8
                gw[j + 9] = s9
                gw[j + 10] = s10
                gw[j + 11] = s11
                gw[j + 12] = s12
                gw[j + 13] = s13
                gw[j + 14] = s14
                gw[j + 15] = s15
                j += 16
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
                    s0 += c * Xc[r, j]
                    s1 += c * Xc[r, j + 1]
                    s2 += c * Xc[r, j + 2]
                    s3 += c * Xc[r, j + 3]
                    s4 += c * Xc[r, j + 4]
                    s5 += c * Xc[r, j + 5]
                    s6 += c * Xc[r, j + 6]
                    s7 += c * Xc[r, j + 7]
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
                    s0 += cbuf[u] * Xc[rbuf[u], j]
                gw[j] = s0
                j += 1
            run_all += run
            tot += wsum
            if wsum <= 0.0:
                continue
            inv = 1.0 / wsum
            # classes: the softmax part of the log-loss gradient, n_leaf * softmax(theta) - counts
            finish_leaf_gradient(yc, g0, n0, prob0, inv)
            finish_leaf_gradient(yc, g1, n1, prob1, inv)
            for j in range(p):
                gw[j] *= inv
            gb *= inv
            # -- momentum step (momentum_step / momentum_velocity, written out)
            for j in range(p):
                vw[j] = momentum * vw[j] - eta * gw[j]
                w[j] += vw[j]
            vb = momentum * vb - eta * gb
            b += vb
            for k in range(n_classes):
                v0[k] = momentum * v0[k] - eta * g0[k]
                theta0[k] += v0[k]
            for k in range(n_classes):
                v1[k] = momentum * v1[k] - eta * g1[k]
                theta1[k] += v1[k]
            project_signs(w, vw, cst)  # (nothing without constraints)
            # -- projection on the nu-ball (project_ball, written out)
            sq = b * b
            for j in range(p):
                sq += w[j] * w[j]
            if sq > nu:
                rr = np.sqrt(nu / sq)
                for j in range(p):
                    w[j] *= rr
                b *= rr
        if tot > 0.0:
            run_all /= tot
        if run_all > prev_run:
            n_up += 1
            if n_up >= OSC_PATIENCE:
                eta *= LR_DECAY
                n_up = 0
        prev_run = run_all
    return b, vb, eta, prev_run, n_up


@jit
def permute_rows(perm, m, X, y, wt, signs, seen, xrow, ytmp):
    """Reorder the first ``m`` rows in place: row ``t`` becomes old row ``perm[t]``.

    Follows each cycle of ``perm`` with one saved row (``xrow``, ``ytmp``), so a
    node's rows are reshuffled without a second ``(m, p)`` block; ``seen`` is
    scratch of ``m`` booleans. Rows are copied entry by entry: a row slice
    (``X[j] = X[k]``) made an array view per row, whose reference count
    numba updates with atomic instructions (two per view).
    """
    p = X.shape[1]
    for t in range(m):
        seen[t] = False
    for s in range(m):
        if seen[s]:
            continue
        seen[s] = True
        k = perm[s]
        if k == s:
            continue
        for c in range(p):
            xrow[c] = X[s, c]
        copy_target(ytmp, 0, y, s)
        w0 = wt[s]
        s0 = signs[s]
        j = s
        while k != s:
            for c in range(p):
                X[j, c] = X[k, c]
            copy_target(y, j, y, k)
            wt[j] = wt[k]
            signs[j] = signs[k]
            j = k
            seen[j] = True
            k = perm[j]
        for c in range(p):
            X[j, c] = xrow[c]
        copy_target(y, j, ytmp, 0)
        wt[j] = w0
        signs[j] = s0


# ------------------------------------------------------------------ CCCP
@jit
def cccp(Xb, yb, wb, m, w, b, theta0, theta1, params, state, history, cst=None):
    """Minimise the surrogate of one stump by CCCP (Alg. 1 with minibatches).

    :func:`cccp_leaves` on the leaf parameters of the classes present among
    the ``m`` rows (:func:`~obliquetrees._training.targets.present_leaves`;
    ours, not the paper's). A class no row of the node holds enters the
    surrogate only through the log-sum-exp of each leaf, so its logit's
    gradient is always positive and the surrogate is least at ``-inf``:
    the descent over all classes spends its softmax steps lowering logits
    towards a limit that is known. The CCCP runs on the present classes'
    logits alone (the absent ones at ``-inf``, their share taken by the
    present classes), the problem's infimum over the absent logits, and
    returns them at ``-inf``. Deep in a tree of many classes (letter: 26
    classes, a node of 5 rows holds 2 or 3) the absent classes were about
    a third of an outer iteration's time (4 rows of 16 features: 2.1 us
    with 26 classes, 1.5 us with 2; AMD EPYC). ``yb`` keeps its labels
    (relabelled for the descent and back); see :func:`cccp_leaves` for the
    rest.
    """
    present, t0, t1 = present_leaves(yb, m, theta0, theta1)
    b, n_iter, n_hist = cccp_leaves(Xb, yb, wb, m, w, b, t0, t1, params, state, history, cst)
    restore_leaves(yb, m, present, t0, t1, theta0, theta1)
    return b, n_iter, n_hist


@jit
def cccp_leaves(Xb, yb, wb, m, w, b, theta0, theta1, params, state, history, cst=None):
    """The CCCP of :func:`cccp` on the leaf parameters ``theta0, theta1`` as given.

    Parameters ``w``, ``theta0`` and ``theta1`` are updated in place and the
    new bias is returned. Each outer iteration fixes the signs of
    ``z = w.x + b`` at the current iterate and runs ``cccp_epochs`` epochs of
    minibatch subgradient descent with momentum on Eq. 11, projecting
    ``(w, b)`` on the ``nu``-ball after every step (``params`` is the fit's
    :class:`~obliquetrees.co2.training.CO2KernelParams`; this kernel reads
    ``nu``, ``learning_rate``, ``batch_size``, ``momentum``, ``cccp_epochs``,
    ``max_cccp_iter`` and ``tol``). The learning rate is
    halved when the running surrogate of an epoch has gone up
    ``OSC_PATIENCE`` times. After each outer iteration the exact surrogate is
    evaluated: if it improved by less than ``tol`` (relative) the loop stops;
    if it did not improve at all, the previous iterate is restored, so the
    returned parameters are the best seen and the recorded sequence is
    non-increasing.

    ``cst`` (int8, one per column of ``Xb``; None: none) are monotonic
    constraints: each step is projected on the weights with
    ``cst[j] * w[j] >= 0`` (:func:`descend`), so every iterate, and the
    split returned, keeps them if the start ``w`` does (a projected
    subgradient method on the convex subproblem, Eq. 11, over the
    intersection of the cone and the ``nu``-ball).

    The loop also stops, keeping the improved iterate, when the partition
    has settled (:func:`partition_settled`, ours): the node has at least
    ``batch_size`` rows and at most ``tol * m`` of them changed side in the
    iteration (none below ``1 / tol`` rows). A heuristic, not CCCP's own
    convergence: an outer iteration runs ``cccp_epochs`` epochs of descent
    on the convex problem (Eq. 11) linearised at the current signs ``s_i``;
    when no sign changed, the next iteration continues on the same convex
    problem, and what it mostly does is turn the hyperplane within a gap no
    training row crosses: the node's partition, and so the subtree grown
    below it, rarely changes, while the split's orientation is left less
    converged (a noise feature keeps a slightly larger weight on separable
    data: ``tests/test_inspection.py``). On smaller
    nodes the relative surrogate test alone decides: there the remaining
    iterations widen the margin of a few rows' split, which letter's test
    error needed (the rule down to 50 rows: 2.84 % against 2.52 %, 30 trees,
    five seeds); see the estimator's Notes.

    The first ``m`` rows of ``Xb``, ``yb`` and ``wb`` are reordered in place
    (the same permutation for all three; no copy of the node's block is made).

    ``history[0]`` receives the initial surrogate and ``history[t]`` the
    surrogate after accepted outer iteration ``t`` (``history`` needs
    ``max_cccp_iter + 1`` entries).

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
    # the rows are physically reordered (in place) at each outer iteration so that
    # minibatches read contiguous rows (random row access dominated big nodes)
    Xc = Xb[:m]
    yc = yb[:m]
    wc = wb[:m]
    # the node's scratch in a few blocks (fewer allocations per node, each one a
    # reference-counted allocation); rows of a C-contiguous block are 1-D C arrays
    per_row = np.empty((3, m))
    signs, prev_signs = per_row[0], per_row[1]
    zs = per_row[2]  # z of every row at the last surrogate evaluation
    per_feature = np.empty((4, p))
    xrow, gw, vw, best_w = per_feature[0], per_feature[1], per_feature[2], per_feature[3]
    # gradients, probabilities, velocities and best iterate of the two sides' leaves
    per_class = np.empty((8, n_classes))
    g0, g1, prob0, prob1 = per_class[0], per_class[1], per_class[2], per_class[3]
    v0, v1, best_t0, best_t1 = per_class[4], per_class[5], per_class[6], per_class[7]
    ytmp = empty_targets(yb, 1)
    seen = np.empty(m, dtype=np.bool_)
    perm = np.arange(m)
    n_batches = (m + params.batch_size - 1) // params.batch_size
    border = np.empty(n_batches, dtype=np.int64)
    cbuf = np.empty(params.batch_size)
    rbuf = np.empty(params.batch_size, dtype=np.int64)
    vw[:] = 0.0
    v0[:] = 0.0
    v1[:] = 0.0
    vb = 0.0
    best_w[:] = w
    best_t0[:] = theta0
    best_t1[:] = theta1
    b = project_ball(w, b, params.nu)
    best_b = b
    best, _ = surrogate_z(Xc, yc, wc, m, w, b, theta0, theta1, signs, zs)
    history[0] = best
    n_hist = 1
    eta = params.learning_rate
    prev_run = np.inf
    n_up = 0
    n_iter = 0
    for _ in range(params.max_cccp_iter):
        n_iter += 1
        # one minibatch (no reordering): its first gradient is taken at the (w, b) and on the
        # rows of the surrogate just evaluated, whose z it reuses (bit-identical)
        cached = n_batches == 1
        if n_batches > 1:
            for t in range(m):
                perm[t] = t
            shuffle(perm, m, state)
            permute_rows(perm, m, Xc, yc, wc, signs, seen, xrow, ytmp)
        b, vb, eta, prev_run, n_up = descend(
            Xc, yc, wc, m, signs, zs, cached, w, b, vb, theta0, theta1, vw, v0, v1,
            gw, g0, g1, prob0, prob1, cbuf, rbuf, border, params, state, eta, prev_run, n_up,
            cst,
        )  # fmt: skip
        prev_signs[:] = signs  # the sides at the start of this iteration (rows as permuted)
        current, _ = surrogate_z(Xc, yc, wc, m, w, b, theta0, theta1, signs, zs)
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
