"""The forward pass of a hinge model on raw input, and its trees in the shared container.

Prediction (:func:`decision_values`, :func:`softmax`), the leaf reached by each training sample
(:func:`leaf_counts`) and the storage of every hinge tree/fern as an
:class:`~obliquetrees._core.tree.ObliqueTree` (:func:`to_trees`), packed
tree by tree into the fitted forest (:func:`to_forest`). The model is
a :class:`~obliquetrees.hinge.training.HingeModel` (read, never changed);
rows are processed in chunks of :data:`PREDICT_CHUNK`; sparse input is
densified one small block of rows at a time (at most :data:`SPARSE_BLOCK`
values), never as a whole, and gives exactly the outputs of the same rows
given dense.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core.feature_ids import keeps_full_row_ids
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import (
    _NODE_ARRAYS,
    _WEIGHT_ARRAYS,
    ObliqueTree,
    fold_standardization,
)
from obliquetrees._core.validation import INDEX_DTYPE, MAX_TOTAL_NODES, check_n_features
from obliquetrees.hinge import _kernels as K

#: Rows per call of the forward kernel in prediction.
PREDICT_CHUNK = 8192
#: Rows per forward pass of :func:`leaf_counts`.
LEAF_COUNT_ROWS = 1024
#: Values (rows x features) of one densified block of sparse input (16 MiB).
SPARSE_BLOCK = 2**21
#: The packed arrays with one entry per stored weight (``weight_indptr`` has one per node).
_PER_WEIGHT = tuple(
    name for name in _WEIGHT_ARRAYS if name not in ("weight_indptr", "weight_index")
)


def _dense_blocks(X, chunk=PREDICT_CHUNK):
    """``(start, rows)`` over ``X`` in row blocks, as float64 dense arrays.

    A sparse ``X`` is densified block by block, with blocks small enough
    that one holds at most :data:`SPARSE_BLOCK` values.
    """
    sparse = sp.issparse(X)
    if sparse:
        X = X.tocsr()
        chunk = max(1, min(chunk, SPARSE_BLOCK // max(X.shape[1], 1)))
    else:
        X = np.asarray(X)
    for start in range(0, X.shape[0], chunk):
        rows = X[start : start + chunk]
        yield start, rows.toarray() if sparse else np.asarray(rows, dtype=np.float64)


def standardise(model, X):
    """Raw input ``X`` in the model's standardised units ``z``."""
    return (X - model.x_mean) / model.z_scale()


def hinge_features(model, Z):
    """Batch-normalised hinge features ``u`` of standardised inputs ``Z``."""
    Hf = Z @ model.A.T
    return (Hf - model.bn_mean) / np.sqrt(model.bn_var + K.BN_EPS)


def tree_outputs(model, U, walk=None):
    """Tree outputs ``|r*| W[leaf]`` of the hinge features ``U`` (C-contiguous).

    Summed over trees (summed head) or one column per tree (linear head).
    With ``walk = (leaf, rstar, vstar)`` (each at least (n, M)) the forward
    record of every (sample, tree) is written there too.
    """
    n = U.shape[0]
    linear = model.head == "linear"
    out = np.empty((n, model.n_trees if linear else model.n_outputs))
    store = walk is not None
    if not store:
        dummy = np.empty((1, 1), dtype=np.int64)
        walk = (dummy, np.empty((1, 1)), dummy)
    K.forward(
        U, model.thr, model.feat, model.W, model.depth, model.is_fern, int(linear), out, walk, store
    )
    return out


def head_outputs(model, out):
    """Raw outputs ``F`` from the tree outputs (identity for the summed head)."""
    if model.head == "linear":
        return out @ model.Q.T + model.q
    return out


def softmax(F):
    """Row-wise softmax of raw outputs ``F`` (class probabilities of logits)."""
    E = np.exp(F - F.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def decision_values(model, X, n_threads=1):
    """Raw outputs (logits or standardised regression values), shape (n, K).

    ``X`` is raw (unstandardised) input, dense or sparse; processed in chunks.
    """
    from obliquetrees._core._blas import blas_limit
    from obliquetrees._core._jit import numba_threads

    check_n_features(X, model.A.shape[1], "the hinge model")
    with blas_limit(1), numba_threads(n_threads):
        return decision_values_in_limits(model, X)


def decision_values_in_limits(model, X):
    """:func:`decision_values` in the caller's thread limits.

    ``threadpool_limits`` scans the loaded libraries on every entry (~4 ms),
    which dominated the per-epoch validation of small data sets.
    """
    res = np.empty((X.shape[0], model.n_outputs))
    for start, Xc in _dense_blocks(X):
        U = np.ascontiguousarray(hinge_features(model, standardise(model, Xc)))
        res[start : start + Xc.shape[0]] = head_outputs(model, tree_outputs(model, U))
    return res


def leaf_counts(model, X, sample_weight, n_threads=1):
    """Weighted number of samples reaching each leaf, shape (M, L).

    Rows are walked :data:`LEAF_COUNT_ROWS` at a time (the walk records of
    all trees for :data:`PREDICT_CHUNK` rows took 25 MiB). Weighted sums keep
    the additions of the former ``PREDICT_CHUNK``-row ``bincount`` passes, in
    the same order (``np.add.at`` adds in index order, as ``bincount`` does),
    so the counts are bit-identical; unit weights give exact integers.
    """
    from obliquetrees._core._blas import blas_limit
    from obliquetrees._core._jit import numba_threads

    M, L = model.W.shape[:2]
    counts = np.zeros(M * L)
    walk = (
        np.empty((LEAF_COUNT_ROWS, M), dtype=np.int64),
        np.empty((LEAF_COUNT_ROWS, M)),
        np.empty((LEAF_COUNT_ROWS, M), dtype=np.int64),
    )
    offsets = (np.arange(M) * L)[None, :]
    with blas_limit(1), numba_threads(n_threads):  # as decision_values
        for start, block in _dense_blocks(X):  # the blocks of the former passes
            group = np.zeros(M * L)
            for sub in range(0, block.shape[0], LEAF_COUNT_ROWS):
                Xc = block[sub : sub + LEAF_COUNT_ROWS]
                U = np.ascontiguousarray(hinge_features(model, standardise(model, Xc)))
                tree_outputs(model, U, walk)
                leaf = walk[0][: Xc.shape[0]]
                leaf += offsets
                rows = sample_weight[start + sub : start + sub + Xc.shape[0]]
                np.add.at(group, leaf.ravel(), np.repeat(rows, M))
            counts += group
    return counts.reshape(M, L)


def to_trees(model, counts, value_scale=1.0):
    """Store every hinge tree/fern as an :class:`ObliqueTree` on the raw input.

    Node ``v`` of the perfect heap-ordered tree tests hinge feature
    ``f = feat[v]`` against threshold ``t``: right iff ``u_f - t > 0`` with
    ``u_f = (A_f . z - bn_mean_f) / sd_f`` and ``z`` the standardised input,
    i.e. weights ``A_f / sd_f`` and bias ``-bn_mean_f / sd_f - t`` on ``z``,
    then folded into raw units. Ferns are stored as trees whose nodes of one
    level share the level's split. Leaf ``value`` holds the leaf weight
    vector ``W[m, l]`` times ``value_scale`` (the tree output is
    ``|r*| value``, see the estimators' Notes); inner nodes hold zeros.
    ``counts`` (M, L) are the training samples per leaf.
    """
    build = _tree_builder(model, counts, value_scale)
    return [build(m) for m in range(model.n_trees)]


def to_forest(model, counts, value_scale=1.0, fold=None):
    """The trees of :func:`to_trees`, each passed through ``fold``, packed in an ObliqueForest.

    The same arrays as ``ObliqueForest.from_trees([fold(t) for t in
    to_trees(model, counts, value_scale)])``, without ever holding the trees
    and the packed forest at once: each tree is built, folded and copied into
    the packed arrays, then dropped, so the peak is the forest plus one tree
    (the forest is most of a fitted model's memory: 100 trees of depth 10 on
    40 features take about 110 MiB, whatever the number of training rows).

    Parameters
    ----------
    model : HingeModel
    counts : ndarray of shape (n_trees, n_leaves)
        Training samples per leaf (see :func:`leaf_counts`).
    value_scale : float, default=1.0
    fold : callable or None, default=None
        ``fold(tree)`` returns the tree to store (e.g. on the original
        features of missing-value-augmented inputs); it may drop or merge
        weights of a node but not add any.

    Returns
    -------
    forest : ObliqueForest
    """
    build = _tree_builder(model, counts, value_scale)
    M, L, _ = model.W.shape
    n_nodes = 2 * L - 1
    if M * n_nodes > MAX_TOTAL_NODES:
        raise ValueError(f"A forest may hold at most {MAX_TOTAL_NODES} nodes in total.")
    # a tree stores at most a dense weight row per inner node; the pages of
    # the bound that are never written are never resident (np.empty)
    capacity = M * (L - 1) * model.A.shape[1]
    packed = {}
    weight_offset = np.zeros(M + 1, dtype=INDEX_DTYPE)
    # stored feature ids: none for full rows (format 4), so a hinge tree on
    # every feature stores none: gathered per tree, not in a capacity buffer
    ids_per_tree = []
    n_features = fill = None
    per_weight = _PER_WEIGHT
    for m in range(M):
        tree = build(m)
        if fold is not None:
            tree = fold(tree)
        # checked tree by tree (the checks' temporaries of the whole forest were ~10% of it);
        # the offsets are right by construction
        tree.check_invariants()
        if not packed:
            n_features, fill = tree.n_features, tree.missing_fill
            if fill is not None:  # compact missing-value terms: one fill for the forest
                per_weight = tuple(name for name in _PER_WEIGHT if name != "weight_missing")
            for name in _NODE_ARRAYS:
                part = getattr(tree, name)
                packed[name] = np.empty((M * n_nodes,) + part.shape[1:], dtype=part.dtype)
            packed["weight_indptr"] = np.empty(M * (n_nodes + 1), dtype=INDEX_DTYPE)
            for name in per_weight:
                packed[name] = np.empty(capacity, dtype=getattr(tree, name).dtype)
        for name in _NODE_ARRAYS:
            packed[name][m * n_nodes : (m + 1) * n_nodes] = getattr(tree, name)
        packed["weight_indptr"][m * (n_nodes + 1) : (m + 1) * (n_nodes + 1)] = tree.weight_indptr
        start, stop = weight_offset[m], weight_offset[m] + tree.weight_value.shape[0]
        if stop > capacity or tree.node_count != n_nodes or tree.n_features != n_features:
            raise RuntimeError("a folded hinge tree has more weights or nodes than when built.")
        if (tree.missing_fill is None) != (fill is None) or (
            fill is not None and not np.array_equal(tree.missing_fill, fill)
        ):
            raise RuntimeError("the folded hinge trees store their missing-value terms unlike.")
        ids = vars(tree)["weight_index"]
        if keeps_full_row_ids(tree.weight_counts(), ids, n_features):
            # from_dense and the folds list a row's features in order: never met
            raise RuntimeError("a folded hinge tree keeps the feature ids of a full row.")
        for name in per_weight:
            packed[name][start:stop] = getattr(tree, name)
        ids_per_tree.append(ids)
        weight_offset[m + 1] = stop
    for name in per_weight:
        # the sole reference: shrinking reallocates in place (no second copy)
        packed[name].resize(int(weight_offset[-1]), refcheck=False)
    packed["weight_index"] = np.concatenate(ids_per_tree)
    packed["missing_fill"] = fill
    node_offset = np.arange(M + 1, dtype=INDEX_DTYPE) * n_nodes
    return ObliqueForest(packed, node_offset, weight_offset, n_features)


def _tree_builder(model, counts, value_scale):
    """``build(m)``: hinge tree ``m`` as an ObliqueTree on the raw input (see :func:`to_trees`)."""
    M, L, C = model.W.shape
    D = model.depth
    n_inner = L - 1
    n_nodes = 2 * L - 1
    p = model.A.shape[1]
    sd = np.sqrt(model.bn_var + K.BN_EPS)
    Wz = model.A / sd[:, None]  # (H, p) weights on z
    bz = -model.bn_mean / sd  # (H,)
    nodes = np.arange(n_nodes)
    left = np.where(nodes < n_inner, 2 * nodes + 1, -1)
    right = np.where(nodes < n_inner, 2 * nodes + 2, -1)
    level = np.floor(np.log2(nodes[:n_inner] + 1)).astype(np.int64)
    depth = np.floor(np.log2(nodes + 1)).astype(np.int64)

    def build(m):
        d_idx = level if model.is_fern else np.arange(n_inner)
        f = model.feat[m, d_idx]
        t = model.thr[m, d_idx]
        dense = np.zeros((n_nodes, p))
        dense[:n_inner] = Wz[f]
        bias = np.zeros(n_nodes)
        bias[:n_inner] = bz[f] - t
        value = np.zeros((n_nodes, C))
        value[n_inner:] = model.W[m] * value_scale
        nns = np.zeros(n_nodes)
        nns[n_inner:] = counts[m]
        for lev in range(D - 1, -1, -1):
            lo, hi = 2**lev - 1, 2 ** (lev + 1) - 1
            idx = np.arange(lo, hi)
            nns[idx] = nns[2 * idx + 1] + nns[2 * idx + 2]
        tree = ObliqueTree.from_dense(left, right, dense, bias, value, nns, depth=depth)
        return fold_standardization(tree, model.x_mean, model.z_scale())

    return build
