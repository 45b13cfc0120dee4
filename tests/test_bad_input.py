"""Every estimator survives odd and bad input: clear errors, never NaN or a crash.

Each case runs on every public estimator (discovered as in test_common) with
its fast parameters.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression

from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()


def _make(cls, **params):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), **params})


def _data(cls, n_samples=60, n_features=4, seed=0):
    if is_classifier(cls()):
        X, y = make_classification(
            n_samples, n_features, n_informative=2, n_redundant=0, n_classes=2, random_state=seed
        )
    else:
        X, y = make_regression(n_samples, n_features, noise=0.1, random_state=seed)
    return X, y


def _assert_finite_model(model, X):
    """Fitted arrays and predictions contain no NaN/inf."""
    trees = model.trees_ if hasattr(model, "trees_") else [model.tree_]
    for tree in trees:
        tree.check_invariants()
    outputs = [model.predict(X)]
    if hasattr(model, "predict_proba"):
        proba = model.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-9)
        outputs.append(proba)
    for out in outputs:
        if out.dtype.kind == "f":
            assert np.all(np.isfinite(out))
    return outputs


pytestmark = pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_inf_in_X_is_a_clear_error(cls, bad):
    # NaN is a missing value (tests/test_missing_values.py); infinity is refused
    X, y = _data(cls)
    X_bad = X.copy()
    X_bad[3, 1] = bad
    with pytest.raises(ValueError, match="infinity"):
        _make(cls).fit(X_bad, y)
    model = _make(cls).fit(X, y)
    with pytest.raises(ValueError, match="infinity"):
        model.predict(X_bad)


def test_empty_input_is_a_clear_error(cls):
    with pytest.raises(ValueError, match="0 sample"):
        _make(cls).fit(np.empty((0, 3)), np.empty(0))
    X, y = _data(cls)
    with pytest.raises(ValueError, match="0 feature"):
        _make(cls).fit(np.empty((len(X), 0)), y)
    model = _make(cls).fit(X, y)
    with pytest.raises(ValueError, match="0 sample"):
        model.predict(np.empty((0, X.shape[1])))


def test_one_sample(cls):
    X, y = _data(cls)
    model = _make(cls)
    try:
        model.fit(X[:1], y[:1])
    except ValueError as exc:
        assert "sample" in str(exc) or "class" in str(exc)
    else:
        _assert_finite_model(model, X)


def test_one_feature_and_constant_features(cls):
    X, y = _data(cls)
    _assert_finite_model(_make(cls).fit(X[:, :1], y), X[:, :1])
    X_const = X.copy()
    X_const[:, 2] = 7.0
    _assert_finite_model(_make(cls).fit(X_const, y), X_const)
    X_all_const = np.full_like(X, 3.0)
    _assert_finite_model(_make(cls).fit(X_all_const, y), X_all_const)


def test_one_class(cls):
    if not is_classifier(cls()):
        pytest.skip("classifiers only")
    X, _ = _data(cls)
    y = np.full(len(X), "only")
    model = _make(cls).fit(X, y)
    assert (model.predict(X) == "only").all()
    np.testing.assert_array_equal(model.predict_proba(X), 1.0)


@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_extreme_magnitudes(cls, scale):
    X, y = _data(cls)
    model = _make(cls).fit(X * scale, y)
    _assert_finite_model(model, X * scale)
    if is_classifier(cls()):
        # the problem is scale-free: extreme units must not destroy the fit
        assert model.score(X * scale, y) > 0.7


def test_string_and_object_labels(cls):
    if not is_classifier(cls()):
        pytest.skip("classifiers only")
    X, y = _data(cls)
    labels = np.array(["cat", "dog"])[y]
    model = _make(cls).fit(X, labels)
    assert set(model.predict(X)) <= {"cat", "dog"}
    model = _make(cls).fit(X, labels.astype(object))
    assert model.predict(X).dtype == object


@pytest.mark.parametrize(
    "convert",
    [
        lambda X: np.round(X * 10).astype(np.int64),
        lambda X: X.astype(np.float16),
        lambda X: X.astype(np.float32),
        np.asfortranarray,
        lambda X: np.repeat(X, 2, axis=1)[:, ::2],
    ],
    ids=["int64", "float16", "float32", "fortran", "non-contiguous"],
)
def test_input_dtypes_and_layouts(cls, convert):
    X, y = _data(cls)
    Xc = convert(X)
    reference = _make(cls, random_state=0).fit(np.asarray(Xc, dtype=np.float64), y)
    model = _make(cls, random_state=0).fit(Xc, y)
    np.testing.assert_array_equal(model.predict(Xc), reference.predict(Xc))


def test_read_only_memmapped_input(cls, tmp_path):
    X, y = _data(cls)
    path = tmp_path / "X.npy"
    np.save(path, X)
    X_map = np.load(path, mmap_mode="r")
    model = _make(cls, random_state=0).fit(X_map, y)
    np.testing.assert_array_equal(model.predict(X_map), model.predict(X))


def test_wrong_number_of_features_at_predict(cls):
    X, y = _data(cls)
    model = _make(cls).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :-1])


def test_sparse_input(cls):
    X, y = _data(cls)
    if cls._fit_accepts_sparse:  # trained without densifying: tests/<method>/test_sparse.py
        _assert_finite_model(_make(cls).fit(sp.csr_matrix(X), y), X)
    else:
        with pytest.raises(TypeError, match="[Ss]parse"):
            _make(cls).fit(sp.csr_matrix(X), y)
    model = _make(cls).fit(X, y)
    # prediction accepts CSR and matches dense input exactly
    np.testing.assert_array_equal(model.predict(sp.csr_matrix(X)), model.predict(X))


def _malformed(X, fmt, edit):
    """``X`` in sparse format ``fmt`` with its index arrays edited after construction."""
    M = sp.csr_matrix(X).asformat(fmt)
    if edit == "index":
        (M.indices if fmt != "coo" else M.col)[3] = 10**6  # beyond the last column / row
    else:  # a decreasing indptr
        M.indptr[2] = M.indptr[-1] + 5
    return M


@pytest.mark.parametrize(
    "fmt, edit", [("csr", "index"), ("csr", "indptr"), ("csc", "index"), ("coo", "index")]
)
def test_malformed_sparse_input_is_a_clear_error(cls, fmt, edit):
    """Out-of-range indices would make scipy's conversions and the kernels read out of bounds."""
    X, y = _data(cls)
    model = _make(cls).fit(X, y)
    with pytest.raises(ValueError, match=f"malformed {fmt.upper()}"):
        model.predict(_malformed(X, fmt, edit))
    if cls._fit_accepts_sparse:
        with pytest.raises(ValueError, match=f"malformed {fmt.upper()}"):
            _make(cls).fit(_malformed(X, fmt, edit), y)


def test_sample_weight_zeros_negative_wrong_length(cls):
    X, y = _data(cls)
    w = np.ones(len(X))
    w[:10] = 0.0
    _assert_finite_model(_make(cls).fit(X, y, sample_weight=w), X)
    with pytest.raises(ValueError, match="[Nn]egative"):
        _make(cls).fit(X, y, sample_weight=-w)
    with pytest.raises(ValueError, match="shape|length|samples"):
        _make(cls).fit(X, y, sample_weight=w[:-1])
    with pytest.raises(ValueError, match="zero"):
        _make(cls).fit(X, y, sample_weight=np.zeros(len(X)))


def test_every_parameter_is_validated_by_name(cls):
    X, y = _data(cls)
    params = set(cls().get_params())
    assert params == set(cls._parameter_constraints)
    for name in sorted(params):
        with pytest.raises((ValueError, TypeError), match=f"'{name}' parameter"):
            _make(cls, **{name: object()}).fit(X, y)
