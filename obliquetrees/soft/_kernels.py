"""numba kernels of the soft decision tree (Irsoy, Yildiz & Alpaydin, 2012).

Conventions used by every kernel of this module and of
:mod:`~obliquetrees.soft._finetune` (the *training* convention):

- the tree is held densely while it grows: ``children_left``/``children_right``
  (``-1`` at leaves), ``W`` (n_nodes, n_features), ``b`` (n_nodes,), leaf
  values ``Z`` (n_nodes, n_outputs); a child always has a larger id than its
  parent, so increasing node id is a topological order;
- the gate of internal node ``m`` is the paper's ``g_m(x) = sigmoid(W[m].x +
  b[m])``, the probability of the **left** child (eq. 3). The stored container
  uses the opposite orientation (right iff ``w.x + b > 0``): the grower negates
  ``W`` and ``b`` when it stores the tree, and the soft evaluation of stored
  trees (:mod:`obliquetrees._core.soft`) uses ``P(right) = sigmoid(w.x + b)``;
- path probabilities are accumulated as log-probabilities with a stable
  log-sigmoid, so a product of many saturated gates is a very negative number
  rather than 0 * inf or NaN; it is exponentiated only when a leaf's
  contribution is added (where underflow to 0 is the correct limit);
- losses (``loss`` codes): 0 = squared error on the raw output (regression,
  the paper's ``delta = F - r``), 1 = binary cross-entropy on ``sigmoid(F)``
  (the paper's two-class classifier), 2 = cross-entropy on ``softmax(F)``
  (our multi-class extension, leaves hold K-vectors of logits). For all three
  the error signal is ``dE/dF = y_hat - r``.

Randomness comes from explicit integer seeds (:mod:`obliquetrees._core._random`),
never from a global RNG. Parallelism: the SGD restarts of a split run in
parallel (independent, each with its own seed; the winner is chosen
sequentially); the other training kernels are serial (one call per split
attempt, too small to gain from threads). Results do not depend on the number
of threads.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline, jit_parallel, prange
from obliquetrees._core._math import log_sigmoid, log_sigmoid_pair, logsumexp, sigmoid
from obliquetrees._core._random import make_state, shuffle
from obliquetrees._training._optim import momentum_step, momentum_velocity
from obliquetrees._training._rows import (
    add_row,
    finish_rows,
    gate_logit,
    n_cols,
    n_rows,
    row_shift,
    shifts_of,
)
from obliquetrees._training.monotonic import project_pair, project_weight_row

#: A restart stops once the decayed step size falls below this fraction of its
#: initial value, within an epoch if need be (with the per-sample decay 0.9999
#: this happens after ~138k samples, so only on large training sets; the steps
#: left would sum to at most 1% of one initial step).
ETA_STOP = 1e-6
#: Parameters whose absolute value reaches this bound count as diverged.
DIVERGED = 1e8

LOSS_SQUARED = 0
LOSS_BINARY = 1
LOSS_SOFTMAX = 2


# ---------------------------------------------------------------- per sample
@jit_inline
def output_error(F, R, i, loss, err):
    """err = dE/dF = y_hat - r for sample i (target row R[i]); returns its loss."""
    K = F.shape[0]
    if loss == LOSS_SQUARED:
        total = 0.0
        for k in range(K):
            err[k] = F[k] - R[i, k]
            total += err[k] * err[k]
        return total
    if loss == LOSS_BINARY:
        err[0] = sigmoid(F[0]) - R[i, 0]
        # -[r log y + (1 - r) log(1 - y)] with log y = log_sigmoid(F)
        return -(R[i, 0] * log_sigmoid(F[0]) + (1.0 - R[i, 0]) * log_sigmoid(-F[0]))
    lse = logsumexp(F)
    total = 0.0
    for k in range(K):
        err[k] = np.exp(F[k] - lse) - R[i, k]
        total -= R[i, k] * (F[k] - lse)
    return total


@jit_inline
def _sample_error(F, R, i, loss, metric, err):
    """Validation error of sample i: its loss (metric 0) or 0/1 error (metric 1).

    Regression always uses the loss; ``err`` is scratch for :func:`output_error`.
    """
    if loss == LOSS_SQUARED or metric == 0:
        return output_error(F, R, i, loss, err)
    # misclassification (ties: class 0 / the first maximum)
    if loss == LOSS_BINARY:
        pred = 1.0 if F[0] > 0.0 else 0.0
        return 0.0 if pred == R[i, 0] else 1.0
    best = 0
    for k in range(1, F.shape[0]):
        if F[k] > F[best]:
            best = k
    return 0.0 if R[i, best] > 0.5 else 1.0


@jit_inline
def bounded(values):
    """Whether every ``|value| < DIVERGED`` (False on NaN): the divergence test."""
    return np.all(np.abs(values) < DIVERGED)


# ------------------------------------------------------------ forward (dense)
@jit_inline
def gate_input(X, i, W, b, wsh, j):
    """``W[j].z + b[j]`` for sample i: the logit of node j's gate P(left).

    ``wsh`` = :func:`~obliquetrees._training._rows.shifts_of` ``(X, W)``
    (zeros, unread, for dense ``X``).
    """
    return gate_logit(X, i, W[j], b[j], wsh[j])


@jit_inline
def _path_log_probability(X, i, children_left, children_right, W, b, wsh, n_nodes, logp):
    """``logp[j]``: log of sample i's path probability to every node j."""
    logp[0] = 0.0
    for j in range(n_nodes):
        left = children_left[j]
        if left >= 0:
            a = gate_input(X, i, W, b, wsh, j)
            left_term, right_term = log_sigmoid_pair(a)  # the bits of log_sigmoid(+-a)
            logp[left] = logp[j] + left_term
            logp[children_right[j]] = logp[j] + right_term


@jit_inline
def _forward_one(X, i, children_left, children_right, W, b, wsh, Z, n_nodes, logp, F):
    """Soft forward pass of sample i: fills logp[:n_nodes] and F."""
    _path_log_probability(X, i, children_left, children_right, W, b, wsh, n_nodes, logp)
    for k in range(F.shape[0]):
        F[k] = 0.0
    for j in range(n_nodes):
        if children_left[j] < 0:
            p = np.exp(logp[j])
            if p > 0.0:
                for k in range(F.shape[0]):
                    F[k] += p * Z[j, k]


@jit
def forward_context(X, children_left, children_right, W, b, Z, n_nodes, m):
    """Whole-tree soft output and the context of node ``m``.

    For every sample returns the tree output ``F`` (n_samples, n_outputs),
    the path probability ``P`` of node ``m`` (product of the gates from the
    root to ``m``; all ones if ``m < 0``) and ``A = F - P * Z[m]``, the output
    of every leaf other than ``m`` (zeros if ``m < 0``). Replacing leaf ``m``
    by a subtree with output ``S(x)`` changes the tree output to
    ``A + P * S(x)``: this is what lets a split be trained "while the whole
    tree is evaluated" in O(d) per sample. Serial: it runs once per split
    attempt inside the growth loop, where thread start-up costs more than it
    saves.
    """
    n = n_rows(X)
    K = Z.shape[1]
    F = np.empty((n, K))
    P = np.ones(n)
    A = np.zeros((n, K))
    logp = np.empty(max(n_nodes, 1))
    f = np.empty(K)
    wsh = shifts_of(X, W, n_nodes)
    for i in range(n):
        _forward_one(X, i, children_left, children_right, W, b, wsh, Z, n_nodes, logp, f)
        pm = np.exp(logp[m]) if m >= 0 else 1.0
        P[i] = pm
        for k in range(K):
            F[i, k] = f[k]
            if m >= 0:
                A[i, k] = f[k] - pm * Z[m, k]
    return F, P, A


@jit
def path_probability(X, children_left, children_right, W, b, n_nodes, m):
    """Path probability ``P`` of node ``m`` for every sample, from the gates on its path only.

    The same log-probability sum as :func:`forward_context` (the same terms,
    added in the same order from the root down), so ``P`` is bit-identical to
    its ``P``, at O(depth of m) gates per sample instead of every gate of the
    tree.
    """
    n = n_rows(X)
    P = np.ones(n)
    if m <= 0:
        return P
    parent = np.full(n_nodes, -1, dtype=np.int64)
    for j in range(n_nodes):
        if children_left[j] >= 0:
            parent[children_left[j]] = j
            parent[children_right[j]] = j
    length = 0
    j = m
    while j > 0:
        length += 1
        j = parent[j]
    path = np.empty(length, dtype=np.int64)  # gate nodes, root first
    goes_left = np.empty(length, dtype=np.bool_)
    j = m
    for q in range(length - 1, -1, -1):
        path[q] = parent[j]
        goes_left[q] = children_left[parent[j]] == j
        j = parent[j]
    wsh = shifts_of(X, W, n_nodes)
    for i in range(n):
        logp = 0.0
        for q in range(length):
            a = gate_input(X, i, W, b, wsh, path[q])
            left_term, right_term = log_sigmoid_pair(a)
            logp = logp + (left_term if goes_left[q] else right_term)
        P[i] = np.exp(logp)
    return P


@jit
def mean_error(F, R, sw, loss, metric):
    """Weighted mean error of given outputs F (see _sample_error)."""
    n = F.shape[0]
    err = np.empty(F.shape[1])
    total = 0.0
    wsum = 0.0
    for i in range(n):
        total += sw[i] * _sample_error(F[i], R, i, loss, metric, err)
        wsum += sw[i]
    return total / wsum if wsum > 0.0 else 0.0


@jit
def tree_error(
    X, R, sw, children_left, children_right, W, b, Z, n_nodes, loss, metric, offset=None
):
    """Weighted mean error of the whole soft tree (see _sample_error).

    ``offset`` (n_samples, n_outputs), if given, is added to the tree's output
    first (a tree fitted beside another: ``soft.training.grow_soft_tree``).
    """
    F, _, _ = forward_context(X, children_left, children_right, W, b, Z, n_nodes, -1)
    if offset is not None:
        F += offset
    return mean_error(F, R, sw, loss, metric)


@jit
def node_membership(X, sw, children_left, children_right, W, b, n_nodes):
    """Sum over samples of sw_i x path probability of every node."""
    n = n_rows(X)
    out = np.zeros(max(n_nodes, 1))
    logp = np.empty(max(n_nodes, 1))
    wsh = shifts_of(X, W, n_nodes)
    for i in range(n):
        _path_log_probability(X, i, children_left, children_right, W, b, wsh, n_nodes, logp)
        for j in range(n_nodes):
            out[j] += sw[i] * np.exp(logp[j])
    return out[:n_nodes]


# --------------------------------------------------- training one new split
@jit_inline
def _split_output(X, i, w, b0, ws, zL, zR, out):
    """Output of the new subtree for sample i; returns the gate g = P(left).

    ``ws = row_shift(X, w)`` (sparse ``X``; 0 for dense).
    """
    g = sigmoid(gate_logit(X, i, w, b0, ws))
    for k in range(out.shape[0]):
        out[k] = g * zL[k] + (1.0 - g) * zR[k]
    return g


@jit_inline
def _split_tree_output(X, P, A, i, w, b0, ws, zL, zR, s, F):
    """Whole-tree output ``F = A[i] + P[i] * S(x_i)`` with the new split; returns its gate."""
    g = _split_output(X, i, w, b0, ws, zL, zR, s)
    for k in range(F.shape[0]):
        F[k] = A[i, k] + P[i] * s[k]
    return g


@jit_inline
def _split_scratch(d, K):
    """Gradients and per-sample scratch of :func:`_split_grad`."""
    return np.empty(d), np.empty(K), np.empty(K), np.empty(K), np.empty(K), np.empty(K)


@jit_inline
def _split_grad(X, R, P, A, sw, order, start, stop, w, b0, ws, zL, zR, loss, scratch):
    """Gradient w.r.t. the new split of the samples ``order[start:stop]``.

    ``scratch = (gw, gL, gR, s, F, err)`` from :func:`_split_scratch`: the
    gradients w.r.t. w, zL and zR are written to its first three arrays.
    Returns (the samples' summed weighted loss, the gradient w.r.t. b0).
    """
    gw, gL, gR, s, F, err = scratch
    gw[:] = 0.0
    gL[:] = 0.0
    gR[:] = 0.0
    total = 0.0
    gb = 0.0
    for q in range(start, stop):
        i = order[q]
        g = _split_tree_output(X, P, A, i, w, b0, ws, zL, zR, s, F)
        e = output_error(F, R, i, loss, err)
        total += sw[i] * (0.5 * e if loss == LOSS_SQUARED else e)
        # back-propagated error delta = (y_hat - r) * prod of gates
        beta = 0.0
        for k in range(F.shape[0]):
            delta = sw[i] * err[k] * P[i]
            beta += delta * (zL[k] - zR[k])
            gL[k] += delta * g
            gR[k] += delta * (1.0 - g)
        ga = beta * g * (1.0 - g)
        gb += ga
        add_row(X, i, ga, gw)
    finish_rows(X, gb, gw)  # the centring's share: sum of ga = gb
    return total, gb


@jit
def split_loss_grad(X, R, P, A, sw, w, b0, zL, zR, loss):
    """Loss and gradient of the whole tree w.r.t. the new split's parameters.

    The tree output is ``A + P * (g zL + (1 - g) zR)`` with ``g =
    sigmoid(w.x + b0)``; the loss is ``sum_i sw_i E_i`` with ``E`` the
    paper's error (squared error counted as ``0.5 (F - r)^2`` so that its
    gradient is the paper's ``delta = F - r``). Returns (loss, grad_w,
    grad_b, grad_zL, grad_zR). This is the (summed) quantity whose
    per-sample terms the SGD of :func:`train_split` follows; it is exposed for
    the finite-difference tests.
    """
    n = n_rows(X)
    scratch = _split_scratch(n_cols(X), A.shape[1])
    order = np.arange(n)
    ws = row_shift(X, w)
    total, gb = _split_grad(X, R, P, A, sw, order, 0, n, w, b0, ws, zL, zR, loss, scratch)
    return total, scratch[0], gb, scratch[1], scratch[2]


@jit
def split_error(X, R, P, A, sw, w, b0, zL, zR, loss, metric):
    """Weighted mean error of the tree with the new split (see _sample_error)."""
    F = np.empty(A.shape)
    s = np.empty(A.shape[1])
    ws = row_shift(X, w)
    for i in range(n_rows(X)):
        _split_tree_output(X, P, A, i, w, b0, ws, zL, zR, s, F[i])
    return mean_error(F, R, sw, loss, metric)


@jit
def apply_split(X, P, A, w, b0, zL, zR, F):
    """``F = A + P * S(x)``: the tree output once the new split (w, b0, zL, zR) replaces its leaf.

    The output the split was trained and scored on (:func:`split_error`);
    growth keeps the whole tree's output up to date with it instead of
    evaluating every gate again for the next node (in place).
    """
    s = np.empty(A.shape[1])
    ws = row_shift(X, w)
    for i in range(n_rows(X)):
        _split_tree_output(X, P, A, i, w, b0, ws, zL, zR, s, F[i])


@jit
def sgd_split(
    X,
    R,
    P,
    A,
    sw,
    w,
    b0,
    zL,
    zR,
    loss,
    lr,
    max_epochs,
    batch_size,
    momentum,
    decay,
    state,
    cst=None,
):
    """Gradient descent on the new split's parameters (in place).

    Online (``batch_size == 1``, the paper's Fig. 2, lines 8-22) or minibatch
    SGD with momentum; the step size is multiplied by ``decay`` after every
    sample; samples are shuffled every epoch with ``state``. Only ``w``,
    ``b0``, ``zL``, ``zR`` move; the rest of the tree enters through ``P`` and
    ``A``. Stops as soon as the step size falls below ``ETA_STOP * lr``, even
    within an epoch: on a large training set one restart then takes at most
    ``log(ETA_STOP) / log(decay)`` samples' steps, whatever the number of
    samples (the authors' code finishes the epoch; the steps it adds sum to
    less than ``ETA_STOP / (1 - decay)``, 1 % of one initial step). Returns
    (b0, ok): ``ok`` is False if the parameters diverged (they are then left
    as they were when divergence was detected).

    ``cst = (sign, ordered, lo, hi)``: monotonic constraints (None: none),
    enforced by projection after every step (projected SGD): ``w``
    by :func:`~obliquetrees._training.monotonic.project_weight_row` with the
    required signs of the gate P(left) (minus the stored ones), the leaves by
    :func:`~obliquetrees._training.monotonic.project_pair` into the interval
    ``[lo, hi]`` the rest of the tree leaves them (one output).
    """
    n, d = n_rows(X), n_cols(X)
    K = A.shape[1]
    order = np.arange(n)
    vw = np.zeros(d)
    vb = 0.0
    vL = np.zeros(K)
    vR = np.zeros(K)
    scratch = _split_scratch(d, K)
    gw, gL, gR = scratch[0], scratch[1], scratch[2]
    eta = lr
    ws = row_shift(X, w)
    for _epoch in range(max_epochs):
        shuffle(order, n, state)
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            _, gb = _split_grad(
                X, R, P, A, sw, order, start, stop, w, b0, ws, zL, zR, loss, scratch
            )
            scale = eta / (stop - start)
            momentum_step(w, vw, gw, momentum, scale)
            if cst is not None:
                project_weight_row(w, cst[0], cst[1])
            ws = row_shift(X, w)  # sparse: O(d), as the step itself
            vb = momentum_velocity(vb, gb, momentum, scale)
            b0 += vb
            momentum_step(zL, vL, gL, momentum, scale)
            momentum_step(zR, vR, gR, momentum, scale)
            if cst is not None:
                zL[0], zR[0] = project_pair(zL[0], zR[0], cst[1], cst[2], cst[3])
            for _ in range(start, stop):
                eta *= decay
            if eta < lr * ETA_STOP:
                break  # the remaining steps sum to < 1e-6 / (1 - decay) x lr: negligible
        if not (abs(b0) < DIVERGED and bounded(w) and bounded(zL) and bounded(zR)):
            return b0, False
        if eta < lr * ETA_STOP:
            break
    return b0, True


@jit_parallel
def train_split(
    X,
    R,
    P,
    A,
    sw,
    Xv,
    Rv,
    Pv,
    Av,
    swv,
    w_init,
    b_init,
    zL_init,
    zR_init,
    loss,
    metric,
    learning_rate,
    n_restarts,
    max_epochs,
    batch_size,
    momentum,
    decay,
    seed,
    select_on_validation,
    cst=None,
):
    """Train one new split with ``n_restarts`` step sizes ``learning_rate / 2**t``.

    Every restart starts from the same (hard-split) initial point with its own
    shuffling seed. The restart with the lowest training loss (the paper) or
    validation error (``select_on_validation``, the authors' code) wins (the
    first one on ties). Diverged restarts are discarded. Restarts are
    independent and run in parallel (``prange``); the winner is picked
    sequentially afterwards, so the result does not depend on the thread
    count. Returns (w, b, zL, zR, val_error, restart); ``restart`` is -1 (and
    val_error inf) if every restart diverged. ``cst``: the monotonic
    constraints of :func:`sgd_split` (the initial point satisfies them).
    """
    d = n_cols(X)
    K = zL_init.shape[0]
    Ws = np.empty((n_restarts, d))
    bs = np.empty(n_restarts)
    Ls = np.empty((n_restarts, K))
    Rs = np.empty((n_restarts, K))
    crits = np.full(n_restarts, np.inf)
    vals = np.full(n_restarts, np.inf)
    for t in prange(n_restarts):
        state = make_state(seed + 7919 * t)
        w = w_init.copy()
        zL = zL_init.copy()
        zR = zR_init.copy()
        lr = learning_rate / 2.0**t
        schedule = (loss, lr, max_epochs, batch_size, momentum, decay, state)
        b0, ok = sgd_split(X, R, P, A, sw, w, b_init, zL, zR, *schedule, cst)
        Ws[t] = w
        bs[t] = b0
        Ls[t] = zL
        Rs[t] = zR
        if ok:
            val = split_error(Xv, Rv, Pv, Av, swv, w, b0, zL, zR, loss, metric)
            if select_on_validation:
                crit = val
            else:
                crit = split_error(X, R, P, A, sw, w, b0, zL, zR, loss, 0)
            if np.isfinite(crit) and np.isfinite(val):
                crits[t] = crit
                vals[t] = val
    best_t = -1
    best_crit = np.inf
    for t in range(n_restarts):
        if crits[t] < best_crit:
            best_crit = crits[t]
            best_t = t
    if best_t < 0:
        return w_init.copy(), b_init, zL_init.copy(), zR_init.copy(), np.inf, -1
    return Ws[best_t].copy(), bs[best_t], Ls[best_t].copy(), Rs[best_t].copy(), vals[best_t], best_t
