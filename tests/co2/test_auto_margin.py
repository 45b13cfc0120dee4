"""CO2's ``oblique_penalty="auto"``: the out-of-bag test's margin chosen per fit by pilot
trees (``_BaseCO2Forest._grow_auto`` in obliquetrees/co2/_estimator.py)."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import make_classification

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from obliquetrees.co2._estimator import (
    AUTO_MARGINS,
    AUTO_PILOT_TREES,
    AUTO_STANDARD_ERRORS,
    PILOT_PROBABILITY_FLOOR,
)


def _data(seed=0, n=300):
    X, y = make_classification(n, 10, n_informative=5, n_classes=3, random_state=seed)
    return X, y


def _targets(X, y):
    return X[:, 0] - 2 * X[:, 1] + y


def _same_trees(a, b):
    assert len(a.trees_) == len(b.trees_)
    for s, t in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(s.weight_value, t.weight_value)
        np.testing.assert_array_equal(s.weight_index, t.weight_index)
        np.testing.assert_array_equal(s.bias, t.bias)
        np.testing.assert_array_equal(s.value, t.value)


def _reference_margin(Estimator, X, y, sample_weight, kw):
    """The margin the pilot should choose, from public out-of-bag outputs of each pilot."""
    losses, covered = [], []
    for margin in AUTO_MARGINS:
        pilot = Estimator(
            **{**kw, "n_estimators": min(AUTO_PILOT_TREES, kw["n_estimators"])},
            oblique_penalty=margin,
            oob_score=True,
        )
        pilot.fit(X, y, sample_weight=sample_weight)
        if Estimator is CO2ForestClassifier:
            P = pilot.oob_decision_function_
            p = P[np.arange(len(y)), np.searchsorted(pilot.classes_, y)]
            losses.append(-np.log(np.maximum(p, PILOT_PROBABILITY_FLOOR)))
            covered.append(~np.isnan(P).any(axis=1))
        else:
            losses.append((pilot.oob_prediction_ - y) ** 2)
            covered.append(~np.isnan(pilot.oob_prediction_))
    rows = covered[0] & covered[1] & (sample_weight > 0)
    w, d = sample_weight[rows], losses[1][rows] - losses[0][rows]
    mean = np.average(d, weights=w)
    # the standard error of a weighted mean of independent rows
    se = np.sqrt(np.sum(w**2 * (d - mean) ** 2)) / np.sum(w)
    return AUTO_MARGINS[1] if mean < -AUTO_STANDARD_ERRORS * se else AUTO_MARGINS[0]


@pytest.mark.filterwarnings("ignore:.*no out-of-bag prediction")
@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_grows_the_forest_of_the_margin_its_pilots_choose(Estimator, seed):
    X, y = _data(seed)
    if Estimator is CO2ForestRegressor:
        y = _targets(X, y)
    sw = np.random.default_rng(seed).uniform(0.0, 2.0, size=y.shape[0])
    sw[:20] = 0.0  # rows without weight do not vote
    kw = dict(n_estimators=8, max_depth=8, random_state=seed)
    auto = Estimator(oblique_penalty="auto", **kw).fit(X, y, sample_weight=sw)
    assert auto.oblique_penalty_ == _reference_margin(Estimator, X, y, sw, kw)
    fixed = Estimator(oblique_penalty=auto.oblique_penalty_, **kw).fit(X, y, sample_weight=sw)
    _same_trees(auto, fixed)
    np.testing.assert_array_equal(auto.n_axis_fallback_, fixed.n_axis_fallback_)
    assert fixed.oblique_penalty_ == auto.oblique_penalty_


def test_auto_chooses_either_margin():
    # a margin of 2 nats keeps fewer oblique splits; which pays depends on the data
    chosen = set()
    for seed in range(6):
        X, y = _data(seed, n=1000)
        flip = np.random.default_rng(seed).random(y.shape[0]) < 0.3 * (seed % 2)
        y = np.where(flip, (y + 1) % 3, y)  # label noise on odd seeds
        model = CO2ForestClassifier(10, oblique_penalty="auto", random_state=seed).fit(X, y)
        chosen.add(model.oblique_penalty_)
    assert chosen == set(AUTO_MARGINS)


@pytest.mark.parametrize("n_estimators", [1, AUTO_PILOT_TREES])
def test_auto_with_no_more_trees_than_pilots(n_estimators):
    X, y = _data()
    kw = dict(n_estimators=n_estimators, random_state=0, max_depth=6)
    auto = CO2ForestClassifier(oblique_penalty="auto", **kw).fit(X, y)
    assert auto.oblique_penalty_ in AUTO_MARGINS
    fixed = CO2ForestClassifier(oblique_penalty=auto.oblique_penalty_, **kw).fit(X, y)
    _same_trees(auto, fixed)


def test_auto_is_the_same_for_any_n_jobs():
    X, y = _data()
    kw = dict(n_estimators=7, random_state=0, max_depth=8, oblique_penalty="auto")
    one = CO2ForestClassifier(n_jobs=1, **kw).fit(X, y)
    two = CO2ForestClassifier(n_jobs=2, **kw).fit(X, y)
    assert one.oblique_penalty_ == two.oblique_penalty_
    _same_trees(one, two)


@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_auto_without_bootstrap_is_margin_zero(Estimator):
    X, y = _data()
    kw = dict(n_estimators=2, random_state=0, bootstrap=False, max_depth=6)
    auto = Estimator(oblique_penalty="auto", **kw).fit(X, y)
    assert auto.oblique_penalty_ == 0.0
    _same_trees(auto, Estimator(oblique_penalty=0.0, **kw).fit(X, y))


def test_a_warm_start_grows_at_the_margin_of_the_kept_trees():
    X, y = _data(1)
    kw = dict(random_state=0, max_depth=8, oblique_penalty="auto")
    warm = CO2ForestClassifier(6, warm_start=True, **kw).fit(X, y)
    margin = warm.oblique_penalty_
    warm.set_params(n_estimators=11).fit(X, y)
    assert warm.oblique_penalty_ == margin
    cold = CO2ForestClassifier(11, **{**kw, "oblique_penalty": margin}).fit(X, y)
    _same_trees(warm, cold)
    # an explicit margin is grown with as given, and recorded
    warm.set_params(n_estimators=12, oblique_penalty=1.0).fit(X, y)
    assert warm.oblique_penalty_ == 1.0


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf, "2"])
def test_a_warm_start_refuses_a_tampered_margin(bad):
    X, y = _data()
    model = CO2ForestClassifier(3, random_state=0, warm_start=True, oblique_penalty="auto")
    model = pickle.loads(pickle.dumps(model.fit(X, y)))
    model.oblique_penalty_ = bad
    before = model.predict_proba(X)
    with pytest.raises(ValueError, match="oblique_penalty_=.*not None or a finite margin"):
        model.set_params(n_estimators=5).fit(X, y)
    assert len(model.trees_) == 3
    np.testing.assert_array_equal(model.predict_proba(X), before)


def test_a_pickle_without_the_recorded_margin_warm_starts_at_zero():
    X, y = _data()
    kw = dict(random_state=0, max_depth=6, warm_start=True, oblique_penalty="auto")
    model = CO2ForestClassifier(3, **kw).fit(X, y)
    del model.oblique_penalty_  # as fitted before the attribute existed
    model.set_params(n_estimators=5).fit(X, y)
    assert model.oblique_penalty_ == 0.0
