"""CO2ForestRegressor: the estimator (its kernels: tests/training/test_targets.py)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from obliquetrees import CO2ForestRegressor


@pytest.fixture(scope="module")
def friedman():
    X, y = make_friedman1(n_samples=600, noise=0.5, random_state=0)
    return train_test_split(X, y, random_state=0)


def _oblique_problem(n=800, seed=0):
    """A target that steps along the direction x0 + x1: one oblique split, many axis ones."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0) + 0.05 * rng.normal(size=n)
    return X, y


def test_beats_random_forest_on_an_oblique_target():
    X, y = _oblique_problem()
    Xtr, Xte, ytr, yte = train_test_split(X, y, random_state=0)
    co2 = CO2ForestRegressor(n_estimators=10, random_state=0).fit(Xtr, ytr)
    rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(Xtr, ytr)
    assert co2.score(Xte, yte) > rf.score(Xte, yte) + 0.02
    assert co2.score(Xte, yte) > 0.9


def test_fully_grown_trees_interpolate_and_leaves_hold_mean_targets(friedman):
    Xtr, _, ytr, _ = friedman
    reg = CO2ForestRegressor(n_estimators=3, bootstrap=False, random_state=0).fit(Xtr, ytr)
    assert reg.forest_.n_outputs == 1
    # without bootstrap every leaf holds one distinct target: the training fit is exact
    np.testing.assert_allclose(reg.predict(Xtr), ytr, rtol=1e-9, atol=1e-9)
    assert reg.score(Xtr, ytr) == pytest.approx(1.0)


def test_leaf_values_are_bootstrap_weighted_means_in_target_units(friedman):
    from obliquetrees.co2.training import tree_bootstrap_counts

    Xtr, _, ytr, _ = friedman
    y = 1000.0 + 50.0 * ytr  # far from standardised
    reg = CO2ForestRegressor(n_estimators=2, max_depth=3, random_state=0).fit(Xtr, y)
    leaves = reg.apply(Xtr)
    for t, tree in enumerate(reg.trees_):
        boot = tree_bootstrap_counts(len(y), reg._tree_seeds[t])
        for leaf in np.unique(leaves[:, t]):
            rows = leaves[:, t] == leaf
            if boot[rows].sum() > 0:
                expected = np.average(y[rows], weights=boot[rows])
                np.testing.assert_allclose(tree.value[leaf, 0], expected, rtol=1e-10)


def test_multi_output(friedman):
    Xtr, Xte, ytr, yte = friedman
    Y = np.column_stack([ytr, -2.0 * ytr + 3.0])
    reg = CO2ForestRegressor(n_estimators=5, random_state=0).fit(Xtr, Y)
    assert reg.n_outputs_ == 2
    pred = reg.predict(Xte)
    assert pred.shape == (len(Xte), 2)
    # the second output is an affine map of the first: shared splits, exact leaf means
    np.testing.assert_allclose(pred[:, 1], -2.0 * pred[:, 0] + 3.0, rtol=1e-9, atol=1e-9)
    single = CO2ForestRegressor(n_estimators=5, random_state=0).fit(Xtr, ytr)
    assert single.n_outputs_ == 1 and single.predict(Xte).shape == (len(Xte),)


def test_sample_weight_equals_repetition():
    X, y = _oblique_problem(n=120)
    rng = np.random.default_rng(0)
    sw = rng.integers(1, 3, size=len(y)).astype(float)
    Xr, yr = np.repeat(X, sw.astype(int), axis=0), np.repeat(y, sw.astype(int))
    kw = dict(n_estimators=3, bootstrap=False, random_state=0, batch_size=10_000)
    a = CO2ForestRegressor(**kw).fit(X, y, sample_weight=sw)
    b = CO2ForestRegressor(**kw).fit(Xr, yr)
    # one minibatch of all rows: weights and repeats give the same gradients
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-6, atol=1e-6)


def test_same_model_whatever_n_jobs(friedman):
    Xtr, Xte, ytr, _ = friedman
    a = CO2ForestRegressor(n_estimators=4, random_state=3, n_jobs=1).fit(Xtr, ytr)
    b = CO2ForestRegressor(n_estimators=4, random_state=3, n_jobs=2).fit(Xtr, ytr)
    np.testing.assert_array_equal(a.predict(Xte), b.predict(Xte))


def test_warm_start_equals_cold_fit(friedman):
    Xtr, Xte, ytr, _ = friedman
    warm = CO2ForestRegressor(n_estimators=2, random_state=1, warm_start=True).fit(Xtr, ytr)
    warm.set_params(n_estimators=4).fit(Xtr, ytr)
    cold = CO2ForestRegressor(n_estimators=4, random_state=1).fit(Xtr, ytr)
    np.testing.assert_array_equal(warm.predict(Xte), cold.predict(Xte))
    with pytest.raises(
        ValueError, match=r"same number of outputs as the previous fit \(1\); got 2"
    ):
        warm.set_params(n_estimators=6).fit(Xtr, np.column_stack([ytr, ytr]))


def test_oob_score_is_r2_of_the_oob_predictions(friedman):
    Xtr, _, ytr, _ = friedman
    reg = CO2ForestRegressor(n_estimators=25, oob_score=True, random_state=0).fit(Xtr, ytr)
    covered = ~np.isnan(reg.oob_prediction_)
    assert reg.oob_prediction_.shape == ytr.shape and covered.mean() > 0.99
    assert reg.oob_score_ == pytest.approx(r2_score(ytr[covered], reg.oob_prediction_[covered]))
    assert 0.5 < reg.oob_score_ < 1.0
    reg.set_params(oob_score=False).fit(Xtr, ytr)
    assert not hasattr(reg, "oob_score_") and not hasattr(reg, "oob_prediction_")


def test_min_impurity_decrease_is_in_target_units(friedman):
    Xtr, _, ytr, _ = friedman
    for scale in (1.0, 100.0):
        reg = CO2ForestRegressor(
            n_estimators=2, min_impurity_decrease=0.05 * scale**2, random_state=0
        ).fit(Xtr, scale * ytr)
        if scale == 1.0:
            n_nodes = [t.node_count for t in reg.trees_]
        else:  # the same trees on a rescaled target
            assert [t.node_count for t in reg.trees_] == n_nodes
    full = CO2ForestRegressor(n_estimators=2, random_state=0).fit(Xtr, ytr)
    assert sum(n_nodes) < sum(t.node_count for t in full.trees_) / 3


def test_constant_target_gives_single_leaves():
    X = np.random.default_rng(0).normal(size=(50, 3))
    reg = CO2ForestRegressor(n_estimators=2, random_state=0).fit(X, np.full(50, 7.25))
    assert all(t.node_count == 1 for t in reg.trees_)
    np.testing.assert_array_equal(reg.predict(X), 7.25)


def test_sparse_and_dense_fits_agree(friedman):
    Xtr, Xte, ytr, _ = friedman
    X = np.where(np.abs(Xtr - 0.5) < 0.25, 0.0, Xtr)
    dense = CO2ForestRegressor(n_estimators=3, max_depth=6, random_state=0).fit(X, ytr)
    sparse = CO2ForestRegressor(n_estimators=3, max_depth=6, random_state=0).fit(
        sp.csr_matrix(X), ytr
    )
    np.testing.assert_allclose(dense.predict(Xte), sparse.predict(Xte), rtol=1e-6)


def test_missing_values(friedman):
    Xtr, Xte, ytr, yte = friedman
    rng = np.random.default_rng(0)
    X = Xtr.copy()
    X[rng.random(X.shape) < 0.1] = np.nan
    reg = CO2ForestRegressor(n_estimators=10, random_state=0).fit(X, ytr)
    Xq = Xte.copy()
    Xq[rng.random(Xq.shape) < 0.1] = np.nan
    pred = reg.predict(Xq)
    assert np.all(np.isfinite(pred)) and r2_score(yte, pred) > 0.6


def test_feature_importances_find_the_informative_features(friedman):
    Xtr, _, ytr, _ = friedman
    reg = CO2ForestRegressor(n_estimators=10, random_state=0).fit(Xtr, ytr)
    imp = reg.feature_importances_
    assert imp.sum() == pytest.approx(1.0)
    # make_friedman1: features 5..9 are noise; 0, 1, 3 and 4 enter y through
    # monotone terms (2 through a parabola centred in its range, which an
    # oblique split of the whole space uses little)
    assert imp[[0, 1, 3, 4]].min() > imp[5:].max()


def test_apply_and_decision_path(friedman):
    Xtr, Xte, ytr, _ = friedman
    reg = CO2ForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(Xtr, ytr)
    leaves = reg.apply(Xte)
    indicator, ptr = reg.decision_path(Xte)
    assert leaves.shape == (len(Xte), 3) and ptr.shape == (4,)
    for t in range(3):
        reached = indicator[:, ptr[t] : ptr[t + 1]].toarray()
        assert np.all(reached[np.arange(len(Xte)), leaves[:, t]] == 1)


def test_a_failed_refit_leaves_the_model_unchanged(friedman):
    Xtr, Xte, ytr, _ = friedman
    reg = CO2ForestRegressor(n_estimators=2, random_state=0).fit(Xtr, ytr)
    before = pickle.dumps(reg)
    y_bad = ytr.copy()
    y_bad[3] = np.inf
    with pytest.raises(ValueError, match="y"):
        reg.fit(Xtr, y_bad)
    assert pickle.dumps(reg) == before


def test_classifier_only_parameters_are_refused():
    with pytest.raises(TypeError):
        CO2ForestRegressor(class_weight="balanced")
