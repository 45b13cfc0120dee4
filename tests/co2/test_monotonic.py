"""``monotonic_cst`` on CO2ForestClassifier and CO2ForestRegressor (issue 41).

The property: on random data and random constraint vectors, predictions along
any constrained feature (the others fixed, NaN-free or with NaN in the other
features) never move against the constraint
(:func:`tests._helpers.monotone_violations` at most 1e-12), for the
regressor's output and the binary classifier's probability of ``classes_[1]``,
on dense and CSR input and with the parameters that change how a node is
split. Several thousand lines per estimator in all.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from tests._helpers import monotone_violations

TOL = 1e-12

#: Small forests: the property is per tree, and small fits keep the file quick.
FAST = {"n_estimators": 4, "max_cccp_iter": 5, "random_state": 0}


def _problem(seed, n=300, p=5, classes=False):
    """Random inputs, a random constraint vector (at least one constrained feature) and
    targets that follow it in the constrained features plus an interaction and noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    cst = rng.choice([-1, 0, 1], size=p)
    cst[rng.integers(p)] = rng.choice([-1, 1])
    y = X @ (cst * rng.uniform(0.5, 2.0, size=p)) + X[:, 0] * X[:, 1] + rng.normal(size=n)
    if classes:
        y = (y > np.median(y)).astype(int)
    return X, y, cst


def _score(model):
    if isinstance(model, CO2ForestClassifier):
        return lambda Z: model.predict_proba(Z)[:, 1]
    return model.predict


def _violations(model, X, cst, n_lines=150, seed=0):
    """The worst move against ``cst`` along random lines, without and with NaN elsewhere."""
    score = _score(model)
    clean = monotone_violations(score, X, cst, n_lines=n_lines, seed=seed)
    nan = monotone_violations(score, X, cst, n_lines=n_lines, nan_fraction=0.3, seed=seed + 1)
    return max(clean, nan)


def _split_weights(tree):
    """``(node, feature, weight)`` of every stored split weight of ``tree``."""
    nodes = np.repeat(np.arange(tree.children_left.shape[0]), np.diff(tree.weight_indptr))
    return nodes, tree.weight_index, tree.weight_value


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Forest", [CO2ForestRegressor, CO2ForestClassifier])
@pytest.mark.parametrize("seed", range(8))
def test_predictions_never_move_against_random_constraints(Forest, seed, sparse):
    X, y, cst = _problem(seed, classes=Forest is CO2ForestClassifier)
    model = Forest(monotonic_cst=cst, **FAST).fit(sp.csr_matrix(X) if sparse else X, y)
    assert _violations(model, X, cst) <= TOL
    for tree in model.trees_:  # every stored split is compatible: c_j * w_j >= 0
        _, feature, weight = _split_weights(tree)
        assert np.all(cst[feature] * weight >= 0.0)


def _oblique_splits(model, cst):
    """Splits weighing several features, and those of them weighing a constrained one."""
    n_oblique = n_constrained = 0
    for tree in model.trees_:
        node, feature, _ = _split_weights(tree)
        oblique = np.bincount(node, minlength=tree.children_left.shape[0]) > 1
        n_oblique += np.count_nonzero(oblique)
        n_constrained += np.count_nonzero(oblique[np.unique(node[cst[feature] != 0])])
    return n_oblique, n_constrained


@pytest.mark.parametrize("Forest", [CO2ForestRegressor, CO2ForestClassifier])
def test_the_constrained_splits_stay_oblique(Forest):
    # the projection keeps the CCCP working: about as many oblique splits as without
    # constraints, many weighing a constrained feature, not only the axis-aligned starts
    X, y, cst = _problem(7, n=400, classes=Forest is CO2ForestClassifier)
    free, _ = _oblique_splits(Forest(**FAST).fit(X, y), cst)
    n_oblique, n_constrained = _oblique_splits(Forest(monotonic_cst=cst, **FAST).fit(X, y), cst)
    assert n_oblique > free / 2 and n_constrained > n_oblique / 4


@pytest.mark.parametrize(
    "params",
    [
        {"max_split_features": 2},
        {"min_samples_oblique": 100},
        {"oblique_test": "fit", "oblique_penalty": None},
        {"oblique_test": "fit", "oblique_penalty": 1.0},
        {"bootstrap": False, "oblique_penalty": 0.0, "oblique_test": "fit"},
        {"max_cccp_samples": 60, "max_depth": 6},
        {"min_samples_leaf": 5, "max_leaf_nodes": 20},
        {"max_features": 2, "min_impurity_decrease": 0.01},
    ],
)
@pytest.mark.parametrize("Forest", [CO2ForestRegressor, CO2ForestClassifier])
def test_the_split_options_keep_the_constraints(Forest, params):
    X, y, cst = _problem(11, classes=Forest is CO2ForestClassifier)
    model = Forest(monotonic_cst=cst, **FAST | params).fit(X, y)
    assert _violations(model, X, cst, n_lines=80) <= TOL


@pytest.mark.parametrize("class_weight", ["balanced", "balanced_subsample", {0: 1.0, 1: 5.0}])
def test_class_weights_keep_the_constraints(class_weight):
    X, y, cst = _problem(3, classes=True)
    y[np.flatnonzero(y == 1)[::2]] = 0  # unbalanced classes
    model = CO2ForestClassifier(monotonic_cst=cst, class_weight=class_weight, **FAST).fit(X, y)
    assert _violations(model, X, cst, n_lines=80) <= TOL


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Forest", [CO2ForestRegressor, CO2ForestClassifier])
def test_training_rows_with_nan_keep_the_constraints(Forest, sparse):
    # NaN in training: the trees learn missing-value indicators, which are free inputs
    X, y, cst = _problem(5, classes=Forest is CO2ForestClassifier)
    X_nan = X.copy()
    rng = np.random.default_rng(0)
    X_nan[rng.random(X.shape) < 0.15] = np.nan
    # missingness that tells the target: an indicator worth learning, also on feature 0
    k = X.shape[0] // 3
    X_nan[:k, 0] = np.where(y[:k] > np.median(y), np.nan, X[:k, 0])
    model = Forest(monotonic_cst=cst, **FAST).fit(sp.csr_matrix(X_nan) if sparse else X_nan, y)
    assert np.isfinite(_score(model)(X_nan)).all()
    assert _violations(model, X, cst) <= TOL


def test_no_constraint_grows_the_same_trees():
    X, y, _ = _problem(2)
    free = CO2ForestRegressor(**FAST).fit(X, y)
    zeros = CO2ForestRegressor(monotonic_cst=np.zeros(X.shape[1], dtype=int), **FAST).fit(X, y)
    np.testing.assert_array_equal(free.predict(X), zeros.predict(X))
    for a, b in zip(free.trees_, zeros.trees_, strict=True):
        np.testing.assert_array_equal(a.weight_value, b.weight_value)
        np.testing.assert_array_equal(a.value, b.value)


def test_constraints_by_feature_name():
    pd = pytest.importorskip("pandas")
    X, y, cst = _problem(4)
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    by_name = {name: int(c) for name, c in zip(names, cst, strict=True) if c != 0}
    named = CO2ForestRegressor(monotonic_cst=by_name, **FAST).fit(frame, y)
    listed = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    np.testing.assert_array_equal(named.predict(frame), listed.predict(X))
    with pytest.raises(ValueError, match="unexpected feature names"):
        CO2ForestRegressor(monotonic_cst={"nope": 1}, **FAST).fit(frame, y)


def test_scikit_learns_errors_surface_from_fit():
    X, y, _ = _problem(0)
    three = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    with pytest.raises(ValueError, match="not supported with multiclass classification"):
        CO2ForestClassifier(monotonic_cst=[1, 0, 0, 0, 0], **FAST).fit(X, three)
    with pytest.raises(ValueError, match="not supported with multiple outputs"):
        CO2ForestRegressor(monotonic_cst=[1, 0, 0, 0, 0], **FAST).fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match=r"array-like of -1, 0 or 1"):
        CO2ForestRegressor(monotonic_cst=[2, 0, 0, 0, 0], **FAST).fit(X, y)
    with pytest.raises(ValueError, match="monotonic_cst has shape"):
        CO2ForestRegressor(monotonic_cst=[1, 0], **FAST).fit(X, y)
    with pytest.raises(ValueError, match="was not fitted on data with feature names"):
        CO2ForestRegressor(monotonic_cst={"a": 1}, **FAST).fit(X, y)


def test_a_constrained_model_pickles():
    X, y, cst = _problem(6, classes=True)
    model = CO2ForestClassifier(monotonic_cst=cst, **FAST).fit(X, y)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    assert loaded.get_params()["monotonic_cst"].tolist() == cst.tolist()
    assert _violations(loaded, X, cst, n_lines=50) <= TOL


def test_warm_start_keeps_the_constraints_of_the_first_fit():
    X, y, cst = _problem(8)
    model = CO2ForestRegressor(monotonic_cst=cst, warm_start=True, **FAST).fit(X, y)
    model.set_params(n_estimators=6).fit(X, y)
    assert len(model.trees_) == 6 and _violations(model, X, cst, n_lines=50) <= TOL
    model.set_params(n_estimators=8, monotonic_cst=None)
    with pytest.raises(ValueError, match="needs the monotonic_cst of the previous fit"):
        model.fit(X, y)


def test_leaves_are_clamped_only_where_a_constrained_split_is_out_of_order():
    from obliquetrees.co2._monotone import order_leaves

    # node 0 splits on a constrained input into 1 and 2; node 1 (free) into leaves 3 and 4,
    # node 2 (constrained, in order) into leaves 5 and 6
    left = np.array([1, 3, 5, -1, -1, -1, -1])
    right = np.array([2, 4, 6, -1, -1, -1, -1])
    constrained = np.array([True, False, True, False, False, False, False])
    value = np.array([[0.0], [0.0], [0.0], [5.0], [1.0], [2.0], [6.0]])
    weight = np.array([0, 0, 0, 1.0, 1.0, 3.0, 1.0])
    order_leaves(constrained, left, right, value, weight)
    # only leaf 3 (5.0) reaches above leaf 5 (2.0): they meet at the least squared change,
    # t = (1 * 5 + 3 * 2) / 4 = 2.75; leaves 4 and 6 keep their values
    np.testing.assert_allclose(value[3:, 0], [2.75, 1.0, 2.75, 6.0])
    value[3:, 0] = [0.0, 1.0, 2.0, 6.0]  # in order: nothing moves
    order_leaves(constrained, left, right, value, weight)
    np.testing.assert_array_equal(value[3:, 0], [0.0, 1.0, 2.0, 6.0])
