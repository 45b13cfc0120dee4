"""Forking, forkserver and spawn after a parallel prediction (issue: fork safety).

numba's GNU OpenMP layer kills or hangs a child forked after a parallel
kernel ran; the package loads the ``tbb`` wheel's library so numba uses its
fork-safe TBB layer. Each case runs in a fresh interpreter with a timeout.
"""

import pytest

from tests.adversarial._subprocess import assert_ok, run_python

_FIT_AND_PREDICT = """
import numpy as np
from sklearn.datasets import make_classification
from obliquetrees import CO2ForestClassifier
X, y = make_classification(4000, 8, random_state=0)
model = CO2ForestClassifier(n_estimators=4, max_depth=4, n_jobs=2, random_state=0).fit(X, y)
expected = model.predict_proba(X)
leaves = model.apply(X)                    # always the parallel traversal kernel (prange)
"""


def _tbb_wheel_installed():
    from importlib import metadata

    try:
        metadata.version("tbb")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _tbb_wheel_installed(), reason="the tbb wheel is not installed here")
def test_numba_uses_the_tbb_layer_from_the_wheel():
    proc = run_python(
        _FIT_AND_PREDICT
        + """
import numba
print(numba.threading_layer())
"""
    )
    assert_ok(proc)
    assert proc.stdout.strip().splitlines()[-1] == "tbb"


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no os.fork on this platform")
def test_os_fork_after_parallel_predict():
    proc = run_python(
        _FIT_AND_PREDICT
        + """
import os
pid = os.fork()
if pid == 0:
    ok = np.array_equal(model.apply(X), leaves) and np.array_equal(model.predict_proba(X), expected)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
print("child ok")
""",
        timeout=180,
    )
    assert_ok(proc)
    assert "child ok" in proc.stdout


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_pool_after_parallel_predict(method):
    import multiprocessing

    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available here")
    proc = run_python(
        f"""
import multiprocessing
import numpy as np


def predict(args):
    model, X = args
    model.apply(X)
    return model.predict_proba(X)


if __name__ == "__main__":
{_indent(_FIT_AND_PREDICT)}
    with multiprocessing.get_context({method!r}).Pool(2) as pool:
        results = pool.map(predict, [(model, X[:2000]), (model, X[2000:])])
    assert np.array_equal(np.vstack(results), expected)
    print("pool ok")
""",
        timeout=240,
    )
    assert_ok(proc)
    assert "pool ok" in proc.stdout


def test_joblib_multiprocessing_grid_search_after_parallel_predict():
    proc = run_python(
        _FIT_AND_PREDICT
        + """
import joblib
from sklearn.model_selection import GridSearchCV
with joblib.parallel_backend("multiprocessing", n_jobs=2):
    search = GridSearchCV(
        CO2ForestClassifier(n_estimators=2, max_depth=3, random_state=0),
        {"nu": [1.0, 10.0]}, cv=2,
    ).fit(X[:400], y[:400])
print("search ok", search.best_params_)
""",
        timeout=240,
    )
    assert_ok(proc)
    assert "search ok" in proc.stdout


def _indent(code):
    return "\n".join("    " + line for line in code.strip().splitlines())
