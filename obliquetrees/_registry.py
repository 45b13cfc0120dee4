"""What the package is made of, listed once: estimators, saved-model kinds, moved modules.

Everything that must name every method reads these tables instead of keeping
a list of its own: the package's exports (checked by a test), the saved
state's containers (:mod:`obliquetrees.base`), the types skops may trust
(:mod:`obliquetrees.utils.persistence`), the kernel-cache workload, the tests
and the benchmarks. Values are module paths, not classes, so reading a table
imports nothing (numba stays unloaded until a kernel is needed).
"""

import importlib
import importlib.abc
import importlib.util
import sys

#: Public estimators (``from obliquetrees import <name>``) and their modules, one method
#: per folder.
ESTIMATORS = {
    "CO2ForestClassifier": "obliquetrees.co2._estimator",
    "CO2ForestRegressor": "obliquetrees.co2._regressor",
    "E2EDTClassifier": "obliquetrees.e2edt._estimator",
    "E2EDTRegressor": "obliquetrees.e2edt._estimator",
    "HingeForestClassifier": "obliquetrees.hinge._estimator",
    "HingeForestRegressor": "obliquetrees.hinge._estimator",
    "SoftTreeClassifier": "obliquetrees.soft._estimator",
    "SoftTreeRegressor": "obliquetrees.soft._estimator",
}

#: Fitted models made by the public functions (``convert.from_sklearn``,
#: ``machine.finetune``) rather than by a constructor.
DERIVED_MODELS = {
    "ConvertedForestClassifier": "obliquetrees.convert",
    "ConvertedForestRegressor": "obliquetrees.convert",
    "FinetunedForestClassifier": "obliquetrees.machine",
    "FinetunedForestRegressor": "obliquetrees.machine",
}

#: Fitted-state containers an estimator holds, saved as plain data and rebuilt
#: (and checked) by their own ``__setstate__``.
CONTAINERS = {
    "ObliqueTree": "obliquetrees._core.tree",
    "ObliqueForest": "obliquetrees._core.forest",
    "MissingValues": "obliquetrees._core.missing",
    "HingeModel": "obliquetrees.hinge.training",
    "LeafTargets": "obliquetrees._core.leaf_targets",
    "CategoryCoordinates": "obliquetrees._core.categories",
}

#: Modules of the layout before each method had a folder, by their present
#: names: pickles and skops files saved then name classes by these paths.
MOVED_MODULES = {
    "obliquetrees._co2": "obliquetrees.co2._estimator",
    "obliquetrees._co2_regressor": "obliquetrees.co2._regressor",
    "obliquetrees._e2edt": "obliquetrees.e2edt._estimator",
    "obliquetrees._hinge": "obliquetrees.hinge._estimator",
    "obliquetrees._soft": "obliquetrees.soft._estimator",
    "obliquetrees._training.hinge": "obliquetrees.hinge.training",
}


def load(name):
    """The class registered under ``name`` in any of the tables above."""
    for table in (ESTIMATORS, DERIVED_MODELS, CONTAINERS):
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
    raise KeyError(f"{name!r} is not a registered obliquetrees class.")


def saved_type_names():
    """Qualified names (``module.Class``) of every class a saved model may name.

    Each estimator and derived model under its module, and under the module
    that held it before (:data:`MOVED_MODULES`), so files saved by earlier
    versions keep loading.
    """
    earlier = {}
    for old, new in MOVED_MODULES.items():
        earlier.setdefault(new, []).append(old)
    names = []
    for table in (ESTIMATORS, DERIVED_MODELS):
        for name, module in table.items():
            names += [f"{m}.{name}" for m in [module, *earlier.get(module, [])]]
    return names


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a moved module's old name as its present module (the same object)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(MOVED_MODULES[spec.name])

    def exec_module(self, module):
        pass  # already executed under its present name


def install_moved_modules():
    """Let ``import`` (and so pickle and skops) find the modules by their old names."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
