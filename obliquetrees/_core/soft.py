"""Soft evaluation of a stored tree: the one kernel behind soft routing.

A soft tree (and an E2EDT tree with ``routing="soft"``) predicts the sum over
leaves of path probability times leaf value, where a split sends a row right
with probability ``sigmoid(s_j * (w_j.x + b_j))``: the container's hard rule
(right iff ``w.x + b > 0``) is its limit ``s_j -> inf``. ``s_j`` is the
split's steepness (E2EDT stores one per node; soft trees use 1, which leaves
every bit as without it). A NaN ``x_j`` contributes the weight's
missing-value term instead of ``w_j x_j``, as in hard routing.

CSR input is never densified: each split's margin is summed from the row's
stored entries through a feature-major copy of the weights
(:func:`feature_major_weights`), so memory is independent of ``n_features``
and the results are those of the dense rows, bit for bit (see
:func:`soft_predict`).
"""

import numpy as np
import scipy.sparse as sp
from numba import types

from obliquetrees._core._jit import jit, jit_inline, jit_overload, jit_parallel, prange
from obliquetrees._core._math import log_sigmoid_pair
from obliquetrees._core.validation import check_n_features

#: Rows per chunk of the parallel kernel (fixed: results do not depend on the
#: thread count).
CHUNK = 256
#: Soft prediction of at most this many rows runs serially (a thread pool
#: start-up costs more than the work).
SERIAL_PREDICT_ROWS = 2048


def row_margins(X, i, layout, weight, missing, bias, margin):
    """``w.x + b`` of every node for row ``i`` of ``X``, into ``margin`` (numba only).

    ``X`` is a dense array, with ``layout = (weight_indptr, weight_index)``, or
    a CSR ``(indptr, indices, data)``, with :func:`feature_major_weights`'s
    layout. Each node sums its terms in storage order, a NaN ``x_j``
    contributing the missing-value term instead.
    """


@jit_overload(row_margins, inline="always")
def _row_margins(X, i, layout, weight, missing, bias, margin):
    if isinstance(X, types.Array):

        def dense(X, i, layout, weight, missing, bias, margin):
            indptr, index = layout
            for j in range(margin.shape[0]):
                a = bias[j]
                for q in range(indptr[j], indptr[j + 1]):
                    x = X[i, index[q]]
                    a += weight[q] * x if x == x else missing[q]
                margin[j] = a

        return dense

    def csr(X, i, layout, weight, missing, bias, margin):
        _csr_margins(X, i, layout, weight, missing, bias, margin)

    return csr


@jit_inline
def _soft_predict_row(X, i, layout, tree, margin, logp, out):
    """Soft output of row ``i`` of ``X`` (see :func:`row_margins`), added into ``out[i]``.

    Parents precede children, so one sweep carries every node's log path
    probability down to the leaves.
    """
    left_child, right_child, weight, missing, bias, steep, value = tree
    row_margins(X, i, layout, weight, missing, bias, margin)
    K = value.shape[1]
    logp[0] = 0.0
    for j in range(left_child.shape[0]):
        left = left_child[j]
        if left < 0:
            p = np.exp(logp[j])
            if p > 0.0:
                for k in range(K):
                    out[i, k] += p * value[j, k]
        else:
            right, left_term = log_sigmoid_pair(margin[j] * steep[j])
            logp[right_child[j]] = logp[j] + right
            logp[left] = logp[j] + left_term


@jit_inline
def _csr_margins(X, i, layout, weight, missing, bias, margin):
    """``w.x + b`` of every node for row ``i`` of a CSR ``X = (indptr, indices, data)``.

    Each node's terms are summed in its storage order.

    ``layout`` is :func:`feature_major_weights`'s. Terms of features the row
    does not store (``w_j * 0``, a signed zero) are left out: adding a zero
    changes no sum but a zero's sign, which no soft output depends on.
    In order (every node's feature ids increase): the row's entries, in
    increasing feature order, add their terms to their nodes, which is each
    node's storage order. Otherwise each node looks its features up in the
    row (binary search over its sorted column indices), in storage order.
    """
    Xptr, Xidx, Xval = X
    features, fptr, fweight, node_of, indptr, index, in_order = layout
    for j in range(margin.shape[0]):
        margin[j] = bias[j]
    lo = Xptr[i]
    hi = Xptr[i + 1]
    if in_order:
        for k in range(lo, hi):
            f = Xidx[k]
            u = np.searchsorted(features, f)
            if u < features.shape[0] and features[u] == f:
                x = Xval[k]
                for t in range(fptr[u], fptr[u + 1]):
                    q = fweight[t]
                    margin[node_of[q]] += weight[q] * x if x == x else missing[q]
        return
    for j in range(margin.shape[0]):
        for q in range(indptr[j], indptr[j + 1]):
            k = lo + np.searchsorted(Xidx[lo:hi], index[q])
            if k < hi and Xidx[k] == index[q]:
                x = Xval[k]
                margin[j] += weight[q] * x if x == x else missing[q]


@jit_parallel
def soft_predict_parallel(X, n_rows, layout, tree):
    """Soft output of a stored tree, ``prange`` over fixed chunks of rows.

    ``X`` and ``layout`` as :func:`row_margins` takes them; ``tree`` is
    ``(children_left, children_right, weight_value, weight_missing, bias,
    steepness, value)``, ``value`` of shape (n_nodes, n_outputs) (rows of
    internal nodes are ignored). Per chunk of rows it holds two arrays of
    ``n_nodes`` entries.
    """
    n_nodes = tree[0].shape[0]
    out = np.zeros((n_rows, tree[6].shape[1]))
    n_chunks = (n_rows + CHUNK - 1) // CHUNK
    for c in prange(n_chunks):
        margin = np.empty(n_nodes)
        logp = np.empty(n_nodes)
        for i in range(c * CHUNK, min(n_rows, (c + 1) * CHUNK)):
            _soft_predict_row(X, i, layout, tree, margin, logp, out)
    return out


@jit
def soft_predict_serial(X, n_rows, layout, tree):
    """:func:`soft_predict_parallel` without threads (small inputs: no pool start-up)."""
    n_nodes = tree[0].shape[0]
    out = np.zeros((n_rows, tree[6].shape[1]))
    margin = np.empty(n_nodes)
    logp = np.empty(n_nodes)
    for i in range(n_rows):
        _soft_predict_row(X, i, layout, tree, margin, logp, out)
    return out


def feature_major_weights(tree):
    """The split weights of ``tree`` grouped by feature, for margins from CSR rows.

    Returns
    -------
    layout : tuple
        ``(features, fptr, fweight, node_of, indptr, index, in_order)``:
        ``features`` the distinct feature ids with a stored weight
        (ascending); the weights on ``features[u]`` are
        ``fweight[fptr[u]:fptr[u + 1]]`` (positions in ``weight_value``,
        ascending); ``node_of[q]`` is the node of weight ``q``; ``indptr``
        and ``index`` the tree's ``weight_indptr`` and explicit
        ``weight_index``; ``in_order`` whether every node's feature ids
        strictly increase (always so for the trees the package grows: the
        fast path of :func:`_csr_margins`). O(n_weights) memory.
    """
    index = np.ascontiguousarray(tree.weight_index, dtype=np.int64)
    counts = tree.weight_counts()
    node_of = np.repeat(np.arange(tree.node_count, dtype=np.int64), counts)
    step = np.diff(index)
    in_order = bool(np.all((step > 0) | (node_of[1:] != node_of[:-1])))
    fweight = np.argsort(index, kind="stable")
    features, per_feature = np.unique(index[fweight], return_counts=True)
    fptr = np.zeros(features.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_feature, out=fptr[1:])
    return features, fptr, fweight, node_of, tree.weight_indptr, index, in_order


def _read_only(array):
    view = array.view()
    view.flags.writeable = False
    return view


@jit_inline
def _path_probabilities_row(X, i, layout, tree, margin, logp, out):
    """Path probability of every node for row ``i`` (as :func:`_soft_predict_row` sweeps)."""
    left_child, right_child, weight, missing, bias, steep, _ = tree
    row_margins(X, i, layout, weight, missing, bias, margin)
    logp[0] = 0.0
    for j in range(left_child.shape[0]):
        out[i, j] = np.exp(logp[j])
        left = left_child[j]
        if left >= 0:
            right, left_term = log_sigmoid_pair(margin[j] * steep[j])
            logp[right_child[j]] = logp[j] + right
            logp[left] = logp[j] + left_term


@jit_parallel
def path_probabilities_parallel(X, n_rows, layout, tree):
    """Every node's path probability, ``(n_rows, n_nodes)``; ``prange`` over chunks of rows."""
    n_nodes = tree[0].shape[0]
    out = np.empty((n_rows, n_nodes))
    n_chunks = (n_rows + CHUNK - 1) // CHUNK
    for c in prange(n_chunks):
        margin = np.empty(n_nodes)
        logp = np.empty(n_nodes)
        for i in range(c * CHUNK, min(n_rows, (c + 1) * CHUNK)):
            _path_probabilities_row(X, i, layout, tree, margin, logp, out)
    return out


def path_probabilities(tree, X, steepness):
    """Probability that soft routing takes each row of ``X`` through each node of ``tree``.

    The leaves' columns are the weights :func:`soft_predict` gives their
    values (the same bits); a row's leaf probabilities sum to 1 up to
    rounding. ``tree``, ``X`` and ``steepness`` as :func:`soft_predict`
    takes them.

    Returns
    -------
    out : ndarray of shape (n_samples, n_nodes), float64
    """
    X, n_rows, layout, tree_args = _kernel_args(tree, X, np.zeros((tree.node_count, 1)), steepness)
    return path_probabilities_parallel(X, n_rows, layout, tree_args)


def soft_predict(tree, X, leaf_value, steepness=None):
    """Soft output of a stored tree: sum over leaves of path probability x leaf value.

    Parameters
    ----------
    tree : ObliqueTree
        Parents stored before children (checked by the estimators when fitted
        or unpickled).
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Dense float32/float64, or a sparse matrix (read as CSR, never
        densified: each margin sums the row's stored entries, through
        :func:`feature_major_weights`). On CSR the extra memory is
        O(n_weights + n_nodes per thread), plus O(nnz) when ``X``'s indices
        are not int64 or not sorted and free of duplicates: independent of
        ``n_features``. The output equals that
        of the dense rows bit for bit: every margin adds its terms in the
        same order, leaving out only the ``w_j * 0`` of unstored features
        (a zero term changes no sum but a zero's sign, and the sigmoid
        gives the same bits for ``+0`` and ``-0``).
    leaf_value : ndarray of shape (n_nodes, n_outputs)
    steepness : ndarray of shape (n_nodes,), optional
        Per-split steepness ``s_j`` (default 1).

    Returns
    -------
    out : ndarray of shape (n_samples, n_outputs), float64
    """
    X, n_rows, layout, tree_args = _kernel_args(tree, X, leaf_value, steepness)
    if n_rows <= SERIAL_PREDICT_ROWS:
        return soft_predict_serial(X, n_rows, layout, tree_args)
    return soft_predict_parallel(X, n_rows, layout, tree_args)


def _kernel_args(tree, X, leaf_value, steepness):
    """``(X, n_rows, layout, tree_args)`` as the kernels take them (see :func:`soft_predict`)."""
    check_n_features(X, tree.n_features, "the tree")
    if steepness is None:
        steepness = np.ones(tree.node_count)
    # Read-only views of the model's arrays, whether they are (a model loaded with
    # joblib's mmap_mode="r" holds read-only ones, a fitted one writeable ones,
    # some computed on access): numba compiles one kernel per combination of
    # flags, and the wheel ships the all-read-only one.
    args = tuple(
        _read_only(array)
        for array in (
            tree.children_left,
            tree.children_right,
            tree.weight_indptr,
            tree.weight_index,
            tree.weight_value,
            tree.weight_missing,
            tree.bias,
            np.ascontiguousarray(steepness, dtype=np.float64),
            np.ascontiguousarray(leaf_value, dtype=np.float64),
        )
    )
    left, right, indptr, index, weight, missing, bias, steep, value = args
    tree_args = (left, right, weight, missing, bias, steep, value)
    n_rows = X.shape[0]
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
        layout = (indptr, index)
    else:
        X = X.tocsr()
        if not X.has_canonical_format:  # sorted indices, duplicates summed (as densifying sums)
            X = X.copy()
            X.sum_duplicates()
        X = (X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int64, copy=False), X.data)
        layout = tuple(
            _read_only(part) if isinstance(part, np.ndarray) else part
            for part in feature_major_weights(tree)
        )
    return X, n_rows, layout, tree_args
