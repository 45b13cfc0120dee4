"""obliquetrees: oblique decision trees and forests for scikit-learn.

Trees whose splits are learned linear combinations of the features, trained
by continuous optimisation. Every estimator stores its trees in one container
(:class:`~obliquetrees._core.tree.ObliqueTree`) and predicts through the same
numba traversal kernels.

``import obliquetrees`` compiles nothing and does not import numba; kernels
are loaded (from numba's on-disk cache when available) on first use.
"""

import importlib

from obliquetrees._co2 import CO2ForestClassifier
from obliquetrees._co2_regressor import CO2ForestRegressor
from obliquetrees._e2edt import E2EDTClassifier, E2EDTRegressor
from obliquetrees._hinge import HingeForestClassifier, HingeForestRegressor
from obliquetrees._soft import SoftTreeClassifier, SoftTreeRegressor
from obliquetrees._version import __version__
from obliquetrees.inspection import export_text, plot_tree

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

_LAZY_SUBMODULES = ("convert", "machine", "onnx")


def __getattr__(name):
    # ``obliquetrees.convert`` imports scikit-learn's ensemble module; load it
    # only when asked for.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"obliquetrees.{name}")
    raise AttributeError(f"module 'obliquetrees' has no attribute {name!r}")
