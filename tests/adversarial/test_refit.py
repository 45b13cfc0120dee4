"""A failed or interrupted fit changes nothing (DESIGN.md, decision 13).

Every public estimator is fitted, then refitted on other data (fewer
features, other classes) while its training function raises a
``ValueError`` or a ``KeyboardInterrupt`` after doing real work; the model
must come out exactly as it went in, down to its pickled bytes. Warm starts
must refuse other classes or features, and train a copy of the fitted model,
so that models loaded read-only (memory-mapped) can be trained further.
"""

import importlib
import pickle

import joblib
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from tests.adversarial._subprocess import assert_ok, run_python
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()

#: Per estimator: the module attribute doing one unit of training (a tree, an
#: epoch, a growth run), looked up at call time by the training code.
TRAINING_STEP = {
    "CO2ForestClassifier": ("obliquetrees.co2.training", "_fit_one_tree"),
    "CO2ForestRegressor": ("obliquetrees.co2.training", "_fit_one_tree"),
    "E2EDTClassifier": ("obliquetrees.e2edt.training", "_fit_one_tree"),
    "E2EDTRegressor": ("obliquetrees.e2edt.training", "_fit_one_tree"),
    "HingeForestClassifier": ("obliquetrees.hinge.training", "run_epoch"),
    "HingeForestRegressor": ("obliquetrees.hinge.training", "run_epoch"),
    "SoftTreeClassifier": ("obliquetrees.soft.training", "grow_soft_tree"),
    "SoftTreeRegressor": ("obliquetrees.soft.training", "grow_soft_tree"),
}

#: Training units that complete before the patched one fails: forests fail
#: after a finished tree, hinge forests after a finished epoch; a soft tree is
#: one growth run, which fails on entry.
UNITS_BEFORE_FAILURE = {
    "CO2ForestClassifier": 1,
    "CO2ForestRegressor": 1,
    "E2EDTClassifier": 1,
    "E2EDTRegressor": 1,
    "HingeForestClassifier": 1,
    "HingeForestRegressor": 1,
    "SoftTreeClassifier": 0,
    "SoftTreeRegressor": 0,
}

#: A failure inside training, and an interrupt (Ctrl-C).
FAILURES = [ValueError("boom"), KeyboardInterrupt()]

#: warm start adds trees (the others continue training the same ones)
BAGGED = {"CO2ForestClassifier", "CO2ForestRegressor", "E2EDTClassifier", "E2EDTRegressor"}
WARM = BAGGED | {"HingeForestClassifier", "HingeForestRegressor"}


def _data(n_features=6, n_classes=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(90, n_features))
    y = np.arange(90) % n_classes
    X[:, 0] += y  # learnable
    return X, y


def _target(est, y):
    return y.astype(float) if "Regressor" in type(est).__name__ else y


def _make(cls, **extra):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), **extra})


def _fitted_state(est):
    """Pickled bytes of everything a fit may set (parameters left out)."""
    params = est.get_params(deep=False)
    return pickle.dumps({k: v for k, v in vars(est).items() if k not in params})


def _patch_step(monkeypatch, cls, exc, n_ok=None, run_first=False):
    """Patch the training step of ``cls`` to raise ``exc``.

    The first ``n_ok`` calls (default: the estimator's ``UNITS_BEFORE_FAILURE``)
    run normally; with ``run_first`` the failing call runs the step first, so
    arrays updated in place are updated when the exception comes. Returns the
    list of calls made.
    """
    module_name, attr = TRAINING_STEP[cls.__name__]
    module = importlib.import_module(module_name)
    original = getattr(module, attr)
    n_ok = UNITS_BEFORE_FAILURE[cls.__name__] if n_ok is None else n_ok
    calls = []

    def step(*args, **kwargs):
        calls.append(1)
        if len(calls) <= n_ok:
            return original(*args, **kwargs)
        if run_first:
            original(*args, **kwargs)
        raise exc

    monkeypatch.setattr(module, attr, step)
    return calls


def test_training_steps_cover_every_estimator():
    assert {cls.__name__ for cls in ESTIMATORS} == set(TRAINING_STEP)


@pytest.mark.parametrize("exc", FAILURES, ids=["error", "interrupt"])
@pytest.mark.parametrize(
    "cls, warm",
    [(cls, False) for cls in ESTIMATORS]
    + [(cls, True) for cls in ESTIMATORS if cls.__name__ in WARM],
    ids=lambda v: v.__name__ if isinstance(v, type) else ("warm" if v else "cold"),
)
def test_failed_refit_changes_nothing(cls, warm, exc, monkeypatch):
    extra = {"warm_start": True} if warm else {}
    if cls.__name__ in BAGGED:
        extra["n_estimators"] = 2
    X, y = _data()
    est = _make(cls, **extra).fit(X, _target(cls, y))
    before = _fitted_state(est)
    proba_before = est.predict(X)
    if cls.__name__ in BAGGED:
        est.set_params(n_estimators=4)  # warm start: two more trees, the second fails
    # cold: fewer features and classes, so validation alone would change
    # n_features_in_ and classes_; warm: data the warm start accepts, so
    # training continues on the fitted model's arrays before it fails
    X2, y2 = _data(seed=1) if warm else _data(n_features=4, n_classes=2, seed=1)
    calls = _patch_step(monkeypatch, cls, exc, run_first=True)
    with pytest.raises(type(exc)):
        est.fit(X2, _target(cls, y2))
    assert calls, "the training step was not reached"
    assert _fitted_state(est) == before
    np.testing.assert_array_equal(est.predict(X), proba_before)


@pytest.mark.parametrize("exc", FAILURES, ids=["error", "interrupt"])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_failed_first_fit_leaves_unfitted(cls, exc, monkeypatch):
    X, y = _data()
    est = _make(cls)
    empty = dict(vars(est))
    _patch_step(monkeypatch, cls, exc, n_ok=0)
    with pytest.raises(type(exc)):
        est.fit(X, _target(cls, y))
    assert vars(est).keys() == empty.keys()
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


@pytest.mark.parametrize(
    "cls", [c for c in ESTIMATORS if hasattr(c, "partial_fit")], ids=lambda c: c.__name__
)
def test_interrupted_partial_fit_changes_nothing(cls, monkeypatch):
    """An epoch interrupted half way must not leave half-trained arrays."""
    X, y = _data()
    est = _make(cls).fit(X, _target(cls, y))
    before = _fitted_state(est)
    _patch_step(monkeypatch, cls, KeyboardInterrupt(), n_ok=0, run_first=True)
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X, _target(cls, y))
    assert _fitted_state(est) == before


def test_co2_failed_narrower_refit_predicts_nothing_in_subprocess():
    """The reported case: predict after a failed refit walked a 10-feature forest."""
    proc = run_python(
        """
        import numpy as np
        from obliquetrees import CO2ForestClassifier
        rng = np.random.default_rng(0)
        X10 = rng.normal(size=(120, 10)); y = (X10[:, 0] > 0).astype(int)
        m = CO2ForestClassifier(n_estimators=2, max_depth=3, warm_start=True,
                                random_state=0).fit(X10, y)
        try:
            m.set_params(n_estimators=4).fit(X10[:, :2], y)
        except ValueError as exc:
            assert "features" in str(exc), exc
        else:
            raise AssertionError("the narrower warm refit was accepted")
        assert m.n_features_in_ == 10
        try:
            m.predict(X10[:60, :2])
        except ValueError:
            pass
        else:
            raise AssertionError("predicted 2 columns with a 10-feature forest")
        m.predict(X10[:60])
        """,
        timeout=300,
    )
    assert_ok(proc)


@pytest.mark.parametrize(
    "cls", [c for c in ESTIMATORS if c.__name__ in WARM], ids=lambda c: c.__name__
)
def test_warm_refit_checks_features(cls):
    X, y = _data()
    extra = {"n_estimators": 2} if cls.__name__ in BAGGED else {}
    est = _make(cls, warm_start=True, **extra).fit(X, _target(cls, y))
    before = _fitted_state(est)
    with pytest.raises(ValueError, match="features"):
        est.fit(X[:, :3], _target(cls, y))  # CO2: no new tree to grow, still refused
    assert _fitted_state(est) == before


def test_e2edt_failed_unstandardized_refit_keeps_model():
    from obliquetrees import E2EDTClassifier

    X, y = _data()
    est = _make(E2EDTClassifier, standardize=False).fit(X, y)
    before = _fitted_state(est)
    X2, y2 = _data(n_features=4, n_classes=2)
    X2[0, 0] = 1e38
    with pytest.raises(ValueError, match="magnitude"):
        est.fit(X2, y2)
    assert _fitted_state(est) == before


@pytest.mark.parametrize("name", ["HingeForestClassifier", "HingeForestRegressor"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_hinge_diverging_refit_keeps_model(name):
    import obliquetrees

    cls = getattr(obliquetrees, name)
    X, y = _data()
    est = _make(cls).fit(X, _target(cls, y))
    before = _fitted_state(est)
    X2, y2 = _data(n_features=4, n_classes=2)
    # patience 20: the parameters overflow after ~7 epochs; with the default 5 the fit
    # stops first and keeps its best (finite) epoch, which is no divergence
    est.set_params(optimizer="sgd", learning_rate=1e30, n_iter_no_change=20)
    with pytest.raises(ValueError, match="diverged"):
        est.fit(X2 * 1e3, _target(cls, y2))
    assert _fitted_state(est) == before
    est.predict(X)


@pytest.mark.parametrize("labels", ["strings", "fewer"])
@pytest.mark.parametrize(
    "name", ["CO2ForestClassifier", "E2EDTClassifier", "HingeForestClassifier"]
)
def test_warm_start_refuses_other_classes(name, labels):
    import obliquetrees

    cls = getattr(obliquetrees, name)
    X, y = _data(n_classes=3)
    extra = {"n_estimators": 2} if name in BAGGED else {}
    est = _make(cls, warm_start=True, **extra).fit(X, y)
    before = _fitted_state(est)
    if name in BAGGED:
        est.set_params(n_estimators=3)
    y2 = np.array(["a", "b", "c"])[y] if labels == "strings" else y % 2
    with pytest.raises(ValueError, match="same classes"):
        est.fit(X, y2)
    assert _fitted_state(est) == before
    assert est.predict(X).dtype.kind == "i"
    assert est.predict_proba(X).shape[1] == len(est.classes_) == 3


@pytest.mark.parametrize("name", sorted(WARM))
def test_warm_training_of_memory_mapped_model(name, tmp_path):
    """A model loaded with ``mmap_mode="r"`` has read-only arrays: train a copy."""
    import obliquetrees

    cls = getattr(obliquetrees, name)
    X, y = _data()
    extra = {"n_estimators": 2} if name in BAGGED else {}
    est = _make(cls, warm_start=True, **extra).fit(X, _target(cls, y))
    joblib.dump(est, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib", mmap_mode="r")
    if name in BAGGED:
        loaded.set_params(n_estimators=3)
    loaded.fit(X, _target(cls, y))
    assert np.all(np.isfinite(loaded.predict(X).astype(float)))
    if hasattr(loaded, "partial_fit"):
        again = joblib.load(tmp_path / "model.joblib", mmap_mode="r")
        again.partial_fit(X, _target(cls, y))
        assert np.all(np.isfinite(again.predict(X).astype(float)))


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
def test_hinge_refuses_a_model_too_large_to_hold(method):
    """100 trees of depth 20 would need tens of GB: refused before allocating.

    In a subprocess under an address-space limit, so that code which does
    allocate fails with MemoryError instead of exhausting the machine.
    """
    proc = run_python(
        f"""
        import resource
        limit = 6 * 2**30
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        import numpy as np
        from obliquetrees import HingeForestClassifier
        X = np.random.default_rng(0).normal(size=(200, 12))
        y = np.arange(200) % 2
        est = HingeForestClassifier(n_estimators=100, max_depth=20, random_state=0)
        try:
            est.{method}(X, y)
        except ValueError as exc:
            assert "bytes" in str(exc) and "max_depth" in str(exc), exc
        else:
            raise AssertionError("a model of tens of GB was accepted")
        assert not hasattr(est, "n_features_in_")
        """,
        timeout=120,
    )
    assert_ok(proc)


def test_hinge_warns_about_a_large_model(monkeypatch):
    import obliquetrees.hinge._size as hinge_module
    from obliquetrees import HingeForestClassifier

    X, y = _data()
    # one forest (the default's "auto" choices project two)
    est = _make(HingeForestClassifier, max_epochs=1, n_hinge_features=100, feature_screening=False)
    size = est._projected_bytes(X.shape[1], 3) + est._scratch_bytes(3)
    monkeypatch.setattr(hinge_module, "WARN_MODEL_BYTES", size - 1)
    with pytest.warns(UserWarning, match=f"{size} bytes"):
        est.fit(X, y)
    monkeypatch.setattr(hinge_module, "MAX_MODEL_BYTES", size - 1)
    with pytest.raises(ValueError, match=f"{size} bytes"):
        est.fit(X, y)
