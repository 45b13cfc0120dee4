"""CO2 Forest on sparse input (obliquetrees/co2/_sparse_kernels.py, co2/_grow.py).

A sparse fit runs the dense algorithm (same feature draws, minibatch orders,
centring, CCCP) on the stored entries, in another summation order: the
guarantee tested here is the same predictions as the dense fit of the same
data and weights equal up to rounding (``rtol=1e-6``), and that X is never
densified.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees import CO2ForestClassifier
from tests._helpers import fit_peak_memory

pytest.importorskip("numba")


def _data(n=200, d=30, density=0.2, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed)
    y = (X @ rng.randn(d) > 0).astype(np.int64)
    return X, y


def _fit(X, y, **kw):
    kw = {"n_estimators": 2, "random_state": 0, "max_depth": 4} | kw
    return CO2ForestClassifier(**kw).fit(X, y)


def _weights(tree, n_features):
    """The tree's split weights as a dense (n_nodes, n_features) array."""
    dense = np.zeros((tree.weight_indptr.shape[0] - 1, n_features))
    rows = np.repeat(np.arange(dense.shape[0]), np.diff(tree.weight_indptr))
    dense[rows, tree.weight_index] = tree.weight_value
    return dense


def _assert_same_model(dense, sparse, X):
    assert len(dense.trees_) == len(sparse.trees_)
    for a, b in zip(dense.trees_, sparse.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        # a feature constant in a node gets exactly no weight from the sparse kernel, a
        # rounding-level one (its centred values are not exactly 0) from the dense one
        d = X.shape[1]
        np.testing.assert_allclose(_weights(a, d), _weights(b, d), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(a.bias, b.bias, rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(a.value, b.value)
    Xd = X.toarray()
    np.testing.assert_array_equal(dense.predict(Xd), sparse.predict(X))
    np.testing.assert_array_equal(dense.predict_proba(Xd), sparse.predict_proba(X))
    np.testing.assert_allclose(dense.feature_importances_, sparse.feature_importances_, atol=1e-12)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_formats_match_dense(fmt):
    X, y = _data()
    dense = _fit(X.toarray(), y)
    sparse = _fit(X.asformat(fmt), y)
    _assert_same_model(dense, sparse, X)


@pytest.mark.parametrize("bootstrap", [True, False])
@pytest.mark.parametrize("max_features", [None, "sqrt"])
def test_sparse_matches_dense_bootstrap_and_max_features(bootstrap, max_features):
    X, y = _data(seed=1)
    kw = {"bootstrap": bootstrap, "max_features": max_features}
    _assert_same_model(_fit(X.toarray(), y, **kw), _fit(X, y, **kw), X)


@pytest.mark.parametrize("max_cccp_samples", [40, 100])
def test_sparse_matches_dense_with_subsampled_cccp(max_cccp_samples):
    # nodes above max_cccp_samples rows fit their CCCP on the same drawn rows in both kernels
    X, y = _data(seed=3)
    kw = {"max_cccp_samples": max_cccp_samples}
    dense, sparse = _fit(X.toarray(), y, **kw), _fit(X, y, **kw)
    _assert_same_model(dense, sparse, X)
    full = _fit(X.toarray(), y)
    assert any(  # the subsample changed some split
        not np.array_equal(a.bias, b.bias) for a, b in zip(dense.trees_, full.trees_, strict=True)
    )


def test_sparse_sample_weight():
    X, y = _data(seed=2)
    sw = np.random.RandomState(0).uniform(0, 3, size=y.shape[0])
    sw[:10] = 0.0
    dense = CO2ForestClassifier(n_estimators=2, random_state=0, max_depth=4)
    sparse = CO2ForestClassifier(n_estimators=2, random_state=0, max_depth=4)
    dense.fit(X.toarray(), y, sample_weight=sw)
    sparse.fit(X, y, sample_weight=sw)
    _assert_same_model(dense, sparse, X)


def test_sparse_zero_column_and_empty_rows():
    X, y = _data(seed=3)
    X = X.tolil()
    X[:, 5] = 0.0  # a column without stored entries: constant, never weighted
    X[:20, :] = 0.0  # empty rows
    X = X.tocsr()
    X.eliminate_zeros()
    dense = _fit(X.toarray(), y)
    sparse = _fit(X, y)
    _assert_same_model(dense, sparse, X)
    for tree in sparse.trees_:
        assert 5 not in tree.weight_index


@pytest.mark.filterwarnings("ignore:.*drawn by every bootstrap:UserWarning")
def test_sparse_oob_and_warm_start():
    X, y = _data(n=150, seed=4)
    dense = _fit(X.toarray(), y, n_estimators=3, oob_score=True)
    sparse = _fit(X, y, n_estimators=3, oob_score=True)
    np.testing.assert_array_equal(dense.oob_decision_function_, sparse.oob_decision_function_)
    assert dense.oob_score_ == sparse.oob_score_
    warm = _fit(X, y, n_estimators=2, warm_start=True)
    warm.set_params(n_estimators=3).fit(X, y)
    cold = _fit(X, y, n_estimators=3)
    np.testing.assert_array_equal(warm.predict_proba(X), cold.predict_proba(X))


def test_sparse_fit_does_not_densify():
    """A 20000 x 20000 CSR at 0.1 % density: the dense copy would be 3.2 GB."""
    n = d = 20_000
    X = sp.random(n, d, density=0.001, format="csr", random_state=np.random.default_rng(0))
    y = (X @ np.random.RandomState(0).randn(d) > 0).astype(np.int64)
    clf = CO2ForestClassifier(n_estimators=1, max_depth=3, random_state=0)
    peak = fit_peak_memory(clf, X, y)
    assert peak < n * d * 8 / 20, peak  # below 160 MB, far from 3.2 GB
