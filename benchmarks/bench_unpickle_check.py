"""Cost of the safety check that runs when a model is unpickled (issue 14).

Converts ``RandomForestClassifier(n_estimators=100, random_state=0)`` fitted on
``letter`` (fully grown trees) with :func:`obliquetrees.convert.from_sklearn`,
pickles it, and times ``pickle.loads`` with the container and estimator checks
and with both replaced by no-ops, in one process, the two interleaved
(``--repeat`` times each, order alternating), reporting medians and the ratio.

    python -m benchmarks unpickle-check      # writes results/unpickle_check.md
"""

import pickle
import statistics
import time
from unittest import mock

from sklearn.ensemble import RandomForestClassifier

from benchmarks.common import write_results
from benchmarks.datasets import train_test
from obliquetrees.base import BaseObliqueEstimator
from obliquetrees.convert import from_sklearn


def add_arguments(parser):
    """The arguments of ``python -m benchmarks unpickle-check``."""
    parser.add_argument("--repeat", type=int, default=31)
    parser.add_argument("--n-estimators", type=int, default=100)


def main(args):
    X, y, _, _ = train_test("letter")
    rf = RandomForestClassifier(args.n_estimators, random_state=0, n_jobs=2).fit(X, y)
    model = from_sklearn(rf)
    blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    forest = model.forest_
    print(f"{forest!r}: pickle {len(blob) / 2**20:.1f} MiB")
    unchecked = (
        mock.patch("obliquetrees._core.forest.check_forest_arrays"),
        mock.patch.object(BaseObliqueEstimator, "_check_fitted_state"),
    )
    times = {"checked": [], "unchecked": []}
    for r in range(args.repeat):
        for mode in ("checked", "unchecked") if r % 2 else ("unchecked", "checked"):
            patches = unchecked if mode == "unchecked" else ()
            for p in patches:
                p.start()
            start = time.perf_counter()
            pickle.loads(blob)
            times[mode].append(time.perf_counter() - start)
            for p in patches:
                p.stop()
    check = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        forest.check_invariants()
        check.append(time.perf_counter() - start)
    med = {mode: statistics.median(t) for mode, t in times.items()}
    rows = [
        {"what": "pickle.loads with checks", "median ms": med["checked"] * 1e3},
        {"what": "pickle.loads without checks", "median ms": med["unchecked"] * 1e3},
        {"what": "forest.check_invariants() alone", "median ms": statistics.median(check) * 1e3},
        {"what": "ratio with / without", "median ms": med["checked"] / med["unchecked"]},
    ]
    notes = (
        f"{forest!r} converted from RandomForestClassifier({args.n_estimators}, "
        f"random_state=0) fitted on letter (fully grown); pickle {len(blob) / 2**20:.1f} MiB. "
        f"Medians of {args.repeat} interleaved loads in one process. The check reads the "
        "leaf-value table once for finiteness and makes about twenty vectorised passes "
        "over the nodes; it has no Python loop over trees or nodes."
    )
    path = write_results(
        "unpickle_check.md",
        "Cost of the unpickling check (issue 14)",
        [("Timings", rows)],
        notes=notes,
    )
    print(path.read_text())


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("unpickle-check")
