"""``monotonic_cst`` through ``from_sklearn`` and ``finetune``: carried, kept, exact.

A scikit-learn forest fitted with ``monotonic_cst`` is converted (the
constraints travel as ``monotonic_cst_``) and fine-tuned; the returned
hard-routed model is swept along random lines of each constrained feature
(:func:`tests._helpers.monotone_violations`, NaN-free and with NaN in the
other features, also after tuning on rows with NaN).
"""

import pickle

import numpy as np
import pytest
from sklearn.ensemble import (
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

from obliquetrees.convert import from_sklearn
from obliquetrees.machine import finetune, refit_leaves
from tests._helpers import monotone_violations

TUNE = dict(epochs=3, batch_size=128)


def _data(seed, n=400, p=4, nan_fraction=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = 2 * X[:, 0] - np.sin(2 * X[:, 1]) - X[:, 2] + X[:, 1] * X[:, 3] + 0.3 * rng.normal(size=n)
    X_nan = X.copy()
    X_nan[rng.random(X.shape) < nan_fraction] = np.nan
    return X, X_nan, y


def _constraints(seed, p=4):
    rng = np.random.default_rng(seed + 100)
    cst = rng.integers(-1, 2, size=p)
    cst[rng.integers(p)] = rng.choice([-1, 1])
    return cst


def _assert_monotone(predict, X, cst, seed, n_lines=80):
    for nan_fraction in (0.0, 0.3):
        worst = monotone_violations(
            predict, X, cst, n_lines=n_lines, nan_fraction=nan_fraction, seed=seed
        )
        assert worst <= 1e-12


def test_from_sklearn_carries_the_constraints():
    X, _, y = _data(0)
    for source in (
        RandomForestRegressor(n_estimators=3, monotonic_cst=[1, 0, -1, 0], random_state=0),
        ExtraTreesRegressor(n_estimators=3, monotonic_cst=[1, 0, -1, 0], random_state=0),
        DecisionTreeRegressor(monotonic_cst=[1, 0, -1, 0], random_state=0),
    ):
        converted = from_sklearn(source.fit(X, y))
        assert converted.monotonic_cst_.tolist() == [1, 0, -1, 0]
        assert converted.monotonic_cst_.dtype == np.int8
        _assert_monotone(converted.predict, X, [1, 0, -1, 0], seed=0)
    free = from_sklearn(RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y))
    assert free.monotonic_cst_ is None


@pytest.mark.parametrize("support", ["original", "dense", 2])
@pytest.mark.parametrize("objective", ["trees", "forest"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finetuned_regressor_is_monotone(support, objective, seed):
    X, X_nan, y = _data(seed, nan_fraction=0.05 * (seed % 2))
    cst = _constraints(seed)
    rf = RandomForestRegressor(
        n_estimators=5, max_depth=5, monotonic_cst=cst, random_state=seed
    ).fit(X, y)
    tuned = finetune(rf, X_nan, y, support=support, objective=objective, random_state=seed, **TUNE)
    assert tuned.monotonic_cst_.tolist() == cst.tolist()
    _assert_monotone(tuned.predict, X, cst, seed)


@pytest.mark.parametrize("support", ["original", "dense"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finetuned_binary_classifier_is_monotone(support, seed):
    X, X_nan, y = _data(seed, nan_fraction=0.05 * (seed % 2))
    cst = _constraints(seed)
    labels = np.where(y > 0, "yes", "no")
    rf = RandomForestClassifier(
        n_estimators=5, max_depth=5, monotonic_cst=cst, random_state=seed
    ).fit(X, labels)
    tuned = finetune(rf, X_nan, labels, support=support, random_state=seed, **TUNE)

    def positive(Z):
        return tuned.predict_proba(Z)[:, 1]

    _assert_monotone(positive, X, cst, seed)


def test_constraints_given_to_finetune_replace_the_sources():
    X, _, y = _data(3)
    free = RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, y)
    cst = [1, 0, -1, 0]
    assert monotone_violations(free.predict, X, cst, n_lines=50) > 1e-3
    tuned = finetune(free, X, y, monotonic_cst=cst, support="dense", **TUNE)
    _assert_monotone(tuned.predict, X, cst, seed=3)
    # and a tuned model's constraints are the default of the next tuning
    again = finetune(tuned, X, y, **TUNE)
    assert again.monotonic_cst_.tolist() == cst
    _assert_monotone(again.predict, X, cst, seed=4)


@pytest.mark.parametrize("support", ["original", "dense"])
def test_oblique_source_is_made_monotone(support):
    # oblique splits: each keeps the orientation of its constrained weights' sum
    X, X_nan, y = _data(9, nan_fraction=0.05)
    cst = [1, 0, -1, 0]
    rf = RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    oblique = finetune(rf, X, y, support="dense", **TUNE)
    assert oblique.forest_.weight_counts().max() > 1
    tuned = finetune(oblique, X_nan, y, monotonic_cst=cst, support=support, **TUNE)
    _assert_monotone(tuned.predict, X, cst, seed=9)


def test_zero_constraints_change_nothing():
    X, _, y = _data(4)
    held = RandomForestRegressor(
        n_estimators=4, max_depth=4, monotonic_cst=[1, 0, 0, 0], random_state=0
    ).fit(X, y)
    plain = RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    unconstrained = finetune(held, X, y, monotonic_cst=[0, 0, 0, 0], **TUNE)
    assert unconstrained.monotonic_cst_ is None
    # the source's own constraints were dropped: same as tuning the same trees unconstrained
    converted = from_sklearn(held)
    converted.monotonic_cst_ = None
    reference = finetune(converted, X, y, **TUNE)
    np.testing.assert_array_equal(unconstrained.predict(X), reference.predict(X))
    assert finetune(plain, X, y, **TUNE).monotonic_cst_ is None


def test_multiclass_and_bad_constraints_raise_scikit_learns_errors():
    X, _, y = _data(5)
    multiclass = RandomForestClassifier(n_estimators=2, random_state=0).fit(
        X, np.digitize(y, [-1, 1])
    )
    with pytest.raises(ValueError, match="not supported with multiclass classification"):
        finetune(multiclass, X, np.digitize(y, [-1, 1]), monotonic_cst=[1, 0, 0, 0], **TUNE)
    rf = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="has 4 features"):
        finetune(rf, X, y, monotonic_cst=[1, 0], **TUNE)


def test_constraints_by_feature_name():
    pd = pytest.importorskip("pandas")
    X, _, y = _data(6)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    rf = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(frame, y)
    tuned = finetune(rf, frame, y, monotonic_cst={"b": -1, "d": 1}, **TUNE)
    assert tuned.monotonic_cst_.tolist() == [0, -1, 0, 1]

    def predict(Z):
        return tuned.predict(pd.DataFrame(Z, columns=frame.columns))

    _assert_monotone(predict, X, [0, -1, 0, 1], seed=6)
    with pytest.raises(ValueError, match="unexpected feature names"):
        finetune(rf, frame, y, monotonic_cst={"z": 1}, **TUNE)


def test_pickled_constrained_models():
    X, _, y = _data(7)
    cst = [1, 0, -1, 0]
    rf = RandomForestRegressor(n_estimators=3, max_depth=4, monotonic_cst=cst, random_state=0)
    for model in (from_sklearn(rf.fit(X, y)), finetune(rf, X, y, **TUNE)):
        back = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(back.predict(X), model.predict(X))
        assert back.monotonic_cst_.tolist() == cst


def test_refit_leaves_does_not_claim_constraints():
    X, _, y = _data(8)
    rf = RandomForestRegressor(
        n_estimators=2, max_depth=3, monotonic_cst=[1, 0, 0, 0], random_state=0
    ).fit(X, y)
    assert refit_leaves(rf, X, y).monotonic_cst_ is None


@pytest.mark.parametrize("stored", [[1, 0], [2, 0, 0, 0]])
def test_a_stored_constraint_is_checked_again(stored):
    # an unpickled model's monotonic_cst_ reaches the fine-tuning kernels: any length could come
    X, _, y = _data(9)
    rf = RandomForestRegressor(n_estimators=2, max_depth=3, monotonic_cst=[1, 0, 0, 0])
    converted = from_sklearn(rf.fit(X, y))
    converted.monotonic_cst_ = np.array(stored)
    with pytest.raises(ValueError, match="monotonic_cst"):
        finetune(converted, X, y, **TUNE)
