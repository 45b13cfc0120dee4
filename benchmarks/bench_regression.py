"""Regression: the oblique regressors beside scikit-learn's on nine data sets (R², time, size).

Data sets (``../shared/data``, see MANIFEST.md there): california_housing,
cpu_act, cpu_small, fried_delve, puma8nh, puma8nm, abalone, concrete, boston.
abalone has a fixed train/test split (UCI, 3133/1044): every seed uses it and
varies only the estimators' ``random_state``; the others get a seeded 75/25
split per seed (``datasets.train_test(name, test_size=0.25, seed=seed)``).
The target is standardised with the training part's mean and sd, so MSEs are
comparable across data sets (R² is unchanged by it). Features are given as
they are: the obliquetrees estimators standardise internally, scikit-learn's
trees do not need it.

Estimators (``--estimators`` keys), ``random_state = seed`` and
``n_jobs = --n-jobs`` wherever the estimator has them:

- ``co2``: ``obliquetrees.CO2ForestRegressor(n_estimators=30)``
- ``e2edt6``: ``obliquetrees.E2EDTRegressor(max_depth=6)``
- ``e2edt``: ``obliquetrees.E2EDTRegressor()`` (defaults)
- ``rf``: ``RandomForestRegressor(n_estimators=30)``
- ``et``: ``ExtraTreesRegressor(n_estimators=30)``
- ``hgb``: ``HistGradientBoostingRegressor()``
- ``dt6``: ``DecisionTreeRegressor(max_depth=6)``
- ``dtcv``: ``DecisionTreeRegressor`` with ``max_depth`` from {2..12, None}
  chosen by 5-fold CV (``GridSearchCV``, MSE, shuffled ``KFold`` seeded by
  the seed) on the training part only, then refitted on all of it (the
  search is part of its fit time)
- ``soft``: ``obliquetrees.SoftTreeRegressor()`` (defaults)
- ``hinge``: ``obliquetrees.HingeForestRegressor()`` (defaults)

Estimators the installed obliquetrees does not have (looked up by name) are
listed as "not available in this version". All fits run inside
``threadpool_limits(n_jobs)`` (BLAS and OpenMP, e.g. HistGradientBoosting's
threads). Each estimator is warmed up once per process (fit on 200 rows,
numba compilation or cache loading) before its timed fits.

Per data set and estimator (a *cell*): test R² and MSE, fit wall and CPU
time, predict wall time (median of 3), model size ``len(pickle.dumps(model))``
for each seed. Finished cells are stored in ``results/regression.json``
(with their provenance and load before/after) and skipped on rerun when
their settings match, unless ``--fresh``; ``regression.md`` is rebuilt from
all stored cells after every cell (``--report-only`` rebuilds it without
measuring). Acceptance (issue): CO2ForestRegressor(30) vs
RandomForestRegressor(30) and E2EDTRegressor(max_depth=6) vs
DecisionTreeRegressor(max_depth=6), mean R² per data set.

    python -m benchmarks regression                  # 9 data sets x 10 estimators, 5 seeds
    python -m benchmarks regression --quick          # smoke run: <= 2000 training rows, 2 seeds
    python -m benchmarks regression --datasets concrete boston --estimators rf dt6
    python -m benchmarks regression --report-only    # rebuild regression.md from the json
"""

import json
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import rankdata
from sklearn.ensemble import (
    ExtraTreesRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.tree import DecisionTreeRegressor
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.common import load_average, locked, provenance, write_results
from benchmarks.datasets import train_test
from benchmarks.estimators import public_estimators

DATASETS = [
    "california_housing",
    "cpu_act",
    "cpu_small",
    "fried_delve",
    "puma8nh",
    "puma8nm",
    "abalone",
    "concrete",
    "boston",
]
TEST_SIZE = 0.25
QUICK_MAX_TRAIN = 2000
QUICK_SEEDS = 2
CV_DEPTHS = [*range(2, 13), None]
WARMUP_ROWS = 200

#: key -> (column label, source: an obliquetrees name or a class, keyword arguments)
ESTIMATORS = {
    "co2": ("CO2ForestRegressor(30)", "CO2ForestRegressor", dict(n_estimators=30)),
    "e2edt6": ("E2EDTRegressor(max_depth=6)", "E2EDTRegressor", dict(max_depth=6)),
    "e2edt": ("E2EDTRegressor()", "E2EDTRegressor", {}),
    "rf": ("RandomForestRegressor(30)", RandomForestRegressor, dict(n_estimators=30)),
    "et": ("ExtraTreesRegressor(30)", ExtraTreesRegressor, dict(n_estimators=30)),
    "hgb": ("HistGradientBoostingRegressor()", HistGradientBoostingRegressor, {}),
    "dt6": ("DecisionTreeRegressor(max_depth=6)", DecisionTreeRegressor, dict(max_depth=6)),
    "dtcv": ("DecisionTreeRegressor(max_depth=CV)", "depth-tuned", {}),
    "soft": ("SoftTreeRegressor()", "SoftTreeRegressor", {}),
    "hinge": ("HingeForestRegressor()", "HingeForestRegressor", {}),
}
# every public regressor the table lacks, at its defaults (key: its name in lower case)
ESTIMATORS.update(
    (name.lower(), (f"{name}()", name, {}))
    for name in public_estimators("Regressor")
    if name not in {source for _, source, _ in ESTIMATORS.values()}
)
#: (ours, reference) pairs of the issue's acceptance
ACCEPTANCE = [("co2", "rf"), ("e2edt6", "dt6")]
NOT_AVAILABLE = "not available in this version"
#: environment variables that change thread behaviour, stated in the report
ENVIRONMENT = ["OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS"]


# ------------------------------------------------------------------ estimators
def make_estimator(key, seed, n_jobs):
    """A fresh estimator for ``key``, or None when obliquetrees does not have it."""
    _, source, params = ESTIMATORS[key]
    if source == "depth-tuned":
        return GridSearchCV(
            DecisionTreeRegressor(random_state=seed),
            {"max_depth": CV_DEPTHS},
            scoring="neg_mean_squared_error",
            cv=KFold(5, shuffle=True, random_state=seed),
        )
    cls = getattr(obliquetrees, source, None) if isinstance(source, str) else source
    if cls is None:
        return None
    est = cls(**params)
    names = est.get_params()
    est.set_params(**{k: v for k, v in (("random_state", seed), ("n_jobs", n_jobs)) if k in names})
    return est


def available(key):
    return make_estimator(key, 0, 1) is not None


def describe(key, n_jobs):
    """The estimator's repr with the settings of the run (``random_state`` shown as ``seed``)."""
    est = make_estimator(key, 0, n_jobs)
    if key == "dtcv":
        return (
            f"GridSearchCV(DecisionTreeRegressor(random_state=seed), max_depth in {CV_DEPTHS}, "
            "5-fold shuffled KFold(random_state=seed), neg MSE, refit)"
        )
    text = repr(est).replace("\n", " ")
    return " ".join(text.replace("random_state=0", "random_state=seed").split())


# ------------------------------------------------------------------ data
def split(name, seed, max_train):
    """``X_train, y_train, X_test, y_test``: float64, target standardised by the training part."""
    X_train, y_train, X_test, y_test = train_test(name, test_size=TEST_SIZE, seed=seed)
    if max_train and len(X_train) > max_train:
        keep = np.sort(np.random.default_rng([seed, 1]).choice(len(X_train), max_train, False))
        X_train, y_train = X_train[keep], y_train[keep]
    X_train, X_test = (np.asarray(a, dtype=np.float64) for a in (X_train, X_test))
    mean, sd = y_train.mean(), y_train.std()
    return X_train, (y_train - mean) / sd, X_test, (y_test - mean) / sd


# ------------------------------------------------------------------ measuring
def run_seed(key, seed, data, n_jobs):
    """One fit/predict of estimator ``key`` on one seed's split: a row of figures."""
    X_train, y_train, X_test, y_test = data
    est = make_estimator(key, seed, n_jobs)
    with threadpool_limits(n_jobs):
        start, cpu = time.perf_counter(), time.process_time()
        est.fit(X_train, y_train)
        fit_s, fit_cpu = time.perf_counter() - start, time.process_time() - cpu
        predict_s = []
        for _ in range(3):
            start = time.perf_counter()
            pred = est.predict(X_test)
            predict_s.append(time.perf_counter() - start)
    model = est.best_estimator_ if key == "dtcv" else est
    row = {
        "seed": seed,
        "n_train": len(X_train),
        "n_test": len(X_test),
        "r2": float(r2_score(y_test, pred)),
        "mse": float(mean_squared_error(y_test, pred)),
        "fit_s": fit_s,
        "fit_cpu_s": fit_cpu,
        "predict_s": statistics.median(predict_s),
        "size_bytes": len(pickle.dumps(model)),
    }
    if key == "dtcv":
        row["max_depth"] = est.best_params_["max_depth"]
    if isinstance(getattr(model, "n_iter_", None), int | np.integer):  # epochs / boosting rounds
        row["n_iter_"] = int(model.n_iter_)
    return row


_WARM = set()


def warm_up(key, data, n_jobs):
    """Fit once on a few rows (numba compilation / cache loading); seconds, once per process."""
    if key in _WARM:
        return None
    X_train, y_train, X_test, _ = data
    n = min(WARMUP_ROWS, len(X_train))
    start = time.perf_counter()
    with threadpool_limits(n_jobs):
        make_estimator(key, 0, n_jobs).fit(X_train[:n], y_train[:n]).predict(X_test[:10])
    _WARM.add(key)
    return time.perf_counter() - start


def run_cell(name, key, splits, settings):
    """All seeds of one data set and estimator: the cell to store."""

    def measure(cell):
        cell["warm-up s"] = warm_up(key, splits[0], settings["n_jobs"])
        for seed, data in zip(settings["seeds"], splits, strict=True):
            cell["rows"].append(run_seed(key, seed, data, settings["n_jobs"]))

    return measured_cell(name, key, settings, measure)


def measured_cell(name, key, settings, measure):
    """The cell of data set ``name`` and estimator ``key`` that ``measure(cell)`` fills.

    ``measure`` appends its rows to ``cell["rows"]``; the cell also states
    its error (if ``measure`` raised), seconds, load before and after, and
    provenance.
    """
    load_before, started = load_average(), time.perf_counter()
    cell = {"dataset": name, "estimator": key, "settings": settings, "rows": [], "error": None}
    try:
        measure(cell)
    except Exception as exc:  # noqa: BLE001 - the report says which cell failed and why
        cell["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    cell["seconds"] = time.perf_counter() - started
    cell["load before"], cell["load after"] = load_before, load_average()
    cell["provenance"] = provenance(load=f"{load_before} before, {cell['load after']} after")
    return cell


# ------------------------------------------------------------------ storage
def read_cells(path):
    text = path.read_text() if path.exists() else ""  # empty: just created by the lock
    return json.loads(text).get("cells", {}) if text.strip() else {}


def store_cell(path, cell):
    """Store (replace) one cell, under the file's lock; return all stored cells."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        cells = read_cells(path)
        cells[f"{cell['dataset']}/{cell['estimator']}"] = cell
        data = {"provenance": provenance(), "cells": cells}
        path.write_text(json.dumps(data, indent=1, default=float))
    return cells


def measure_and_store(path, run, name, key, splits, settings):
    """``run(name, key, splits, settings)``'s cell, stored in ``path``: (all cells, the cell)."""
    cell = run(name, key, splits, settings)
    return store_cell(path, cell), cell


def is_done(cell, settings):
    return cell is not None and cell["error"] is None and cell["settings"] == settings


# ------------------------------------------------------------------ report
def _mean_sd(values, fmt="{:.3f}"):
    sd = np.std(values, ddof=1) if len(values) > 1 else 0.0
    return f"{fmt.format(np.mean(values))} ± {fmt.format(sd)}"


def _size(n_bytes):
    return f"{n_bytes / 1024:.0f} KiB" if n_bytes < 1024**2 else f"{n_bytes / 1024**2:.1f} MiB"


def report(cells, path, keys, names):
    """Write the markdown report of the stored cells; return its path and the summary lines."""
    keys = [k for k in ESTIMATORS if k in keys or any(c["estimator"] == k for c in cells.values())]
    names = [n for n in DATASETS if n in names or any(c["dataset"] == n for c in cells.values())]
    ok = {
        (c["dataset"], c["estimator"]): c["rows"]
        for c in cells.values()
        if c["error"] is None and c["rows"]
    }
    failed = {(c["dataset"], c["estimator"]): c["error"] for c in cells.values() if c["error"]}
    absent = {k for k in keys if not available(k)}
    labels = {k: ESTIMATORS[k][0] for k in keys}
    mean_r2 = {cell: float(np.mean([r["r2"] for r in rows])) for cell, rows in ok.items()}

    def grid(value, bold_best=False):
        table = []
        for name in names:
            best = max((mean_r2[(name, k)] for k in keys if (name, k) in ok), default=None)
            row = {"data set": name}
            for k in keys:
                if (name, k) in ok:
                    text = value(ok[(name, k)])
                    if bold_best and mean_r2[(name, k)] == best:
                        text = f"**{text}**"
                elif (name, k) in failed:
                    text = "failed"
                else:
                    text = "n/a" if k in absent else "—"
                row[labels[k]] = text
            table.append(row)
        return table

    # average rank by mean R² (1 = best) over the data sets where the estimator has a result
    ranks = {k: [] for k in keys}
    for name in names:
        done = [k for k in keys if (name, k) in ok]
        for k, r in zip(done, rankdata([-mean_r2[(name, k)] for k in done]), strict=True):
            ranks[k].append(float(r))
    rank_rows = [
        {
            "estimator": labels[k],
            "average rank (1 = best)": f"{np.mean(ranks[k]):.2f}" if ranks[k] else "—",
            "data sets ranked": len(ranks[k]),
            "mean R²": f"{np.mean([mean_r2[(n, k)] for n in names if (n, k) in ok]):.3f}"
            if ranks[k]
            else "—",
        }
        for k in sorted(keys, key=lambda k: np.mean(ranks[k]) if ranks[k] else np.inf)
    ]
    for row in rank_rows:
        if row["data sets ranked"] == 0:
            k = next(k for k in keys if labels[k] == row["estimator"])
            row["average rank (1 = best)"] = NOT_AVAILABLE if k in absent else "not run"

    summary = []
    for ours, ref in ACCEPTANCE:
        if ours not in keys or ref not in keys:
            continue
        if ours in absent:
            summary.append(
                f"- {labels[ours]} vs {labels[ref]}: {ESTIMATORS[ours][1]} {NOT_AVAILABLE}"
            )
            continue
        both = [n for n in names if (n, ours) in ok and (n, ref) in ok]
        wins = [n for n in both if mean_r2[(n, ours)] > mean_r2[(n, ref)]]
        summary.append(
            f"- {labels[ours]} beats {labels[ref]} mean R² on {len(wins)}/{len(both)}"
            + (f" ({', '.join(wins)})" if wins else "")
            + (
                f"; of the {len(names)} data sets, {len(names) - len(both)} lack one of the two"
                if len(both) < len(names)
                else ""
            )
        )

    details = []
    for name in names:
        for k in keys:
            cell = cells.get(f"{name}/{k}")
            if cell is None:
                continue
            rows = cell["rows"]
            details.append(
                {
                    "data set": name,
                    "estimator": labels[k],
                    "seeds": len(rows),
                    "n_train / n_test": f"{rows[0]['n_train']} / {rows[0]['n_test']}"
                    if rows
                    else "",
                    "R² (per seed)": " ".join(f"{r['r2']:.4f}" for r in rows),
                    "MSE (std. target)": _mean_sd([r["mse"] for r in rows], "{:.4f}")
                    if rows
                    else "",
                    "fit s wall / CPU": f"{np.mean([r['fit_s'] for r in rows]):.3g} / "
                    f"{np.mean([r['fit_cpu_s'] for r in rows]):.3g}"
                    if rows
                    else "",
                    "warm-up s": f"{cell['warm-up s']:.2g}" if cell.get("warm-up s") else "",
                    "chosen max_depth / n_iter_": " ".join(
                        str(r.get("max_depth", r.get("n_iter_", ""))) for r in rows
                    ).strip(),
                    "cell s": f"{cell['seconds']:.0f}",
                    "load before / after": f"{cell['load before']} / {cell['load after']}",
                    "revision": cell["provenance"]["revision"],
                    "n_jobs": cell["settings"]["n_jobs"],
                    "error": cell["error"] or "",
                }
            )

    settings = {
        json.dumps({k: v for k, v in c["settings"].items() if k != "estimator"}, sort_keys=True)
        for c in cells.values()
    }
    commands = sorted({c["provenance"]["command"] for c in cells.values()})
    subsampled = sorted({c["settings"]["max_train"] for c in cells.values()} - {None})
    seeds = sorted({len(c["settings"]["seeds"]) for c in cells.values()})
    n_jobs = sorted({c["settings"]["n_jobs"] for c in cells.values()})
    total = sum(c["seconds"] for c in cells.values())
    warning = (
        f"**Training parts subsampled to <= {'/'.join(map(str, subsampled))} rows (`--quick` / "
        "`--max-train`): a smoke run, not results.**"
        if subsampled
        else ""
    )
    jobs = n_jobs[0] if n_jobs else 1
    listing = "\n".join(
        f"- {labels[k]}: " + (NOT_AVAILABLE if k in absent else f"`{describe(k, jobs)}`")
        for k in keys
    )
    env = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in ENVIRONMENT)
    measured_by = "; ".join(f"`{c}`" for c in commands) or "—"
    if len(settings) > 1:
        measured_by += " (with different settings: see the details table)"
    notes = f"""
{warning}

Protocol: test R² over {"/".join(map(str, seeds))} seeds (mean ± sd, sd with ddof=1). abalone uses
its fixed UCI split (3133/1044) for every seed (the seeds vary only `random_state`); the other sets
a seeded {1 - TEST_SIZE:.0%}/{TEST_SIZE:.0%} train/test split per seed. Target standardised with
the training part's mean/sd (MSE below is on that scale); features as given (obliquetrees'
estimators standardise internally). `random_state=seed`; n_jobs = {"/".join(map(str, n_jobs))}
for every estimator with that parameter, and every fit under `threadpool_limits(n_jobs)` (BLAS,
OpenMP). Fit time: wall (`perf_counter`) and CPU (`process_time`, all threads) of `fit`, after
one warm-up fit per estimator and process on {WARMUP_ROWS} rows (numba compilation or cache
loading; its time is in the details table). The depth-tuned tree's fit time includes its 5-fold
search. Predict: median of 3 wall times on the test part. Size: `len(pickle.dumps(model))`
(the tuned tree: its refitted `best_estimator_`). The details table gives per seed the depth the
CV chose, or `n_iter_` (epochs, boosting rounds) where the model has it. Environment: {env}.
Times need a machine to themselves: HistGradientBoosting's OpenMP threads in particular slow down
many times over when another process holds a core (smoke runs beside other jobs: 0.3 s -> 8.6 s
for one 2000-row fit, CPU time rising with it); check the per-cell load in the details table.

Estimators (`random_state=seed` stands for each seed):

{listing}

"n/a" = {NOT_AVAILABLE} (looked up by name in obliquetrees {obliquetrees.__version__}); "—" = not
run yet. Cells were measured by: {measured_by}; the per-cell revision, load average (1, 5, 15
min) before/after and seconds are in the details table. Total measuring time of the stored cells
{total / 60:.1f} min. Raw per-seed rows: `{path.with_suffix(".json").name}`.

Acceptance (mean R² per data set, from the R² table; "beats" = strictly higher mean):

{chr(10).join(summary) or "- neither pair was run"}
"""
    tables = [
        (
            "Test R² (mean ± sd over seeds; best per data set in bold)",
            grid(lambda rows: _mean_sd([r["r2"] for r in rows]), bold_best=True),
        ),
        ("Average rank by mean R²", rank_rows),
        (
            "Fit time, s (mean over seeds; wall / CPU)",
            grid(
                lambda rows: (
                    f"{np.mean([r['fit_s'] for r in rows]):.3g} / "
                    f"{np.mean([r['fit_cpu_s'] for r in rows]):.3g}"
                )
            ),
        ),
        (
            "Predict time on the test part, s (mean over seeds)",
            grid(lambda rows: f"{np.mean([r['predict_s'] for r in rows]):.3g}"),
        ),
        (
            "Model size, len(pickle.dumps(model)) (mean over seeds)",
            grid(lambda rows: _size(np.mean([r["size_bytes"] for r in rows]))),
        ),
        ("Details per cell", details),
    ]
    tables = [(h, rows) for h, rows in tables if rows]
    title = "Regression: oblique and scikit-learn regressors on nine data sets"
    return write_results(
        path, title + (" (subsampled smoke run)" if subsampled else ""), tables, notes
    ), summary


# ------------------------------------------------------------------ runner
def add_arguments(parser):
    """The arguments of ``python -m benchmarks regression``."""
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=DATASETS,
        choices=DATASETS,
        metavar="NAME",
        help="default: all nine (" + ", ".join(DATASETS) + ")",
    )
    parser.add_argument(
        "--estimators",
        nargs="+",
        default=list(ESTIMATORS),
        choices=list(ESTIMATORS),
        metavar="KEY",
        help="default: all (" + ", ".join(f"{k} = {v[0]}" for k, v in ESTIMATORS.items()) + ")",
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument(
        "--n-jobs",
        type=int,
        default=2,
        help="n_jobs of every estimator that has it and the BLAS/OpenMP thread limit "
        "(default 2, the benchmark machine's cores, as the e2edt and missing benchmarks)",
    )
    parser.add_argument(
        "--max-train", type=int, default=None, help="subsample training parts to this many rows"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: <= {QUICK_MAX_TRAIN} training rows, {QUICK_SEEDS} seeds; "
        "written to the temp directory",
    )
    parser.add_argument("--fresh", action="store_true", help="re-measure cells already stored")
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild the markdown from the json only"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="markdown file, the json beside it (default results/regression.md; "
        "--quick: <temp>/obliquetrees-bench/regression.md)",
    )


def main(args):
    if args.out:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.gettempdir(), "obliquetrees-bench", "regression.md")
    else:
        out = Path("regression.md")
    out = out if out.is_absolute() else Path(__file__).resolve().parent / "results" / out
    store = out.with_suffix(".json")
    seeds = list(range(QUICK_SEEDS if args.quick else args.seeds))
    max_train = QUICK_MAX_TRAIN if args.quick else args.max_train
    keys = list(dict.fromkeys(args.estimators))
    names = list(dict.fromkeys(args.datasets))
    if args.report_only:
        cells = read_cells(store)
        if not cells:
            raise SystemExit(f"no stored cells in {store}: nothing to report")
        print(report(cells, out, keys, names)[0])
        return
    if args.fresh:
        print("--fresh: re-measuring the requested cells even where stored", flush=True)
    print(f"load average at start {load_average()}", flush=True)
    for name in names:
        splits = None
        for key in keys:
            if not available(key):
                print(f"{name} {ESTIMATORS[key][0]}: {NOT_AVAILABLE}", flush=True)
                continue
            settings = {
                "seeds": seeds,
                "max_train": max_train,
                "n_jobs": args.n_jobs,
                "estimator": describe(key, args.n_jobs),
            }
            if not args.fresh and is_done(read_cells(store).get(f"{name}/{key}"), settings):
                print(f"{name} {ESTIMATORS[key][0]}: stored, skipped", flush=True)
                continue
            splits = splits or [split(name, seed, max_train) for seed in seeds]
            cells, cell = measure_and_store(store, run_cell, name, key, splits, settings)
            r2 = " ".join(f"{r['r2']:.4f}" for r in cell["rows"])
            fit = np.mean([r["fit_s"] for r in cell["rows"]]) if cell["rows"] else float("nan")
            print(
                f"{name} {ESTIMATORS[key][0]}: R² {r2} fit {fit:.3g} s (mean), cell "
                f"{cell['seconds']:.1f} s {cell['error'] or ''}",
                flush=True,
            )
            report(cells, out, keys, names)
    path, summary = report(read_cells(store), out, keys, names)
    print(f"load average at end {load_average()}")
    print("\n".join(summary))
    print(f"wrote {path} and {store}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("regression")
