"""Sparse training of the soft trees: kernels, estimators, memory.

Dense and sparse input of the same data are not bit-identical (moments and
gate logits sum in a different order: stored entries only, centring applied
algebraically). The kernels agree to rounding (tested below); whole fits agree
to rounding where the SGD is not chaotic (``learning_rate=1``,
``batch_size=16``: tested), while with the paper's online SGD at step 5 a
one-ulp change of a dense input already changes the grown tree, and dense and
sparse fits differ as much (documented in the estimators' Notes).
"""

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees import SoftTreeClassifier, SoftTreeRegressor
from obliquetrees._core.tree import standardization
from tests._helpers import fit_peak_memory, sparse_linear_problem

K = pytest.importorskip("obliquetrees.soft._kernels")
AX = pytest.importorskip("obliquetrees.soft._axis_split")
FT = pytest.importorskip("obliquetrees.soft._finetune")
R = pytest.importorskip("obliquetrees._training._rows")
S = pytest.importorskip("obliquetrees.soft.training")

#: Settings under which the SGD is stable enough for dense and sparse fits to agree.
STABLE = dict(max_depth=3, n_restarts=3, max_epochs=5, learning_rate=1.0, batch_size=16)


def _data(n=400, d=30, seed=0):
    return sparse_linear_problem(n, d, density=0.15, seed=seed)


def _standardised(X):
    mean, scale = standardization(X)
    return (X.toarray() - mean) / scale, R.sparse_rows(X, mean, scale)


def test_kernels_agree_on_dense_and_sparse_rows():
    X, _, _ = _data(n=200, d=12)
    Xd, rows = _standardised(X)
    rng = np.random.default_rng(1)
    n = Xd.shape[0]
    Y, P, A, sw = rng.random((n, 2)), rng.random(n), rng.random((n, 2)), rng.random(n)
    w, zL, zR = rng.normal(size=12), rng.random(2), rng.random(2)
    dense = K.split_loss_grad(Xd, Y, P, A, sw, w, 0.3, zL, zR, 0)
    sparse = K.split_loss_grad(rows, Y, P, A, sw, w, 0.3, zL, zR, 0)
    for a, b in zip(dense, sparse, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    cl, cr = np.array([1, -1, 3, -1, -1]), np.array([2, -1, 4, -1, -1])
    W, b, Z = rng.normal(size=(5, 12)), rng.normal(size=5), rng.normal(size=(5, 2))
    for a, b_ in zip(
        K.forward_context(Xd, cl, cr, W, b, Z, 5, 3),
        K.forward_context(rows, cl, cr, W, b, Z, 5, 3),
        strict=True,
    ):
        np.testing.assert_allclose(a, b_, rtol=1e-12, atol=1e-12)
    for a, b_ in zip(
        FT.tree_loss_grad(Xd, Y, sw, cl, cr, W, b, Z, 5, 2),
        FT.tree_loss_grad(rows, Y, sw, cl, cr, W, b, Z, 5, 2),
        strict=True,
    ):
        np.testing.assert_allclose(a, b_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        K.node_membership(Xd, sw, cl, cr, W, b, 5),
        K.node_membership(rows, sw, cl, cr, W, b, 5),
        rtol=1e-12,
    )


@pytest.mark.parametrize("seed", range(4))
def test_sparse_axis_split_equals_dense(seed):
    X, _, _ = _data(n=150, d=10, seed=seed)
    Xd, rows = _standardised(X)
    rng = np.random.default_rng(seed)
    u, Y = rng.random(150), rng.random((150, 3))
    u[rng.random(150) < 0.2] = 0.0
    f, t, lm, rm, g = AX.best_axis_split(Xd, *S.presort(Xd), u, Y)
    fs, ts, lms, rms, gs = AX.best_axis_split_sparse(R.sorted_columns(rows), u, Y)
    assert fs == f and ts == t
    np.testing.assert_allclose(lms, lm, rtol=1e-12)
    np.testing.assert_allclose(rms, rm, rtol=1e-12)
    np.testing.assert_allclose(gs, g, rtol=1e-9)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("cls", [SoftTreeClassifier, SoftTreeRegressor])
def test_dense_and_sparse_fits_agree(cls, fmt):
    X, s, y = _data()
    target = y if cls is SoftTreeClassifier else s
    Xd = X.toarray()
    dense = cls(random_state=0, finetune_epochs=2, **STABLE).fit(Xd, target)
    sparse = cls(random_state=0, finetune_epochs=2, **STABLE).fit(X.asformat(fmt), target)
    assert dense.tree_.node_count == sparse.tree_.node_count > 1
    np.testing.assert_array_equal(dense.tree_.children_left, sparse.tree_.children_left)
    if cls is SoftTreeClassifier:
        np.testing.assert_array_equal(dense.predict(Xd), sparse.predict(X))
        np.testing.assert_allclose(dense.predict_proba(Xd), sparse.predict_proba(X), atol=1e-9)
    else:
        np.testing.assert_allclose(dense.predict(Xd), sparse.predict(X), atol=1e-9 * s.std())
    # the fitted model gives the same outputs for dense and sparse input
    np.testing.assert_array_equal(sparse.predict(Xd), sparse.predict(X))
    # the all-zero column gets no weight
    assert 3 not in sparse.tree_.weight_index


def test_sample_weight_dense_and_sparse_agree():
    X, _, y = _data()
    sw = np.random.default_rng(3).integers(0, 4, size=y.shape[0]).astype(float)
    dense = SoftTreeClassifier(random_state=1, **STABLE).fit(X.toarray(), y, sample_weight=sw)
    sparse = SoftTreeClassifier(random_state=1, **STABLE).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(dense.predict_proba(X.toarray()), sparse.predict_proba(X), atol=1e-9)
    np.testing.assert_allclose(dense.tree_.n_node_samples, sparse.tree_.n_node_samples, rtol=1e-9)


def test_default_settings_fit_sparse_and_generalise_alike():
    """Paper settings (online SGD, step 5): chaotic, so only the quality is compared."""
    X, _, y = _data(n=600, d=30)
    dense = SoftTreeClassifier(random_state=0, max_depth=3, n_restarts=3).fit(X.toarray(), y)
    sparse = SoftTreeClassifier(random_state=0, max_depth=3, n_restarts=3).fit(X, y)
    assert abs(dense.score(X, y) - sparse.score(X, y)) < 0.1
    assert sparse.score(X, y) > 0.8


def test_sparse_fit_memory_is_far_below_dense():
    """20000 x 20000 at 0.1 %: the dense matrix alone would be 3.2 GB."""
    # a Generator: with an integer seed scipy draws all n x p positions (3.2 GB) to pick the entries
    X = sp.random(
        20_000, 20_000, density=0.001, format="csr", random_state=np.random.default_rng(0)
    )
    y = (X @ np.linspace(-1.0, 1.0, 20_000) > 0).astype(int)
    clf = SoftTreeClassifier(max_depth=2, n_restarts=2, max_epochs=1, batch_size=64, random_state=0)
    peak = fit_peak_memory(clf, X, y)
    assert peak < 200e6, peak  # CSR ~5 MB; the gates are n_nodes x 20000
    assert clf.tree_.node_count >= 1
