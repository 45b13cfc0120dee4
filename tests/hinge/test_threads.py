"""Threads of the hinge forests' training: OpenMP, where numba uses it, does not spin.

Training launches two parallel regions per 50-row minibatch; spinning GNU
OpenMP workers wasted most of the CPU on a loaded machine
(``benchmarks/results/hinge.md``, section scale). ``obliquetrees._core._jit``
loads numba's OpenMP pool with the passive wait policy unless the user chose
one. libgomp reports what it read at load time with ``OMP_DISPLAY_ENV=VERBOSE``
(on stderr); it prints ``OMP_WAIT_POLICY = 'PASSIVE'`` for an unset policy
too, so the tests read the spin count, which is 0 only under the passive
policy (300000 by default). Each case runs in a fresh interpreter.
"""

import pytest

from tests.adversarial._subprocess import assert_ok, run_python

#: libgomp's spin count under the passive policy, as OMP_DISPLAY_ENV=VERBOSE prints it.
SPIN_NONE = "GOMP_SPINCOUNT = '0'"

_FIT = """
import os
{setup}
import numpy as np
import obliquetrees._core._jit  # noqa: F401  (chooses the layer, loads OpenMP if used)
print("policy after import:", os.environ.get("OMP_WAIT_POLICY"))
from sklearn.datasets import make_classification
from obliquetrees import HingeForestClassifier
X, y = make_classification(300, 6, n_classes=3, n_informative=4, random_state=0)
one = HingeForestClassifier(4, max_depth=3, n_hinge_features=5, max_epochs=2,
                            random_state=0, n_jobs=1).fit(X, y)
two = HingeForestClassifier(4, max_depth=3, n_hinge_features=5, max_epochs=2,
                            random_state=0, n_jobs=2).fit(X, y)
assert np.array_equal(one.predict_proba(X), two.predict_proba(X))
import numba
print("layer:", numba.threading_layer())
"""


def _omp_available():
    try:
        from numba.np.ufunc import omppool  # noqa: F401
    except ImportError:
        return False
    return True


def _run(setup):
    proc = run_python(_FIT.format(setup=setup), timeout=300)
    assert_ok(proc)
    return proc


@pytest.mark.skipif(not _omp_available(), reason="numba's OpenMP layer cannot load here")
def test_openmp_layer_is_loaded_passive_and_environment_restored():
    proc = _run(
        'os.environ["NUMBA_THREADING_LAYER"] = "omp"\nos.environ["OMP_DISPLAY_ENV"] = "VERBOSE"'
    )
    assert "layer: omp" in proc.stdout
    assert SPIN_NONE in proc.stderr
    # the variable was set only while libgomp loaded: children see the user's environment
    assert "policy after import: None" in proc.stdout


@pytest.mark.skipif(not _omp_available(), reason="numba's OpenMP layer cannot load here")
def test_user_wait_policy_wins():
    proc = _run(
        'os.environ["NUMBA_THREADING_LAYER"] = "omp"\n'
        'os.environ["OMP_DISPLAY_ENV"] = "VERBOSE"\n'
        'os.environ["OMP_WAIT_POLICY"] = "ACTIVE"'
    )
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in proc.stderr
    assert SPIN_NONE not in proc.stderr
    assert "policy after import: ACTIVE" in proc.stdout


def test_tbb_layer_does_not_load_openmp():
    proc = _run(
        'os.environ.pop("NUMBA_THREADING_LAYER", None)\nos.environ["OMP_DISPLAY_ENV"] = "VERBOSE"'
    )
    if "layer: tbb" not in proc.stdout:
        pytest.skip("numba does not use TBB here")
    # the package loaded no OpenMP runtime passively (scikit-learn's own libgomp may print
    # its default environment)
    assert SPIN_NONE not in proc.stderr
