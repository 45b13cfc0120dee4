"""Forest prediction throughput: our packed-forest kernel vs scikit-learn.

A scikit-learn RandomForestClassifier (100 fully grown trees by default) is
converted with ``obliquetrees.convert.from_sklearn``; both models then predict
the same test rows, with ``n_jobs=1`` and with ``n_jobs=2``. Both run in this
process, interleaved, median of ``--repeat`` runs each, after a warm-up call
(numba cache load or compilation for ours). The ratio is sklearn time / our
time (> 1: we are faster). The header records the CPU model: the ratio
differs between Intel and AMD machines.

``--rows`` adds batches of that many rows (the test split repeated), as a
service predicting large batches sees them.

    python -m benchmarks predict            # letter and usps, 100 trees, n_jobs 1 and 2
    python -m benchmarks predict --rows 100000
"""

import functools
import statistics

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from benchmarks.common import timed, write_results
from benchmarks.datasets import train_test
from obliquetrees.convert import from_sklearn


@functools.cache
def fitted_forest(dataset, n_estimators):
    """The fully grown forest of ``dataset`` (fitted once per run) and its test rows."""
    X_train, y_train, X_test, _ = train_test(dataset)
    rf = RandomForestClassifier(n_estimators=n_estimators, n_jobs=2, random_state=0)
    return rf.fit(X_train, y_train), X_test


def compare(dataset, n_estimators, repeat, n_jobs, rows=None):
    rf, X_test = fitted_forest(dataset, n_estimators)
    if rows is not None:  # the test split repeated to ``rows`` rows
        X_test = np.ascontiguousarray(np.resize(X_test, (rows, X_test.shape[1])))
    rf.set_params(n_jobs=n_jobs)
    ours = from_sklearn(rf, n_jobs=n_jobs)
    _, warm = timed(ours.predict_proba, X_test[:10])
    sk_times, our_times = [], []
    for _ in range(repeat):  # interleaved, so load changes hit both alike
        sk_proba, t = timed(rf.predict_proba, X_test)
        sk_times.append(t[0])
        our_proba, t = timed(ours.predict_proba, X_test)
        our_times.append(t[0])
    assert np.array_equal(ours.predict(X_test), rf.predict(X_test))
    sk, us = statistics.median(sk_times), statistics.median(our_times)
    return {
        "dataset": dataset,
        "test rows": len(X_test),
        "trees": n_estimators,
        "n_jobs": n_jobs,
        "nodes/tree": round(ours.forest_.node_offset[-1] / n_estimators),
        "sklearn predict_proba s": sk,
        "ours predict_proba s": us,
        "speed-up (sklearn / ours)": sk / us,
        "max |proba diff|": float(np.abs(sk_proba - our_proba).max()),
        "ours first call s (warm-up)": warm[0],
    }


def add_arguments(parser):
    """The arguments of ``python -m benchmarks predict``."""
    parser.add_argument("--dataset", action="append", default=None)
    parser.add_argument("--n-estimators", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[], help="also batches of these many rows"
    )


def main(args):
    rows = [
        compare(d, args.n_estimators, args.repeat, n_jobs, batch)
        for d in args.dataset or ["letter", "usps"]
        for batch in [None, *args.rows]
        for n_jobs in args.n_jobs
    ]
    for row in rows:
        print(row)
    notes = (
        "Fully grown RandomForestClassifier (random_state=0) converted to obliquetrees "
        "containers; both predict_proba with the same n_jobs (column), median of "
        f"{args.repeat} interleaved repeats; predictions checked identical. One run on a "
        "shared 2-core machine: compare the ratio, not the seconds."
    )
    write_results(
        "predict.md",
        "Forest predict throughput vs scikit-learn",
        [("predict_proba on the test split", rows)],
        notes,
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("predict")
