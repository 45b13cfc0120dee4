"""Load the benchmark data sets of ``../shared/data`` (see MANIFEST.md there).

>>> from benchmarks.datasets import load, train_test
>>> X_train, y_train, X_test, y_test = train_test("letter")  # doctest: +SKIP
"""

import os
from pathlib import Path

import numpy as np

#: ../shared/data beside the repository; OBLIQUETREES_DATA overrides it.
DATA_DIR = Path(
    os.environ.get("OBLIQUETREES_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def load(name):
    """All arrays of ``<DATA_DIR>/<name>.npz`` as a dict.

    Raises
    ------
    FileNotFoundError
        Naming the missing file and how to point the loader elsewhere.
    """
    path = DATA_DIR / f"{name}.npz"
    if not path.exists():
        raise FileNotFoundError(
            f"Benchmark data set {name!r} not found: expected {path}. Put the shared data "
            "directory beside the repository or set OBLIQUETREES_DATA to its path."
        )
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def train_test(name, test_size=1 / 3, seed=0):
    """``X_train, y_train, X_test, y_test`` of a data set.

    The fixed split is used where the file has one; otherwise a seeded
    random split with ``test_size`` of the rows in the test part.
    """
    data = load(name)
    if "X_train" in data:
        return data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    X, y = data["X"], data["y"]
    order = np.random.default_rng(seed).permutation(len(X))
    n_test = int(round(test_size * len(X)))
    test, train = order[:n_test], order[n_test:]
    return X[train], y[train], X[test], y[test]
