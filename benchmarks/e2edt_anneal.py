"""E2EDTClassifier above the row budget: cheaper annealing schedules of the finetune.

Asks whether a shorter finetune with a faster steepness increase (the same
final steepness in fewer epochs), possibly with a coarser pruning threshold or
a larger Adam step, keeps the accuracy of the paper's 60 epochs at a fraction
of their cost (issue 17: 10 trees of depth 10 on 100,000 rows within 5x the
CPU of RandomForestClassifier(10)). ``finetune_epochs="auto"`` is the
schedule compressed threefold above the row budget (20 epochs, steepness
increase 0.3, Adam step 0.003 in the finetune), as the estimator implements
it; the ``finetune_*`` rows measured such schedules before it existed. Data of the scale benchmark (``bench_scale``:
``make_classification(n_features=40, n_informative=20, n_classes=5)``).

Each setting is fitted twice, each fit in its own fresh process,
``E2EDTClassifier(n_estimators=10, max_depth=10, n_jobs=2, random_state=0,
finetune_epochs=None)`` with the setting's parameters, all else default
(``finetune_epochs=None`` is the paper's schedule, the estimator's default
when the ``defaults`` rows were measured; ``"auto"`` is now the default):
once on all training rows,
scored on the held-out test rows (as ``bench_scale``), and once on the
training rows without their first fifth, scored on that fifth (validation
accuracy; the test rows are not read). Fit CPU seconds are process time (all
threads); the machine is shared, so the load average is recorded.

Setting keys: estimator parameters (``finetune_epochs``,
``steepness_increase``, ``prune_threshold``, ``initial_steepness``; also
``n_estimators``, ``max_depth`` and ``random_state``, which replace the
10 trees of depth 10 and the seed 0), and
``finetune_<parameter>`` (``finetune_steepness_increase``,
``finetune_learning_rate``, ``finetune_batch_size``): that parameter in the
finetune only, the greedy stumps keeping the estimator's (set by replacing
the field of the parameters the finetune receives). ``"RF(10)"`` is the reference
``RandomForestClassifier(n_estimators=10, n_jobs=2, random_state=0)``.

    python -m benchmarks e2edt-anneal --settings '{"finetune_epochs": 30, "finetune_steepness_increase": 0.2}'
    python -m benchmarks e2edt-anneal --settings RF(10) --data synthetic-100000
"""  # noqa: E501

import json

from benchmarks.bench_scale import DATA
from benchmarks.common import results_path, run_child_row, write_results

RESULTS = "e2edt_anneal.json"
REFERENCE = "RF(10)"
NOT_RUN = "-"

CHILD = """
import dataclasses, json, sys, time
import numpy as np
from benchmarks.bench_scale import load_data

data, split, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
X, y, X_test, y_test = load_data(data)
if split == "validation":  # the first fifth of the training rows scores
    n_val = X.shape[0] // 5
    X, y, X_test, y_test = X[n_val:], y[n_val:], X[:n_val], y[:n_val]
if settings == "RF(10)":
    from sklearn.ensemble import RandomForestClassifier
    model = RandomForestClassifier(n_estimators=10, n_jobs=2, random_state=0)
else:
    from obliquetrees import E2EDTClassifier
    from obliquetrees.e2edt import training as E
    # "finetune_<field>" (not finetune_epochs): that field in the finetune only
    only = {k[9:]: settings.pop(k) for k in list(settings)
            if k.startswith("finetune_") and k != "finetune_epochs"}
    if only:
        finetune = E.finetune

        def patched(tt, Z, y, sw, params, *args, **kwargs):
            params = dataclasses.replace(params, **only)
            return finetune(tt, Z, y, sw, params, *args, **kwargs)

        E.finetune = patched  # the tree's fit calls it through the module
    # finetune_epochs=None: the "defaults" row is the paper's schedule, as when it was measured
    base = dict(n_estimators=10, max_depth=10, n_jobs=2, random_state=0, finetune_epochs=None)
    model = E2EDTClassifier(**{**base, **settings})
cpu, wall = time.process_time(), time.perf_counter()
model.fit(X, y)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({
    "train rows": int(X.shape[0]), "fit CPU s": cpu, "fit wall s": wall,
    "accuracy": float(np.mean(model.predict(X_test) == y_test)),
}))
"""

SPLITS = ("test", "validation")


def add_arguments(parser):
    """The arguments of ``python -m benchmarks e2edt-anneal``."""
    parser.add_argument("--data", nargs="+", choices=DATA, default=["synthetic-100000"])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["{}"],
        help="JSON objects of setting keys (see the module docstring) or RF(10)",
    )
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument("--redo", action="store_true", help="measure stored settings again")


def main(args):
    path = results_path(RESULTS)
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    for data in args.data:
        for text in args.settings:
            settings = text if text == REFERENCE else json.loads(text)
            for split in args.splits:
                key = {"data": data, "setting": _name(settings), "split": split}
                if not args.redo and any(_key(r) == key for r in runs):
                    continue
                run = run_child_row(key, CHILD, data, split, json.dumps(settings))
                print(run, flush=True)
                runs = [r for r in runs if _key(r) != key] + [run]
                write_results(RESULTS, data={"runs": runs})
                _report(runs)


def _name(settings):
    if settings == REFERENCE:
        return REFERENCE
    if not settings:
        return "defaults"
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def _key(run):
    return {k: run[k] for k in ("data", "setting", "split")}


def _report(runs):
    tables = []
    for data in dict.fromkeys(r["data"] for r in runs):
        mine = [r for r in runs if r["data"] == data]
        ref = [r["fit CPU s"] for r in mine if r["setting"] == REFERENCE and r["split"] == "test"]
        rows = []
        for setting in dict.fromkeys(r["setting"] for r in mine):
            by = {r["split"]: r for r in mine if r["setting"] == setting}
            test, val = by.get("test", {}), by.get("validation", {})
            loads = [r[k] for r in by.values() for k in ("load before", "load after")]
            cpu = test.get("fit CPU s")
            rows.append(
                {
                    "setting": setting,
                    "fit CPU s (test fit)": NOT_RUN if cpu is None else cpu,
                    "x RF(10) CPU": NOT_RUN if cpu is None or not ref else cpu / ref[0],
                    "test accuracy": test.get("accuracy", NOT_RUN),
                    "fit CPU s (validation fit)": val.get("fit CPU s", NOT_RUN),
                    "validation accuracy": val.get("accuracy", NOT_RUN),
                    "load (min-max)": f"{min(loads):.1f}-{max(loads):.1f}",
                    "CPU": next(iter(by.values()))["CPU"],
                    "revision": " ".join(dict.fromkeys(r["revision"] for r in by.values())),
                }
            )
        tables.append((data, rows))
    write_results(
        "e2edt_anneal.md",
        "E2EDTClassifier above the row budget: cheaper annealing schedules of the finetune",
        tables,
        __doc__.split("\n\n    python")[0],
        command=(
            "python -m benchmarks e2edt-anneal --data DATA --settings SETTING --splits SPLIT "
            "(one fresh process per table cell; SETTING: the row's setting as a JSON object, "
            'e.g. \'{"finetune_epochs": "auto"}\', or RF(10); add --redo to measure again)'
        ),
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("e2edt-anneal")
