"""Time and score any estimator on any benchmark data set.

Usage (from the repository root)::

    python -m benchmarks run \
        --estimator "sklearn.ensemble.RandomForestClassifier(n_estimators=30, n_jobs=2)" \
        --estimator "obliquetrees.CO2ForestClassifier(n_estimators=30, n_jobs=2)" \
        --dataset letter --dataset usps --out run_letter_usps.md

For each estimator and data set: a warm-up fit/predict on a small subset
(numba compilation or cache loading, reported separately), then the timed
fit on the training part and the median of ``--repeat`` timed predictions on
the test part, and the test score (accuracy % for classifiers, MSE and R^2
for regressors).
"""

import ast
import importlib
import statistics

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.metrics import mean_squared_error, r2_score

from benchmarks.common import timed, write_results
from benchmarks.datasets import train_test


def build_estimator(spec):
    """``"package.module.Class(a=1, b='x')"`` -> an instance (literal arguments only)."""
    call = ast.parse(spec, mode="eval").body
    if isinstance(call, ast.Call):
        target, kwargs = call.func, {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        if call.args:
            raise ValueError(f"Use keyword arguments only: {spec}")
    else:
        target, kwargs = call, {}
    dotted = ast.unparse(target)
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


def benchmark(estimator, dataset, repeat=5, warmup_rows=200):
    """One row of results for ``estimator`` on ``dataset``."""
    X_train, y_train, X_test, y_test = train_test(dataset)
    warm = clone(estimator)
    n_warm = min(warmup_rows, len(X_train))
    _, warm_seconds = timed(
        lambda: warm.fit(X_train[:n_warm], y_train[:n_warm]).predict(X_test[:10])
    )
    model, fit_seconds = timed(clone(estimator).fit, X_train, y_train)
    y_pred, predict_seconds = timed(model.predict, X_test, repeat=repeat)
    row = {
        "dataset": dataset,
        "estimator": repr(estimator).replace("\n", " "),
        "n_train": len(X_train),
        "n_test": len(X_test),
        "warm-up s": warm_seconds[0],
        "fit s": fit_seconds[0],
        "predict s (median)": statistics.median(predict_seconds),
    }
    if is_classifier(estimator):
        row["test accuracy %"] = 100.0 * float(np.mean(y_pred == y_test))
    else:
        row["test MSE"] = float(mean_squared_error(y_test, y_pred))
        row["test R2"] = float(r2_score(y_test, y_pred))
    return row


def add_arguments(parser):
    """The arguments of ``python -m benchmarks run``."""
    parser.add_argument(
        "--estimator",
        action="append",
        required=True,
        help="dotted class path with literal keyword arguments",
    )
    parser.add_argument("--dataset", action="append", required=True)
    parser.add_argument("--repeat", type=int, default=5, help="predict repeats")
    parser.add_argument("--out", default="run.md", help="file in benchmarks/results")


def main(args):
    rows = []
    for dataset in args.dataset:
        for spec in args.estimator:
            row = benchmark(build_estimator(spec), dataset, repeat=args.repeat)
            print(row, flush=True)
            rows.append(row)
    path = write_results(args.out, "Benchmark run", [("Results", rows)])
    print(f"wrote {path}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("run")
