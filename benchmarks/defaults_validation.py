"""Defaults on validation: candidate settings against today's defaults, test rows never read.

Issue 22's second part: defaults are chosen on validation splits of the
training parts only. Every candidate runs the suite's validation protocol
(:func:`benchmarks.bench_suite.run_data` with ``protocol="validation"``: run
``r`` splits the training part of split ``r`` 75/25 again; the test part is
never loaded into the estimator) on every data set of its task, 5 runs each,
one process per (data set, candidate) pair, ``n_jobs=2``.

Rule, fixed before the runs: a candidate replaces the default only if,
against the default, it wins more data sets than it loses (paired, a tie is
a mean per-run difference within one sd of the differences, as in the
suite) and its average rank among the family's candidates is better; of
several that pass, the best-ranked.

Families and why each candidate is there:

- ``HingeForestRegressor``: on the suite's regression sets 30 trees scored
  above 100 (puma8nm, puma8nh, cpu_small, abalone), and 100 trees stopped
  after their best epoch 2 on puma8nm: the validation loss of a sum of 100
  trees' outputs moved by Adam steps of 0.005 is noisy from the first epoch.
  Candidates: patience 10, a smaller step (0.002), the linear head (the
  reference code's UCI architecture).
- ``HingeForestClassifier``: whether the linear head, which won on the
  regression sets, also wins on classification (the paper's letter and
  USPS models sum the trees' class vectors).
- ``CO2ForestClassifier``: the suite's sets where scikit-learn won (madelon:
  5 informative features among 500; poker; spambase) suggest the oblique
  splits take in too many uninformative features. Candidates: all features
  for the axis-aligned start (a better start among many noise features), a
  tighter norm bound ``nu`` (smaller weights on every feature).
- ``CO2ForestRegressor``: it lost to RF(30) on the low-dimensional sets
  (puma8nm, puma8nh: 8 features). scikit-learn's forest regressors consider
  all features (``max_features=1.0``) since 1.1 for this reason, ours the
  classifier's ``"sqrt"``. Candidates: all features, a third of them.

Results in ``results/defaults_validation.md`` (cells in the json beside it,
resumable like the suite).

    python -m benchmarks defaults-validation                 # every family
    python -m benchmarks defaults-validation --family hinge-regressor
"""

import numpy as np

from benchmarks.bench_suite import (
    N_RUNS,
    compare,
    data_sets,
    ranks,
    run_missing,
    summarize,
    task_of,
)
from benchmarks.common import read_runs, results_path, write_results

#: family -> (task, dotted class, {label: parameters}); the first label is the default.
FAMILIES = {
    "hinge-regressor": (
        "regression",
        "obliquetrees.HingeForestRegressor",
        {
            "default": {},
            "n_iter_no_change=10": {"n_iter_no_change": 10},
            "learning_rate=0.002": {"learning_rate": 0.002},
            'head="linear"': {"head": "linear"},
        },
    ),
    "hinge-classifier": (
        "classification",
        "obliquetrees.HingeForestClassifier",
        {"default": {}, 'head="linear"': {"head": "linear"}},
    ),
    "co2-classifier": (
        "classification",
        "obliquetrees.CO2ForestClassifier",
        {
            "default (30 trees)": {"n_estimators": 30},
            "max_features=None": {"n_estimators": 30, "max_features": None},
            "nu=1": {"n_estimators": 30, "nu": 1.0},
        },
    ),
    "co2-regressor": (
        "regression",
        "obliquetrees.CO2ForestRegressor",
        {
            "default (30 trees)": {"n_estimators": 30},
            "max_features=None": {"n_estimators": 30, "max_features": None},
            "max_features=1/3": {"n_estimators": 30, "max_features": 1 / 3},
        },
    ),
}
RESULTS = "defaults_validation.json"


def report(cells):
    """Per family: scores per data set, W/T/L against the default, average rank, decision."""
    tables = []
    for family, (_, _, candidates) in FAMILIES.items():
        mine = [c for c in cells if c["family"] == family]
        if not mine:
            continue
        summary = summarize(mine)
        names = sorted({c["data"] for c in mine})
        labels = list(candidates)
        rows = []
        for data in names:
            row = {"data set": data}
            for label in labels:
                s = summary.get((data, label))
                row[label] = (
                    ""
                    if s is None
                    else s["status"]
                    if s["status"] != "ok"
                    else f"{s['mean']:.4f} ± {s['sd']:.4f}"
                )
            rows.append(row)
        tables.append((f"{family}: validation score, mean ± sd over {N_RUNS} runs", rows))
        default = labels[0]
        mean_rank, n_ranked = ranks(summary, names, labels)
        decision = []
        for label in labels[1:]:
            counts = [0, 0, 0]
            for data in names:
                a, b = summary.get((data, label)), summary.get((data, default))
                if a and b and a["status"] == b["status"] == "ok":
                    counts[1 - compare(a, b)] += 1
            better_rank = mean_rank.get(label, np.inf) < mean_rank.get(default, np.inf)
            time_ratio = [
                summary[(d, label)]["fit s"] / summary[(d, default)]["fit s"]
                for d in names
                if summary.get((d, label), {}).get("status")
                == summary.get((d, default), {}).get("status")
                == "ok"
            ]
            decision.append(
                {
                    "candidate": label,
                    f"vs {default} W/T/L": "/".join(map(str, counts)),
                    "average rank": mean_rank.get(label, float("nan")),
                    f"{default} rank": mean_rank.get(default, float("nan")),
                    "fit time / default's (median, range over data sets)": (
                        f"{np.median(time_ratio):.2f} ({min(time_ratio):.2f}-{max(time_ratio):.2f})"
                        if time_ratio
                        else ""
                    ),
                    "passes the rule": "yes" if counts[0] > counts[2] and better_rank else "no",
                }
            )
        passed = [row for row in decision if row["passes the rule"] == "yes"]
        if passed:  # of several that pass, the best-ranked
            min(passed, key=lambda row: row["average rank"])["passes the rule"] = "yes: chosen"
        tables.append(
            (f"{family}: against the default (ranks over {n_ranked} data sets)", decision)
        )
    loads = [x for c in cells for x in c["load"]]
    notes = (
        __doc__.split("\n\n", 1)[1].split("\n\n    python")[0]
        + f"\n\nCells: {len(cells)}; CPU {', '.join(sorted({c['CPU'] for c in cells}))}; "
        f"revisions {', '.join(sorted({c['revision'] for c in cells}))}; 1-minute load average "
        f"at the pairs' starts and ends {min(loads):.1f}-{max(loads):.1f}."
    )
    write_results(
        "defaults_validation.md",
        "Defaults on validation splits",
        tables,
        notes,
        command="python -m benchmarks defaults-validation",
    )


def add_arguments(parser):
    """The arguments of ``python -m benchmarks defaults-validation``."""
    parser.add_argument("--family", nargs="+", choices=list(FAMILIES), help="default: all")
    parser.add_argument("--data", nargs="+", help="data sets (default: all of the task)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per pair")
    parser.add_argument("--report", action="store_true", help="only rebuild the report")


def main(args):
    path = results_path(RESULTS)
    cells = read_runs(path)
    for family in [] if args.report else args.family or list(FAMILIES):
        task, dotted, candidates = FAMILIES[family]
        for data in [d for d in args.data or data_sets() if task_of(d) == task]:
            for label, params in candidates.items():
                spec = (dotted, params)
                cells, new = run_missing(
                    cells, path, data, label, spec, "validation", args.timeout, {"family": family}
                )
                if not new:
                    continue
                print(family, data, label, [round(c.get("score", np.nan), 4) for c in new])
                report(cells)
    if cells:
        report(cells)
