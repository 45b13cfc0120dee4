"""Public estimators document every parameter and every fitted attribute.

numpydoc completeness, checked mechanically so a new parameter or fitted
attribute cannot land undocumented: each ``__init__`` parameter must appear
as ``name :`` in the class docstring's Parameters section, and each public
attribute ending in ``_`` that a fitted estimator exposes (instance
attributes and properties alike) in its Attributes section.
"""

import inspect
import re

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from obliquetrees.convert import from_sklearn
from tests.test_common import FAST_PARAMS, discover_estimators


def _section(doc, title):
    """Text of the numpydoc section ``title`` (up to the next section)."""
    match = re.search(
        rf"^\s*{title}\n\s*-+\n(.*?)(?=^\s*\w[\w ]*\n\s*-{{3,}}\n|\Z)", doc, flags=re.S | re.M
    )
    assert match, f"no {title} section"
    return match.group(1)


def _documented(doc, title):
    return set(re.findall(r"^\s*(\w+) :", _section(doc, title), flags=re.M))


def _fitted_attributes(est):
    names = set()
    for name in dir(est):
        if name.startswith("_") or not name.endswith("_") or name.endswith("__"):
            continue
        try:
            getattr(est, name)
        except AttributeError:  # e.g. tree_ on a forest of several trees
            continue
        names.add(name)
    return names


def _fit_small(cls):
    est = cls(**FAST_PARAMS.get(cls.__name__, {}))
    if getattr(est, "_estimator_type", None) == "regressor" or "Regressor" in cls.__name__:
        X, y = make_regression(n_samples=60, n_features=4, random_state=0)
    else:
        X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    return est.fit(X, y)


def _created_fitted():
    """Models created fitted: converted forests and the decision machines' results."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    from obliquetrees.machine import refit_leaves

    Xc, yc = make_classification(n_samples=60, n_features=4, random_state=0)
    Xr, yr = make_regression(n_samples=60, n_features=4, random_state=0)
    classifier = from_sklearn(RandomForestClassifier(3, max_depth=3, random_state=0).fit(Xc, yc))
    regressor = from_sklearn(RandomForestRegressor(3, max_depth=3, random_state=0).fit(Xr, yr))
    return [
        classifier,
        regressor,
        refit_leaves(classifier, Xc, yc),
        refit_leaves(regressor, Xr, yr),
    ]


@pytest.mark.parametrize("cls", discover_estimators(), ids=lambda c: c.__name__)
def test_parameters_documented(cls):
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    missing = params - _documented(cls.__doc__, "Parameters")
    assert not missing, f"{cls.__name__} docstring lacks parameters {sorted(missing)}"


@pytest.mark.parametrize("cls", discover_estimators(), ids=lambda c: c.__name__)
def test_fitted_attributes_documented(cls):
    est = _fit_small(cls)
    missing = _fitted_attributes(est) - _documented(cls.__doc__, "Attributes")
    assert not missing, f"{cls.__name__} docstring lacks attributes {sorted(missing)}"


def test_created_fitted_models_document_their_attributes():
    for est in _created_fitted():
        missing = _fitted_attributes(est) - _documented(type(est).__doc__, "Attributes")
        assert not missing, f"{type(est).__name__} docstring lacks {sorted(missing)}"
        assert np.isclose(est.feature_importances_.sum(), 1.0)
