"""Incremental growth of a soft decision tree (Irsoy, Yildiz & Alpaydin, 2012).

Pure functions over arrays: :func:`grow_soft_tree` takes standardised
training/validation arrays and returns the grown tree in the *training*
convention (dense weights, gate = P(left)); :func:`to_container` turns it into
the shared :class:`~obliquetrees._core.tree.ObliqueTree` (gate sign flipped to
"right iff w.x + b > 0", weights folded back to raw input units, leaf values
in output units). :func:`fit_soft_tree` does both from raw arrays.

Growth follows the paper's Fig. 2 depth-first: a leaf ``m`` is replaced by a
gate and two leaves; only these three nodes are trained, by gradient descent,
while the whole tree is evaluated; the split is kept if the validation error
drops by more than ``tol``, then the left and the right child are tried in
turn. The per-node Python loop makes one kernel call per step (context of the
node, hard-split initialisation, all SGD restarts).
"""

import numpy as np

from obliquetrees._core._random import uniform_noise
from obliquetrees._core.tree import (
    ObliqueTree,
    check_centred_range,
    feature_moments,
    fold_standardization,
    standardization,
)
from obliquetrees._training import _soft_finetune as _ft
from obliquetrees._training import _soft_kernels as _k

#: Slope of the initial gate around the hard split's threshold, in units of
#: standardised input (the authors' code uses 0.5; the paper's literal
#: ``w_j = -1, w_0 = 1`` cannot encode a threshold).
INIT_SLOPE = 0.5
#: Half-width of the uniform noise on the other gate weights at initialisation.
INIT_NOISE = 0.005
#: Half-width of the uniform random initialisation used when the node's soft
#: membership is too small for a hard split (the paper's lines 3-6).
RANDOM_INIT = 0.01
#: Momentum of the SGD (the authors' code).
MOMENTUM = 0.1
#: Step-size decay per training sample (the authors' code).
DECAY = 0.9999
#: Samples whose path probability to the node being split is below this value
#: are left out of that split's SGD (their gradient is at most this fraction of
#: a member's); the step decay is rescaled so an epoch decays as much as over
#: the full training set.
ACTIVE_MIN = 1e-7
#: Probabilities are clipped to [PROBA_CLIP, 1 - PROBA_CLIP] before taking
#: logits for the initial leaf values of classifiers.
PROBA_CLIP = 1e-4
#: Joint finetuning (beyond the paper) tries the step sizes
#: ``learning_rate / 2**t`` for these t and keeps the best validation state.
FINETUNE_RESTARTS = (4, 6, 8)


class SoftTreeArrays:
    """A soft tree in the training convention (dense, gate = P(left))."""

    def __init__(self, n_features, n_outputs, capacity=63):
        self.children_left = np.full(capacity, -1, dtype=np.int64)
        self.children_right = np.full(capacity, -1, dtype=np.int64)
        self.W = np.zeros((capacity, n_features))
        self.b = np.zeros(capacity)
        self.Z = np.zeros((capacity, n_outputs))
        self.depth = np.zeros(capacity, dtype=np.int64)
        self.n_nodes = 1

    def _grow(self, needed):
        cap = self.children_left.shape[0]
        if needed <= cap:
            return
        new = max(needed, 2 * cap + 1)
        pad = new - cap
        self.children_left = np.concatenate([self.children_left, np.full(pad, -1, np.int64)])
        self.children_right = np.concatenate([self.children_right, np.full(pad, -1, np.int64)])
        self.W = np.concatenate([self.W, np.zeros((pad, self.W.shape[1]))])
        self.b = np.concatenate([self.b, np.zeros(pad)])
        self.Z = np.concatenate([self.Z, np.zeros((pad, self.Z.shape[1]))])
        self.depth = np.concatenate([self.depth, np.zeros(pad, np.int64)])

    def split(self, m, w, b, z_left, z_right):
        """Turn leaf ``m`` into a gate with two new leaves; return their ids."""
        self._grow(self.n_nodes + 2)
        left, right = self.n_nodes, self.n_nodes + 1
        self.children_left[m] = left
        self.children_right[m] = right
        self.W[m] = w
        self.b[m] = b
        self.Z[left] = z_left
        self.Z[right] = z_right
        self.depth[left] = self.depth[right] = self.depth[m] + 1
        self.n_nodes += 2
        return left, right

    def arrays(self):
        """(children_left, children_right, W, b, Z, n_nodes), trimmed views."""
        n = self.n_nodes
        return (
            self.children_left[:n],
            self.children_right[:n],
            self.W[:n],
            self.b[:n],
            self.Z[:n],
            n,
        )

    @property
    def n_leaves(self):
        return (self.n_nodes + 1) // 2


def _leaf_init(mean, loss):
    """Leaf value (output units of the tree) from a weighted target mean."""
    if loss == _k.LOSS_SQUARED:
        return np.asarray(mean, dtype=np.float64)
    p = np.clip(mean, PROBA_CLIP, 1.0 - PROBA_CLIP)
    if loss == _k.LOSS_BINARY:
        return np.log(p) - np.log1p(-p)
    logp = np.log(p)
    return logp - logp.mean()


def grow_soft_tree(
    X,
    R,
    sw,
    Xv,
    Rv,
    swv,
    *,
    loss,
    metric,
    max_depth=None,
    max_leaf_nodes=None,
    learning_rate=5.0,
    n_restarts=10,
    max_epochs=25,
    batch_size=1,
    tol=1e-3,
    select_on_validation=False,
    seed=0,
    verbose=0,
):
    """Grow a soft tree on standardised data (the paper's Fig. 2).

    Parameters
    ----------
    X, Xv : ndarray (n, d), float64, C-contiguous
        Training and validation inputs (already standardised).
    R, Rv : ndarray (n, K)
        Targets: standardised values (loss 0), 0/1 (loss 1) or one-hot (loss 2).
    sw, swv : ndarray (n,)
        Sample weights.
    loss : {0, 1, 2}
        See :mod:`obliquetrees._training._soft_kernels`.
    metric : {0, 1}
        Validation error deciding on splits: the loss (0) or the
        misclassification rate (1, classifiers).
    max_depth, max_leaf_nodes : int or None
        Limits on the growth (None: grow while validation improves).
    learning_rate : float
        Step size of the first restart; restart t uses learning_rate / 2**t.
    n_restarts, max_epochs, batch_size : int
        Number of step sizes tried per split, epochs per try, samples per
        update (1 = online, as in the paper).
    tol : float
        A split is kept iff the validation error drops by more than tol.
    select_on_validation : bool
        Pick the restart with the lowest validation error (the authors' code)
        instead of the lowest training error (the paper).
    seed : int
    verbose : int

    Returns
    -------
    tree : SoftTreeArrays
    log : list of dict
        One entry per attempted split (node, depth, errors, accepted, restart).
    """
    n, d = X.shape
    K = R.shape[1]
    tree = SoftTreeArrays(d, K)
    root_mean = (sw[:, None] * R).sum(axis=0) / sw.sum()
    tree.Z[0] = _leaf_init(root_mean, loss)
    # hard-split search: presort every column once
    sorted_index = np.ascontiguousarray(np.argsort(X, axis=0, kind="stable").T)
    ss = np.random.SeedSequence(seed)
    log = []
    stack = [0]
    while stack:
        m = stack.pop()
        if max_depth is not None and tree.depth[m] >= max_depth:
            continue
        if max_leaf_nodes is not None and tree.n_leaves >= max_leaf_nodes:
            break
        node_seed = int(ss.spawn(1)[0].generate_state(1)[0])
        cl, cr, W, b, Z, n_nodes = tree.arrays()
        F, P, A = _k.forward_context(X, cl, cr, W, b, Z, n_nodes, m)
        Fv, Pv, Av = _k.forward_context(Xv, cl, cr, W, b, Z, n_nodes, m)
        err_before = _k.mean_error(Fv, Rv, swv, loss, metric)
        # initialisation: best hard axis-aligned split of the membership-weighted data
        u = P * sw
        noise = uniform_noise(node_seed, d + 2 * K, 1.0)
        if P.sum() > 1.0:
            feature, threshold, left_mean, right_mean, _ = _k.best_axis_split(X, sorted_index, u, R)
            if feature < 0:
                continue  # no two distinct values carry weight: nothing to split
            w0 = noise[:d] * INIT_NOISE
            w0[feature] = -INIT_SLOPE  # gate = P(left) is high below the threshold
            b0 = INIT_SLOPE * threshold
            zL0 = _leaf_init(left_mean, loss)
            zR0 = _leaf_init(right_mean, loss)
        else:
            w0 = noise[:d] * RANDOM_INIT
            b0 = 0.0
            zL0 = noise[d : d + K] * RANDOM_INIT
            zR0 = noise[d + K :] * RANDOM_INIT
        active = np.flatnonzero(P > ACTIVE_MIN)
        if active.size == 0:
            continue
        if active.size < n:
            Xa = np.ascontiguousarray(X[active])
            Ra, Pa, Aa, swa = R[active], P[active], A[active], sw[active]
        else:
            Xa, Ra, Pa, Aa, swa = X, R, P, A, sw
        decay = DECAY ** (n / active.size)
        w, bb, zL, zR, err_after, restart = _k.train_split(
            Xa,
            Ra,
            Pa,
            Aa,
            swa,
            Xv,
            Rv,
            Pv,
            Av,
            swv,
            w0,
            b0,
            zL0,
            zR0,
            loss,
            metric,
            float(learning_rate),
            int(n_restarts),
            int(max_epochs),
            int(batch_size),
            MOMENTUM,
            decay,
            node_seed,
            bool(select_on_validation),
        )
        accepted = restart >= 0 and err_before - err_after > tol
        log.append(
            dict(
                node=m,
                depth=int(tree.depth[m]),
                error_before=err_before,
                error_after=err_after,
                restart=int(restart),
                active=int(active.size),
                accepted=bool(accepted),
            )
        )
        if verbose:
            print(
                f"[SoftTree] node {m} depth {tree.depth[m]}: validation error "
                f"{err_before:.5f} -> {err_after:.5f} (restart {restart}) "
                f"{'split' if accepted else 'kept as leaf'}"
            )
        if accepted:
            left, right = tree.split(m, w, bb, zL, zR)
            stack.append(right)
            stack.append(left)
    return tree, log


def finetune(
    tree,
    X,
    R,
    sw,
    Xv,
    Rv,
    swv,
    *,
    loss,
    metric,
    learning_rates,
    n_epochs,
    batch_size=1,
    seed=0,
):
    """Joint SGD of all parameters after growth, keeping the best validation state.

    Each step size in ``learning_rates`` is run from the grown tree; the run
    (and epoch) with the lowest validation error wins; if none beats the grown
    tree, the tree is unchanged. Modifies ``tree`` in place; returns a dict
    describing what happened.
    """
    cl, cr, W, b, Z, n_nodes = tree.arrays()
    base = _k.tree_error(Xv, Rv, swv, cl, cr, W, b, Z, n_nodes, loss, metric)
    best = (base, None, 0, W.copy(), b.copy(), Z.copy())
    for t, lr in enumerate(learning_rates):
        W1, b1, Z1 = W.copy(), b.copy(), Z.copy()
        err, _, epoch = _ft.finetune_tree(
            X,
            R,
            sw,
            Xv,
            Rv,
            swv,
            cl,
            cr,
            W1,
            b1,
            Z1,
            n_nodes,
            loss,
            metric,
            float(lr),
            int(n_epochs),
            int(batch_size),
            MOMENTUM,
            1.0,
            seed + 104729 * t,
        )
        if epoch > 0 and err < best[0]:
            best = (err, lr, epoch, W1, b1, Z1)
    W[:], b[:], Z[:] = best[3], best[4], best[5]
    return dict(error_before=base, error_after=best[0], learning_rate=best[1], epoch=best[2])


def to_container(tree, X, sw, x_mean, x_scale, loss, y_mean=None, y_scale=None):
    """Store a grown soft tree in the shared container (raw input units).

    The gate P(left) = sigmoid(W.z + b) becomes the container's split
    "right iff (-W).z + (-b) > 0", so that hard routing follows the more
    probable child (ties, gate exactly 0.5, go left); the standardisation
    z = (x - x_mean) / x_scale is folded into the weights. ``value``:
    regression = leaf (and pre-split) values mapped back to target units;
    classifiers = class probabilities of the leaf logits (binary: [1 - p, p]).
    ``n_node_samples`` = sum of sample weight x path probability over ``X``.
    """
    cl, cr, W, b, Z, n_nodes = tree.arrays()
    internal = cl >= 0
    weights = np.where(internal[:, None], -W, 0.0)
    bias = np.where(internal, -b, 0.0)
    if loss == _k.LOSS_SQUARED:
        value = Z * y_scale + y_mean
    elif loss == _k.LOSS_BINARY:
        z = Z[:, 0]
        value = np.column_stack([_sigmoid(-z), _sigmoid(z)])
    else:
        e = np.exp(Z - Z.max(axis=1, keepdims=True))
        value = e / e.sum(axis=1, keepdims=True)
    membership = _k.node_membership(X, sw, cl, cr, W, b, n_nodes)
    stored = ObliqueTree.from_dense(
        cl.copy(), cr.copy(), weights, bias, value, membership, depth=tree.depth[:n_nodes]
    )
    return fold_standardization(stored, x_mean, x_scale)


def _sigmoid(z):
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def validation_split(y, validation_fraction, seed, stratify):
    """Indices (train, validation) of a seeded split.

    ``validation_fraction`` of the samples (rounded down) go to validation;
    classifiers split class by class (a class with one sample stays in
    training). When either part would be empty, both parts are the whole data
    (the split decisions then use the training error).
    """
    n = y.shape[0]
    rng = np.random.default_rng(seed)
    if validation_fraction <= 0.0:
        everything = np.arange(n)
        return everything, everything
    if stratify:
        val = []
        for c in np.unique(y):
            members = rng.permutation(np.flatnonzero(y == c))
            val.append(members[: int(validation_fraction * members.size)])
        val = np.sort(np.concatenate(val))
    else:
        val = np.sort(rng.permutation(n)[: int(validation_fraction * n)])
    train = np.setdiff1d(np.arange(n), val, assume_unique=True)
    if val.size == 0 or train.size == 0:
        everything = np.arange(n)
        return everything, everything
    return train, val


def fit_soft_tree(
    X,
    y,
    sample_weight,
    *,
    n_classes=None,
    validation_fraction=0.5,
    max_depth=None,
    max_leaf_nodes=None,
    learning_rate=5.0,
    n_restarts=10,
    max_epochs=25,
    batch_size=1,
    tol=1e-3,
    select_on_validation=True,
    classification_metric="error",
    finetune_epochs=0,
    seeds=(0, 0, 0),
    verbose=0,
):
    """Standardise, split, grow (and optionally finetune) a soft tree.

    Parameters
    ----------
    X : ndarray (n, d) float64
    y : ndarray (n,)
        float targets (regression, ``n_classes`` None) or class indices.
    sample_weight : ndarray (n,) or None
    n_classes : int or None
        None for regression.
    seeds : (split seed, growth seed, finetune seed)
    Other parameters: see :func:`grow_soft_tree` and :func:`finetune`.

    Returns
    -------
    tree : ObliqueTree
        In the container convention and raw input units.
    info : dict
        ``growth_log`` (one dict per split attempt), ``finetune`` (or None),
        ``n_train``, ``n_validation``.
    """
    n, d = X.shape
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    classifier = n_classes is not None
    if classifier and n_classes == 1:
        single = ObliqueTree.from_dense(
            [-1], [-1], np.zeros((1, d)), [0.0], [[1.0]], [sw.sum()], depth=[0]
        )
        return single, dict(growth_log=[], finetune=None, n_train=n, n_validation=0)
    train, val = validation_split(y, validation_fraction, seeds[0], stratify=classifier)
    sw_tr, sw_va = sw[train], sw[val]
    # weights enter the SGD steps: rescale to mean 1 so learning_rate keeps its meaning
    scale_w = sw_tr.sum() / train.size
    if not scale_w > 0.0:  # all training weight zero: fall back to unit weights
        sw_tr = np.ones(train.size)
        scale_w = 1.0
    sw_tr = sw_tr / scale_w
    sw_va = sw_va / scale_w if sw_va.sum() > 0.0 else np.ones(val.size)
    x_mean, x_scale = standardization(X[train], sw_tr)
    Xs = (X - x_mean) / x_scale
    X_tr = np.ascontiguousarray(Xs[train])
    X_va = np.ascontiguousarray(Xs[val])
    y_mean = y_scale = None
    if not classifier:
        loss, metric = _k.LOSS_SQUARED, 0
        # moments pre-scaled against overflow; a constant target keeps scale 1
        y_mean, y_scale = feature_moments(y[train, None].astype(np.float64), sw_tr)
        check_centred_range(y[:, None], y_mean, name="y")
        y_mean, y_scale = float(y_mean[0]), float(y_scale[0])
        if not y_scale > 1e-12 * abs(y_mean):
            y_scale = 1.0
        R = ((y - y_mean) / y_scale)[:, None]
    elif n_classes <= 2:
        loss = _k.LOSS_BINARY
        metric = 1 if classification_metric == "error" else 0
        R = (y == 1).astype(np.float64)[:, None]
    else:
        loss = _k.LOSS_SOFTMAX
        metric = 1 if classification_metric == "error" else 0
        R = np.zeros((n, n_classes))
        R[np.arange(n), y] = 1.0
    R_tr, R_va = np.ascontiguousarray(R[train]), np.ascontiguousarray(R[val])
    tree, log = grow_soft_tree(
        X_tr,
        R_tr,
        sw_tr,
        X_va,
        R_va,
        sw_va,
        loss=loss,
        metric=metric,
        max_depth=max_depth,
        max_leaf_nodes=max_leaf_nodes,
        learning_rate=learning_rate,
        n_restarts=n_restarts,
        max_epochs=max_epochs,
        batch_size=batch_size,
        tol=tol,
        select_on_validation=select_on_validation,
        seed=int(seeds[1]),
        verbose=verbose,
    )
    ft = None
    if finetune_epochs > 0 and tree.n_nodes > 1:
        rates = [learning_rate / 2.0**t for t in FINETUNE_RESTARTS]
        ft = finetune(
            tree,
            X_tr,
            R_tr,
            sw_tr,
            X_va,
            R_va,
            sw_va,
            loss=loss,
            metric=metric,
            learning_rates=rates,
            n_epochs=finetune_epochs,
            batch_size=batch_size,
            seed=int(seeds[2]),
        )
        if verbose:
            print(
                f"[SoftTree] finetune: validation error {ft['error_before']:.5f} -> "
                f"{ft['error_after']:.5f} (step {ft['learning_rate']}, epoch {ft['epoch']})"
            )
    stored = to_container(
        tree, X_tr, sw_tr * scale_w, x_mean, x_scale, loss, y_mean=y_mean, y_scale=y_scale
    )
    info = dict(growth_log=log, finetune=ft, n_train=int(train.size), n_validation=int(val.size))
    return stored, info
