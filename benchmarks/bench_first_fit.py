"""First fit: each public estimator's first fit in a fresh process, numba cache empty and warm.

A new user's first impression: a fresh process imports the package, fits
every public estimator with its defaults on load_digits (classifiers) or
load_diabetes (regressors) and predicts the training rows; scikit-learn's
forests beside them. Each estimator runs in its own process twice:

- "empty cache": a new, empty ``NUMBA_CACHE_DIR``; kernels come from the
  machine code shipped in the wheel (``obliquetrees/_core/_kernel_cache.py``)
  or, without a usable one, are compiled;
- "warm cache": the same directory again (numba's own cache, filled by the
  first process where anything was compiled).

Times are wall seconds measured inside the child (``import``, ``fit``,
``predict``) and of the whole process. The children import the *installed*
``obliquetrees`` (they run outside the repository), which is what a user
gets from ``pip install .``; ``--source`` imports the repository's package
instead (no shipped kernels: everything compiles).

    python -m benchmarks first-fit
    python -m benchmarks first-fit --source
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_results
from benchmarks.estimators import public_estimators

ROOT = Path(__file__).resolve().parents[1]

#: Every public estimator (from the registry), then scikit-learn's forests.
ESTIMATORS = [f"obliquetrees.{name}" for name in public_estimators()] + [
    "sklearn.ensemble.RandomForestClassifier",
    "sklearn.ensemble.ExtraTreesClassifier",
    "sklearn.ensemble.RandomForestRegressor",
]

#: One first fit; prints a json line. argv: the estimator's dotted name.
CHILD = """
import importlib, json, sys, time
start = time.perf_counter()
module, name = sys.argv[1].rsplit(".", 1)
cls = getattr(importlib.import_module(module), name)
from sklearn.datasets import load_diabetes, load_digits
X, y = (load_diabetes if "Regressor" in name else load_digits)(return_X_y=True)
imported = time.perf_counter()
model = cls(random_state=0).fit(X, y)
fitted = time.perf_counter()
model.predict(X)
predicted = time.perf_counter()
shipped = None
if module == "obliquetrees":
    import obliquetrees
    from obliquetrees._core._kernel_cache import shipped_kernels_usable
    shipped = shipped_kernels_usable()
    module = obliquetrees.__file__
print(json.dumps({"import s": imported - start, "fit s": fitted - imported,
                  "predict s": predicted - fitted, "shipped kernels": shipped,
                  "package": module}))
"""


def run_child(code, estimator, numba_cache, source=False, timeout=900):
    """Run ``code`` (argv[1]: ``estimator``) in a fresh process outside the repository.

    Returns the json of its last printed line and the process's wall time.
    ``source=True`` imports the repository's package instead of the installed one.
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(numba_cache))
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, estimator],
        env=env,
        cwd=tempfile.gettempdir(),  # not the repository: the installed package is imported
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the child process for {estimator} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1]), wall


def first_fit(estimator, numba_cache, source=False, timeout=900):
    """Run one first fit in a fresh process; its figures and the process's wall time."""
    result, wall = run_child(CHILD, estimator, numba_cache, source, timeout)
    return {**result, "process s": wall}


def add_arguments(parser):
    """The arguments of ``python -m benchmarks first-fit``."""
    parser.add_argument("--source", action="store_true", help="import the repository's package")
    parser.add_argument("--estimators", nargs="+", default=ESTIMATORS)


def main(args):
    rows = []
    package = None
    for estimator in args.estimators:
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            for state in ("empty cache", "warm cache"):
                result = first_fit(estimator, cache, source=args.source)
                imported_from = result.pop("package")
                package = imported_from if estimator.startswith("obliquetrees") else package
                row = {"estimator": estimator.rsplit(".", 1)[1], "numba cache": state, **result}
                if row["shipped kernels"] is None:
                    row["shipped kernels"] = "-"
                print(row, flush=True)
                rows.append(row)
    name = "first_fit_source" if args.source else "first_fit"
    notes = (
        f"Package imported by the children: `{package}`. Defaults of each estimator, "
        "`random_state=0`, digits (1797 x 64) for classifiers, diabetes (442 x 10) for "
        "regressors; fit and predict on all rows. 'import s' includes scikit-learn and the "
        "data set; 'process s' is the whole child process (interpreter start included)."
    )
    write_results(f"{name}.md", "First fit in a fresh process", [("Figures", rows)], notes)
    write_results(f"{name}.json", data={"rows": rows, "package": package})
