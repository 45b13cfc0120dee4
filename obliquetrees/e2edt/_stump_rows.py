"""The products with a stump's weights, on dense or CSR rows (numba only).

:func:`~obliquetrees.e2edt._kernels.fit_stump` runs one schedule on either
input and takes its products with the weights ``w`` from the overloads
below, chosen at compile time from the type of ``X``:

- a dense ndarray ``(n, k)`` of standardised values: BLAS gemv in the dtype
  of ``X`` (float32 or float64), a minibatch's rows gathered into a buffer;
- a *CSR tuple* ``(indptr, indices, data, mean, inv_scale)`` (int64, int64,
  float64 entries of the raw rows, float64 (k,) statistics,
  :meth:`~obliquetrees.e2edt._sparse.StandardizedCSR.kernel_rows`): the rows
  ``z = (x - mean) * inv_scale`` standardised on the fly, in float64.
  ``z . w = x . v - mean . v`` with ``v = w * inv_scale`` and the weight
  gradient ``(sum_q c_q x_q - (sum_q c_q) mean) * inv_scale`` (the centring's
  rank-one correction), so a minibatch costs O(its nnz + k).

``scratch`` is the buffers :func:`stump_scratch` allocates once per stump.
"""

import numpy as np
from numba import types

from obliquetrees._core._jit import jit, jit_overload
from obliquetrees.e2edt._simd import lookup


def stump_scratch(X, w, bs):
    """Buffers of one stump's training, for minibatches of at most ``bs`` rows."""
    raise NotImplementedError("stump_scratch is only callable from numba kernels")


def all_activations(X, w, scratch):
    """``z_r . w`` of every row, shape (n,)."""
    raise NotImplementedError("all_activations is only callable from numba kernels")


def batch_activations(X, rows, w, scratch):
    """``(act_b, coef)``: ``z_r . w`` of the minibatch ``rows`` and the buffer of their
    gradient coefficients (in the dtype the weight gradient takes)."""
    raise NotImplementedError("batch_activations is only callable from numba kernels")


def batch_weight_gradient(X, rows, coef, coef_sum, scratch, gw):
    """``gw = sum_q coef[q] z_{rows[q]}`` after :func:`batch_activations` of ``rows``;
    ``coef_sum`` is the float64 sum of ``coef``."""
    raise NotImplementedError("batch_weight_gradient is only callable from numba kernels")


def _dense(X):
    return isinstance(X, types.Array)


@jit_overload(stump_scratch, inline="always")
def _stump_scratch(X, w, bs):
    if _dense(X):  # the minibatch's rows and coefficients, in the dtype of X
        return lambda X, w, bs: (
            np.empty((bs, X.shape[1]), dtype=X.dtype),
            np.empty(bs, dtype=X.dtype),
        )
    # activations of all rows, v = w * inv_scale, the gradient's sparse part,
    # the minibatch's activations and coefficients
    return lambda X, w, bs: (
        np.empty(X[0].shape[0] - 1),
        np.empty(w.shape[0]),
        np.empty(w.shape[0]),
        np.empty(bs),
        np.empty(bs),
    )


@jit
def _scaled_weights(w, mean, inv_scale, v):
    """``v = w * inv_scale``; returns ``mean . v`` (the centring offset of ``z . w``)."""
    off = 0.0
    for j in range(w.shape[0]):
        v[j] = w[j] * inv_scale[j]
        off += v[j] * mean[j]
    return off


@jit
def _csr_row_dot(indptr, indices, data, r, v):
    """``x_r . v`` over the stored entries of row ``r``."""
    acc = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        acc += data[p] * v[indices[p]]
    return acc


@jit
def _csr_activations(X, w, v, rows, out):
    """``out[q] = z_r . w`` of the CSR tuple's row ``r = rows[q]`` (``q`` if ``rows`` is None).

    ``v`` (k,) is scratch for ``w * inv_scale``. Returns ``out``.
    """
    indptr, indices, data, mean, inv_scale = X
    off = _scaled_weights(w, mean, inv_scale, v)
    for q in range(out.shape[0]):
        out[q] = _csr_row_dot(indptr, indices, data, lookup(rows, q), v) - off
    return out


@jit_overload(all_activations, inline="always")
def _all_activations(X, w, scratch):
    if _dense(X):
        return lambda X, w, scratch: np.dot(X, w.astype(X.dtype))  # BLAS gemv
    return lambda X, w, scratch: _csr_activations(X, w, scratch[1], None, scratch[0])


@jit_overload(batch_activations, inline="always")
def _batch_activations(X, rows, w, scratch):
    if _dense(X):

        def dense(X, rows, w, scratch):
            buf, coef = scratch
            m = rows.shape[0]
            for q in range(m):
                r = rows[q]
                for j in range(X.shape[1]):
                    buf[q, j] = X[r, j]
            return np.dot(buf[:m], w.astype(X.dtype)), coef  # BLAS gemv

        return dense

    def csr(X, rows, w, scratch):
        act_b = scratch[3][: rows.shape[0]]
        return _csr_activations(X, w, scratch[1], rows, act_b), scratch[4]

    return csr


@jit_overload(batch_weight_gradient, inline="always")
def _batch_weight_gradient(X, rows, coef, coef_sum, scratch, gw):
    if _dense(X):

        def dense(X, rows, coef, coef_sum, scratch, gw):
            m = rows.shape[0]
            buf = scratch[0]
            gw[:] = np.dot(coef[:m], buf[:m])  # BLAS gemv (transposed)

        return dense

    def csr(X, rows, coef, coef_sum, scratch, gw):
        indptr, indices, data, mean, inv_scale = X
        gx = scratch[2]
        gx[:] = 0.0
        for q in range(rows.shape[0]):
            r = rows[q]
            for p in range(indptr[r], indptr[r + 1]):
                gx[indices[p]] += coef[q] * data[p]
        for j in range(gw.shape[0]):  # the centring's rank-one correction
            gw[j] = (gx[j] - coef_sum * mean[j]) * inv_scale[j]

    return csr
