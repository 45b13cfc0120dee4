"""The workers' side of a dask fit and prediction (:mod:`obliquetrees.dask`), shared by methods.

Tasks that read a partition on a dask worker: its rows checked as the
in-memory ``fit`` and ``predict`` check them (:class:`PartitionRows`), its
summary (:func:`summarize`), the rows a tree draws from it
(:func:`drawn_rows`), the blockwise wrapper that hands a task the
partition's ``X``, ``y`` and weights together (:func:`on_block`), and a
group of trees' share of a prediction (:func:`group_output`,
:func:`finish_output`, with the barrier :func:`after` and :func:`token`).

Why not the estimators' own checks: they are scikit-learn's, and a process
that imports scikit-learn imports scipy's optimisers and statistics, pandas
and (when installed) pyarrow, about 160 MB; with numba and the kernels a
worker then held about 400 MB before it read a row, 80 % of the 500 MB
workers of ``benchmarks/results/dask.md``, dask's pause threshold. The plain
checks here accept what they can decide exactly as scikit-learn would (numeric
numpy blocks with finite labels, targets and weights) and give everything
else to the estimator's checks (:class:`Deferred`), imported on the worker
only then: a dask DataFrame's partitions, another dtype, and every input
those checks refuse, with their errors.
"""

import dataclasses
import importlib
import pickle

import numpy as np

from obliquetrees._core._random import generator
from obliquetrees._core.forest import return_freed_memory

#: Stream of a tree's seed (:func:`~obliquetrees._core._random.generator`) that draws
#: its rows per partition; partition ``p`` draws its rows from stream
#: ``ROWS_STREAM + 1 + p``. Far above the methods' own streams (1, 2, ...).
ROWS_STREAM = 1 << 20

ALL_ZERO_WEIGHT = (
    "every row drawn for a tree has sample_weight 0: raise rows_per_tree, "
    "or leave out the rows of zero weight."
)

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


def summarize(X, y, sample_weight, partition, rows):
    """One partition's summary: rows, labels and their counts (classifier) or outputs, weight
    total, and the weighted moments of the features (missing values left out)."""
    if X.shape[0] == 0:
        return {"n_rows": 0}
    X, y, weights = rows.fit_rows(X, y, sample_weight)
    observed = ~np.isnan(X)
    w = weights[:, None] * observed
    total = w.sum(axis=0)
    sums = (w * np.where(observed, X, 0.0)).sum(axis=0)
    mean = np.divide(sums, total, out=np.zeros_like(total), where=total > 0)
    m2 = (w * np.where(observed, X - mean, 0.0) ** 2).sum(axis=0)
    return {
        "n_rows": X.shape[0],
        # labels and their counts (class_weight="balanced" of all rows)
        "labels": np.unique(y, return_counts=True) if rows.classifier else None,
        "n_outputs": 1 if y.ndim == 1 else y.shape[1],
        "weight": float(weights.sum()),
        "moments": (total, mean, m2),
    }


def drawn_rows(seed, partition, n_draw, replace, n_rows):
    """``(rows, times)``: the rows of a partition of ``n_rows`` that a tree's ``n_draw`` draws
    hit, in order, and how many times each, from stream ``ROWS_STREAM + 1 + partition`` of the
    tree's seed (with replacement: a bootstrap; without: each once)."""
    rng = generator(int(seed), ROWS_STREAM + 1 + int(partition))
    if replace:
        times = np.bincount(rng.integers(0, n_rows, n_draw), minlength=n_rows)
        rows = np.flatnonzero(times)
        return rows, times[rows].astype(np.float64)
    return np.sort(rng.choice(n_rows, size=n_draw, replace=False)), np.ones(n_draw)


def on_block(X, y, weights=None, *, task, args, y_1d, block_id):
    """``task(X, y, weights, partition, *args)`` of one row block of the three-dimensional
    views that line up a dask array's ``X``, ``y`` and weights (:mod:`obliquetrees.dask`)."""
    y = y[:, 0, 0] if y_1d else y[:, 0, :]
    return task(X[:, :, 0], y, None if weights is None else weights[:, 0, 0], block_id[0], *args)


def after(value, *tokens):
    """``value``, once every token is computed (a barrier between groups of tasks)."""
    return value


def token(output):
    """A small stand-in for ``output``: a barrier waits on it without holding the output."""
    return None


def group_output(rows, trees, X, method, previous):
    """A group of trees' share of ``method`` of partition ``X``: their leaves after
    ``previous`` (``apply``), or the running sum of leaf values over the trees so far."""
    from obliquetrees._core import traversal  # numba is imported on first use

    # the previous group's arrays, freed when dask released them, and this task's
    # temporaries: glibc keeps freed heap pages, and a worker whose resident size stays
    # above dask's pause threshold runs nothing more (a prediction would wait for good)
    return_freed_memory()
    X = rows.predict_rows(X)
    if method == "apply":
        leaves = traversal.apply(trees, X)
        output = leaves if previous is None else np.hstack([previous, leaves])
    else:
        output = traversal.predict_value(trees, X, initial=previous)
    del X
    return_freed_memory()
    return output


def finish_output(classes, output, method, n_trees):
    """``method``'s result from a partition's leaves or its sum over all ``n_trees`` trees,
    as the ordinary estimator computes it from the mean over its trees (``classes``: None for
    a regressor)."""
    if method == "apply":
        return output
    mean = output / n_trees
    if method == "predict_proba":
        return mean
    if classes is not None:
        return classes[np.argmax(mean, axis=1)]
    return mean[:, 0] if mean.shape[1] == 1 else mean
