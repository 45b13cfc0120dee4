"""Fit CPU and predict time of CO2(30) against ExtraTrees(100) and RandomForest(30), per suite set.

Issue 39's cost acceptance: CO2ForestClassifier(n_estimators=30) at its
defaults fits in at most 2x the CPU time of ExtraTreesClassifier(100) and
predicts in at most 2x RandomForestClassifier(30)'s time on the median
suite set. The suite records wall times of cells run hours apart, at
different loads; here the three estimators run in turn on the same split in
one process (``n_jobs=2``, as in the suite), after one unrecorded fit and
predict of each (kernels loaded, caches warm), for ``--rounds`` rounds.
Fit time is the process's CPU time (``time.process_time``: every thread),
which another process on the machine inflates far less than wall time;
predict time is the wall time of ``predict`` on the test part (the suite's
``predict s``). Each figure is the median over rounds; the ratios are of
those medians, per data set, and the median over data sets is the
acceptance's figure.

    python -m benchmarks cost                     # every classification set but fashion_mnist
    python -m benchmarks cost --data letter magic --rounds 5
"""

import importlib
import os
import time

import numpy as np

from benchmarks.bench_suite import CLASSIFIERS, data_sets, run_data, task_of
from benchmarks.common import write_results

LABELS = ("CO2(30)", "ET(100)", "RF(30)")
#: Left out of the default list: 60,000 rows x 784 pixels, hours for the suite's CO2 cells.
SKIPPED = ("fashion_mnist",)


def _model(label, seed):
    dotted, params = CLASSIFIERS[label]
    module, name = dotted.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return cls(**params, random_state=seed, n_jobs=2)


def _times(label, X, y, X_test, seed):
    """``(fit CPU s, predict wall s)`` of one fit and predict."""
    model = _model(label, seed)
    cpu = time.process_time()
    model.fit(X, y)
    fit_cpu = time.process_time() - cpu
    wall = time.perf_counter()
    model.predict(X_test)
    return fit_cpu, time.perf_counter() - wall


def measure(name, rounds):
    """Median fit CPU and predict wall seconds of every label on run 0 of data set ``name``."""
    X, y, X_test, _ = run_data(name, 0)
    for label in LABELS:  # warm-up: kernels loaded, nothing recorded
        _times(label, X, y, X_test, 0)
    times = {label: [] for label in LABELS}
    for r in range(rounds):
        for label in LABELS:
            times[label].append(_times(label, X, y, X_test, r))
    fit = {label: float(np.median([t[0] for t in times[label]])) for label in LABELS}
    predict = {label: float(np.median([t[1] for t in times[label]])) for label in LABELS}
    return {
        "data": name,
        "rows": X.shape[0],
        "features": X.shape[1],
        **{f"{label} fit CPU s": fit[label] for label in LABELS},
        **{f"{label} predict s": predict[label] for label in LABELS},
        "fit CPU CO2(30) / ET(100)": fit["CO2(30)"] / fit["ET(100)"],
        "predict CO2(30) / RF(30)": predict["CO2(30)"] / predict["RF(30)"],
    }


def add_arguments(parser):
    """The arguments of ``python -m benchmarks cost``."""
    parser.add_argument("--data", nargs="+", help="data sets (default: classification sets)")
    parser.add_argument("--rounds", type=int, default=3, help="recorded rounds per data set")


def main(args):
    names = args.data or [
        d for d in data_sets() if task_of(d) == "classification" and d not in SKIPPED
    ]
    rows, loads = [], []
    for name in names:
        loads.append(os.getloadavg()[0])
        rows.append(measure(name, args.rounds))
        loads.append(os.getloadavg()[0])
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()})
    ratios = ("fit CPU CO2(30) / ET(100)", "predict CO2(30) / RF(30)")
    median = {"data": f"median over {len(rows)} data sets"}
    median |= {key: float(np.median([row[key] for row in rows])) for key in ratios}
    notes = (
        __doc__.split("\n\n", 1)[1].split("\n\n    python")[0]
        + f"\n\n{args.rounds} recorded rounds per data set (run 0's split of the suite's test "
        f"protocol); 1-minute load average at the data sets' starts and ends "
        f"{min(loads):.1f}-{max(loads):.1f}."
    )
    load = f"{np.mean(loads):.1f} ({min(loads):.1f}-{max(loads):.1f})"
    write_results("cost.md", "CO2(30) cost against scikit-learn's forests",
                  [("Per data set", rows + [median])], notes, load=load)  # fmt: skip
    write_results("cost.json", data={"rows": rows, "median": median}, load=load)
