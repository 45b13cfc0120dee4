"""MAX_CONSTRAINED_START_ROWS chosen on validation parts, and left one data set out.

``obliquetrees._training.axis_split.MAX_CONSTRAINED_START_ROWS`` (150 when
this script was written) is the most rows of a CO2 node whose axis-aligned
start may be on a monotonically constrained feature while a free feature can
split it (``ranked_axis_split``: a node of ``m`` rows defers to the free
features when ``m > MAX_CONSTRAINED_START_ROWS``). 150 was picked on the
test part of one split of two data sets (CO2ForestClassifier's Notes); this
script chooses it again without reading a test part.

Rule, fixed before the runs:

- Candidates: 0 (every node with a free feature that splits it starts on
  one), 50, 150, 500 and ``never`` (``np.iinfo(np.int64).max``: no node
  defers, the start is the best compatible split over all features).
- Data sets, constraints, training and test parts: exactly those of
  ``benchmarks/bench_monotonic.py`` (:data:`~benchmarks.bench_monotonic.CONSTRAINTS`,
  :func:`~benchmarks.bench_monotonic.load_split`: synthetic,
  california_housing (at most ``--max-train`` 5000 training rows),
  concrete, abalone), seeds 0, 1, 2.
- Validation: each seed's training part is split again, 75 % fit and 25 %
  validation (a permutation seeded by ``[seed, 75]``);
  ``CO2ForestRegressor(n_estimators=30, monotonic_cst=..., random_state=seed,
  n_jobs=1)`` is fitted on the fit part and scored by R^2 on the validation
  part. A candidate's score on a data set is its mean over the seeds.
- Choice: the candidate with the best mean rank over the data sets (rank 1:
  the highest score on a set; equal scores share their average rank). Ties of
  the mean rank: 150 wins if among them, else the smallest value.
- Leave one data set out (LODO): for each data set ``D``, the same rule on
  the other three sets' validation scores; that choice is then fitted on
  ``D``'s whole training part and scored on ``D``'s test part (mean over the
  seeds), beside the in-sample choice's and 150's test scores on the same
  parts. The test parts are read only for this table; no choice reads them.
  (Every candidate's test score is computed in the same runs and listed too,
  for the record.)

How a candidate runs without editing the package: numba freezes a module
global into the machine code when a kernel compiles, and the package caches
machine code (its own shipped kernels, keyed by a hash of its sources, and
numba's cache, keyed by the kernel's file). So each candidate runs in its own
process on a copy of the ``obliquetrees`` sources in a temporary directory,
the constant's line rewritten there: a different source, hence compiled
afresh, and the package itself is never changed. The child checks that it
imported the copy and that the copy holds the candidate.

Results: ``results/monotonic_validation.md`` (every cell in
``monotonic_validation.json``).

    python -m benchmarks monotonic-validation
    python -m benchmarks monotonic-validation --candidates 150 never --datasets concrete
"""

import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from benchmarks.bench_monotonic import DATASETS, describe_constraints, load_split
from benchmarks.common import ROOT, cpu_model, load_average, run_python, write_results

#: The constant and the file that defines it.
CONSTANT = "MAX_CONSTRAINED_START_ROWS"
CONSTANT_FILE = Path("obliquetrees") / "_training" / "axis_split.py"
#: The value before this choice: it wins ties.
INCUMBENT = 150
#: "never defer": more rows than any node has.
NEVER = int(np.iinfo(np.int64).max)
CANDIDATES = (0, 50, 150, 500, NEVER)
N_TREES = 30
#: Fraction of a training part held out for validation.
VALIDATION = 0.25


def label(threshold):
    """A candidate as the report writes it."""
    return "never" if threshold == NEVER else str(threshold)


def parse_candidate(text):
    """A candidate from the command line (``never`` or a row count)."""
    return NEVER if text == "never" else int(text)


def fit_validation(X, y, seed):
    """``X_fit, y_fit, X_val, y_val``: the training part split 75/25 (seeded by ``[seed, 75]``)."""
    order = np.random.default_rng([seed, 75]).permutation(len(X))
    n_val = int(round(VALIDATION * len(X)))
    val, fit = np.sort(order[:n_val]), np.sort(order[n_val:])
    return X[fit], y[fit], X[val], y[val]


def score_cells(datasets, seeds, max_train):
    """Validation and test R^2 of the imported package (one candidate) per data set and seed."""
    from sklearn.metrics import r2_score
    from threadpoolctl import threadpool_limits

    from obliquetrees import CO2ForestRegressor

    def r2(X, y, Xs, ys, cst, seed):
        model = CO2ForestRegressor(N_TREES, monotonic_cst=cst, random_state=seed, n_jobs=1)
        return float(r2_score(ys, model.fit(X, y).predict(Xs)))

    cells = []
    with threadpool_limits(1):
        for name in datasets:
            for seed in seeds:
                (X, y, Xt, yt), cst = load_split(name, seed, max_train)
                start = time.perf_counter()
                val = r2(*fit_validation(X, y, seed), cst, seed)
                test = r2(X, y, Xt, yt, cst, seed)
                seconds = time.perf_counter() - start
                cells.append(dict(dataset=name, seed=seed, val=val, test=test, seconds=seconds))
    return cells


def child(argv):
    """A candidate's process (cwd: the patched copy): print its cells as one JSON line."""
    threshold, max_train, seeds, *datasets = argv
    from obliquetrees._training import axis_split

    copy = Path.cwd().resolve()
    if not Path(axis_split.__file__).resolve().is_relative_to(copy):
        raise RuntimeError(f"imported {axis_split.__file__}, not the copy in {copy}")
    if getattr(axis_split, CONSTANT) != int(threshold):
        raise RuntimeError(f"the copy holds {CONSTANT} = {getattr(axis_split, CONSTANT)}")
    max_train = None if max_train == "None" else int(max_train)
    cells = score_cells(datasets, range(int(seeds)), max_train)
    print(json.dumps(cells))


def patched_copy(threshold, directory):
    """Copy the ``obliquetrees`` sources into ``directory``, the constant set to ``threshold``."""
    shutil.copytree(
        ROOT / "obliquetrees",
        Path(directory) / "obliquetrees",
        ignore=shutil.ignore_patterns("__pycache__", "_kernel_cache", "*.nbi", "*.nbc"),
    )
    path = Path(directory) / CONSTANT_FILE
    text, n = re.subn(
        rf"^{CONSTANT} = \d+$", f"{CONSTANT} = {threshold}", path.read_text(), flags=re.M
    )
    if n != 1:
        raise RuntimeError(f"{CONSTANT_FILE} defines {CONSTANT} {n} times, expected once")
    path.write_text(text)


def run_candidate(threshold, datasets, seeds, max_train):
    """The cells of one candidate, computed in a child process on a patched copy."""
    with tempfile.TemporaryDirectory(prefix="monotonic_validation_") as directory:
        patched_copy(threshold, directory)
        code = "import sys; from benchmarks.monotonic_validation import child; child(sys.argv[1:])"
        args = [str(threshold), str(max_train), str(seeds), *datasets]
        done = run_python(code, *args, cwd=directory)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return [dict(cell, threshold=threshold) for cell in json.loads(done.stdout.splitlines()[-1])]


def mean_scores(cells, key, by="threshold"):
    """``{(data set, cells[by]): mean over the seeds of cells[key]}``."""
    groups = {}
    for cell in cells:
        groups.setdefault((cell["dataset"], cell[by]), []).append(cell[key])
    return {k: float(np.mean(v)) for k, v in groups.items()}


def mean_ranks(val, datasets, candidates):
    """Each candidate's mean rank over ``datasets`` of its validation score (1: best)."""
    ranks = np.array(
        [rankdata([-val[name, c] for c in candidates], method="average") for name in datasets]
    )
    return dict(zip(candidates, ranks.mean(axis=0), strict=True))


def choose(val, datasets, candidates, incumbent=INCUMBENT, order=None):
    """The rule: the best mean rank; ties to ``incumbent``, else the smallest value.

    ``order``: the key that orders the tied candidates (None: their own order).
    """
    ranks = mean_ranks(val, datasets, candidates)
    best = min(ranks.values())
    tied = [c for c in candidates if np.isclose(ranks[c], best, rtol=0, atol=1e-9)]
    return incumbent if incumbent in tied else min(tied, key=order)


def lodo(val, test, datasets, candidates, incumbent=INCUMBENT, order=None, name=label):
    """Per held-out data set: the choice on the others and the test scores beside it.

    ``incumbent`` and ``order`` as :func:`choose` takes them; ``name(candidate)``
    writes a candidate.
    """
    in_sample = choose(val, datasets, candidates, incumbent, order)
    rows = []
    for held in datasets:
        others = [other for other in datasets if other != held]
        chosen = choose(val, others, candidates, incumbent, order)
        rows.append(
            {
                "held-out set": held,
                "choice on the others": name(chosen),
                "its test R2": test[held, chosen],
                f"in-sample choice ({name(in_sample)}) test R2": test[held, in_sample],
                f"{name(incumbent)} test R2": test.get((held, incumbent), np.nan),
            }
        )
    return rows


def table(scores, datasets, candidates, ranks=None, name=label):
    """One row per data set (a column per candidate, written ``name(candidate)``), then the
    mean ranks if given."""
    rows = [
        {"data set": data, **{name(c): scores[data, c] for c in candidates}} for data in datasets
    ]
    if ranks is not None:
        rows.append({"data set": "mean rank", **{name(c): ranks[c] for c in candidates}})
    return rows


def _per_seed(cells, datasets, candidates):
    """One row per (data set, seed) of validation scores, a column per candidate."""
    val = {(x["dataset"], x["seed"], x["threshold"]): x["val"] for x in cells}
    seeds = sorted({x["seed"] for x in cells})
    return [
        {"data set": name, "seed": seed, **{label(c): val[name, seed, c] for c in candidates}}
        for name in datasets
        for seed in seeds
    ]


def write_report(cells, datasets, candidates):
    """``monotonic_validation.md`` and ``.json`` in ``benchmarks/results``."""
    val, test = mean_scores(cells, "val"), mean_scores(cells, "test")
    ranks = mean_ranks(val, datasets, candidates)
    in_sample = choose(val, datasets, candidates)
    constraints = describe_constraints()
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"CO2ForestRegressor(n_estimators={N_TREES}, n_jobs=1) with monotonic_cst; constraints "
        f"(feature index: sign): {constraints}. Candidates for {CONSTANT}: "
        f"{', '.join(label(c) for c in candidates)} ('never': no node defers to a free "
        "feature). Validation R^2: fit on 75 % of a seed's training part, scored on the other "
        "25 %; test R^2: fit on the whole training part, scored on the test part; means over "
        "the seeds. The rule (fixed before the runs) and the method: the docstring of "
        f"benchmarks/monotonic_validation.py.\n\n**In-sample choice (validation, every data "
        f"set): {label(in_sample)}.**"
    )
    tables = [
        (
            "Validation R^2 (mean over the seeds) and mean rank",
            table(val, datasets, candidates, ranks),
        ),
        ("Validation R^2 per data set and seed", _per_seed(cells, datasets, candidates)),
        (
            "Leave one data set out: chosen on the other sets' validation, scored on the test part",
            lodo(val, test, datasets, candidates),
        ),
        ("Test R^2 of every candidate (read by no choice)", table(test, datasets, candidates)),
    ]
    title = f"{CONSTANT} on validation parts (monotonic constraints, CO2)"
    write_results("monotonic_validation.md", title, tables=tables, notes=notes)
    write_results("monotonic_validation.json", data={"cells": cells})


def add_arguments(parser):
    """The arguments of ``python -m benchmarks monotonic-validation``."""
    parser.add_argument(
        "--candidates",
        nargs="+",
        default=[label(c) for c in CANDIDATES],
        help="row counts or never",
    )
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")


def main(args):
    candidates = [parse_candidate(c) for c in args.candidates]
    cells = []
    for threshold in candidates:
        start = time.perf_counter()
        cells += run_candidate(threshold, args.datasets, args.seeds, args.max_train)
        print(f"{CONSTANT} = {label(threshold)}: {time.perf_counter() - start:.0f} s", flush=True)
    write_report(cells, args.datasets, candidates)
