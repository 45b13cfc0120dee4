"""numba kernels of the soft tree's joint finetuning (beyond the paper).

After growth, every gate and leaf of the grown tree moves at once, by the
growth's SGD rule. Same training convention as
:mod:`~obliquetrees.soft._kernels` (dense arrays, gate = P(left)).
Serial: one call per step size tried.
"""

import numpy as np

from obliquetrees._core._jit import jit
from obliquetrees._core._math import log_sigmoid_pair, sigmoid
from obliquetrees._core._random import make_state, shuffle
from obliquetrees._training._optim import momentum_step, momentum_velocity
from obliquetrees._training._rows import add_row, finish_rows, n_rows, node_shifts
from obliquetrees._training.monotonic import project_tree
from obliquetrees.soft._kernels import (
    LOSS_SQUARED,
    bounded,
    gate_input,
    output_error,
    tree_error,
)


@jit
def _scratch(n_nodes, K):
    """Per-sample scratch of :func:`_tree_grad`: (logp, gate, S, err, wsh).

    ``wsh`` holds ``W[j] . shift`` of the moving tree (sparse input: see
    :func:`~obliquetrees._training._rows.node_shifts`; zeros for dense input).
    """
    return (
        np.empty(n_nodes),
        np.zeros(n_nodes),
        np.empty((n_nodes, K)),
        np.empty(K),
        np.zeros(n_nodes),
    )


@jit
def _tree_grad(X, R, sw, order, start, stop, tree, loss, grads, scratch, offset=None):
    """Gradient of the whole tree on the samples ``order[start:stop]``, written to ``grads``.

    ``tree = (children_left, children_right, W, b, Z, n_nodes)``, ``grads =
    (gW, gb, gZ)``; returns the samples' summed weighted loss (same convention
    as :func:`tree_loss_grad`). ``offset`` (n_samples, n_outputs), if given,
    is added to every sample's output before the loss.
    """
    children_left, children_right, W, b, Z, n_nodes = tree
    gW, gb, gZ = grads
    gW[:] = 0.0
    gb[:] = 0.0
    gZ[:] = 0.0
    logp, gate, S, err, wsh = scratch
    K = Z.shape[1]
    total = 0.0
    for q in range(start, stop):
        i = order[q]
        weight = sw[i]
        logp[0] = 0.0
        for j in range(n_nodes):
            left = children_left[j]
            if left >= 0:
                a = gate_input(X, i, W, b, wsh, j)
                gate[j] = sigmoid(a)
                left_term, right_term = log_sigmoid_pair(a)  # the bits of log_sigmoid(+-a)
                logp[left] = logp[j] + left_term
                logp[children_right[j]] = logp[j] + right_term
        # subtree outputs, bottom-up
        for j in range(n_nodes - 1, -1, -1):
            left = children_left[j]
            if left < 0:
                for k in range(K):
                    S[j, k] = Z[j, k]
            else:
                right = children_right[j]
                g = gate[j]
                for k in range(K):
                    S[j, k] = g * S[left, k] + (1.0 - g) * S[right, k]
        if offset is not None:  # the root's output is not read again below
            for k in range(K):
                S[0, k] += offset[i, k]
        e = output_error(S[0], R, i, loss, err)
        for j in range(n_nodes):
            p = np.exp(logp[j])
            if p == 0.0:
                continue
            left = children_left[j]
            if left < 0:
                for k in range(K):
                    gZ[j, k] += weight * err[k] * p
            else:
                right = children_right[j]
                g = gate[j]
                beta = 0.0
                for k in range(K):
                    beta += err[k] * (S[left, k] - S[right, k])
                ga = weight * p * beta * g * (1.0 - g)
                gb[j] += ga
                add_row(X, i, ga, gW[j])
        total += weight * (0.5 * e if loss == LOSS_SQUARED else e)
    for j in range(n_nodes):
        if children_left[j] >= 0:
            finish_rows(X, gb[j], gW[j])  # the centring's share: sum of ga = gb[j]
    return total


@jit
def tree_loss_grad(X, R, sw, children_left, children_right, W, b, Z, n_nodes, loss):
    """Loss and gradient of the whole soft tree w.r.t. every W, b and leaf Z.

    Same loss convention as :func:`~obliquetrees.soft._kernels.split_loss_grad`.
    Rows of W/b of leaves and rows of Z of internal nodes get zero gradient.
    Returns (loss, grad_W, grad_b, grad_Z).
    """
    grads = (np.empty(W.shape), np.empty(b.shape[0]), np.empty(Z.shape))
    scratch = _scratch(n_nodes, Z.shape[1])
    node_shifts(X, W, n_nodes, scratch[4])
    n = n_rows(X)
    tree = (children_left, children_right, W, b, Z, n_nodes)
    total = _tree_grad(X, R, sw, np.arange(n), 0, n, tree, loss, grads, scratch)
    return total, grads[0], grads[1], grads[2]


@jit
def finetune_tree(
    X,
    R,
    sw,
    Xv,
    Rv,
    swv,
    children_left,
    children_right,
    W,
    b,
    Z,
    n_nodes,
    loss,
    metric,
    lr,
    finetune_epochs,
    batch_size,
    momentum,
    decay,
    seed,
    cst=None,
    offset=None,
    offset_v=None,
):
    """Joint SGD on all parameters of a grown tree (beyond the paper).

    Same update rule as the growth (online or minibatch SGD with momentum,
    per-sample step decay, shuffling from ``seed``), on every gate and leaf at
    once; after every epoch the validation error is measured and the best
    parameters seen (including the starting point) are kept in W, b, Z.
    Returns (best validation error, epochs run, best epoch; 0 = unchanged).
    ``cst = (sign, ordered)``: monotonic constraints (None: none), enforced by
    :func:`~obliquetrees._training.monotonic.project_tree` after every step
    (projected SGD; ``sign``: the required signs of the gates' weights,
    ``ordered``: per node). ``offset``, ``offset_v`` (rows x outputs, both or
    neither): added to the tree's output on the training and validation rows
    (a tree fitted beside another).
    """
    n = n_rows(X)
    cl, cr = children_left, children_right
    state = make_state(seed)
    Wc = W.copy()
    bc = b.copy()
    Zc = Z.copy()
    best = tree_error(Xv, Rv, swv, cl, cr, W, b, Z, n_nodes, loss, metric, offset_v)
    best_epoch = 0
    vW = np.zeros(W.shape)
    vb = np.zeros(b.shape[0])
    vZ = np.zeros(Z.shape)
    gW = np.empty(W.shape)
    gb = np.empty(b.shape[0])
    gZ = np.empty(Z.shape)
    grads = (gW, gb, gZ)
    scratch = _scratch(n_nodes, Z.shape[1])
    order = np.arange(n)
    tree = (cl, cr, Wc, bc, Zc, n_nodes)  # the copy that moves
    node_shifts(X, Wc, n_nodes, scratch[4])
    eta = lr
    epochs_run = 0
    for epoch in range(finetune_epochs):
        shuffle(order, n, state)
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            _tree_grad(X, R, sw, order, start, stop, tree, loss, grads, scratch, offset)
            scale = eta / (stop - start)
            for j in range(n_nodes):
                if cl[j] >= 0:
                    momentum_step(Wc[j], vW[j], gW[j], momentum, scale)
                    vb[j] = momentum_velocity(vb[j], gb[j], momentum, scale)
                    bc[j] += vb[j]
                else:
                    momentum_step(Zc[j], vZ[j], gZ[j], momentum, scale)
            if cst is not None:
                project_tree(cl, cr, Wc, Zc, cst[0], cst[1])
            node_shifts(X, Wc, n_nodes, scratch[4])  # sparse: O(nodes x d), as the step
            for _ in range(start, stop):
                eta *= decay
        epochs_run += 1
        if not (bounded(bc) and bounded(Zc) and bounded(Wc)):
            break
        val = tree_error(Xv, Rv, swv, cl, cr, Wc, bc, Zc, n_nodes, loss, metric, offset_v)
        if val < best:
            best = val
            best_epoch = epoch + 1
            W[:, :] = Wc
            b[:] = bc
            Z[:, :] = Zc
    return best, epochs_run, best_epoch
