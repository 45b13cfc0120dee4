"""No kernel compiles on a first call a user can be expected to make.

With the kernels shipped in the wheel usable (an installed wheel, or a source
checkout whose sources the installed build was made from), a fresh process
with an empty numba cache fits and predicts with every public estimator on
the inputs users pass (float64, read-only, F-ordered, float32, big-endian,
integer, pandas, CSR), then runs scikit-learn's ``check_estimator`` on each (with the suite's
``FAST_PARAMS``), and
numba writes no kernel to its cache: everything was loaded from the shipped
kernels. Where they are not usable, the test skips and says so.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from obliquetrees._core._kernel_cache import shipped_kernels_usable

ROOT = Path(__file__).resolve().parents[1]

#: Every public method of every estimator on every kind of input; then check_estimator.
FIRST_CALLS = """
import warnings
import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.base import is_classifier
from sklearn.datasets import load_diabetes, load_digits
from sklearn.utils.estimator_checks import check_estimator

import obliquetrees
from obliquetrees.utils.estimator_checks import expected_failed_checks

from tests.test_common import FAST_PARAMS

Xc, yc = load_digits(return_X_y=True)
Xr, yr = load_diabetes(return_X_y=True)


def inputs(X):
    read_only = X.copy()
    read_only.flags.writeable = False
    yield X
    yield read_only
    yield np.asfortranarray(X)
    yield X.astype(np.float32)
    yield X.astype(">f8")
    yield np.rint(X).astype(np.int64)
    yield pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    yield sparse.csr_matrix(X)


for name in obliquetrees.__all__:
    cls = getattr(obliquetrees, name)
    if not isinstance(cls, type):
        continue
    params = {"random_state": 0, **FAST_PARAMS[name]}
    X, y = (Xc[:400], yc[:400]) if is_classifier(cls()) else (Xr, yr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for X_in in inputs(X):
            model = cls(**params).fit(X_in, y)
            model.score(X_in, y)
            for method in ("predict", "predict_proba", "apply", "decision_path"):
                if hasattr(model, method):
                    getattr(model, method)(X_in)
        estimator = cls(**params)
        check_estimator(estimator, expected_failed_checks=expected_failed_checks(estimator))
    print(name, "done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not shipped_kernels_usable(),
    reason="no shipped kernels built from these sources (run `pip install .` first): "
    "every kernel compiles on first use, as numba does",
)
def test_first_calls_load_the_shipped_kernels(tmp_path):
    cache = tmp_path / "numba"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALLS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    compiled = sorted(p.name for p in cache.rglob("*.nbi"))
    assert compiled == [], f"kernels compiled on a first call: {compiled}"
