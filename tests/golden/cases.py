"""The models whose fitted arrays and predictions are recorded as golden outputs.

A behaviour-preserving refactor must leave every recorded checksum unchanged
(bit-identical models and predictions). Each case fits one public estimator,
or builds a converted or fine-tuned model, with a fixed seed on one of two
data sets per task; :func:`fingerprint` hashes every array the fitted model
holds and every prediction it makes.

Bits depend on library versions, so records are kept per environment
(:func:`environment_key`), and on two run-time choices that vary between
CPUs of one architecture: numpy dispatches its ufuncs (``np.exp``,
``np.log``, ...) to AVX-512 code on CPUs that have it, whose results differ
from the AVX2 code's in the last bits, and OpenBLAS picks its kernels per CPU.
numba's kernels are not among them: without ``fastmath`` the code compiled
for the host and the generic code shipped in the wheel give the same bits
(checked on an AVX-512 AMD EPYC). The cases therefore run in a child process
with numpy's dispatch capped at AVX2 and OpenBLAS's Haswell kernels
(:func:`canonical_environment`), which makes the bits the same on every
x86-64 CPU with AVX2 and FMA, so one record per set of library versions
holds wherever the suite runs. Record with ``python -m tests.golden.record``.
"""

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, make_classification, make_regression

from obliquetrees import (
    CO2ForestClassifier,
    E2EDTClassifier,
    HingeForestClassifier,
    HingeForestRegressor,
    SoftTreeClassifier,
    SoftTreeRegressor,
)

#: Two data sets per task: (X, y) with a fixed train/test cut.
DATASETS = {
    "classification": {
        "breast_cancer": lambda: load_breast_cancer(return_X_y=True),
        "synthetic3": lambda: make_classification(
            400, 8, n_informative=5, n_classes=3, random_state=3
        ),
    },
    "regression": {
        "diabetes": lambda: load_diabetes(return_X_y=True),
        "synthetic": lambda: make_regression(400, 8, noise=1.0, random_state=3),
    },
}


def _forest(cls, **params):
    return lambda X, y: cls(random_state=0, **params).fit(X, y)


def _converted(kind):
    def build(X, y):
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        from obliquetrees.convert import from_sklearn

        cls = RandomForestClassifier if kind == "classification" else RandomForestRegressor
        return from_sklearn(cls(n_estimators=5, max_depth=6, random_state=0).fit(X, y))

    return build


def _finetuned(kind):
    def build(X, y):
        from obliquetrees.machine import finetune

        return finetune(_converted(kind)(X, y), X, y, epochs=3, random_state=0)

    return build


def _refitted(kind):
    def build(X, y):
        from obliquetrees.machine import refit_leaves

        return refit_leaves(_converted(kind)(X, y), X, y, n_iter=3)

    return build


#: name -> (task, builder(X, y) -> fitted model)
CASES = {
    "CO2ForestClassifier": (
        "classification",
        # recorded before issue 39 made the out-of-bag test the default: the paper's stump
        _forest(
            CO2ForestClassifier,
            n_estimators=5,
            max_features="sqrt",
            oblique_penalty=None,
            oblique_test="fit",
        ),
    ),
    "CO2ForestClassifier_defaults": (
        "classification",
        _forest(CO2ForestClassifier, n_estimators=5),
    ),
    "E2EDTClassifier": (
        "classification",
        _forest(E2EDTClassifier, max_depth=4, max_epochs=5, learning_rate=0.05),
    ),
    "E2EDTClassifier_forest": (
        "classification",
        _forest(E2EDTClassifier, n_estimators=3, max_depth=4, max_epochs=5, learning_rate=0.05),
    ),
    "SoftTreeClassifier": (
        "classification",
        _forest(SoftTreeClassifier, n_restarts=3, max_epochs=10, learning_rate=0.5),
    ),
    "SoftTreeRegressor": (
        "regression",
        _forest(SoftTreeRegressor, n_restarts=3, max_epochs=10, learning_rate=0.5),
    ),
    "HingeForestClassifier": (
        "classification",
        _forest(
            HingeForestClassifier,
            feature_screening=False,  # recorded before the classifier's default became "auto"
            n_estimators=5,
            max_depth=3,
            n_hinge_features=8,
            learning_rate=0.05,
            max_epochs=20,
        ),
    ),
    "HingeForestRegressor": (
        "regression",
        _forest(
            HingeForestRegressor,
            head="sum",  # recorded before the regressor's default became "linear"
            feature_screening=False,  # and before it became "auto"
            n_estimators=5,
            max_depth=3,
            n_hinge_features=8,
            learning_rate=0.05,
            max_epochs=20,
        ),
    ),
    "converted_classifier": ("classification", _converted("classification")),
    "converted_regressor": ("regression", _converted("regression")),
    "finetuned_classifier": ("classification", _finetuned("classification")),
    "finetuned_regressor": ("regression", _finetuned("regression")),
    "refit_leaves_classifier": ("classification", _refitted("classification")),
}

#: Fitted attributes that are not part of the model (wall-clock times).
_NOT_MODEL = {"epoch_times_"}


def _arrays(obj, prefix, out, depth=0):
    """Every ndarray reachable from ``obj``'s attributes, by dotted name."""
    if depth > 3:
        return
    if isinstance(obj, np.ndarray):
        out[prefix] = obj
    elif isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            _arrays(item, f"{prefix}[{i}]", out, depth + 1)
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            _arrays(obj[key], f"{prefix}[{key!r}]", out, depth + 1)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("obliquetrees"):
        for key in sorted(vars(obj)):
            if not key.startswith("__") and key not in _NOT_MODEL | _STORAGE_ONLY:
                _arrays(_logical(key, _recorded(obj, key)), f"{prefix}.{key}", out, depth + 1)


#: Containers' storage details that are not recorded arrays: container format 3
#: keeps the missing-value terms of most models as one ``missing_fill`` per
#: forest (the terms, ``weight_missing``, are not in the record either; see
#: ``tests/test_golden.py``). A hinge model's ``x_ignored`` is recorded within
#: ``x_scale`` (see :func:`_recorded`).
_STORAGE_ONLY = {"missing_fill", "x_ignored"}


def _recorded(obj, key):
    """Attribute ``key`` as the record holds it.

    Format 4 may store the feature ids of dense split rows implicitly; the
    record has one id per weight (the attribute's form). A hinge model stores
    the scale of a feature without spread as 1 with ``x_ignored`` set; the
    record holds the scale it divides by (+inf there, as models stored before).
    """
    if key == "weight_index":
        return getattr(obj, key)
    if key == "x_scale" and hasattr(obj, "z_scale"):
        return obj.z_scale()
    return vars(obj)[key]


def _logical(key, value):
    """A stored array as the record holds it: format 3's int32 feature ids as int64.

    The ids' values are compared bit for bit; only their storage width changed.
    """
    if key == "weight_index" and isinstance(value, np.ndarray) and value.dtype == np.int32:
        return value.astype(np.int64)
    return value


def _digest(array):
    array = np.ascontiguousarray(array)
    head = f"{array.dtype.str}{array.shape}".encode()
    return hashlib.sha256(head + array.tobytes()).hexdigest()[:16]


def fingerprint(model, X):
    """Checksums of the fitted arrays and of every prediction on ``X``."""
    arrays = {}
    getattr(model, "forest_", None)  # hinge forests store their trees on first access
    for key in sorted(vars(model)):
        if key.endswith("_") and not key.startswith("__") and key not in _NOT_MODEL:
            _arrays(vars(model)[key], key, arrays)
        elif key == "_model":  # the hinge forests' trained state
            _arrays(vars(model)[key], key, arrays)
    outputs = {"predict": model.predict(X), "apply": model.apply(X)}
    if hasattr(model, "predict_proba"):
        outputs["predict_proba"] = model.predict_proba(X)
    if hasattr(model, "decision_function"):
        outputs["decision_function"] = model.decision_function(X)
    arrays.update({f"output.{k}": v for k, v in outputs.items()})
    return {name: _digest(array) for name, array in arrays.items()}


def run_case(name, dataset):
    """Fingerprint of case ``name`` fitted on the training part of ``dataset``."""
    task, build = CASES[name]
    X, y = DATASETS[task][dataset]()
    cut = int(0.75 * X.shape[0])
    model = build(X[:cut], y[:cut])
    return fingerprint(model, X[cut:])


def all_runs():
    """``(case, data set)`` pairs: every case on both data sets of its task."""
    return [(name, data) for name, (task, _) in CASES.items() for data in DATASETS[task]]


def canonical_environment():
    """Environment variables that give every x86-64 CPU with AVX2 and FMA the same bits.

    Returns ``(variables, None)``, or ``(None, reason)`` where the cases cannot
    run in that configuration (another architecture, a CPU without AVX2/FMA).
    numpy's dispatch targets above AVX2 (``X86_V4`` and the ``AVX512*``
    groups) are switched off; OpenBLAS is told to use its Haswell kernels,
    which need exactly AVX2 and FMA.
    """
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None, f"the golden record is made on x86-64 CPUs; this is {platform.machine()}"
    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        return None, "the golden record is made with AVX2 and FMA, which this CPU lacks"
    above_avx2 = [t for t in __cpu_dispatch__ if t == "X86_V4" or t.startswith("AVX512")]
    return {"NPY_DISABLE_CPU_FEATURES": " ".join(above_avx2), "OPENBLAS_CORETYPE": "Haswell"}, None


def run_all_canonical():
    """``{"key": environment_key(), "runs": {"case/data": fingerprint}}`` from a child process.

    The child runs :func:`all_runs` under :func:`canonical_environment`, from
    the repository root so that it imports the same package as this process.
    Raises ``RuntimeError`` with the reason where that configuration is not
    available.
    """
    variables, reason = canonical_environment()
    if variables is None:
        raise RuntimeError(reason)
    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-m", "tests.golden.cases"],
        cwd=root,
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the golden cases failed in the child process:\n{child.stderr}")
    return json.loads(child.stdout.splitlines()[-1])


def environment_key():
    """What the bits depend on: platform, numpy's SIMD cap, BLAS build and library versions.

    Meant to be called in the child of :func:`run_all_canonical`, where the
    BLAS entries name the Haswell kernels it asked for.
    """
    import numba
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    blas = sorted(
        f"{p['internal_api']} {p['version']} {p.get('architecture')}"
        for p in threadpool_info()
        if p["user_api"] == "blas"
    )
    return " | ".join(
        [
            f"{sys.platform}-{platform.machine()} AVX2+FMA, numpy SIMD up to AVX2",
            f"numpy {np.__version__}",
            f"scipy {scipy.__version__}",
            f"scikit-learn {sklearn.__version__}",
            f"numba {numba.__version__}",
            *blas,
        ]
    )


if __name__ == "__main__":
    # the child of run_all_canonical: every run's fingerprint, as JSON on stdout
    runs = {f"{name}/{data}": run_case(name, data) for name, data in all_runs()}
    print(json.dumps({"key": environment_key(), "runs": runs}))
