"""The registry (``obliquetrees/_registry.py``) is the package's one list of its parts."""

import importlib
import inspect
import pickle

from sklearn.base import BaseEstimator

import obliquetrees
from obliquetrees import _registry
from obliquetrees.utils.estimator_checks import _EXPECTED_FAILED_CHECKS


def test_registered_estimators_are_exactly_the_exported_ones():
    exported = {
        name
        for name in obliquetrees.__all__
        if inspect.isclass(obj := getattr(obliquetrees, name)) and issubclass(obj, BaseEstimator)
    }
    assert exported == set(_registry.ESTIMATORS)
    for name, module in _registry.ESTIMATORS.items():
        cls = _registry.load(name)
        assert cls is getattr(obliquetrees, name) and cls.__module__ == module


def test_every_registered_class_loads_from_its_module():
    for table in (_registry.DERIVED_MODELS, _registry.CONTAINERS):
        for name, module in table.items():
            cls = _registry.load(name)
            assert cls.__name__ == name and cls.__module__ == module


def test_expected_failed_checks_name_registered_estimators():
    assert set(_EXPECTED_FAILED_CHECKS) <= set(_registry.ESTIMATORS)


def test_moved_modules_import_as_their_present_module():
    for old, new in _registry.MOVED_MODULES.items():
        assert importlib.import_module(old) is importlib.import_module(new)
    # what pickle does with a name saved by the old layout
    cls = pickle.loads(b"cobliquetrees._co2\nCO2ForestClassifier\n.")
    assert cls is obliquetrees.CO2ForestClassifier


def test_the_moved_modules_finder_is_installed_once():
    before = list(obliquetrees._registry.sys.meta_path)
    _registry.install_moved_modules()
    assert obliquetrees._registry.sys.meta_path == before
    assert sum(isinstance(f, _registry._MovedModules) for f in before) == 1
