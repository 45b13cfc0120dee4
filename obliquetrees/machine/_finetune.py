"""Decision-machine fine-tuning and leaf refits, over arrays (no scikit-learn).

The relaxation of a forest's decision machine (Zhang, "Decision Machines"):
tree ``t`` gives the soft leaf weights ``E_t = softmax(B~_t sigma(W_t x +
b_t) / temperature)`` and predicts ``E_t V_t``. This module computes the
relaxed objectives and their gradients (:func:`relaxed_nll`,
:func:`relaxed_squared_error`), trains split and leaf parameters through them
(:func:`fit_finetune`, one :class:`FinetuneConfig`), and refits leaf values
under hard routing (:func:`refit_leaf_values`). Entry points take a packed
:class:`~obliquetrees._core.forest.ObliqueForest` and validated arrays and
return :class:`~obliquetrees._core.tree.ObliqueTree` objects; the estimator
side (validation, models, documentation) is :mod:`obliquetrees.machine`.
"""

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.machine import apply_sigma, machine_of
from obliquetrees._core.tree import ARRAY_NAMES, ObliqueTree, fold_standardization
from obliquetrees.machine import _monotonic as mono

#: BLAS threads inside fine-tuning: fixed, so the result never depends on the
#: machine or on n_jobs (DESIGN.md decision 8).
TRAIN_BLAS_THREADS = 1

#: Adam's moment decays and epsilon (Kingma & Ba's defaults).
_ADAM = (0.9, 0.999, 1e-8)  # ADAM_BETA1, ADAM_BETA2, ADAM_EPS of _optim (which imports numba)


@dataclass(frozen=True)
class FinetuneConfig:
    """Parameters of :func:`fit_finetune` (see :func:`obliquetrees.machine.finetune`).

    ``temperature`` is the pair (first epoch, last epoch); ``objective`` is
    resolved (``"forest"`` or ``"trees"``); ``n_threads`` is the numba thread
    count (results do not depend on it); ``monotonic_cst`` is resolved per
    input column or None (:mod:`obliquetrees.machine._monotonic`).
    """

    epochs: int = 20
    batch_size: int = 256
    learning_rate: float = 0.01
    temperature: tuple = (0.1, 0.01)
    eps: float = 0.1
    sigma: str = "tanh"
    support: object = "original"
    objective: str = "forest"
    refit_iter: int = 10
    random_state: object = 0
    n_threads: int = 1
    verbose: int = 0
    monotonic_cst: object = None  # int8 per input (missing indicators 0), or None


# ============================================================== relaxation
def relaxed_forward(Z, W, b, Bn, leaf_offset, inv_t, eps, sigma):
    """Margins ``A``, ``sigma(A)`` and the per-tree soft leaf weights ``E``."""
    from obliquetrees._core import _machine_kernels as K  # numba on first use

    A = Z @ W.T
    A += b
    Hs = apply_sigma(A, eps, sigma)
    E = np.empty((Z.shape[0], Bn.shape[0]))
    K.relaxed_forward(Hs, *_csr_arrays(Bn), leaf_offset, inv_t, E)
    return A, Hs, E


def _csr_arrays(M):
    return M.indptr.astype(np.int64, copy=False), M.indices.astype(np.int64, copy=False), M.data


def relaxed_backward(y, sw, A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma):
    """Responsibilities ``R``, ``d(-sum sw log p)/dA`` and ``log p`` per row."""
    from obliquetrees.machine import _finetune_kernels as K  # numba on first use

    R = np.empty_like(E)
    GH = np.empty_like(Hs)
    logp = np.empty(E.shape[0])
    K.relaxed_backward(E, V, y, sw, *_csr_arrays(Bn), leaf_offset, inv_t, R, GH, logp)
    GH *= _sigma_derivative(A, Hs, eps, sigma)
    return R, GH, logp


def _sigma_derivative(A, Hs, eps, sigma):
    """``d sigma(A) / dA`` given ``Hs = sigma(A)``."""
    if sigma == "tanh":
        return (1.0 - Hs * Hs) / eps
    return (np.abs(A) < eps) / eps


def squared_error_backward(target, sw, A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma, objective):
    """Weighted squared error of the relaxed trees and its gradients.

    Tree ``t`` predicts ``P_t = E_t V_t`` (``E_t`` its softmax leaf weights,
    ``V_t`` its leaves' values). ``objective="forest"``: the loss is ``sum_i
    sw_i ||mean_t P_ti - target_i||^2`` (the forest's prediction);
    ``"trees"``: ``sum_i sw_i mean_t ||P_ti - target_i||^2`` (every tree
    fits the target on its own, as the trees of a random forest do). Returns
    the loss, its gradient with respect to the margins ``A`` (through the
    per-tree softmax, the template matrix and ``sigma``) and with respect to
    ``V``. Plain numpy and BLAS: segmented sums per tree and one sparse
    product with ``B~``.
    """
    n_trees = leaf_offset.shape[0] - 1
    leaves_per_tree = np.diff(leaf_offset)
    tree_of_leaf = np.repeat(np.arange(n_trees), leaves_per_tree)
    prediction = np.add.reduceat(E[:, :, None] * V[None], leaf_offset[:-1], axis=1)
    if objective == "forest":
        residual = prediction.mean(axis=1) - target  # (n, n_outputs)
        loss = float(sw @ np.sum(residual * residual, axis=1))
        grad_prediction = np.repeat(
            (residual * (2.0 * sw / n_trees)[:, None])[:, None, :], n_trees, axis=1
        )
    else:
        residual = prediction - target[:, None, :]  # (n, n_trees, n_outputs)
        grad_prediction = residual * (2.0 * sw / n_trees)[:, None, None]
        loss = 0.5 * float(np.sum(grad_prediction * residual))
    per_leaf = grad_prediction[:, tree_of_leaf, :]  # d loss / d P of each leaf's tree
    grad_V = np.einsum("nl,nlo->lo", E, per_leaf)
    EG = E * np.einsum("nlo,lo->nl", per_leaf, V)  # E * dL/dE
    per_tree = np.add.reduceat(EG, leaf_offset[:-1], axis=1)
    grad_logits = EG - E * np.repeat(per_tree, leaves_per_tree, axis=1)
    GH = np.asarray((Bn.T @ grad_logits.T).T) * inv_t
    GH *= _sigma_derivative(A, Hs, eps, sigma)
    return loss, GH, grad_V


def _relaxed_setup(machine, X, temperature, eps, sigma, sample_weight, W, b, V):
    """Arrays of :func:`relaxed_nll` / :func:`relaxed_squared_error` and the forward pass."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    sw = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    W = machine.dense_S() if W is None else W
    b = machine.bias if b is None else b
    V = machine.V if V is None else V
    inv_t = 1.0 / float(temperature)
    Bn = machine.B_normalised
    A, Hs, E = relaxed_forward(X, W, b, Bn, machine.leaf_offset, inv_t, eps, sigma)
    return X, sw, (A, Hs, E, V, Bn, machine.leaf_offset, inv_t, eps, sigma)


def relaxed_nll(machine, X, y, temperature, eps, sigma, sample_weight, W, b, V):
    """Loss and ``(grad_W, grad_b)``: see :func:`obliquetrees.machine.relaxed_nll`."""
    X, sw, state = _relaxed_setup(machine, X, temperature, eps, sigma, sample_weight, W, b, V)
    _, GA, logp = relaxed_backward(np.asarray(y, dtype=np.int64), sw, *state)
    return float(-(sw @ logp)), GA.T @ X, GA.sum(axis=0)


def relaxed_squared_error(
    machine, X, Y, temperature, eps, sigma, sample_weight, W, b, V, objective
):
    """Loss, ``grad_W``, ``grad_b``, ``grad_V``: see :func:`obliquetrees.machine.relaxed_squared_error`."""  # noqa: E501
    X, sw, state = _relaxed_setup(machine, X, temperature, eps, sigma, sample_weight, W, b, V)
    Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
    loss, GA, grad_V = squared_error_backward(Y, sw, *state, objective)
    return loss, GA.T @ X, GA.sum(axis=0), grad_V


# ================================================================ finetune
@contextmanager
def _training_threads(n_threads):
    """BLAS at ``TRAIN_BLAS_THREADS``, numba kernels at ``n_threads`` (bits depend on neither)."""
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads

    with threadpool_limits(limits=TRAIN_BLAS_THREADS, user_api="blas"), numba_threads(n_threads):
        yield


def _weighted_standardisation(A, sw):
    """Weighted mean and standard deviation of the columns (1 where it is 0)."""
    mean = np.average(A, axis=0, weights=sw)
    scale = np.sqrt(np.average((A - mean) ** 2, axis=0, weights=sw))
    scale[scale <= 0] = 1.0
    return mean, scale


def fit_finetune(forest, X, y, sw, regression, config):
    """Fine-tune the split and leaf parameters of ``forest`` end to end.

    Parameters
    ----------
    forest : ObliqueForest
    X : ndarray of float64, shape (n_samples, n_features), validated
    y : ndarray
        Class codes (int64, columns of the leaf distributions) or targets
        (float64, shape (n_samples, n_outputs)) when ``regression``.
    sw : ndarray of float64, shape (n_samples,)
        Non-negative, not all zero.
    regression : bool
    config : FinetuneConfig

    Returns
    -------
    trees : list of ObliqueTree
        Same structure, new weights, offsets, leaf values and hard-routed
        ``n_node_samples``.
    history : dict
        ``"loss"`` and ``"temperature"`` per epoch, ``"weight_density"``.

    Raises
    ------
    ValueError
        If a split or leaf parameter becomes non-finite.
    """
    from obliquetrees._core._random import generator
    from obliquetrees._training._optim import adam_update
    from obliquetrees._training.leaf_models import leaf_m_step  # numba on first use

    c = config
    t0, t1 = c.temperature
    objective, eps, sigma, lr = c.objective, c.eps, c.sigma, c.learning_rate
    machine = machine_of(forest, cache=False)
    n, p = X.shape

    # standardised input, unit-norm splits: margin = signed distance
    mean, scale = _weighted_standardisation(X, sw)
    Z = (X - mean) / scale
    S = machine.dense_S()
    W = S * scale
    b = machine.bias + S @ mean
    norm = np.linalg.norm(W, axis=1)
    norm[norm <= 0] = 1.0
    W /= norm[:, None]
    b /= norm
    Bn = machine.B_normalised
    leaf_offset = machine.leaf_offset
    rng = generator(c.random_state)
    if regression:  # standardised targets and leaf values (the mean of trees commutes)
        y_mean, y_scale = _weighted_standardisation(y, sw)
        target = (y - y_mean) / y_scale
        V = (machine.V - y_mean) / y_scale
    else:  # smooth the leaves a little so no class has probability exactly 0
        V = (machine.V + 1e-3) / (1.0 + 1e-3 * machine.n_outputs)
        onehot = np.zeros((n, machine.n_outputs))
        onehot[np.arange(n), y] = 1.0

    def gradients(rows, inv_t):
        """Batch loss, d loss / d margins, and the leaves' statistic or gradient."""
        A, Hs, E = relaxed_forward(Z[rows], W, b, Bn, leaf_offset, inv_t, eps, sigma)
        state = (A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma)
        if regression:
            return squared_error_backward(target[rows], sw[rows], *state, objective)
        R, GA, logp = relaxed_backward(y[rows], sw[rows], *state)
        finite = np.isfinite(logp)
        return -float(sw[rows][finite] @ logp[finite]), GA, (R * sw[rows, None]).T @ onehot[rows]

    mask = _support_mask(c, S, Z, gradients)
    if mask is not None:
        W *= mask
    cst = c.monotonic_cst  # split orientations fixed here, then projected steps
    direction = None if cst is None else mono.orient_splits(W, cst)

    mW, vW = np.zeros_like(W), np.zeros_like(W)
    mb, vb = np.zeros_like(b), np.zeros_like(b)
    mV, vV = np.zeros_like(V), np.zeros_like(V)
    step = 0
    history = {"loss": [], "temperature": []}
    with _training_threads(c.n_threads):
        for epoch in range(c.epochs):
            tau = t0 * (t1 / t0) ** (epoch / max(c.epochs - 1, 1))
            inv_t = 1.0 / tau
            perm = rng.permutation(n)
            counts = np.zeros_like(V)
            loss = 0.0
            for s in range(0, n, c.batch_size):
                rows = perm[s : s + c.batch_size]
                total = sw[rows].sum()
                if total <= 0:
                    continue
                batch_loss, GA, leaves = gradients(rows, inv_t)
                loss += batch_loss
                gW = GA.T @ Z[rows]
                gW /= total
                if mask is not None:
                    gW *= mask
                gb = GA.sum(axis=0) / total
                step += 1
                adam_update(
                    W.reshape(-1), gW.reshape(-1), mW.reshape(-1), vW.reshape(-1), step, lr, *_ADAM
                )
                if cst is not None:
                    mono.project_splits(W, direction, cst)
                adam_update(b, gb, mb, vb, step, lr, *_ADAM)
                if regression:
                    leaves /= total
                    adam_update(
                        V.reshape(-1),
                        leaves.reshape(-1),
                        mV.reshape(-1),
                        vV.reshape(-1),
                        step,
                        lr,
                        *_ADAM,
                    )
                else:
                    counts += leaves
            if not regression:
                leaf_m_step(counts, V)
            if cst is not None:
                mono.project_leaf_values(forest, machine, V, direction, not regression)
            _check_finite(W, b, V, when=f"at epoch {epoch + 1}")
            history["loss"].append(loss / sw.sum())
            history["temperature"].append(tau)
            if c.verbose:
                name = "relaxed MSE" if regression else "relaxed NLL"
                print(
                    f"finetune epoch {epoch + 1}/{c.epochs}: temperature {tau:.4g}, "
                    f"{name} {history['loss'][-1]:.4f}"
                )

    # back to raw units, hard leaf refit, container
    tuned = ObliqueForest.from_trees(_raw_trees(forest, machine, W, b, mean, scale), validate=False)
    if regression:
        V = V * y_scale + y_mean
    means = regression and objective == "trees"
    trees = _refit(tuned, machine, V, X, y, sw, regression, int(c.refit_iter), means, direction)
    _check_finite(
        *(getattr(t, name) for t in trees for name in ("weight_value", "bias", "value")),
        when="in the final leaf refit",
    )
    n_splits = max(machine.n_splits, 1)
    history["weight_density"] = float(sum(t.weight_value.shape[0] for t in trees) / n_splits)
    return trees, history


def _support_mask(config, S, Z, gradients):
    """Which weights of each split fine-tuning may move (1) and which stay 0, or None: all.

    ``"dense"``: every weight; ``"original"``: the split's own features; an
    int ``k``: those and the ``k`` features of largest summed gradient at the
    start temperature (``gradients(rows, inv_t)``'s second value times ``Z``).
    """
    if config.support == "dense":
        return None
    mask = (S != 0).astype(np.float64)
    if not isinstance(config.support, str) and config.support > 0:
        n, p = Z.shape
        with _training_threads(config.n_threads):
            G = np.zeros_like(S, dtype=np.float64)
            for s in range(0, n, 4096):
                rows = np.arange(s, min(s + 4096, n))
                G += gradients(rows, 1.0 / config.temperature[0])[1].T @ Z[rows]
        G = np.abs(G)
        G[mask > 0] = -1.0
        k = min(int(config.support), p)
        top = np.argpartition(-G, k - 1, axis=1)[:, :k]
        np.put_along_axis(mask, top, 1.0, axis=1)
    return mask


def _raw_trees(forest, machine, W, b, mean, scale):
    """The forest's trees with the machine's split rows ``W``, ``b`` folded back to raw units."""
    trees = []
    p = W.shape[1]
    for k, tree in enumerate(forest.trees):
        a, e = machine.split_offset[k], machine.split_offset[k + 1]
        weights = np.zeros((tree.node_count, p))
        bias = np.zeros(tree.node_count)
        weights[machine.split_node[a:e]] = W[a:e]
        bias[machine.split_node[a:e]] = b[a:e]
        new = ObliqueTree.from_dense(
            tree.children_left,
            tree.children_right,
            weights,
            bias,
            tree.value,
            tree.n_node_samples,
            depth=tree.depth,
        )
        trees.append(fold_standardization(new, mean, scale))
    return trees


def _check_finite(*arrays, when):
    """Raise a ``ValueError`` if fine-tuning produced a non-finite parameter."""
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise ValueError(
            f"finetune diverged {when} (non-finite split or leaf parameters); "
            "lower learning_rate or check the scale of X and y."
        )


# ============================================================= leaf refits
def refit_leaf_values(forest, X, y, sw, regression, n_iter):
    """The trees of ``forest`` with leaf values refitted under hard routing.

    Parameters
    ----------
    forest : ObliqueForest
    X, y, sw, regression
        As in :func:`fit_finetune`.
    n_iter : int
        0: per-leaf class frequencies or mean targets, every tree on its own;
        >0: EM iterations (classifiers) or backfitting sweeps (regressors) on
        the forest's mean prediction, from the current leaves.

    Returns
    -------
    trees : list of ObliqueTree
        With hard-routed ``n_node_samples`` of ``(X, sw)``.
    """
    machine = machine_of(forest, cache=False)
    return _refit(forest, machine, machine.V, X, y, sw, regression, n_iter, n_iter == 0)


def _refit(forest, machine, V, X, y, sw, regression, n_iter, means, monotone=None):
    """Hard leaf refit from leaf values ``V``, then hard-routed node statistics.

    Regressors: per-leaf mean targets if ``means``, else ``n_iter``
    backfitting sweeps; classifiers: :func:`_hard_em` with ``n_iter``.
    ``monotone``: the split orientations of a constrained fit, whose refitted
    leaf values are then clipped to their bounds (None: unconstrained).
    """
    rows = _leaf_rows_hard(forest, machine, X)
    project = None
    if monotone is not None:  # also inside the iterations: projected sweeps

        def project(V, trees=None):
            mono.project_leaf_values(forest, machine, V, monotone, not regression, trees)

    if regression and means:
        V = _hard_leaf_means(V, rows, y, sw)
    elif regression:
        V = _hard_backfit(V, rows, machine.leaf_offset, y, sw, n_iter, project)
    else:
        V = _hard_em(V, rows, y, sw, n_iter, project)
    if project is not None:
        project(V)
    return _node_statistics(_with_values(forest, machine, V), X, sw)


def _hard_em(V, leaf_rows, y, sw, n_iter, project=None):
    """Leaf class distributions of the forest mixture under hard routing (EM).

    ``leaf_rows`` (n, n_trees) are global leaf rows. ``n_iter=0``: per-leaf
    weighted class frequencies (each tree on its own). ``n_iter>0``: EM
    iterations on the forest likelihood ``mean_t V[leaf_t(x), y]`` from ``V``;
    responsibilities split each sample between the trees. Leaves reached by
    no sample keep their value. ``project(V)``, if given, follows every M-step.
    """
    from obliquetrees._training.leaf_models import leaf_m_step  # numba on first use

    n_leaves, n_classes = V.shape
    V = V.copy()
    flat = leaf_rows.ravel()
    yy = np.repeat(y, leaf_rows.shape[1])
    if n_iter == 0:
        counts = np.zeros((n_leaves, n_classes))
        np.add.at(counts, (flat, yy), np.repeat(sw, leaf_rows.shape[1]))
        leaf_m_step(counts, V)
        return V
    for _ in range(n_iter):
        q = V[leaf_rows, y[:, None]]  # (n, n_trees)
        total = q.sum(axis=1, keepdims=True)
        R = np.divide(q, total, out=np.zeros_like(q), where=total > 0) * sw[:, None]
        counts = np.zeros((n_leaves, n_classes))
        np.add.at(counts, (flat, yy), R.ravel())
        leaf_m_step(counts, V)
        if project is not None:
            project(V)
    return V


def _hard_leaf_means(V, leaf_rows, Y, sw):
    """Per-leaf weighted mean targets under hard routing (every tree on its own).

    The closed-form minimum of each tree's weighted squared error with its
    splits fixed; ``leaf_rows`` (n, n_trees) are global leaf rows. Leaves
    reached by no sample keep their value.
    """
    n_trees = leaf_rows.shape[1]
    flat = leaf_rows.ravel()
    weights = np.repeat(sw, n_trees)
    count = np.bincount(flat, weights=weights, minlength=V.shape[0])
    sums = np.stack(
        [
            np.bincount(flat, weights=weights * np.repeat(Y[:, o], n_trees), minlength=V.shape[0])
            for o in range(Y.shape[1])
        ],
        axis=1,
    )
    V = V.copy()
    hit = count > 0
    V[hit] = sums[hit] / count[hit, None]
    return V


def _hard_backfit(V, leaf_rows, leaf_offset, Y, sw, n_iter, project=None):
    """Leaf values under hard routing for the squared error of the forest mean.

    ``n_iter`` backfitting sweeps (Gauss-Seidel over the trees, from ``V``) on
    ``sum_i sw_i ||mean_t V[leaf_t(x_i)] - Y_i||^2``: each tree's leaves take
    the weighted mean of what the other trees leave unexplained.
    ``leaf_rows`` (n, n_trees) are global leaf rows, tree ``t``'s leaves the
    rows ``leaf_offset[t]:leaf_offset[t + 1]``. Leaves reached by no sample
    keep their value. ``project(V, (t,))``, if given, follows every tree's update.
    """
    n_trees = leaf_rows.shape[1]
    V = V.copy()
    total = V[leaf_rows].sum(axis=1)  # n_trees x the forest's prediction, per row
    for _ in range(n_iter):
        for t in range(n_trees):
            rows = leaf_rows[:, t]
            a, c = leaf_offset[t], leaf_offset[t + 1]
            own = V[rows]
            V[a:c] = _hard_leaf_means(V[a:c], (rows - a)[:, None], n_trees * Y - (total - own), sw)
            if project is not None:
                project(V, (t,))
            total += V[rows] - own
    return V


def _with_values(forest, machine, V):
    """Trees of ``forest`` with leaf values ``V`` (rows as in ``machine``)."""
    trees = []
    for k, tree in enumerate(forest.trees):
        value = tree.value.copy()
        a, b = machine.leaf_offset[k], machine.leaf_offset[k + 1]
        value[machine.leaf_node[a:b]] = V[a:b]
        arrays = {name: getattr(tree, name) for name in ARRAY_NAMES}
        trees.append(ObliqueTree(**{**arrays, "value": value}, n_features=tree.n_features))
    return trees


def _node_statistics(trees, X, sw):
    """Hard-routed ``n_node_samples`` of the training data for every tree."""
    from obliquetrees._core import traversal  # numba on first use

    forest = ObliqueForest.from_trees(trees, validate=False)
    indicator = traversal.decision_path(forest, X, 1)
    counts = np.asarray(indicator.T @ sw).ravel()
    for k, tree in enumerate(trees):
        tree.n_node_samples = np.ascontiguousarray(
            counts[forest.node_offset[k] : forest.node_offset[k + 1]]
        )
    return trees


def _leaf_rows_hard(forest, machine, X):
    """Global leaf rows (n, n_trees) reached by traversal (the predict routing)."""
    from obliquetrees._core import traversal  # numba on first use

    local = traversal.apply(forest, X, 1)
    # local node id -> leaf row, per tree
    lookup = np.full(forest.children_left.shape[0], -1, dtype=np.int64)
    tree_of_leaf = np.repeat(np.arange(machine.n_trees), np.diff(machine.leaf_offset))
    lookup[forest.node_offset[tree_of_leaf] + machine.leaf_node] = np.arange(machine.n_leaves)
    return lookup[local + forest.node_offset[:-1][None, :]]
