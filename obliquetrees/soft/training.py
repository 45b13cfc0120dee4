"""Incremental growth of a soft decision tree (Irsoy, Yildiz & Alpaydin, 2012).

Pure functions over arrays: :func:`grow_soft_tree` takes standardised
training/validation arrays and returns the grown tree in the *training*
convention (dense weights, gate = P(left)); :func:`to_container` turns it into
the shared :class:`~obliquetrees._core.tree.ObliqueTree` (gate sign flipped to
"right iff w.x + b > 0", weights folded back to raw input units, leaf values
in output units). :func:`fit_soft_tree`, the entry point, does both from raw
arrays with the parameters of one :class:`SoftTreeParams`.

Growth follows the paper's Fig. 2 depth-first: a leaf ``m`` is replaced by a
gate and two leaves; only these three nodes are trained, by gradient descent,
while the whole tree is evaluated; the split is kept if the validation error
drops by more than ``tol``, then the left and the right child are tried in
turn: the shared :class:`~obliquetrees._training.grower.Grower` in its
"depth" order. The per-node Python callback makes one kernel call per step
(context of the node, hard-split initialisation, all SGD restarts).

Scale (beyond the authors' code, same algorithm): the context of a node is
its path probability, from the gates on its path only, and the tree's output,
kept up to date split by split instead of being recomputed from every gate
of the tree, so a split attempt costs O(depth) gates per sample, not
O(nodes); and an SGD restart stops as soon as its step size has decayed
below ``ETA_STOP`` (:func:`~obliquetrees.soft._kernels.sgd_split`).
The tree's output then differs from a fresh evaluation by rounding only (the
same terms summed in another order): trees grown before this change are
reproduced up to such rounding, not bit for bit.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from obliquetrees._core._jit import numba_threads
from obliquetrees._core._random import generator, spawned_seeds, uniform_noise
from obliquetrees._core.graft import graft_sum
from obliquetrees._core.tree import (
    ObliqueTree,
    check_centred_range,
    feature_moments,
    fold_standardization,
    standardization,
)
from obliquetrees._training._rows import sorted_columns, sparse_rows, take_rows
from obliquetrees._training.grower import Grower
from obliquetrees._training.monotonic import (
    constraint_signs,
    leaf_bounds,
    leaf_interval,
    least_squares_leaves,
    mixed_free_inputs,
    normal_equations,
    orientation,
    project_pair,
    project_weight_row,
)
from obliquetrees.soft import _axis_split as _axis
from obliquetrees.soft import _finetune as _ft
from obliquetrees.soft import _kernels as _k

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
#: Cells (rows x leaves) of path probabilities :func:`joint_leaves` holds at once.
JOINT_BLOCK_CELLS = 1 << 22
#: Whether a constrained tree with free inputs gets a tree of the free inputs
#: (:func:`_with_free_tree`), chosen on validation parts for the regressor and
#: the classifier (``benchmarks/results/monotonic_defaults_soft-free-tree.md``,
#: ``monotonic_defaults_soft-free-tree-classifier.md``).
FREE_TREE = True
#: How far beyond the training targets' range :func:`joint_leaves` may move a
#: constrained regressor's leaf, in widths of that range each side
#: (:func:`~obliquetrees._training.monotonic.leaf_bounds`), chosen on validation
#: parts (``benchmarks/results/monotonic_defaults_soft-leaf-margin.md``).
LEAF_RANGE_MARGIN = 0.5
#: Backfitting rounds of a constrained tree and its tree of the free inputs
#: (:func:`_with_free_tree`; E2EDT's two).
BACKFIT_ROUNDS = 2
#: Stream of the growth seed that seeds :func:`_with_free_tree`'s extra fits.
FREE_TREE_STREAM = 1


def _leaf_init(mean, loss):
    """Leaf value (output units of the tree) from a weighted target mean."""
    if loss == _k.LOSS_SQUARED:
        return np.asarray(mean, dtype=np.float64)
    p = np.clip(mean, PROBA_CLIP, 1.0 - PROBA_CLIP)
    if loss == _k.LOSS_BINARY:
        return np.log(p) - np.log1p(-p)
    logp = np.log(p)
    return logp - logp.mean()


def _offset_leaf(offset, R, sw):
    """The binary root logit ``z`` minimising the weighted log-loss of ``offset + z``.

    Newton's method from 0 (the loss is convex in ``z``), kept within the
    logits of :data:`PROBA_CLIP` as :func:`_leaf_init` keeps a root without
    offset.
    """
    bound = np.log(1.0 - PROBA_CLIP) - np.log(PROBA_CLIP)
    z = 0.0
    for _ in range(50):
        p = _sigmoid(offset + z)
        gradient = np.dot(sw, p - R[:, 0])
        curvature = np.dot(sw, p * (1.0 - p))
        if not curvature > 0.0:
            break
        step = gradient / curvature
        z = float(np.clip(z - step, -bound, bound))
        if abs(step) < 1e-12:
            break
    return np.array([z])


@dataclass(frozen=True)
class SoftTreeParams:
    """Training parameters of a soft tree, named as the estimators name them.

    Built by :class:`~obliquetrees.SoftTreeRegressor` and
    :class:`~obliquetrees.SoftTreeClassifier` from their parameters (their
    docstrings describe each one) with ``_training_params`` of the estimator base;
    no field has a default of its own.
    """

    max_depth: int | None
    max_leaf_nodes: int | None
    validation_fraction: float
    learning_rate: float
    n_restarts: int
    max_epochs: int
    batch_size: int
    restart_selection: str
    tol: float
    finetune_epochs: int
    verbose: int


def new_tree(n_features, n_outputs, params):
    """An unsplit soft tree in the training convention, as a depth-first :class:`Grower`.

    Besides the grower's node table it holds per node the gate ``W`` (dense,
    ``n_features``), ``b``, the leaf value ``Z`` (``n_outputs``) and
    ``ordered``, whether the split is ordered under monotonic constraints
    (:mod:`obliquetrees._training.monotonic`; unread without them). Soft
    trees do not partition rows (every row reaches every node with its path
    probability): the grower holds no rows and children get ``n_left=0``.
    """
    payload = {
        "W": ((n_features,), np.float64, 0.0),
        "b": ((), np.float64, 0.0),
        "Z": ((n_outputs,), np.float64, 0.0),
        "ordered": ((), np.bool_, True),
    }
    limits = dict(max_depth=params.max_depth, max_leaf_nodes=params.max_leaf_nodes)
    return Grower(0, order="depth", payload=payload, **limits)


def dense_arrays(tree):
    """The kernels' view of a soft tree: (children_left, children_right, W, b, Z, n_nodes)."""
    a = tree.arrays()
    return a["children_left"], a["children_right"], a["W"], a["b"], a["Z"], tree.n_nodes


def _n_features(X):
    """Features of a dense input or a sparse row tuple (:mod:`obliquetrees._training._rows`)."""
    return X.shape[1] if isinstance(X, np.ndarray) else X[3].shape[0]


def presort(X):
    """``(sorted_index, sorted_values)``, both (d, n): every column of a dense X sorted.

    What :func:`~obliquetrees.soft._axis_split.best_axis_split` scans;
    ties keep the row order.
    """
    order = np.argsort(X, axis=0, kind="stable")
    values = np.ascontiguousarray(np.take_along_axis(X, order, axis=0).T)
    return np.ascontiguousarray(order.T), values


def _hard_start(P):
    """Whether a node reached with probability ``P`` starts from a hard split
    (:func:`_initial_point`): its membership sums to more than one sample."""
    return P.sum() > 1.0


def _initial_point(X, presorted, R, P, sw, loss, seed, direction=None, allowed=None):
    """Starting point ``(w, b, zL, zR)`` of a new split at a node reached with probability P.

    ``presorted``: :func:`presort` of a dense X, :func:`obliquetrees._training._rows.sorted_columns`
    of sparse rows. The best hard axis-aligned split of the data weighted by the node's soft
    membership, when that membership sums to more than one sample; small random
    values otherwise (the paper's lines 3-6). None when no split separates two
    distinct values that carry weight. ``direction``: the monotonic
    constraints of the inputs (stored orientation), or None; the hard split
    is then one whose sides agree with its feature's constraint, on a feature
    of ``allowed`` (a boolean mask, given with ``direction``).
    """
    d = _n_features(X)
    K = R.shape[1]
    noise = uniform_noise(seed, d + 2 * K, 1.0)
    if not _hard_start(P):
        return (
            noise[:d] * RANDOM_INIT,
            0.0,
            noise[d : d + K] * RANDOM_INIT,
            noise[d + K :] * RANDOM_INIT,
        )
    dense = isinstance(X, np.ndarray)
    args = ((X, *presorted) if dense else (presorted,)) + (P * sw, R)
    if direction is not None:  # the kernels compile without them when they are not given
        args += (direction, allowed)
    split = (_axis.best_axis_split if dense else _axis.best_axis_split_sparse)(*args)
    feature, threshold, left_mean, right_mean, _ = split
    if feature < 0:
        return None
    w0 = noise[:d] * INIT_NOISE
    w0[feature] = -INIT_SLOPE  # gate = P(left) is high below the threshold
    return w0, INIT_SLOPE * threshold, _leaf_init(left_mean, loss), _leaf_init(right_mean, loss)


def _constrained_start(tree, m, start, sign):
    """The initial point of a split of leaf ``m`` under monotonic constraints, and its ``cst``.

    ``sign``: the required signs of the gate P(left)'s weights. The split is
    oriented the constrained way (:func:`~obliquetrees._training.monotonic.orientation`:
    the same gate with its children swapped), *ordered* when its largest
    weight is on a constrained input (the hard split's feature, when it
    initialises the split) and free otherwise (constrained weights pinned at
    0), then projected: the weights onto the signs, the leaves into the
    interval the rest of the tree leaves leaf ``m`` (ordered: ``zL <= zR``).
    Returns the start and the ``cst`` of :func:`~obliquetrees.soft._kernels.sgd_split`.
    """
    w, b, zL, zR = start
    if orientation(w, sign) < 0:
        w, b, zL, zR = -w, -b, zR, zL
    ordered = bool(sign[np.argmax(np.abs(w))] != 0.0)
    w = np.array(w, dtype=np.float64)
    project_weight_row(w, sign, ordered)
    a = tree.arrays()
    lo, hi = leaf_interval(
        a["children_left"], a["children_right"], a["ordered"], a["Z"][:, 0].copy(), m
    )
    zL, zR = project_pair(float(zL[0]), float(zR[0]), ordered, lo, hi)
    return (w, float(b), np.array([zL]), np.array([zR])), (sign, ordered, lo, hi)


def grow_soft_tree(X, R, sw, Xv, Rv, swv, *, loss, metric, params, seed, sign=None, offset=None):
    """Grow a soft tree on standardised data (the paper's Fig. 2).

    Depth-first from the root: each node the limits allow is tried (one seed
    per attempt, spawned in visiting order), split if the validation error
    drops by more than ``params.tol``, and then its left and right children
    are tried in turn.

    Parameters
    ----------
    X, Xv : ndarray (n, d), float64, C-contiguous, or sparse row tuples
        Training and validation inputs: standardised dense arrays, or raw
        CSR rows with their standardisation (:mod:`obliquetrees._training._rows`), read entry by
        entry and never densified.
    R, Rv : ndarray (n, K)
        Targets: standardised values (loss 0), 0/1 (loss 1) or one-hot (loss 2).
    sw, swv : ndarray (n,)
        Sample weights.
    loss : {0, 1, 2}
        See :mod:`obliquetrees.soft._kernels`.
    metric : {0, 1}
        Validation error deciding on splits: the loss (0) or the
        misclassification rate (1, classifiers).
    params : SoftTreeParams
        ``max_depth``, ``max_leaf_nodes``, ``learning_rate``, ``n_restarts``,
        ``max_epochs``, ``batch_size``, ``restart_selection``, ``tol`` and
        ``verbose`` are used.
    seed : int
    sign : ndarray (d,) or None, default=None
        Monotonic constraints: the required sign of every gate weight (of
        P(left): minus the stored one), 0 for free inputs; None: none. Every
        split's SGD is projected (:func:`_constrained_start`); with the
        squared loss every leaf is then refitted (:func:`joint_leaves`).
        Where constrained and free inputs mix, every split is trained in its
        ordered and its free version (:func:`_best_version`).
    offset : (ndarray (n,), ndarray (n_validation,)) or None, default=None
        Binary loss only: logits added to the tree's output on the training
        and validation rows (the other tree of :func:`_with_free_tree`); the
        root starts at :func:`_offset_leaf`. (The squared loss takes the
        residual as its target instead.)

    Returns
    -------
    tree : Grower
        The grown tree in the training convention (see :func:`new_tree`).
    log : list of dict
        One entry per attempted split (node, depth, errors, accepted, restart;
        under constraints ``tried``: ``(ordered, validation error)`` of each
        version trained).
    """
    n, d = R.shape[0], _n_features(X)
    dense = isinstance(X, np.ndarray)
    if offset is not None and loss != _k.LOSS_BINARY:
        raise ValueError("grow_soft_tree: an offset is for the binary loss only")
    tree = new_tree(d, R.shape[1], params)
    if offset is None:
        root_mean = (sw[:, None] * R).sum(axis=0) / sw.sum()
        tree.Z[0] = _leaf_init(root_mean, loss)
    else:
        tree.Z[0] = _offset_leaf(offset[0], R, sw)
    # hard-split search: presort every column once (sparse: its stored entries)
    if dense:
        presorted = presort(X)
    else:
        presorted = sorted_columns(X)
    node_seeds = spawned_seeds(seed)
    log = []
    # the whole tree's output on every sample, kept up to date split by split
    # (apply_split) rather than recomputed from every gate at every node
    F = np.tile(tree.Z[0], (n, 1))
    Fv = np.tile(tree.Z[0], (Rv.shape[0], 1))
    if offset is not None:
        F += offset[0][:, None]
        Fv += offset[1][:, None]

    def split(m):
        node_seed = next(node_seeds)
        cl, cr, W, b, Z, n_nodes = dense_arrays(tree)
        P = _k.path_probability(X, cl, cr, W, b, n_nodes, m)
        Pv = _k.path_probability(Xv, cl, cr, W, b, n_nodes, m)
        A = F - P[:, None] * Z[m]  # the output of every other leaf
        Av = Fv - Pv[:, None] * Z[m]
        err_before = _k.mean_error(Fv, Rv, swv, loss, metric)
        active = np.flatnonzero(P > ACTIVE_MIN)
        if active.size == 0:
            return  # no sample reaches m
        if active.size < n:
            Xa = np.ascontiguousarray(X[active]) if dense else take_rows(X, active)
            train = (Xa, R[active], P[active], A[active], sw[active])
        else:
            train = (X, R, P, A, sw)
        problem = _SplitProblem(
            tree, m, (X, R, sw, Xv, Rv, swv), presorted, P, train, (Xv, Rv, Pv, Av, swv),
            DECAY ** (n / active.size), node_seed, loss, metric, params, sign,
        )  # fmt: skip
        result, tried = _best_version(problem)
        if result is None:
            return
        w, b, zL, zR, err_after, restart, cst, joint = result
        accepted = restart >= 0 and err_before - err_after > params.tol
        depth = int(tree.depth[m])
        log.append(
            dict(
                node=int(m),
                depth=depth,
                error_before=err_before,
                error_after=err_after,
                restart=int(restart),
                active=int(active.size),
                accepted=bool(accepted),
                tried=tried,
            )
        )
        if params.verbose:
            print(
                f"[SoftTree] node {m} depth {depth}: validation error "
                f"{err_before:.5f} -> {err_after:.5f} (restart {restart}) "
                f"{'split' if accepted else 'kept as leaf'}"
            )
        if accepted:
            _k.apply_split(X, P, A, w, b, zL, zR, F)
            _k.apply_split(Xv, Pv, Av, w, b, zL, zR, Fv)
            left, right = tree.add_children(m, n_left=0)
            tree.W[m], tree.b[m], tree.Z[left], tree.Z[right] = w, b, zL, zR
            if cst is not None:
                tree.ordered[m] = cst[1]
            if joint is not None:  # every leaf moved: the outputs are the refit's
                _, grown, z, Fv[:] = joint
                F[:] = tree_output(X, R.shape[0], grown, z)
                tree.Z[grown[-1], 0] = z

    tree.grow(split)
    return tree, log


@dataclass(frozen=True)
class _SplitProblem:
    """What training a split of leaf ``m`` of a growing tree reads."""

    tree: Grower
    m: int
    data: tuple  # (X, R, sw, Xv, Rv, swv): all training and validation rows
    presorted: tuple  # the hard-split search's sorted columns of X
    P: np.ndarray  # every training row's path probability of m
    train: tuple  # (X, R, P, A, sw) of the rows that reach m (A: the other leaves' output)
    valid: tuple  # (Xv, Rv, Pv, Av, swv)
    decay: float
    seed: int
    loss: int
    metric: int
    params: object  # SoftTreeParams
    sign: object  # ndarray (d,) of the gate's required signs, or None


class _TrainedSplit(NamedTuple):
    """A split trained by :func:`_trained_split`."""

    w: np.ndarray
    b: float
    zL: np.ndarray
    zR: np.ndarray
    error: float  # the validation error (after the joint refit, when kept)
    restart: int  # -1 if no restart improved the tree
    cst: object  # the kernel's constraints (sign, ordered, lo, hi), or None
    joint: object  # joint_leaves's result, or None


def _trained_split(problem, allowed):
    """The split of ``problem.m`` trained from the best hard start on the features
    ``allowed`` (a mask; None: unconstrained), projected under constraints (then, with
    the squared loss, every leaf refitted when that lowers the validation error).

    Returns a :class:`_TrainedSplit`, or None when no hard start separates two
    distinct values carrying weight.
    """
    p = problem
    X, R, sw, Xv, Rv, swv = p.data
    direction = None if p.sign is None else -p.sign  # the stored orientation's
    start = _initial_point(X, p.presorted, R, p.P, sw, p.loss, p.seed, direction, allowed)
    if start is None:
        return None
    cst = None
    if p.sign is not None:
        start, cst = _constrained_start(p.tree, p.m, start, p.sign)
    w, b, zL, zR, error, restart = _k.train_split(
        *p.train,
        *p.valid,
        *start,
        p.loss,
        p.metric,
        float(p.params.learning_rate),
        int(p.params.n_restarts),
        int(p.params.max_epochs),
        int(p.params.batch_size),
        MOMENTUM,
        p.decay,
        p.seed,
        p.params.restart_selection == "validation",
        cst,
    )
    joint = None
    if cst is not None and p.loss == _k.LOSS_SQUARED and restart >= 0:
        joint = joint_leaves(p.tree, p.m, (w, b, cst[1]), (X, R, sw), (Xv, Rv, swv), p.metric)
        if joint[0] < error:
            error = joint[0]
        else:
            joint = None
    return _TrainedSplit(w, b, zL, zR, error, restart, cst, joint)


def _best_version(problem):
    """The split :func:`grow_soft_tree` keeps for ``problem.m``, and the versions tried.

    Unconstrained, or with every input constrained (or none), the split trained
    from the best hard start. Constrained and free inputs mixed (ours): that
    split's version (ordered if its start's feature is constrained, free
    otherwise), and the other version trained from the best hard start on the
    other inputs; the one of lower validation error. Returns
    :func:`_trained_split`'s result (None: no split) and ``tried``, the
    ``(ordered, validation error)`` of each version that improved the tree.
    """
    sign = problem.sign
    if sign is None:
        return _trained_split(problem, None), []
    # a mask of every input rather than None: one kernel specialisation under constraints
    first = _trained_split(problem, np.ones(sign.shape[0], dtype=np.bool_))
    if first is None:
        return None, []
    other = (sign == 0) if first.cst[1] else (sign != 0)
    # without a hard start both versions would start from the same random point
    second = None
    if other.any() and _hard_start(problem.P):
        second = _trained_split(problem, other)
    versions = [v for v in (first, second) if v is not None and v.restart >= 0]
    tried = [(bool(v.cst[1]), float(v.error)) for v in versions]
    if second is not None and second.restart >= 0:
        if first.restart < 0 or second.error < first.error:
            return second, tried
    return first, tried


def joint_leaves(tree, m, split, train, valid, metric):
    """Every leaf of a regression tree refitted after a new split of leaf ``m`` (ours).

    Under monotonic constraints growth trains a new split's two leaves with
    the others frozen, and each ordered split bounds the leaves grown after it
    by the frozen ones: the first subtree grown under an ordered node can take
    its sibling's whole room. Here the tree with the trained split ``split =
    (w, b, ordered)`` of leaf ``m`` gets all its leaves at once from the
    weighted least-squares fit of its output ``P z`` (``P``: every training
    row's leaf path probabilities) under the ordering
    (:func:`~obliquetrees._training.monotonic.least_squares_leaves`, from the
    current leaves and the new pair at their node's value, a feasible start;
    every leaf within :func:`~obliquetrees._training.monotonic.leaf_bounds` of
    the training targets ``R``).
    ``train`` and ``valid`` are ``(X, R, sw)``. Returns the validation error,
    the split tree ``(children_left, children_right, W, b, n_nodes, leaves)``
    (``m``'s children numbered next, as the grower numbers them), the
    leaves' values and the validation output (n, 1); growth keeps it when
    its validation error is below the frozen split's, and only then needs
    the training output (:func:`tree_output`). ``P`` is formed
    :data:`JOINT_BLOCK_CELLS` cells at a time.
    """
    cl, cr, W, b, Z, n_nodes = dense_arrays(tree)
    w, b_m, ordered_m = split
    cl = np.append(cl[:n_nodes], [-1, -1])
    cr = np.append(cr[:n_nodes], [-1, -1])
    cl[m], cr[m] = n_nodes, n_nodes + 1
    W = np.vstack([W[:n_nodes], np.zeros((2, W.shape[1]))])
    W[m] = w
    b = np.append(b[:n_nodes], [0.0, 0.0])
    b[m] = b_m
    ordered = np.append(tree.arrays()["ordered"][:n_nodes], [True, True])
    ordered[m] = ordered_m
    leaves = np.flatnonzero(cl < 0)
    grown = (cl, cr, W, b, n_nodes + 2, leaves)
    X, R, sw = train
    blocks = _leaf_paths(X, R.shape[0], grown)
    gram, rhs = normal_equations(blocks, sw, R[:, 0], leaves.shape[0])
    start = np.append(Z[:n_nodes, 0], [Z[m, 0], Z[m, 0]])[leaves]
    bounds = leaf_bounds(R[:, 0], sw, LEAF_RANGE_MARGIN)
    z = least_squares_leaves(cl, cr, ordered, leaves, gram, rhs, start, bounds)
    Xv, Rv, swv = valid
    Fv = tree_output(Xv, Rv.shape[0], grown, z)
    error = _k.mean_error(Fv, Rv, swv, _k.LOSS_SQUARED, metric)
    return error, grown, z, Fv


def tree_output(X, n, tree, z):
    """The output (n, 1) on ``X``'s ``n`` rows of ``tree`` (as :func:`_leaf_paths` takes
    it) with leaf values ``z``."""
    F = np.empty((n, 1))
    for rows, P in _leaf_paths(X, n, tree):
        F[rows, 0] = P @ z
    return F


def _leaf_paths(X, n, tree):
    """``(rows, P)`` blocks of ``X``'s ``n`` rows: ``P`` their path probabilities of the
    leaves of ``tree = (children_left, children_right, W, b, n_nodes, leaves)``."""
    cl, cr, W, b, n_nodes, leaves = tree
    block = max(1, JOINT_BLOCK_CELLS // leaves.shape[0])
    dense = isinstance(X, np.ndarray)
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        part = X[rows] if dense else take_rows(X, np.arange(rows.start, rows.stop))
        paths = [_k.path_probability(part, cl, cr, W, b, n_nodes, q) for q in leaves]
        yield rows, np.column_stack(paths)


def finetune(tree, X, R, sw, Xv, Rv, swv, *, loss, metric, params, seed, sign=None, offset=None):
    """Joint SGD of all parameters after growth, keeping the best validation state.

    Each step size ``params.learning_rate / 2**t`` (t in ``FINETUNE_RESTARTS``)
    is run for ``params.finetune_epochs`` from the grown tree; the run (and
    epoch) with the lowest validation error wins; if none beats the grown
    tree, the tree is unchanged. Modifies ``tree`` (a grown :class:`Grower`)
    in place; returns a dict describing what happened. ``sign``: the monotonic
    constraints of :func:`grow_soft_tree`, enforced by projected SGD;
    ``offset``: its offsets, if any.
    """
    cl, cr, W, b, Z, n_nodes = dense_arrays(tree)
    cst = None if sign is None else (sign, tree.arrays()["ordered"])
    off, off_v = (None, None) if offset is None else (o[:, None] for o in offset)
    base = _k.tree_error(Xv, Rv, swv, cl, cr, W, b, Z, n_nodes, loss, metric, off_v)
    best = (base, None, 0, W.copy(), b.copy(), Z.copy())
    rates = [params.learning_rate / 2.0**t for t in FINETUNE_RESTARTS]
    for t, lr in enumerate(rates):
        W1, b1, Z1 = W.copy(), b.copy(), Z.copy()
        err, _, epoch = _ft.finetune_tree(
            *(X, R, sw, Xv, Rv, swv),
            *(cl, cr, W1, b1, Z1, n_nodes),
            loss,
            metric,
            float(lr),
            int(params.finetune_epochs),
            int(params.batch_size),
            MOMENTUM,
            1.0,
            seed + 104729 * t,
            cst,
            off,
            off_v,
        )
        if epoch > 0 and err < best[0]:
            best = (err, lr, epoch, W1, b1, Z1)
    W[:], b[:], Z[:] = best[3], best[4], best[5]
    return dict(error_before=base, error_after=best[0], learning_rate=best[1], epoch=best[2])


def tree_arrays(tree):
    """A grown tree's ``(children_left, children_right, W, b, Z, depth)`` (its nodes only)."""
    cl, cr, W, b, Z, n_nodes = dense_arrays(tree)
    return cl, cr, W, b, Z, tree.depth[:n_nodes]


def to_container(tree, X, sw, x_mean, x_scale, loss, y_mean=None, y_scale=None):
    """Store a grown soft tree (a :class:`Grower`, or its :func:`tree_arrays`) in the
    shared container (raw input units).

    The gate P(left) = sigmoid(W.z + b) becomes the container's split
    "right iff (-W).z + (-b) > 0", so that hard routing follows the more
    probable child (ties, gate exactly 0.5, go left); the standardisation
    z = (x - x_mean) / x_scale is folded into the weights. ``value``:
    regression = leaf (and pre-split) values mapped back to target units;
    classifiers = class probabilities of the leaf logits (binary: [1 - p, p]).
    ``n_node_samples`` = sum of sample weight x path probability over ``X``.
    """
    cl, cr, W, b, Z, depth = tree if isinstance(tree, tuple) else tree_arrays(tree)
    n_nodes = cl.shape[0]
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
    stored = ObliqueTree.from_dense(cl.copy(), cr.copy(), weights, bias, value, membership, depth)
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
    rng = generator(seed)
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


def _encode_targets(y, n_classes, train, sw_tr):
    """Targets ``R`` of the kernels, the loss and the validation metric.

    Regression targets are standardised with the training part's weighted
    moments (returned as ``y_mean``, ``y_scale``; None for classifiers);
    classifiers get 0/1 (two classes) or one-hot (more) targets and decide on
    splits by the misclassification rate (the authors' code).
    """
    if n_classes is None:
        # moments pre-scaled against overflow; a constant target keeps scale 1
        y_mean, y_scale = feature_moments(y[train, None].astype(np.float64), sw_tr)
        check_centred_range(y[:, None], y_mean, name="y")
        y_mean, y_scale = float(y_mean[0]), float(y_scale[0])
        if not y_scale > 1e-12 * abs(y_mean):
            y_scale = 1.0
        return ((y - y_mean) / y_scale)[:, None], _k.LOSS_SQUARED, 0, y_mean, y_scale
    if n_classes <= 2:
        return (y == 1).astype(np.float64)[:, None], _k.LOSS_BINARY, 1, None, None
    R = np.zeros((y.shape[0], n_classes))
    R[np.arange(y.shape[0]), y] = 1.0
    return R, _k.LOSS_SOFTMAX, 1, None, None


def fit_soft_tree(
    X, y, sample_weight, params, seeds, *, n_classes, n_threads=1, monotonic_cst=None
):
    """Standardise, split, grow (and optionally finetune) a soft tree.

    Parameters
    ----------
    X : ndarray (n, d) float64, or canonical CSR matrix
        CSR (float64 data, int64 sorted indices, no duplicates) is never
        densified: moments from the stored entries, every kernel reads a
        row's stored entries with the standardisation applied algebraically
        (:mod:`obliquetrees._training._rows`); the gate weights and their updates stay dense
        (``n_features`` per node, the model's own size).
    y : ndarray (n,)
        float targets (regression, ``n_classes`` None) or class indices.
    sample_weight : ndarray of float64, shape (n,)
        The validated weights: ones when the user gave none
        (:func:`~obliquetrees.utils.validation.validate_fit_data`).
    params : SoftTreeParams
    seeds : (split seed, growth seed, finetune seed)
    n_classes : int or None
        None for regression.
    n_threads : int, default=1
        Threads of the numba kernels (the restarts of a split run in
        parallel); the tree does not depend on it.
    monotonic_cst : ndarray of int8 or None, default=None
        The checked constraints of the first ``len(monotonic_cst)`` inputs
        (the others, missing-value indicators, are free); None: none.

    Returns
    -------
    tree : ObliqueTree
        In the container convention and raw input units.
    info : dict
        ``growth_log`` (one dict per split attempt), ``finetune`` (or None),
        ``n_train``, ``n_validation``.
    """
    n, d = X.shape
    classifier = n_classes is not None
    if classifier and n_classes == 1:
        single = ObliqueTree.from_dense(
            [-1], [-1], np.zeros((1, d)), [0.0], [[1.0]], [sample_weight.sum()], depth=[0]
        )
        return single, dict(growth_log=[], finetune=None, n_train=n, n_validation=0)
    with numba_threads(n_threads):  # the model does not depend on it
        train, val = validation_split(y, params.validation_fraction, seeds[0], stratify=classifier)
        sw_tr, sw_va = sample_weight[train], sample_weight[val]
        # weights enter the SGD steps: rescale to mean 1 so learning_rate keeps its meaning
        scale_w = sw_tr.sum() / train.size
        if not scale_w > 0.0:  # all training weight zero: fall back to unit weights
            sw_tr = np.ones(train.size)
            scale_w = 1.0
        sw_tr = sw_tr / scale_w
        sw_va = sw_va / scale_w if sw_va.sum() > 0.0 else np.ones(val.size)
        x_mean, x_scale = standardization(X[train], sw_tr)
        if sp.issparse(X):
            rows = sparse_rows(X, x_mean, x_scale)
            X_tr, X_va = take_rows(rows, train), take_rows(rows, val)
        else:  # each part standardised on its own: no standardised copy of the whole X
            X_tr = np.ascontiguousarray((X[train] - x_mean) / x_scale)
            X_va = np.ascontiguousarray((X[val] - x_mean) / x_scale)
        R, loss, metric, y_mean, y_scale = _encode_targets(y, n_classes, train, sw_tr)
        R_tr, R_va = np.ascontiguousarray(R[train]), np.ascontiguousarray(R[val])
        data = (X_tr, R_tr, sw_tr, X_va, R_va, sw_va)
        sign = constraint_signs(monotonic_cst, d)
        if sign is not None:  # the gate is P(left): minus the stored split's signs
            sign = -sign
        rules = dict(loss=loss, metric=metric, params=params)
        tree, log, ft = _grow_and_finetune(data, (seeds[1], seeds[2]), rules, sign)
        free = free_inputs(sign, loss)
        if free is None:
            grown = tree_arrays(tree)
        else:
            if sp.issparse(X):  # the free columns' rows, standardised alike
                free_rows = sparse_rows(_free_columns(X, free), x_mean[free], x_scale[free])
                free_parts = (take_rows(free_rows, train), take_rows(free_rows, val))
            else:
                free_parts = tuple(np.ascontiguousarray(part[:, free]) for part in (X_tr, X_va))
            first = (tree, log, ft)
            grown, log, ft = _with_free_tree(first, data, free_parts, free, seeds[1], rules, sign)
        stored = to_container(
            grown, X_tr, sw_tr * scale_w, x_mean, x_scale, loss, y_mean=y_mean, y_scale=y_scale
        )
    info = dict(growth_log=log, finetune=ft, n_train=int(train.size), n_validation=int(val.size))
    return stored, info


def _grow_and_finetune(data, seeds, rules, sign, offset=None):
    """Grow a tree on ``data`` (:func:`grow_soft_tree`), then finetune it if asked.

    ``seeds``: (growth seed, finetune seed). Returns the tree (a
    :class:`Grower`), its growth log and the finetune's record (or None).
    """
    tree, log = grow_soft_tree(*data, seed=int(seeds[0]), sign=sign, offset=offset, **rules)
    ft = None
    params = rules["params"]
    if params.finetune_epochs > 0 and tree.n_nodes > 1:
        ft = finetune(tree, *data, seed=int(seeds[1]), sign=sign, offset=offset, **rules)
        if params.verbose:
            print(
                f"[SoftTree] finetune: validation error {ft['error_before']:.5f} -> "
                f"{ft['error_after']:.5f} (step {ft['learning_rate']}, epoch {ft['epoch']})"
            )
    return tree, log, ft


# --------------------------------------------------- constrained trees: the free tree
def free_inputs(sign, loss):
    """The inputs a constrained tree's tree of the free inputs sees, or None.

    None (one tree) without constraints, when every input is constrained or
    none is, for more than two classes (which constraints refuse), and when
    :data:`FREE_TREE` is False.
    """
    if not FREE_TREE or sign is None or loss == _k.LOSS_SOFTMAX:
        return None
    return mixed_free_inputs(sign)


def _free_columns(X, free):
    """The columns ``free`` of a canonical CSR ``X``, canonical again (sorted indices)."""
    part = X[:, free].tocsr()
    part.sort_indices()
    return part


def _with_free_tree(first, data, free_parts, free, seed, rules, sign):
    """A constrained tree plus a tree of the free inputs, as one tree (ours, issue 41).

    The model is ``f(x) = T(x) + F(x_free)`` (E2EDT's, derived in
    :func:`obliquetrees.e2edt.training._with_free_tree`): ``T`` the
    constrained tree, ``F`` an unconstrained tree of the free inputs
    ``free``. At an ordered split every leaf of one side stays below every
    leaf of the other, so what varies with the free inputs alone could only
    be modelled inside each ordered subtree's interval; ``F`` models it once.
    ``F`` does not move along a constrained input, so ``f`` is monotone
    whenever ``T`` is. For a regressor ``f`` is the output; for a binary
    classifier it is the logit, and so is a soft tree's (the log-odds of its
    soft prediction average the leaves' logits), so the sum is exact under
    soft and hard routing for both.

    Backfitted for :data:`BACKFIT_ROUNDS` rounds (``first``, the constrained
    tree of the targets with its log and finetune record, is round one's
    ``T``): ``F`` fits what ``T`` leaves, then ``T`` what ``F`` leaves, and
    so on, each grown and finetuned as the estimator's parameters say, with
    seeds of stream :data:`FREE_TREE_STREAM` of the growth ``seed``. The
    squared loss fits the residual, standardised by the training part's
    weighted moments (so ``learning_rate`` and ``tol`` keep their meaning);
    the binary loss fits the labels beside the other tree's logits
    (``offset`` of :func:`grow_soft_tree` and :func:`finetune`). ``free_parts``
    are the training and validation rows of the free columns.

    Returns the grafted tree's :func:`tree_arrays` (:func:`~obliquetrees._core.graft.graft_sum`:
    ``F`` under every leaf of ``T``), the two last fits' growth logs (each
    entry's ``part`` says which tree, whose node ids it gives) and ``T``'s
    last finetune record.
    """
    X_tr, R_tr, sw_tr, X_va, R_va, sw_va = data
    free_data = (free_parts[0], R_tr, sw_tr, free_parts[1], R_va, sw_va)
    # (growth, finetune) seeds of every extra fit, in the estimators' seed range
    extra = generator(seed, FREE_TREE_STREAM).integers(
        np.iinfo(np.int32).max, size=(2 * BACKFIT_ROUNDS, 2)
    )
    t_part, t_log, t_ft = _beside(*first, "constrained")
    f_part = None
    for k in range(BACKFIT_ROUNDS):
        if f_part is not None:  # T again, beside F
            t_part, t_log, t_ft = _fit_beside(
                data, _outputs(f_part, free_data), extra[2 * k], rules, sign, "constrained"
            )
        f_part, f_log, _ = _fit_beside(
            free_data, _outputs(t_part, data), extra[2 * k + 1], rules, None, "free"
        )
    graft = _graft_arrays(t_part, f_part, free, sign.shape[0])
    return graft, t_log + f_log, t_ft


def _outputs(part, data):
    """A fitted part's output (in the units of the targets ``R``) on ``data``'s training
    and validation rows, each shape (n,)."""
    cl, cr, W, b, Z, _ = part
    return tuple(
        _k.forward_context(X, cl, cr, W, b, Z, cl.shape[0], -1)[0][:, 0] for X in data[::3]
    )


def _fit_beside(data, other, seeds, rules, sign, name):
    """A tree fitted beside another whose outputs on ``data``'s rows are ``other``;
    its :func:`tree_arrays` with ``Z`` in the targets' units, its log, its finetune record."""
    X_tr, R_tr, sw_tr, X_va, R_va, sw_va = data
    if rules["loss"] == _k.LOSS_BINARY:
        tree, log, ft = _grow_and_finetune(data, seeds, rules, sign, offset=other)
        return _beside(tree, log, ft, name)
    residual = (R_tr[:, 0] - other[0], R_va[:, 0] - other[1])
    mean, scale = (float(m[0]) for m in feature_moments(residual[0][:, None], sw_tr))
    if not scale > 1e-12 * max(abs(mean), 1.0):  # nothing left to fit
        scale = 1.0
    targets = tuple(np.ascontiguousarray(((r - mean) / scale)[:, None]) for r in residual)
    tree, log, ft = _grow_and_finetune(
        (X_tr, targets[0], sw_tr, X_va, targets[1], sw_va), seeds, rules, sign
    )
    return _beside(tree, log, ft, name, (mean, scale))


def _beside(tree, log, ft, name, moments=None):
    """``(arrays, log, ft)`` of a part: its :func:`tree_arrays`, ``Z`` mapped back from
    standardised residual units by ``moments`` (None: as fitted); ``part`` set in the log."""
    cl, cr, W, b, Z, depth = tree_arrays(tree)
    if moments is not None:
        Z = Z * moments[1] + moments[0]
    return (cl, cr, W, b, Z, depth), [dict(entry, part=name) for entry in log], ft


def _graft_arrays(constrained, free_part, free, n_inputs):
    """:func:`tree_arrays` of ``F`` (on the inputs ``free``) grafted under every leaf of ``T``.

    Both go through the shared container in the training convention (its
    values the trees' ``Z``, added leaf to leaf) and come back as arrays.
    """
    on_every_input = np.zeros((free_part[2].shape[0], n_inputs))
    on_every_input[:, free] = free_part[2]
    trees = []
    for cl, cr, W, b, Z, depth in (constrained, free_part[:2] + (on_every_input,) + free_part[3:]):
        weights = np.where((cl >= 0)[:, None], W, 0.0)  # a leaf's row is unused
        trees.append(ObliqueTree.from_dense(cl, cr, weights, b, Z, np.zeros(cl.shape[0]), depth))
    ones = [np.ones(t.node_count) for t in trees]
    grafted, _ = graft_sum(trees[0], ones[0], trees[1], ones[1])
    return (
        grafted.children_left,
        grafted.children_right,
        np.ascontiguousarray(grafted.dense_weights()),
        grafted.bias.copy(),
        np.ascontiguousarray(grafted.value),
        grafted.depth,
    )
