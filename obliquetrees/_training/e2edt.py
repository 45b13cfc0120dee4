"""E2EDT training: greedy growth of probabilistic stumps, then joint finetune.

Hehn, Kooij & Hamprecht, "End-to-End Learning of Decision Trees and Forests",
IJCV 2019 (sect. 2). Pure functions over arrays that return
:class:`~obliquetrees._core.tree.ObliqueTree` objects.

Training model: split ``i`` sends ``x`` right with probability
``sigma(gamma_i * (w_i . x + b_i))``; leaves hold class distributions; EM with
closed-form leaves (eq. 13) and Adam on the split objective (eq. 14), with the
steepness ``gamma_i`` raised after every epoch (annealing).

1. Greedy (sect. 2.5), level by level (or best first by information gain
   when ``max_leaf_nodes`` is set, as in the paper's sect. 3.4): every
   candidate leaf is replaced by a stump trained for ``max_epochs`` epochs
   on the samples that reach it by *deterministic* routing; a stump that
   sends all of them one way is retried up to ``max_attempts`` times, then the
   node stays a leaf. Each node's samples are a contiguous slice of one index
   array partitioned in place; the slice is gathered once per stump and the
   whole stump schedule runs in one numba call.
2. Finetune (sect. 2.3): all splits and leaves of the tree jointly, with
   probabilistic routing of all data, for ``finetune_epochs`` epochs; every
   split keeps its own steepness and keeps gaining ``steepness_increase`` per
   epoch. Per minibatch the activations and the weight gradient are GEMMs, one
   per band of feature columns (:class:`TrainingTree`).

Inputs are the standardised training data (or the raw data, with mean 0 and
scale 1, when the estimator's ``standardize=False``); the caller folds the
standardisation into the stored weights.
"""

from dataclasses import dataclass

import numpy as np

from obliquetrees._core.tree import ObliqueTree, fold_standardization
from obliquetrees._core.validation import check_n_features
from obliquetrees._training import _e2edt_kernels as K

ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
#: Rows per block of the E-step pass of the first finetune epoch.
ESTEP_BLOCK = 2048


@dataclass
class E2EDTParams:
    """Resolved hyper-parameters of one E2EDT tree (see the estimator)."""

    max_depth: int = 10
    max_leaf_nodes: int = None
    min_samples_split: int = 2
    max_epochs: int = 20
    finetune_epochs: int = 60
    initial_steepness: float = 1.0
    steepness_increase: float = 0.1
    learning_rate: float = 0.001
    batch_size: int = 1000
    max_attempts: int = 5
    n_sub_features: int = None  # random feature subset per split (None: all)
    image_shape: tuple = None
    patch_size: int = None  # random square patch per split (image inputs)
    spatial_reg: float = 0.0
    bias_init: str = "origin"  # "origin" (official code) or "centroid"


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
    if params.n_sub_features is not None and params.n_sub_features < n_features:
        return np.sort(rng.choice(n_features, params.n_sub_features, replace=False))
    return None


def init_split(rng, Xs, params):
    """Initial hyperplane: direction uniform on the unit sphere (paper).

    The offset is a gap of the paper: ``"origin"`` draws it like the official
    code (PyTorch's Linear init divided by the weight norm, about
    ``U(-sqrt(3/k), sqrt(3/k))``: the plane passes near the origin of the
    standardised data); ``"centroid"`` puts it through the mean of the node's
    samples.
    """
    k = Xs.shape[1]
    w = rng.standard_normal(k)
    w /= np.linalg.norm(w)
    if params.bias_init == "centroid":
        b = -float(Xs.mean(axis=0) @ w)
    else:
        b = float(rng.uniform(-1.0, 1.0)) * np.sqrt(3.0 / k)
    return w, np.array([b])


def _entropy(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _empty_adjacency(k):
    return np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


# ------------------------------------------------------------------ greedy
class _Node:
    __slots__ = (
        "parent",
        "depth",
        "start",
        "end",
        "left",
        "right",
        "value",
        "features",
        "w",
        "b",
        "gamma",
        "stump",
        "gain",
    )

    def __init__(self, parent, depth, start, end, value):
        self.parent, self.depth, self.start, self.end = parent, depth, start, end
        self.left = self.right = -1
        self.value = value
        self.features = self.w = self.b = None
        self.gamma = 0.0
        self.stump = None  # (features, w, b, gamma, pi, right_mask) once fitted
        self.gain = -np.inf


class _Grower:
    def __init__(self, Z, y, sw, n_classes, params, rng, adjacency):
        self.Z, self.y, self.sw = Z, y, sw
        self.n_classes = n_classes
        self.p = params
        self.rng = rng
        self.adjacency = adjacency  # full-image CSR or None
        self.idx = np.arange(Z.shape[0], dtype=np.int64)
        self.nodes = []
        self._local_adj = {}

    def _adjacency_for(self, features, k):
        if self.adjacency is None or self.p.spatial_reg <= 0:
            return _empty_adjacency(k)
        if features is None:
            return self.adjacency
        if self.p.patch_size is not None:
            key = self.p.patch_size
            if key not in self._local_adj:
                self._local_adj[key] = grid_adjacency((key, key))
            return self._local_adj[key]
        return induced_adjacency(features, *self.adjacency, self.Z.shape[1])

    def _splittable(self, node):
        p = self.p
        n = node.end - node.start
        if p.max_depth is not None and node.depth >= p.max_depth:
            return False
        if n < max(2, p.min_samples_split):
            return False
        rows = self.idx[node.start : node.end]
        ys = self.y[rows][self.sw[rows] > 0]
        return ys.size > 0 and np.any(ys != ys[0])

    def fit_candidate(self, node):
        """Fit a stump for ``node`` (up to ``max_attempts`` times)."""
        if not self._splittable(node):
            return False
        p = self.p
        rows = self.idx[node.start : node.end]
        n = rows.shape[0]
        ys = np.ascontiguousarray(self.y[rows])
        sws = np.ascontiguousarray(self.sw[rows])
        X_node = None
        for _ in range(p.max_attempts):
            features = draw_features(self.rng, self.Z.shape[1], p)
            if features is None:
                if X_node is None:
                    whole = node.start == 0 and node.end == self.Z.shape[0]
                    X_node = self.Z if whole else np.ascontiguousarray(self.Z[rows])
                Xs = X_node
            else:
                Xs = np.ascontiguousarray(self.Z[np.ix_(rows, features)])
            k = Xs.shape[1]
            w, b = init_split(self.rng, Xs, p)
            pi = np.full((2, self.n_classes), 1.0 / self.n_classes)
            n_adam = max(p.max_epochs - 1, 0)
            order = self.rng.permuted(np.tile(np.arange(n, dtype=np.int64), (n_adam, 1)), axis=1)
            nb_indptr, nb_indices = self._adjacency_for(features, k)
            gamma = K.fit_stump(
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
                nb_indptr,
                nb_indices,
            )
            n_right, right = K.count_right(Xs, w, b[0])
            if 0 < n_right < n and np.all(np.isfinite(w)) and np.isfinite(b[0]):
                w_right = sws[right].sum()
                w_total = sws.sum()
                frac = w_right / w_total if w_total > 0 else 0.0
                node.gain = _entropy(node.value) - (
                    frac * _entropy(pi[1]) + (1 - frac) * _entropy(pi[0])
                )
                node.stump = (features, w, b[0], gamma, pi, right)
                return True
        return False

    def commit(self, node_id):
        """Turn a fitted candidate into a split with two new leaf children."""
        node = self.nodes[node_id]
        features, w, b, gamma, pi, right = node.stump
        rows = self.idx[node.start : node.end]
        n_left = int(rows.shape[0] - right.sum())
        self.idx[node.start : node.start + n_left] = rows[~right]
        self.idx[node.start + n_left : node.end] = rows[right]
        node.features, node.w, node.b, node.gamma = features, w, b, gamma
        node.stump = None
        children = []
        for value, (s, e) in (
            (pi[0], (node.start, node.start + n_left)),
            (pi[1], (node.start + n_left, node.end)),
        ):
            self.nodes.append(_Node(node_id, node.depth + 1, s, e, value.copy()))
            children.append(len(self.nodes) - 1)
        node.left, node.right = children
        return children

    def grow(self):
        p = self.p
        sws = self.sw
        root_value = np.bincount(self.y, weights=sws, minlength=self.n_classes)
        root_value = root_value / root_value.sum()
        self.nodes = [_Node(-1, 0, 0, self.Z.shape[0], root_value)]
        if p.max_leaf_nodes is None:  # level by level
            frontier = [0]
            while frontier:
                nxt = []
                for node_id in frontier:
                    if self.fit_candidate(self.nodes[node_id]):
                        nxt.extend(self.commit(node_id))
                frontier = nxt
        else:  # best first by information gain (paper sect. 3.4)
            candidates = [0] if self.fit_candidate(self.nodes[0]) else []
            n_leaves = 1
            while candidates and n_leaves < p.max_leaf_nodes:
                best = max(candidates, key=lambda i: (self.nodes[i].gain, -i))
                candidates.remove(best)
                for child in self.commit(best):
                    if self.fit_candidate(self.nodes[child]):
                        candidates.append(child)
                n_leaves += 1
            for i in candidates:
                self.nodes[i].stump = None
        return self.nodes


# ---------------------------------------------------------------- finetune
class TrainingTree:
    """A tree during finetune: split parameters + kernel layout.

    The weights are stored dense, ``W`` of shape (n_splits, n_features), but
    splits restricted to feature subsets (forests) are ordered into *bands*:
    consecutive rows ``r0:r1`` whose features all lie in the column range
    ``c0:c1``. The activation and weight-gradient products run band by band
    on ``W[r0:r1, c0:c1]``, so columns a band never uses cost nothing (a
    10x10 patch of a 16x16 image spans at most 10 image rows: 160 of 256
    columns). Entries outside a split's features are exactly zero and stay
    so (their gradient is zero, and so is their Adam update).

    Parameters
    ----------
    nodes : list of _Node
        The greedy tree, parents before children.
    n_features, n_classes : int
    band_width : int or None
        Splits whose first feature falls in the same block of ``band_width``
        columns (an image row, for patches) form a band; None: one band.
    """

    def __init__(self, nodes, n_features, n_classes, band_width=None):
        n_nodes = len(nodes)
        self.left = np.array([nd.left for nd in nodes], dtype=np.int64)
        self.right = np.array([nd.right for nd in nodes], dtype=np.int64)
        internal = self.left >= 0
        split_nodes = np.flatnonzero(internal)
        feats = [nodes[i].features for i in split_nodes]
        any_subset = any(f is not None for f in feats)
        lo = np.array([0 if f is None else f.min() for f in feats], dtype=np.int64)
        hi = np.array([n_features if f is None else f.max() + 1 for f in feats], dtype=np.int64)
        key = lo // band_width if band_width else np.zeros_like(lo)
        order = np.argsort(key, kind="stable")
        self.split_nodes = split_nodes[order]
        self.leaf_nodes = np.flatnonzero(~internal)
        self.split_col = np.full(n_nodes, -1, dtype=np.int64)
        self.leaf_col = np.full(n_nodes, -1, dtype=np.int64)
        self.split_col[self.split_nodes] = np.arange(self.split_nodes.shape[0])
        self.leaf_col[self.leaf_nodes] = np.arange(self.leaf_nodes.shape[0])
        key, lo, hi = key[order], lo[order], hi[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else []
        ends = list(starts[1:]) + [key.size] if key.size else []
        #: (r0, r1, c0, c1) of every band
        self.bands = [
            (int(r0), int(r1), int(lo[r0:r1].min()), int(hi[r0:r1].max()))
            for r0, r1 in zip(starts, ends, strict=True)
        ]
        n_splits = self.split_nodes.shape[0]
        self.W = np.zeros((n_splits, n_features))
        self.b = np.zeros(n_splits)
        self.gamma = np.zeros(n_splits)
        self.mask = np.zeros((n_splits, n_features), dtype=np.uint8) if any_subset else None
        for c, i in enumerate(self.split_nodes):
            nd = nodes[i]
            if nd.features is None:
                self.W[c] = nd.w
                if self.mask is not None:
                    self.mask[c] = 1
            else:
                self.W[c, nd.features] = nd.w
                self.mask[c, nd.features] = 1
            self.b[c] = nd.b
            self.gamma[c] = nd.gamma
        self.pi = np.array([nodes[i].value for i in self.leaf_nodes], dtype=np.float64)
        self.pi = self.pi.reshape(len(self.leaf_nodes), n_classes)

    @property
    def layout(self):
        return self.left, self.right, self.split_col, self.leaf_col

    @property
    def n_splits(self):
        return self.split_nodes.shape[0]

    @property
    def n_leaves(self):
        return self.leaf_nodes.shape[0]

    def activations(self, X):
        """Split-major activations ``W @ X.T + b``, shape (n_splits, n).

        One GEMM per band, in the dtype of ``X`` (float32 data: float32
        activations).
        """
        Wx = self.W.astype(X.dtype, copy=False)
        XT = np.ascontiguousarray(X.T)  # contiguous bands: ~20 % faster GEMMs (measured)
        A = np.empty((self.n_splits, X.shape[0]), dtype=X.dtype)
        for r0, r1, c0, c1 in self.bands:
            np.matmul(Wx[r0:r1, c0:c1], XT[c0:c1], out=A[r0:r1])
        A += self.b.astype(X.dtype)[:, None]
        return A

    def minus_weight_gradient(self, G, X, out):
        """``out = -(G @ X)`` inside the bands (GEMM per band); rest untouched."""
        for r0, r1, c0, c1 in self.bands:
            np.negative(G[r0:r1] @ X[:, c0:c1], out=out[r0:r1, c0:c1])
            if self.mask is not None:
                out[r0:r1, c0:c1] *= self.mask[r0:r1, c0:c1]


def finetune(tt, Z, y, sw, params, rng, adjacency):
    """Joint EM of all splits and leaves of ``tt`` (in place).

    Epoch: for each shuffled minibatch, E-step (eq. 10) of its samples with
    the current split parameters and the leaves of the previous epoch, then
    one Adam step on eq. 14 (minus eq. 15) with those responsibilities; at the
    end of the epoch, closed-form leaves (eq. 13) from the statistics of all
    minibatches, then every split's steepness grows by ``steepness_increase``.
    The first epoch updates only the leaves, as in the official code. (The
    official code computes all responsibilities once at the start of the
    epoch; computing them per minibatch at the parameters the step starts
    from saves one activation GEMM per minibatch, stores no
    ``n x n_leaves`` matrix, and is what the paper's "each iteration
    evaluates eqs. 10 and 13 and at least one update of eq. 14" allows.)
    """
    p = params
    N = Z.shape[0]
    n_classes = tt.pi.shape[1]
    if tt.n_splits == 0 or p.finetune_epochs <= 0:
        return tt
    lam = p.spatial_reg if adjacency is not None else 0.0
    mask = tt.mask
    if lam > 0 and mask is None:
        mask = np.ones(tt.W.shape, dtype=np.uint8)
    mW = np.zeros_like(tt.W)
    vW = np.zeros_like(tt.W)
    mb = np.zeros_like(tt.b)
    vb = np.zeros_like(tt.b)
    gW = np.zeros_like(tt.W)  # zero outside the bands, always
    gb = np.empty_like(tt.b)
    step = 0
    left, right, split_col, leaf_col = tt.layout
    no_h = np.empty((tt.n_leaves, 0))  # the first epoch needs only the leaf statistics
    for epoch in range(p.finetune_epochs):
        counts = np.zeros((tt.n_leaves, n_classes))
        if epoch == 0:
            for s in range(0, N, ESTEP_BLOCK):
                e = min(s + ESTEP_BLOCK, N)
                A = tt.activations(Z[s:e])
                K.e_step(
                    A,
                    K.steep_activations(A, tt.gamma),
                    tt.gamma,
                    left,
                    right,
                    split_col,
                    leaf_col,
                    tt.pi,
                    y[s:e],
                    sw[s:e],
                    no_h,
                    counts,
                )
        else:
            perm = rng.permutation(N)
            for s in range(0, N, p.batch_size):
                rows = perm[s : s + p.batch_size]
                swb = sw[rows]
                total = swb.sum()
                if total <= 0:
                    continue
                Xb = Z[rows]
                A = tt.activations(Xb)
                G = np.empty_like(A)  # dtype of the data, for the GEMM below
                gb[:] = 0.0
                K.em_batch(
                    A,
                    K.steep_activations(A, tt.gamma),
                    tt.gamma,
                    left,
                    right,
                    split_col,
                    leaf_col,
                    tt.pi,
                    y[rows],
                    swb,
                    swb / total,
                    counts,
                    G,
                    gb,
                )
                np.negative(gb, out=gb)
                tt.minus_weight_gradient(G, Xb, gW)
                if lam > 0:
                    K.add_laplacian_grad(tt.W, mask, adjacency[0], adjacency[1], lam, gW)
                step += 1
                for r0, r1, c0, c1 in tt.bands:
                    K.adam_update_2d(
                        tt.W[r0:r1, c0:c1],
                        gW[r0:r1, c0:c1],
                        mW[r0:r1, c0:c1],
                        vW[r0:r1, c0:c1],
                        step,
                        p.learning_rate,
                        ADAM_BETA1,
                        ADAM_BETA2,
                        ADAM_EPS,
                    )
                K.adam_update(
                    tt.b, gb, mb, vb, step, p.learning_rate, ADAM_BETA1, ADAM_BETA2, ADAM_EPS
                )
        K.leaf_m_step(counts, tt.pi)
        tt.gamma += p.steepness_increase
    return tt


# ------------------------------------------------------------------ driver
def build_tree(X, Z, y, sw, n_classes, mean, scale, params, seed):
    """Grow (and finetune) one E2EDT tree.

    Parameters
    ----------
    X : ndarray (n, p)
        Raw training inputs (for the hard-routed node statistics).
    Z : ndarray (n, p)
        Standardised inputs ``(X - mean) / scale``, C-contiguous float32 or
        float64 (the BLAS products run in its dtype).
    y : int64 (n,)
    sw : float64 (n,)
    n_classes : int
    mean, scale : ndarray (p,)
    params : E2EDTParams
    seed : int

    Returns
    -------
    tree : ObliqueTree
        Weights in raw input units; leaf ``value`` = the trained ``pi``;
        internal ``value`` and ``n_node_samples`` from hard routing of the
        training data.
    steepness : ndarray (n_nodes,)
        Final ``gamma`` of every split (0 at leaves), for soft evaluation.
    """
    rng = np.random.default_rng(seed)
    adjacency = grid_adjacency(params.image_shape) if params.image_shape else None
    grower = _Grower(Z, y, sw, n_classes, params, rng, adjacency)
    nodes = grower.grow()
    band_width = params.image_shape[1] if params.patch_size is not None else None
    tt = TrainingTree(nodes, Z.shape[1], n_classes, band_width)
    finetune(tt, Z, y, sw, params, rng, adjacency)
    return to_oblique_tree(tt, X, y, sw, n_classes, mean, scale)


def to_oblique_tree(tt, X, y, sw, n_classes, mean, scale):
    """Store a training tree as an ObliqueTree in raw units (see build_tree)."""
    from obliquetrees._core import traversal

    n_nodes = tt.left.shape[0]
    weights = np.zeros((n_nodes, tt.W.shape[1]))
    weights[tt.split_nodes] = tt.W
    bias = np.zeros(n_nodes)
    bias[tt.split_nodes] = tt.b
    value = np.zeros((n_nodes, n_classes))
    value[tt.leaf_nodes] = tt.pi
    tree = ObliqueTree.from_dense(tt.left, tt.right, weights, bias, value, np.zeros(n_nodes))
    tree = fold_standardization(tree, mean, scale)
    # hard-routed statistics of the training data, through the shared traversal
    from obliquetrees._core.forest import ObliqueForest

    indicator = traversal.decision_path(ObliqueForest.from_trees([tree], validate=False), X, 1)
    onehot = np.zeros((X.shape[0], n_classes))
    onehot[np.arange(X.shape[0]), y] = sw
    class_counts = np.asarray(indicator.T @ onehot)
    tree.n_node_samples = np.ascontiguousarray(class_counts.sum(axis=1))
    parent = np.full(n_nodes, -1, dtype=np.int64)
    parent[tt.left[tt.split_nodes]] = tt.split_nodes
    parent[tt.right[tt.split_nodes]] = tt.split_nodes
    for node in tt.split_nodes:  # parents come first
        total = class_counts[node].sum()
        if total > 0:
            tree.value[node] = class_counts[node] / total
        elif parent[node] >= 0:  # no training sample reaches it
            tree.value[node] = tree.value[parent[node]]
        else:
            tree.value[node] = 1.0 / n_classes
    steepness = np.zeros(n_nodes)
    steepness[tt.split_nodes] = tt.gamma
    return tree, steepness


# --------------------------------------------------------- soft evaluation
def tree_layout(tree):
    """Kernel layout of a stored tree (parents must precede children)."""
    left = np.ascontiguousarray(tree.children_left)
    right = np.ascontiguousarray(tree.children_right)
    internal = left >= 0
    if np.any(left[internal] <= np.flatnonzero(internal)):
        raise ValueError("soft evaluation needs parents stored before children")
    split_col = np.full(left.shape[0], -1, dtype=np.int64)
    leaf_col = np.full(left.shape[0], -1, dtype=np.int64)
    split_col[internal] = np.arange(internal.sum())
    leaf_col[~internal] = np.arange((~internal).sum())
    return left, right, split_col, leaf_col


def soft_predict_proba(tree, steepness, X):
    """Class probabilities of the probabilistic tree (eq. 2) with ``gamma``."""
    check_n_features(X, tree.n_features, "the tree")
    left, right, split_col, leaf_col = tree_layout(tree)
    internal = left >= 0
    W = tree.dense_weights()[internal]
    A = X @ W.T
    A += tree.bias[internal]
    A = np.ascontiguousarray(A, dtype=np.float64)
    gamma = np.ascontiguousarray(steepness[internal], dtype=np.float64)
    log_mu = K.log_path_probs(A, gamma, left, right, split_col, leaf_col, int((~internal).sum()))
    return np.exp(log_mu) @ tree.value[~internal]
