"""Reading one row of a CO2 growth source, dense or CSR (numba only).

A growth source is the dense triple ``(X, mean, scale)`` of
:func:`~obliquetrees.co2._node.dense_source`, whose rows the kernels
standardise as they read them (:func:`standardized_row`), or the CSR
triple ``(indptr, indices, u)`` of ``u = X / scale``
(:mod:`obliquetrees.co2._sparse_kernels`). :func:`row_side` and
:func:`row_value` read a row of either kind (chosen by numba at compile
time from the source's type, :func:`is_dense`) with the arithmetic the split
kernels partition their own rows with, so rows routed through them follow
the stored splits bit for bit.

Importing this module imports numba.
"""

from numba import types

from obliquetrees._core._jit import jit_inline, jit_overload


@jit_inline
def standardized_row(source, r, out):
    """Write row ``r`` of the standardised input to ``out`` (its ``p`` entries).

    ``source`` is :func:`~obliquetrees.co2._node.dense_source`'s ``(X, mean,
    scale)``; each entry is ``(X[r, j] - mean[j]) / scale[j]``, the very
    operations (and so the bits) of a standardised copy ``(X - mean) / scale``
    made once (NaN stays NaN, a constant feature's infinite scale gives 0).
    The row is written to a buffer first so the divisions of one row run as
    one loop, which LLVM vectorises in the kernels that inline this one with
    numpy's error model (``jit_numpy_errors``: no zero test per division; a
    scale is never 0; with the test, the divisions are scalar and about 30 %
    slower). The divisions are what reading ``X`` in place costs: a pass of
    ``w.x + b`` over 63k shuffled rows of 40 features took 11.6 ms against
    7.2 ms on a standardised copy (AMD EPYC, load about 5).
    """
    X, mean, scale = source
    for j in range(out.shape[0]):
        out[j] = (X[r, j] - mean[j]) / scale[j]


@jit_inline
def standardized(source, r, j):
    """Entry ``(r, j)`` of the standardised input (see :func:`standardized_row`)."""
    X, mean, scale = source
    return (X[r, j] - mean[j]) / scale[j]


@jit_inline
def sparse_dot(w, indptr, indices, data, i, b):
    """``b + w . u_i`` over the stored entries of row ``i``."""
    s = b
    for k in range(indptr[i], indptr[i + 1]):
        s += w[indices[k]] * data[k]
    return s


def is_dense(source):
    """Whether a growth source type is dense ``(X, mean, scale)`` (X 2-D), not a CSR triple."""
    first = source.types[0]
    return isinstance(first, types.Array) and first.ndim == 2


def row_side(source, r, w, b, xr):
    """Whether row ``r`` of ``source`` goes right of ``(w, b)``: ``w.x + b > 0`` (numba only).

    Dense: ``x`` is the standardised row (written to the buffer ``xr`` of
    ``n_features``), summed in feature order as the split kernels partition
    their rows. CSR: ``x`` is ``u``'s row, summed over its stored entries.
    """
    raise NotImplementedError("row_side is only callable from numba kernels")


@jit_overload(row_side, inline="always")
def _row_side(source, r, w, b, xr):
    if is_dense(source):

        def dense(source, r, w, b, xr):
            standardized_row(source, r, xr)
            z = b
            for j in range(xr.shape[0]):
                z += w[j] * xr[j]
            return z > 0.0

        return dense

    def sparse(source, r, w, b, xr):
        indptr, indices, u = source
        return sparse_dot(w, indptr, indices, u, r, b) > 0.0

    return sparse


def row_value(source, r, j):
    """Entry ``j`` of row ``r`` of ``source``: standardised (dense) or ``u`` (CSR) (numba only)."""
    raise NotImplementedError("row_value is only callable from numba kernels")


@jit_overload(row_value, inline="always")
def _row_value(source, r, j):
    if is_dense(source):
        return lambda source, r, j: standardized(source, r, j)

    def sparse(source, r, j):
        indptr, indices, u = source
        for k in range(indptr[r], indptr[r + 1]):
            if indices[k] == j:
                return u[k]
        return 0.0

    return sparse
