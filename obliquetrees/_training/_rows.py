"""Rows of the training input, dense or sparse, standardised for the kernels.

A training kernel that reads its input row by row takes ``X`` as either

- a dense ndarray ``(n, d)`` of standardised values ``z = (x - mean) / scale``, or
- a *sparse row tuple* ``(indptr, indices, values, inv_scale, shift)``: the raw
  CSR arrays (int64 ``indptr``/``indices`` sorted per row, float64 ``values``)
  and the standardisation as ``z_j = x_j inv_scale_j - shift_j``
  (``inv_scale = 1 / scale``, ``shift = mean / scale``; both 0 for a constant
  feature, whose scale is infinite). The centred matrix is never formed.

The primitives below are numba overloads that compile to the dense loop the
kernels always had (same operations in the same order, so dense results keep
their bits) or to a loop over the row's stored entries, with the centring
applied algebraically: ``b + w . z = b - w . shift + sum over stored j of w_j
x_j inv_scale_j``. ``w . shift`` (:func:`row_shift`, :func:`node_shifts`) is
computed once per weight vector, not per row, and a gradient ``sum_i a_i z_i``
is accumulated over stored entries, its dense part ``-(sum_i a_i) shift``
added once (:func:`finish_rows`).
"""

import numpy as np
from numba import types
from numba.extending import overload

from obliquetrees._core._jit import jit


def sparse_rows(X, mean, scale):
    """The sparse row tuple of a raw canonical CSR ``X`` standardised by ``mean``/``scale``.

    No copy of ``X``'s values; its index arrays are cast to int64 if they are
    not (a row subset taken by scipy may have int32 indices).
    """
    inv_scale = 1.0 / np.asarray(scale, dtype=np.float64)  # 0 where the scale is infinite
    return (
        np.asarray(X.indptr, dtype=np.int64),
        np.asarray(X.indices, dtype=np.int64),
        np.asarray(X.data, dtype=np.float64),
        inv_scale,
        np.asarray(mean, dtype=np.float64) * inv_scale,
    )


def sorted_columns(rows):
    """Per-feature stored entries of a sparse row tuple, sorted by value.

    Returns ``(col_ptr, col_row, col_z, zero_z, n)``: for feature ``f`` the
    entries ``col_ptr[f]:col_ptr[f + 1]`` hold the row and the standardised
    value of each nonzero stored entry in increasing value (ties by row), and
    ``zero_z[f] = -shift[f]`` is the standardised value of the rows that store
    no entry (or an explicit zero). O(nnz log nnz) once per fit; what
    :func:`~obliquetrees.soft._axis_split.best_axis_split_sparse` walks.
    """
    indptr, indices, values, inv_scale, shift = rows
    n, d = indptr.shape[0] - 1, inv_scale.shape[0]
    keep = values != 0.0
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))[keep]
    col = indices[keep]
    z = values[keep] * inv_scale[col] - shift[col]
    order = np.lexsort((row, z, col))  # by feature, then value, then row
    col_ptr = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(np.bincount(col, minlength=d), out=col_ptr[1:])
    return col_ptr, row[order], z[order], -shift, n


def take_rows(rows, idx):
    """The sparse row tuple of the rows ``idx`` (a copy of their entries)."""
    indptr, indices, values, inv_scale, shift = rows
    lengths = indptr[idx + 1] - indptr[idx]
    new_ptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    src = np.repeat(indptr[idx] - new_ptr[:-1], lengths) + np.arange(new_ptr[-1])
    return new_ptr, indices[src], values[src], inv_scale, shift


def n_rows(X):
    """Number of rows of a dense input or sparse row tuple."""


def n_cols(X):
    """Number of features of a dense input or sparse row tuple."""


def gate_logit(X, i, w, b, wshift):
    """``b + w . z_i`` for row ``i``; ``wshift = w . shift`` (ignored for dense ``X``)."""


def add_row(X, i, a, g):
    """``g += a z_i`` (sparse: the stored entries only; see :func:`finish_rows`)."""


def finish_rows(X, a_sum, g):
    """Complete sparse :func:`add_row` sums: ``g -= a_sum shift`` (dense: nothing)."""


def row_shift(X, w):
    """``w . shift`` for sparse ``X``, 0 for dense ``X``."""


def node_shifts(X, W, n_nodes, out):
    """``out[j] = W[j] . shift`` for ``j < n_nodes`` (sparse ``X``; dense: ``out`` untouched)."""


def _dense(X):
    return isinstance(X, types.Array)


@overload(n_rows, inline="always")
def _n_rows(X):
    if _dense(X):
        return lambda X: X.shape[0]
    return lambda X: X[0].shape[0] - 1


@overload(n_cols, inline="always")
def _n_cols(X):
    if _dense(X):
        return lambda X: X.shape[1]
    return lambda X: X[3].shape[0]


@overload(gate_logit, inline="always")
def _gate_logit(X, i, w, b, wshift):
    if _dense(X):

        def dense(X, i, w, b, wshift):
            a = b
            for f in range(X.shape[1]):
                a += w[f] * X[i, f]
            return a

        return dense

    def sparse(X, i, w, b, wshift):
        indptr, indices, values, inv_scale, _ = X
        a = b - wshift
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            a += w[j] * (values[k] * inv_scale[j])
        return a

    return sparse


@overload(add_row, inline="always")
def _add_row(X, i, a, g):
    if _dense(X):

        def dense(X, i, a, g):
            for f in range(X.shape[1]):
                g[f] += a * X[i, f]

        return dense

    def sparse(X, i, a, g):
        indptr, indices, values, inv_scale, _ = X
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            g[j] += a * (values[k] * inv_scale[j])

    return sparse


@overload(finish_rows)
def _finish_rows(X, a_sum, g):
    if _dense(X):
        return lambda X, a_sum, g: None

    def sparse(X, a_sum, g):
        shift = X[4]
        for f in range(shift.shape[0]):
            g[f] -= a_sum * shift[f]

    return sparse


@overload(row_shift)
def _row_shift(X, w):
    if _dense(X):
        return lambda X, w: 0.0

    def sparse(X, w):
        shift = X[4]
        s = 0.0
        for f in range(shift.shape[0]):
            s += w[f] * shift[f]
        return s

    return sparse


@overload(node_shifts)
def _node_shifts(X, W, n_nodes, out):
    if _dense(X):
        return lambda X, W, n_nodes, out: None

    def sparse(X, W, n_nodes, out):
        for j in range(n_nodes):
            out[j] = row_shift(X, W[j])

    return sparse


@jit
def shifts_of(X, W, n_nodes):
    """``W[j] . shift`` of every node (zeros for dense ``X``), a new array."""
    out = np.zeros(max(n_nodes, 1))
    node_shifts(X, W, n_nodes, out)
    return out
