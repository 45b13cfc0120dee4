"""The benchmarks take "which estimators exist" from the registry (benchmarks/estimators.py).

A new method registered in ``obliquetrees._registry.ESTIMATORS`` is measured by
every benchmark that covers all methods (at its defaults where the benchmark
has no settings for it), never silently left out. Reads tables only; runs no
benchmark and needs no data.
"""

import importlib

import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from benchmarks import (
    bench_first_fit,
    bench_memory,
    bench_missing,
    bench_regression,
    bench_scale,
    bench_sparse,
    bench_suite,
)
from benchmarks.estimators import every_estimator, every_estimator_labelled, public_estimators
from obliquetrees._registry import ESTIMATORS

#: The benchmarks that cover every method, with their tables built at import.
MODULES = [
    bench_first_fit,
    bench_memory,
    bench_missing,
    bench_regression,
    bench_scale,
    bench_sparse,
    bench_suite,
]


class FooForestClassifier(ClassifierMixin, BaseEstimator):
    """A fifth method's classifier: a forest (it has ``n_estimators``) with ``n_jobs``."""

    def __init__(self, n_estimators=10, n_jobs=None):
        self.n_estimators = n_estimators
        self.n_jobs = n_jobs


class FooForestRegressor(RegressorMixin, BaseEstimator):
    """A fifth method's regressor."""

    def __init__(self, n_estimators=10):
        self.n_estimators = n_estimators


@pytest.fixture
def fifth_method(monkeypatch):
    """The two classes above registered; the benchmark modules rebuilt with and after them."""
    monkeypatch.setitem(ESTIMATORS, "FooForestClassifier", __name__)
    monkeypatch.setitem(ESTIMATORS, "FooForestRegressor", __name__)
    yield [importlib.reload(module) for module in MODULES]
    monkeypatch.undo()
    for module in MODULES:
        importlib.reload(module)


def test_every_estimator_adds_the_unlisted_at_defaults(fifth_method):
    settings = {"SoftTreeClassifier": {"max_depth": 2}, "CO2ForestClassifier": {"n_jobs": 2}}
    completed = every_estimator(settings, "Classifier")
    assert list(completed)[:2] == ["SoftTreeClassifier", "CO2ForestClassifier"]
    assert completed["SoftTreeClassifier"] == {"max_depth": 2}
    assert set(completed) == set(public_estimators("Classifier"))
    assert completed["FooForestClassifier"] == {}
    assert "FooForestRegressor" not in completed


def test_every_estimator_rejects_a_name_that_is_not_public():
    with pytest.raises(KeyError, match="SoftTreeClassifer"):
        every_estimator({"SoftTreeClassifer": {}})
    with pytest.raises(KeyError, match="SoftTreeRegressor"):
        every_estimator({"SoftTreeRegressor": {}}, "Classifier")


def test_labelled_table_gets_the_new_method_before_the_peers(fifth_method):
    table = {
        "CO2(30)": ("obliquetrees.CO2ForestRegressor", {"n_estimators": 30}),
        "RF(30)": ("sklearn.ensemble.RandomForestRegressor", {"n_estimators": 30}),
    }
    completed = every_estimator_labelled(table, "Regressor", default=lambda name: {"n_jobs": 2})
    labels = list(completed)
    assert labels[0] == "CO2(30)" and labels[-1] == "RF(30)"
    assert completed["FooForest()"] == ("obliquetrees.FooForestRegressor", {"n_jobs": 2})
    assert completed["SoftTree()"] == ("obliquetrees.SoftTreeRegressor", {"n_jobs": 2})


def test_a_fifth_method_is_benchmarked(fifth_method):
    first_fit, memory, missing, regression, scale, sparse, suite = fifth_method
    assert "obliquetrees.FooForestClassifier" in first_fit.ESTIMATORS
    assert "obliquetrees.FooForestRegressor" in first_fit.ESTIMATORS
    assert memory.configs()["FooForestClassifier"] == {"n_jobs": 2}
    for configs in (missing.CONFIGS, missing.QUICK_CONFIGS):
        assert configs["FooForestClassifier"] == configs["FooForestRegressor"] == {}
    assert regression.ESTIMATORS["fooforestregressor"] == (
        "FooForestRegressor()",
        "FooForestRegressor",
        {},
    )
    assert scale.ESTIMATORS["FooForest()"] == ("obliquetrees.FooForestClassifier", {"n_jobs": 2})
    assert "FooForestClassifier" in sparse.OURS
    assert sparse.QUICK_SETTINGS["FooForestClassifier"] == {}
    assert suite.CLASSIFIERS["FooForest()"] == ("obliquetrees.FooForestClassifier", {})
    assert suite.REGRESSORS["FooForest()"] == ("obliquetrees.FooForestRegressor", {})
    assert "FooForest()" in suite.OURS and "FooForest()" not in suite.PEERS


def test_the_eight_keep_their_settings():
    """The registry's estimators are all covered, each with the settings it had before."""
    assert bench_first_fit.ESTIMATORS[:8] == [f"obliquetrees.{name}" for name in ESTIMATORS]
    assert set(bench_missing.CONFIGS) == set(ESTIMATORS)
    assert bench_missing.CONFIGS["E2EDTRegressor"] == {"max_depth": 6}
    assert list(bench_memory.configs()) == list(bench_memory.SETTINGS)
    assert bench_suite.OURS == [
        "CO2(30)",
        "CO2(100)",
        "Hinge(30)",
        "Hinge()",
        "E2EDT()",
        "SoftTree()",
    ]
    assert bench_sparse.OURS == [
        "CO2ForestClassifier",
        "E2EDTClassifier",
        "SoftTreeClassifier",
        "HingeForestClassifier",
    ]
