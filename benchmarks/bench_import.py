"""Start-up costs: import time, kernel compilation cold vs cached, fresh-process predict.

Each figure is a wall-clock time of a fresh Python process (median of
``--repeat``; the processes of one comparison are interleaved, so machine load
hits both alike):

- ``import sklearn.base`` vs ``import obliquetrees`` (which must not compile
  anything nor import numba);
- first predict of a pickled converted 100-tree forest in a new process with an
  empty numba cache (compilation) vs a warm cache (loading machine code);
- the whole process "unpickle a model and predict 100 rows" with a warm cache,
  beside the same process for scikit-learn's own pickle of the same forest (the
  floor any scikit-learn estimator pays: Python, numpy and scikit-learn imports).

    python -m benchmarks.bench_import
"""

import argparse
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
loaded = time.perf_counter()
model.predict(X)
print(loaded - start, time.perf_counter() - loaded)
"""


def _wall(args, env=None):
    start = time.perf_counter()
    out = subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    return time.perf_counter() - start, out.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

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
    sk_call = [str(script), str(tmp / "sklearn.pkl"), str(tmp / "X.npy")]
    sk_runs = [_wall(sk_call)
               for _ in range(args.repeat)]  # fmt: skip
    process_rows = [{
        "numba cache": "(scikit-learn's own RandomForestClassifier pickle, same forest)",
        "whole process s": statistics.median(wall for wall, _ in sk_runs),
        "unpickle s (imports included)": statistics.median(float(o.split()[0]) for _, o in sk_runs),
        "first predict of 100 rows s": statistics.median(float(o.split()[1]) for _, o in sk_runs),
    }]
    for cache in ("cold (empty numba cache)", "warm (cache hit)"):
        runs = []
        for _ in range(args.repeat):
            cache_dir = tempfile.mkdtemp() if cache.startswith("cold") else str(tmp / "cache")
            if not cache.startswith("cold") and not (tmp / "cache").exists():
                _wall(call, {"NUMBA_CACHE_DIR": cache_dir})  # fill the cache once
            wall, out = _wall(call, {"NUMBA_CACHE_DIR": cache_dir})
            unpickle, predict = map(float, out.split())
            runs.append((wall, unpickle, predict))
        process_rows.append({
            "numba cache": cache,
            "whole process s": statistics.median(r[0] for r in runs),
            "unpickle s (imports included)": statistics.median(r[1] for r in runs),
            "first predict of 100 rows s": statistics.median(r[2] for r in runs),
        })
    notes = (
        f"`import obliquetrees` loads numba: {loaded.strip()}. The model is a converted "
        "fully grown 100-tree RandomForestClassifier on letter (pickle "
        f"{(tmp / 'model.pkl').stat().st_size / 1e6:.1f} MB). Process times include "
        "the Python start-up and the scikit-learn import that unpickling any estimator needs."
    )
    for rows in (import_rows, process_rows):
        for row in rows:
            print(row)
    write_results("startup.md", "Import, compilation and fresh-process prediction times",
                  [("Import time (fresh process, median)", import_rows),
                   ("Unpickle and predict 100 rows in a fresh process", process_rows)], notes)


if __name__ == "__main__":
    main()
