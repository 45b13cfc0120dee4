"""scikit-learn's estimator checks over every public estimator of the package.

Estimators are discovered from ``obliquetrees.__all__`` so a new one cannot
escape the checks. ``FAST_PARAMS`` keeps each check quick; every expected
failure in ``EXPECTED_FAILED_CHECKS`` carries the reason it fails.
"""

import inspect

from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import obliquetrees


def discover_estimators():
    """Public estimator classes exported by ``obliquetrees``."""
    found = []
    for name in obliquetrees.__all__:
        obj = getattr(obliquetrees, name)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
            found.append(obj)
    return found


#: Small, fast constructor arguments per estimator class name.
FAST_PARAMS = {
    "CO2ForestClassifier": dict(n_estimators=5, max_cccp_iter=5),
}

#: check name -> reason, per estimator class name.
EXPECTED_FAILED_CHECKS = {
    "CO2ForestClassifier": {
        "check_sample_weight_equivalence_on_dense_data": (
            "the bootstrap draws n rows of the data it is given, so repeating a row "
            "changes every tree's sample (as for RandomForestClassifier)"
        ),
        "check_class_weight_classifiers": (
            "fully grown trees end in pure leaves whatever the class weights; the check "
            "relies on min_weight_fraction_leaf, which CO2 Forest does not have"
        ),
        "check_estimators_unfitted": (
            "base.ObliqueClassifierMixin.predict reads self.classes_ before "
            "predict_proba checks fitting (AttributeError, not NotFittedError); "
            "foundation fix pending"
        ),
    },
}


def _instances():
    return [cls(**FAST_PARAMS.get(cls.__name__, {})) for cls in discover_estimators()]


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


@parametrize_with_checks(_instances(), expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
