"""Defaults of constrained fits (``monotonic_cst``), chosen on validation parts.

Two families, each a module constant of the package that only constrained
fits read, first tried on the test parts of ``benchmarks/bench_monotonic.py``
and chosen again here without reading a test part:

- ``co2-refine``: the joint refinement of constrained CO2 regression forests
  (:mod:`obliquetrees.co2._refine`): ``off`` (each tree ordered on its own,
  the behaviour before the refinement) and the refinement with
  :data:`~obliquetrees.co2._refine.STEP` 0.25, 0.5 and 1.0. Estimator:
  ``CO2ForestRegressor(n_estimators=30, n_jobs=2)``. Incumbent: ``off``.
- ``hinge-pool``: :data:`~obliquetrees.hinge._monotonic.POOL_FRACTION`, the
  fraction of a hinge forest's learnt features that rise with the
  constrained inputs (each tree's first decision tests one of them, every
  other decision a free feature): 0.5 (the value before this choice), 0.75
  and 0.9. Estimator: ``HingeForestRegressor(n_jobs=2)`` at its defaults.
  Incumbent: 0.5.
- ``e2edt-free-depth``: :data:`~obliquetrees.e2edt.training.FREE_TREE_DEPTH`,
  the largest depth of the tree of the free inputs that a constrained
  E2EDT regressor adds to its constrained tree (``off``: none, the single
  constrained tree, the behaviour before it; 2, 3, 4; 6, the regressor's
  own default depth). Estimator: ``E2EDTRegressor(n_jobs=2)`` at its
  defaults (one tree). Incumbent: ``off``. Unlike the other two, this
  family was first measured as a study (``monotone_additive.py``: depth 6
  and 3, on the test parts); its choice is made here, on validation parts.

Rule, fixed before the runs, the same for all three:

- Data sets, constraints, training and test parts: exactly those of
  ``benchmarks/bench_monotonic.py`` (synthetic, california_housing (at most
  ``--max-train`` 5000 training rows), concrete, abalone), seeds 0, 1, 2.
- Validation: each seed's training part split again 75/25 as in
  ``benchmarks/monotonic_validation.py`` (:func:`~benchmarks.monotonic_validation.fit_validation`);
  the family's estimator with the data set's ``monotonic_cst`` and
  ``random_state=seed`` is fitted on the 75 % and scored by R^2 on the 25 %.
  A candidate's score on a data set is its mean over the seeds.
- Choice: the best mean rank over the data sets (equal scores share their
  average rank); ties of the mean rank go to the incumbent if it is among
  them, else to the smallest value.
- Leave one data set out: for each data set, the rule on the other three
  sets' validation scores, that choice then fitted on the whole training
  part and scored on the test part (mean over the seeds), beside the
  in-sample choice and the incumbent on the same parts. Every candidate's
  test score is listed too, for the record; no choice reads it.

The candidates run in one process: both constants are read when a fit uses
them (arguments of the kernels, not frozen into machine code), and ``off``
sets the CO2 regressor's ``_refines_leaves`` to False for its fits.

Results: ``results/monotonic_defaults_<family>.md`` (cells in the json).

    python -m benchmarks monotonic-defaults --family co2-refine
    python -m benchmarks monotonic-defaults --family hinge-pool
    python -m benchmarks monotonic-defaults --family e2edt-free-depth
"""

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from benchmarks import monotonic_validation as validation
from benchmarks.bench_monotonic import DATASETS, describe_constraints, load_split
from benchmarks.common import cpu_model, load_average, write_results

OFF = "off"


def _co2(cst, seed):
    from obliquetrees import CO2ForestRegressor

    return CO2ForestRegressor(30, monotonic_cst=cst, random_state=seed, n_jobs=2)


def _e2edt(cst, seed):
    from obliquetrees import E2EDTRegressor

    return E2EDTRegressor(monotonic_cst=cst, random_state=seed, n_jobs=2)


def _hinge(cst, seed):
    from obliquetrees import HingeForestRegressor

    return HingeForestRegressor(monotonic_cst=cst, random_state=seed, n_jobs=2)


@dataclass(frozen=True)
class Family:
    """One constant: its estimator (name, ``make(cst, seed)``), candidates (strings),
    the incumbent, and what the candidates are."""

    estimator: str
    make: Callable
    candidates: tuple
    incumbent: str
    what: str


FAMILIES = {
    "co2-refine": Family(
        "CO2ForestRegressor(n_estimators=30)",
        _co2,
        (OFF, "0.25", "0.5", "1.0"),
        OFF,
        "off (no refinement) and the refinement's STEP",
    ),
    "hinge-pool": Family(
        "HingeForestRegressor()", _hinge, ("0.5", "0.75", "0.9"), "0.5", "POOL_FRACTION"
    ),
    "e2edt-free-depth": Family(
        "E2EDTRegressor()",
        _e2edt,
        (OFF, "2", "3", "4", "6"),
        OFF,
        "off (no free tree) and FREE_TREE_DEPTH",
    ),
}


@contextmanager
def candidate_settings(family, candidate):
    """The package set up as ``candidate`` of ``family`` for the duration of the block."""
    from obliquetrees import CO2ForestRegressor
    from obliquetrees.co2 import _refine
    from obliquetrees.e2edt import training
    from obliquetrees.hinge import _monotonic

    saved = (
        _refine.STEP,
        CO2ForestRegressor._refines_leaves,
        _monotonic.POOL_FRACTION,
        training.FREE_TREE_DEPTH,
    )
    try:
        if family == "co2-refine" and candidate == OFF:
            CO2ForestRegressor._refines_leaves = False
        elif family == "co2-refine":
            _refine.STEP = float(candidate)
        elif family == "hinge-pool":
            _monotonic.POOL_FRACTION = float(candidate)
        else:
            training.FREE_TREE_DEPTH = None if candidate == OFF else int(candidate)
        yield
    finally:
        (
            _refine.STEP,
            CO2ForestRegressor._refines_leaves,
            _monotonic.POOL_FRACTION,
            training.FREE_TREE_DEPTH,
        ) = saved


def score_cells(family, candidate, datasets, seeds, max_train):
    """Validation and test R^2 of one candidate per data set and seed."""
    from sklearn.metrics import r2_score

    spec = FAMILIES[family]

    def r2(X, y, Xs, ys, cst, seed):
        model = spec.make(cst, seed).fit(X, y)
        return float(r2_score(ys, model.predict(Xs))), int(getattr(model, "n_refine_passes_", 0))

    cells = []
    with candidate_settings(family, candidate):
        for name in datasets:
            for seed in seeds:
                (X, y, Xt, yt), cst = load_split(name, seed, max_train)
                start = time.perf_counter()
                val, val_passes = r2(*validation.fit_validation(X, y, seed), cst, seed)
                test, test_passes = r2(X, y, Xt, yt, cst, seed)
                cells.append(
                    dict(
                        candidate=candidate,
                        dataset=name,
                        seed=seed,
                        val=val,
                        test=test,
                        passes=[val_passes, test_passes],
                        seconds=time.perf_counter() - start,
                    )
                )
    return cells


def choose(val, datasets, candidates, incumbent):
    """The rule: the best mean rank; ties to the incumbent, else the smallest value."""
    return validation.choose(val, datasets, candidates, incumbent, order=float)


def lodo(val, test, datasets, candidates, incumbent):
    """Per held-out data set: the choice on the others and the test scores beside it."""
    return validation.lodo(val, test, datasets, candidates, incumbent, order=float, name=str)


def _table(scores, datasets, candidates, ranks=None):
    return validation.table(scores, datasets, candidates, ranks, name=str)


def write_report(family, cells, datasets, candidates):
    """``monotonic_defaults_<family>.md`` and ``.json`` in ``benchmarks/results``."""
    spec = FAMILIES[family]
    val, test = (validation.mean_scores(cells, key, by="candidate") for key in ("val", "test"))
    ranks = validation.mean_ranks(val, datasets, candidates)
    constraints = describe_constraints()
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"{spec.estimator} (n_jobs=2) with monotonic_cst; constraints (feature index: sign): "
        f"{constraints}. Candidates: {spec.what}. Validation R^2: fit on 75 % of a seed's "
        "training part, scored on the other 25 %; test R^2: fit on the whole training part, "
        "scored on the test part; means over the seeds. The rule (fixed before the runs) and "
        "the method: the docstring of benchmarks/monotonic_defaults.py.\n\n**In-sample choice "
        f"(validation, every data set): {choose(val, datasets, candidates, spec.incumbent)}.**"
    )
    tables = [
        (
            "Validation R^2 (mean over the seeds) and mean rank",
            _table(val, datasets, candidates, ranks),
        ),
        (
            "Leave one data set out: chosen on the other sets' validation, scored on the test part",
            lodo(val, test, datasets, candidates, spec.incumbent),
        ),
        ("Test R^2 of every candidate (read by no choice)", _table(test, datasets, candidates)),
    ]
    if family == "co2-refine":
        passes = {}
        for cell in cells:
            passes.setdefault((cell["dataset"], cell["candidate"]), []).append(cell["passes"][1])
        tables.append(
            (
                "Passes chosen by the held-out rows in the test fits (per seed)",
                _table({k: str(v) for k, v in passes.items()}, datasets, candidates),
            )
        )
    title = f"Constrained fits, {family}: chosen on validation parts"
    write_results(f"monotonic_defaults_{family}.md", title, tables=tables, notes=notes)
    write_results(f"monotonic_defaults_{family}.json", data={"cells": cells})


def add_arguments(parser):
    """The arguments of ``python -m benchmarks monotonic-defaults``."""
    parser.add_argument("--family", required=True, choices=list(FAMILIES))
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")


def main(args):
    candidates = FAMILIES[args.family].candidates
    cells = []
    for candidate in candidates:
        start = time.perf_counter()
        cells += score_cells(
            args.family, candidate, args.datasets, range(args.seeds), args.max_train
        )
        print(f"{candidate}: {time.perf_counter() - start:.0f} s", flush=True)
    write_report(args.family, cells, args.datasets, candidates)
