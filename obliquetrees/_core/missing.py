"""Missing values (NaN) for every estimator: train on indicators, store one term per weight.

The container's rule (:class:`~obliquetrees._core.tree.ObliqueTree`): a NaN
``x_j`` contributes ``weight_missing`` to a split's margin instead of
``w_j x_j``. This module makes every training method learn those terms with
its own optimiser, without any method knowing about NaN:

1. :meth:`MissingValues.from_data` notes the (weighted) mean ``m_j`` of the
   observed values of every feature, and which features get a *missing
   indicator*: those whose missingness depends on the target in training
   (:func:`informative_columns`).
2. :meth:`MissingValues.augment` gives the method NaN-free inputs: each NaN
   becomes ``m_j``, and every feature chosen in step 1 gets a 0/1 missing
   indicator column appended. A split learns ``w . x~ + v . r + b`` over
   both (CCCP for CO2, EM/Adam for E2EDT, SGD for soft trees and hinge
   forests), so the indicator weight ``v_j`` is learned with the split.

Why not an indicator for every feature with NaN: an indicator is one more
input each split's optimiser has to learn to ignore when it carries nothing.
Where values are missing completely at random, indicators for every feature
cost CO2 forests 3 to 10 points of accuracy and E2EDT 4 to 15 points against
plain mean imputation (digits, satimage, letter at 20-30 % missing; measured
in ``benchmarks/results/missing.md``), while on informative missingness they
gain up to 10 points. A feature whose missingness is independent of the
target (the test's null hypothesis) has nothing to teach a split through its
indicator, so it gets none, and its NaN takes the mean, as imputation does.
3. :meth:`MissingValues.fold` writes the learned split back on the original
   features. On a row where ``x_j`` is NaN, the augmented split reads
   ``w_j m_j + v_j``; where it is observed, ``w_j x_j`` (its indicator is 0).
   So ``weight_missing_j = w_j m_j + v_j`` gives exactly the same margin, on
   every row, as the augmented split: the stored tree *is* the trained one.

At its simplest (a split on one feature) the learned term routes the rows
missing that feature to the side that lowers the training loss, which is
the default direction of axis-aligned trees; in general it moves the margin
by a learned amount. A feature without an indicator (no NaN in training,
or missingness independent of the target) has ``v_j = 0``: a NaN there is
treated as the training mean ``m_j``. The fold also applies to every split of a tree trained on
NaN-free data, which is how every fitted model gets that rule.

Sparse input: explicit NaN entries are missing, implicit zeros are zeros
(the means count them as zeros). Imports numpy and scipy only.
"""

import numpy as np
from scipy import sparse

from obliquetrees._core.validation import INDEX_DTYPE, VALUE_DTYPE, check_array

#: Rows per chunk when scanning a dense X for NaN (bounds the boolean temporaries).
_CHUNK_ROWS = 4096

#: Family-wise significance level of the independence tests between each
#: feature's missingness and the target (Bonferroni over the features with NaN).
INDICATOR_ALPHA = 0.01


def nan_columns(X):
    """Boolean mask of the columns of ``X`` holding at least one NaN.

    Parameters
    ----------
    X : ndarray or CSR matrix, shape (n_samples, n_features)

    Returns
    -------
    mask : ndarray of bool, shape (n_features,)
    """
    mask = np.zeros(X.shape[1], dtype=bool)
    if sparse.issparse(X):
        mask[X.indices[np.isnan(X.data)]] = True
        return mask
    for start in range(0, X.shape[0], _CHUNK_ROWS):
        mask |= np.isnan(X[start : start + _CHUNK_ROWS]).any(axis=0)
    return mask


def observed_moments(X, sample_weight=None):
    """(Weighted) mean and standard deviation of each column's observed values.

    NaN entries are left out of their column; a column with no observed
    value gets mean 0 and standard deviation 0.

    Parameters
    ----------
    X : ndarray or CSR matrix, shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,), default=None

    Returns
    -------
    mean, std : ndarray of float64, shape (n_features,)
    """
    n, d = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=VALUE_DTYPE)
    total = np.zeros(d)
    first = np.zeros(d)
    second = np.zeros(d)
    if sparse.issparse(X):
        rows = np.repeat(np.arange(n), np.diff(X.indptr))
        nan = np.isnan(X.data)
        total += w.sum()
        np.subtract.at(total, X.indices[nan], w[rows[nan]])
        keep = ~nan
        data, cols, wr = X.data[keep], X.indices[keep], w[rows[keep]]
        first += np.bincount(cols, weights=wr * data, minlength=d)
        second += np.bincount(cols, weights=wr * data * data, minlength=d)
    else:
        for start in range(0, n, _CHUNK_ROWS):
            block = X[start : start + _CHUNK_ROWS]
            wb = w[start : start + _CHUNK_ROWS]
            seen = ~np.isnan(block)
            values = np.where(seen, block, 0.0)
            total += wb @ seen
            first += wb @ values
            second += wb @ (values * values)
    safe = np.where(total > 0, total, 1.0)
    mean = np.where(total > 0, first / safe, 0.0)
    var = np.maximum(second / safe - mean * mean, 0.0)
    return mean, np.sqrt(var)


def _missing_sums(X, values):
    """``M.T @ values`` with ``M`` the 0/1 NaN mask of ``X``: shape (n_features, k)."""
    n, d = X.shape
    if sparse.issparse(X):
        nan = np.isnan(X.data)
        rows = np.repeat(np.arange(n), np.diff(X.indptr))[nan]
        mask = sparse.csc_matrix((np.ones(rows.shape[0]), (rows, X.indices[nan])), shape=(n, d))
        return np.asarray(mask.T @ values)
    out = np.zeros((d, values.shape[1]))
    for start in range(0, n, _CHUNK_ROWS):
        block = np.isnan(X[start : start + _CHUNK_ROWS])
        out += block.T.astype(VALUE_DTYPE) @ values[start : start + _CHUNK_ROWS]
    return out


def informative_columns(X, y, sample_weight=None, classification=True, alpha=INDICATOR_ALPHA):
    """Features whose missingness depends on the target in the training data.

    For each feature ``j`` with NaN, the rows split into "``x_j`` missing" and
    "``x_j`` observed". Classification: a G-test of independence between that
    split and the class (``G = 2 sum O log(O / E)``, chi-squared with
    ``n_classes - 1`` degrees of freedom). Regression: the one-way analysis of
    variance of the target between the two groups (``F`` with ``(1, n - 2)``
    degrees of freedom; several outputs: the smallest p-value times their
    number). Sample weights are frequencies (a weight of 2 counts as a
    repeated row, scikit-learn's meaning), so the tests see ``sum(weights)`` rows.
    A feature is chosen when its p-value is below ``alpha`` divided by the
    number of features with NaN (Bonferroni: under independence of every
    feature, all are left out with probability at least ``1 - alpha``).

    Parameters
    ----------
    X : ndarray or CSR matrix, shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        Class indices (classification) or targets (regression).
    sample_weight : ndarray of shape (n_samples,), default=None
    classification : bool, default=True
    alpha : float, default=INDICATOR_ALPHA

    Returns
    -------
    columns : ndarray of int64
        The chosen features, increasing.
    """
    from scipy import stats

    candidates = np.flatnonzero(nan_columns(X))
    rows = X.shape[0]
    w = np.ones(rows) if sample_weight is None else np.asarray(sample_weight, dtype=VALUE_DTYPE)
    n = float(w.sum())  # the number of rows the tests see
    if candidates.size == 0 or n <= 2:
        return np.zeros(0, INDEX_DTYPE)
    if classification:
        classes = np.unique(np.asarray(y), return_inverse=True)[1].ravel()
        onehot = np.zeros((rows, int(classes.max()) + 1))
        onehot[np.arange(rows), classes] = w
        missing = _missing_sums(X, onehot)[candidates]  # (c, K) weighted counts
        table = np.stack([missing, onehot.sum(axis=0) - missing], axis=1)  # (c, 2, K)
        expected = table.sum(axis=2, keepdims=True) * table.sum(axis=1, keepdims=True) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(table > 0, table * np.log(table / expected), 0.0)
        g = 2.0 * np.maximum(terms.sum(axis=(1, 2)), 0.0)
        p = stats.chi2.sf(g, max(onehot.shape[1] - 1, 1))
    else:
        Y = np.asarray(y, dtype=VALUE_DTYPE).reshape(rows, -1)
        Y = Y - Y.T @ w / n  # centred: sums of squares without cancellation
        sums = _missing_sums(X, np.column_stack([w, w[:, None] * Y]))[candidates]
        w1, y1 = sums[:, :1], sums[:, 1:]  # weight and target sum of the missing rows
        w0 = n - w1
        between = np.zeros_like(y1)
        ok = (w1 > 0) & (w0 > 0)
        np.divide(y1 * y1 * n, w1 * w0, out=between, where=np.broadcast_to(ok, y1.shape))
        total = (w[:, None] * Y * Y).sum(axis=0)
        within = np.maximum(total - between, 0.0) / (n - 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(within > 0, between / within, np.where(between > 0, np.inf, 0.0))
        p = np.minimum(stats.f.sf(f, 1, n - 2).min(axis=1) * Y.shape[1], 1.0)
    return candidates[p < alpha / candidates.size].astype(INDEX_DTYPE)


class MissingValues:
    """What a fit saw of missing values, and the maps to and from its training inputs.

    Parameters
    ----------
    fill : ndarray of float64, shape (n_features,)
        Value a NaN takes in the training inputs: the feature's mean over
        its observed training values.
    columns : ndarray of int64, shape (n_indicators,)
        Features with a missing indicator (NaN in training, see
        :meth:`from_data`), in increasing order; the indicator of
        ``columns[i]`` is training input ``n_features + i``.
    """

    def __init__(self, fill, columns):
        self.fill = np.ascontiguousarray(fill, dtype=VALUE_DTYPE)
        self.columns = np.ascontiguousarray(columns, dtype=INDEX_DTYPE)

    @classmethod
    def from_data(cls, X, sample_weight=None, y=None, classification=True, indicators=True):
        """The plan for training data ``X`` (NaN marks a missing value).

        Parameters
        ----------
        X : ndarray or CSR matrix, shape (n_samples, n_features)
        sample_weight : ndarray of shape (n_samples,), default=None
        y : ndarray, default=None
            The training target. Given, only the features whose missingness
            depends on it get an indicator (:func:`informative_columns`);
            None gives every feature with NaN one.
        classification : bool, default=True
            Whether ``y`` holds classes (else regression targets).
        indicators : bool, default=True
            False: no indicator at all, a NaN is always treated as the
            feature's mean (for inputs whose layout the method relies on,
            such as E2EDT's image patches).

        Returns
        -------
        missing : MissingValues
        """
        has_nan = nan_columns(X)
        if not indicators or not has_nan.any():
            columns = np.zeros(0, INDEX_DTYPE)
        elif y is None:
            columns = np.flatnonzero(has_nan)
        else:
            columns = informative_columns(X, y, sample_weight, classification)
        if has_nan.any():
            fill = observed_moments(X, sample_weight)[0]
        else:  # no NaN: the plain weighted column means
            w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
            fill = np.asarray(X.T @ (w / np.sum(w))).ravel()
        return cls(fill, columns)

    @property
    def n_features(self):
        """Number of original features."""
        return int(self.fill.shape[0])

    @property
    def n_inputs(self):
        """Number of training inputs: the features, then their indicators."""
        return self.n_features + int(self.columns.shape[0])

    def __getstate__(self):
        return {"fill": self.fill, "columns": self.columns}

    def __setstate__(self, state):
        # augment() and fold() index with these arrays: check them before use
        fill, columns = state.get("fill"), state.get("columns")
        check_array(fill, "the missing-value fill", VALUE_DTYPE, 1)
        check_array(columns, "the missing-value columns", INDEX_DTYPE, 1)
        self.fill, self.columns = fill, columns
        self.check(self.n_features)

    def check(self, n_features):
        """Raise ``ValueError`` unless the arrays fit ``n_features`` features.

        The fill values must be finite and the indicator columns distinct,
        increasing feature indices (they index arrays in :meth:`augment`).
        """
        fill, columns = self.fill, self.columns
        if fill.ndim != 1 or fill.shape[0] != n_features or not np.all(np.isfinite(fill)):
            raise ValueError(f"the missing-value fill must be {n_features} finite numbers.")
        if columns.ndim != 1 or (
            columns.size
            and (columns[0] < 0 or columns[-1] >= n_features or np.any(np.diff(columns) <= 0))
        ):
            raise ValueError("the missing-value columns must be increasing feature indices.")

    def augment(self, X):
        """The training inputs: NaN replaced by ``fill``, indicators appended.

        Parameters
        ----------
        X : ndarray or CSR matrix of float64, shape (n_samples, n_features)

        Returns
        -------
        inputs : ndarray or CSR matrix, shape (n_samples, n_inputs)
            ``X`` itself when it has no NaN and no indicator is needed (no
            copy); otherwise a new array (CSR for CSR input, the implicit
            zeros staying zeros).
        """
        if sparse.issparse(X):
            return self._augment_csr(X)
        nan_any = nan_columns(X)
        if not self.columns.size and not nan_any.any():
            return X
        n, d = X.shape
        out = np.empty((n, self.n_inputs), dtype=VALUE_DTYPE)
        for start in range(0, n, _CHUNK_ROWS):
            block = X[start : start + _CHUNK_ROWS]
            nan = np.isnan(block)
            out[start : start + _CHUNK_ROWS, :d] = np.where(nan, self.fill, block)
            out[start : start + _CHUNK_ROWS, d:] = nan[:, self.columns]
        return out

    def _augment_csr(self, X):
        nan = np.isnan(X.data)
        if not self.columns.size and not nan.any():
            return X
        n, d = X.shape
        data = np.where(nan, self.fill[X.indices], X.data)
        # indicator entries: the NaN entries of the indicated columns
        slot = np.full(d, -1, dtype=INDEX_DTYPE)
        slot[self.columns] = np.arange(self.columns.shape[0])
        rows = np.repeat(np.arange(n), np.diff(X.indptr))
        flagged = nan & (slot[X.indices] >= 0)
        extra = sparse.csr_matrix(
            (np.ones(int(flagged.sum())), (rows[flagged], slot[X.indices[flagged]])),
            shape=(n, self.columns.shape[0]),
        )
        base = sparse.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
        out = sparse.hstack([base, extra], format="csr")
        out.sum_duplicates()
        return out

    def fold(self, tree):
        """A tree trained on :meth:`augment`'s inputs, on the original features.

        Each weight ``w_j`` gets the missing-value term ``w_j * fill_j +
        v_j`` (``v_j`` the weight of ``j``'s indicator, 0 if it has none), so
        the tree gives the trained margins on every row, NaN or not.

        Parameters
        ----------
        tree : ObliqueTree
            With ``n_inputs`` features.

        Returns
        -------
        tree : ObliqueTree
            With ``n_features`` features; same structure and values. Without
            indicators its terms are in the compact form (``missing_fill`` is
            ``fill``: the terms are ``w_j * fill_j``).
        """
        d = self.n_features
        if tree.n_features != self.n_inputs:
            raise ValueError(f"the tree has {tree.n_features} inputs, expected {self.n_inputs}.")
        index, value = tree.weight_index, tree.weight_value
        indptr = tree.weight_indptr
        terms = {"missing_fill": self.fill}
        if not self.columns.size:  # the weights stay as they are, in their order
            # every term is value * fill[index]: stored compactly as the fill
            missing = value * self.fill[index]
        else:
            rows = np.repeat(np.arange(tree.node_count), np.diff(indptr))
            indicator = index >= d
            feature = np.where(indicator, self.columns[np.where(indicator, index - d, 0)], index)
            weight = np.where(indicator, 0.0, value)
            term = np.where(indicator, value, value * self.fill[feature])
            # one entry per (node, feature): sum a weight with its indicator's
            key = rows * d + feature
            keys, slot = np.unique(key, return_inverse=True)
            value = np.bincount(slot, weights=weight, minlength=keys.shape[0])
            missing = np.bincount(slot, weights=term, minlength=keys.shape[0])
            index = keys % d
            counts = np.bincount(keys // d, minlength=tree.node_count)
            indptr = np.concatenate([[0], np.cumsum(counts)])
            terms = {"weight_missing": missing}
        if not np.all(np.isfinite(missing)):
            raise ValueError("a missing-value term overflows float64; rescale X.")
        return tree.with_splits(indptr, index, value, d, **terms)

    def unfold(self, tree):
        """The inverse of :meth:`fold`: a tree on the original features as a tree on the inputs.

        Weight ``j`` keeps ``w_j``; feature ``j`` with an indicator gets the
        indicator weight ``weight_missing_j - w_j * fill_j``. Exact for the
        features with an indicator; a feature without one must have
        ``weight_missing_j == w_j * fill_j`` (see :meth:`needed_columns`).

        Parameters
        ----------
        tree : ObliqueTree
            With ``n_features`` features.

        Returns
        -------
        tree : ObliqueTree
            With ``n_inputs`` features and zero missing-value terms.
        """
        d = self.n_features
        rows = np.repeat(np.arange(tree.node_count), np.diff(tree.weight_indptr))
        index, value = tree.weight_index, tree.weight_value
        slot = np.full(d, -1, dtype=INDEX_DTYPE)
        slot[self.columns] = np.arange(self.columns.shape[0])
        has = slot[index] >= 0
        extra = tree.weight_missing[has] - value[has] * self.fill[index[has]]
        rows_all = np.concatenate([rows, rows[has]])
        index_all = np.concatenate([index, d + slot[index[has]]])
        value_all = np.concatenate([value, extra])
        order = np.lexsort((index_all, rows_all))
        counts = np.bincount(rows_all, minlength=tree.node_count)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        return tree.with_splits(indptr, index_all[order], value_all[order], self.n_inputs)

    def needed_columns(self, tree):
        """Features whose missing-value term in ``tree`` is not ``w_j * fill_j``.

        Those need an indicator for :meth:`unfold` to be exact.
        """
        index = tree.weight_index
        differs = tree.weight_missing != tree.weight_value * self.fill[index]
        return np.unique(index[differs])
