"""A dask worker's checks of a partition's rows, without scikit-learn (:mod:`obliquetrees.dask`).

Why not the estimators' own checks: they are scikit-learn's, and a process
that imports scikit-learn imports scipy's optimisers and statistics, pandas
and (when installed) pyarrow, about 160 MB; with numba and the kernels a
worker then held about 400 MB before it read a row, 80 % of the 500 MB
workers of ``benchmarks/results/dask.md``, dask's pause threshold. The plain
checks here accept what they can decide exactly as scikit-learn would (numeric
numpy blocks with finite labels, targets and weights) and give everything
else to the estimator's checks (:class:`Deferred`), imported on the worker
only then: a dask DataFrame's partitions, another dtype, and every input
those checks refuse, with their errors. Like ``validate_fit_data`` in
memory, they hand training one form of weights: float64, ones for None.
This module imports numpy only.
"""

import dataclasses
import importlib
import pickle

import numpy as np

#: dtype kinds the plain checks convert as scikit-learn does: bool, ints, floats
_NUMERIC = "biuf"


class Deferred:
    """A call of a module-level function on a pickled argument, neither imported nor unpickled
    until it runs: ``Deferred(f, a)(*args)`` is ``f(a, *args)``.

    A task that carries it does not import ``f``'s module (nor ``a``'s class)
    on the worker unless it calls it.
    """

    def __init__(self, function, argument):
        self.module, self.name = function.__module__, function.__qualname__
        self.argument = pickle.dumps(argument, protocol=pickle.HIGHEST_PROTOCOL)

    def __call__(self, *args):
        function = getattr(importlib.import_module(self.module), self.name)
        return function(pickle.loads(self.argument), *args)


@dataclasses.dataclass(frozen=True)
class PartitionRows:
    """How a worker checks a partition: the in-memory estimator's checks, without it.

    Attributes
    ----------
    n_features : int
        Columns of ``X`` (the estimator's ``n_features_in_``).
    classifier : bool
        Labels (kept as given) rather than numeric targets.
    multi_output : bool
        Whether 2-D targets are accepted (regressors).
    predict_dtypes : tuple of dtype
        What prediction keeps (others become the first), as the estimator's.
    fallback_fit, fallback_predict : Deferred or None
        The estimator's own checks of ``(X, y, sample_weight)`` and of ``X``,
        for what the plain checks leave to them. ``plain=False`` (feature names,
        a dask DataFrame) sends every partition to them.
    plain : bool
    """

    n_features: int
    classifier: bool
    multi_output: bool
    predict_dtypes: tuple
    fallback_fit: Deferred | None
    fallback_predict: Deferred | None
    plain: bool = True

    def fit_rows(self, X, y, sample_weight):
        """``(X, y, weights)``: X float64 C-contiguous, labels as given or float64 targets,
        float64 weights (ones for None); errors as the in-memory ``fit``'s but "not all zero"
        weights, which holds for all rows, not a partition."""
        checked = _plain_fit_rows(self, X, y, sample_weight) if self.plain else None
        return checked if checked is not None else self.fallback_fit(X, y, sample_weight)

    def predict_rows(self, X):
        """``X`` checked as the in-memory ``predict`` checks it."""
        checked = _plain_predict_rows(self, X) if self.plain else None
        return checked if checked is not None else self.fallback_predict(X)


def _plain_X(rows, X):
    """``X`` when it is a block the plain checks decide (else None)."""
    if (
        isinstance(X, np.ndarray)
        and X.ndim == 2
        and X.shape[0] > 0
        and X.shape[1] == rows.n_features
        and X.dtype.kind in _NUMERIC
    ):
        return X
    return None


def _plain_fit_rows(rows, X, y, sample_weight):
    if _plain_X(rows, X) is None or not isinstance(y, np.ndarray) or len(y) != X.shape[0]:
        return None
    weights = np.ones(X.shape[0])
    if sample_weight is not None:
        if not (isinstance(sample_weight, np.ndarray) and sample_weight.shape == (X.shape[0],)):
            return None
        if sample_weight.dtype.kind not in _NUMERIC:
            return None
        weights = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if not (np.isfinite(weights).all() and (weights >= 0).all()):
            return None
    y = _plain_targets(rows, y)
    if y is None:
        return None
    X = np.ascontiguousarray(X, dtype=np.float64)
    if np.isinf(X).any():
        return None
    return X, y, weights


def _plain_targets(rows, y):
    """Labels as given (1-D, integers or integral finite floats: scikit-learn's "binary" and
    "multiclass"), or finite float64 targets (1-D, or 2-D for a multi-output regressor)."""
    if y.dtype.kind not in _NUMERIC or y.ndim not in (1, 2):
        return None
    if rows.classifier:
        if y.ndim != 1:
            return None
        if y.dtype.kind == "f" and not (np.isfinite(y).all() and (y == np.floor(y)).all()):
            return None
        return y
    if y.ndim == 2 and not rows.multi_output:
        return None
    y = np.ascontiguousarray(y, dtype=np.float64)
    return y if np.isfinite(y).all() else None


def _plain_predict_rows(rows, X):
    if _plain_X(rows, X) is None:
        return None
    dtype = X.dtype if X.dtype in rows.predict_dtypes else rows.predict_dtypes[0]
    X = np.ascontiguousarray(X, dtype=dtype)
    return None if np.isinf(X).any() else X
