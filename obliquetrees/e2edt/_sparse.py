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

from obliquetrees.e2edt._kernels import fit_stump as fit_stump_kernel


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

    def kernel_rows(self):
        """The CSR tuple ``(indptr, indices, data, mean, inv_scale)`` of the stump kernel.

        int64, int64, float64 (:mod:`obliquetrees.e2edt._stump_rows`).
        """
        X = self.X
        return (
            X.indptr.astype(np.int64, copy=False),
            X.indices.astype(np.int64, copy=False),
            X.data.astype(np.float64, copy=False),
            self.mean,
            self.inv_scale,
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


def fit_stump(Zs, *args):
    """:func:`~obliquetrees.e2edt._kernels.fit_stump` on a :class:`StandardizedCSR`.

    Same arguments (``Zs`` for the dense ``X``) and the same schedule; the
    products with ``w`` run on the CSR entries (:meth:`StandardizedCSR.kernel_rows`).
    """
    return fit_stump_kernel(Zs.kernel_rows(), *args)


def count_right(Zs, w, b):
    """Number of rows with ``z . w + b > 0`` and the boolean mask (as the dense kernel)."""
    right = Zs.dot(w) + b > 0.0
    return int(np.count_nonzero(right)), right
