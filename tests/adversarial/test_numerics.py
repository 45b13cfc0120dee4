"""Adversarial numerics (issue 14): extreme feature and target scales, constant columns.

Every public estimator must train on data whose columns sit near 1e+-160, 1e+-300
as well as on ordinary data (no overflow warning, no NaN, no silent constant
predictor), refuse data that vary only below the representable limit with a
ValueError naming it, and give features that were constant in training no weight.
"""

import warnings

import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression
from sklearn.metrics import r2_score

from obliquetrees._core.tree import feature_moments
from tests.adversarial._subprocess import assert_ok, run_python
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()
REGRESSORS = [cls for cls in ESTIMATORS if not is_classifier(cls())]
N_TRAIN = 200
#: Per-column spread of the factors multiplying the columns (times the scale).
SPREAD = np.array([1.0, 3.0, 0.5, 7.0, 0.2])


def _ids(classes):
    return [cls.__name__ for cls in classes]


def _estimator(cls):
    params = dict(FAST_PARAMS.get(cls.__name__, {}))
    params.setdefault("random_state", 0)
    return cls(**params)


def _data(cls):
    if is_classifier(cls()):
        X, y = make_classification(300, 5, n_informative=3, n_redundant=0, random_state=0)
    else:
        X, y = make_regression(300, 5, n_informative=3, noise=5.0, random_state=0)
    return X, y


def _fit_predict(cls, X, y):
    """Fit on the first N_TRAIN rows, predict the rest; numpy warnings fail."""
    est = _estimator(cls)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        est.fit(X[:N_TRAIN], y[:N_TRAIN])
        pred = est.predict(X[N_TRAIN:])
    if not is_classifier(est):
        assert np.all(np.isfinite(pred))
    return est, pred


def _score(cls, y_test, pred):
    if is_classifier(cls()):
        return float(np.mean(pred == y_test))
    return r2_score(y_test, pred)


_BASELINE = {}


def _baseline_score(cls):
    """Test score on the unscaled data (computed once per estimator)."""
    if cls not in _BASELINE:
        X, y = _data(cls)
        _, pred = _fit_predict(cls, X, y)
        _BASELINE[cls] = _score(cls, y[N_TRAIN:], pred)
    return _BASELINE[cls]


def _assert_close_to_baseline(cls, score):
    baseline = _baseline_score(cls)
    tol = 0.06 if is_classifier(cls()) else 0.05
    assert score >= baseline - tol, (score, baseline)


# beyond ~1e+-154 the squares in the moments overflow or underflow
@pytest.mark.parametrize("scale", [1e160, 1e-170, 1e300, 1e-300])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=_ids(ESTIMATORS))
def test_extreme_feature_scales_train_like_ordinary_data(cls, scale):
    X, y = _data(cls)
    _, pred = _fit_predict(cls, X * (scale * SPREAD), y)
    _assert_close_to_baseline(cls, _score(cls, y[N_TRAIN:], pred))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=_ids(ESTIMATORS))
def test_denormal_columns_get_no_weight(cls):
    """Columns at denormal scale cannot have a finite raw-unit weight: ignored."""
    X, y = _data(cls)
    rng = np.random.default_rng(0)
    Xd = np.hstack([X, rng.normal(size=(X.shape[0], 2)) * 1e-310])
    est, pred = _fit_predict(cls, Xd, y)
    _assert_close_to_baseline(cls, _score(cls, y[N_TRAIN:], pred))
    for tree in getattr(est, "trees_", None) or [est.tree_]:
        assert not np.isin(tree.weight_index, [5, 6]).any()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=_ids(ESTIMATORS))
def test_data_varying_only_below_the_limit_are_refused(cls):
    X, y = _data(cls)
    with pytest.raises(ValueError, match="below 9.33e-302"):
        _estimator(cls).fit(X * 1e-310, y)


@pytest.mark.parametrize("scale", [1e300, 1e-300])
@pytest.mark.parametrize("cls", REGRESSORS, ids=_ids(REGRESSORS))
def test_extreme_target_scales(cls, scale):
    X, y = _data(cls)
    _, pred = _fit_predict(cls, X, y * scale)
    _assert_close_to_baseline(cls, r2_score(y[N_TRAIN:], pred / scale))


def _outputs(est, X):
    out = [est.predict(X)]
    if hasattr(est, "predict_proba"):
        out.append(est.predict_proba(X))
    return out


@pytest.mark.parametrize("cls", ESTIMATORS, ids=_ids(ESTIMATORS))
def test_constant_training_column_carries_no_weight(cls):
    X, y = _data(cls)
    X = X.copy()
    X[:, 1] = 5.0
    est = _estimator(cls).fit(X[:N_TRAIN], y[:N_TRAIN])
    for tree in getattr(est, "trees_", None) or [est.tree_]:
        assert 1 not in tree.weight_index
    X_test = X[N_TRAIN:].copy()
    expected = _outputs(est, X_test)
    for value in (50.0, -1e6, 0.0):
        X_test[:, 1] = value
        for got, want in zip(_outputs(est, X_test), expected, strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cls", REGRESSORS, ids=_ids(REGRESSORS))
def test_all_constant_features_predict_within_the_targets(cls):
    y = np.linspace(0.0, 1.0, 200)
    est = _estimator(cls).fit(np.ones((200, 3)), y)
    pred = est.predict(np.full((1, 3), 2.0))
    assert 0.0 <= pred[0] <= 1.0
    np.testing.assert_array_equal(pred, est.predict(np.ones((1, 3))))


@pytest.mark.parametrize("exponent", [-1060, -900, -600, 900])
def test_feature_moments_are_exact_under_power_of_two_scaling(exponent):
    """Pre-scaling is exact: scaled data have the scaled moments bit for bit."""
    rng = np.random.default_rng(1)
    X = rng.normal(3.0, 2.0, size=(500, 3))
    w = rng.uniform(0.5, 2.0, 500)
    for sample_weight in (None, w):
        mean, std = feature_moments(X, sample_weight)
        mean_s, std_s = feature_moments(np.ldexp(X, exponent), sample_weight)
        if exponent > -1020:  # normal values: exact
            np.testing.assert_array_equal(mean_s, np.ldexp(mean, exponent))
            np.testing.assert_array_equal(std_s, np.ldexp(std, exponent))
        else:  # denormal values lose bits when stored, not in the moments
            np.testing.assert_allclose(std_s / np.ldexp(std, exponent), 1.0, rtol=1e-9)


def test_unstandardised_e2edt_gives_constant_columns_no_weight():
    from obliquetrees import E2EDTClassifier

    X, y = make_classification(300, 5, n_informative=3, n_redundant=0, random_state=0)
    X[:, 1] = 5.0
    params = dict(FAST_PARAMS["E2EDTClassifier"], random_state=0, standardize=False)
    est = E2EDTClassifier(**params).fit(X, y)
    assert all(1 not in tree.weight_index for tree in est.trees_)
    X_test = X.copy()
    X_test[:, 1] = 50.0
    np.testing.assert_array_equal(est.predict_proba(X_test), est.predict_proba(X))


def test_centred_values_beyond_float64_are_refused():
    """x - mean beyond 1.8e308 used to feed NaN to the kernels (CO2 looped for ever)."""
    proc = run_python(
        """
        import numpy as np, pytest
        from sklearn.datasets import make_classification
        from tests.adversarial.test_numerics import ESTIMATORS, _estimator

        X, y = make_classification(100, 3, n_informative=2, n_redundant=0, random_state=0)
        X[:, 0] = np.where(X[:, 0] > -1.5, 1e308, -1.7e308)
        for cls in ESTIMATORS:
            with pytest.raises(ValueError, match="of X .* exceeds the float64 limit"):
                _estimator(cls).fit(X, y)
        """,
        timeout=120,
    )
    assert_ok(proc)


@pytest.mark.parametrize("cls", REGRESSORS, ids=_ids(REGRESSORS))
def test_centred_targets_beyond_float64_are_refused(cls):
    """Targets y - mean beyond 1.8e308 used to give a constant predictor."""
    X, y = _data(cls)
    y = np.where(y > -150, 1e308, -1.7e308)
    with pytest.raises(ValueError, match="of y .* exceeds the float64 limit"):
        _estimator(cls).fit(X, y)
