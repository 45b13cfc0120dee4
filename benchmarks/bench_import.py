"""Start-up costs: import time, kernel compilation cold vs cached, fresh-process predict.

Each figure is a wall-clock time of a fresh Python process (median of
``--repeat``; the processes of one comparison are interleaved, so machine load
hits both alike):

- ``import sklearn.base`` vs ``import obliquetrees`` (which must not compile
  anything nor import numba);
- the whole process "unpickle a model and predict 100 rows", beside the same
  process for scikit-learn's own pickle of the same forest (the floor any
  scikit-learn estimator pays: Python, numpy and scikit-learn imports). By
  default such a small first batch is walked in numpy and numba is never
  imported (``obliquetrees._core.traversal_numpy``); the rows "numba kernels"
  force the kernels instead, with an empty numba cache (compilation) and a
  warm one (loading machine code).

    python -m benchmarks import
"""

import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sklearn.ensemble import RandomForestClassifier

from benchmarks.common import write_results
from benchmarks.datasets import train_test
from obliquetrees.convert import from_sklearn

PREDICT_SCRIPT = """
import pickle, sys, time
import numpy as np
start = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    model = pickle.load(f)
X = np.load(sys.argv[2])
if sys.argv[3] == "kernels":  # no numpy walk: its time budget counts as spent
    from obliquetrees._core import traversal_numpy
    traversal_numpy.RENT_SECONDS = -1.0
loaded = time.perf_counter()
model.predict(X)
print(loaded - start, time.perf_counter() - loaded, "numba" in sys.modules)
"""


def _wall(args, env=None):
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return time.perf_counter() - start, out.stdout


def add_arguments(parser):
    """The arguments of ``python -m benchmarks import``."""
    parser.add_argument("--repeat", type=int, default=5)


def main(args):

    imports = {"import sklearn.base": [], "import obliquetrees": []}
    for _ in range(args.repeat):
        for label in imports:
            imports[label].append(_wall(["-c", label])[0])
    _, loaded = _wall(["-c", "import sys, obliquetrees; print('numba' in sys.modules)"])
    base, ours = (statistics.median(v) for v in imports.values())
    import_rows = [{"command": k, "median s": statistics.median(v)} for k, v in imports.items()]
    import_rows.append(
        {"command": "difference (obliquetrees - sklearn.base)", "median s": ours - base}
    )

    X_train, y_train, X_test, _ = train_test("letter")
    rf = RandomForestClassifier(n_estimators=100, random_state=0, n_jobs=2).fit(X_train, y_train)
    tmp = Path(tempfile.mkdtemp())
    with open(tmp / "model.pkl", "wb") as f:
        pickle.dump(from_sklearn(rf), f)
    import numpy as np

    np.save(tmp / "X.npy", X_test[:100])
    script = tmp / "predict.py"
    script.write_text(PREDICT_SCRIPT)
    call = [str(script), str(tmp / "model.pkl"), str(tmp / "X.npy")]

    with open(tmp / "sklearn.pkl", "wb") as f:
        pickle.dump(rf, f)
    sk_call = [str(script), str(tmp / "sklearn.pkl"), str(tmp / "X.npy"), "default"]
    configs = {  # label -> (command, numba cache: None, "cold" or "warm")
        "scikit-learn's own RandomForestClassifier pickle, same forest": (sk_call, None),
        "ours, default (small batch: numpy walk)": ([*call, "default"], "warm"),
        "ours, numba kernels, cold cache (compilation)": ([*call, "kernels"], "cold"),
        "ours, numba kernels, warm cache (cache hit)": ([*call, "kernels"], "warm"),
    }
    warm_dir = str(tmp / "cache")
    _wall([*call, "kernels"], {"NUMBA_CACHE_DIR": warm_dir})  # fill the warm cache once
    runs = {label: [] for label in configs}
    for _ in range(args.repeat):  # interleaved, so machine load hits every row alike
        for label, (command, cache) in configs.items():
            env = {"NUMBA_CACHE_DIR": tempfile.mkdtemp() if cache == "cold" else warm_dir}
            wall, out = _wall(command, env)
            unpickle, predict, numba_loaded = out.split()
            runs[label].append((wall, float(unpickle), float(predict), numba_loaded))
    process_rows = [
        {
            "process": label,
            "whole process s": statistics.median(r[0] for r in rs),
            "unpickle s (imports included)": statistics.median(r[1] for r in rs),
            "first predict of 100 rows s": statistics.median(r[2] for r in rs),
            "numba imported": rs[0][3],
        }
        for label, rs in runs.items()
    ]
    notes = (
        f"`import obliquetrees` loads numba: {loaded.strip()}. The model is a converted "
        "fully grown 100-tree RandomForestClassifier on letter (pickle "
        f"{(tmp / 'model.pkl').stat().st_size / 1e6:.1f} MB). Process times include "
        "the Python start-up and the scikit-learn import that unpickling any estimator needs. "
        f"1-minute load average at the end of the run: {os.getloadavg()[0]:.1f} (2 cores)."
    )
    for rows in (import_rows, process_rows):
        for row in rows:
            print(row)
    write_results(
        "startup.md",
        "Import, compilation and fresh-process prediction times",
        [
            ("Import time (fresh process, median)", import_rows),
            ("Unpickle and predict 100 rows in a fresh process", process_rows),
        ],
        notes,
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("import")
