"""Missing values (NaN) in every estimator: training, prediction, what the docstrings promise."""

import pickle

import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.utils import get_tags

from obliquetrees import (
    HingeForestClassifier,
)
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import finetune, refit_leaves
from tests.test_common import FAST_PARAMS, discover_estimators

#: Settings per estimator; the registry lists which (one without settings here gets
#: test_common's FAST_PARAMS).
_SETTINGS = {
    "CO2ForestClassifier": dict(n_estimators=3, max_depth=6),
    "E2EDTClassifier": dict(max_depth=4),
    "SoftTreeClassifier": dict(max_depth=3),
    "HingeForestClassifier": dict(n_estimators=5, max_depth=3, max_epochs=10),
    "E2EDTRegressor": dict(max_depth=4),
    "SoftTreeRegressor": dict(max_depth=3),
    "HingeForestRegressor": dict(n_estimators=5, max_depth=3, max_epochs=10),
}


def _maker(cls):
    settings = _SETTINGS.get(cls.__name__, FAST_PARAMS.get(cls.__name__, {}))
    return lambda: cls(**settings, random_state=0)


ALL = [_maker(cls) for cls in discover_estimators()]
CLASSIFIERS = [make for make in ALL if is_classifier(make())]
REGRESSORS = [make for make in ALL if not is_classifier(make())]


def _ids(makers):
    return [type(make()).__name__ for make in makers]


def _data(make, rate=0.2, seed=0):
    rng = np.random.default_rng(seed)
    if hasattr(make(), "predict_proba"):
        X, y = make_classification(400, 6, n_informative=4, random_state=seed)
    else:
        X, y = make_regression(400, 6, noise=1.0, random_state=seed)
    X[rng.random(X.shape) < rate] = np.nan
    return X, y


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_fit_and_predict_with_nan(make):
    X, y = _data(make)
    est = make().fit(X, y)
    assert get_tags(est).input_tags.allow_nan
    out = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)
    assert np.all(np.isfinite(out))
    assert est.score(X, y) > (0.7 if hasattr(est, "predict_proba") else 0.5)
    leaves = est.apply(X)
    assert leaves.shape[0] == X.shape[0]
    assert est.decision_path(X[:5]) is not None
    importances = est.feature_importances_
    assert np.all(np.isfinite(importances)) and importances.sum() == pytest.approx(1.0)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.predict(X), est.predict(X))


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_nan_in_a_feature_without_nan_in_training_is_its_training_mean(make):
    X, y = _data(make, rate=0.0)
    est = make().fit(X, y)
    mean = X.T @ np.full(X.shape[0], 1.0 / X.shape[0])  # the fit's own formula
    X_test = X[:100].copy()
    X_test[::3, 1] = np.nan
    X_test[1::4, 4] = np.nan
    imputed = np.where(np.isnan(X_test), mean, X_test)
    if hasattr(est, "predict_proba"):
        np.testing.assert_allclose(
            est.predict_proba(X_test), est.predict_proba(imputed), atol=1e-12
        )
    else:
        np.testing.assert_allclose(est.predict(X_test), est.predict(imputed), rtol=1e-12)


@pytest.mark.parametrize("make", CLASSIFIERS, ids=_ids(CLASSIFIERS))
def test_learns_from_missingness(make):
    # the class is whether x0 is missing: the indicator input says it in one split
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    y = (rng.random(600) < 0.5).astype(int)
    X[y == 1, 0] = np.nan
    native = make().fit(X[:400], y[:400]).score(X[400:], y[400:])
    imputed = make_pipeline(SimpleImputer(), make()).fit(X[:400], y[:400]).score(X[400:], y[400:])
    assert native > 0.9 and native >= imputed


@pytest.mark.parametrize("make", ALL, ids=_ids(ALL))
def test_infinity_is_still_refused(make):
    X, y = _data(make)
    X[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        make().fit(X, y)
    est = make().fit(*_data(make))
    with pytest.raises(ValueError, match="infinity"):
        est.predict(X)


def test_all_missing_feature():
    X, y = make_classification(300, 5, random_state=0)
    X[:, 2] = np.nan
    for make in CLASSIFIERS:
        est = make().fit(X, y)
        assert np.all(np.isfinite(est.predict_proba(X)))


def test_converted_forest_sends_nan_where_scikit_learn_does():
    X, y = make_classification(1500, 8, random_state=0)
    X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    forest = RandomForestClassifier(15, random_state=0).fit(X[:1000], y[:1000])
    converted = from_sklearn(forest)
    np.testing.assert_array_equal(converted.predict_proba(X), forest.predict_proba(X))


def test_finetune_and_refit_leaves_take_nan():
    X, y = make_classification(1200, 8, random_state=0)
    X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    forest = RandomForestClassifier(8, max_depth=5, random_state=0).fit(X[:800], y[:800])
    tuned = finetune(forest, X[:800], y[:800], epochs=3)
    refitted = refit_leaves(forest, X[:800], y[:800])
    for model in (tuned, refitted):
        proba = model.predict_proba(X[800:])
        assert np.all(np.isfinite(proba))
        assert model.score(X[800:], y[800:]) > 0.8


def test_hinge_partial_fit_keeps_the_first_batches_missing_inputs():
    X, y = make_classification(600, 5, random_state=0)
    first, later = X[:300].copy(), X[300:].copy()
    first[(y[:300] == 1) & (np.arange(300) % 3 == 0), 0] = np.nan  # informative: indicator
    later[::4, 1] = np.nan  # feature 1 had no NaN at the first batch: its mean
    clf = HingeForestClassifier(n_estimators=4, max_depth=3, random_state=0)
    clf.partial_fit(first, y[:300], classes=[0, 1])
    assert clf._missing.columns.tolist() == [0]
    clf.partial_fit(later, y[300:])
    assert clf._missing.columns.tolist() == [0]
    assert np.all(np.isfinite(clf.predict_proba(later)))
