"""obliquetrees: oblique decision trees and forests for scikit-learn.

Trees whose splits are learned linear combinations of the features, trained
by continuous optimisation. Every estimator stores its trees in one container
(:class:`~obliquetrees._core.tree.ObliqueTree`) and predicts through the same
numba traversal kernels.

``import obliquetrees`` compiles nothing and does not import numba; kernels
are loaded (from numba's on-disk cache when available) on first use.
"""

import importlib

from obliquetrees._registry import install_moved_modules
from obliquetrees._version import __version__
from obliquetrees.co2._estimator import CO2ForestClassifier
from obliquetrees.co2._regressor import CO2ForestRegressor
from obliquetrees.e2edt._estimator import E2EDTClassifier, E2EDTRegressor
from obliquetrees.hinge._estimator import HingeForestClassifier, HingeForestRegressor
from obliquetrees.inspection import export_text, plot_tree
from obliquetrees.soft._estimator import SoftTreeClassifier, SoftTreeRegressor

__all__ = [
    "CO2ForestClassifier",
    "CO2ForestRegressor",
    "E2EDTClassifier",
    "E2EDTRegressor",
    "HingeForestClassifier",
    "HingeForestRegressor",
    "SoftTreeClassifier",
    "SoftTreeRegressor",
    "__version__",
    "export_text",
    "plot_tree",
]

_LAZY_SUBMODULES = ("convert", "dask", "machine", "onnx")

# models saved before each method had its folder name the old module paths
install_moved_modules()


def __getattr__(name):
    # ``obliquetrees.convert`` imports scikit-learn's ensemble module; load it
    # only when asked for.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"obliquetrees.{name}")
    raise AttributeError(f"module 'obliquetrees' has no attribute {name!r}")
