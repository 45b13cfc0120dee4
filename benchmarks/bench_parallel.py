"""Forest fitting on joblib threads (the default) vs processes.

Trees are built by joblib; the training kernels release the GIL, so threads
should scale like processes without copying X to workers or loading the numba
kernels once per worker. Each setting fits the same forest (same seeds) and the
models are checked identical; process pools are warmed up first (worker start
and kernel cache loading are reported separately).

    python -m benchmarks parallel
"""

import statistics

import joblib
import numpy as np

from benchmarks.common import timed, write_results
from benchmarks.datasets import train_test
from obliquetrees import CO2ForestClassifier, E2EDTClassifier

CONFIGS = {
    "CO2ForestClassifier(n_estimators=10)": lambda nj: CO2ForestClassifier(
        n_estimators=10, n_jobs=nj, random_state=0
    ),
    "E2EDTClassifier(n_estimators=10, max_depth=6, max_features=8)": lambda nj: E2EDTClassifier(
        n_estimators=10, max_depth=6, max_features=8, n_jobs=nj, random_state=0
    ),
}


def add_arguments(parser):
    """The arguments of ``python -m benchmarks parallel``."""
    parser.add_argument("--repeat", type=int, default=3)


def main(args):
    X, y, X_test, _ = train_test("letter")
    rows = []
    for name, make in CONFIGS.items():
        make(1).fit(X[:300], y[:300])  # compile / load kernels in this process
        reference = make(1).fit(X, y).predict_proba(X_test)
        for label, backend, n_jobs in [
            ("serial", None, 1),
            ("threads", "threading", 2),
            ("processes (loky)", "loky", 2),
        ]:
            with joblib.parallel_backend(backend or "threading", n_jobs=n_jobs):
                _, warm = timed(make(n_jobs).fit, X[:300], y[:300])
                model, seconds = timed(make(n_jobs).fit, X, y, repeat=args.repeat)
            rows.append(
                {
                    "forest": name,
                    "backend": label,
                    "n_jobs": n_jobs,
                    "fit s (median)": statistics.median(seconds),
                    "warm-up fit s": warm[0],
                    "identical to serial": bool(
                        np.array_equal(model.predict_proba(X_test), reference)
                    ),
                }
            )
            print(rows[-1], flush=True)
    notes = (
        "letter (15000 x 16, 26 classes). One run on a shared 2-core machine; compare "
        "the ratios within a forest. The warm-up fit (300 rows) includes worker "
        "start-up and, for processes, loading the compiled kernels in each worker."
    )
    write_results(
        "parallel.md", "Forest fitting: joblib threads vs processes", [("Fit time", rows)], notes
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("parallel")
