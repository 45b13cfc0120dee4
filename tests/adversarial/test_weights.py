"""Extreme sample and class weights: proper distributions, finite output, clear errors."""

import warnings

import numpy as np
import pytest
from sklearn.base import is_classifier

from obliquetrees import CO2ForestClassifier
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()


def _data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] > 0).astype(int)
    return X, y


def _fit(cls, X, y, sample_weight=None, **extra):
    est = cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0, **extra})
    if not is_classifier(est):
        y = y.astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny fits: convergence warnings are expected
        return est.fit(X, y, sample_weight=sample_weight)


def _assert_proper_output(est, X):
    if is_classifier(est):
        proba = est.predict_proba(X)
        assert np.all(np.isfinite(proba))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    else:
        assert np.all(np.isfinite(est.predict(X)))


def test_co2_bootstraps_without_weight_keep_proper_leaves():
    """Weights on 2 rows: most bootstraps draw neither, their root had all-zero values."""
    X, y = _data()
    y[:2] = [0, 1]
    sw = np.zeros(len(y))
    sw[:2] = 1.0
    est = CO2ForestClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y, sw)
    for tree in est.trees_:
        np.testing.assert_allclose(tree.value.sum(axis=1), 1.0)
    np.testing.assert_allclose(est.predict_proba(X).sum(axis=1), 1.0)


def test_co2_empty_root_takes_the_weighted_training_distribution():
    X, y = _data()
    y[:2] = [0, 1]
    sw = np.zeros(len(y))
    sw[:2] = [1.0, 3.0]
    est = CO2ForestClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y, sw)
    empty = [t for t in est.trees_ if t.n_node_samples[0] == 0]
    assert empty, "expected a bootstrap that draws neither weighted row"
    for tree in empty:
        np.testing.assert_allclose(tree.value[0], [0.25, 0.75])


@pytest.mark.parametrize(
    "class_weight, match",
    [
        ({0: 0, 1: 0}, "sum to zero"),
        ({0: -1.0}, "non-negative"),
        ({0: np.nan}, "finite"),
        ({1: np.inf}, "finite"),
        ({0: "heavy"}, "numbers"),
        ({5: 2.0}, "not a class"),
    ],
)
def test_co2_rejects_bad_class_weight(class_weight, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        CO2ForestClassifier(n_estimators=2, max_depth=2, class_weight=class_weight).fit(X, y)


def test_co2_class_weight_zero_where_sample_weight_is_not():
    X, y = _data()
    sw = (y == 1).astype(float)  # only class 1 weighted, and class 1 weighs 0
    with pytest.raises(ValueError, match="sum to zero"):
        CO2ForestClassifier(n_estimators=2, class_weight={1: 0.0}).fit(X, y, sw)


@pytest.mark.parametrize(
    "weights",
    ["huge", "tiny", "all_but_one_zero", "two_rows"],
)
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_extreme_sample_weights_give_proper_output(cls, weights):
    X, y = _data()
    sw = {
        "huge": np.full(len(y), 1e300),
        "tiny": np.full(len(y), 1e-300),
        "all_but_one_zero": np.eye(len(y))[3],
        "two_rows": np.eye(len(y))[3] + np.eye(len(y))[int(np.argmax(y != y[3]))],
    }[weights]
    est = _fit(cls, X, y, sw)
    _assert_proper_output(est, X)
