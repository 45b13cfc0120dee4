"""Forests that train where the data live: CO2 and E2EDT forests on dask collections.

``DaskCO2ForestClassifier``, ``DaskCO2ForestRegressor``, ``DaskE2EDTClassifier``
and ``DaskE2EDTRegressor`` are the ordinary estimators with a few more
parameters: ``rows_per_tree``, ``client`` (as ``lightgbm.DaskLGBMClassifier``
and ``xgboost.dask.DaskXGBClassifier`` take a ``client``) and, for CO2,
``rows_per_task``. Their ``fit`` takes a ``dask.array`` (2-D, partitioned by
rows) or a ``dask.dataframe``, with ``y`` and ``sample_weight`` partitioned
alike, and no process ever holds all of ``X``:

1. One pass over the partitions, on the workers, validates every partition
   as the in-memory ``fit`` validates its data (dtype, finite values, NaN as
   missing values, the number of features, labels or targets, weights) and
   returns small summaries: the rows of each partition, its class labels and
   their counts (so every tree knows all classes), the weighted moments of
   the features.
2. Each tree's rows are its bootstrap: ``rows_per_tree`` draws with
   replacement from all rows (without replacement for ``bootstrap=False``),
   as per-partition counts (multinomial, or multivariate hypergeometric,
   from the tree's seed), then the rows within each partition from the seed
   of (tree, partition), drawn again by each task that reads the partition.
   One task per partition reads the partition's ``X``, ``y`` and weights
   together (one blockwise graph), so no block of ``X`` moves.
3. **CO2 trees grow node by node** (:class:`_CO2Trees`,
   :mod:`obliquetrees.co2._distributed`): a node whose draws are at most
   ``rows_per_task`` has its rows gathered on one worker, which runs the
   ordinary per-tree training step (missing-value plan, standardisation,
   growth, folding: :func:`obliquetrees.co2._dask_tasks.grow_rows`, the
   in-memory estimator's ``_grow_trees`` without the estimator) on them,
   each weighing ``sample_weight`` times its draws, which is the weight
   the in-memory bootstrap gives it; a larger node (the root of a
   tree of more than ``rows_per_task`` draws) is split by that step, at
   depth 1, on a sample of its rows, and its children are decided in later
   passes over the partitions, which route the rows through the splits so
   far. Every node stores the exact weight and value of its rows. A tree of
   at most ``rows_per_task`` draws (the default ``rows_per_tree=None`` on up
   to 50,000 rows) is gathered whole: the in-memory step on its bootstrap.
   **E2EDT trees** are trained whole (EM over all of a tree's rows), each on
   one worker from ``rows_per_tree`` draws (default 100,000).

A tree differs from the in-memory forest's tree in this: the
standardisation, the missing-value plan and the class prior of empty nodes
come from the rows of its gathered node (or tree) instead of all rows; a
CO2 node larger than one task chooses its split on a sample of its rows;
and no out-of-bag rows are shipped, so CO2's out-of-bag test of oblique
splits (``oblique_test="out_of_bag"``) keeps every oblique split at
``oblique_penalty=0`` and at ``"auto"`` (no pilot tree could choose) and
refuses a positive one. A constrained
CO2 regressor (``monotonic_cst``) keeps its trees as they grew: the
in-memory fit's joint refinement of the leaf values
(:mod:`obliquetrees.co2._refine`) passes over every training row many
times and is not run. With ``bootstrap=False`` and ``rows_per_tree=None``
(every row once) on data of at most ``rows_per_task`` rows the model
equals the in-memory fit bit for bit (without constraints). The same
``random_state`` and the same partitioning give the same model, whatever
the cluster's size. The result is the ordinary fitted
estimator (:meth:`DaskCO2ForestClassifier.to_local`); ``predict``,
``predict_proba`` and ``apply`` of a dask collection return lazy dask arrays
computed blockwise on the workers. A model larger than a quarter of what the
fullest worker can still take before dask pauses it (full-depth trees on
millions of rows) is sent group of trees by group of trees: every partition
adds a group's trees to its sum over the trees before them, in tree order, so
the result is the in-memory prediction bit for bit, and the next group goes
out once every partition is done with the last, so no worker holds more than
one group. This applies to the outputs that are means over hard-routed trees
(CO2; E2EDT's hard outputs);
E2EDT's soft and hybrid probabilities need the whole model on the worker, and
a model that does not fit is refused with a clear error, as is a tree larger
than half of what the fullest worker can take (``benchmarks/results/dask.md``:
the 500 MB workers that fitted 10 trees of 60 MB on 2,000,000 rows refuse to
predict them; workers of 2 GB predict them).

Why node growth for CO2 rather than a sample of ``rows_per_tree`` rows per
tree (the previous version): on the benchmark's 2,000,000 x 40 data set
(``benchmarks/results/dask.md``), 10 trees of 100,000 rows each reached a
test accuracy of 0.743 against 0.767 for the in-memory forest, whose trees
draw every row. Why a bootstrap of the rows rather than a sample inside
which each tree bootstraps again (the first version): six CO2 trees of
100,000 fresh rows each reached 0.709 when they kept every row once, 0.698
when a second bootstrap left 63 % of them in each tree (one run of each).
Why rows rather than whole partitions per tree: rows drawn from every
partition keep a tree's sample uniform however the partitions are ordered
(by time, by source), at the cost of reading every partition once per pass.

In-memory input (numpy, pandas, scipy.sparse) is fitted in this process by
the ordinary ``fit``. Out-of-bag scores, ``warm_start`` and the leaf targets
of quantile regression need every training row and are not available on dask
input (``record_leaf_targets`` gives quantiles from in-memory rows).

**What a worker imports.** The tasks of a CO2 fit and of its lazy prediction
on a dask array are functions of the training layer
(:mod:`obliquetrees._training.partitions`, :mod:`obliquetrees.co2._dask_tasks`,
checks in :mod:`obliquetrees._core.row_checks`)
that import numpy, numba and the kernels, not scikit-learn: a process that
imports scikit-learn also imports scipy's optimisers, pandas and pyarrow,
about 160 MB, which took an idle worker with the kernels from about 240 MB
to about 400 MB (dask pauses a worker at 80 % of its ``memory_limit``).
They check a partition as the estimator would, with plain checks that agree
with scikit-learn's on what they accept and hand it the rest (a dask
DataFrame, feature names, other dtypes, and what they refuse, with
scikit-learn's errors). E2EDT's workers train with the estimator itself and
import scikit-learn. A ``LocalCluster``'s worker processes import the script
that starts them (multiprocessing's spawn): a script whose top level imports
``obliquetrees.dask`` gives its workers scikit-learn too, so import it inside
the ``if __name__ == "__main__":`` block to keep them small.

Hinge forests and soft trees have no dask route: they train all their trees
jointly by minibatch gradient steps over the whole data set, which would
need synchronous gradient averaging across workers; fit them in memory
(``X.compute()``).
"""

import copy
import dataclasses
import inspect
import math
import operator
import time
from numbers import Integral

import numpy as np
from sklearn.base import is_classifier

from obliquetrees._core._random import generator
from obliquetrees._core.forest import return_freed_memory
from obliquetrees._core.row_checks import Deferred, PartitionRows
from obliquetrees._core.validation import bounded_weights
from obliquetrees._training.partitions import (
    ALL_ZERO_WEIGHT,
    ROWS_STREAM,
    after,
    drawn_rows,
    finish_output,
    group_output,
    on_block,
    summarize,
    token,
)
from obliquetrees.co2._estimator import CO2ForestClassifier
from obliquetrees.co2._regressor import CO2ForestRegressor
from obliquetrees.e2edt._estimator import E2EDTClassifier, E2EDTRegressor
from obliquetrees.utils._param_validation import integers, reals
from obliquetrees.utils.categorical import categorical_mask
from obliquetrees.utils.seeds import draw_seeds
from obliquetrees.utils.validation import (
    check_is_fitted,
    check_monotonic_cst,
    is_dask_collection,
    validate_more_fit_data,
    validate_part_weights,
)

__all__ = [
    "DaskCO2ForestClassifier",
    "DaskCO2ForestRegressor",
    "DaskE2EDTClassifier",
    "DaskE2EDTRegressor",
]

#: Default ``rows_per_tree``: a tree's rows take 100,000 x n_features x 8 bytes
#: (32 MB at 40 features) on the worker that trains it.
ROWS_PER_TREE = 100_000

#: Default ``rows_per_task`` of the CO2 classes: the most rows one task gathers (a
#: node's rows, or a sample of them), 50,000 x n_features x 8 bytes (16 MB at 40 features).
#: At 100,000 a task deciding a node held its rows twice plus their training temporaries,
#: and a worker of 500 MB (then about 360 MB of them the runtime's: the workers imported
#: scikit-learn) passed 95 % of its limit once in three fits of ``benchmarks/bench_dask.py``
#: and was restarted by its nanny.
ROWS_PER_TASK = 50_000
#: A node of more than ``rows_per_task`` draws is split on a sample of about
#: ``rows_per_task // SPLIT_SAMPLE_SHARE`` of its rows (see :class:`_CO2Trees`).
SPLIT_SAMPLE_SHARE = 4

#: Parameters the dask estimators add to the ordinary ones.
_DASK_PARAMS = ("rows_per_tree", "rows_per_task", "client")

_NO_DASK_ROUTE = {
    "DaskHingeForestClassifier": "HingeForestClassifier",
    "DaskHingeForestRegressor": "HingeForestRegressor",
    "DaskSoftTreeClassifier": "SoftTreeClassifier",
    "DaskSoftTreeRegressor": "SoftTreeRegressor",
}


def __getattr__(name):
    if name in _NO_DASK_ROUTE:
        raise AttributeError(
            f"obliquetrees.dask has no {name}: {_NO_DASK_ROUTE[name]} trains all its trees "
            "jointly by gradient steps over the whole data set (no data-parallel route is "
            f"implemented); fit obliquetrees.{_NO_DASK_ROUTE[name]} in memory on X.compute(), "
            "or use a CO2 or E2EDT forest of obliquetrees.dask."
        )
    raise AttributeError(f"module 'obliquetrees.dask' has no attribute {name!r}")


# ------------------------------------------------------------------ the workers' side
def _validated_rows(template, X, y, sample_weight):
    """``(X, labels or targets, weights)`` of rows, checked as the in-memory ``fit`` checks them.

    ``template`` carries ``n_features_in_`` (and ``feature_names_in_``).
    Weights are checked without the in-memory fit's "not all zero", which
    holds for the whole data set (checked by the client), not for a partition.
    """
    classifier, multi_output = is_classifier(template), template._fit_multi_output
    X, y, _ = validate_more_fit_data(
        template, X, y, None, classifier=classifier, multi_output=multi_output
    )
    if sample_weight is None:
        return X, y, np.ones(X.shape[0])
    return X, y, validate_part_weights(sample_weight, X)


def _partition_rows(estimator, plain, fallback_fit=None, fallback_predict=None):
    """How the workers check the partitions of a fit or a prediction
    (:class:`~obliquetrees._core.row_checks.PartitionRows`): the plain checks, or
    ``estimator``'s own (the ``Deferred`` fallbacks) for what they leave, and for everything
    when ``plain`` is False (a dask DataFrame) or ``estimator`` has feature names."""
    return PartitionRows(
        n_features=estimator.n_features_in_,
        classifier=is_classifier(estimator),
        multi_output=estimator._fit_multi_output,
        predict_dtypes=tuple(np.dtype(d) for d in estimator._predict_dtype),
        fallback_fit=fallback_fit,
        fallback_predict=fallback_predict,
        plain=plain and not hasattr(estimator, "feature_names_in_"),
    )


def _take_rows(X, y, sample_weight, partition, wave):
    """The rows of one partition drawn for each tree of a wave (None: none drawn).

    ``wave`` lists ``(seed, counts, replace)`` per tree: ``counts[partition]``
    draws from the partition's rows
    (:func:`~obliquetrees._training.partitions.drawn_rows`). Each drawn row
    comes once, with the number of times it was drawn.
    """
    pick = (lambda a, rows: a.iloc[rows]) if hasattr(X, "iloc") else (lambda a, rows: a[rows])
    taken = []
    for seed, counts, replace in wave:
        n_draw = int(counts[partition])
        if not n_draw:
            taken.append(None)
            continue
        rows, times = drawn_rows(seed, partition, n_draw, replace, X.shape[0])
        weights = None if sample_weight is None else pick(sample_weight, rows)
        taken.append((pick(X, rows), pick(y, rows), weights, times))
    return_freed_memory()  # the partition's temporaries (see _train_tree)
    return taken


def _train_tree(template, seed, *parts):
    """Validate one tree's rows (``parts``: its part of :func:`_take_rows`) and train the tree.

    ``template`` has ``bootstrap=False``: the rows were drawn already, and
    weigh their number of draws.
    """
    X, y, weights, times = (_concat([part[i] for part in parts]) for i in range(4))
    X, y, weights = _validated_rows(template, X, y, weights)
    weights = weights * times  # the bootstrap's counts, as the in-memory fit weighs rows
    if not np.any(weights > 0):
        raise ValueError(ALL_ZERO_WEIGHT)
    estimator = copy.copy(template)
    if is_classifier(estimator):
        y = np.searchsorted(estimator.classes_, y).astype(np.int64)
    grown = estimator._grow_tree(X, y, bounded_weights(weights), seed)
    del X, y, weights, times, parts
    # hand the rows' memory back to the operating system: glibc keeps freed heap pages,
    # and a worker whose resident size stays above dask's pause threshold (80 % of its
    # memory limit) runs no further task, so the fit would wait for it forever
    return_freed_memory()
    return grown


def _concat(parts):
    if parts[0] is None:
        return None
    if hasattr(parts[0], "iloc"):
        import pandas as pd

        return pd.concat(parts)
    return np.concatenate(parts)


def _predict_rows(X, estimator, method):
    """``estimator.method(X)`` of one partition."""
    return getattr(estimator, method)(X)


# ------------------------------------------------------------------ the client's side
def _dask_init(local_class, extra):
    """``__init__`` of the dask class of ``local_class``: its parameters, then ``extra``.

    ``extra`` maps our parameters to their defaults. The signature is built
    (``__signature__``, which scikit-learn's ``get_params`` and ``clone``
    read) rather than written out, so the dask classes take every parameter
    the ordinary ones take, with their defaults.
    """
    signature = inspect.signature(local_class.__init__)
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in extra.items()
    ]
    signature = signature.replace(parameters=[*signature.parameters.values(), *extra])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        self._store_init_parameters(bound.arguments)

    __init__.__signature__ = signature
    __init__.__doc__ = local_class.__init__.__doc__
    return __init__


_CLIENT_DOC = """    client : distributed.Client or None, default=None
        The dask client whose cluster fits the trees; None: the default
        client (``distributed.default_client()``). Not saved with the model.
"""

_CO2_PARAMETER_DOCS = (
    """    rows_per_tree : int, float or None, default=None
        Draws of each tree's bootstrap from all rows of the dask input (as
        ``max_samples`` in memory, which must stay None on dask input); with
        ``bootstrap=False`` rows without replacement (capped at the number
        of rows). An int is a number of draws, a float a fraction of the
        rows, None as many draws as rows (the in-memory forest's bootstrap).
        In-memory input ignores it.
    rows_per_task : int, default=50_000
        The most rows any one task gathers. A node of a tree (the root
        first) whose draws are at most this is gathered whole on one worker,
        which grows the ordinary CO2 tree below it; a larger node is split
        on a sample of about ``rows_per_task // 4`` of its rows gathered
        from the partitions, the split is sent back to the partitions, and
        its children are decided in turn (:mod:`obliquetrees.dask`). A task
        deciding a node holds its rows twice (the partitions' pieces and
        their concatenation) plus their training temporaries; see
        ``benchmarks/results/dask.md`` for the peak memory of workers at the
        default. At least 40. In-memory input ignores it.
"""
    + _CLIENT_DOC
)

_E2EDT_PARAMETER_DOCS = (
    """    rows_per_tree : int, float or None, default=100_000
        Rows each tree draws from all rows of the dask input: with
        ``bootstrap=True`` draws with replacement (the tree's bootstrap, as
        ``max_samples`` in memory, which must stay None on dask input),
        else rows without replacement (capped at the number of rows). An int
        is a number of draws, a float a fraction of the rows, None as many
        draws as rows. The drawn rows are gathered on the worker that trains
        the tree (an E2EDT tree is trained as a whole, not node by node), so
        the default bounds a tree's rows at 100,000 x n_features x 8 bytes
        there (with 2 workers of 500 MB, of which an E2EDT worker's runtime
        takes about 360 MB, scikit-learn imported, about the most a tree can
        take). In-memory input ignores it.
"""
    + _CLIENT_DOC
)


def _dask_doc(local_class, parameter_docs):
    """The docstring of the dask class: its summary, then ``local_class``'s sections plus ours."""
    doc = inspect.cleandoc(local_class.__doc__)
    body = doc[doc.index("\nParameters\n") :]
    body = "\n".join("    " + line if line else line for line in body.splitlines())
    cut = body.index("\n    Attributes\n")
    summary = (
        f"{local_class.__name__} trained on dask collections, where the data live.\n\n"
        f"    ``fit`` takes a ``dask.array`` or ``dask.dataframe`` (``y`` and\n"
        f"    ``sample_weight`` partitioned alike) and trains every tree on the\n"
        f"    workers from rows drawn from the partitions, no process holding all\n"
        f"    of ``X`` (details: :mod:`obliquetrees.dask`); in-memory input is\n"
        f"    fitted as :class:`~obliquetrees.{local_class.__name__}` fits it.\n"
        f"    ``predict``, ``predict_proba`` and ``apply`` of a dask collection\n"
        f"    return lazy dask arrays; :meth:`to_local` gives the ordinary fitted\n"
        f"    estimator.\n"
    )
    return summary + body[:cut] + "\n" + parameter_docs.rstrip("\n") + body[cut:]


def _lazy_doc(method, summary, returns):
    """Set the docstring of a prediction method that is lazy on dask input."""
    method.__doc__ = f"""{summary}

        A dask collection gives a lazy dask array, computed blockwise on the
        workers (no gather), group of trees by group of trees when the model
        would not fit a worker (see :mod:`obliquetrees.dask`); other input
        gives an ndarray, as the ordinary class does.

        Parameters
        ----------
        {_X_DOC}

        Returns
        -------
        {returns}
        """


class _DaskForest:
    """The dask ``fit`` and lazy prediction shared by the four dask classes (mixin)."""

    _local_class = None

    # ---------------------------------------------------------------- fit
    def _fit(self, X, y, sample_weight):
        """The dask fit for dask input, the ordinary one for in-memory input."""
        inputs = {"X": X, "y": y, "sample_weight": sample_weight}
        lazy = [name for name, value in inputs.items() if is_dask_collection(value)]
        if not lazy:
            return super()._fit(X, y, sample_weight)
        if "X" not in lazy or "y" not in lazy or (sample_weight is not None and len(lazy) < 3):
            eager = [name for name, v in inputs.items() if v is not None and name not in lazy]
            raise TypeError(
                f"{type(self).__name__}.fit takes X, y and sample_weight all as dask "
                f"collections or all in memory; {', '.join(lazy)} are dask collections, "
                f"{', '.join(eager)} not."
            )
        self._refuse_whole_set_options()
        self._refuse_categories(X)
        self._check_forest_size()
        client = self._get_client()
        template, parts = self._template(X, y, sample_weight)
        rows = _partition_rows(
            template,
            plain=not hasattr(X, "columns"),
            fallback_fit=Deferred(_validated_rows, template),
        )
        summaries = _gather(client, parts.map(summarize, rows))
        self._set_data_attributes(template, summaries)
        check_monotonic_cst(self, self.monotonic_cst)  # its errors before any tree is trained
        lengths = np.array([s["n_rows"] for s in summaries], dtype=np.int64)
        seeds = draw_seeds(self.random_state, self.n_estimators)
        results = self._train_trees(client, template, rows, parts, lengths, seeds)
        self._store_dask_trees(results)
        for name in ("oob_score_", "oob_decision_function_", "oob_prediction_", "_leaf_targets"):
            self.__dict__.pop(name, None)
        return self

    def _refuse_categories(self, X):
        """Categorical features train in memory only (their coordinates need every row)."""
        mask = categorical_mask(getattr(X, "_meta", X), self.categorical_features)
        if mask is not None:
            raise NotImplementedError(
                "categorical features on dask input are not supported yet: their "
                "coordinates are learned from every row. Encode them before (e.g. dask-ml's "
                "OrdinalEncoder) and pass categorical_features=None, or fit "
                f"{self._local_class.__name__} in memory."
            )

    def _refuse_whole_set_options(self):
        self._check_parameters()
        for name in ("oob_score", "warm_start"):
            if getattr(self, name, False):
                raise ValueError(
                    f"{name}=True needs every training row in one process; on dask input "
                    f"set {name}=False (or fit {self._local_class.__name__} in memory)."
                )

    def _get_client(self):
        if self.client is not None:
            return self.client
        from distributed import default_client

        try:
            return default_client()
        except ValueError:
            raise ValueError(
                f"{type(self).__name__} fits on a dask cluster: start a distributed.Client "
                "(the default client) or pass client=."
            ) from None

    def _template(self, X, y, sample_weight):
        """An unfitted copy of this estimator that knows the features, and the partitions.

        Returns ``(template, partitions)``, a :class:`_Partitions`.
        """
        # without the client (not picklable); each worker thread trains one tree
        template = type(self)(**self.get_params(deep=False))
        # the rows come drawn (and weighted by their draws) from the partitions
        template.set_params(client=None, n_jobs=1, verbose=0, bootstrap=False)
        if "max_samples" in template.get_params():
            template.set_params(max_samples=None)
        if hasattr(X, "columns"):  # a dask DataFrame
            names = np.asarray(X.columns, dtype=object)
            template.n_features_in_ = len(names)
            if all(isinstance(name, str) for name in names):
                template.feature_names_in_ = names
        elif X.ndim != 2:
            raise ValueError(f"X must be 2-D (samples, features); got {X.ndim} dimensions.")
        else:
            template.n_features_in_ = int(X.shape[1])
        return template, _Partitions(X, y, sample_weight)

    def _set_data_attributes(self, template, summaries):
        """Fitted attributes of the whole data from the partitions' summaries."""
        n_rows = sum(s["n_rows"] for s in summaries)
        if n_rows == 0:
            raise ValueError("X has no rows.")
        if not sum(s["weight"] for s in summaries) > 0:
            raise ValueError("sample_weight must not be all zero (sum must be > 0).")
        for name in ("n_features_in_", "feature_names_in_"):
            if name in template.__dict__:
                setattr(self, name, getattr(template, name))
            else:
                self.__dict__.pop(name, None)
        if is_classifier(self):
            template._class_counts = [s["labels"] for s in summaries if s["n_rows"]]
            labels = [labels for labels, _ in template._class_counts]
            self.classes_ = np.unique(np.concatenate(labels))
            self.n_classes_ = len(self.classes_)
            template.classes_, template.n_classes_ = self.classes_, self.n_classes_
        else:
            outputs = {s["n_outputs"] for s in summaries if s["n_rows"]}
            if len(outputs) > 1:
                raise ValueError(f"y has {sorted(outputs)} outputs in different partitions.")
            self.n_outputs_ = outputs.pop()
            template.n_outputs_ = self.n_outputs_
        # the mean: what a NaN counts as in the splits of trees grown node by node
        template._feature_mean, self._feature_std = _combined_moments(
            [s["moments"] for s in summaries if s["n_rows"]]
        )

    def _draws_per_tree(self, n_rows):
        """Draws of each tree's rows (``rows_per_tree`` resolved); capped at ``n_rows`` without
        replacement (``bootstrap=False``)."""
        if self.rows_per_tree is None:
            draws = n_rows
        elif isinstance(self.rows_per_tree, Integral):
            draws = int(self.rows_per_tree)
        else:
            draws = max(int(self.rows_per_tree * n_rows), 1)
        return draws if self.bootstrap else min(draws, n_rows)

    def _train_whole_trees(self, client, template, parts, lengths, seeds):
        """Every tree's result, in seed order, each tree trained whole on one worker.

        Trees go in waves of as many trees as the cluster has worker threads:
        one task per partition reads it (once per wave: a partition that is
        not persisted is read, or generated, once per wave) and draws the rows
        of every tree of the wave; each tree's task receives its own rows.
        """
        n_draws = self._draws_per_tree(int(lengths.sum()))
        wave_size = max(1, sum(client.nthreads().values()))
        results = []
        for start in range(0, len(seeds), wave_size):
            wave = seeds[start : start + wave_size]
            counts = [_partition_draws(seed, lengths, n_draws, self.bootstrap) for seed in wave]
            plan = [(int(seed), c, self.bootstrap) for seed, c in zip(wave, counts, strict=True)]
            taken = parts.map(_take_rows, plan)
            trees = [
                _delayed(_train_tree)(
                    template,
                    int(seed),
                    *(_delayed(operator.getitem)(taken[p], t) for p in np.flatnonzero(counts[t])),
                )
                for t, seed in enumerate(wave)
            ]
            results += _gather(client, trees)
        return results

    def to_local(self):
        """The ordinary fitted estimator (no dask parameters), sharing this model's arrays.

        Returns
        -------
        estimator : CO2ForestClassifier, CO2ForestRegressor, E2EDTClassifier or E2EDTRegressor
            Pickles, exports to ONNX and predicts exactly as this model does.
        """
        local = self._local_class.__new__(self._local_class)
        local.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _DASK_PARAMS})
        return local

    def __sklearn_clone__(self):
        """scikit-learn's ``clone``, sharing the client (a client cannot be deep-copied)."""
        client, self.client = self.client, None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self):
        """The saved state, without the client (which belongs to this session)."""
        state = super().__getstate__()
        state["client"] = None
        return state

    # ------------------------------------------------------------ predict
    def _lazy(self, method, X):
        """``method`` of ``X``: lazy and blockwise for a dask collection, else the ordinary one."""
        if not is_dask_collection(X):
            return getattr(super(), method)(X)
        check_is_fitted(self)
        if method == "apply":
            trees = None if self._is_single_tree() else self._forest().n_trees
            return self._blockwise(method, X, trees, np.dtype(np.int64))
        if method == "predict_proba":
            return self._blockwise(method, X, len(self.classes_), np.dtype(np.float64))
        if is_classifier(self):
            return self._blockwise(method, X, None, self.classes_.dtype)
        outputs = getattr(self, "n_outputs_", 1)
        return self._blockwise(method, X, None if outputs == 1 else outputs, np.dtype(np.float64))

    def predict(self, X):
        return self._lazy("predict", X)

    def apply(self, X):
        return self._lazy("apply", X)

    def _blockwise(self, method, X, columns, dtype):
        """``method`` of every partition of the dask collection ``X``, as a lazy dask array.

        ``columns``: None for one value per row, else the number of columns.
        A model that would not fit a worker next to what it holds is streamed
        in groups of trees (:func:`_tree_groups`, :func:`_streamed`).
        """
        import dask
        import dask.array as da

        check_is_fitted(self)
        if hasattr(X, "columns"):  # a dask DataFrame: whole partitions, feature names kept
            rows = [np.nan] * X.npartitions
        elif X.ndim != 2:
            raise ValueError(f"X must be 2-D (samples, features); got {X.ndim} dimensions.")
        else:
            X = _whole_rows(X)
            rows = X.chunks[0]
        local = self.to_local()
        free = _least_free_memory(self._prediction_client())
        groups = _tree_groups(self._forest(), free, method)
        if len(groups) > 1 and not _streams(local, method):
            raise ValueError(_too_large(self._forest().nbytes, "the model", method))
        if len(groups) == 1 and not self._predicts_without_estimator:
            model = dask.delayed(local, pure=True)  # one copy in the graph
            parts = [_delayed(_predict_rows)(part, model, method) for part in _partitions(X)]
        else:
            parts = _streamed(local, groups, method, X)
        shapes = [(n,) if columns is None else (n, columns) for n in rows]
        arrays = [
            da.from_delayed(p, shape, dtype=dtype) for p, shape in zip(parts, shapes, strict=True)
        ]
        return da.concatenate(arrays)

    def _prediction_client(self):
        """The client that will predict, or None (dask's local schedulers: nothing to check)."""
        try:
            return self.client if self.client is not None else self._get_client()
        except (ImportError, ValueError):
            return None


def _least_free_memory(client):
    """Bytes the fullest worker can still take before dask pauses it (None: no limit known).

    A worker pauses at ``distributed.worker.memory.pause`` (80 %) of its
    ``memory_limit`` and runs no task until its memory falls below it: a
    prediction whose group of trees took a worker past it could wait for good
    (seen with 500 MB workers). The threshold is read from this process's dask
    configuration (a ``LocalCluster`` started here shares it); without pausing,
    the limit itself.
    """
    import dask

    if client is None:
        return None
    share = dask.config.get("distributed.worker.memory.pause", 0.8) or 1.0
    free = [
        share * (w.get("memory_limit") or 0) - w.get("metrics", {}).get("memory", 0)
        for w in _workers(client)
        if w.get("memory_limit")
    ]
    return min(free) if free else None


def _workers(client):
    """The scheduler's report of every worker (since distributed 2025.1 it lists only the
    first five unless asked for all)."""
    try:
        return list(client.scheduler_info(n_workers=-1)["workers"].values())
    except TypeError:  # distributed before 2025.1 lists every worker, without n_workers
        return list(client.scheduler_info()["workers"].values())


#: A worker predicting a partition holds a group of trees about twice while it receives
#: it, next to the partition and its output: a group takes at most this share of what the
#: fullest worker can take before dask pauses it (:func:`_least_free_memory`).
GROUP_SHARE = 4


def _tree_groups(forest, free, method):
    """Consecutive ranges ``(first, stop)`` of the trees, each group's arrays taking at most
    ``free / GROUP_SHARE`` bytes (one group, the whole forest, when ``free`` is None or it
    fits). ``ValueError`` when one tree alone cannot be held next to what a worker holds.
    """
    if free is None or forest.nbytes * GROUP_SHARE <= free:
        return [(0, forest.n_trees)]
    sizes = [_tree_bytes(tree) for tree in forest.trees]
    if 2 * max(sizes) > free:
        raise ValueError(_too_large(max(sizes), "its largest tree", method))
    groups, first, held = [], 0, 0
    for t, size in enumerate(sizes):
        if t > first and (held + size) * GROUP_SHARE > free:
            groups.append((first, t))
            first, held = t, 0
        held += size
    return [*groups, (first, len(sizes))]


def _tree_bytes(tree):
    """Bytes of one tree's arrays, as a forest of it alone stores them."""
    from obliquetrees._core.forest import ObliqueForest

    return ObliqueForest.from_trees([tree], validate=False).nbytes


def _too_large(nbytes, what, method):
    return (
        f"{what} ({nbytes / 1e6:.0f} MB) cannot be held by the fullest worker next to what it "
        f"holds, below the share of its memory limit at which dask pauses it "
        f"(distributed.worker.memory.pause), for {method}: a worker holds a model about "
        "twice while it receives it. Predict on workers with more memory, or with "
        "to_local().predict(X.compute()) in a process that can hold X, or fit smaller trees "
        "(min_samples_leaf, max_depth)."
    )


def _streams(local, method):
    """Whether ``method`` of ``local`` reads the hard-routed sum over its trees only (then it
    can be computed group of trees by group of trees)."""
    if method == "apply":
        return True
    if not hasattr(local, "routing"):  # CO2: hard routing
        return True
    if is_classifier(local):
        return local._rules()[0 if method == "predict_proba" else 1] == "hard"
    return local.routing == "hard"


def _partitions(X):
    """The row partitions of a dask array (one block across the columns) or DataFrame."""
    return list(X.to_delayed()) if hasattr(X, "columns") else list(X.to_delayed().ravel())


def _streamed(local, groups, method, X):
    """Delayed outputs of ``method`` for every partition of ``X``, tree group by tree group.

    Group ``g`` adds its trees, in tree order, to the sum over the trees of
    the groups before it (:func:`~obliquetrees._core.traversal.predict_value`
    with ``initial``), which gives the whole forest's sum bit for bit; for
    ``apply`` each group gives its trees' columns. A group's trees, and the
    blocks of a dask array it reads, are computed only after every
    partition's output of the group before it (a barrier of tokens): a
    worker holds one group at a time, and each group reads the array anew
    (as a pass of the fit does) rather than every block staying in memory
    from the first group to the last. A DataFrame's partitions are read once
    and kept (dask spills them to disk under memory pressure):
    ``dask.graph_manipulation.bind``, which gives the array's blocks new
    keys that wait for the barrier, fails on dask DataFrames (dask 2026.8).
    """
    from dask.graph_manipulation import bind

    from obliquetrees._core.forest import ObliqueForest

    forest, rows = local._forest(), _prediction_rows(local)
    classes = local.classes_ if is_classifier(local) else None
    parts = _partitions(X)
    outputs, tokens = [None] * len(parts), []
    for g, (first, stop) in enumerate(groups):
        trees = ObliqueForest.from_trees(forest.trees[first:stop], validate=False)
        group = _delayed(after)(trees, *tokens)
        again = tokens and not hasattr(X, "columns")
        read = _partitions(bind(X, tokens, seed=("obliquetrees.dask", g))) if again else parts
        outputs = [
            _delayed(group_output)(rows, group, part, method, previous)
            for part, previous in zip(read, outputs, strict=True)
        ]
        tokens = [_delayed(token)(output) for output in outputs]
    return [_delayed(finish_output)(classes, output, method, forest.n_trees) for output in outputs]


def _prediction_rows(local):
    """How the workers check a partition to predict (once in the graph): the plain checks of
    :class:`~obliquetrees._core.row_checks.PartitionRows`, or the model's own (without its
    trees) for what they leave, such as a DataFrame or a model with feature names."""
    import dask

    shell = copy.copy(local)
    for name in ("forest_", "_leaf_targets"):
        shell.__dict__.pop(name, None)
    rows = _partition_rows(
        local, plain=True, fallback_predict=Deferred(_validated_predict_rows, shell)
    )
    return dask.delayed(rows, pure=True)


def _validated_predict_rows(estimator, X):
    """``X`` checked by ``estimator`` as its ``predict`` checks it."""
    return estimator._validate_X_predict(X)


#: Seconds a fit waits while a worker stays paused (at dask's memory pause threshold) and
#: no task finishes, before it fails instead of waiting for good.
PAUSED_PATIENCE = 120.0


def _gather(client, tasks):
    """``client.gather(client.compute(tasks))``, failing when a paused worker stalls the fit.

    A dask worker whose process memory passes ``distributed.worker.memory.pause``
    (80 % of its ``memory_limit`` by default) runs no task until it falls
    below, and memory the runtime holds (not data dask can spill) may never
    fall: if the tasks left wait for such a worker, nothing ever finishes
    (seen with one worker paused and the other idle, and with both paused).
    After :data:`PAUSED_PATIENCE` seconds with a worker paused, none running
    a task and no task finished, the tasks are cancelled and ``MemoryError``
    says what to change. A long task running elsewhere is not a stall.
    """
    from distributed import wait

    futures = client.compute(tasks)
    stalled_since, finished = None, 0
    while True:
        try:
            wait(futures, timeout=2.0)
            return client.gather(futures)
        except TimeoutError:
            done = sum(future.done() for future in futures)
            if done > finished or not _stalled_by_a_pause(client):
                stalled_since, finished = None, done
                continue
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since >= PAUSED_PATIENCE:
                client.cancel(futures)
                raise MemoryError(
                    "a worker of the cluster has been paused at its memory pause threshold "
                    "(distributed.worker.memory.pause, 80 % of memory_limit by default) while "
                    f"no task ran or finished for {PAUSED_PATIENCE:.0f} s, and the fit cannot "
                    "go on: give the workers more memory, lower rows_per_task (rows_per_tree "
                    "for E2EDT), or raise the pause threshold."
                ) from None


def _stalled_by_a_pause(client):
    """Whether a worker is paused and no worker runs a task (the scheduler's last reports)."""
    workers = _workers(client)
    paused = any(w.get("status") == "paused" for w in workers)
    running = sum(w.get("metrics", {}).get("task_counts", {}).get("executing", 0) for w in workers)
    return paused and not running


def _delayed(func):
    import dask

    return dask.delayed(func, pure=True)


def _partition_draws(seed, lengths, n_draws, replace):
    """How many of a tree's ``n_draws`` draws fall in each partition (``lengths`` rows each).

    With replacement (a bootstrap of all rows): multinomial; without: multivariate
    hypergeometric. Drawn from the tree's seed, so the same seed and the same
    partitioning give the same rows.
    """
    rng = generator(int(seed), ROWS_STREAM)
    if replace:
        return rng.multinomial(n_draws, lengths / lengths.sum())
    return rng.multivariate_hypergeometric(lengths, n_draws)


class _Partitions:
    """The row partitions of ``(X, y, sample_weight)``, and tasks that read them.

    :meth:`map` runs a function on every partition in one task that computes
    the partition of ``X``, ``y`` and ``sample_weight`` together: a dask
    array's blocks come from one blockwise graph (``y`` computed from ``X``,
    say, reads the block of ``X`` it was computed from on the same worker,
    and no block of ``X`` is moved to meet its ``y``); a dask DataFrame's
    partitions come from their delayed objects.

    Raises
    ------
    ValueError
        When the collections are not partitioned alike.
    """

    def __init__(self, X, y, sample_weight):
        inputs = [X, y, sample_weight]
        n_parts = [
            a.numblocks[0] if hasattr(a, "numblocks") else a.npartitions
            for a in inputs
            if a is not None
        ]
        # row counts of every partition, where dask knows them (not after a dataframe's
        # to_dask_array(): NaN; the validation pass then finds rows that do not line up)
        rows = [tuple(a.chunks[0]) for a in inputs if hasattr(a, "chunks")]
        rows = [r for r in rows if not np.isnan(sum(r))]
        if len(set(n_parts)) > 1 or len(set(rows)) > 1:
            raise ValueError(
                "X, y and sample_weight must be partitioned alike (the same rows in each "
                f"partition): {n_parts} partitions; rechunk or repartition them to X's."
            )
        self.inputs = inputs
        self.arrays = all(hasattr(a, "chunks") for a in inputs if a is not None)

    def map(self, func, *args):
        """``func(X, y, sample_weight, partition, *args)`` of every partition: a list of Delayed."""
        if not self.arrays:
            parts = [None if a is None else a.to_delayed() for a in self.inputs]
            weights = parts[2] or [None] * len(parts[0])
            return [
                _delayed(func)(x, y, w, p, *args)
                for p, (x, y, w) in enumerate(zip(parts[0], parts[1], weights, strict=True))
            ]
        X, y, weights = self.inputs
        # three dimensions, so that blocks of X, y (1-D or 2-D) and the weights line up by rows
        blocks = [_whole_rows(X)[:, :, None], y[:, None, None] if y.ndim == 1 else y[:, None, :]]
        blocks[1] = _whole_rows(blocks[1])
        if weights is not None:
            blocks.append(weights[:, None, None])
        meta = np.empty((0, 0, 0), dtype=object)
        out = da_map_blocks(
            on_block, *blocks, task=func, args=args, y_1d=y.ndim == 1, dtype=object, meta=meta
        )
        return list(out.to_delayed().ravel())


def _whole_rows(array):
    """``array`` with one block across its columns (a row partition holds whole rows)."""
    if all(n == 1 for n in array.numblocks[1:]):
        return array  # also keeps unknown row sizes, which rechunk refuses
    return array.rechunk({axis: -1 for axis in range(1, array.ndim)})


def da_map_blocks(*args, **kwargs):
    """``dask.array.map_blocks`` (dask is imported on first use)."""
    import dask.array as da

    return da.map_blocks(*args, **kwargs)


def _combined_moments(moments):
    """Weighted mean and standard deviation of every feature from the partitions' (total,
    mean, M2).

    Chan et al.'s pairwise update, in partition order (deterministic).
    """
    total, mean, m2 = (np.array(a, dtype=np.float64) for a in moments[0])
    for w_b, mean_b, m2_b in moments[1:]:
        new_total = total + w_b
        share = np.divide(w_b, new_total, out=np.zeros_like(total), where=new_total > 0)
        delta = mean_b - mean
        mean = mean + delta * share
        m2 = m2 + m2_b + delta**2 * total * share
        total = new_total
    return mean, np.sqrt(np.divide(m2, total, out=np.zeros_like(total), where=total > 0))


class _DaskClassifier(_DaskForest):
    def predict_proba(self, X):
        return self._lazy("predict_proba", X)


_X_DOC = (
    "X : dask array, dask DataFrame, array-like or sparse matrix of shape (n_samples, n_features)"
)
_lazy_doc(
    _DaskForest.predict, "Predicted class or target of each sample.", "y : dask array or ndarray"
)
_lazy_doc(
    _DaskForest.apply,
    "Leaf reached in each tree (as the ordinary ``apply``).",
    "leaves : dask array or ndarray",
)
_lazy_doc(
    _DaskClassifier.predict_proba,
    "Class probabilities (columns follow ``classes_``).",
    "proba : dask array or ndarray of shape (n_samples, n_classes)",
)

_DASK_CONSTRAINTS = {
    "rows_per_tree": [None, *reals(0, 1, closed="right", not_int=True), *integers(1)],
    "rows_per_task": [*integers(10 * SPLIT_SAMPLE_SHARE)],
    "client": "no_validation",
}


def _gathered_whole(rows, error, rows_per_task):
    """Whether a node of ``rows`` distinct rows (an estimate with standard error ``error``)
    surely has at most ``rows_per_task``, so that all its rows are gathered in one task."""
    return rows + 4.0 * error <= rows_per_task


class _Growth:
    """One tree's node growth as the client follows it: its seed, its draws per partition,
    its :class:`~obliquetrees.co2._distributed.NodeTree`, and its training statistics."""

    def __init__(self, seed, counts, tree):
        self.seed, self.counts, self.tree = seed, counts, tree
        self.stats = np.zeros(2, dtype=np.int64)  # CCCP iterations, axis-aligned fallbacks
        self.resolution = None  # (max_features_, max_split_features_) of the training step

    def record(self, path, result):
        """Take the result of :func:`~obliquetrees.co2._dask_tasks.grow_node` for node ``path``."""
        kind, stats, *rest = result
        if kind == "retry":  # the node's exact rows are known now: ask again
            self.tree.nodes[path].update(estimate=stats[3], error=0.0, final=True)
            return
        if kind == "leaf":
            self.tree.set_leaf(path, stats)
        elif kind == "subtree":
            self.tree.set_subtree(path, stats, rest[0])
        else:
            self.tree.set_split(path, stats, rest[0], rest[1])
        if rest:  # the training step ran: (stats, resolution)
            growth_stats, resolution = rest[-1]
            self.stats += np.asarray(growth_stats, dtype=np.int64).reshape(-1)[:2]
            self.resolution = self.resolution or resolution

    def result(self, cst):
        """``(tree, stats, resolution)`` of the grown tree (as :meth:`_CO2Trees._grow_tree`)."""
        return self.tree.assemble(cst), self.stats, self.resolution


class _CO2Trees:
    """How a CO2 forest grows its trees node by node on the workers and stores them (dask fit).

    Node growth (:mod:`obliquetrees.co2._distributed`): every tree starts as
    one pending node, its root, expected to hold the distinct rows its draws
    hit. Each *pass* serves pending nodes of the trees in order, as many as
    keep about ``rows_per_task`` rows per worker thread in all: one task per
    partition (:func:`~obliquetrees.co2._dask_tasks.node_pass`) routes each
    served tree's drawn rows through its splits so far, sums each served
    node's weight and outputs exactly, and keeps all of a node's rows when it surely has at most
    ``rows_per_task`` (:func:`_gathered_whole`: its estimate plus four
    standard errors), else each with a probability that keeps about
    ``rows_per_task // SPLIT_SAMPLE_SHARE``; one task per node
    (:func:`~obliquetrees.co2._dask_tasks.grow_node`) then gathers those rows
    and grows the subtree, or fits the split, or finds a leaf, or asks again with the node's exact
    rows when its estimate (from its parent's sample) was wrong. So a task
    gathers at most ``rows_per_task`` rows (a test spies on it), and nothing
    but the kept rows, the splits and the statistics move. A tree whose rows
    are surely at most ``rows_per_task`` is gathered whole at its root: the
    tree the in-memory training step grows from those rows.

    The tree's limits hold as in memory: a subtree's ``max_depth`` is the
    tree's less the node's depth, ``min_impurity_decrease`` is scaled so a
    split's decrease counts as a share of the tree's root (not the node's),
    and a stump asks of its sample's children the sample's share of
    ``min_samples_leaf`` (:func:`~obliquetrees.co2._dask_tasks.node_limits`).

    Why split a large node on a sample of a quarter of ``rows_per_task``
    rows: CO2's CCCP fits on at most ``max_cccp_samples`` rows of a node
    (1,024 for the classifier, 2,048 for the regressor by default) whatever
    it holds, so only the axis-aligned start and the oblique test see more;
    12,500 rows (the default's quarter) place a threshold within about
    1 / sqrt(12,500), under 1 %, of a quantile of the node's rows, and four
    nodes' samples fit in one task's budget. This is ours, not the paper's:
    in memory the start scans every row of the node.
    """

    _dask_params = {"rows_per_tree": None, "rows_per_task": ROWS_PER_TASK, "client": None}
    #: Prediction sums hard-routed trees: the workers need the trees and the plain checks,
    #: not the estimator (:func:`_streamed`, one group or more)
    _predicts_without_estimator = True
    _dask_parameter_docs = _CO2_PARAMETER_DOCS

    def _train_trees(self, client, template, rows, parts, lengths, seeds):
        """Every tree's ``(tree, stats, resolution)``, in seed order, grown node by node."""
        from obliquetrees.co2 import _dask_tasks
        from obliquetrees.co2._distributed import NodeTree

        n_draws = self._draws_per_tree(int(lengths.sum()))
        root_rows = self._expected_rows(int(lengths.sum()), n_draws)
        if not _gathered_whole(root_rows, math.sqrt(root_rows), self.rows_per_task):
            self._check_node_growth()
        self._resolve_class_weight(template)
        step = self._node_step(template, rows)
        classifier = is_classifier(self)
        n_outputs = self.n_classes_ if classifier else self.n_outputs_
        n_features = self.n_features_in_
        growths = [
            _Growth(
                int(seed),
                _partition_draws(seed, lengths, n_draws, self.bootstrap),
                NodeTree(n_features, n_outputs, classifier, self.max_depth, template._feature_mean),
            )
            for seed in seeds
        ]
        for growth in growths:
            growth.tree.nodes[1].update(estimate=root_rows, error=math.sqrt(root_rows))
        sizes = (self.rows_per_task, self.rows_per_task // SPLIT_SAMPLE_SHARE)
        budget = self.rows_per_task * max(1, sum(client.nthreads().values()))
        while True:
            served = self._next_requests(growths, sizes, budget)
            if not served:
                break
            plan = []
            for growth, requests in served:
                routing, ids = growth.tree.routing_tree()
                by_id = {ids[path]: (path, keep) for path, keep in requests.items()}
                plan.append((growth.seed, growth.counts, self.bootstrap, routing, by_id))
            taken = parts.map(_dask_tasks.node_pass, step, plan)
            tasks, where = [], []
            for t, (growth, requests) in enumerate(served):
                for path, keep in requests.items():
                    node = growth.tree.nodes[path]
                    pieces = [_delayed(_dask_tasks.node_piece)(part, t, path) for part in taken]
                    root_weight = growth.tree.nodes[1].get("weight")
                    request = (keep, node.get("final", False), root_weight)
                    tasks.append(
                        _delayed(_dask_tasks.grow_node)(
                            step, growth.seed, path, node["depth"], request, sizes, *pieces
                        )
                    )
                    where.append((growth, path))
            for (growth, path), result in zip(where, _gather(client, tasks), strict=True):
                growth.record(path, result)
        cst = check_monotonic_cst(self, self.monotonic_cst)
        return [g.result(cst) for g in growths]

    @staticmethod
    def _next_requests(growths, sizes, budget):
        """``[(growth, {path: keep})]`` of the next pass: pending nodes in tree order, as many
        as keep about ``budget`` rows (at least one node)."""
        rows_per_task, split_rows = sizes
        served, spent = [], 0.0
        for growth in growths:
            requests = {}
            for path in growth.tree.pending():
                node = growth.tree.nodes[path]
                estimate = node["estimate"]
                if growth.tree.at_max_depth(path):
                    keep = 0.0  # a leaf: its statistics only
                elif _gathered_whole(estimate, node["error"], rows_per_task):
                    keep = 1.0
                else:  # else a sample (a node smaller than estimated asks again)
                    keep = min(1.0, split_rows / max(estimate, 1.0))
                cost = keep * estimate
                if spent and spent + cost > budget:
                    break
                requests[path] = keep
                spent += cost
            if requests:
                served.append((growth, requests))
            if spent >= budget:
                break
        return served

    def _expected_rows(self, n_rows, n_draws):
        """Distinct rows a tree's ``n_draws`` draws from ``n_rows`` are expected to hit."""
        if not self.bootstrap:
            return float(n_draws)
        return n_rows * -math.expm1(-n_draws / n_rows)

    def _check_node_growth(self):
        """Refuse what node growth cannot do (a tree larger than one task)."""
        for name, bad in (("max_leaf_nodes", None), ("class_weight", "balanced_subsample")):
            value = getattr(self, name, None)
            if value is not None and (bad is None or value == bad):
                raise ValueError(
                    f"{name}={value!r} needs each tree's rows in one task, and a tree here draws "
                    f"more than rows_per_task={self.rows_per_task}: raise rows_per_task, lower "
                    f"rows_per_tree, or leave {name} at its default."
                )

    def _resolve_class_weight(self, template):
        """The class weights of every tree's node statistics, set on ``template``.

        ``"balanced"`` weighs the classes by their counts over all rows, as
        in memory; it is given to the trees' growth as that dict.
        """
        weight = None
        if is_classifier(self) and self.class_weight is not None:
            if self.class_weight == "balanced":
                counts = np.zeros(self.n_classes_)
                for labels, n in template._class_counts:
                    counts[np.searchsorted(self.classes_, labels)] += n
                weight = counts.sum() / (self.n_classes_ * np.maximum(counts, 1))
                template.class_weight = dict(
                    zip(self.classes_.tolist(), weight.tolist(), strict=True)
                )
            elif self.class_weight != "balanced_subsample":
                weight = self._class_weight_vector(None)
        template._dask_class_weight = weight

    def _check_parameters(self):
        self._check_bootstrap_parameters()
        if self.max_samples is not None:
            raise ValueError(
                f"max_samples={self.max_samples!r}: on dask input rows_per_tree gives the "
                "rows each tree draws; leave max_samples=None."
            )
        if self._margin_needs_out_of_bag_rows():
            raise ValueError(
                f'oblique_test="out_of_bag" with oblique_penalty={self.oblique_penalty!r}: a '
                "tree of a dask fit receives only the rows it drew, none out of bag, so no "
                "oblique split could gain a positive margin; set oblique_penalty=0 or "
                'oblique_test="fit".'
            )

    def _node_step(self, template, rows):
        """What the workers need to grow this forest's nodes without the estimator
        (:class:`~obliquetrees.co2._dask_tasks.NodeStep`): ``template``'s training
        parameters, classes and class weights, the checked constraints."""
        from obliquetrees.co2._dask_tasks import NodeStep
        from obliquetrees.co2.training import CO2Params

        resolved = ("max_features", "max_split_features", "max_samples")
        params = {
            field.name: getattr(template, field.name)
            for field in dataclasses.fields(CO2Params)
            if field.name not in resolved
        }
        # no tree of a dask fit has out-of-bag rows: "auto" is 0, as without bootstrap
        params["oblique_penalty"] = template._oblique_margin(False, None)
        classifier = is_classifier(self)
        return NodeStep(
            rows=rows,
            params=params,
            max_features=template.max_features,
            max_split_features=template.max_split_features,
            classes=self.classes_ if classifier else None,
            n_outputs=self.n_classes_ if classifier else self.n_outputs_,
            # "balanced" is a dict of all rows' counts by now (_resolve_class_weight)
            class_weight=template._class_weight_vector(None),
            node_class_weight=template._dask_class_weight,
            monotonic_cst=check_monotonic_cst(self, self.monotonic_cst),
            name=type(template).__name__,
        )

    def _store_dask_trees(self, results):
        # the first resolution (a tree's missing-value indicators may differ)
        self.max_features_, self.max_split_features_ = next(r[2] for r in results if r[2])
        stats = np.array([r[1] for r in results], dtype=np.int64).reshape(-1, 2)
        self._store_trees([r[0] for r in results], stats, None, None)
        self.oblique_penalty_ = self._oblique_margin(False, None)
        self._remember_constraints(check_monotonic_cst(self, self.monotonic_cst))


class _E2EDTTrees:
    """How an E2EDT forest trains one tree on a worker and stores the trees (dask fit)."""

    _dask_params = {"rows_per_tree": ROWS_PER_TREE, "client": None}
    #: Soft routing, single-tree ``apply``: the estimator predicts (:meth:`_blockwise`)
    _predicts_without_estimator = False
    _dask_parameter_docs = _E2EDT_PARAMETER_DOCS

    def _train_trees(self, client, template, rows, parts, lengths, seeds):
        """An E2EDT tree is trained as a whole (EM over all its rows): on one worker each."""
        return self._train_whole_trees(client, template, parts, lengths, seeds)

    def _check_parameters(self):
        """Nothing beyond :meth:`_DaskForest._refuse_whole_set_options` (``oob_score``)."""

    def _grow_tree(self, X, y, sample_weight, seed):
        targets, n_classes, sample_weight = self._training_targets(y, sample_weight, {"trees": []})
        cst = check_monotonic_cst(self, self.monotonic_cst)
        trees, info = self._grow_trees(X, y, targets, sample_weight, n_classes, [seed], cst)
        return trees[0], info["steepness"][0]

    def _store_dask_trees(self, results):
        info = {"steepness": [r[1] for r in results], "bootstrap": self.bootstrap}
        none = {"trees": [], "steepness": [], "bootstrap": []}
        self._store_trees(none, [r[0] for r in results], info, None)
        self._remember_constraints(check_monotonic_cst(self, self.monotonic_cst))


def _dask_class(name, local_class, family, classifier):
    mixins = (_DaskClassifier if classifier else _DaskForest, family)
    cls = type(
        name,
        (*mixins, local_class),
        {
            "__init__": _dask_init(local_class, family._dask_params),
            "__doc__": _dask_doc(local_class, family._dask_parameter_docs),
            "__module__": __name__,
            "_local_class": local_class,
            "_parameter_constraints": {
                **local_class._parameter_constraints,
                **{name: _DASK_CONSTRAINTS[name] for name in family._dask_params},
            },
        },
    )
    cls.__init__.__qualname__ = f"{name}.__init__"
    return cls


DaskCO2ForestClassifier = _dask_class(
    "DaskCO2ForestClassifier", CO2ForestClassifier, _CO2Trees, classifier=True
)
DaskCO2ForestRegressor = _dask_class(
    "DaskCO2ForestRegressor", CO2ForestRegressor, _CO2Trees, classifier=False
)
DaskE2EDTClassifier = _dask_class("DaskE2EDTClassifier", E2EDTClassifier, _E2EDTTrees, True)
DaskE2EDTRegressor = _dask_class("DaskE2EDTRegressor", E2EDTRegressor, _E2EDTTrees, False)
