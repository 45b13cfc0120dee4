"""Soft evaluation of a stored tree: the one kernel behind soft routing.

A soft tree (and an E2EDT tree with ``routing="soft"``) predicts the sum over
leaves of path probability times leaf value, where a split sends a row right
with probability ``sigmoid(s_j * (w_j.x + b_j))``: the container's hard rule
(right iff ``w.x + b > 0``) is its limit ``s_j -> inf``. ``s_j`` is the
split's steepness (E2EDT stores one per node; soft trees use 1, which leaves
every bit as without it). A NaN ``x_j`` contributes the weight's
missing-value term instead of ``w_j x_j``, as in hard routing.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core._jit import jit, jit_inline, jit_parallel, prange
from obliquetrees._core._math import log_sigmoid_pair
from obliquetrees._core.validation import check_n_features

#: Rows per chunk of the parallel kernel (fixed: results do not depend on the
#: thread count).
CHUNK = 256
#: Soft prediction of at most this many rows runs serially (a thread pool
#: start-up costs more than the work).
SERIAL_PREDICT_ROWS = 2048
#: CSR input is densified this many rows at a time.
CSR_BLOCK_ROWS = 4096


@jit_inline
def _soft_predict_row(
    X, i, left_child, right_child, indptr, index, weight, missing, bias, steep, value, logp, out
):
    """Soft output of row ``i``, added into ``out[i]`` (parents precede children)."""
    n_nodes = left_child.shape[0]
    K = value.shape[1]
    logp[0] = 0.0
    for j in range(n_nodes):
        left = left_child[j]
        if left < 0:
            p = np.exp(logp[j])
            if p > 0.0:
                for k in range(K):
                    out[i, k] += p * value[j, k]
        else:
            a = bias[j]
            for q in range(indptr[j], indptr[j + 1]):
                x = X[i, index[q]]
                a += weight[q] * x if x == x else missing[q]  # NaN: the missing-value term
            a *= steep[j]
            # the bits of log_sigmoid(a) and log_sigmoid(-a), with one exponential
            right, left_term = log_sigmoid_pair(a)
            logp[right_child[j]] = logp[j] + right
            logp[left] = logp[j] + left_term


@jit_parallel
def soft_predict_parallel(
    X, left_child, right_child, indptr, index, weight, missing, bias, steep, value
):
    """Soft output of a stored tree, ``prange`` over fixed chunks of rows.

    ``value`` is (n_nodes, n_outputs); rows of internal nodes are ignored.
    """
    n = X.shape[0]
    n_nodes = left_child.shape[0]
    out = np.zeros((n, value.shape[1]))
    n_chunks = (n + CHUNK - 1) // CHUNK
    for c in prange(n_chunks):
        logp = np.empty(n_nodes)
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            _soft_predict_row(
                X,
                i,
                left_child,
                right_child,
                indptr,
                index,
                weight,
                missing,
                bias,
                steep,
                value,
                logp,
                out,
            )
    return out


@jit
def soft_predict_serial(
    X, left_child, right_child, indptr, index, weight, missing, bias, steep, value
):
    """:func:`soft_predict_parallel` without threads (small inputs: no pool start-up)."""
    n = X.shape[0]
    out = np.zeros((n, value.shape[1]))
    logp = np.empty(left_child.shape[0])
    for i in range(n):
        _soft_predict_row(
            X,
            i,
            left_child,
            right_child,
            indptr,
            index,
            weight,
            missing,
            bias,
            steep,
            value,
            logp,
            out,
        )
    return out


def _read_only(array):
    view = array.view()
    view.flags.writeable = False
    return view


def soft_predict(tree, X, leaf_value, steepness=None):
    """Soft output of a stored tree: sum over leaves of path probability x leaf value.

    Parameters
    ----------
    tree : ObliqueTree
        Parents stored before children (checked by the estimators when fitted
        or unpickled).
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Dense float32/float64 or CSR (densified in blocks of rows).
    leaf_value : ndarray of shape (n_nodes, n_outputs)
    steepness : ndarray of shape (n_nodes,), optional
        Per-split steepness ``s_j`` (default 1).

    Returns
    -------
    out : ndarray of shape (n_samples, n_outputs), float64
    """
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
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
        if X.shape[0] <= SERIAL_PREDICT_ROWS:
            return soft_predict_serial(X, *args)
        return soft_predict_parallel(X, *args)
    X = X.tocsr()
    out = np.empty((X.shape[0], leaf_value.shape[1]))
    for start in range(0, X.shape[0], CSR_BLOCK_ROWS):
        rows = X[start : start + CSR_BLOCK_ROWS].toarray()
        out[start : start + CSR_BLOCK_ROWS] = soft_predict_serial(rows, *args)
    return out
