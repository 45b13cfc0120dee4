"""Sparse (CSR) training data for E2EDT: standardisation applied algebraically.

E2EDT trains on standardised inputs ``z = (x - mean) / scale``. For sparse
``X`` the centred matrix is dense, so it is never formed: every product with
the split weights is rewritten on the raw CSR matrix,

- activations ``Z @ w = X @ v - mean . v`` with ``v = w / scale``,
- weight gradients ``G @ Z = (G @ X - G.sum(1) mean^T) / scale``

(the rank-one correction of the centring), so memory stays proportional to
``nnz(X)`` plus the model. Features with an infinite scale (constant in
training) have ``1 / scale = 0``: like the zero columns of the dense ``Z``
they contribute nothing and get no gradient. The products run in float64
(scipy's CSR x dense, and a numba kernel for the stumps), whereas the dense
path runs its BLAS products on a float32 copy of ``Z``: the two paths compute
the same model up to rounding, not bit for bit.
"""

import numpy as np

from obliquetrees._core._jit import jit_numpy_errors as jit
from obliquetrees._training.leaf_models import empty_statistics, m_step
from obliquetrees.e2edt._kernels import (
    stump_adam_step,
    stump_coefficients,
    stump_e_step,
)


class StandardizedCSR:
    """The standardised rows ``(X - mean) / scale`` of a CSR ``X``, not formed.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n, p)
        Raw values (float64).
    mean : ndarray of float64, shape (p,)
    inv_scale : ndarray of float64, shape (p,)
        ``1 / scale`` (0 for features with an infinite scale).
    """

    def __init__(self, X, mean, inv_scale):
        self.X = X
        self.mean = mean
        self.inv_scale = inv_scale
        self.shape = X.shape

    @classmethod
    def from_scale(cls, X, mean, scale):
        """From the statistics of :func:`~obliquetrees._core.tree.standardization`."""
        inv = np.zeros_like(scale)
        np.divide(1.0, scale, out=inv, where=np.isfinite(scale))
        return cls(X, mean, inv)

    def __getitem__(self, rows):
        """The rows ``rows`` (a slice or an index array): O(their nnz)."""
        return StandardizedCSR(self.X[rows], self.mean, self.inv_scale)

    def columns(self, features):
        """Restriction to ``features`` (local column indices 0..k-1)."""
        return StandardizedCSR(self.X[:, features], self.mean[features], self.inv_scale[features])

    def csr_arrays(self):
        """``(indptr, indices, data)`` as int64, int64, float64 (the kernels' types)."""
        X = self.X
        return (
            X.indptr.astype(np.int64, copy=False),
            X.indices.astype(np.int64, copy=False),
            X.data.astype(np.float64, copy=False),
        )

    def csc_columns(self):
        """The standardised columns as CO2's axis-split search takes sparse nodes.

        ``((cptr, crow, cval), mu)``: the stored entries by column (CSC, rows
        ascending) holding ``x / scale``, and ``mu = mean / scale``, so a
        column's value is ``cval - mu`` at its entries and ``-mu`` elsewhere:
        ``(x - mean) / scale`` computed as :meth:`dot` computes it
        (:func:`~obliquetrees._training.axis_split.node_column`).
        """
        C = self.X.tocsc()
        C.sort_indices()
        cptr = C.indptr.astype(np.int64)
        cval = C.data * np.repeat(self.inv_scale, np.diff(cptr))
        return (cptr, C.indices.astype(np.int64), cval), self.mean * self.inv_scale

    def dot(self, w):
        """``Z @ w`` in float64, shape (n,)."""
        v = w * self.inv_scale
        return self.X @ v - v @ self.mean

    def activations(self, W, b):
        """Split-major activations ``W @ Z.T + b``, shape (n_splits, n), float64."""
        VT = np.array(W.T, order="C")  # a copy (p, n_splits): scipy wants C order
        VT *= self.inv_scale[:, None]
        shift = b - self.mean @ VT
        A = np.ascontiguousarray((self.X @ VT).T)
        A += shift[:, None]
        return A

    def minus_weight_gradient(self, G, mask, out):
        """``out = -(G @ Z)``, masked by ``mask`` (uint8, or None: all features)."""
        GX = (self.X.T @ G.T).T  # sparse.T (CSC) x dense: O(nnz x n_splits)
        gsum = G.sum(axis=1)
        np.multiply(gsum[:, None], self.mean, out=out)
        out -= GX
        out *= self.inv_scale
        if mask is not None:
            out *= mask


def fit_stump(Zs, y, sw, w, b, pi, gamma0, dgamma, n_epochs, order, *args):
    """:func:`~obliquetrees.e2edt._kernels.fit_stump` on a :class:`StandardizedCSR`.

    Same arguments (``Zs`` for the dense ``X``) and the same schedule; the
    products with ``w`` run on the CSR entries (:func:`fit_stump_csr`).
    """
    return fit_stump_csr(
        *Zs.csr_arrays(),
        Zs.mean,
        Zs.inv_scale,
        y,
        sw,
        w,
        b,
        pi,
        gamma0,
        dgamma,
        n_epochs,
        order,
        *args,
    )


def count_right(Zs, w, b):
    """Number of rows with ``z . w + b > 0`` and the boolean mask (as the dense kernel)."""
    right = Zs.dot(w) + b > 0.0
    return int(np.count_nonzero(right)), right


@jit
def _scaled_weights(w, mean, inv_scale, v):
    """``v = w / scale``; returns ``mean . v`` (the centring offset of ``z . w``)."""
    off = 0.0
    for j in range(w.shape[0]):
        v[j] = w[j] * inv_scale[j]
        off += v[j] * mean[j]
    return off


@jit
def _row_dot(indptr, indices, data, r, v):
    acc = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        acc += data[p] * v[indices[p]]
    return acc


@jit
def fit_stump_csr(
    indptr,
    indices,
    data,
    mean,
    inv_scale,
    y,
    sw,
    w,
    b,
    pi,
    gamma0,
    dgamma,
    n_epochs,
    order,
    batch_size,
    lr,
    beta1,
    beta2,
    eps,
    lam,
    nb_indptr,
    nb_indices,
):
    """Train one stump on CSR rows standardised on the fly (in place).

    The schedule of :func:`~obliquetrees.e2edt._kernels.fit_stump`
    (sharing its E-step, gradient coefficients and Adam step); the node's
    samples are the CSR rows ``(indptr, indices, data)`` with ``k`` columns,
    standardised by ``mean`` and ``inv_scale`` (k,). A minibatch costs
    O(its nnz + k): ``z . w = x . v - mean . v`` and the weight gradient
    ``(sum_q c_q x_q - (sum_q c_q) mean) * inv_scale``.

    Returns
    -------
    gamma : float
        Steepness after the last epoch.
    """
    n = indptr.shape[0] - 1
    k = w.shape[0]
    hr = np.empty(n)
    counts = empty_statistics(pi, y)
    act = np.empty(n)
    v = np.empty(k)
    gx = np.empty(k)
    gw = np.empty(k)
    gb = np.zeros(1)
    bs = min(batch_size, n)
    act_b = np.empty(bs)
    coef = np.empty(bs)
    mw = np.zeros(k)
    vw = np.zeros(k)
    mb = np.zeros(1)
    vb = np.zeros(1)
    gamma = gamma0
    step = 0
    for epoch in range(n_epochs):
        off = _scaled_weights(w, mean, inv_scale, v)
        for r in range(n):
            act[r] = _row_dot(indptr, indices, data, r, v) - off
        stump_e_step(act, b[0], gamma, pi, y, sw, hr, counts)
        if epoch >= 1:
            perm = order[epoch - 1]
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                total = 0.0
                for q in range(start, stop):
                    total += sw[perm[q]]
                if total <= 0.0:
                    continue
                m = stop - start
                off = _scaled_weights(w, mean, inv_scale, v)
                for q in range(m):
                    act_b[q] = _row_dot(indptr, indices, data, perm[start + q], v) - off
                rows = perm[start:stop]
                gb[0] = stump_coefficients(act_b[:m], rows, b[0], gamma, hr, sw, total, coef)
                gx[:] = 0.0
                for q in range(m):
                    r = rows[q]
                    for p in range(indptr[r], indptr[r + 1]):
                        gx[indices[p]] += coef[q] * data[p]
                for j in range(k):  # the centring's rank-one correction
                    gw[j] = (gx[j] - gb[0] * mean[j]) * inv_scale[j]
                step += 1
                stump_adam_step(
                    w,
                    b,
                    gw,
                    gb,
                    mw,
                    vw,
                    mb,
                    vb,
                    step,
                    lr,
                    beta1,
                    beta2,
                    eps,
                    lam,
                    nb_indptr,
                    nb_indices,
                )
        m_step(counts, pi, y)
        gamma += dgamma
    return gamma
