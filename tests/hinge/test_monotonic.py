"""``monotonic_cst`` of the hinge forests: the property, the checks, warm starts and pickles.

Every fitted model is swept along random lines of each constrained feature
(:func:`tests._helpers.monotone_violations`): the regressor's output and the
binary classifier's probability of ``classes_[1]`` never move against the
constraint, for both heads, trees and ferns, with and without the linear
layer, NaN-free and with NaN in the other features (also after training on
rows with NaN).
"""

import pickle

import numpy as np
import pytest

from obliquetrees import HingeForestClassifier, HingeForestRegressor
from tests._helpers import monotone_violations

SMALL = dict(n_estimators=8, max_depth=4, n_hinge_features=12, max_epochs=8, batch_size=32)


def _data(seed, n=300, p=5, nan_fraction=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] - np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=n)
    if nan_fraction:
        X[rng.random(X.shape) < nan_fraction] = np.nan
    return X, y


def _constraints(seed, p=5):
    rng = np.random.default_rng(seed + 100)
    cst = rng.integers(-1, 2, size=p)
    cst[rng.integers(p)] = rng.choice([-1, 1])  # at least one constrained feature
    return cst


CASES = [
    (head, tree_type, n_hinge)
    for head in ("sum", "linear")
    for tree_type in ("tree", "fern")
    for n_hinge in (12, None)
]


def _positive_class(clf):
    def predict(Z):
        return clf.predict_proba(Z)[:, 1]

    return predict


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("head, tree_type, n_hinge", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_predictions_are_monotone(classifier, head, tree_type, n_hinge, seed):
    # seed 1 trains on rows with NaN; every model is swept with NaN in other features too
    X, y = _data(seed, nan_fraction=0.05 * seed)
    cst = _constraints(seed)
    params = {**SMALL, "n_hinge_features": n_hinge}
    Estimator = HingeForestClassifier if classifier else HingeForestRegressor
    model = Estimator(
        head=head, tree_type=tree_type, monotonic_cst=cst, random_state=seed, **params
    ).fit(X, np.where(y > 0, "yes", "no") if classifier else y)
    predict = _positive_class(model) if classifier else model.predict
    grid = np.nan_to_num(X)
    for nan_fraction in (0.0, 0.3):
        worst = monotone_violations(
            predict, grid, cst, n_lines=60, nan_fraction=nan_fraction, seed=seed
        )
        assert worst <= 1e-12


@pytest.mark.parametrize("optimizer", ["adam", "adagrad", "sgd"])
def test_every_optimiser_keeps_the_constraint(optimizer):
    X, y = _data(3)
    cst = [1, -1, 0, 0, 1]
    reg = HingeForestRegressor(
        optimizer=optimizer, monotonic_cst=cst, random_state=0, learning_rate=0.02, **SMALL
    ).fit(X, y)
    assert monotone_violations(reg.predict, X, cst, n_lines=100) <= 1e-12


def test_the_constraint_binds():
    # y falls with x0: constrained to rise, the fit can only flatten it
    X, y = _data(4)
    y = -3 * X[:, 0] + 0.1 * y
    free = HingeForestRegressor(random_state=0, **SMALL).fit(X, y)
    held = HingeForestRegressor(monotonic_cst=[1, 0, 0, 0, 0], random_state=0, **SMALL).fit(X, y)
    assert monotone_violations(free.predict, X, [1, 0, 0, 0, 0], n_lines=50) > 0.1
    assert monotone_violations(held.predict, X, [1, 0, 0, 0, 0], n_lines=50) <= 1e-12
    assert held.score(X, y) < free.score(X, y)


@pytest.mark.parametrize("cst", [None, [0, 0, 0, 0, 0]])
def test_no_constraint_changes_nothing(cst):
    X, y = _data(5)
    plain = HingeForestRegressor(random_state=0, **SMALL).fit(X, y)
    same = HingeForestRegressor(monotonic_cst=cst, random_state=0, **SMALL).fit(X, y)
    np.testing.assert_array_equal(plain.predict(X), same.predict(X))


def test_constraints_by_feature_name():
    pd = pytest.importorskip("pandas")
    X, y = _data(6)
    frame = pd.DataFrame(X, columns=list("abcde"))
    named = HingeForestRegressor(monotonic_cst={"a": 1, "d": -1}, random_state=0, **SMALL)
    by_position = HingeForestRegressor(monotonic_cst=[1, 0, 0, -1, 0], random_state=0, **SMALL)
    np.testing.assert_array_equal(
        named.fit(frame, y).predict(frame), by_position.fit(X, y).predict(X)
    )
    with pytest.raises(ValueError, match="unexpected feature names"):
        HingeForestRegressor(monotonic_cst={"z": 1}, **SMALL).fit(frame, y)


def test_scikit_learns_errors():
    X, y = _data(7)
    three_classes = np.digitize(y, [-1, 1])
    with pytest.raises(ValueError, match="not supported with multiclass classification"):
        HingeForestClassifier(monotonic_cst=[1, 0, 0, 0, 0], **SMALL).fit(X, three_classes)
    with pytest.raises(ValueError, match=r"Observed values: \[2\]"):
        HingeForestRegressor(monotonic_cst=[2, 0, 0, 0, 0], **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="has 5 features"):
        HingeForestRegressor(monotonic_cst=[1, 0], **SMALL).fit(X, y)


def test_warm_start_and_partial_fit_keep_the_constraint():
    X, y = _data(8)
    cst = [0, 1, 0, -1, 0]
    reg = HingeForestRegressor(monotonic_cst=cst, warm_start=True, random_state=0, **SMALL)
    reg.fit(X, y).fit(X, y)
    assert reg.n_iter_ > SMALL["max_epochs"]
    assert monotone_violations(reg.predict, X, cst, n_lines=100) <= 1e-12
    reg.set_params(monotonic_cst=[1, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="the monotonic_cst of the fitted model"):
        reg.fit(X, y)
    online = HingeForestRegressor(monotonic_cst=cst, random_state=0, **SMALL)
    for part in np.array_split(np.arange(len(X)), 3):
        online.partial_fit(X[part], y[part])
    assert monotone_violations(online.predict, X, cst, n_lines=100) <= 1e-12


def test_sparse_input_keeps_the_constraint():
    sparse = pytest.importorskip("scipy.sparse")
    X, y = _data(9)
    X[np.abs(X) < 0.7] = 0.0
    cst = [1, 0, 0, 0, -1]
    reg = HingeForestRegressor(monotonic_cst=cst, random_state=0, **SMALL)
    reg.fit(sparse.csr_matrix(X), y)
    assert monotone_violations(reg.predict, X, cst, n_lines=100) <= 1e-12


def test_pickled_constrained_model():
    X, y = _data(10)
    cst = [-1, 0, 1, 0, 0]
    reg = HingeForestRegressor(monotonic_cst=cst, random_state=0, **SMALL).fit(X, y)
    back = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))
    assert back._model.monotonic_cst.tolist() == cst
    assert monotone_violations(back.predict, X, cst, n_lines=50) <= 1e-12


@pytest.mark.parametrize("is_fern", [False, True])
@pytest.mark.parametrize("levels", [1, 2, 3, 9])
def test_pool_levels_place_pool_decisions_and_zero_mixed_leaves(is_fern, levels):
    """The first ``levels`` levels test the pool, the rest free features; only the leaves
    under the all-right and all-left paths through the pool levels may be non-zero."""
    from obliquetrees.hinge import _kernels as K
    from obliquetrees.hinge._monotonic import draw_structure, leaf_rules

    depth, n_trees = 5, 6
    direction = np.array([1, 1, 1, 0, 0, 1], dtype=np.int8)
    n_decisions = depth if is_fern else 2**depth - 1
    feat = np.zeros((n_trees, n_decisions), dtype=np.int64)
    draw_structure(feat, direction, np.random.default_rng(levels), is_fern, levels)
    pool_levels = min(levels, depth)
    n_pool = pool_levels if is_fern else 2**pool_levels - 1
    assert np.all(direction[feat[:, :n_pool]] == 1)
    assert np.all(direction[feat[:, n_pool:]] == 0)
    rule = leaf_rules(feat, direction, depth, is_fern)
    below = 2 ** (depth - pool_levels)  # leaves under one path through the pool levels
    expected = np.full(2**depth, K.RULE_ZERO)
    expected[:below] = K.RULE_DOWN  # all-left: leaves 0 .. below-1
    expected[-below:] = K.RULE_UP  # all-right
    np.testing.assert_array_equal(rule, np.broadcast_to(expected, rule.shape))


@pytest.mark.parametrize("levels", [2, 3])
@pytest.mark.parametrize("tree_type", ["tree", "fern"])
def test_deeper_pool_keeps_the_constraint(monkeypatch, levels, tree_type):
    """Both tasks with pool levels and free levels below them (depth 5)."""
    from obliquetrees.hinge import _monotonic

    monkeypatch.setattr(_monotonic, "POOL_LEVELS", {"regression": levels, "classification": levels})
    X, y = _data(11, nan_fraction=0.03)
    cst = [1, 0, -1, 0, 0]
    params = {**SMALL, "max_depth": 5, "tree_type": tree_type}
    reg = HingeForestRegressor(monotonic_cst=cst, random_state=0, **params).fit(X, y)
    clf = HingeForestClassifier(monotonic_cst=cst, random_state=0, **params).fit(X, y > 0)
    grid = np.nan_to_num(X)
    for predict in (reg.predict, _positive_class(clf)):
        for nan_fraction in (0.0, 0.3):
            worst = monotone_violations(predict, grid, cst, n_lines=60, nan_fraction=nan_fraction)
            assert worst <= 1e-12
    n_pool = levels if tree_type == "fern" else 2**levels - 1
    for model in (reg._model, clf._model):
        assert np.all(model.monotone_dir[model.feat[:, :n_pool]] == 1)
        assert np.all(model.monotone_dir[model.feat[:, n_pool:]] == 0)


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("screening", [True, "auto"])
def test_screened_layer_keeps_the_constraint(classifier, screening):
    """The screen may leave constrained inputs out: the model is then flat in them."""
    X, y = _data(6, n=400)
    X = np.hstack([X, np.random.default_rng(7).normal(size=(400, 25))])  # noise inputs
    cst = np.zeros(X.shape[1], dtype=int)
    cst[[0, 2, 9]] = [1, 1, -1]  # input 9 is noise: screened out, or kept and constrained
    Estimator = HingeForestClassifier if classifier else HingeForestRegressor
    model = Estimator(feature_screening=screening, monotonic_cst=cst, random_state=0, **SMALL).fit(
        X, np.where(y > 0, "yes", "no") if classifier else y
    )
    if screening is True:
        assert model.screened_features_ is not None and not model.screened_features_.all()
    predict = _positive_class(model) if classifier else model.predict
    for nan_fraction in (0.0, 0.3):
        assert monotone_violations(predict, X, cst, n_lines=60, nan_fraction=nan_fraction) <= 1e-12
