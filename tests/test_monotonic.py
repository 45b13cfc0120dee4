"""``monotonic_cst``: the parameter's checks and the property the estimators' tests assert.

Each method's own tests (``tests/<method>/test_monotonic.py``) fit with
constraints and assert :func:`tests._helpers.monotone_violations` is at most
1e-12; here that measure is checked on models known to be (and not to be)
monotone, so a passing method test means what it says.
"""

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor

from obliquetrees.utils.validation import check_monotonic_cst
from tests._helpers import monotone_violations


class _Fitted:
    n_features_in_ = 3


def _estimator(**attributes):
    estimator = _Fitted()
    estimator.__dict__.update(attributes)
    return estimator


def test_constraints_are_checked_as_scikit_learn_checks_them():
    assert check_monotonic_cst(_estimator(), [1, 0, -1]).tolist() == [1, 0, -1]
    assert check_monotonic_cst(_estimator(), [1, 0, -1]).dtype == np.int8
    named = _estimator(feature_names_in_=np.array(["a", "b", "c"], dtype=object))
    assert check_monotonic_cst(named, {"a": 1, "c": -1}).tolist() == [1, 0, -1]


@pytest.mark.parametrize("cst", [None, [0, 0, 0], {}])
def test_no_constraint_is_none(cst):
    named = _estimator(feature_names_in_=np.array(["a", "b", "c"], dtype=object))
    assert check_monotonic_cst(named, cst) is None


@pytest.mark.parametrize(
    "cst, attributes, message",
    [
        ([1, 2, 0], {}, r"array-like of -1, 0 or 1\. Observed values: \[2\]"),
        ([1, 0], {}, r"monotonic_cst has shape \(2,\) but the input data X has 3 features"),
        ({"a": 1}, {}, "was not fitted on data with feature names"),
        ({"z": 1}, {"feature_names_in_": np.array(["a", "b", "c"])}, "unexpected feature names"),
        ([1, 0, 0], {"n_classes_": 3}, "not supported with multiclass classification"),
        ([1, 0, 0], {"n_outputs_": 2}, "not supported with multiple outputs"),
    ],
)
def test_bad_constraints_raise_scikit_learns_errors(cst, attributes, message):
    with pytest.raises(ValueError, match=message):
        check_monotonic_cst(_estimator(**attributes), cst)


def _monotone_problem(seed=0, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = 2 * X[:, 0] - np.sin(3 * X[:, 0]) - X[:, 2] + 0.5 * rng.normal(size=n)
    return X, y


def test_the_violation_measure_passes_a_monotone_model_and_fails_another():
    X, y = _monotone_problem()
    cst = [1, 0, -1]
    monotone = HistGradientBoostingRegressor(monotonic_cst=cst, max_iter=30).fit(X, y)
    free = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    assert monotone_violations(monotone.predict, X, cst, n_lines=100) <= 1e-12
    assert monotone_violations(free.predict, X, cst, n_lines=100) > 1e-3
