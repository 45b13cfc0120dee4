"""Suite: every shared data set, every public estimator at its defaults, beside scikit-learn.

Issue 22's yardstick. Every ``.npz`` of the shared data directory
(classification and regression). Sets with a fixed train/test split keep it
and vary the estimators' ``random_state`` (0-4); the others get 5 seeded
75/25 splits (split seed = ``random_state``). Scores: test accuracy
(classification) or R² (regression). Estimators: each public obliquetrees
estimator with its defaults, forests at 30 and 100 trees, beside
RandomForest and ExtraTrees (30 and 100 trees), HistGradientBoosting and a
single CART tree (DecisionTree, for the single-tree estimators; and
treeple's ObliqueRandomForest when installed); every one with
``n_jobs=2`` where it has the parameter.

Each (data set, estimator) pair runs in its own process (all its splits in
turn, after one unrecorded warm-up fit and score on at most 200 of run 0's
training rows that loads the kernels), so a crash or a fit beyond
``--timeout`` loses that pair only; cells
(data set, estimator, split) are stored in ``results/suite.json`` as each
pair finishes, with the CPU model, revision and load, and a rerun skips the
cells already stored: the suite is resumable per data set and estimator.
``suite.md`` and ``suite.png`` are rebuilt from all stored cells after every
pair (``--report`` rebuilds them without fitting).

Reading: per data set, mean ± sd over the 5 runs, fit and predict seconds
(wall, ``n_jobs=2``), fit CPU seconds (the child's ``time.process_time``:
every thread of the process; every estimator here runs its ``n_jobs`` as
threads) and the pickled size. Against each peer, an estimator
wins a data set when its runs beat the peer's on average by more than one sd
of the per-run differences (paired: run r of both used the same split and
seed), loses when they fall short by more than that, else ties. The
unpaired count beside it (a difference of means within the larger of the
two sds is a tie) leaves the split-to-split variation in and ties more.
Average rank: per data set, estimators ranked by mean score (1 = best, ties
share), averaged over the data sets every ranked estimator finished.

``--protocol validation`` scores on a 75/25 split of the *training* part
instead (``suite_validation.json``; the test part is never read): the data
for choosing defaults.

    python -m benchmarks suite                          # everything (hours; resumable)
    python -m benchmarks suite --data iris wdbc         # some data sets
    python -m benchmarks suite --report                 # rebuild suite.md / suite.png
    python -m benchmarks suite --rerun                  # everything again, in one run
"""

import functools
import json
import os
import subprocess
import time

import numpy as np

from benchmarks.common import (
    cpu_model,
    read_runs,
    results_path,
    revision,
    run_python,
    write_results,
)
from benchmarks.datasets import DATA_DIR, PACKAGE_SETS, load, package_sets
from benchmarks.estimators import every_estimator_labelled

N_RUNS = 5
TEST_SIZE = 0.25

#: label -> (dotted class, keyword arguments), per task; a public estimator not listed is
#: added at its defaults (``every_estimator_labelled``)
CLASSIFIERS = every_estimator_labelled(
    {
        "CO2(30)": ("obliquetrees.CO2ForestClassifier", dict(n_estimators=30)),
        "CO2(100)": ("obliquetrees.CO2ForestClassifier", dict(n_estimators=100)),
        "Hinge(30)": ("obliquetrees.HingeForestClassifier", dict(n_estimators=30)),
        "Hinge()": ("obliquetrees.HingeForestClassifier", dict()),
        "E2EDT()": ("obliquetrees.E2EDTClassifier", dict()),
        "SoftTree()": ("obliquetrees.SoftTreeClassifier", dict()),
        "RF(30)": ("sklearn.ensemble.RandomForestClassifier", dict(n_estimators=30)),
        "RF(100)": ("sklearn.ensemble.RandomForestClassifier", dict(n_estimators=100)),
        "ET(30)": ("sklearn.ensemble.ExtraTreesClassifier", dict(n_estimators=30)),
        "ET(100)": ("sklearn.ensemble.ExtraTreesClassifier", dict(n_estimators=100)),
        "HGB()": ("sklearn.ensemble.HistGradientBoostingClassifier", dict()),
        "DT()": ("sklearn.tree.DecisionTreeClassifier", dict()),
        "treeple ORF(100)": ("treeple.ObliqueRandomForestClassifier", dict(n_estimators=100)),
    },
    "Classifier",
)
REGRESSORS = every_estimator_labelled(
    {
        "CO2(30)": ("obliquetrees.CO2ForestRegressor", dict(n_estimators=30)),
        "CO2(100)": ("obliquetrees.CO2ForestRegressor", dict(n_estimators=100)),
        "Hinge(30)": ("obliquetrees.HingeForestRegressor", dict(n_estimators=30)),
        "Hinge()": ("obliquetrees.HingeForestRegressor", dict()),
        "E2EDT()": ("obliquetrees.E2EDTRegressor", dict()),
        "SoftTree()": ("obliquetrees.SoftTreeRegressor", dict()),
        "RF(30)": ("sklearn.ensemble.RandomForestRegressor", dict(n_estimators=30)),
        "RF(100)": ("sklearn.ensemble.RandomForestRegressor", dict(n_estimators=100)),
        "ET(30)": ("sklearn.ensemble.ExtraTreesRegressor", dict(n_estimators=30)),
        "ET(100)": ("sklearn.ensemble.ExtraTreesRegressor", dict(n_estimators=100)),
        "HGB()": ("sklearn.ensemble.HistGradientBoostingRegressor", dict()),
        "DT()": ("sklearn.tree.DecisionTreeRegressor", dict()),
        "treeple ORF(100)": ("treeple.ObliqueRandomForestRegressor", dict(n_estimators=100)),
    },
    "Regressor",
)
_LABELS = {label: spec[0] for table in (CLASSIFIERS, REGRESSORS) for label, spec in table.items()}
OURS = [label for label, dotted in _LABELS.items() if dotted.startswith("obliquetrees.")]
PEERS = [label for label in _LABELS if label not in OURS]
REFERENCE = "RF(30)"
#: The forest whose fit CPU time the cost table divides by (issue 39's yardstick).
COST_FIT_PEER = "ET(100)"

#: One (data set, estimator) pair, all runs; prints one json line per run.
CHILD = """
import importlib, json, pickle, sys, time
import numpy as np
from benchmarks.bench_suite import make_estimator, run_data, warm_up
data, dotted, params, protocol, runs = sys.argv[1:6]
module, name = dotted.rsplit(".", 1)
cls = getattr(importlib.import_module(module), name)
params = json.loads(params)
runs = json.loads(runs)
warm_up_s = warm_up(cls, params, *run_data(data, runs[0], protocol))
for run in runs:
    X, y, X_test, y_test = run_data(data, run, protocol)
    model = make_estimator(cls, params, run)
    start, start_cpu = time.perf_counter(), time.process_time()
    model.fit(X, y)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    start = time.perf_counter()
    score = model.score(X_test, y_test)
    predict_s = time.perf_counter() - start
    print(json.dumps({"run": run, "score": float(score), "fit s": fit_s, "fit CPU s": fit_cpu_s,
                      "predict s": predict_s, "size MB": len(pickle.dumps(model)) / 2**20,
                      "warm-up s": warm_up_s}),
          flush=True)
"""


def make_estimator(cls, params, seed):
    """``cls(**params)`` with ``random_state=seed`` and ``n_jobs=2`` where it takes them."""
    accepted = cls().get_params()
    extra = {k: v for k, v in (("random_state", seed), ("n_jobs", 2)) if k in accepted}
    return cls(**{**params, **extra})


#: Training rows of the child's unrecorded warm-up fit, at most.
WARM_UP_ROWS = 200


def warm_up_rows(y, n_rows=WARM_UP_ROWS, seed=0):
    """Indices of at most ``n_rows`` rows of ``y``, sorted; one of each class among them.

    A target with more than ``n_rows // 2`` distinct values (regression) gets
    random rows only. Every class is present so that the warm-up fit runs the
    kernels the timed fits run (binary or multiclass).
    """
    first = np.unique(y, return_index=True)[1]
    if len(first) > n_rows // 2:
        first = first[:0]
    rest = np.setdiff1d(np.arange(len(y)), first)
    extra = np.random.default_rng(seed).choice(
        rest, size=min(n_rows - len(first), len(rest)), replace=False
    )
    return np.sort(np.concatenate([first, extra]))


def warm_up(cls, params, X, y, X_test, y_test):
    """Fit and score ``cls(**params)`` once on a few rows, unrecorded.

    The first fit of a process loads (or compiles) the numba kernels, and
    the first score the prediction kernels: the suite times the fits after
    it. (The median over the runs already hid most of that: only run 0 was
    cold.) Returns the wall seconds, or the error's text if the warm-up
    failed: the timed runs go on either way, so the pair is not lost to it.
    """
    start = time.perf_counter()
    rows = warm_up_rows(y)
    try:
        make_estimator(cls, params, 0).fit(X[rows], y[rows]).score(X_test[:50], y_test[:50])
    except Exception as exc:  # noqa: BLE001 - recorded in the cells, the runs go on
        return f"{type(exc).__name__}: {exc}"
    return time.perf_counter() - start


def data_sets():
    """Every data set of the shared data directory and of the installed packages, sorted."""
    return sorted([path.stem for path in DATA_DIR.glob("*.npz")] + package_sets())


@functools.cache
def task_of(name):
    """``"classification"`` or ``"regression"``, as the data directory's MANIFEST.md states."""
    if name in PACKAGE_SETS:
        return PACKAGE_SETS[name][0]
    for line in (DATA_DIR / "MANIFEST.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 3 and cells[1] == name and cells[2] in ("classification", "regression"):
            return cells[2]
    raise ValueError(f"{name!r} has no task in {DATA_DIR / 'MANIFEST.md'}")


def run_data(name, run, protocol="test"):
    """``X_train, y_train, X_eval, y_eval`` of run ``run`` of a data set.

    Test protocol: the fixed split (every run) or the seeded 75/25 split
    number ``run``. Validation protocol: that training part split 75/25
    again (seed ``run``); the test part is not returned.
    """
    data = load(name)
    if "X_train" in data:
        X, y, X_test, y_test = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    else:
        X, y, X_test, y_test = _split(data["X"], data["y"], run)
    if protocol == "validation":
        X, y, X_test, y_test = _split(X, y, 1000 + run)
    as_float = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    return as_float(X), y, as_float(X_test), y_test


def _split(X, y, seed):
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = int(round(TEST_SIZE * len(X)))
    return X[order[n_test:]], y[order[n_test:]], X[order[:n_test]], y[order[:n_test]]


def estimators(task):
    """The label -> (class, parameters) table of a task, installed packages only."""
    import importlib.util

    table = CLASSIFIERS if task == "classification" else REGRESSORS
    return {
        label: spec
        for label, spec in table.items()
        if importlib.util.find_spec(spec[0].split(".")[0]) is not None
    }


def run_pair(data, label, spec, protocol, runs, timeout):
    """Run the missing ``runs`` of one pair in a child; its cells (and a status)."""
    load_before = os.getloadavg()[0]
    args = [data, spec[0], json.dumps(spec[1]), protocol, json.dumps(runs)]
    try:
        done = run_python(CHILD, *args, timeout=timeout)
        out, status = done.stdout, "ok" if done.returncode == 0 else "failed"
        error = done.stderr.strip().splitlines()[-1:] if done.returncode else []
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        status, error = "timeout", [f"over {timeout:.0f} s"]
    common = {
        "data": data,
        "estimator": label,
        "CPU": cpu_model(),
        "revision": revision(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": [load_before, os.getloadavg()[0]],
    }
    cells = [{**common, **json.loads(line)} for line in out.splitlines() if line.startswith("{")]
    if status != "ok":
        finished = {c["run"] for c in cells}
        cells += [
            {**common, "run": r, "status": status, "error": error}
            for r in runs
            if r not in finished
        ]
    return cells


def run_missing(cells, path, data, label, spec, protocol, timeout, tags=None, rerun=False):
    """Run the runs of one pair that ``cells`` has no score for; store and return the cells.

    ``rerun``: run all of the pair's runs, whatever is stored; the new
    cells replace the stored ones when the pair finishes.

    The pair is the cells of ``data`` and ``label`` carrying ``tags`` (extra
    keys, e.g. a candidate family); its new cells get the tags, replace its
    unfinished ones and the whole list is written to ``path`` at once, which
    is what makes a run resumable. Returns ``(cells, new)``.
    """
    tags = tags or {}

    def of_pair(c):
        return (c["data"], c["estimator"]) == (data, label) and all(
            c.get(k) == v for k, v in tags.items()
        )

    done = set() if rerun else {c["run"] for c in cells if of_pair(c) and "score" in c}
    runs = [r for r in range(N_RUNS) if r not in done]
    if not runs:
        return cells, []
    new = [{**c, **tags} for c in run_pair(data, label, spec, protocol, runs, timeout)]
    cells = [c for c in cells if not (of_pair(c) and c["run"] in runs)] + new
    path.write_text(json.dumps(cells, indent=1, default=float))
    return cells, new


# ---------------------------------------------------------------- report
def summarize(cells):
    """Per (data set, estimator): mean, sd, times, size, runs, status."""
    table = {}
    for cell in cells:
        table.setdefault((cell["data"], cell["estimator"]), []).append(cell)
    summary = {}
    for key, group in table.items():
        ok = [c for c in group if "score" in c]
        failed = [c.get("status") for c in group if "score" not in c]
        if len(ok) < N_RUNS:
            summary[key] = {"status": failed[0] if failed else f"{len(ok)}/{N_RUNS} runs"}
            continue
        scores = np.array([c["score"] for c in ok])
        summary[key] = {
            "status": "ok",
            "scores": {c["run"]: c["score"] for c in ok},
            "mean": float(scores.mean()),
            "sd": float(scores.std(ddof=1)),
            "fit s": float(np.median([c["fit s"] for c in ok])),
            # cells from before the suite timed CPU have none
            "fit CPU s": float(np.median([c["fit CPU s"] for c in ok]))
            if all("fit CPU s" in c for c in ok)
            else "",
            "predict s": float(np.median([c["predict s"] for c in ok])),
            "size MB": float(np.median([c["size MB"] for c in ok])),
        }
    return summary


def compare(a, b):
    """+1 win, 0 tie, -1 loss of summary ``a`` against ``b``.

    Paired: run ``r`` of both used the same split (and seed), so the
    comparison is on the per-run differences ``a_r - b_r``; a tie is a mean
    difference within one standard deviation of those differences. The
    split-to-split variation that both estimators share (most of the sd of
    each one's scores on the small sets) cancels in the difference, which
    the unpaired reading (:func:`compare_unpaired`) leaves in.
    """
    diff = np.array([a["scores"][r] - b["scores"][r] for r in sorted(a["scores"])])
    margin = diff.std(ddof=1)
    return 0 if abs(diff.mean()) <= margin else (1 if diff.mean() > 0 else -1)


def compare_unpaired(a, b):
    """As :func:`compare`, unpaired: a tie is a difference of the means within the larger sd."""
    margin = max(a["sd"], b["sd"])
    diff = a["mean"] - b["mean"]
    return 0 if abs(diff) <= margin else (1 if diff > 0 else -1)


def ranks(summary, names, labels):
    """Average rank of each label over the data sets where all of them finished."""
    per_data = []
    for data in names:
        means = [summary.get((data, label), {}).get("mean") for label in labels]
        if any(m is None for m in means):
            continue
        order = -np.array(means)
        # 1 = best; equal means share the average of their ranks
        rank = np.array([(order < v).sum() + ((order == v).sum() + 1) / 2 for v in order])
        per_data.append(rank)
    if not per_data:
        return {}, 0
    return dict(zip(labels, np.mean(per_data, axis=0), strict=True)), len(per_data)


def report(cells, protocol):
    """Rewrite the markdown (and, for the test protocol, the figure) from all cells."""
    summary = summarize(cells)
    names = sorted({c["data"] for c in cells})
    tables = []
    records = []
    for task in ("classification", "regression"):
        task_names = [d for d in names if task_of(d) == task]
        labels = [
            label for label in estimators(task) if any((d, label) in summary for d in task_names)
        ]
        if not task_names:
            continue
        rows = []
        for data in task_names:
            row = {"data set": data}
            for label in labels:
                s = summary.get((data, label))
                if s is None:
                    row[label] = ""
                elif s["status"] != "ok":
                    row[label] = s["status"]
                else:
                    row[label] = f"{s['mean']:.4f} ± {s['sd']:.4f}"
            rows.append(row)
        tables.append((f"{task}: mean ± sd of the score over {N_RUNS} runs", rows))
        cost_rows = []
        for data in task_names:
            for label in labels:
                s = summary.get((data, label), {})
                if s.get("status") == "ok":
                    cost_rows.append(
                        {
                            "data set": data,
                            "estimator": label,
                            "fit s": s["fit s"],
                            "fit CPU s": s["fit CPU s"],
                            "predict s": s["predict s"],
                            "size MB": s["size MB"],
                        }
                    )
        tables.append(
            (f"{task}: median fit and predict seconds, fit CPU seconds, pickled size", cost_rows)
        )
        tables.append(
            (
                f"{task}: cost against the forests, the per-set ratio of medians "
                f"(median over data sets, least-most); fit CPU against {COST_FIT_PEER}, "
                f"predict time against {REFERENCE}",
                _cost_ratios(summary, task_names, labels),
            )
        )
        wtl = []
        for ours in [label for label in labels if label in OURS]:
            row = {"estimator": ours}
            for peer in [label for label in labels if label in PEERS]:
                counts, unpaired = [0, 0, 0], [0, 0, 0]
                for data in task_names:
                    a, b = summary.get((data, ours)), summary.get((data, peer))
                    if a and b and a["status"] == b["status"] == "ok":
                        counts[1 - compare(a, b)] += 1
                        unpaired[1 - compare_unpaired(a, b)] += 1
                row[f"vs {peer}: W/T/L (unpaired)"] = (
                    "/".join(map(str, counts)) + f" ({'/'.join(map(str, unpaired))})"
                )
            wtl.append(row)
        tables.append((f"{task}: wins / ties / losses against each peer", wtl))
        mean_rank, n_ranked = ranks(summary, task_names, labels)
        if mean_rank:
            tables.append(
                (
                    f"{task}: average rank over the {n_ranked} data sets every estimator finished",
                    [
                        {"estimator": k, "average rank": v}
                        for k, v in sorted(mean_rank.items(), key=lambda kv: kv[1])
                    ],
                )
            )
        best_rows = []
        for data in task_names:
            ref = summary.get((data, REFERENCE))
            best = _best(summary, data, OURS)
            if not ref or ref["status"] != "ok" or best is None:
                continue
            mine = summary[(data, best)]
            verdict = {1: "win", 0: "tie", -1: "loss"}[compare(mine, ref)]
            row = {
                "data set": data,
                "best obliquetrees": best,
                "its mean": mine["mean"],
                f"{REFERENCE} mean": ref["mean"],
                "verdict": verdict,
            }
            # the yardstick of the verdict: scikit-learn's own best, chosen the same way
            peer = _best(summary, data, [k for k in PEERS if k != REFERENCE])
            if peer is not None:
                row["best other scikit-learn"] = peer
                row["its verdict"] = {1: "win", 0: "tie", -1: "loss"}[
                    compare(summary[(data, peer)], ref)
                ]
            best_rows.append(row)
            records.append((task, data, best, mine["mean"] - ref["mean"], verdict))
        tables.append(
            (
                f"{task}: per data set, the best obliquetrees estimator against the best "
                "scikit-learn one (both chosen on these test means; verdict paired)",
                _best_of_each(summary, task_names, labels),
            )
        )
        if best_rows:
            count = {v: sum(r["verdict"] == v for r in best_rows) for v in ("win", "tie", "loss")}
            higher = sum(r["its mean"] > r[f"{REFERENCE} mean"] for r in best_rows)
            peers = [r["its verdict"] for r in best_rows if "its verdict" in r]
            tables.append(
                (
                    f"{task}: the best obliquetrees estimator per data set (chosen on these test "
                    f"means) against {REFERENCE}: {count['win']} wins, {count['tie']} ties, "
                    f"{count['loss']} losses of {len(best_rows)}; mean higher on {higher}. "
                    f"The best other scikit-learn estimator, chosen the same way: "
                    f"{peers.count('win')} wins, {peers.count('tie')} ties, "
                    f"{peers.count('loss')} losses of {len(peers)}",
                    best_rows,
                )
            )
    cpus = sorted({c["CPU"] for c in cells})
    revisions = sorted({c["revision"] for c in cells})
    loads = [x for c in cells for x in c["load"]]
    timed = [c for c in cells if "fit s" in c]
    notes = (
        __doc__.split("\n\n", 1)[1].split("\n\n    python")[0]
        + f"\n\nCells: {len(cells)}; CPU {', '.join(cpus)}; revisions {', '.join(revisions)}; "
        f"1-minute load average at the pairs' starts and ends {min(loads):.1f}-{max(loads):.1f}. "
        f"Timed after the child's warm-up fit: {sum('warm-up s' in c for c in timed)} of the "
        f"{len(timed)} cells with times (the others' run 0 includes loading the kernels). "
        "Data sets or estimators missing from a table were not run yet."
    )
    tables = [(heading, rows) for heading, rows in tables if rows]
    name = "suite" if protocol == "test" else "suite_validation"
    write_results(
        f"{name}.md",
        f"Suite ({protocol} protocol)",
        tables,
        notes,
        command=f"python -m benchmarks suite --protocol {protocol}",
    )
    if protocol == "test" and records:
        _figure(records)


def per_set_ratios(summary, names, label, other, key):
    """Per data set of ``names`` where both ran: ``label``'s median ``key`` over ``other``'s.

    Sets where either has no such median (cells from before the suite timed
    the fit CPU hold ``""``) are left out.
    """
    ratios = []
    for data in names:
        a, b = summary.get((data, label), {}), summary.get((data, other), {})
        if a.get("status") == b.get("status") == "ok" and "" not in (a[key], b[key]):
            ratios.append(a[key] / b[key])
    return ratios


def _cost_ratios(summary, names, labels):
    """Each of our estimators' fit CPU against :data:`COST_FIT_PEER`'s and predict time
    against :data:`REFERENCE`'s: the per-set ratio of medians, summarised over data sets.

    A pair's cells may come from different invocations (the revisions are in the
    notes); issue 39's cost acceptance reads the CO2(30) row of one invocation.
    """
    rows = []
    for ours in [label for label in labels if label in OURS]:
        row = {"estimator": ours}
        for column, peer, key in (
            (f"fit CPU / {COST_FIT_PEER}", COST_FIT_PEER, "fit CPU s"),
            (f"predict / {REFERENCE}", REFERENCE, "predict s"),
        ):
            ratios = per_set_ratios(summary, names, ours, peer, key)
            row[column] = (
                f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}; {len(ratios)} sets)"
                if ratios
                else ""
            )
        rows.append(row)
    return rows


def _best_of_each(summary, names, labels):
    """Rows: data set shape, best of ours, best peer, who wins (paired)."""
    rows = []
    for data in names:
        a = _best(summary, data, [k for k in labels if k in OURS])
        b = _best(summary, data, [k for k in labels if k in PEERS])
        if a is None or b is None:
            continue
        done = {a: summary[(data, a)], b: summary[(data, b)]}
        n_rows, n_features = _shape(data)
        verdict = {1: "obliquetrees", 0: "tie", -1: "scikit-learn"}[compare(done[a], done[b])]
        rows.append(
            {
                "data set": data,
                "training rows": n_rows,
                "features": n_features,
                "best obliquetrees": f"{a} {done[a]['mean']:.4f}",
                "best scikit-learn": f"{b} {done[b]['mean']:.4f}",
                "better": verdict,
            }
        )
    return rows


def _best(summary, data, labels):
    """The label of highest mean score among ``labels`` that finished on ``data``, or None."""
    done = [k for k in labels if summary.get((data, k), {}).get("status") == "ok"]
    return max(done, key=lambda k: summary[(data, k)]["mean"]) if done else None


@functools.cache
def _shape(name):
    """Rows of a run's training part and number of features."""
    X = run_data(name, 0)[0]
    return X.shape


def _figure(records):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = sorted(records, key=lambda r: (r[0], r[3]))
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(records) + 1.2))
    colours = {"win": "tab:green", "tie": "tab:grey", "loss": "tab:red"}
    ax.barh(
        [f"{data} ({task[:5]}.)" for task, data, *_ in records],
        [diff for *_, diff, _ in records],
        color=[colours[v] for *_, v in records],
    )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"best obliquetrees estimator minus {REFERENCE} (mean test score)")
    ax.set_title(
        "Suite: green = win, grey = tie, red = loss\n"
        "(paired: within one sd of the per-run differences is a tie)"
    )
    fig.tight_layout()
    write_results("suite.png", figure=fig, command="python -m benchmarks suite --report")
    plt.close(fig)


# ---------------------------------------------------------------- runner
def add_arguments(parser):
    """The arguments of ``python -m benchmarks suite``."""
    parser.add_argument("--data", nargs="+", help="data sets (default: all)")
    parser.add_argument("--estimators", nargs="+", help="labels (default: all)")
    parser.add_argument("--protocol", choices=["test", "validation"], default="test")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per pair")
    parser.add_argument("--report", action="store_true", help="only rebuild the report")
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="run the selected pairs again, replacing their stored cells pair by pair",
    )


def main(args):
    path = results_path("suite.json" if args.protocol == "test" else "suite_validation.json")
    cells = read_runs(path)
    names = args.data or data_sets()
    if not args.report:
        for data in names:
            for label, spec in estimators(task_of(data)).items():
                if args.estimators and label not in args.estimators:
                    continue
                pair = (data, label, spec, args.protocol, args.timeout)
                cells, new = run_missing(cells, path, *pair, rerun=args.rerun)
                if not new:
                    continue
                print(
                    data, label, [round(c.get("score", float("nan")), 4) for c in new], flush=True
                )
                report(cells, args.protocol)
    if cells:
        report(cells, args.protocol)
