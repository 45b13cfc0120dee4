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
    "MAX_FEATURES",
    "RUN_CONSTRAINTS",
    "Real",
    "RealNotInt",
    "StrOptions",
    "_fit_context",
    "integers",
    "options",
    "reals",
    "validate_params",
]


def integers(low, high=None, *, none=False):
    """Constraints: integers from ``low`` to ``high`` (None: unbounded); None too if ``none``."""
    rule = [Interval(Integral, low, high, closed="left" if high is None else "both")]
    return [*rule, None] if none else rule


def reals(low, high=None, *, closed="left", none=False, not_int=False):
    """Constraints: reals from ``low`` to ``high``, ``closed`` as ``Interval``; None if ``none``.

    ``not_int``: Python and numpy integers are refused (a fraction, where an
    integer means a count).
    """
    rule = [Interval(RealNotInt if not_int else Real, low, high, closed=closed)]
    return [*rule, None] if none else rule


def options(*names):
    """Constraints: one of the strings ``names``."""
    return [StrOptions(set(names))]


#: ``max_features`` of a split's random feature subset: ``"sqrt"``, ``"log2"``, a count,
#: a fraction in (0, 1], or None (every feature).
MAX_FEATURES = [
    *options("sqrt", "log2"),
    *integers(1),
    *reals(0, 1, closed="right", not_int=True),
    None,
]
#: The parameters that run a fit rather than shape the model, shared by every estimator.
RUN_CONSTRAINTS = {
    "n_jobs": [Integral, None],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}


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
