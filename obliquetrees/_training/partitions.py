"""The workers' side of a dask fit and prediction (:mod:`obliquetrees.dask`), shared by methods.

Tasks that read a partition on a dask worker: its summary
(:func:`summarize`), the rows a tree draws from it (:func:`drawn_rows`), the
blockwise wrapper that hands a task the partition's ``X``, ``y`` and weights
together (:func:`on_block`), and a group of trees' share of a prediction
(:func:`group_output`, :func:`finish_output`, with the barrier :func:`after`
and :func:`token`).

A partition's rows are checked by
:class:`~obliquetrees._core.row_checks.PartitionRows` (the validation
boundary of a worker, which gives the weights as one float64 array, as
``validate_fit_data`` does in memory), not by the estimators' own checks,
which import scikit-learn.
"""

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
