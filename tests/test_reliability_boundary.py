"""Boundary cases of issue 37: inputs and parameters at the edge of what a fit can hold.

Features without spread in a saved hinge model, a constant regression target,
sample weights whose sum overflows float64, absurd ``n_estimators`` and
``n_jobs``, and Ctrl-C during a fit (in a child process).
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import is_classifier

from obliquetrees import HingeForestClassifier, HingeForestRegressor
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()


def _make(cls, **extra):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0, **extra})


def _fit(est, X, y, sample_weight=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny fits: convergence warnings are expected
        return est.fit(X, y, sample_weight=sample_weight)


# ------------------------------------------- hinge features without spread
def _without_spread(case):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    if case == "constant column":
        X[:, 2] = 3.0
    elif case == "all-NaN column":
        X[:, 2] = np.nan
    else:  # the constant (blank) border pixels of the digits
        from sklearn.datasets import load_digits

        X = load_digits().data[:200]
        assert np.any(X.std(axis=0) == 0)
    return X


@pytest.mark.parametrize("case", ["constant column", "all-NaN column", "digits"])
@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_hinge_model_with_a_feature_without_spread_loads_and_ignores_it(cls, case):
    """Such a feature has scale +inf (its standardised value is 0): the saved model loads."""
    X = _without_spread(case)
    y = X[:, 0] > np.nanmedian(X[:, 0])
    est = _fit(_make(cls), X, y if is_classifier(cls()) else y.astype(float))
    assert np.any(np.isposinf(est._model.x_scale))
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    # the feature carried no information in training and cannot move a prediction
    flat = np.flatnonzero(np.isposinf(est._model.x_scale[: X.shape[1]]))
    moved = X.copy()
    moved[:, flat] = 123.0
    np.testing.assert_array_equal(loaded.predict(moved), est.predict(X))


@pytest.mark.parametrize("bad", [np.nan, 0.0, -1.0, -np.inf])
def test_hinge_model_still_refuses_a_scale_that_is_not_positive(bad):
    X = _without_spread("constant column")
    est = _fit(_make(HingeForestClassifier), X, X[:, 0] > 0)
    est._model.x_scale[0] = bad
    with pytest.raises(ValueError, match="x_scale"):
        pickle.loads(pickle.dumps(est))
