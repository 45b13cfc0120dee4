"""Peak memory of forest fitting and size of the saved models.

Each fit runs in its own fresh process, which reports its peak resident set
size (``ru_maxrss``) after the fit, the pickled size of the model and the size
a dense ``n_nodes x n_features`` float64 weight matrix (the storage of peers
such as treeple) would take beside our CSR split weights (16 bytes per stored
weight: int64 index and float64 value).

The check of issue 7: peak(100 trees) <= peak(10 trees) + size of the 90 extra
fitted trees + 10 % of peak(10 trees), i.e. no per-tree copies of X.

    python -m benchmarks memory                # letter, 10 and 100 trees
    python -m benchmarks memory --rows 2000    # fewer rows, for a smoke run
"""

import json
import subprocess
import sys

from benchmarks.common import write_results

#: Forest estimators and the parameters of the memory runs (trees vary).
CONFIGS = {
    "CO2ForestClassifier": dict(n_jobs=2),
    "E2EDTClassifier": dict(max_depth=6, max_epochs=2, finetune_epochs=2, max_features=8, n_jobs=2),
    "HingeForestClassifier": dict(max_epochs=2, n_jobs=2),
}

CHILD = """
import json, pickle, resource, sys, time
import numpy as np
import obliquetrees
from benchmarks.datasets import train_test
name, n_estimators = sys.argv[1], int(sys.argv[2])
params, rows = json.loads(sys.argv[3]), int(sys.argv[4])
X, y, _, _ = train_test("letter")
X, y = np.ascontiguousarray(X[:rows], dtype=np.float64), y[:rows]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
model = getattr(obliquetrees, name)(n_estimators=n_estimators, random_state=0, **params).fit(X, y)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
trees = model.trees_
nodes = sum(t.node_count for t in trees)
weights = sum(t.weight_index.shape[0] for t in trees)
print(json.dumps(dict(
    peak_mb=peak / 1024, before_fit_mb=before / 1024, fit_s=seconds,
    pickle_mb=len(pickle.dumps(model)) / 1e6, nodes=nodes, stored_weights=weights,
    dense_weights_mb=nodes * X.shape[1] * 8 / 1e6, X_mb=X.nbytes / 1e6,
)))
"""


def measure(name, n_estimators, params, rows):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(n_estimators), json.dumps(params), str(rows)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def add_arguments(parser):
    """The arguments of ``python -m benchmarks memory``."""
    parser.add_argument("--estimator", action="append", choices=sorted(CONFIGS))
    parser.add_argument(
        "--rows",
        type=int,
        action="append",
        help="training rows of letter (default 15000; repeat for a size sweep)",
    )


def main(args):
    rows_list = args.rows or [15000]
    table, checks = [], []
    for name in args.estimator or sorted(CONFIGS):
        for rows in rows_list:
            results = {}
            for n in (10, 100):
                r = measure(name, n, CONFIGS[name], rows)
                results[n] = r
                table.append(
                    {
                        "estimator": name,
                        "training rows": rows,
                        "trees": n,
                        "X MB": r["X_mb"],
                        "peak RSS MB": r["peak_mb"],
                        "RSS before fit MB": r["before_fit_mb"],
                        "fit s": r["fit_s"],
                        "nodes": r["nodes"],
                        "stored weights": r["stored_weights"],
                        "pickle MB": r["pickle_mb"],
                        "CSR split weights MB": r["stored_weights"] * 16 / 1e6,
                        "dense weight matrix MB": r["dense_weights_mb"],
                    }
                )
                print(table[-1], flush=True)
            small, large = results[10], results[100]
            extra_trees_mb = large["pickle_mb"] - small["pickle_mb"]
            bound = small["peak_mb"] + extra_trees_mb + 0.1 * small["peak_mb"]
            checks.append(
                {
                    "estimator": name,
                    "training rows": rows,
                    "peak(100) MB": large["peak_mb"],
                    "bound MB": bound,
                    "holds": large["peak_mb"] <= bound,
                }
            )
    notes = (
        "Peak RSS is the whole process (Python, numpy, scikit-learn, numba and its "
        "compiled kernels included). Size of the 90 extra trees = pickle(100) - pickle(10). "
        "Parameters per estimator: " + json.dumps(CONFIGS) + " (few epochs: memory, not accuracy)."
    )
    write_results(
        "memory.md",
        "Peak memory of forest fitting and model sizes (letter)",
        [("Runs", table), ("Check: peak(100) <= peak(10) + extra trees + 10 %", checks)],
        notes,
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("memory")
