"""Boundary cases of issue 37: inputs and parameters at the edge of what a fit can hold.

Features without spread in a saved hinge model, a constant regression target,
sample weights whose sum overflows float64, absurd ``n_estimators`` and
``n_jobs``, and Ctrl-C during a fit (in a child process).
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import is_classifier

from obliquetrees import HingeForestClassifier, HingeForestRegressor
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()


def _make(cls, **extra):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0, **extra})


def _fit(est, X, y, sample_weight=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny fits: convergence warnings are expected
        return est.fit(X, y, sample_weight=sample_weight)


# ------------------------------------------- hinge features without spread
def _without_spread(case):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    if case == "constant column":
        X[:, 2] = 3.0
    elif case == "all-NaN column":
        X[:, 2] = np.nan
    else:  # the constant (blank) border pixels of the digits
        from sklearn.datasets import load_digits

        X = load_digits().data[:200]
        assert np.any(X.std(axis=0) == 0)
    return X


@pytest.mark.parametrize("case", ["constant column", "all-NaN column", "digits"])
@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_hinge_model_with_a_feature_without_spread_loads_and_ignores_it(cls, case):
    """Such a feature is stored as ignored with a finite scale of 1: the saved model loads."""
    X = _without_spread(case)
    y = X[:, 0] > np.nanmedian(X[:, 0])
    est = _fit(_make(cls), X, y if is_classifier(cls()) else y.astype(float))
    model = est._model
    assert np.any(model.x_ignored)
    assert np.all(np.isfinite(model.x_scale)) and np.all(model.x_scale[model.x_ignored] == 1.0)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    # the feature carried no information in training and cannot move a prediction
    flat = np.flatnonzero(model.x_ignored[: X.shape[1]])
    moved = X.copy()
    moved[:, flat] = 123.0
    np.testing.assert_array_equal(loaded.predict(moved), est.predict(X))


def test_hinge_model_saved_with_an_infinite_scale_loads_as_the_finite_form():
    """Models saved before ``x_ignored`` marked such a feature by ``x_scale = +inf``."""
    X = _without_spread("constant column")
    est = _fit(_make(HingeForestClassifier), X, X[:, 0] > 0)
    state = est._model.__getstate__()
    ignored = state.pop("x_ignored")
    state["x_scale"] = np.where(ignored, np.inf, state["x_scale"])
    old = type(est._model).__new__(type(est._model))
    old.__setstate__(state)
    np.testing.assert_array_equal(old.x_ignored, ignored)
    np.testing.assert_array_equal(old.x_scale, est._model.x_scale)
    np.testing.assert_array_equal(old.z_scale(), est._model.z_scale())


@pytest.mark.parametrize("bad", [np.nan, 0.0, -1.0, np.inf, -np.inf])
def test_hinge_model_refuses_a_scale_that_is_not_finite_and_positive(bad):
    X = _without_spread("constant column")
    est = _fit(_make(HingeForestClassifier), X, X[:, 0] > 0)
    est._model.x_scale[0] = bad
    with pytest.raises(ValueError, match="x_scale"):
        pickle.loads(pickle.dumps(est))


def test_hinge_model_refuses_a_missing_or_wrong_ignored_mask():
    X = _without_spread("constant column")
    est = _fit(_make(HingeForestClassifier), X, X[:, 0] > 0)
    est._model.x_ignored = est._model.x_ignored[:-1]
    with pytest.raises(ValueError, match="x_ignored"):
        pickle.loads(pickle.dumps(est))


# --------------------------------------------------------- constant target
REGRESSORS = [cls for cls in ESTIMATORS if not is_classifier(cls())]


@pytest.mark.parametrize("value", [0.0, 0.1, -7.3, 2.5e5])
@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
def test_constant_target_is_predicted_exactly(cls, value):
    X = np.random.default_rng(0).normal(size=(200, 4))
    est = _fit(_make(cls), X, np.full(200, value))
    X_new = np.random.default_rng(1).normal(size=(50, 4)) * 3
    np.testing.assert_allclose(est.predict(X_new), value, rtol=1e-15, atol=0)


@pytest.mark.parametrize("head", ["sum", "linear"])
@pytest.mark.parametrize("max_epochs", [1, 3, 20])
def test_hinge_regressor_fits_a_constant_target_whatever_its_head_and_epochs(head, max_epochs):
    """The leaf weights and the head's bias start at 0, the exact fit, and stay there."""
    X = np.random.default_rng(0).normal(size=(200, 4))
    est = _fit(_make(HingeForestRegressor, head=head, max_epochs=max_epochs), X, np.full(200, 2.5))
    X_new = np.random.default_rng(1).normal(size=(50, 4)) * 3
    np.testing.assert_array_equal(est.predict(X_new), 2.5)
    assert not np.any(est._model.W)
    # the stored trees (ONNX export, decision machines) hold the same: value 0 around the mean
    assert not np.any(est.forest_.value)


def test_hinge_regressor_partial_fit_learns_after_a_constant_first_batch():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    est = _make(HingeForestRegressor, n_hinge_features=None)
    est.partial_fit(X[:200], np.zeros(200))
    np.testing.assert_array_equal(est.predict(X), 0.0)
    for _ in range(20):
        est.partial_fit(X[200:], X[200:, 0])
    assert np.corrcoef(est.predict(X), X[:, 0])[0, 1] > 0.5


# ------------------------------------------- weights whose total overflows
def _weight_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    return X, X[:, 0] > 0, X[:, 0] + 0.5 * X[:, 1]


def _outputs(est, X):
    return est.predict_proba(X) if is_classifier(est) else est.predict(X)


def _assert_proper(est, out):
    assert np.all(np.isfinite(out))
    if is_classifier(est):
        np.testing.assert_allclose(out.sum(axis=1), 1.0)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_weights_of_1e307_fit(cls):
    """The weights' sum overflows: NaN predictions (soft trees) or a refused forest before."""
    X, labels, target = _weight_data()
    est = _fit(_make(cls), X, labels if is_classifier(cls()) else target, np.full(100, 1e307))
    _assert_proper(est, _outputs(est, X))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_uniform_weights_whose_sum_overflows_fit_as_no_weights(cls):
    X, labels, target = _weight_data()
    y = labels if is_classifier(cls()) else target
    got = _outputs(_fit(_make(cls), X, y, np.full(100, 2.0**1020)), X)
    np.testing.assert_array_equal(got, _outputs(_fit(_make(cls), X, y, np.ones(100)), X))


#: Training depends on the weights' ratios only, bit for bit under a power-of-two
#: scaling, for every estimator but CO2ForestClassifier: its entropies (x log x of
#: weighted counts) round differently when the counts are halved (6 % of its
#: predictions move with weights times 0.5 at be6b74f, without any overflow).
_RATIO_EXACT = [cls for cls in ESTIMATORS if cls.__name__ != "CO2ForestClassifier"]


@pytest.mark.parametrize("exponent", [1018, -1000])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_weights_out_of_range_fit_as_their_ratios(cls, exponent):
    """Finite weights whose sum overflows (or that are near the smallest numbers)."""
    X, labels, target = _weight_data()
    y = labels if is_classifier(cls()) else target
    ratios = np.random.default_rng(1).uniform(0.5, 2.0, size=100)
    extreme = np.ldexp(ratios, exponent)  # exact: normal numbers
    with np.errstate(over="ignore"):
        assert not 2.0**-128 <= extreme.sum() <= 2.0**128
    est = _fit(_make(cls), X, y, extreme)
    got = _outputs(est, X)
    _assert_proper(est, got)
    if cls in _RATIO_EXACT:
        np.testing.assert_array_equal(got, _outputs(_fit(_make(cls), X, y, ratios), X))


def test_ordinary_weights_are_used_as_given():
    from obliquetrees.utils.validation import bounded_weights

    for weights in (np.ones(5), np.array([0.0, 1e-30, 3.0, 1e30]), np.full(10, 2.0**120)):
        assert bounded_weights(weights) is weights
    scaled = bounded_weights(np.array([0.0, 2.0**1000, 3 * 2.0**1020]))
    np.testing.assert_array_equal(scaled, [0.0, 2.0**-21, 1.5])
    np.testing.assert_array_equal(bounded_weights(np.full(4, 2.0**-1000)), np.ones(4))


# ------------------------------------------------------- absurd forest sizes
#: A child process refits a fitted forest with n_estimators=10**7. A watchdog ends
#: it (exit 3) once it holds more than 2 GB or takes more than 20 s, which is how
#: CO2 and E2EDT (memory grows before the first tree) and hinge regressors (past
#: the size check, then killed by the OOM killer above 23 GB) failed at be6b74f.
_ABSURD_N_ESTIMATORS = """
import os, resource, sys, threading, time, warnings
import numpy as np
import obliquetrees
from tests.test_common import FAST_PARAMS

def watchdog():
    start = time.monotonic()
    while True:
        time.sleep(0.05)
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        if rss > 2e9 or time.monotonic() - start > 20:
            seconds = time.monotonic() - start
            print(f"watchdog: {rss / 1e9:.1f} GB after {seconds:.1f} s", flush=True)
            os._exit(3)

warnings.simplefilter("ignore")
X = np.random.default_rng(0).normal(size=(100, 4))
name = sys.argv[1]
cls = getattr(obliquetrees, name)
y = X[:, 0] > 0 if "Classifier" in name else X[:, 0]
est = cls(**{**FAST_PARAMS.get(name, {}), "random_state": 0, "n_estimators": 2}).fit(X, y)
before = dict(est.__dict__)
# warm start: CO2 and E2EDT would add trees to the fitted ones (hinge needs the same number)
est.set_params(n_estimators=10**7, warm_start="Hinge" not in name)
threading.Thread(target=watchdog, daemon=True).start()
start = time.perf_counter()
try:
    est.fit(X, y)
except ValueError as exc:
    print(f"refused in {time.perf_counter() - start:.2f} s: {exc}")
kept = ("n_estimators", "warm_start")
changed = [k for k in before if k not in kept and est.__dict__[k] is not before[k]]
print("changed:", changed, "keys equal:", est.__dict__.keys() == before.keys())
"""


@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if "n_estimators" in c().get_params()])
def test_absurd_n_estimators_is_refused_at_once_and_changes_nothing(cls):
    import re

    from tests.adversarial._subprocess import run_python

    proc = run_python(_ABSURD_N_ESTIMATORS.replace("sys.argv[1]", repr(cls.__name__)))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    refused = re.search(r"refused in ([0-9.]+) s: (.*)", out)
    assert refused, out
    assert float(refused.group(1)) < 5, out
    for part in ("10000000", "n_estimators", "GiB"):
        assert part in refused.group(2), out
    assert "changed: [] keys equal: True" in out, out


def test_large_forests_stay_below_the_size_limit():
    from obliquetrees.base import check_forest_size
    from obliquetrees.co2._estimator import MIN_TREE_BYTES as CO2_TREE
    from obliquetrees.e2edt._estimator import MIN_TREE_BYTES as E2EDT_TREE

    for per_tree in (CO2_TREE, E2EDT_TREE):
        check_forest_size(10**6, per_tree)  # raises above the limit


@pytest.mark.slow
@pytest.mark.parametrize("name", ["CO2ForestClassifier", "E2EDTClassifier"])
def test_ten_thousand_stumps_fit(name):
    import obliquetrees

    X, labels, _ = _weight_data()
    extra = {"max_cccp_iter": 1} if name.startswith("CO2") else {"max_epochs": 1}
    est = getattr(obliquetrees, name)(n_estimators=10_000, max_depth=1, random_state=0, **extra)
    assert len(_fit(est, X[:30], labels[:30]).trees_) == 10_000


@pytest.mark.parametrize("head", ["sum", "linear"])
def test_hinge_size_check_counts_the_training_temporaries(head):
    """Depth-3 trees on 4 features: 14.5 GiB projected for 10**7 of them, which
    passed the check at be6b74f, but the per-batch records (8 + C values per
    row and tree) and the leaf counting's walk took over 23 GB (killed)."""
    est = HingeForestRegressor(n_estimators=10**7, max_depth=3, n_hinge_features=8, head=head)
    with pytest.raises(ValueError, match="n_estimators"):
        est._check_model_size(4, 1)
    per_tree = est._scratch_bytes(1) // est.n_estimators
    assert per_tree >= 8 * est.batch_size * 9  # the epoch's records alone


# ----------------------------------------------------------------- huge n_jobs
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_huge_n_jobs_fits_and_predicts_as_one_job(cls):
    """n_jobs=10**6 failed in joblib ("Numeric literal 2000000 is too large") for CO2, E2EDT."""
    X, labels, target = _weight_data()
    y = labels if is_classifier(cls()) else target
    extra = {"n_estimators": 3} if "n_estimators" in cls().get_params() else {}
    huge = _fit(_make(cls, n_jobs=10**6, **extra), X, y)
    one = _fit(_make(cls, n_jobs=1, **extra), X, y)
    np.testing.assert_array_equal(_outputs(huge, X), _outputs(one, X))


def test_n_jobs_is_resolved_once_and_capped():
    import joblib

    from obliquetrees._training._parallel import resolve_n_jobs

    cpus = joblib.cpu_count()
    assert resolve_n_jobs(10**6, 3) == min(3, cpus)
    assert resolve_n_jobs(10**6, 10**7) == cpus  # threads: at most one per CPU
    assert resolve_n_jobs(None, 10) == 1
    assert resolve_n_jobs(-1, 10**6) == cpus
    with joblib.parallel_config(backend="loky", n_jobs=10**6):  # processes: by the tasks only
        assert resolve_n_jobs(None, 5) == 5
    with pytest.raises(ValueError, match="n_jobs=0"):
        resolve_n_jobs(0, 5)


# ----------------------------------------------------------------------- Ctrl-C
#: A child process fits on data that takes it several seconds (10 s to minutes) and
#: sends itself SIGINT 1 s into the fit. At be6b74f the interrupt came out of numba's
#: boxing of a kernel's array results as "SystemError: CPUDispatcher(<function
#: grow_tree>) returned a result with an exception set".
_INTERRUPTED_FIT = """
import os, signal, threading, time, warnings
import numpy as np
import obliquetrees

warnings.simplefilter("ignore")
name, n_jobs = NAME, N_JOBS
rng = np.random.default_rng(0)
X = rng.normal(size=(20000, 20))
f = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=20000)
y = f if "Regressor" in name else (f > 0).astype(int)
params = {"n_jobs": n_jobs, "random_state": 0}
if name.startswith("SoftTree"):
    params["tol"] = 0.0  # grow on
elif name.startswith("E2EDT"):
    params["n_estimators"] = 5
elif name.startswith("HingeForest"):
    params["early_stopping"] = False  # all 100 epochs: with shipped kernels it stopped in < 1 s
cls = getattr(obliquetrees, name)
cls(**params).fit(X[:50], y[:50])  # compiled (or loaded) before the timed fit
est = cls(**params)
before = dict(est.__dict__)
sent = []

def interrupt():
    time.sleep(1.0)
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
try:
    est.fit(X, y)
    print("the fit finished before the interrupt", flush=True)
except BaseException:
    print(f"stopped {time.perf_counter() - sent[0]:.2f} s after SIGINT", flush=True)
    print("unchanged:", est.__dict__ == before, flush=True)
    raise
"""


@pytest.mark.parametrize(
    "name, n_jobs",
    [(cls.__name__, 1) for cls in ESTIMATORS] + [("CO2ForestClassifier", 2)],
)
def test_ctrl_c_during_fit_raises_keyboard_interrupt_and_changes_nothing(name, n_jobs):
    import re

    from tests.adversarial._subprocess import run_python

    code = _INTERRUPTED_FIT.replace("NAME, N_JOBS", f"{name!r}, {n_jobs}")
    proc = run_python(code, timeout=300)
    out = proc.stdout + proc.stderr
    assert "the fit finished" not in out, out
    assert proc.stderr.rstrip().splitlines()[-1] == "KeyboardInterrupt", out
    assert "SystemError" not in out, out
    stopped = re.search(r"stopped ([0-9.]+) s after SIGINT", out)
    assert stopped and float(stopped.group(1)) < 10, out
    assert "unchanged: True" in out, out


def _chain(*excs):
    """``excs[0]`` raised from ``excs[1]``, raised from ``excs[2]``, ..."""
    for exc, cause in zip(excs[:-1], excs[1:], strict=True):
        exc.__cause__ = cause
    return excs[0]


def test_only_an_interrupt_behind_system_errors_is_surfaced():
    from obliquetrees._core.interrupts import interrupt_behind

    interrupt = KeyboardInterrupt()
    assert interrupt_behind(_chain(SystemError(), SystemError(), interrupt)) is interrupt
    assert interrupt_behind(interrupt) is None  # raised as it is anyway
    assert interrupt_behind(SystemError()) is None
    assert interrupt_behind(_chain(ValueError(), KeyboardInterrupt())) is None
    assert interrupt_behind(_chain(SystemError(), ValueError(), KeyboardInterrupt())) is None
    looped = SystemError()
    looped.__cause__ = looped
    assert interrupt_behind(looped) is None


@pytest.mark.parametrize("cls", [c for c in ESTIMATORS if "class_weight" in c().get_params()])
def test_class_weights_whose_sum_overflows_fit(cls):
    """CO2 multiplies them per tree with the bootstrap counts: "value contains NaN" before."""
    X, labels, _ = _weight_data()
    est = _fit(_make(cls, class_weight={False: 1e307, True: 1.5e308}), X, labels)
    _assert_proper(est, _outputs(est, X))
