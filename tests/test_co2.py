"""CO2ForestClassifier at the estimator level."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from obliquetrees._co2 import CO2ForestClassifier
from tests import reference as ref

FAST = dict(n_estimators=5, max_cccp_iter=5, random_state=0)


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    return X * np.arange(1, 9) * 10 + 5, y  # badly scaled on purpose


def test_fit_predict_iris(iris):
    X, y = iris
    clf = CO2ForestClassifier(**FAST).fit(X, y)
    assert clf.score(X, y) > 0.97
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert len(clf.trees_) == 5
    assert clf.n_cccp_iter_.shape == (5,) and clf.n_axis_fallback_.shape == (5,)
    for tree in clf.trees_:
        tree.check_invariants()
        assert tree.n_outputs == 3


def test_stored_weights_act_on_raw_input(blobs):
    """Standardisation is folded in: walking the stored tree on raw X agrees with apply."""
    X, y = blobs
    clf = CO2ForestClassifier(**FAST).fit(X, y)
    leaves = clf.apply(X)
    for t, tree in enumerate(clf.trees_):
        walked = np.array([ref.walk(tree, x)[-1] for x in X])
        # only exact ties could differ; with continuous data there are none
        assert np.mean(walked == leaves[:, t]) == 1.0
        # fully grown on the bootstrap: training rows land in pure leaves
        assert np.all(tree.value[leaves[:, t]].max(axis=1) > 0)


def test_splits_are_oblique(blobs):
    X, y = blobs
    clf = CO2ForestClassifier(**FAST).fit(X, y)
    tree = clf.trees_[0]
    n_weights = np.diff(tree.weight_indptr)[~tree.is_leaf]
    assert np.mean(n_weights > 1) > 0.5


def test_same_model_for_any_n_jobs(blobs):
    X, y = blobs
    a = CO2ForestClassifier(n_jobs=1, **FAST).fit(X, y)
    b = CO2ForestClassifier(n_jobs=2, **FAST).fit(X, y)
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(ta.weight_value, tb.weight_value)
        np.testing.assert_array_equal(ta.children_left, tb.children_left)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_random_state(blobs):
    X, y = blobs
    a = CO2ForestClassifier(**FAST).fit(X, y).predict_proba(X)
    b = CO2ForestClassifier(**FAST).fit(X, y).predict_proba(X)
    c = CO2ForestClassifier(**{**FAST, "random_state": 1}).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_warm_start_equals_cold_fit(blobs):
    X, y = blobs
    warm = CO2ForestClassifier(**{**FAST, "n_estimators": 2}, warm_start=True).fit(X, y)
    first = warm.trees_[0]
    warm.set_params(n_estimators=5).fit(X, y)
    cold = CO2ForestClassifier(**FAST).fit(X, y)
    assert warm.trees_[0].weight_value is not None
    np.testing.assert_array_equal(warm.trees_[0].weight_value, first.weight_value)
    np.testing.assert_array_equal(warm.predict_proba(X), cold.predict_proba(X))
    np.testing.assert_array_equal(warm.n_cccp_iter_, cold.n_cccp_iter_)
    with pytest.warns(UserWarning, match="without increasing"):
        warm.fit(X, y)
    with pytest.raises(ValueError, match="n_estimators"):
        warm.set_params(n_estimators=3).fit(X, y)


def _reference_oob_proba(clf, X):
    """OOB class distributions from the trees and their bootstraps, row by row."""
    n = X.shape[0]
    total, count = np.zeros((n, clf.n_classes_)), np.zeros(n)
    for tree, seed in zip(clf.trees_, clf._tree_seeds, strict=True):
        boot_seed = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=2)[0]
        drawn = np.random.RandomState(boot_seed).randint(0, n, n)
        for i in np.setdiff1d(np.arange(n), drawn):
            total[i] += ref.predict_value([tree], X[i : i + 1])[0]
            count[i] += 1
    with np.errstate(invalid="ignore"):
        return total / count[:, None]


def test_oob_score_matches_reference_and_held_out_accuracy(blobs):
    X, y = blobs
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    clf = CO2ForestClassifier(**{**FAST, "n_estimators": 20}, oob_score=True).fit(X_train, y_train)
    expected = _reference_oob_proba(clf, X_train)
    np.testing.assert_allclose(clf.oob_decision_function_, expected, rtol=1e-12)
    covered = ~np.isnan(expected).any(axis=1)
    assert covered.all()  # 20 trees leave every one of 300 rows out at least once
    accuracy = np.mean(clf.classes_[np.argmax(expected, axis=1)] == y_train)
    assert clf.oob_score_ == pytest.approx(accuracy)
    assert abs(clf.oob_score_ - clf.score(X_test, y_test)) < 0.08


@pytest.mark.filterwarnings("ignore:.*drawn by every bootstrap")
def test_oob_score_options(blobs):
    X, y = blobs
    with pytest.raises(ValueError, match="bootstrap=True"):
        CO2ForestClassifier(**FAST, oob_score=True, bootstrap=False).fit(X, y)
    errors = CO2ForestClassifier(**FAST, oob_score=lambda t, p: np.mean(t != p)).fit(X, y)
    accuracy = CO2ForestClassifier(**FAST, oob_score=True).fit(X, y)
    assert errors.oob_score_ == pytest.approx(1 - accuracy.oob_score_)
    # a refit without oob_score drops the stale attributes
    assert not hasattr(accuracy.set_params(oob_score=False).fit(X, y), "oob_score_")


def test_oob_rows_drawn_by_every_bootstrap_are_nan_and_warned(blobs):
    X, y = blobs
    with pytest.warns(UserWarning, match="drawn by every bootstrap"):
        clf = CO2ForestClassifier(**{**FAST, "n_estimators": 2}, oob_score=True).fit(X, y)
    nan_rows = np.isnan(clf.oob_decision_function_).any(axis=1)
    assert 0 < nan_rows.sum() < len(X)
    np.testing.assert_allclose(
        clf.oob_decision_function_[~nan_rows], _reference_oob_proba(clf, X)[~nan_rows]
    )


@pytest.mark.filterwarnings("ignore:.*drawn by every bootstrap")
@pytest.mark.parametrize("random_state", [0, None])
def test_oob_score_after_warm_start_covers_every_tree(blobs, random_state):
    """Old trees keep their own bootstraps, also when random_state=None draws new seeds."""
    X, y = blobs
    params = {**FAST, "n_estimators": 3, "random_state": random_state}
    warm = CO2ForestClassifier(**params, oob_score=True, warm_start=True).fit(X, y)
    warm.set_params(n_estimators=6).fit(X, y)
    np.testing.assert_allclose(
        warm.oob_decision_function_, _reference_oob_proba(warm, X), rtol=1e-12
    )
    if random_state is not None:
        cold = CO2ForestClassifier(**{**params, "n_estimators": 6}, oob_score=True).fit(X, y)
        np.testing.assert_array_equal(warm.oob_decision_function_, cold.oob_decision_function_)


def test_pickle_roundtrip(blobs):
    X, y = blobs
    clf = CO2ForestClassifier(**FAST).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clf.predict_proba(X), again.predict_proba(X))


@pytest.mark.parametrize(
    "params",
    [
        dict(max_depth=2),
        dict(max_leaf_nodes=4),
        dict(min_samples_leaf=10),
        dict(bootstrap=False),
        dict(class_weight="balanced"),
        dict(class_weight="balanced_subsample"),
        dict(class_weight={0: 1.0, 1: 5.0}),
        dict(max_features=None),
        dict(max_features=0.5),
        dict(max_features="log2"),
        dict(batch_size=7, momentum=0.0, cccp_epochs=2),
    ],
)
def test_parameters(blobs, params):
    X, y = blobs
    clf = CO2ForestClassifier(**{**FAST, **params}).fit(X, y)
    assert clf.score(X, y) > 0.6
    for tree in clf.trees_:
        tree.check_invariants()
    if "max_depth" in params:
        assert max(t.max_depth for t in clf.trees_) <= 2
    if "max_leaf_nodes" in params:
        assert max(t.n_leaves for t in clf.trees_) <= 4


def test_sample_weight_zero_rows_are_ignored(blobs):
    X, y = blobs
    sw = np.ones(len(y))
    sw[y == 2] = 0.0
    clf = CO2ForestClassifier(**FAST).fit(X, y, sample_weight=sw)
    assert clf.predict_proba(X)[:, 2].max() == 0.0


def test_string_labels_and_single_class(iris):
    X, y = iris
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = CO2ForestClassifier(**FAST).fit(X, names)
    assert set(clf.predict(X)) <= set(names)
    one = CO2ForestClassifier(**FAST).fit(X, np.zeros(len(X), dtype=int))
    np.testing.assert_array_equal(one.predict(X), 0)


@pytest.mark.parametrize(
    "name, value",
    [
        ("nu", 0.0),
        ("learning_rate", -1.0),
        ("n_estimators", 0),
        ("momentum", 1.0),
        ("batch_size", 0),
        ("max_features", "all"),
        ("cccp_epochs", 0),
        ("class_weight", "x"),
    ],
)
def test_bad_parameters_name_the_parameter(iris, name, value):
    X, y = iris
    with pytest.raises(ValueError, match=name):
        CO2ForestClassifier(**{name: value}).fit(X, y)


def test_clone_keeps_parameters():
    clf = CO2ForestClassifier(nu=4.0, learning_rate=0.01, max_depth=7)
    params = clone(clf).get_params()
    assert params["nu"] == 4.0 and params["learning_rate"] == 0.01 and params["max_depth"] == 7


def test_beats_random_forest_on_oblique_problem():
    """Linear class boundaries in general position are what oblique splits are for."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 8))
    y = np.argmax(X @ rng.normal(size=(8, 3)), axis=1)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.4, random_state=0)
    co2 = CO2ForestClassifier(n_estimators=10, random_state=0).fit(Xtr, ytr)
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(Xtr, ytr)
    assert co2.score(Xte, yte) > rf.score(Xte, yte) + 0.03


@pytest.mark.slow
@pytest.mark.parametrize("name", ["satimage", "pendigits"])
def test_beats_random_forest_on_paper_datasets(shared_data, name):
    data = shared_data(name)
    Xtr, ytr, Xte, yte = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    co2 = CO2ForestClassifier(n_estimators=30, random_state=0, n_jobs=2).fit(Xtr, ytr)
    rf = RandomForestClassifier(n_estimators=30, random_state=0, n_jobs=2).fit(Xtr, ytr)
    assert co2.score(Xte, yte) > rf.score(Xte, yte)
