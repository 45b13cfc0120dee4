"""Sparse (CSR/CSC/COO) training of E2EDTClassifier: same model as dense input, up to rounding.

Dense training rounds the standardised ``Z`` to float32 and sums in BLAS order;
sparse training computes the same products in float64 on the stored entries
(``obliquetrees.e2edt._sparse``). The guarantee tested here is the one
measured: for the same ``random_state`` the trees have the same shape, predictions
agree on >= 99 % of test rows and class probabilities on >= 99 % of rows to 1e-5
(observed: all rows, probabilities to about 1e-8). Sparse input always finetunes
with the exact pass over every node, so the dense models here use
``prune_threshold=0`` (the exact pass) too.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees import E2EDTClassifier
from obliquetrees.e2edt import _kernels as K
from obliquetrees.e2edt import _sparse as S
from tests._helpers import fit_peak_memory, large_sparse_classification

FAST = dict(
    max_depth=3,
    max_epochs=5,
    finetune_epochs=5,
    batch_size=128,
    prune_threshold=0.0,
    random_state=0,
)


def _sparse_problem(seed=0, n=500, p=30, density=0.2, n_classes=3):
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=density, random_state=rng, format="csr")
    X.data = 4.0 * X.data - 1.0  # signed, mean not 0
    scores = X @ rng.standard_normal((p, n_classes))
    y = scores.argmax(axis=1)
    return X, y


def _assert_same_model(dense, sparse, X_test):
    assert [t.node_count for t in dense.trees_] == [t.node_count for t in sparse.trees_]
    pd, ps = dense.predict_proba(X_test), sparse.predict_proba(X_test)
    assert np.mean(pd.argmax(1) == ps.argmax(1)) >= 0.99
    assert np.mean(np.abs(pd - ps).max(axis=1) < 1e-5) >= 0.99


@pytest.fixture(scope="module")
def problem():
    X, y = _sparse_problem()
    X_test, _ = _sparse_problem(seed=1, n=2000)
    return X, y, X_test


def test_estimator_declares_sparse_fit():
    assert E2EDTClassifier._fit_accepts_sparse
    assert E2EDTClassifier().__sklearn_tags__().input_tags.sparse


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_formats_give_the_dense_model(problem, fmt):
    X, y, X_test = problem
    dense = E2EDTClassifier(**FAST).fit(X.toarray(), y)
    sparse = E2EDTClassifier(**FAST).fit(X.asformat(fmt), y)
    _assert_same_model(dense, sparse, X_test)
    assert sparse.score(X, y) == pytest.approx(dense.score(X.toarray(), y), abs=0.01)


def test_sample_weight(problem):
    X, y, X_test = problem
    sw = np.random.default_rng(3).integers(0, 4, X.shape[0]).astype(float)
    dense = E2EDTClassifier(**FAST).fit(X.toarray(), y, sample_weight=sw)
    sparse = E2EDTClassifier(**FAST).fit(X, y, sample_weight=sw)
    _assert_same_model(dense, sparse, X_test)


def test_all_zero_column_and_empty_rows_get_no_weight(problem):
    X, y, X_test = problem
    X = X.tolil()
    X[:, 7] = 0.0  # a feature without stored entries: constant, infinite scale
    X[:40] = 0.0  # empty rows
    X = X.tocsr()
    X.eliminate_zeros()
    assert X[:40].nnz == 0 and X[:, 7].nnz == 0
    dense = E2EDTClassifier(**FAST).fit(X.toarray(), y)
    sparse = E2EDTClassifier(**FAST).fit(X, y)
    _assert_same_model(dense, sparse, X_test)
    for tree in sparse.trees_:
        assert 7 not in tree.weight_index
    # all-empty test rows are routed like the dense zero rows
    zeros = sp.csr_matrix((5, X.shape[1]))
    np.testing.assert_allclose(sparse.predict_proba(zeros), dense.predict_proba(zeros.toarray()))


@pytest.mark.parametrize(
    "params",
    [
        dict(routing="soft"),
        dict(max_leaf_nodes=5, max_depth=4),
        dict(n_estimators=3, max_features=0.5, n_jobs=2),
        dict(standardize=False),
        dict(finetune_epochs=0),
    ],
    ids=["soft", "best-first", "forest", "unstandardized", "greedy-only"],
)
def test_options_give_the_dense_model(problem, params):
    X, y, X_test = problem
    kw = {**FAST, **params}
    dense = E2EDTClassifier(**kw).fit(X.toarray(), y)
    sparse = E2EDTClassifier(**kw).fit(X, y)
    _assert_same_model(dense, sparse, X_test)


def test_image_patches_and_spatial_regularisation():
    rng = np.random.default_rng(0)
    X = sp.random(300, 64, density=0.3, random_state=rng, format="csr")
    y = (X[:, :32].sum(axis=1).A1 > X[:, 32:].sum(axis=1).A1).astype(int)
    kw = dict(FAST, n_estimators=2, image_shape=(8, 8), patch_size=4, spatial_reg=0.1)
    dense = E2EDTClassifier(**kw).fit(X.toarray(), y)
    sparse = E2EDTClassifier(**kw).fit(X, y)
    _assert_same_model(dense, sparse, X)


def test_standardize_false_checks_the_stored_entries():
    # 3e38 / 2 features exceeds float32's range; the implicit zeros are not read
    X = sp.csr_matrix(np.array([[0.0, 3e38], [1.0, 0.0], [0.0, 2.0]] * 4))
    y = np.array([0, 1, 0] * 4)
    for X_fit in (X, X.toarray()):
        with pytest.raises(ValueError, match="standardize=True"):
            E2EDTClassifier(standardize=False).fit(X_fit, y)


# ------------------------------------------------------------ the algebra
def _standardized(seed=0, n=200, p=12):
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=0.3, random_state=rng, format="csr")
    mean = rng.normal(size=p)
    scale = rng.uniform(0.5, 2.0, p)
    scale[3] = np.inf  # a constant feature
    Z = (X.toarray() - mean) / scale
    return rng, S.StandardizedCSR.from_scale(X, mean, scale), Z


def test_products_equal_the_centred_dense_products():
    rng, Zs, Z = _standardized()
    W = rng.normal(size=(5, Z.shape[1]))
    b = rng.normal(size=5)
    np.testing.assert_allclose(Zs.activations(W, b), W @ Z.T + b[:, None], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Zs.dot(W[0]), Z @ W[0], rtol=1e-12, atol=1e-12)
    G = rng.normal(size=(5, Z.shape[0]))
    mask = (rng.random(W.shape) < 0.5).astype(np.uint8)
    out = np.empty_like(W)
    Zs.minus_weight_gradient(G, mask, out)
    np.testing.assert_allclose(out, -(G @ Z) * mask, rtol=1e-12, atol=1e-12)
    rows = np.array([5, 2, 9])
    sub = Zs[rows].columns(np.array([0, 3, 4]))
    np.testing.assert_allclose(sub.dot(np.ones(3)), Z[np.ix_(rows, [0, 3, 4])].sum(1), atol=1e-12)


def test_csr_stump_kernel_follows_the_dense_kernel():
    """Same schedule on float64 data: the trajectories agree up to summation order."""
    rng, Zs, Z = _standardized(n=300)
    # both classes present: with one class the split gradient is zero and Adam
    # would normalise rounding noise into full steps
    s = Z[:, 0] + Z[:, 1]
    y = (s > np.median(s)).astype(np.int64)
    sw = rng.uniform(0.5, 2.0, Z.shape[0])
    k, n_epochs = Z.shape[1], 6
    order = rng.permuted(np.tile(np.arange(Z.shape[0]), (n_epochs - 1, 1)), axis=1)
    adj = np.zeros(k + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    w0 = rng.normal(size=k)
    runs = []
    for fit, data in [(K.fit_stump, np.ascontiguousarray(Z)), (S.fit_stump, Zs)]:
        w, b, pi = w0.copy(), np.array([0.1]), np.full((2, 2), 0.5)
        gamma = fit(
            data, y, sw, w, b, pi, 1.0, 0.1, n_epochs, order, 64, 0.05, 0.9, 0.999, 1e-8, 0.0, *adj
        )
        runs.append((w, b, pi, gamma))
    for got, want in zip(runs[1], runs[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ memory
def test_fit_memory_is_far_below_the_dense_size():
    """A 20000 x 20000 CSR at 0.1 % density (dense: 3.2 GB) fits in a few tens of MB.

    tracemalloc sees numpy's and scipy's buffers (numba's small per-kernel
    scratch is not traced); a densified X, or a dense ``Z``, would be 3.2 GB.
    """
    X, y = large_sparse_classification()
    clf = E2EDTClassifier(max_depth=2, max_epochs=2, finetune_epochs=2, random_state=0)
    peak = fit_peak_memory(clf, X, y)
    data_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes  # about 6.6 MB
    assert peak < 200e6, peak / 1e6  # dense X: 3200 MB
    assert peak < 30 * data_bytes
    assert clf.score(X, y) > 0.6
