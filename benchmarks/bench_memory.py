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

Issue 17 (CO2 at scale): ``--synthetic N`` (repeatable) instead fits
CO2ForestClassifier(30) and then RandomForestClassifier(30), each in its own
fresh process (a second fit in one process reuses the first one's freed
memory), per size and ``n_jobs`` on ``make_classification(N + 20000,
n_features=40, n_informative=20, n_classes=5)`` (the last 20000 rows are the
test set), and reports each fit's peak RSS *above the RSS before the fit*
(the peak is reset through ``/proc/self/clear_refs`` once data and kernels are
loaded), its CPU and wall seconds, test accuracy and model size, beside the target
``4 * X.nbytes + 100 MB``. ``--source DIR`` measures the obliquetrees of
another checkout (e.g. ``git archive`` of an older revision) the same way:

    python -m benchmarks memory --synthetic 10000 --synthetic 30000 --synthetic 100000
"""

import json
import os
import subprocess
import sys

from benchmarks.common import ROOT, write_results
from benchmarks.estimators import accepts, every_estimator, public_estimators

#: Forest classifiers and the parameters of the memory runs (trees vary).
SETTINGS = {
    "CO2ForestClassifier": dict(n_jobs=2),
    "E2EDTClassifier": dict(max_depth=6, max_epochs=2, finetune_epochs=2, max_features=8, n_jobs=2),
    "HingeForestClassifier": dict(max_epochs=2, n_jobs=2),
}


def configs():
    """Every public forest classifier (it has ``n_estimators``) and its parameters.

    Those :data:`SETTINGS` lacks run at their defaults, with ``n_jobs=2`` where accepted.
    """
    forests = [n for n in public_estimators("Classifier") if accepts(n, "n_estimators")]
    settings = every_estimator(
        SETTINGS, "Classifier", default=lambda n: dict(n_jobs=2) if accepts(n, "n_jobs") else {}
    )
    return {name: params for name, params in settings.items() if name in forests}


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


SCALE_CHILD = """
import json, os, pickle, sys, time
import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
import obliquetrees
from obliquetrees import CO2ForestClassifier

def vm(key):  # kB figures of /proc/self/status, in MB
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024

n, n_jobs, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
X, y = make_classification(n + 20000, n_features=40, n_informative=20, n_classes=5, random_state=0)
Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
if name == "CO2":
    CO2ForestClassifier(2, random_state=0).fit(Xtr[:500], ytr[:500])  # compile / load kernels
    clf = CO2ForestClassifier(30, n_jobs=n_jobs, random_state=0)
else:
    RandomForestClassifier(2, random_state=0).fit(Xtr[:500], ytr[:500])
    clf = RandomForestClassifier(30, n_jobs=n_jobs, random_state=0)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM (the peak RSS) to the current RSS
before = vm("VmRSS")
c0, t0 = time.process_time(), time.perf_counter()
clf.fit(Xtr, ytr)
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
peak = vm("VmHWM")
out = dict(source=os.path.dirname(obliquetrees.__file__), X_mb=Xtr.nbytes / 2**20,
           cpu_s=cpu, wall_s=wall, peak_above_mb=peak - before,
           accuracy=float(np.mean(clf.predict(Xte) == yte)),
           model_mb=len(pickle.dumps(clf)) / 2**20, load=os.getloadavg()[0])
if name == "CO2":
    out["nodes"] = sum(t.node_count for t in clf.trees_)
    out["stored_weights"] = sum(t.weight_index.shape[0] for t in clf.trees_)
print(json.dumps(out))
"""


def measure_scale(rows, n_jobs, name, source=None):
    """A fresh process fits ``name`` ("CO2" or "RF", 30 trees) on ``rows`` synthetic rows."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.path.abspath(source)
    out = subprocess.run(
        [sys.executable, "-c", SCALE_CHILD, str(rows), str(n_jobs), name],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=source or ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main_scale(args):
    """``--synthetic``: CO2(30) against RF(30), memory and CPU per size."""
    table = []
    for rows in args.synthetic:
        for n_jobs in args.n_jobs or [1, 2]:
            co2 = measure_scale(rows, n_jobs, "CO2", args.source)
            rf = measure_scale(rows, n_jobs, "RF")
            budget = 4 * co2["X_mb"] + 100
            table.append(
                {
                    "rows": rows,
                    "n_jobs": n_jobs,
                    "X MB": co2["X_mb"],
                    "CO2 peak above MB": co2["peak_above_mb"],
                    "RF peak above MB": rf["peak_above_mb"],
                    "budget 4X+100 MB": budget,
                    "CO2 within budget": co2["peak_above_mb"] <= budget,
                    "CO2 CPU s": co2["cpu_s"],
                    "RF CPU s": rf["cpu_s"],
                    "CPU CO2/RF": co2["cpu_s"] / rf["cpu_s"],
                    "CO2 wall s": co2["wall_s"],
                    "RF wall s": rf["wall_s"],
                    "CO2 acc": co2["accuracy"],
                    "RF acc": rf["accuracy"],
                    "CO2 model MB": co2["model_mb"],
                    "RF model MB": rf["model_mb"],
                    "CO2 model / CO2 peak above": co2["model_mb"] / co2["peak_above_mb"],
                    "CO2 nodes": co2["nodes"],
                    "CO2 stored weights": co2["stored_weights"],
                    "load (CO2, RF)": f"{co2['load']:.1f}, {rf['load']:.1f}",
                }
            )
            print(table[-1], flush=True)
    notes = (
        "make_classification(rows + 20000, n_features=40, n_informative=20, n_classes=5, "
        "random_state=0), float64; the last 20000 rows are the test set. CO2ForestClassifier(30) "
        "(defaults) and RandomForestClassifier(30) are each fitted in a fresh process, one after "
        "the other (kernels loaded before). Peak above = VmHWM after the fit minus VmRSS "
        "before it (VmHWM reset just before the fit); it includes the fitted model. "
        "CPU = process CPU seconds (all threads). Obliquetrees from: "
        + (args.source or "this checkout")
        + "."
        + """

Where a CO2 fit's memory goes (dense float64 X of n rows and p features; see
obliquetrees/co2/training.py and co2/_node.py):

- no copy of X: the kernels standardise each row as they read it (a dense X that is not
  float64 C-contiguous is copied once into that form by validation);
- per tree in flight (n_jobs of them): integer bootstrap counts and one row-index array
  (O(n)), the node table (nodes x p float64 split weights while growing), and per node of
  at most max_cccp_samples rows a gathered, centred block of its rows. A larger node (the
  root: about 0.63 n rows with the bootstrap) is no longer gathered: its stump is fit on a
  block of max_cccp_samples sampled rows, and its mean and the side of each row are read
  from X itself. Each tree's temporaries are handed back to the operating system when it
  is packaged (glibc keeps what worker threads free in their arenas);
- the fitted model: every split stores a weight for each feature that varies in its node
  (CO2's hyperplanes are dense), 12 bytes each (int32 index, float64 weight; the
  missing-value terms are one value per feature when no feature has informative
  missingness), so the forest grows as nodes x p and is most of the peak at these
  sizes ("CO2 model / CO2 peak above": pickled model over peak). The missing-value terms
  are made tree by tree, each tree's old ones freed as its new ones are made (they were
  held twice for the whole forest before packing).
"""
    )
    write_results(
        args.out or "memory_co2_scale.md",
        "CO2 Forest at scale: peak memory and CPU against RandomForest (synthetic, 40 features)",
        [("Runs", table)],
        notes,
    )


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
    parser.add_argument("--estimator", action="append", choices=sorted(configs()))
    parser.add_argument(
        "--rows",
        type=int,
        action="append",
        help="training rows of letter (default 15000; repeat for a size sweep)",
    )
    parser.add_argument(
        "--synthetic",
        type=int,
        action="append",
        help="CO2(30) against RF(30) on this many synthetic rows (repeatable; see the module doc)",
    )
    parser.add_argument("--n-jobs", type=int, action="append", help="with --synthetic: 1 and 2")
    parser.add_argument("--source", help="with --synthetic: repository root of obliquetrees")
    parser.add_argument("--out", help="with --synthetic: result file (memory_co2_scale.md)")


def main(args):
    if args.synthetic:
        return main_scale(args)
    rows_list = args.rows or [15000]
    table, checks = [], []
    params = configs()
    for name in args.estimator or sorted(params):
        for rows in rows_list:
            results = {}
            for n in (10, 100):
                r = measure(name, n, params[name], rows)
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
        "Parameters per estimator: " + json.dumps(params) + " (few epochs: memory, not accuracy)."
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
