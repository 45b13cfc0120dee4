"""Run every kernel path a user commonly reaches, so the build compiles it.

Run by ``build_kernel_cache.py`` in a process where kernels are compiled for
the generic CPU and saved into the package's ``_kernel_cache`` directory.
Compilation depends on argument types, but a few paths only start beyond
some size (a node table that grows, prediction in blocks), so each estimator
first fits with its defaults on a whole data set (digits, diabetes), as a new
user's first fit does; then small models take the other paths with the types
of real use: dense float64 and float32 prediction, CSR, missing values,
sample weights, multi-output targets, several threads, the options that
select other kernels (E2EDT routing, soft-tree variants, monotonic
constraints), and the scikit-learn conversion, decision-machine and
fine-tuning paths. A path not
run here still works: its kernels compile on first use, as without the
shipped cache.
"""

import sys
import tempfile
import time
from pathlib import Path

import joblib
import numpy as np
from scipy import sparse
from sklearn.base import is_classifier
from sklearn.datasets import load_diabetes, load_digits
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from obliquetrees._registry import ESTIMATORS, load
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import finetune, refit_leaves, to_machine

#: Small settings per estimator: kernels are the defaults', sizes are cut.
SMALL = {
    "CO2ForestClassifier": dict(n_estimators=2, max_cccp_iter=2),
    "CO2ForestRegressor": dict(n_estimators=2, max_cccp_iter=2),
    "E2EDTClassifier": dict(max_depth=3, max_epochs=2),
    "E2EDTRegressor": dict(max_depth=3, max_epochs=2),
    "HingeForestClassifier": dict(n_estimators=2, max_depth=3, max_epochs=2),
    "HingeForestRegressor": dict(n_estimators=2, max_depth=3, max_epochs=2),
    "SoftTreeClassifier": dict(max_depth=3),
    "SoftTreeRegressor": dict(max_depth=3),
}
#: Options whose values select other kernels, and the values to run.
VARIANTS = {
    "E2EDTClassifier": [dict(routing="soft"), dict(routing="hard"), dict(n_estimators=2)],
    "E2EDTRegressor": [dict(routing="soft"), dict(n_estimators=2)],
}


def estimators():
    """Every public estimator (the registry's list)."""
    return [load(name) for name in ESTIMATORS]


def data():
    X, y = load_digits(return_X_y=True)
    Xr, yr = load_diabetes(return_X_y=True)
    return X / 16.0, y, Xr, yr


def run_predictions(model, X):
    # a large batch too: prediction picks its path (traversal or matrix form) and
    # its blocks by batch size
    X_large = np.tile(X, (max(1, 20_000 // len(X)), 1))
    # read-only arrays (memory maps) are another numba type: prediction takes them as they are
    read_only = [X.copy(), X.astype(np.float32)]
    for X_in in read_only:
        X_in.flags.writeable = False
    for X_in in (X, X_large, X.astype(np.float32), sparse.csr_matrix(X), *read_only):
        model.predict(X_in)
        if hasattr(model, "predict_proba"):
            model.predict_proba(X_in)
    for X_in in (X, X.astype(np.float32), sparse.csr_matrix(X), *read_only):
        model.apply(X_in)
        model.decision_path(X_in)
        if _has_quantiles(model):
            model.predict_quantiles(X_in)


def _has_quantiles(model):
    """Whether ``model`` gives quantiles: leaf targets stored, hard routing."""
    stored = vars(model).get("_leaf_targets") is not None
    return stored and getattr(model, "routing", "hard") == "hard"


def run_served(model, X):
    """Predictions of ``model`` loaded with ``joblib.load(..., mmap_mode="r")``.

    A model served from a memory map holds read-only arrays, another numba
    type than the fitted model's.
    """
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "model.joblib"
        joblib.dump(model, path)
        served = joblib.load(path, mmap_mode="r")
        for X_in in (X, X.astype(np.float32), sparse.csr_matrix(X)):
            for method in ("predict", "predict_proba", "apply", "decision_path"):
                if hasattr(served, method):
                    getattr(served, method)(X_in)
            if _has_quantiles(served):  # its leaf targets are read-only memory maps too
                served.predict_quantiles(X_in)
        del served  # before the directory goes: the memory map holds the file open


def run_estimator(cls, X, y):
    """The defaults on the whole data set (the first fit of a new user), then variants."""
    model = cls(random_state=0).fit(X, y)
    run_predictions(model, X)
    run_served(model, X)
    model.score(X, y)
    # paths taken with other inputs and options: small models on part of the data
    params = SMALL.get(cls.__name__, {})
    tags = cls().__sklearn_tags__()
    rng = np.random.default_rng(0)
    X, y = X[:300], y[:300]
    cls(random_state=0, **params).fit(X, y, sample_weight=rng.uniform(0.5, 2.0, len(y)))
    cls(random_state=0, n_jobs=2, **params).fit(X, y).predict(X)
    X_nan = X.copy()
    X_nan[rng.random(X.shape) < 0.1] = np.nan
    run_predictions(cls(random_state=0, **params).fit(X_nan, y), X_nan)
    if tags.input_tags.sparse:
        run_predictions(cls(random_state=0, **params).fit(sparse.csr_matrix(X), y), X)
    if cls.__name__.startswith("CO2"):
        fit_without_presort(cls, X, y, params)
    if tags.target_tags.multi_output and not is_classifier(cls()):
        cls(random_state=0, **params).fit(X, np.c_[y, -y]).predict(X)
    for variant in VARIANTS.get(cls.__name__, []):
        run_predictions(cls(random_state=0, **{**params, **variant}).fit(X, y), X)
    # monotonic constraints train through kernels of their own (a regressor or two classes)
    cst = np.zeros(X.shape[1], dtype=np.int8)
    cst[[2, 3]] = (1, -1)
    y_mono = (y > np.median(y)).astype(int) if is_classifier(cls()) else y
    cls(random_state=0, monotonic_cst=cst, **params).fit(X, y_mono).predict(X)
    if tags.input_tags.sparse:  # CO2's constrained CSR growth: 49 kernels, 90 s on first use
        for X_csr in (sparse.csr_matrix(X), sparse.csr_matrix(X_nan)):
            cls(random_state=0, monotonic_cst=cst, **params).fit(X_csr, y_mono).predict(X_csr)


def fit_without_presort(cls, X, y, params):
    """CO2's fits of inputs above its presort limit sort in every node: other kernel types.

    Such inputs (``co2.training.MAX_PRESORTED_ENTRIES`` entries and more, as
    the README's 20,000 x 100,000 CSR) are too large for this workload, so
    the limit is lowered to 0 for a small dense and a small CSR fit.
    """
    from obliquetrees.co2 import training

    limit = training.MAX_PRESORTED_ENTRIES
    training.MAX_PRESORTED_ENTRIES = 0
    try:
        for X_in in (X, sparse.csr_matrix(X)):
            cls(random_state=0, **params).fit(X_in, y).predict(X_in)
    finally:
        training.MAX_PRESORTED_ENTRIES = limit


def run_conversions(Xc, yc, Xr, yr):
    forests = [
        (RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(Xc, yc), Xc, yc),
        (RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(Xr, yr), Xr, yr),
    ]
    for forest, X, y in forests:
        converted = from_sklearn(forest)
        run_predictions(converted, X)
        machine = to_machine(converted, cache=False)
        for X_in in (X, sparse.csr_matrix(X)):
            machine.predict_value(X_in)
            machine.apply(X_in)
        tuned = finetune(converted, X, y, epochs=1)
        tuned.predict(X)
        refit_leaves(converted, X, y, n_iter=1)
    # fine-tuning under the monotonic constraints of a constrained source
    cst = np.zeros(Xr.shape[1], dtype=np.int8)
    cst[2] = 1
    forest = RandomForestRegressor(n_estimators=3, max_depth=4, monotonic_cst=cst, random_state=0)
    finetune(from_sklearn(forest.fit(Xr, yr)), Xr, yr, epochs=1).predict(Xr)


#: Seconds each part compiled for in a build on two cores (each after the heavier parts
#: of its process, whose shared kernels it then loads); only their order matters. The
#: parts are dealt round robin, heaviest first, to the build's compiling processes:
#: with two, the CO2 classifier against the CO2 regressor (once both in one process,
#: 665 of the build's 743 s), then the others in turn. Kernels two parts share are
#: compiled by both and merged.
COMPILE_SECONDS = {
    "CO2ForestClassifier": 491,
    "CO2ForestRegressor": 478,
    "SoftTreeClassifier": 94,
    "SoftTreeRegressor": 78,
    "E2EDTRegressor": 54,
    "E2EDTClassifier": 47,
    "HingeForestClassifier": 41,
    "HingeForestRegressor": 35,
    "conversions": 7,
}


def parts(Xc, yc, Xr, yr):
    """``[(name, run, args)]``: every estimator and the conversions, heaviest first."""
    found = []
    for cls in estimators():
        args = (cls, Xc, yc) if is_classifier(cls()) else (cls, Xr, yr)
        found.append((cls.__name__, run_estimator, args))
    found.append(("conversions", run_conversions, (Xc, yc, Xr, yr)))
    # an estimator new to the registry and not yet measured goes first
    return sorted(found, key=lambda part: -COMPILE_SECONDS.get(part[0], np.inf))


def main(part=0, n_parts=1):
    """Run this process's share of the paths, printing each and its time as it finishes."""
    Xc, yc, Xr, yr = data()
    mine = parts(Xc, yc, Xr, yr)[part::n_parts]
    start = time.perf_counter()
    for name, run, args in mine:
        part_start = time.perf_counter()
        run(*args)
        now = time.perf_counter()
        print(f"    {name}: {now - part_start:.0f} s (process {part + 1}/{n_parts})", flush=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
