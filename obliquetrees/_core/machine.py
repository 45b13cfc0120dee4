"""The decision-machine matrix form ``(S, t, B, V)`` of a packed forest.

Split weights ``S``, thresholds ``t = -bias``, template matrix ``B`` and leaf
values ``V``, trees stacked block-diagonally (the mathematics and the paper:
:mod:`obliquetrees.machine`, the public face of this module). Here: building
the matrices from an :class:`~obliquetrees._core.forest.ObliqueForest`
(:func:`machine_of`, cached on the forest), hard evaluation (one BLAS product
``X S^T`` per row block, then leaf selection by template matching in numba),
soft evaluation (the relaxation) and the check of unpickled machines. The
cost rule that picks this path or the traversal is in
:mod:`obliquetrees._core.predict`. Imports numpy and scipy only; the kernels
load numba on first use.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core.feature_ids import as_feature_index
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import missing_terms_at
from obliquetrees._core.validation import (
    INDEX_DTYPE,
    VALUE_DTYPE,
    check_array,
    check_forest_arrays,
    check_int,
    check_n_features,
)

#: Largest margin block (in float64 elements) the BLAS path materialises at once.
BLOCK_ELEMENTS = 1 << 22


# =============================================================== the machine
class DecisionMachine:
    """A tree or forest as the matrices ``(S, t, B, V)`` of a decision machine.

    Build it with :func:`to_machine`. Trees are stacked block-diagonally:
    split columns ``split_offset[k]:split_offset[k + 1]`` and leaf rows
    ``leaf_offset[k]:leaf_offset[k + 1]`` belong to tree ``k``.

    Attributes
    ----------
    S : scipy.sparse.csr_matrix or ndarray, shape (n_splits, n_features)
        Split weights (dense when that takes less memory than CSR).
    S_missing : scipy.sparse.csr_matrix or ndarray, shape (n_splits, n_features)
        Missing-value terms, in the same form as ``S`` (CSR with ``S``'s
        pattern, or dense): a NaN ``x_j`` contributes ``S_missing[i, j]`` to
        margin ``i`` instead of ``S[i, j] x_j``.
    t : ndarray of float64, shape (n_splits,)
        Thresholds, ``t = -bias``: a split goes right iff ``S x - t > 0``.
    bias : ndarray of float64, shape (n_splits,)
        The container's offsets ``b = -t`` (the margin is ``S x + b``).
    B : scipy.sparse.csr_matrix of int8, shape (n_leaves, n_splits)
        Template matrix. Leaves (rows) are stored left to right within each
        tree, entries of a row root first.
    template_skip : ndarray of int64, shape (B.nnz,)
        For every entry of ``B``: the leaf row where template matching
        resumes when the sample disagrees with that entry (the first leaf
        after those sharing the template up to it).
    leaf_norm : ndarray of int64, shape (n_leaves,)
        ``||B_l||_1`` = depth of leaf ``l``.
    V : ndarray of float64, shape (n_leaves, n_outputs)
        Leaf values.
    split_node, leaf_node : ndarray of int64
        Node id (local to its tree) of every split column / leaf row.
    split_offset, leaf_offset : ndarray of int64, shape (n_trees + 1,)
    n_features : int
    """

    def __init__(
        self, S, bias, B, V, split_node, leaf_node, split_offset, leaf_offset, n_features, S_missing
    ):
        self.S = S
        self.S_missing = S_missing
        self.bias = np.ascontiguousarray(bias, dtype=np.float64)
        self.t = -self.bias
        self.B = B
        self.leaf_norm = np.asarray(np.abs(B).sum(axis=1)).ravel().astype(np.int64)
        self.V = np.ascontiguousarray(V, dtype=np.float64)
        self.split_node = split_node
        self.leaf_node = leaf_node
        self.split_offset = split_offset
        self.leaf_offset = leaf_offset
        self.n_features = int(n_features)
        self._B_normalised = None

    # ------------------------------------------------------------ properties
    @property
    def n_trees(self):
        """Number of trees."""
        return int(self.leaf_offset.shape[0] - 1)

    @property
    def n_splits(self):
        """Number of internal nodes over all trees (rows of ``S``)."""
        return int(self.bias.shape[0])

    @property
    def n_leaves(self):
        """Number of leaves over all trees (rows of ``B``)."""
        return int(self.V.shape[0])

    @property
    def n_outputs(self):
        """Number of columns of ``V``."""
        return int(self.V.shape[1])

    @property
    def B_normalised(self):
        """``B~ = diag(1 / ||B_l||_1) B`` as float64 CSR (rows of 1-leaf trees stay 0)."""
        if self._B_normalised is None:
            scale = np.divide(
                1.0, self.leaf_norm, out=np.zeros(self.n_leaves), where=self.leaf_norm > 0
            )
            self._B_normalised = sp.csr_matrix(sp.diags(scale) @ self.B.astype(np.float64))
        return self._B_normalised

    def nbytes(self):
        """Bytes held by ``S``, ``t``, ``B`` and ``V``."""
        return _nbytes(self.S) + self.bias.nbytes + _nbytes(self.B) + self.V.nbytes

    def dense_S(self):
        """``S`` as a dense float64 array."""
        return self.S.toarray() if sp.issparse(self.S) else np.array(self.S)

    # ----------------------------------------------------------- hard form
    def margins(self, X):
        """``S x - t`` for every row: float64 array (n_samples, n_splits).

        Dense ``S``: one BLAS product ``X S^T``; CSR ``S``: a sparse-dense product.
        Rows with NaN: the product on NaN-as-0 inputs, plus the indicator of
        the NaN entries times ``S_missing^T``.
        """
        check_n_features(X, self.n_features, "this DecisionMachine")
        X = _as_float64(X)
        nan = np.isnan(X.data) if sp.issparse(X) else np.isnan(X)
        if nan.any():
            return self._margins_missing(X, nan)
        if sp.issparse(self.S) and not sp.issparse(X):
            from obliquetrees._core import _machine_kernels as K  # numba on first use

            A = np.empty((X.shape[0], self.n_splits))
            K.sparse_margins(
                X,
                self.S.indptr.astype(np.int64, copy=False),
                self.S.indices.astype(np.int64, copy=False),
                self.S.data,
                self.bias,
                A,
            )
            return A
        if sp.issparse(self.S):
            A = (self.S @ X.T).T
        else:
            A = X @ self.S.T
        if sp.issparse(A):  # sparse X times sparse S
            A = A.toarray()
        A = np.ascontiguousarray(A, dtype=np.float64)
        A += self.bias
        return A

    def _margins_missing(self, X, nan):
        if sp.issparse(X):
            X = X.copy()
            X.data[nan] = 0.0
            rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            where = (rows[nan], X.indices[nan])
        else:
            X = np.where(nan, 0.0, X)
            where = np.nonzero(nan)
        A = self.margins(X)
        mask = sp.csr_matrix((np.ones(where[0].shape[0]), where), shape=X.shape)
        A += np.asarray(
            (mask @ self.S_missing.T).toarray()
            if sp.issparse(self.S_missing)
            else mask @ self.S_missing.T
        )
        return A

    def leaf_scores(self, X):
        """The logical similarities ``B~ sgn(S x - t)``, shape (n_samples, n_leaves).

        Dense output: meant for small inputs and tests. The reached leaf of
        each tree scores exactly 1, every other leaf of that tree less.
        """
        H = np.where(self.margins(X) > 0, 1.0, -1.0)
        return np.ascontiguousarray((self.B_normalised @ H.T).T)

    def apply(self, X, n_threads=1):
        """Leaf (local node id) reached in every tree, by template matching.

        Parameters
        ----------
        X : ndarray or CSR matrix, shape (n_samples, n_features)
        n_threads : int, default=1
            Threads for the BLAS product and the selection kernel.

        Returns
        -------
        leaves : ndarray of int64, shape (n_samples, n_trees)
        """
        check_n_features(X, self.n_features, "this DecisionMachine")
        rows = np.empty((X.shape[0], self.n_trees), dtype=np.int64)
        self._run(X, n_threads, rows=rows)
        return self.leaf_node[rows]

    def predict_value(self, X, n_threads=1):
        """Sum over the trees of the value of the selected leaf.

        Same contract as :func:`obliquetrees._core.traversal.predict_value`.
        """
        check_n_features(X, self.n_features, "this DecisionMachine")
        out = np.zeros((X.shape[0], self.n_outputs), dtype=np.float64)
        self._run(X, n_threads, out=out)
        return out

    def _run(self, X, n_threads, rows=None, out=None):
        from contextlib import nullcontext

        from obliquetrees._core import _machine_kernels as K  # numba on first use
        from obliquetrees._core._blas import blas_limit
        from obliquetrees._core._jit import numba_threads

        tindptr, tindex, tright, tskip = self._template_arrays()
        n = X.shape[0]
        block = max(1, BLOCK_ELEMENTS // max(1, self.n_splits))
        # only the dense margin product calls BLAS; limit it to n_threads too
        dense = not sp.issparse(self.S)
        limit = blas_limit(n_threads) if dense else nullcontext()
        with limit, numba_threads(n_threads):
            for s in range(0, n, block):
                e = min(n, s + block)
                H = self._signs(X[s:e], K)
                if rows is not None:
                    K.select_leaves(H, tindptr, tindex, tright, tskip, self.leaf_offset, rows[s:e])
                else:
                    K.select_leaves_value(
                        H, tindptr, tindex, tright, tskip, self.leaf_offset, self.V, out[s:e]
                    )

    def _signs(self, X, K):
        """``S x - t > 0`` (bool, True = right) for a row block."""
        if sp.issparse(self.S) and not sp.issparse(X) and not np.isnan(X).any():
            H = np.empty((X.shape[0], self.n_splits), dtype=np.bool_)
            K.sparse_signs(
                _as_float64(X),
                self.S.indptr.astype(np.int64, copy=False),
                self.S.indices.astype(np.int64, copy=False),
                self.S.data,
                self.bias,
                H,
            )
            return H
        return self.margins(X) > 0

    def _template_arrays(self):
        B = self.B
        return (
            B.indptr.astype(np.int64, copy=False),
            B.indices.astype(np.int64, copy=False),
            B.data > 0,
            self.template_skip,
        )

    # ---------------------------------------------------------- relaxation
    def relaxed_weights(self, X, temperature=0.1, eps=1.0, sigma="saturated"):
        """Soft leaf weights ``softmax(B~ sigma(S x - t) / temperature)`` per tree.

        Parameters
        ----------
        X : ndarray, shape (n_samples, n_features)
        temperature : float, default=0.1
        eps : float, default=1.0
            Width of the transition of ``sigma``.
        sigma : {"saturated", "tanh"}, default="saturated"
            ``"saturated"``: the paper's saturated linear function
            ``clip(z / eps, -1, 1)``; ``"tanh"``: ``tanh(z / eps)``.

        Returns
        -------
        weights : ndarray, shape (n_samples, n_leaves)
            Each tree's block of columns sums to 1.

        Notes
        -----
        With ``"saturated"`` and every ``|margin| >= eps``, ``sigma`` equals
        ``sgn``, so the largest weight of each tree is on the leaf the hard
        machine selects, for any temperature, and the weights tend to the
        one-hot hard selection as ``temperature -> 0`` (the paper's condition).
        """
        Hs = apply_sigma(self.margins(X), eps, sigma)
        Bn = self.B_normalised
        E = np.empty((Hs.shape[0], self.n_leaves))
        from obliquetrees._core import _machine_kernels as K  # numba on first use

        K.relaxed_forward(
            Hs,
            Bn.indptr.astype(np.int64, copy=False),
            Bn.indices.astype(np.int64, copy=False),
            Bn.data,
            self.leaf_offset,
            1.0 / float(temperature),
            E,
        )
        return E

    def relaxed_value(self, X, temperature=0.1, eps=1.0, sigma="saturated"):
        """Sum over the trees of ``softmax(B~ sigma(S x - t) / temperature) V``.

        See :meth:`relaxed_weights`. Returns shape (n_samples, n_outputs);
        divide by ``n_trees`` for the forest mean.
        """
        return self.relaxed_weights(X, temperature, eps, sigma) @ self.V

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_B_normalised"] = None  # derived, rebuilt on demand
        return state

    def __setstate__(self, state):
        # The template-matching kernel follows B and template_skip without
        # bounds checks; a machine is accepted only if rebuilding it from the
        # trees its arrays describe gives exactly the same arrays.
        try:
            if "S_missing" not in state:  # pickled before missing values: terms 0
                S = state["S"]
                zeros = sp.csr_matrix((np.zeros_like(S.data), S.indices, S.indptr), S.shape)
                state = dict(state, S_missing=zeros if sp.issparse(S) else np.zeros_like(S))
            rebuilt = _build(_forest_from_machine_state(state))
            _compare_machines(state, rebuilt)
        except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"Invalid unpickled DecisionMachine: {exc}") from None
        self.__dict__.update(rebuilt.__dict__)

    def __repr__(self):
        kind = "CSR" if sp.issparse(self.S) else "dense"
        return (
            f"DecisionMachine(n_trees={self.n_trees}, n_splits={self.n_splits}, "
            f"n_leaves={self.n_leaves}, n_features={self.n_features}, S={kind})"
        )


def _nbytes(M):
    if sp.issparse(M):
        return M.data.nbytes + M.indices.nbytes + M.indptr.nbytes
    return M.nbytes


def _as_float64(X):
    if sp.issparse(X):
        return X.astype(np.float64) if X.dtype != np.float64 else X
    return np.ascontiguousarray(X, dtype=np.float64)


def apply_sigma(A, eps, sigma):
    """``sigma(A)``: ``clip(A / eps, -1, 1)`` (``"saturated"``) or ``tanh(A / eps)``."""
    if sigma == "saturated":
        return np.clip(A / eps, -1.0, 1.0)
    if sigma == "tanh":
        return np.tanh(A / eps)
    raise ValueError(f"sigma must be 'saturated' or 'tanh'; got {sigma!r}.")


# ================================================================= building
def machine_of(forest, cache=True):
    """The :class:`DecisionMachine` of a packed forest.

    Parameters
    ----------
    forest : ObliqueForest
    cache : bool, default=True
        Keep the machine on the forest object (derived data, never pickled)
        and reuse it on the next call: forests are never modified in place.

    Returns
    -------
    machine : DecisionMachine
    """
    if cache:
        return forest.derived("machine", _checked_build)
    return _checked_build(forest)


def _checked_build(forest):
    forest.check_invariants()  # the machine's kernels trust what is built from it
    return _build(forest)


def _build(forest):
    n_nodes = forest.children_left.shape[0]
    tree_of = np.repeat(np.arange(forest.n_trees), np.diff(forest.node_offset))
    offset = forest.node_offset[tree_of]
    left = np.where(forest.children_left >= 0, forest.children_left + offset, -1)
    right = np.where(forest.children_right >= 0, forest.children_right + offset, -1)
    internal = left >= 0
    split_global = np.flatnonzero(internal)
    leaf_global = np.flatnonzero(~internal)
    split_col = np.full(n_nodes, -1, dtype=np.int64)
    split_col[split_global] = np.arange(split_global.shape[0])
    parent = np.full(n_nodes, -1, dtype=np.int64)
    parent[left[internal]] = split_global
    parent[right[internal]] = split_global
    # template entries: climb from every leaf to its root, all leaves at once
    who_l, cols, signs, depth = [], [], [], []
    cur = leaf_global
    who = np.arange(leaf_global.shape[0], dtype=np.int64)  # which leaf climbs
    while cur.size:
        p = parent[cur]
        keep = p >= 0
        cur, who, p = cur[keep], who[keep], p[keep]
        who_l.append(who)
        cols.append(split_col[p])
        signs.append(np.where(right[p] == cur, 1, -1).astype(np.int8))
        depth.append(forest.depth[p])
        cur = p
    who = np.concatenate(who_l) if who_l else np.zeros(0, np.int64)
    cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    signs = np.concatenate(signs) if signs else np.zeros(0, np.int8)
    depth = np.concatenate(depth) if depth else np.zeros(0, np.int64)
    n_leaves, n_splits = leaf_global.shape[0], split_global.shape[0]
    # leaves left to right within each tree: lexicographic order of their
    # root-first sign sequences (left = -1 < right = +1; no path prefixes another)
    max_depth = int(depth.max()) + 1 if depth.size else 0
    P = np.zeros((n_leaves, max_depth), dtype=np.int8)
    P[who, depth] = signs
    leaf_tree = tree_of[leaf_global]
    perm = np.lexsort(tuple(P[:, j] for j in range(max_depth - 1, -1, -1)) + (leaf_tree,))
    new_row = np.empty(n_leaves, dtype=np.int64)
    new_row[perm] = np.arange(n_leaves)
    leaf_global, leaf_tree, P = leaf_global[perm], leaf_tree[perm], P[perm]
    rows = new_row[who]
    order = np.lexsort((depth, rows))  # root first within a row
    rows, cols, signs, depth = rows[order], cols[order], signs[order], depth[order]
    indptr = np.zeros(n_leaves + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_leaves), out=indptr[1:])
    B = sp.csr_matrix((signs, cols, indptr), shape=(n_leaves, n_splits))
    # skip targets: entry (leaf i, depth j) -> first leaf after the block of
    # leaves sharing i's template prefix through depth j (see the kernel)
    skip = np.empty(rows.shape[0], dtype=np.int64)
    new_group = np.ones(n_leaves, dtype=bool)
    new_group[1:] = leaf_tree[1:] != leaf_tree[:-1]
    for j in range(max_depth):
        new_group[1:] |= P[1:, j] != P[:-1, j]
        starts = np.flatnonzero(new_group)
        ends = np.append(starts[1:], n_leaves)
        end_of = ends[np.cumsum(new_group) - 1]
        at = depth == j
        skip[at] = end_of[rows[at]]
    # S from the per-node CSR rows of the internal nodes
    pointer_rows = np.arange(n_nodes) + tree_of
    starts = forest.weight_indptr[pointer_rows] + forest.weight_offset[tree_of]
    counts = np.diff(forest.weight_indptr)[pointer_rows]
    s_counts = counts[split_global]
    s_indptr = np.zeros(n_splits + 1, dtype=np.int64)
    np.cumsum(s_counts, out=s_indptr[1:])
    take = np.repeat(starts[split_global], s_counts) + (
        np.arange(s_indptr[-1]) - np.repeat(s_indptr[:-1], s_counts)
    )
    shape = (n_splits, forest.n_features)
    S = sp.csr_matrix((forest.weight_value[take], forest.weight_index[take], s_indptr), shape=shape)
    S_missing = sp.csr_matrix(
        (missing_terms_at(forest, take), forest.weight_index[take], s_indptr), shape=shape
    )
    if S.nnz * 12 + s_indptr.nbytes >= n_splits * forest.n_features * 8:
        S, S_missing = S.toarray(), S_missing.toarray()
    split_tree = tree_of[split_global]
    split_offset = np.searchsorted(split_tree, np.arange(forest.n_trees + 1)).astype(np.int64)
    leaf_offset = np.searchsorted(leaf_tree, np.arange(forest.n_trees + 1)).astype(np.int64)
    machine = DecisionMachine(
        S,
        forest.bias[split_global],
        B,
        forest.value[leaf_global],
        split_node=split_global - offset[split_global],
        leaf_node=leaf_global - offset[leaf_global],
        split_offset=split_offset,
        leaf_offset=leaf_offset,
        n_features=forest.n_features,
        S_missing=S_missing,
    )
    machine.template_skip = skip
    return machine


def _check_csr(M, name, shape, dtype):
    if not (sp.issparse(M) and M.format == "csr") or M.shape != shape or M.dtype != dtype:
        raise ValueError(f"{name} must be a {shape} {np.dtype(dtype).name} CSR matrix.")
    indptr, indices = M.indptr, M.indices
    if (
        indptr.shape != (shape[0] + 1,)
        or indptr[0] != 0
        or np.any(np.diff(indptr) < 0)
        or indptr[-1] != indices.shape[0]
        or M.data.shape != indices.shape
    ):
        raise ValueError(f"{name} has a malformed CSR structure.")
    if indices.size and (indices.min() < 0 or indices.max() >= shape[1]):
        raise ValueError(f"{name} has column indices outside [0, {shape[1]}).")


def _forest_from_machine_state(state):
    """The packed forest that a pickled machine's arrays describe (checked).

    Children come from the template rows (root first: each entry's node has
    the next entry's node, or the row's leaf, on the side of its sign),
    depths from the positions in the rows, weights from ``S``.
    """
    i64, f64 = INDEX_DTYPE, VALUE_DTYPE
    n_features = check_int(state["n_features"], "n_features", low=1)
    bias, V = state["bias"], state["V"]
    check_array(bias, "bias", f64, 1)
    check_array(V, "V", f64, 2)
    n_splits, n_leaves = bias.shape[0], V.shape[0]
    offsets = {}
    for name, total in (("split_offset", n_splits), ("leaf_offset", n_leaves)):
        off = state[name]
        check_array(off, name, i64, 1, (state["leaf_offset"].shape[0],))
        if off.shape[0] < 2 or off[0] != 0 or np.any(np.diff(off) < 0) or off[-1] != total:
            raise ValueError(f"{name} must rise from 0 to {total} over at least one tree.")
        offsets[name] = off
    check_array(state["split_node"], "split_node", i64, 1, (n_splits,))
    check_array(state["leaf_node"], "leaf_node", i64, 1, (n_leaves,))
    B, S, S_missing = state["B"], state["S"], state["S_missing"]
    _check_csr(B, "B", (n_leaves, n_splits), np.int8)
    if sp.issparse(S):
        _check_csr(S, "S", (n_splits, n_features), f64)
        _check_csr(S_missing, "S_missing", (n_splits, n_features), f64)
        if not np.array_equal(S.indptr, S_missing.indptr) or not np.array_equal(
            S.indices, S_missing.indices
        ):
            raise ValueError("S_missing must have the pattern of S.")
    else:
        check_array(S, "S", f64, 2, (n_splits, n_features))
        check_array(S_missing, "S_missing", f64, 2, (n_splits, n_features))
    check_array(state["template_skip"], "template_skip", i64, 1, (B.nnz,))
    n_trees = offsets["leaf_offset"].shape[0] - 1
    splits_per_tree = np.diff(offsets["split_offset"])
    leaves_per_tree = np.diff(offsets["leaf_offset"])
    sizes = splits_per_tree + leaves_per_tree
    node_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(node_offset[-1])
    split_tree = np.repeat(np.arange(n_trees), splits_per_tree)
    leaf_tree = np.repeat(np.arange(n_trees), leaves_per_tree)
    local = np.concatenate([state["split_node"], state["leaf_node"]])
    tree = np.concatenate([split_tree, leaf_tree])
    if np.any(local < 0) or np.any(local >= sizes[tree]):
        raise ValueError("split_node/leaf_node ids lie outside their tree.")
    gid = local + node_offset[tree]
    if not np.array_equal(np.bincount(gid, minlength=n), np.ones(n, dtype=np.int64)):
        raise ValueError("split_node and leaf_node do not number each tree's nodes once.")
    split_gid, leaf_gid = gid[:n_splits], gid[n_splits:]
    # children and depths from the template rows
    row = np.repeat(np.arange(n_leaves), np.diff(B.indptr))
    pos = np.arange(B.nnz) - B.indptr[row]
    if np.any(split_tree[B.indices] != leaf_tree[row]) or np.any(np.abs(B.data) != 1):
        raise ValueError("B mixes trees or holds entries other than -1 and +1.")
    last = np.arange(B.nnz) == B.indptr[row + 1] - 1
    following = np.where(last, 0, B.indices[np.minimum(np.arange(B.nnz) + 1, B.nnz - 1)])
    child = np.where(last, leaf_gid[row], split_gid[following])
    parent = split_gid[B.indices]
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    goes_right = B.data > 0
    right[parent[goes_right]] = child[goes_right]
    left[parent[~goes_right]] = child[~goes_right]
    depth[parent] = pos
    depth[leaf_gid] = np.diff(B.indptr)
    if not (
        np.array_equal(right[parent[goes_right]], child[goes_right])
        and np.array_equal(left[parent[~goes_right]], child[~goes_right])
    ):
        raise ValueError("B's rows disagree about a split's children.")
    base = np.repeat(node_offset[:-1], sizes)
    left = np.where(left >= 0, left - base, -1)
    right = np.where(right >= 0, right - base, -1)
    # weights: the S row of each split, in node order
    order = np.argsort(split_gid, kind="stable")
    if sp.issparse(S):
        S_rows, M_rows = S[order], S_missing[order]
    else:  # a stored weight is a non-zero weight or a non-zero missing term
        stored = (S[order] != 0) | (S_missing[order] != 0)
        pattern = sp.csr_matrix(stored)
        rows, cols = pattern.nonzero()
        S_rows = sp.csr_matrix((S[order][rows, cols], (rows, cols)), shape=S.shape)
        M_rows = sp.csr_matrix((S_missing[order][rows, cols], (rows, cols)), shape=S.shape)
    counts = np.zeros(n, dtype=np.int64)
    counts[split_gid[order]] = np.diff(S_rows.indptr)
    cum = np.concatenate([[0], np.cumsum(counts)])
    pointer_tree = np.repeat(np.arange(n_trees), sizes + 1)
    pointer = np.arange(n + n_trees) - pointer_tree
    weight_indptr = cum[pointer] - cum[node_offset[pointer_tree]]
    weight_offset = cum[node_offset]
    node_bias = np.zeros(n)
    node_bias[split_gid] = bias
    value = np.zeros((n, V.shape[1]))
    value[leaf_gid] = V
    arrays = {
        "children_left": left,
        "children_right": right,
        "weight_indptr": weight_indptr,
        "weight_index": as_feature_index(S_rows.indices),
        "weight_value": S_rows.data,
        "weight_missing": M_rows.data,
        "bias": node_bias,
        "value": value,
        "n_node_samples": np.zeros(n),
        "depth": depth,
    }
    check_forest_arrays(arrays, node_offset, weight_offset, n_features, "machine's trees")
    return ObliqueForest(arrays, node_offset, weight_offset, n_features)


def _compare_machines(state, rebuilt):
    """Raise ``ValueError`` unless ``state`` holds exactly ``rebuilt``'s arrays."""
    for name in (
        "bias",
        "V",
        "split_node",
        "leaf_node",
        "split_offset",
        "leaf_offset",
        "template_skip",
    ):
        if not np.array_equal(state[name], getattr(rebuilt, name)):
            raise ValueError(f"{name} does not match the trees the machine describes.")
    for name in ("indptr", "indices", "data"):
        if not np.array_equal(getattr(state["B"], name), getattr(rebuilt.B, name)):
            raise ValueError("B does not match the trees the machine describes.")
    for name in ("S", "S_missing"):
        S, T = state[name], getattr(rebuilt, name)
        if sp.issparse(S) != sp.issparse(T):
            raise ValueError(f"{name} is stored dense/sparse unlike the machine's own choice.")
        parts = (
            ((S.indptr, T.indptr), (S.indices, T.indices), (S.data, T.data))
            if sp.issparse(S)
            else ((S, T),)
        )
        if not all(np.array_equal(a, b) for a, b in parts):
            raise ValueError(f"{name} does not match the trees the machine describes.")


def predict_value(forest, X, n_threads=1):
    """Sum over the trees of the selected leaves' values, in matrix form (BLAS).

    The twin of :func:`obliquetrees._core.traversal.predict_value` (same
    arguments and output) through :func:`machine_of` ``(forest)``.
    """
    return machine_of(forest).predict_value(X, n_threads)
