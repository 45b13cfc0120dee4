"""The one module importing scikit-learn's parameter-validation machinery.

``_fit_context`` and the constraint classes are private scikit-learn API that
we accept (supported: scikit-learn >= 1.6); keeping every import here means a
change in scikit-learn touches one file.
"""

import functools
from numbers import Integral, Real

from sklearn.base import _fit_context as _sklearn_fit_context
from sklearn.utils._param_validation import (
    Hidden,
    Interval,
    RealNotInt,
    StrOptions,
    validate_params,
)

from obliquetrees._core.interrupts import interrupt_behind

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


def _fit_context(*, prefer_skip_nested_validation):
    """scikit-learn's ``_fit_context``, plus: a failed fit changes nothing.

    The decorated ``fit``/``partial_fit`` validates the parameters as in
    scikit-learn. The estimator's ``__dict__`` is snapshotted (shallowly)
    before the call and restored exactly if the call raises anything,
    ``KeyboardInterrupt`` included, so the estimator is the one it was before
    the call (or unfitted), never fitted attributes of a new fit beside the
    trees of an old one (prediction would walk old feature ids on new, narrower
    input). The snapshot is shallow: a fit must rebind its attributes, never
    mutate an existing attribute's arrays in place (DESIGN.md, decision 13).
    Ctrl-C while a compiled kernel runs is raised as the ``KeyboardInterrupt``
    it is, not as the ``SystemError`` numba's result boxing turns it into
    (:mod:`obliquetrees._core.interrupts`).

    Parameters
    ----------
    prefer_skip_nested_validation : bool
        As in scikit-learn.

    Returns
    -------
    decorator : callable
    """
    validating = _sklearn_fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)

    def decorator(fit_method):
        validated = validating(fit_method)

        @functools.wraps(fit_method)
        def wrapper(estimator, *args, **kwargs):
            before = dict(estimator.__dict__)
            try:
                return validated(estimator, *args, **kwargs)
            except BaseException as exc:
                estimator.__dict__.clear()
                estimator.__dict__.update(before)
                interrupt = interrupt_behind(exc)
                if interrupt is not None:
                    raise interrupt from None
                raise

        return wrapper

    return decorator
