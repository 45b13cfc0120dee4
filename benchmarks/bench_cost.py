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

``--breakdown`` asks where CO2(30)'s fit time goes, without a profiler
(numba kernels are opaque to py-spy and perf): it also times
``CO2(30) no CCCP``, the same forest with ``min_samples_oblique`` above any
node's size, so every node keeps its axis-aligned start (the axis search
over every feature, the gathers, centring, partitions and leaves, and no
CCCP or out-of-bag test), and ``RF(30) every feature``, scikit-learn's
RandomForest(30) with ``max_features=None``, the closest scikit-learn has to
that axis-aligned growth (CO2's default searches every feature, as
``max_features=None``). The trees without CCCP differ from CO2's (other
splits, other shapes), so ``CCCP share`` (1 - no CCCP / CO2) estimates the
CCCP's part; it is not a profile of the same trees. Written to
``cost_breakdown.md`` and ``.json``; ``cost.md`` is left as it was.

    python -m benchmarks cost                     # every classification set but fashion_mnist
    python -m benchmarks cost --data letter magic --rounds 5
    python -m benchmarks cost --breakdown         # writes cost_breakdown.md
"""

import importlib
import os
import time

import numpy as np

from benchmarks.bench_suite import CLASSIFIERS, data_sets, run_data, task_of
from benchmarks.common import write_results

LABELS = ("CO2(30)", "ET(100)", "RF(30)")
#: ``--breakdown``'s extra estimators: (suite label, parameters on top of its own).
BREAKDOWN = {
    "CO2(30) no CCCP": ("CO2(30)", {"min_samples_oblique": 2**62}),
    "RF(30) every feature": ("RF(30)", {"max_features": None}),
}
#: Left out of the default list: 60,000 rows x 784 pixels, hours for the suite's CO2 cells.
SKIPPED = ("fashion_mnist",)


def _model(label, seed):
    label, extra = BREAKDOWN.get(label, (label, {}))
    dotted, params = CLASSIFIERS[label]
    module, name = dotted.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return cls(**params | extra, random_state=seed, n_jobs=2)


def _times(label, X, y, X_test, seed):
    """``(fit CPU s, predict wall s)`` of one fit and predict."""
    model = _model(label, seed)
    cpu = time.process_time()
    model.fit(X, y)
    fit_cpu = time.process_time() - cpu
    wall = time.perf_counter()
    model.predict(X_test)
    return fit_cpu, time.perf_counter() - wall


def _median_times(name, labels, rounds):
    """``(X, fit, predict)``: median fit CPU and predict wall seconds of every label on run 0
    of data set ``name``, the labels in turn in each round."""
    X, y, X_test, _ = run_data(name, 0)
    for label in labels:  # warm-up: kernels loaded, nothing recorded
        _times(label, X, y, X_test, 0)
    times = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels:
            times[label].append(_times(label, X, y, X_test, r))
    fit = {label: float(np.median([t[0] for t in times[label]])) for label in labels}
    predict = {label: float(np.median([t[1] for t in times[label]])) for label in labels}
    return X, fit, predict


def measure(name, rounds):
    """The row of ``cost.md`` of data set ``name``."""
    X, fit, predict = _median_times(name, LABELS, rounds)
    return {
        "data": name,
        "rows": X.shape[0],
        "features": X.shape[1],
        **{f"{label} fit CPU s": fit[label] for label in LABELS},
        **{f"{label} predict s": predict[label] for label in LABELS},
        "fit CPU CO2(30) / ET(100)": fit["CO2(30)"] / fit["ET(100)"],
        "predict CO2(30) / RF(30)": predict["CO2(30)"] / predict["RF(30)"],
    }


def measure_breakdown(name, rounds):
    """The row of ``cost_breakdown.md`` of data set ``name`` (fit CPU only)."""
    labels = ("CO2(30)", *BREAKDOWN, "ET(100)")
    X, fit, _ = _median_times(name, labels, rounds)
    return {
        "data": name,
        "rows": X.shape[0],
        "features": X.shape[1],
        **{f"{label} fit CPU s": fit[label] for label in labels},
        "CCCP share": 1.0 - fit["CO2(30) no CCCP"] / fit["CO2(30)"],
        **{f"{label} / ET(100)": fit[label] / fit["ET(100)"] for label in labels[:-1]},
    }


def add_arguments(parser):
    """The arguments of ``python -m benchmarks cost``."""
    parser.add_argument("--data", nargs="+", help="data sets (default: classification sets)")
    parser.add_argument("--rounds", type=int, default=3, help="recorded rounds per data set")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time CO2(30) without CCCP and RF(30) on every feature (cost_breakdown.md)",
    )


def main(args):
    names = args.data or [
        d for d in data_sets() if task_of(d) == "classification" and d not in SKIPPED
    ]
    rows, loads = [], []
    for name in names:
        loads.append(os.getloadavg()[0])
        rows.append((measure_breakdown if args.breakdown else measure)(name, args.rounds))
        loads.append(os.getloadavg()[0])
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()})
    description = __doc__.split("\n\n", 1)[1].split("\n\n    python")[0]
    cost, breakdown = description.split("\n\n``--breakdown``")
    if args.breakdown:
        ratios = [key for key in rows[0] if key == "CCCP share" or key.endswith("/ ET(100)")]
        notes = (
            f"``--breakdown``{breakdown}\n\n{args.rounds} recorded rounds per data set (run 0's "
            "split of the suite's test protocol), the estimators in turn in each round; fit time "
            "is the process's CPU time (every thread, ``n_jobs=2``)"
        )
        title = "Where CO2(30)'s fit time goes: CCCP against axis growth"
        _write("cost_breakdown", title, rows, ratios, notes, loads)
        return
    ratios = ("fit CPU CO2(30) / ET(100)", "predict CO2(30) / RF(30)")
    notes = (
        f"{cost}\n\n{args.rounds} recorded rounds per data set (run 0's split of the suite's "
        "test protocol)"
    )
    _write("cost", "CO2(30) cost against scikit-learn's forests", rows, ratios, notes, loads)


def _write(stem, title, rows, ratios, notes, loads):
    """``stem``.md and .json: the rows, their medians of ``ratios``, ``notes`` and the load."""
    median = {"data": f"median over {len(rows)} data sets"}
    median |= {key: float(np.median([row[key] for row in rows])) for key in ratios}
    notes += (
        f"; 1-minute load average at the data sets' starts and ends "
        f"{min(loads):.1f}-{max(loads):.1f}."
    )
    load = f"{np.mean(loads):.1f} ({min(loads):.1f}-{max(loads):.1f})"
    write_results(f"{stem}.md", title, [("Per data set", rows + [median])], notes, load=load)
    write_results(f"{stem}.json", data={"rows": rows, "median": median}, load=load)
