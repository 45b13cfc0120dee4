"""Decision machines: trees and forests as matrices (Zhang, "Decision Machines").

A binary tree with ``L`` leaves and ``L - 1`` splits is four matrices:

- ``S`` (splits x features): the split weights, one row per internal node;
- ``t`` (splits,): the thresholds, ``t = -b`` in the container's terms (a
  split sends ``x`` right iff ``w . x + b > 0``, i.e. ``S x - t > 0``);
- ``B`` in {-1, 0, 1}^(L x (L-1)), the *template matrix*: row ``l`` holds, for
  every internal node, +1 if leaf ``l`` lies in its right subtree, -1 if in
  its left subtree, 0 if the node is not an ancestor of ``l``;
- ``V`` (leaves x outputs): the leaf values.

With ``sgn(0) = -1`` (ties go left, the package's rule) and ``B~ = diag(1 /
||B_l||_1) B``, the leaf reached by ``x`` is ``argmax_l (B~ sgn(S x - t))_l``
(the paper's "logical decision machine", eq. 3; the maximum is exactly 1
and unique, Theorem 1). Replacing ``sgn`` by an odd saturating ``sigma`` and
the argmax by a softmax with temperature gives the differentiable "analytic
decision machine" (eq. 8)::

    T(x) = softmax(B~ sigma(S x - t) / temperature) V

A forest is the block-diagonal stack of its trees (paper eq. 16), its output
the sum (``predict_value``) or mean of the trees' outputs.

What this module offers
-----------------------
- :func:`to_machine` builds a :class:`DecisionMachine` from any fitted tree or
  forest of the package, a converted scikit-learn model (or a fitted
  scikit-learn tree/forest, converted on the fly), an :class:`ObliqueTree`
  or an :class:`ObliqueForest`. ``S`` and ``B`` are scipy CSR matrices,
  ``S`` dense when that is smaller.
- Matrix-form hard evaluation (:meth:`DecisionMachine.apply`,
  :meth:`DecisionMachine.predict_value`, :func:`predict_value`): all split
  margins of a row block in one BLAS product ``X S^T``, then leaf selection by
  template matching (numba). Same leaves as the traversal kernels except
  where a margin is within rounding of 0 (oblique splits only: the product
  sums in a different order; axis-aligned splits give bit-identical margins).
- The relaxation (:meth:`DecisionMachine.relaxed_value`) with the paper's
  saturated linear ``sigma`` or ``tanh(z / eps)``.
- :func:`choose_inference_path`: the measured rule that picks BLAS or
  traversal for a forest and a batch (``benchmarks/results/decision_machine.md``).
- :func:`finetune`: end-to-end fine-tuning of the split weights and leaf
  values of a fitted classifier or regressor tree/forest with its structure
  kept, through the relaxation with an annealed temperature;
  :func:`refit_leaves`, the leaf-only baseline.

Examples
--------
>>> import numpy as np
>>> from sklearn.datasets import load_iris
>>> from sklearn.ensemble import RandomForestClassifier
>>> from obliquetrees.machine import to_machine
>>> X, y = load_iris(return_X_y=True)
>>> rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
>>> dm = to_machine(rf)
>>> bool(np.array_equal(dm.apply(X.astype(np.float32)), rf.apply(X.astype(np.float32))))
True

References
----------
J. Zhang, "Decision Machines: An Extension of Decision Trees",
arXiv:2101.11347.
"""

import weakref

import numpy as np
import scipy.sparse as sp

from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import ObliqueTree, fold_standardization
from obliquetrees._core.validation import check_n_features
from obliquetrees.base import (
    BaseObliqueForest,
    CreatedFittedMixin,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.utils._param_validation import (
    Integral,
    Interval,
    Real,
    StrOptions,
    validate_params,
)

#: A positive finite float (NaN and inf fail it).
_POSITIVE = Interval(Real, 0, np.inf, closed="neither")
_NON_NEGATIVE_INT = Interval(Integral, 0, None, closed="left")
#: Parameters shared by relaxed_nll and relaxed_squared_error.
_RELAXED_CONSTRAINTS = {
    "machine": "no_validation",
    "X": ["array-like"],
    "temperature": [_POSITIVE],
    "eps": [_POSITIVE],
    "sigma": [StrOptions({"tanh", "saturated"})],
    "sample_weight": ["array-like", None],
    "W": ["array-like", None],
    "b": ["array-like", None],
    "V": ["array-like", None],
}

__all__ = [
    "DecisionMachine",
    "FinetunedForestClassifier",
    "FinetunedForestRegressor",
    "choose_inference_path",
    "finetune",
    "predict_value",
    "refit_leaves",
    "relaxed_nll",
    "relaxed_squared_error",
    "to_machine",
]

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

    def __init__(self, S, bias, B, V, split_node, leaf_node, split_offset, leaf_offset, n_features):
        self.S = S
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
        """
        check_n_features(X, self.n_features, "this DecisionMachine")
        X = _as_float64(X)
        if sp.issparse(self.S) and not sp.issparse(X):
            from obliquetrees._training import _machine_kernels as K  # numba on first use

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
            A = np.ascontiguousarray((self.S @ X.T).T)
        else:
            A = X @ self.S.T
        if sp.issparse(A):  # sparse X times sparse S
            A = A.toarray()
        A = np.ascontiguousarray(A, dtype=np.float64)
        A += self.bias
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

        from obliquetrees._core._blas import blas_limit
        from obliquetrees._core._jit import numba_threads
        from obliquetrees._training import _machine_kernels as K  # numba on first use

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
        if sp.issparse(self.S) and not sp.issparse(X):
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
        Hs = _sigma(self.margins(X), eps, sigma)
        Bn = self.B_normalised
        E = np.empty((Hs.shape[0], self.n_leaves))
        from obliquetrees._training import _machine_kernels as K  # numba on first use

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


def _sigma(A, eps, sigma):
    if sigma == "saturated":
        return np.clip(A / eps, -1.0, 1.0)
    if sigma == "tanh":
        return np.tanh(A / eps)
    raise ValueError(f"sigma must be 'saturated' or 'tanh'; got {sigma!r}.")


# ================================================================= building
#: Built machines, keyed by the identity of the forest's ``children_left``
#: array: a single-tree estimator packs a new ObliqueForest on every call,
#: but over the same arrays. Entries die with the array.
_CACHE = {}


def _cache_get(forest):
    entry = _CACHE.get(id(forest.children_left))
    if (
        entry is not None
        and entry[0]() is forest.children_left
        and entry[1] == (forest.n_trees, id(forest.weight_value), id(forest.bias), id(forest.value))
    ):
        return entry[2]
    return None


def _cache_put(forest, machine):
    key = id(forest.children_left)
    try:
        ref = weakref.ref(forest.children_left)
    except TypeError:  # pragma: no cover - ndarrays support weak references
        return
    ids = (forest.n_trees, id(forest.weight_value), id(forest.bias), id(forest.value))
    _CACHE[key] = (ref, ids, machine)
    weakref.finalize(forest.children_left, _CACHE.pop, key, None)


def _as_forest(model):
    """The packed forest behind ``model`` (see :func:`to_machine`)."""
    if isinstance(model, ObliqueForest):
        return model
    if isinstance(model, ObliqueTree):
        return ObliqueForest.from_trees([model])
    if isinstance(model, list | tuple) and model and all(isinstance(t, ObliqueTree) for t in model):
        return ObliqueForest.from_trees(model)
    if hasattr(model, "_forest"):
        from obliquetrees.utils.validation import check_is_fitted

        check_is_fitted(model)
        return model._forest()
    if type(model).__module__.startswith("sklearn."):
        from obliquetrees.convert import from_sklearn

        return from_sklearn(model)._forest()
    raise TypeError(
        "Expected a fitted obliquetrees estimator, a fitted scikit-learn tree or forest, an "
        f"ObliqueTree, a list of them or an ObliqueForest; got {type(model).__name__}."
    )


@validate_params(
    {"model": "no_validation", "cache": ["boolean"]},
    prefer_skip_nested_validation=True,
)
def to_machine(model, cache=True):
    """The decision machine ``(S, t, B, V)`` of a fitted tree or forest.

    Parameters
    ----------
    model : estimator, ObliqueTree, list of ObliqueTree or ObliqueForest
        Any fitted tree or forest of the package, a converted scikit-learn
        model (:func:`obliquetrees.convert.from_sklearn`), or a fitted
        scikit-learn DecisionTree/RandomForest/ExtraTrees (converted first).
    cache : bool, default=True
        Reuse the machine already built for the same packed arrays (trees and
        forests are never modified in place).

    Returns
    -------
    machine : DecisionMachine
    """
    return _to_machine(model, cache)


def _to_machine(model, cache=True):
    """:func:`to_machine` without parameter validation, for the predict path."""
    forest = _as_forest(model)
    if cache:
        found = _cache_get(forest)
        if found is not None:
            return found
    forest.check_invariants()  # the machine's kernels trust what is built from it
    machine = _build(forest)
    if cache:
        _cache_put(forest, machine)
    return machine


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
    S = sp.csr_matrix(
        (forest.weight_value[take], forest.weight_index[take], s_indptr),
        shape=(n_splits, forest.n_features),
    )
    if S.nnz * 12 + s_indptr.nbytes >= n_splits * forest.n_features * 8:
        S = S.toarray()
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
    from obliquetrees._core.validation import (
        INDEX_DTYPE as i64,
    )
    from obliquetrees._core.validation import (
        VALUE_DTYPE as f64,
    )
    from obliquetrees._core.validation import (
        check_array,
        check_forest_arrays,
        check_int,
    )

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
    B, S = state["B"], state["S"]
    _check_csr(B, "B", (n_leaves, n_splits), np.int8)
    if sp.issparse(S):
        _check_csr(S, "S", (n_splits, n_features), f64)
    else:
        check_array(S, "S", f64, 2, (n_splits, n_features))
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
    S_rows = sp.csr_matrix(S)[order] if n_splits else sp.csr_matrix((0, n_features))
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
        "weight_index": S_rows.indices.astype(np.int64),
        "weight_value": S_rows.data,
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
    S, T = state["S"], rebuilt.S
    if sp.issparse(S) != sp.issparse(T):
        raise ValueError("S is stored dense/sparse unlike the machine's own choice.")
    parts = (
        ((S.indptr, T.indptr), (S.indices, T.indices), (S.data, T.data))
        if sp.issparse(S)
        else ((S, T),)
    )
    if not all(np.array_equal(a, b) for a, b in parts):
        raise ValueError("S does not match the trees the machine describes.")


# ============================================================ inference path
def predict_value(forest, X, n_threads=1):
    """Matrix-form twin of :func:`obliquetrees._core.traversal.predict_value`.

    Parameters
    ----------
    forest : ObliqueForest (or anything :func:`to_machine` takes)
    X : ndarray of float32/float64 or CSR matrix, shape (n_samples, n_features)
    n_threads : int, default=1

    Returns
    -------
    total : ndarray of float64, shape (n_samples, n_outputs)
        Sum over the trees of the selected leaves' values.
    """
    return _to_machine(forest).predict_value(X, n_threads)


#: Constants of the cost model behind :func:`choose_inference_path`, fitted
#: by ``python -m benchmarks.bench_machine --part inference`` on the
#: development machine (see ``benchmarks/results/decision_machine.md``).
#: Nanoseconds: per call, or per row and unit of work.
_COST = {
    "blas_call": 125270.0,  # fixed cost of one BLAS-path call, dense S (BLAS thread limit)
    "blas_call_sparse": 35290.0,  # fixed cost of one BLAS-path call, CSR S
    "blas_flop": 0.04627,  # per multiply-add of the margin product (dense S)
    "blas_sparse": 1.535,  # per stored weight (CSR S, numba margins)
    "blas_row": 2.696,  # per split (sign, margin write)
    "select": 8.518,  # per template entry checked
    "walk_call": 25160.0,  # fixed cost of one traversal call
    "walk_step": 10.98,  # per traversal step (node visited)
    "walk_weight": 1.65,  # per extra weight read in a traversal step
}
#: Batches below this many rows always take the traversal (BLAS set-up costs).
MIN_BLAS_ROWS = 64


def _forest_stats(forest):
    """Per-forest quantities of the cost model, from the forest's arrays only."""
    key = ("stats", id(forest.children_left), id(forest.weight_indptr))
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is forest.children_left:
        return entry[1]
    internal = forest.children_left >= 0
    leaf = ~internal
    tree_of = np.repeat(np.arange(forest.n_trees), np.diff(forest.node_offset))
    # traversal steps per row: the mean leaf depth of every tree, summed
    n_leaves_t = np.bincount(tree_of[leaf], minlength=forest.n_trees)
    depth_sum_t = np.bincount(tree_of[leaf], weights=forest.depth[leaf], minlength=forest.n_trees)
    steps = float(np.sum(depth_sum_t / np.maximum(n_leaves_t, 1)))
    pointer_rows = np.arange(internal.shape[0]) + tree_of
    nnz = np.diff(forest.weight_indptr)[pointer_rows][internal].astype(np.float64)
    n_splits = float(internal.sum())
    mean_nnz = float(nnz.mean()) if nnz.size else 0.0
    sparse = nnz.sum() * 12 < n_splits * forest.n_features * 8  # the machine's choice of S
    stats = {
        "steps": steps,
        "extra_weights": steps * max(mean_nnz - 1.0, 0.0),
        "dense_flops": n_splits * forest.n_features,
        "sparse_nnz": float(nnz.sum()),
        "sparse": bool(sparse),
        # template entries checked per row by the skipping scan: about one per
        # level plus one per skip, i.e. up to twice the path length
        "checks": 2.0 * steps,
        "splits": n_splits,
    }
    try:
        ref = weakref.ref(forest.children_left)
        _CACHE[key] = (ref, stats)
        weakref.finalize(forest.children_left, _CACHE.pop, key, None)
    except TypeError:  # pragma: no cover
        pass
    return stats


def inference_costs(forest, n_samples=1):
    """Modelled time (ns) of the two hard paths: ``{"blas": .., "traversal": ..}``.

    Parameters
    ----------
    forest : ObliqueForest
    n_samples : int, default=1
        Rows of the batch.
    """
    return _costs_from_stats(_forest_stats(_as_forest(forest)), n_samples, _COST)


def _costs_from_stats(s, n, c):
    if s["sparse"]:
        margin, call = s["sparse_nnz"] * c["blas_sparse"], c["blas_call_sparse"]
    else:
        margin, call = s["dense_flops"] * c["blas_flop"], c["blas_call"]
    blas = call + n * (margin + s["splits"] * c["blas_row"] + s["checks"] * c["select"])
    walk = c["walk_call"] + n * (
        s["steps"] * c["walk_step"] + s["extra_weights"] * c["walk_weight"]
    )
    return {"blas": blas, "traversal": walk}


def choose_inference_path(forest, n_samples, sparse_input=False):
    """``"blas"`` or ``"traversal"``: the faster hard-inference path, by a measured rule.

    Parameters
    ----------
    forest : ObliqueForest (or anything :func:`to_machine` takes)
    n_samples : int
        Rows of the batch.
    sparse_input : bool, default=False
        CSR input always takes the traversal (its kernels scatter rows into
        dense blocks; the BLAS path would densify the whole margin product).

    Returns
    -------
    path : {"blas", "traversal"}

    Notes
    -----
    The rule compares modelled batch costs (:func:`inference_costs`), whose
    constants were fitted on this repository's benchmark grid (depth 2..12,
    features, batch size, forest size); batches smaller than
    ``MIN_BLAS_ROWS`` rows always traverse. What it encodes, as measured: the
    BLAS path evaluates all ``2^d - 1`` splits per tree instead of ``d``, so
    it wins only with dense oblique splits on many features and shallow
    trees (256 dense features: up to depth 6-7, up to ~30x on 30 trees;
    16 features: depth 2-3 at most); for axis-aligned splits (converted
    scikit-learn forests) the traversal is faster or within 1.5x everywhere.
    The rule picked the faster path in 90 % of the grid's configurations
    (mean time lost 6 %); see ``benchmarks/results/decision_machine.md``.
    """
    if sparse_input or n_samples < MIN_BLAS_ROWS:
        return "traversal"
    costs = inference_costs(forest, n_samples)
    return "blas" if costs["blas"] < costs["traversal"] else "traversal"


def _choose_from_stats(stats, n_samples, constants=None):
    """The rule of :func:`choose_inference_path` on precomputed statistics."""
    if n_samples < MIN_BLAS_ROWS:
        return "traversal"
    costs = _costs_from_stats(stats, n_samples, _COST if constants is None else constants)
    return "blas" if costs["blas"] < costs["traversal"] else "traversal"


# ================================================================ finetune
def _relaxed_forward(Z, W, b, Bn, leaf_offset, inv_t, eps, sigma):
    """Margins ``A``, ``sigma(A)`` and the per-tree soft leaf weights ``E``."""
    from obliquetrees._training import _machine_kernels as K  # numba on first use

    A = Z @ W.T
    A += b
    Hs = _sigma(A, eps, sigma)
    E = np.empty((Z.shape[0], Bn.shape[0]))
    K.relaxed_forward(
        Hs,
        Bn.indptr.astype(np.int64, copy=False),
        Bn.indices.astype(np.int64, copy=False),
        Bn.data,
        leaf_offset,
        inv_t,
        E,
    )
    return A, Hs, E


def _relaxed_backward(y, sw, A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma):
    """Responsibilities ``R``, ``d(-sum sw log p)/dA`` and ``log p`` per row."""
    from obliquetrees._training import _machine_kernels as K  # numba on first use

    R = np.empty_like(E)
    GH = np.empty_like(Hs)
    logp = np.empty(E.shape[0])
    K.relaxed_backward(
        E,
        V,
        y,
        sw,
        Bn.indptr.astype(np.int64, copy=False),
        Bn.indices.astype(np.int64, copy=False),
        Bn.data,
        leaf_offset,
        inv_t,
        R,
        GH,
        logp,
    )
    GH *= _sigma_derivative(A, Hs, eps, sigma)
    return R, GH, logp


def _sigma_derivative(A, Hs, eps, sigma):
    """``d sigma(A) / dA`` given ``Hs = sigma(A)``."""
    if sigma == "tanh":
        return (1.0 - Hs * Hs) / eps
    return (np.abs(A) < eps) / eps


def _relaxed_squared_error_backward(
    target, sw, A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma, objective
):
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


@validate_params(
    {**_RELAXED_CONSTRAINTS, "y": ["array-like"]},
    prefer_skip_nested_validation=True,
)
def relaxed_nll(
    machine, X, y, temperature, eps=0.1, sigma="tanh", sample_weight=None, W=None, b=None, V=None
):
    """Weighted negative log-likelihood of the relaxed forest and its gradients.

    The objective :func:`finetune` minimises (before its standardisation):
    ``-sum_i sw_i log(mean_t softmax(B~_t sigma(W_t x_i + b_t) / temperature) V_t[:, y_i])``.

    Parameters
    ----------
    machine : DecisionMachine
    X : ndarray (n, n_features)
    y : ndarray of int (n,)
        Column indices of ``V``.
    temperature, eps, sigma
        As in :meth:`DecisionMachine.relaxed_weights`.
    sample_weight : ndarray (n,), default=None
    W, b, V : arrays, default=None
        Split weights (dense), offsets and leaf values to evaluate instead of
        the machine's own.

    Returns
    -------
    loss : float
    grad_W : ndarray (n_splits, n_features)
    grad_b : ndarray (n_splits,)
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    sw = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    W = machine.dense_S() if W is None else W
    b = machine.bias if b is None else b
    V = machine.V if V is None else V
    inv_t = 1.0 / float(temperature)
    A, Hs, E = _relaxed_forward(
        X, W, b, machine.B_normalised, machine.leaf_offset, inv_t, eps, sigma
    )
    _, GA, logp = _relaxed_backward(
        y, sw, A, Hs, E, V, machine.B_normalised, machine.leaf_offset, inv_t, eps, sigma
    )
    return float(-(sw @ logp)), GA.T @ X, GA.sum(axis=0)


@validate_params(
    {
        **_RELAXED_CONSTRAINTS,
        "Y": ["array-like"],
        "objective": [StrOptions({"trees", "forest"})],
    },
    prefer_skip_nested_validation=True,
)
def relaxed_squared_error(
    machine,
    X,
    Y,
    temperature,
    eps=0.1,
    sigma="tanh",
    sample_weight=None,
    W=None,
    b=None,
    V=None,
    objective="trees",
):
    """Weighted squared error of the relaxed trees and its gradients.

    The objective :func:`finetune` minimises for regressors (before its
    standardisation), with ``P_t(x) = softmax(B~_t sigma(W_t x + b_t) /
    temperature) V_t`` the relaxed tree ``t``: ``sum_i sw_i mean_t ||P_t(x_i)
    - Y_i||^2`` (``objective="trees"``) or ``sum_i sw_i ||mean_t P_t(x_i) -
    Y_i||^2`` (``"forest"``).

    Parameters
    ----------
    machine : DecisionMachine
    X : ndarray (n, n_features)
    Y : ndarray (n, n_outputs)
    temperature, eps, sigma
        As in :meth:`DecisionMachine.relaxed_weights`.
    sample_weight : ndarray (n,), default=None
    W, b, V : arrays, default=None
        Split weights (dense), offsets and leaf values to evaluate instead of
        the machine's own.
    objective : {"trees", "forest"}, default="trees"

    Returns
    -------
    loss : float
    grad_W : ndarray (n_splits, n_features)
    grad_b : ndarray (n_splits,)
    grad_V : ndarray (n_leaves, n_outputs)
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
    sw = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    W = machine.dense_S() if W is None else W
    b = machine.bias if b is None else b
    V = machine.V if V is None else V
    inv_t = 1.0 / float(temperature)
    A, Hs, E = _relaxed_forward(
        X, W, b, machine.B_normalised, machine.leaf_offset, inv_t, eps, sigma
    )
    loss, GA, grad_V = _relaxed_squared_error_backward(
        Y, sw, A, Hs, E, V, machine.B_normalised, machine.leaf_offset, inv_t, eps, sigma, objective
    )
    return loss, GA.T @ X, GA.sum(axis=0), grad_V


class _CreatedByFinetune(CreatedFittedMixin):
    _created_by = "obliquetrees.machine.finetune()"
    _refit_advice = "call finetune() on the source model instead."


class FinetunedForestClassifier(_CreatedByFinetune, ObliqueClassifierMixin, BaseObliqueForest):
    """A fine-tuned classifier forest (hard routing), as returned by :func:`finetune`.

    Created fitted; it predicts the mean over its trees of the class
    distribution of the reached leaf (like every hard-routed model of the
    package).

    Parameters
    ----------
    n_jobs : int, default=None
        Threads used by ``predict``/``predict_proba``/``apply``.

    Attributes
    ----------
    trees_ : list of ObliqueTree
    forest_ : ObliqueForest
    classes_ : ndarray of shape (n_classes,)
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when the source model has it.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Impurity-based importances of the splits, summing to 1 (all zeros when
        every tree is a single leaf); each split's impurity decrease is shared
        among its features in proportion to ``|w_j| * std(x_j)``.
    history_ : dict
        ``"loss"`` (relaxed negative log-likelihood per epoch),
        ``"temperature"`` per epoch, ``"weight_density"`` (stored weights per
        split after fine-tuning).
    """


class FinetunedForestRegressor(_CreatedByFinetune, ObliqueRegressorMixin, BaseObliqueForest):
    """A fine-tuned regressor forest (hard routing), as returned by :func:`finetune`.

    Created fitted; it predicts the mean over its trees of the value of the
    reached leaf (like every hard-routed model of the package).

    Parameters
    ----------
    n_jobs : int, default=None
        Threads used by ``predict``/``apply``.

    Attributes
    ----------
    trees_ : list of ObliqueTree
    forest_ : ObliqueForest
    n_outputs_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when the source model has it.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Impurity-based importances of the splits, summing to 1 (all zeros when
        every tree is a single leaf); each split's impurity decrease is shared
        among its features in proportion to ``|w_j| * std(x_j)``.
    history_ : dict
        ``"loss"`` (the relaxed objective's squared error per sample and
        epoch, on targets standardised with the training mean and standard
        deviation),
        ``"temperature"`` per epoch, ``"weight_density"`` (stored weights per
        split after fine-tuning).
    """


def _model_inputs(model, X, y, sample_weight):
    """Source model, forest, task, validated X (float64), targets and weights.

    Classifiers: ``y`` encoded as column indices of the leaf distributions;
    regressors: ``y`` as float64 ``(n, n_outputs)``.
    """
    from sklearn.base import is_classifier, is_regressor
    from sklearn.utils import check_array, check_consistent_length

    from obliquetrees._hinge import HingeForestClassifier, HingeForestRegressor

    if type(model).__module__.startswith("sklearn."):
        from obliquetrees.convert import from_sklearn

        model = from_sklearn(model)
    if isinstance(model, HingeForestClassifier | HingeForestRegressor):
        raise TypeError(
            "finetune/refit_leaves need a model that predicts its leaves' values; a hinge "
            "tree's output also scales with its smallest margin."
        )
    if not (hasattr(model, "_forest") and (is_classifier(model) or is_regressor(model))):
        raise TypeError(
            "finetune/refit_leaves take a fitted classifier or regressor of obliquetrees or a "
            f"fitted scikit-learn tree/forest; got {type(model).__name__}."
        )
    forest = _as_forest(model)
    X = check_array(X, dtype=np.float64, order="C")
    if X.shape[1] != forest.n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model {forest.n_features}.")
    if sample_weight is None:
        sw = np.ones(X.shape[0])
    else:
        sw = np.ascontiguousarray(sample_weight, dtype=np.float64).ravel()
        check_consistent_length(X, sw)
        if np.any(sw < 0) or not np.all(np.isfinite(sw)) or sw.sum() <= 0:
            raise ValueError("sample_weight must be finite, non-negative, not all zero.")
    if is_regressor(model):
        Y = check_array(y, dtype=np.float64, ensure_2d=False, input_name="y")
        Y = Y.reshape(Y.shape[0], -1)
        check_consistent_length(X, Y)
        if Y.shape[1] != forest.n_outputs:
            raise ValueError(f"y has {Y.shape[1]} outputs, the model {forest.n_outputs}.")
        return model, forest, "regression", X, Y, sw
    return (model, forest, "classification", X) + _class_codes(model, forest, X, y) + (sw,)


def _class_codes(model, forest, X, y):
    """``(y,)`` encoded as indices into ``model.classes_``, after checking the leaves."""
    from sklearn.utils import check_consistent_length

    classes = np.asarray(model.classes_)
    leaves = forest.children_left < 0
    V = forest.value[leaves]
    if forest.n_outputs != classes.shape[0] or np.any(V < 0) or not np.allclose(V.sum(axis=1), 1):
        raise ValueError(
            f"{type(model).__name__}'s leaves do not hold class distributions; finetune "
            "works on hard-routed classifiers whose leaf values are class probabilities."
        )
    y = np.asarray(y).ravel()
    check_consistent_length(X, y)
    code = np.searchsorted(classes, y)
    code = np.clip(code, 0, classes.shape[0] - 1)
    if not np.array_equal(classes[code], y):
        raise ValueError("y holds labels that are not among the model's classes_.")
    return (code.astype(np.int64),)


def _hard_em(V, leaf_rows, y, sw, n_iter):
    """Leaf class distributions of the forest mixture under hard routing (EM).

    ``leaf_rows`` (n, n_trees) are global leaf rows. ``n_iter=0``: per-leaf
    weighted class frequencies (each tree on its own). ``n_iter>0``: EM
    iterations on the forest likelihood ``mean_t V[leaf_t(x), y]`` from ``V``;
    responsibilities split each sample between the trees. Leaves reached by
    no sample keep their value.
    """
    from obliquetrees._training import _e2edt_kernels as EK  # numba on first use

    n_leaves, n_classes = V.shape
    V = V.copy()
    flat = leaf_rows.ravel()
    yy = np.repeat(y, leaf_rows.shape[1])
    if n_iter == 0:
        counts = np.zeros((n_leaves, n_classes))
        np.add.at(counts, (flat, yy), np.repeat(sw, leaf_rows.shape[1]))
        EK.leaf_m_step(counts, V)
        return V
    for _ in range(n_iter):
        q = V[leaf_rows, y[:, None]]  # (n, n_trees)
        total = q.sum(axis=1, keepdims=True)
        R = np.divide(q, total, out=np.zeros_like(q), where=total > 0) * sw[:, None]
        counts = np.zeros((n_leaves, n_classes))
        np.add.at(counts, (flat, yy), R.ravel())
        EK.leaf_m_step(counts, V)
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


def _hard_backfit(V, leaf_rows, leaf_offset, Y, sw, n_iter):
    """Leaf values under hard routing for the squared error of the forest mean.

    ``n_iter`` backfitting sweeps (Gauss-Seidel over the trees, from ``V``) on
    ``sum_i sw_i ||mean_t V[leaf_t(x_i)] - Y_i||^2``: each tree's leaves take
    the weighted mean of what the other trees leave unexplained.
    ``leaf_rows`` (n, n_trees) are global leaf rows, tree ``t``'s leaves the
    rows ``leaf_offset[t]:leaf_offset[t + 1]``. Leaves reached by no sample
    keep their value.
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
            total += V[rows] - own
    return V


def _with_values(forest, machine, V):
    """Trees of ``forest`` with leaf values ``V`` (rows as in ``machine``)."""
    trees = []
    for k, tree in enumerate(forest.trees):
        value = tree.value.copy()
        a, b = machine.leaf_offset[k], machine.leaf_offset[k + 1]
        value[machine.leaf_node[a:b]] = V[a:b]
        trees.append(
            ObliqueTree(
                tree.children_left,
                tree.children_right,
                tree.weight_indptr,
                tree.weight_index,
                tree.weight_value,
                tree.bias,
                value,
                tree.n_node_samples,
                n_features=tree.n_features,
                depth=tree.depth,
            )
        )
    return trees


def _new_model(source, trees, history, n_jobs):
    from sklearn.base import is_classifier

    n_jobs = getattr(source, "n_jobs", None) if n_jobs is None else n_jobs
    if is_classifier(source):
        model = FinetunedForestClassifier(n_jobs=n_jobs)
        model.classes_ = np.asarray(source.classes_)
        model.n_classes_ = len(model.classes_)
    else:
        model = FinetunedForestRegressor(n_jobs=n_jobs)
        model.n_outputs_ = trees[0].n_outputs
    model.n_features_in_ = trees[0].n_features
    if hasattr(source, "feature_names_in_"):
        model.feature_names_in_ = source.feature_names_in_
    model.history_ = history
    return model._set_trees(trees)


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


@validate_params(
    {
        "model": "no_validation",
        "X": ["array-like"],
        "y": ["array-like"],
        "sample_weight": ["array-like", None],
        "n_iter": [_NON_NEGATIVE_INT],
        "n_jobs": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def refit_leaves(model, X, y, *, sample_weight=None, n_iter=10, n_jobs=None):
    """Leaf-only baseline: the same splits, leaf values refitted on (X, y).

    Parameters
    ----------
    model : fitted classifier or regressor
        As for :func:`finetune`.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    sample_weight : array-like of shape (n_samples,), default=None
    n_iter : int, default=10
        0: per-leaf class frequencies (classifiers) or mean targets
        (regressors) of the samples each leaf receives, every tree on its own
        (how regressors fine-tuned with ``objective="trees"`` end). >0: that
        many iterations, from the model's leaves, on the forest's mean
        prediction (how ``objective="forest"`` ends): EM on the likelihood
        (classifiers), backfitting sweeps on the squared error (regressors).
    n_jobs : int, default=None
        ``n_jobs`` of the returned model (None: the source's).

    Returns
    -------
    model : FinetunedForestClassifier or FinetunedForestRegressor
    """
    source, forest, task, X, y, sw = _model_inputs(model, X, y, sample_weight)
    machine = to_machine(forest, cache=False)
    rows = _leaf_rows_hard(forest, machine, X)
    if task == "regression" and n_iter == 0:
        V = _hard_leaf_means(machine.V, rows, y, sw)
    elif task == "regression":
        V = _hard_backfit(machine.V, rows, machine.leaf_offset, y, sw, int(n_iter))
    else:
        V = _hard_em(machine.V, rows, y, sw, int(n_iter))
    trees = _node_statistics(_with_values(forest, machine, V), X, sw)
    return _new_model(source, trees, {"loss": [], "temperature": []}, n_jobs)


def _leaf_rows_hard(forest, machine, X):
    """Global leaf rows (n, n_trees) reached by traversal (the predict routing)."""
    from obliquetrees._core import traversal  # numba on first use

    local = traversal.apply(forest, X, 1)
    # local node id -> leaf row, per tree
    lookup = np.full(forest.children_left.shape[0], -1, dtype=np.int64)
    tree_of_leaf = np.repeat(np.arange(machine.n_trees), np.diff(machine.leaf_offset))
    lookup[forest.node_offset[tree_of_leaf] + machine.leaf_node] = np.arange(machine.n_leaves)
    return lookup[local + forest.node_offset[:-1][None, :]]


def _check_finite(*arrays, when):
    """Raise a ``ValueError`` if fine-tuning produced a non-finite parameter."""
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise ValueError(
            f"finetune diverged {when} (non-finite split or leaf parameters); "
            "lower learning_rate or check the scale of X and y."
        )


#: BLAS threads inside fine-tuning: fixed, so the result never depends on the
#: machine or on n_jobs (DESIGN.md decision 8).
TRAIN_BLAS_THREADS = 1


@validate_params(
    {
        "model": "no_validation",
        "X": ["array-like"],
        "y": ["array-like"],
        "sample_weight": ["array-like", None],
        "epochs": [_NON_NEGATIVE_INT],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [_POSITIVE],
        "temperature": [_POSITIVE, tuple, list],
        "eps": [_POSITIVE],
        "sigma": [StrOptions({"tanh", "saturated"})],
        "support": [StrOptions({"original", "dense"}), _NON_NEGATIVE_INT],
        "objective": [StrOptions({"forest", "trees"}), None],
        "refit_iter": [_NON_NEGATIVE_INT],
        "random_state": [_NON_NEGATIVE_INT, None],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def finetune(
    model,
    X,
    y,
    *,
    sample_weight=None,
    epochs=20,
    batch_size=256,
    learning_rate=0.01,
    temperature=(0.1, 0.01),
    eps=0.1,
    sigma="tanh",
    support="original",
    objective=None,
    refit_iter=10,
    random_state=0,
    n_jobs=None,
    verbose=0,
):
    """Fine-tune a fitted tree/forest end to end, structure kept.

    The forest's prediction ``mean_t softmax(B~_t sigma(S_t x - t_t) /
    temperature) V_t`` (the analytic decision machine of every tree, averaged)
    is trained with the temperature annealed geometrically from
    ``temperature[0]`` to ``temperature[1]``, split weights and offsets by
    Adam on minibatches. Classifiers: on the likelihood of ``y`` under the
    forest's mean class distribution, leaf distributions by the closed-form
    EM step of the forest mixture (E2EDT's M-step, run once per epoch on the
    epoch's responsibilities); at the end the leaves are refitted under hard
    routing (``refit_iter`` EM iterations, as :func:`refit_leaves`).
    Regressors: on a weighted squared error (targets standardised with their
    training mean and standard deviation), leaf values by Adam with the
    splits, either of every tree's own relaxed prediction (``objective=
    "trees"``, then each leaf takes the mean target of the samples it
    receives under hard routing) or of the forest's mean prediction
    (``"forest"``, then ``refit_iter`` backfitting sweeps). The trees are
    returned as a deterministic, hard-routed model.

    Parameters
    ----------
    model : fitted classifier or regressor
        An obliquetrees model that predicts the mean of its reached leaves'
        values (E2EDT, CO2, soft trees routed hard, converted models; not hinge
        forests, whose output also depends on a margin) or a fitted
        scikit-learn DecisionTree / RandomForest / ExtraTrees classifier or
        regressor (converted with :func:`obliquetrees.convert.from_sklearn`).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Labels among ``model.classes_`` (classifiers) or targets.
    sample_weight : array-like of shape (n_samples,), default=None
    epochs : int, default=20
    batch_size : int, default=256
    learning_rate : float, default=0.01
        Adam step size (on standardised, unit-norm split parameters).
    temperature : float or (float, float), default=(0.1, 0.01)
        Softmax temperature at the first and the last epoch (geometric in
        between); a float keeps it fixed.
    eps : float, default=0.1
        Width of ``sigma``'s transition, in units of the standardised input
        (every split is rescaled to a unit normal first, so a margin is a
        signed distance).
    sigma : {"tanh", "saturated"}, default="tanh"
        ``tanh(z / eps)`` or the paper's saturated linear function (zero
        gradient outside ``[-eps, eps]``).
    support : {"original", "dense"} or int, default="original"
        Which weights may change. ``"original"``: only the stored (non-zero)
        weights and the offsets, so an axis-aligned split stays axis-aligned
        and prediction cost is unchanged; ``"dense"``: every feature; an int
        ``k``: the stored weights plus, per split, the ``k`` features with the
        largest initial gradient.
    objective : {"forest", "trees"} or None, default=None
        What the relaxation is trained on. ``"forest"``: the forest's mean
        prediction (the only choice for classifiers: the likelihood of the
        forest mixture). ``"trees"`` (regressors): every tree's own squared
        error, like the independently grown trees of a random forest. None:
        ``"forest"`` for classifiers, ``"trees"`` for regressors. Measured on
        converted random forests of regressors
        (``benchmarks/results/decision_machine.md``): ``"forest"`` raised
        test R^2 by up to 0.11 where data are plentiful for the number of
        leaves but overfitted small or noisy sets badly (every leaf of every
        tree is a free parameter of one additive model); ``"trees"`` stayed
        within 0.03 of the forest it starts from, either way. Neither wins
        everywhere: compare them on held-out data.
    refit_iter : int, default=10
        Iterations of the final hard leaf refit of the ``"forest"`` objective
        (EM for classifiers, backfitting for regressors; 0: per-leaf class
        frequencies / mean targets, every tree on its own).
    random_state : int, default=0
        Seed of the minibatch order; the same seed gives the same model.
    n_jobs : int, default=None
        Threads of the numba kernels during training and ``n_jobs`` of the
        returned model. Results do not depend on it.
    verbose : int, default=0

    Returns
    -------
    model : FinetunedForestClassifier or FinetunedForestRegressor
        Same trees (node ids, children) with new split weights, offsets and
        leaf values; ``history_`` holds the training curve.

    Raises
    ------
    ValueError
        If a parameter is out of range, or if the optimisation diverges (a
        split or leaf parameter becomes NaN or infinite, checked after every
        epoch and after the final refit): no model with non-finite
        parameters is ever returned; ``model`` is never modified.

    Notes
    -----
    Gaps the paper leaves open, filled here: the loss (the negative
    log-likelihood of the forest's mean class distribution; the squared error
    of each tree or of the forest for regressors), the optimiser (Adam for
    splits, EM for classifier leaves, from E2EDT; Adam for regressor
    leaves), the temperature schedule,
    working on standardised inputs with unit-norm splits (folded back into
    raw units when stored), and the final hard leaf refit.
    """
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads
    from obliquetrees._training import _e2edt_kernels as EK  # numba on first use

    if isinstance(temperature, Real):
        temperature = (float(temperature), float(temperature))
    if len(temperature) != 2 or not all(_POSITIVE.is_satisfied_by(v) for v in temperature):
        raise ValueError(
            f"temperature must be a positive finite float or a pair of them; got {temperature!r}."
        )
    t0, t1 = (float(v) for v in temperature)
    epochs, batch_size = int(epochs), int(batch_size)
    from joblib import effective_n_jobs

    threads = max(1, effective_n_jobs(n_jobs))
    source, forest, task, X, y, sw = _model_inputs(model, X, y, sample_weight)
    regression = task == "regression"
    if objective is None:
        objective = "trees" if regression else "forest"
    elif objective == "trees" and not regression:
        raise ValueError(
            "objective='trees' is for regressors; classifiers fine-tune the "
            "forest's likelihood (objective='forest')."
        )
    machine = to_machine(forest, cache=False)
    n, p = X.shape

    # standardised input, unit-norm splits: margin = signed distance
    mean = np.average(X, axis=0, weights=sw)
    scale = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=sw))
    scale[scale <= 0] = 1.0
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
    rng = np.random.default_rng(random_state)
    if regression:  # standardised targets and leaf values (the mean of trees commutes)
        y_mean = np.average(y, axis=0, weights=sw)
        y_scale = np.sqrt(np.average((y - y_mean) ** 2, axis=0, weights=sw))
        y_scale[y_scale <= 0] = 1.0
        target = (y - y_mean) / y_scale
        V = (machine.V - y_mean) / y_scale
    else:  # smooth the leaves a little so no class has probability exactly 0
        V = (machine.V + 1e-3) / (1.0 + 1e-3 * machine.n_outputs)
        onehot = np.zeros((n, machine.n_outputs))
        onehot[np.arange(n), y] = 1.0

    def forward(Zb, inv_t):
        return _relaxed_forward(Zb, W, b, Bn, leaf_offset, inv_t, eps, sigma)

    def backward(rows, A, Hs, E, inv_t):
        """Batch loss, d loss / d margins, and the leaves' statistic or gradient."""
        if regression:
            return _relaxed_squared_error_backward(
                target[rows], sw[rows], A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma, objective
            )
        R, GA, logp = _relaxed_backward(
            y[rows], sw[rows], A, Hs, E, V, Bn, leaf_offset, inv_t, eps, sigma
        )
        finite = np.isfinite(logp)
        return -float(sw[rows][finite] @ logp[finite]), GA, (R * sw[rows, None]).T @ onehot[rows]

    # support mask
    if support == "dense":
        mask = None
    else:
        mask = (S != 0).astype(np.float64)
        if not isinstance(support, str) and support > 0:
            with (
                threadpool_limits(limits=TRAIN_BLAS_THREADS, user_api="blas"),
                numba_threads(threads),
            ):
                G = np.zeros_like(W)
                for s in range(0, n, 4096):
                    rows = np.arange(s, min(s + 4096, n))
                    A, Hs, E = forward(Z[rows], 1.0 / t0)
                    G += backward(rows, A, Hs, E, 1.0 / t0)[1].T @ Z[rows]
            G = np.abs(G)
            G[mask > 0] = -1.0
            k = min(int(support), p)
            top = np.argpartition(-G, k - 1, axis=1)[:, :k]
            np.put_along_axis(mask, top, 1.0, axis=1)
    if mask is not None:
        W *= mask

    mW, vW = np.zeros_like(W), np.zeros_like(W)
    mb, vb = np.zeros_like(b), np.zeros_like(b)
    mV, vV = np.zeros_like(V), np.zeros_like(V)
    step = 0
    history = {"loss": [], "temperature": []}
    with threadpool_limits(limits=TRAIN_BLAS_THREADS, user_api="blas"), numba_threads(threads):
        for epoch in range(epochs):
            tau = t0 * (t1 / t0) ** (epoch / max(epochs - 1, 1))
            inv_t = 1.0 / tau
            perm = rng.permutation(n)
            counts = np.zeros_like(V)
            loss = 0.0
            for s in range(0, n, batch_size):
                rows = perm[s : s + batch_size]
                total = sw[rows].sum()
                if total <= 0:
                    continue
                A, Hs, E = forward(Z[rows], inv_t)
                batch_loss, GA, leaves = backward(rows, A, Hs, E, inv_t)
                loss += batch_loss
                gW = GA.T @ Z[rows]
                gW /= total
                if mask is not None:
                    gW *= mask
                gb = GA.sum(axis=0) / total
                step += 1
                EK.adam_update(
                    W.reshape(-1),
                    gW.reshape(-1),
                    mW.reshape(-1),
                    vW.reshape(-1),
                    step,
                    learning_rate,
                    0.9,
                    0.999,
                    1e-8,
                )
                EK.adam_update(b, gb, mb, vb, step, learning_rate, 0.9, 0.999, 1e-8)
                if regression:
                    leaves /= total
                    EK.adam_update(
                        V.reshape(-1),
                        leaves.reshape(-1),
                        mV.reshape(-1),
                        vV.reshape(-1),
                        step,
                        learning_rate,
                        0.9,
                        0.999,
                        1e-8,
                    )
                else:
                    counts += leaves
            if not regression:
                EK.leaf_m_step(counts, V)
            _check_finite(W, b, V, when=f"at epoch {epoch + 1}")
            history["loss"].append(loss / sw.sum())
            history["temperature"].append(tau)
            if verbose:
                name = "relaxed MSE" if regression else "relaxed NLL"
                print(
                    f"finetune epoch {epoch + 1}/{epochs}: temperature {tau:.4g}, "
                    f"{name} {history['loss'][-1]:.4f}"
                )

    # back to raw units, hard leaf refit, container
    trees = []
    for k, tree in enumerate(forest.trees):
        a, c = machine.split_offset[k], machine.split_offset[k + 1]
        weights = np.zeros((tree.node_count, p))
        bias = np.zeros(tree.node_count)
        weights[machine.split_node[a:c]] = W[a:c]
        bias[machine.split_node[a:c]] = b[a:c]
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
    tuned = ObliqueForest.from_trees(trees, validate=False)
    rows = _leaf_rows_hard(tuned, machine, X)
    if regression and objective == "trees":
        V = _hard_leaf_means(V * y_scale + y_mean, rows, y, sw)
    elif regression:
        V = _hard_backfit(V * y_scale + y_mean, rows, leaf_offset, y, sw, int(refit_iter))
    else:
        V = _hard_em(V, rows, y, sw, int(refit_iter))
    trees = _node_statistics(_with_values(tuned, machine, V), X, sw)
    _check_finite(
        *(getattr(t, name) for t in trees for name in ("weight_value", "bias", "value")),
        when="in the final leaf refit",
    )
    n_splits = max(machine.n_splits, 1)
    history["weight_density"] = float(sum(t.weight_index.shape[0] for t in trees) / n_splits)
    return _new_model(source, trees, history, n_jobs)
