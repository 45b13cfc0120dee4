"""obliquetrees: oblique decision trees and forests for scikit-learn.

Trees whose splits are learned linear combinations of the features, trained
by continuous optimisation. Every estimator stores its trees in one container
(:class:`~obliquetrees._core.tree.ObliqueTree`) and predicts through the same
numba traversal kernels.

``import obliquetrees`` compiles nothing and does not import numba; kernels
are loaded (from numba's on-disk cache when available) on first use.
"""

import importlib

from obliquetrees._registry import ESTIMATORS, install_moved_modules
from obliquetrees._version import __version__

#: The public names and the modules that define them, imported on first use (PEP 562):
#: a dask worker that imports only the training code then imports neither scikit-learn
#: nor pandas (about 160 MB of its memory; :mod:`obliquetrees.dask`).
_PUBLIC = {
    **ESTIMATORS,
    "export_text": "obliquetrees.inspection",
    "plot_tree": "obliquetrees.inspection",
}

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
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # found directly from now on
        return value
    # ``obliquetrees.convert`` imports scikit-learn's ensemble module; load it
    # only when asked for.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"obliquetrees.{name}")
    raise AttributeError(f"module 'obliquetrees' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__, *_LAZY_SUBMODULES})
