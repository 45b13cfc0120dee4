"""E2EDT's greedy phase (sect. 2.5): one probabilistic stump per leaf.

Through the shared :class:`~obliquetrees._training.grower.Grower`: level by
level (order ``"breadth"``), or best first by the stump's gain when
``max_leaf_nodes`` is set (order ``"best"``, the paper's sect. 3.4: the
information gain of class distributions, the variance reduction of
regression targets). Every candidate leaf is replaced by a stump trained for
``max_epochs`` epochs on the samples that reach it by *deterministic*
routing; a stump that sends all of them one way is retried up to
``max_attempts`` times, then the node stays a leaf. Each node's samples are a
contiguous slice of the grower's row array, partitioned in place; the slice
is gathered once per stump and the whole stump schedule runs in one numba
call (:func:`~obliquetrees.e2edt._kernels.fit_stump`, dense or CSR rows), with the leaf
model of ``y`` (:mod:`obliquetrees._training.leaf_models`). For regression targets (ours) the
node then takes its best axis-aligned split instead when that split reduces
the squared error more than the stump (:func:`best_axis_split`, CO2's
search). Also the split initialisation, feature subsets and image-grid
adjacency shared with the finetune.
"""

from typing import NamedTuple

import numpy as np

from obliquetrees._core._random import make_state
from obliquetrees._training._optim import ADAM_BETA1, ADAM_BETA2, ADAM_EPS
from obliquetrees._training.axis_split import best_axis_split as axis_search
from obliquetrees._training.grower import Grower
from obliquetrees._training.leaf_models import as_leaf_model
from obliquetrees._training.monotonic import orientation, project_weight_row, uses_constrained
from obliquetrees.e2edt import _kernels as K
from obliquetrees.e2edt import _sparse as S


# --------------------------------------------------------------- utilities
def grid_adjacency(image_shape):
    """CSR adjacency (indptr, indices) of the 4-neighbour grid of an image.

    Pixel ``(r, c)`` is feature ``r * width + c`` (row-major, as ``reshape``).
    """
    h, w = image_shape
    ids = np.arange(h * w).reshape(h, w)
    pairs = [
        (ids[:, :-1].ravel(), ids[:, 1:].ravel()),
        (ids[:-1, :].ravel(), ids[1:, :].ravel()),
    ]
    src = np.concatenate([a for a, b in pairs] + [b for a, b in pairs])
    dst = np.concatenate([b for a, b in pairs] + [a for a, b in pairs])
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    indptr = np.zeros(h * w + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=h * w), out=indptr[1:])
    return indptr, dst.astype(np.int64)


def induced_adjacency(features, indptr, indices, n_features):
    """Adjacency restricted to ``features``, in local (0..k-1) indices."""
    local = np.full(n_features, -1, dtype=np.int64)
    local[features] = np.arange(features.shape[0])
    counts = np.diff(indptr)[features]
    src = np.repeat(np.arange(features.shape[0]), counts)
    starts = indptr[features]
    offs = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    dst = local[indices[np.repeat(starts, counts) + offs]]
    keep = dst >= 0
    src, dst = src[keep], dst[keep]
    new_indptr = np.zeros(features.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=features.shape[0]), out=new_indptr[1:])
    return new_indptr, dst.astype(np.int64)


def draw_features(rng, n_features, params):
    """Feature indices one split may use (sorted), or None for all features."""
    if params.patch_size is not None:
        h, w = params.image_shape
        ps = params.patch_size
        r0 = int(rng.integers(0, h - ps + 1))
        c0 = int(rng.integers(0, w - ps + 1))
        return ((r0 + np.arange(ps))[:, None] * w + c0 + np.arange(ps)).ravel()
    if params.max_features is not None and params.max_features < n_features:
        return np.sort(rng.choice(n_features, params.max_features, replace=False))
    return None


def init_split(rng, k):
    """Initial hyperplane on ``k`` features: direction uniform on the unit sphere.

    The offset is a gap of the paper; it is drawn like the official code
    (PyTorch's Linear init divided by the weight norm, about
    ``U(-sqrt(3/k), sqrt(3/k))``: the plane passes near the origin of the
    standardised data).
    """
    w = rng.standard_normal(k)
    w /= np.linalg.norm(w)
    b = float(rng.uniform(-1.0, 1.0)) * np.sqrt(3.0 / k)
    return w, np.array([b])


def _empty_adjacency(k):
    return np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


def best_axis_split(Xs, y, sw):
    """The best axis-aligned split of a node's rows by squared error.

    ``Xs`` (n, k) holds the node's standardised rows (dense, or a
    :class:`~obliquetrees.e2edt._sparse.StandardizedCSR`), ``y`` (n, d) its targets and
    ``sw`` its weights. The search is CO2's
    (:func:`~obliquetrees._training.axis_split.best_axis_split`, scikit-learn's criterion and
    midpoint thresholds; exact ties between features go to the first of a
    fixed pseudo-random order). A row goes right iff ``Xs[:, feature] >
    threshold``. Returns ``(feature, threshold)``, feature -1 if no split
    puts weight on both sides.
    """
    node = Xs.csc_columns() if isinstance(Xs, S.StandardizedCSR) else Xs
    k = Xs.shape[1]
    feature, threshold, _ = axis_search(node, y, sw, Xs.shape[0], y.shape[1], k, 1, make_state(0))
    return int(feature), float(threshold)


def _both_sides(sws, right):
    """Whether the hard split ``right`` sends weight (``sws > 0``) both ways."""
    weighted = sws > 0
    return bool(np.any(weighted & right) and np.any(weighted & ~right))


def _goes_right(Xs, w, b):
    """Hard routing of the node's rows ``Xs`` (dense or CSR) by the split ``(w, b)``."""
    count_right = S.count_right if isinstance(Xs, S.StandardizedCSR) else K.count_right
    return count_right(Xs, w, b[0])[1]


# ------------------------------------------------------------------ greedy
class _Stump(NamedTuple):
    """A fitted candidate split of one node (its leaves are ``pi``'s rows)."""

    features: np.ndarray  # or None: all features
    w: np.ndarray
    b: float
    gamma: float
    pi: np.ndarray  # (2, leaf width): left, right leaf
    goes_right: np.ndarray  # bool per row of the node, in the grower's row order
    gain: float  # information gain or variance reduction (None when nothing compares gains)
    ordered: bool  # monotonic constraints: whether the split may use constrained features


class GreedyTree(NamedTuple):
    """The tree of the greedy phase, parents before children.

    Node arrays of the grower (``children_*`` -1 at leaves; ``value`` the leaf
    parameters of every node, a class distribution or a Gaussian's row
    (:mod:`obliquetrees._training.leaf_models`); ``bias`` and ``gamma`` of splits, 0 at leaves)
    and, per split node, its feature indices (``features[node]``, None: all
    features), weights on them (``weights[node]``) and whether it is ordered
    under monotonic constraints (``ordered[node]``,
    :mod:`obliquetrees._training.monotonic`; True without constraints).
    """

    children_left: np.ndarray
    children_right: np.ndarray
    value: np.ndarray
    bias: np.ndarray
    gamma: np.ndarray
    features: dict
    weights: dict
    ordered: dict


class _StumpSplitter:
    """The per-node step of the greedy phase: fit a probabilistic stump.

    Supplies :class:`~obliquetrees._training.grower.Grower` its callbacks:
    :meth:`fit_and_split` (order ``"breadth"``), or :meth:`propose` when a
    node is created and :meth:`split` for the best proposal (order
    ``"best"``). The generator ``rng`` is consumed by stump fits only, in the
    order the grower visits nodes. ``sign``: the monotonic constraints of
    the inputs (:func:`~obliquetrees._training.monotonic.constraint_signs`), or None.
    """

    def __init__(self, Z, y, sw, leaves, params, rng, adjacency, sign=None):
        self.Z, self.y, self.sw = Z, y, sw
        self.sign = sign
        #: monotonic constraints: each node's leaf-value interval (scikit-learn's bounds)
        self.bounds = {0: (-np.inf, np.inf)}
        self.leaves = leaves
        self.params = params
        self.rng = rng
        self.adjacency = adjacency  # full-image CSR or None
        self._local_adj = {}
        self.grower = Grower(
            Z.shape[0],
            order="breadth" if params.max_leaf_nodes is None else "best",
            max_depth=params.max_depth,
            max_leaf_nodes=params.max_leaf_nodes,
            payload={
                "value": ((leaves.width,), np.float64, 0.0),
                "bias": ((), np.float64, 0.0),
                "gamma": ((), np.float64, 0.0),
            },
        )
        self.grower.value[0] = leaves.node_value(y, sw)
        self.features, self.weights, self.ordered = {}, {}, {}
        #: the leaf parameter monotonic constraints order (binary: P(classes_[1]); mean)
        self._value_column = 1 if leaves.n_classes is not None else 0
        self._proposals = {}
        #: steepness of a stump after the greedy schedule (as fit_stump returns it)
        self._stump_steepness = params.initial_steepness
        for _ in range(params.max_epochs):
            self._stump_steepness += params.steepness_increase

    def _adjacency_for(self, features, k):
        p = self.params
        if self.adjacency is None or p.spatial_reg <= 0:
            return _empty_adjacency(k)
        if features is None:
            return self.adjacency
        if p.patch_size is not None:
            if p.patch_size not in self._local_adj:
                self._local_adj[p.patch_size] = grid_adjacency((p.patch_size, p.patch_size))
            return self._local_adj[p.patch_size]
        return induced_adjacency(features, *self.adjacency, self.Z.shape[1])

    def fit(self, node):
        """A stump for ``node`` (up to ``max_attempts`` tries), or None.

        Rows of zero weight (out of a tree's bootstrap, or weighted 0 by the
        user) are routed but do not count: the node needs
        ``min_samples_split`` rows of positive weight, and both sides of a
        stump must receive weight. Leaf models with ``axis_candidate``
        (regression) then weigh the paper's stump against the node's best
        axis-aligned split (:meth:`_with_axis_candidate`).
        """
        p = self.params
        rows = self.grower.node_rows(node)
        n = rows.shape[0]
        labels = self.y[rows][self.sw[rows] > 0]
        if labels.shape[0] < max(2, p.min_samples_split) or not np.any(labels != labels[0]):
            return None
        ys = np.ascontiguousarray(self.y[rows])
        sws = np.ascontiguousarray(self.sw[rows])
        X_node = None
        csr = isinstance(self.Z, S.StandardizedCSR)
        stump = None
        for _ in range(p.max_attempts):
            features = draw_features(self.rng, self.Z.shape[1], p)
            if features is None:
                if X_node is None:
                    whole = n == self.Z.shape[0]
                    X_node = self.Z if whole else self.Z[rows]
                    if not csr:
                        X_node = np.ascontiguousarray(X_node)
                Xs = X_node
            elif csr:
                Xs = (X_node if X_node is not None else self.Z[rows]).columns(features)
            else:
                Xs = np.ascontiguousarray(self.Z[np.ix_(rows, features)])
            w, b = init_split(self.rng, Xs.shape[1])
            stump = self._train(node, Xs, ys, sws, features, w, b)
            if stump is not None:
                break
        if self.leaves.axis_candidate:
            return self._with_axis_candidate(node, stump, Xs, ys, sws, features)
        return stump

    def _train(self, node, Xs, ys, sws, features, w, b):
        """EM-train a stump from the split ``(w, b)`` on the node's rows ``Xs``.

        Its leaves start as :meth:`stump_leaves` of the node's value, the
        schedule is :func:`~obliquetrees.e2edt._kernels.fit_stump`'s (dense or CSR)
        with row orders drawn from the generator. Returns the
        :meth:`_candidate`, or None.
        """
        p = self.params
        n, k = Xs.shape
        csr = isinstance(Xs, S.StandardizedCSR)
        pi = self.leaves.stump_leaves(self.grower.value[node])
        n_adam = max(p.max_epochs - 1, 0)
        order = self.rng.permuted(np.tile(np.arange(n, dtype=np.int64), (n_adam, 1)), axis=1)
        gamma = (S.fit_stump if csr else K.fit_stump)(
            Xs,
            ys,
            sws,
            w,
            b,
            pi,
            p.initial_steepness,
            p.steepness_increase,
            p.max_epochs,
            order,
            p.batch_size,
            p.learning_rate,
            ADAM_BETA1,
            ADAM_BETA2,
            ADAM_EPS,
            p.spatial_reg,
            *self._adjacency_for(features, k),
        )
        right = _goes_right(Xs, w, b)
        return self._candidate(node, Xs, ys, sws, features, w, b, pi, gamma, right)

    def _constrained(self, node, Xs, ys, sws, features, w, b):
        """The trained split ``(w, b)`` of ``node`` made to satisfy the monotonic constraints.

        scikit-learn's rule (a split on a constrained feature orders and
        bounds its subtrees, a split on a free one does not), on an oblique
        split. Oriented the constrained way (the same stump with its children
        swapped), the split has two feasible versions
        (:mod:`obliquetrees._training.monotonic`): *ordered*, its weights on
        constrained features only, the wrong-signed ones set to 0 (a
        candidate only if one is left and its hard-routed sides agree with
        the constraints: left value at most right), and *free*, its weights
        on free features only (the constrained ones then stay 0). Each
        version's leaves are its sides' (:meth:`_hard_leaves`) clipped to the
        node's bounds; the one whose clipped leaves fit the node's rows
        better (weighted squared error of the constrained leaf value) is
        kept. (Ordered versions that keep their free weights cost 2-8 points
        of accuracy on the synthetic set of ``bench_monotonic``: they order
        subtrees that differ mostly in free features.) Returns ``(w, b, pi,
        right, ordered)``, or None when no version sends weight both ways.
        """
        sign = self.sign if features is None else self.sign[features]
        if orientation(w, sign) < 0:
            w, b = -w, -b
        col = self._value_column
        target = (ys == 1).astype(np.float64) if col == 1 else ys[:, 0]
        lo, hi = self.bounds[node]
        best, best_error = None, np.inf
        for ordered in (True, False):
            v = w.copy()
            project_weight_row(v, sign, ordered)
            if ordered:
                v[sign == 0] = 0.0
                if not uses_constrained(v, sign):
                    continue
            right = _goes_right(Xs, v, b)
            if not _both_sides(sws, right):
                continue
            pi = self._hard_leaves(node, ys, sws, right)
            if ordered and pi[0, col] > pi[1, col]:
                continue  # against the constraints
            pi[:, col] = np.clip(pi[:, col], lo, hi)
            if col == 1:  # binary class distributions
                pi[:, 0] = 1.0 - pi[:, 1]
            error = np.sum(sws * (target - np.where(right, pi[1, col], pi[0, col])) ** 2)
            if error < best_error:
                best, best_error = (v, b, pi, right, ordered), error
        return best

    def _hard_leaves(self, node, ys, sws, right):
        """Leaves of the hard split ``right`` of the node's rows (both sides weighted)."""
        if hasattr(self.leaves, "split_leaves"):
            return self.leaves.split_leaves(self.grower.value[node], ys, sws, right)
        return np.stack([self.leaves.node_value(ys[side], sws[side]) for side in (~right, right)])

    def _candidate(self, node, Xs, ys, sws, features, w, b, pi, gamma, right):
        """The :class:`_Stump` of split ``(w, b)`` on the node's rows ``Xs`` with
        leaves ``pi`` and hard routing ``right``, with its gain (computed only
        when gains are compared: order ``"best"`` or an axis-aligned
        candidate); None if it sends all the weight one way or is not finite.
        Under monotonic constraints the split, leaves and routing are first
        :meth:`_constrained`."""
        ordered = True
        if self.sign is not None and np.all(np.isfinite(w)):
            found = self._constrained(node, Xs, ys, sws, features, w, b)
            if found is None:
                return None
            w, b, pi, right, ordered = found
        if not (_both_sides(sws, right) and np.all(np.isfinite(w)) and np.isfinite(b[0])):
            return None
        gain = None
        if self.grower.order == "best" or self.leaves.axis_candidate:
            gain = self.leaves.gain(self.grower.value[node], pi, ys, sws, right)
        return _Stump(features, w, b[0], gamma, pi, right, gain, ordered)

    def _with_axis_candidate(self, node, stump, Xs, ys, sws, features):
        """The paper's ``stump`` or the node's best axis-aligned split, whichever gains more.

        Ours (regression): ``stump`` is the paper's (EM from a random
        direction; None if every attempt failed), the other the
        :meth:`_axis_candidate` on the same rows and features; a tie keeps
        the paper's. None if neither exists.
        """
        axis = self._axis_candidate(node, Xs, ys, sws, features)
        found = [c for c in (stump, axis) if c is not None]
        return max(found, key=lambda c: c.gain) if found else None

    def _axis_candidate(self, node, Xs, ys, sws, features):
        """The node's best axis-aligned split as a :meth:`_candidate` (None if there is none).

        The split is :func:`best_axis_split` on the node's rows ``Xs`` (on
        ``features``): scikit-learn's squared-error split. Its leaves are
        those one M-step fits to its two sides
        (:meth:`~obliquetrees._training.leaf_models.Gaussian.split_leaves`), its steepness the
        one a stump reaches after ``max_epochs``, as if EM had trained it.
        """
        feature, threshold = best_axis_split(Xs, ys, sws)
        if feature < 0:
            return None
        w = np.zeros(Xs.shape[1])
        w[feature] = 1.0
        b = np.array([-threshold])
        right = _goes_right(Xs, w, b)
        pi = self.leaves.split_leaves(self.grower.value[node], ys, sws, right)
        steepness = self._stump_steepness
        return self._candidate(node, Xs, ys, sws, features, w, b, pi, steepness, right)

    def fit_and_split(self, node):
        """Order "breadth": fit a stump for ``node`` and split it if one was found."""
        stump = self.fit(node)
        if stump is not None:
            self._commit(node, stump)

    def propose(self, node):
        """Order "best": fit a stump for a new node, keep it; return its gain (or None)."""
        stump = self.fit(node)
        if stump is None:
            return None
        self._proposals[node] = stump
        return stump.gain

    def split(self, node):
        """Order "best": split ``node`` with its proposed stump."""
        self._commit(node, self._proposals.pop(node))

    def _commit(self, node, stump):
        g = self.grower
        left, right = g.add_children(node, g.partition(node, stump.goes_right))
        self.features[node], self.weights[node] = stump.features, stump.w
        self.ordered[node] = stump.ordered
        if self.sign is not None:  # scikit-learn's bounds: split at the children's mean
            lo, hi = self.bounds[node]
            if stump.ordered:
                col = self._value_column
                mid = 0.5 * (stump.pi[0, col] + stump.pi[1, col])
                self.bounds[left], self.bounds[right] = (lo, mid), (mid, hi)
            else:
                self.bounds[left] = self.bounds[right] = (lo, hi)
        g.bias[node], g.gamma[node] = stump.b, stump.gamma
        g.value[left], g.value[right] = stump.pi[0], stump.pi[1]

    def grow(self):
        """Grow the tree; returns the :class:`GreedyTree`."""
        self.grower.grow(
            self.fit_and_split if self.grower.order == "breadth" else self.split,
            propose=self.propose,
        )
        a = self.grower.arrays()
        return GreedyTree(
            a["children_left"],
            a["children_right"],
            a["value"],
            a["bias"],
            a["gamma"],
            self.features,
            self.weights,
            self.ordered,
        )


def grow_greedy(Z, y, sw, leaves, params, rng, adjacency, sign=None):
    """The greedy phase (sect. 2.5) on standardised ``Z``: a :class:`GreedyTree`.

    ``leaves`` is the leaf model (:mod:`obliquetrees._training.leaf_models`; an int: that many
    classes) and ``y`` the targets it takes; ``adjacency`` is the full
    image's CSR pixel graph (``spatial_reg``) or None; ``sign`` the
    monotonic constraints of the inputs (or None): every stump is oriented and
    projected onto them once trained (:meth:`_StumpSplitter._constrained`).
    """
    leaves = as_leaf_model(leaves)
    return _StumpSplitter(Z, y, sw, leaves, params, rng, adjacency, sign).grow()
