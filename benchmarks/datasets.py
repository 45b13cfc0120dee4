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


def _statsmodels_frame(name):
    """The data frame of ``statsmodels.datasets.<name>`` (shipped inside the package)."""
    import importlib

    return importlib.import_module(f"statsmodels.datasets.{name}").load_pandas().data


def _fair():
    # Fair (1978), "A theory of extramarital affairs", 1974 Redbook survey of women: answers
    # on coarse scales (marriage rating 1-5, religiousness 1-4, occupation codes 1-6, ...);
    # class: any affairs (statsmodels' own logit example)
    df = _statsmodels_frame("fair")
    return df.drop(columns="affairs").to_numpy(), (df["affairs"] > 0).to_numpy(np.int64)


def _anes96():
    # American National Election Studies 1996: a survey's 7-point scales (self and candidates
    # left-right, party identification), TV news days, age, education and income bands;
    # class: voted for Dole (1) or Clinton (0). logpopul is log(popul + 0.1): left out
    df = _statsmodels_frame("anes96")
    return df.drop(columns=["vote", "logpopul"]).to_numpy(), df["vote"].to_numpy(np.int64)


def _randhie():
    # RAND Health Insurance Experiment: insurance plan (coinsurance, deductible, premium),
    # health status flags and chronic-disease count of 20,190 person-years; target: log(1 +
    # outpatient doctor visits), the visit counts being heavily skewed
    df = _statsmodels_frame("randhie")
    return df.drop(columns="mdvis").to_numpy(), np.log1p(df["mdvis"].to_numpy(np.float64))


#: Real data that ships inside an installed package, for where ``../shared/data`` is
#: thin (survey answers on a few coarse scales): name -> (task, package, builder). They
#: are built on load (no file is written) and are in the suite when the package is
#: installed (statsmodels 0.15.0 when first measured). Sources: the data sets' pages in
#: statsmodels' documentation (``statsmodels.datasets``).
PACKAGE_SETS = {
    "fair": ("classification", "statsmodels", _fair),
    "anes96": ("classification", "statsmodels", _anes96),
    "randhie": ("regression", "statsmodels", _randhie),
}


def package_sets():
    """The names of :data:`PACKAGE_SETS` whose package is installed."""
    import importlib.util

    return sorted(
        name for name, (_, package, _) in PACKAGE_SETS.items() if importlib.util.find_spec(package)
    )


def load(name):
    """All arrays of ``<DATA_DIR>/<name>.npz`` (or of a :data:`PACKAGE_SETS` set) as a dict.

    Raises
    ------
    FileNotFoundError
        Naming the missing file and how to point the loader elsewhere.
    """
    if name in PACKAGE_SETS:
        X, y = PACKAGE_SETS[name][2]()
        return {"X": np.ascontiguousarray(X, dtype=np.float64), "y": y}
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
