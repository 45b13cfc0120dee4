"""CO2ForestClassifier at the estimator level."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from obliquetrees.co2._estimator import CO2ForestClassifier
from tests import reference as ref

FAST = dict(n_estimators=5, max_cccp_iter=5, random_state=0)


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


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


def _reference_oob_proba(clf, X, n_draws=None):
    """OOB class distributions from the trees and their bootstraps, row by row."""
    n = X.shape[0]
    total, count = np.zeros((n, clf.n_classes_)), np.zeros(n)
    for tree, seed in zip(clf.trees_, clf._tree_seeds, strict=True):
        boot_seed = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=2)[0]
        drawn = np.random.RandomState(boot_seed).randint(0, n, n if n_draws is None else n_draws)
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
        ("class_weight", "balanced_sub"),
        ("max_samples", 0),
        ("max_samples", 0.0),
        ("max_samples", "half"),
        ("min_impurity_decrease", -0.1),
    ],
)
def test_bad_parameters_name_the_parameter(iris, name, value):
    X, y = iris
    with pytest.raises(ValueError, match=name):
        CO2ForestClassifier(**{name: value}).fit(X, y)


def test_unknown_keyword_names_the_public_class():
    with pytest.raises(TypeError, match=r"CO2ForestClassifier\.__init__\(\)"):
        CO2ForestClassifier(max_samples_fraction=0.5)


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


# ---------------------------------------------------------------- max_samples
@pytest.mark.parametrize(
    ("max_samples", "n_draws"), [(None, 400), (50, 50), (0.25, 100), (2.0, 800)]
)
def test_max_samples_is_the_number_of_bootstrap_draws(blobs, max_samples, n_draws):
    X, y = blobs
    clf = CO2ForestClassifier(**FAST, max_samples=max_samples).fit(X, y)
    for tree in clf.trees_:  # unit weights: the root holds the bootstrap counts' sum
        assert tree.n_node_samples[0] == n_draws


def test_max_samples_none_equals_all_rows(blobs):
    X, y = blobs
    default = CO2ForestClassifier(**FAST).fit(X, y)
    explicit = CO2ForestClassifier(**FAST, max_samples=len(X)).fit(X, y)
    np.testing.assert_array_equal(default.predict_proba(X), explicit.predict_proba(X))
    np.testing.assert_array_equal(default.forest_.weight_value, explicit.forest_.weight_value)


def test_smaller_bootstrap_leaves_more_rows_out_of_bag(blobs):
    X, y = blobs
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    clf = CO2ForestClassifier(**FAST, max_samples=0.3, oob_score=True).fit(X_train, y_train)
    n_draws = int(0.3 * len(X_train))
    expected = _reference_oob_proba(clf, X_train, n_draws)
    np.testing.assert_allclose(clf.oob_decision_function_, expected, rtol=1e-12)
    assert not np.isnan(expected).any()  # 5 trees of 90 draws leave every row out somewhere
    assert clf.trees_[0].n_node_samples[0] == n_draws
    assert abs(clf.oob_score_ - clf.score(X_test, y_test)) < 0.1


def test_max_samples_needs_bootstrap(blobs):
    X, y = blobs
    with pytest.raises(ValueError, match="max_samples=0.5 needs bootstrap=True"):
        CO2ForestClassifier(**FAST, max_samples=0.5, bootstrap=False).fit(X, y)


def test_warm_start_keeps_the_bootstrap_size(blobs):
    X, y = blobs
    warm = CO2ForestClassifier(**{**FAST, "n_estimators": 2}, max_samples=100, warm_start=True)
    warm.fit(X, y).set_params(n_estimators=4)
    with pytest.raises(ValueError, match="100 draws per tree.*give 400 draws"):
        warm.set_params(max_samples=None).fit(X, y)
    with pytest.raises(ValueError, match="no bootstrap"):
        warm.set_params(max_samples=None, bootstrap=False).fit(X, y)
    warm.set_params(max_samples=0.25, bootstrap=True).fit(X, y)  # 0.25 * 400 = 100 draws
    cold = CO2ForestClassifier(**{**FAST, "n_estimators": 4}, max_samples=100).fit(X, y)
    np.testing.assert_array_equal(warm.predict_proba(X), cold.predict_proba(X))


# ------------------------------------------------------ min_impurity_decrease
def _entropy_bits(dist):
    p = dist[dist > 0]
    return float(-(p * np.log2(p)).sum())


def _split_decreases(tree):
    """scikit-learn's weighted impurity decrease (entropy, bits) of every stored split."""
    total = tree.n_node_samples[0]
    out = []
    for node in np.flatnonzero(~tree.is_leaf):
        left, right = tree.children_left[node], tree.children_right[node]
        n_t, n_l, n_r = tree.n_node_samples[[node, left, right]]
        h_t, h_l, h_r = (_entropy_bits(tree.value[i]) for i in (node, left, right))
        out.append(n_t / total * (h_t - n_r / n_t * h_r - n_l / n_t * h_l))
    return np.array(out)


def test_min_impurity_decrease_prunes_weak_splits(blobs):
    X, y = blobs
    full = CO2ForestClassifier(**FAST).fit(X, y)
    pruned = CO2ForestClassifier(**FAST, min_impurity_decrease=0.02).fit(X, y)
    for tree in pruned.trees_:
        tree.check_invariants()
        decreases = _split_decreases(tree)
        assert decreases.size and decreases.min() >= 0.02 - 1e-12
    assert sum(t.n_leaves for t in pruned.trees_) < 0.5 * sum(t.n_leaves for t in full.trees_)
    assert pruned.score(X, y) > 0.7
    # fully grown trees: pure leaves; pruned ones hold mixed distributions
    assert all(np.all(t.value[t.is_leaf].max(axis=1) == 1.0) for t in full.trees_)
    assert any(np.any(t.value[t.is_leaf].max(axis=1) < 1.0) for t in pruned.trees_)


@pytest.mark.parametrize("params", [dict(max_samples=0.5), dict(min_impurity_decrease=0.01)])
def test_new_parameters_keep_sparse_nan_and_n_jobs_behaviour(blobs, params):
    import scipy.sparse as sp

    X, y = blobs
    X = X - np.median(X, axis=0)  # some zeros once sparsified below
    X[np.abs(X) < 0.2 * X.std(axis=0)] = 0.0
    kw = {**FAST, **params}
    dense = CO2ForestClassifier(**kw).fit(X, y)
    two = CO2ForestClassifier(**kw, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(dense.predict_proba(X), two.predict_proba(X))
    np.testing.assert_array_equal(dense.forest_.weight_value, two.forest_.weight_value)
    sparse = CO2ForestClassifier(**kw).fit(sp.csr_matrix(X), y)
    # the sparse fit equals the dense one up to rounding: same structure
    for a, b in zip(dense.trees_, sparse.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
    assert np.mean(dense.predict(X) == sparse.predict(X)) > 0.99
    X_nan = X.copy()
    X_nan[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    with_nan = CO2ForestClassifier(**kw).fit(X_nan, y)
    assert with_nan.score(X_nan, y) > 0.7
    if "min_impurity_decrease" in params:
        for tree in with_nan.trees_:
            assert _split_decreases(tree).min() >= 0.01 - 1e-12


# ---------------------------------------------------------------- class_weight
def test_class_weight_moves_splits_but_fully_grown_leaves_stay_pure(blobs):
    """What the docstring says: weights shape the hyperplanes; pure leaves ignore them."""
    X, y = blobs
    plain = CO2ForestClassifier(**FAST).fit(X, y)
    weighted = CO2ForestClassifier(**FAST, class_weight={0: 10.0}).fit(X, y)
    assert not np.array_equal(plain.forest_.weight_value, weighted.forest_.weight_value)
    for tree in weighted.trees_:
        assert np.all(tree.value[tree.is_leaf].max(axis=1) == 1.0)
    limited = CO2ForestClassifier(**FAST, class_weight={0: 10.0}, max_depth=2).fit(X, y)
    unweighted = CO2ForestClassifier(**FAST, max_depth=2).fit(X, y)
    # limited growth: leaf distributions (so predict_proba) lean towards the heavy class
    assert limited.predict_proba(X)[:, 0].mean() > unweighted.predict_proba(X)[:, 0].mean() + 0.1


def test_class_weight_helps_minority_recall_only_when_growth_is_limited():
    """1 %-positive problem, means over five draws (measured values in the comments)."""
    from sklearn.metrics import balanced_accuracy_score, recall_score

    def means(**params):
        recall, score = np.zeros(2), np.zeros(2)
        for seed in range(5):
            X, y = make_classification(
                4000, 8, n_informative=4, weights=[0.99], flip_y=0, class_sep=0.8,
                random_state=seed,
            )  # fmt: skip
            X_tr, X_te, y_tr, y_te = train_test_split(
                X, y, test_size=0.5, stratify=y, random_state=seed
            )
            for i, class_weight in enumerate([None, "balanced"]):
                clf = CO2ForestClassifier(30, class_weight=class_weight, random_state=0, **params)
                y_pred = clf.fit(X_tr, y_tr).predict(X_te)
                recall[i] += recall_score(y_te, y_pred) / 5
                score[i] += balanced_accuracy_score(y_te, y_pred) / 5
        return recall, score

    recall, score = means()  # fully grown: 0.28 -> 0.16, balanced accuracy 0.64 -> 0.58
    assert recall[1] <= recall[0]
    recall, score = means(max_depth=4)  # 0.20 -> 0.45, 0.60 -> 0.71
    assert recall[1] >= recall[0] + 0.15 and score[1] >= score[0] + 0.05
