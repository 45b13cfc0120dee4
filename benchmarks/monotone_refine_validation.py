"""The refinement of constrained CO2 regression forests, chosen on validation parts.

``obliquetrees.co2._refine`` refits every tree's leaf values jointly after a
constrained CO2 regression forest is grown (projected backfitting; the
number of passes chosen on held-out training rows). Whether it is on by
default, and its step :data:`obliquetrees.co2._refine.STEP`, were first
tried on the test parts of ``benchmarks/bench_monotonic.py``; this script
chooses them again without reading a test part.

Rule, fixed before the runs:

- Candidates: ``off`` (the forest as grown: each tree ordered on its own,
  the behaviour before the refinement) and the refinement with ``STEP``
  0.25, 0.5 and 1.0.
- Data sets, constraints, training and test parts: exactly those of
  ``benchmarks/bench_monotonic.py`` (synthetic, california_housing (at most
  ``--max-train`` 5000 training rows), concrete, abalone), seeds 0, 1, 2.
- Validation: each seed's training part split again 75/25 as in
  ``benchmarks/monotonic_validation.py`` (:func:`~benchmarks.monotonic_validation.fit_validation`);
  ``CO2ForestRegressor(n_estimators=30, monotonic_cst=..., random_state=seed,
  n_jobs=2)`` is fitted on the 75 % and scored by R^2 on the 25 %. A
  candidate's score on a data set is its mean over the seeds.
- Choice: the best mean rank over the data sets (equal scores share their
  average rank); ties of the mean rank go to ``off`` if it is among them,
  else to the smallest step.
- Leave one data set out: for each data set, the rule on the other three
  sets' validation scores, that choice then fitted on the whole training
  part and scored on the test part (mean over the seeds), beside the
  in-sample choice and ``off`` on the same parts. Every candidate's test
  score is listed too, for the record; no choice reads it.

The candidates run in one process: ``STEP`` is read when a fit refines (it
is an argument of the kernel, not frozen into machine code), and ``off``
sets the regressor's ``_refines_leaves`` to False for its fits.

Results: ``results/monotone_refine_validation.md`` (cells in the json).

    python -m benchmarks monotone-refine-validation
"""

import time
from contextlib import contextmanager

import numpy as np

from benchmarks.bench_monotonic import CONSTRAINTS, DATASETS, load_split
from benchmarks.common import cpu_model, load_average, write_results
from benchmarks.monotonic_validation import fit_validation, mean_ranks, mean_scores

OFF = "off"
CANDIDATES = (OFF, "0.25", "0.5", "1.0")
N_TREES = 30


@contextmanager
def candidate_settings(candidate):
    """The package set up as ``candidate`` for the duration of the block."""
    from obliquetrees import CO2ForestRegressor
    from obliquetrees.co2 import _refine

    step, refines = _refine.STEP, CO2ForestRegressor._refines_leaves
    try:
        if candidate == OFF:
            CO2ForestRegressor._refines_leaves = False
        else:
            _refine.STEP = float(candidate)
        yield
    finally:
        _refine.STEP, CO2ForestRegressor._refines_leaves = step, refines


def score_cells(candidate, datasets, seeds, max_train):
    """Validation and test R^2 of one candidate per data set and seed."""
    from sklearn.metrics import r2_score

    from obliquetrees import CO2ForestRegressor

    def r2(X, y, Xs, ys, cst, seed):
        model = CO2ForestRegressor(N_TREES, monotonic_cst=cst, random_state=seed, n_jobs=2)
        model.fit(X, y)
        return float(r2_score(ys, model.predict(Xs))), int(getattr(model, "n_refine_passes_", 0))

    cells = []
    with candidate_settings(candidate):
        for name in datasets:
            for seed in seeds:
                (X, y, Xt, yt), cst = load_split(name, seed, max_train)
                start = time.perf_counter()
                val, val_passes = r2(*fit_validation(X, y, seed), cst, seed)
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


def choose(val, datasets, candidates):
    """The rule: the best mean rank; ties to ``off``, else the smallest step."""
    ranks = mean_ranks(val, datasets, candidates)
    best = min(ranks.values())
    tied = [c for c in candidates if np.isclose(ranks[c], best, rtol=0, atol=1e-9)]
    return OFF if OFF in tied else min(tied, key=float)


def lodo(val, test, datasets, candidates):
    """Per held-out data set: the choice on the others and the test scores beside it."""
    in_sample = choose(val, datasets, candidates)
    rows = []
    for held in datasets:
        chosen = choose(val, [name for name in datasets if name != held], candidates)
        rows.append(
            {
                "held-out set": held,
                "choice on the others": chosen,
                "its test R2": test[held, chosen],
                f"in-sample choice ({in_sample}) test R2": test[held, in_sample],
                "off test R2": test[held, OFF],
            }
        )
    return rows


def _table(scores, datasets, candidates, ranks=None):
    rows = [{"data set": name, **{c: scores[name, c] for c in candidates}} for name in datasets]
    if ranks is not None:
        rows.append({"data set": "mean rank", **{c: ranks[c] for c in candidates}})
    return rows


def write_report(cells, datasets, candidates):
    """``monotone_refine_validation.md`` and ``.json`` in ``benchmarks/results``."""
    val, test = (mean_scores(cells, key, by="candidate") for key in ("val", "test"))
    ranks = mean_ranks(val, datasets, candidates)
    passes = {}
    for cell in cells:
        passes.setdefault((cell["dataset"], cell["candidate"]), []).append(cell["passes"][1])
    constraints = "; ".join(f"{name}: {spec}" for name, spec in CONSTRAINTS.items())
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"CO2ForestRegressor(n_estimators={N_TREES}, n_jobs=2) with monotonic_cst; constraints "
        f"(feature index: sign): {constraints}. Candidates: off (no refinement) and the "
        "refinement's STEP. Validation R^2: fit on 75 % of a seed's training part, scored on "
        "the other 25 %; test R^2: fit on the whole training part, scored on the test part; "
        "means over the seeds. The rule (fixed before the runs) and the method: the docstring "
        "of benchmarks/monotone_refine_validation.py.\n\n**In-sample choice (validation, "
        f"every data set): {choose(val, datasets, candidates)}.**"
    )
    tables = [
        (
            "Validation R^2 (mean over the seeds) and mean rank",
            _table(val, datasets, candidates, ranks),
        ),
        (
            "Leave one data set out: chosen on the other sets' validation, scored on the test part",
            lodo(val, test, datasets, candidates),
        ),
        ("Test R^2 of every candidate (read by no choice)", _table(test, datasets, candidates)),
        (
            "Passes chosen by the held-out rows in the test fits (per seed)",
            _table({k: str(v) for k, v in passes.items()}, datasets, candidates),
        ),
    ]
    title = "Refinement of constrained CO2 regression forests on validation parts"
    write_results("monotone_refine_validation.md", title, tables=tables, notes=notes)
    write_results("monotone_refine_validation.json", data={"cells": cells})


def add_arguments(parser):
    """The arguments of ``python -m benchmarks monotone-refine-validation``."""
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")


def main(args):
    cells = []
    for candidate in args.candidates:
        start = time.perf_counter()
        cells += score_cells(candidate, args.datasets, range(args.seeds), args.max_train)
        print(f"{candidate}: {time.perf_counter() - start:.0f} s", flush=True)
    write_report(cells, args.datasets, args.candidates)
