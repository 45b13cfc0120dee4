"""The one module importing scikit-learn's parameter-validation machinery.

``_fit_context`` and the constraint classes are private scikit-learn API that
we accept (supported: scikit-learn >= 1.6); keeping every import here means a
change in scikit-learn touches one file.
"""

from numbers import Integral, Real

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    Hidden,
    Interval,
    RealNotInt,
    StrOptions,
    validate_params,
)

__all__ = [
    "Hidden",
    "Integral",
    "Interval",
    "Real",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "validate_params",
]
