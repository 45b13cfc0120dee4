"""CO2's ``oblique_test="out_of_bag"``: the axis-or-oblique choice on each tree's
out-of-bag rows (obliquetrees/co2/_oob.py, the split kernels of co2/_node.py
and co2/_sparse_kernels.py, the grower co2/_grow.py and co2/training.py)."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_classification

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from tests import reference as ref

N = pytest.importorskip("obliquetrees.co2._node")
O = pytest.importorskip("obliquetrees.co2._oob")  # noqa: E741
co2 = pytest.importorskip("obliquetrees.co2.training")

from tests.co2.test_training import _co2_params  # noqa: E402


def _n_weights(model):
    """Stored weights of every split node of every tree."""
    return np.concatenate([np.diff(t.weight_indptr)[t.children_left != -1] for t in model.trees_])


def _data(sparse=False, seed=0):
    X, y = make_classification(300, 12, n_informative=6, n_classes=3, random_state=seed)
    return (sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if sparse else X), y


# ------------------------------------------------------------------- defaults
def _same_trees(a, b):
    for s, t in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(s.weight_value, t.weight_value)
        np.testing.assert_array_equal(s.bias, t.bias)


def test_the_out_of_bag_test_at_margin_zero_is_the_regressors_default():
    X, y = _data()
    kw = dict(n_estimators=3, max_depth=6, random_state=0)
    default = CO2ForestRegressor(**kw).fit(X, y)
    chosen = dict(max_features=None, oblique_test="out_of_bag", oblique_penalty=0.0)
    explicit = CO2ForestRegressor(**chosen, **kw).fit(X, y)
    _same_trees(default, explicit)
    np.testing.assert_array_equal(default.predict(X), explicit.predict(X))
    paper = CO2ForestRegressor(oblique_penalty=None, **kw).fit(X, y)
    assert default.n_axis_fallback_.sum() > paper.n_axis_fallback_.sum()


def test_the_out_of_bag_test_at_a_chosen_margin_is_the_classifiers_default():
    X, y = _data()
    kw = dict(n_estimators=3, max_depth=6, random_state=0)
    default = CO2ForestClassifier(**kw).fit(X, y)
    assert default.oblique_penalty_ == 0.0  # what the pilots choose here
    chosen = dict(max_features=None, oblique_test="out_of_bag", oblique_penalty="auto")
    explicit = CO2ForestClassifier(**chosen, **kw).fit(X, y)
    _same_trees(default, explicit)
    # the test does act: some nodes keep their axis-aligned start
    paper = CO2ForestClassifier(max_features=None, oblique_penalty=None, **kw).fit(X, y)
    assert default.n_axis_fallback_.sum() > paper.n_axis_fallback_.sum()


def test_without_a_penalty_the_out_of_bag_test_changes_nothing():
    X, y = _data()
    kw = dict(n_estimators=3, max_depth=6, random_state=0, oblique_penalty=None)
    fit = CO2ForestClassifier(oblique_test="fit", **kw).fit(X, y)
    oob = CO2ForestClassifier(oblique_test="out_of_bag", **kw).fit(X, y)
    np.testing.assert_array_equal(fit.predict_proba(X), oob.predict_proba(X))


def test_kernel_args_encode_the_test():
    assert _co2_params().kernel_args().oblique_test == 0
    params = _co2_params(oblique_test="out_of_bag", oblique_penalty=0.0)
    assert params.kernel_args().oblique_test == O.OUT_OF_BAG and params.tests_out_of_bag
    assert not _co2_params(oblique_test="out_of_bag").tests_out_of_bag  # no penalty: no test


# --------------------------------------------------------------- the kernels' parts
def _oob_case(seed, m=60, p=4, n_classes=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, p))
    y = rng.integers(0, n_classes, size=m).astype(np.int64)
    weight = rng.integers(0, 3, size=m).astype(np.float64)  # 0: not out of bag
    return X, y, weight


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("penalty", [0.0, 0.7])
def test_oob_keeps_is_the_gain_on_the_out_of_bag_rows(seed, penalty):
    X, y, weight = _oob_case(seed)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    source = N.dense_source(np.ascontiguousarray(X * scale + mean), mean, scale)
    rows = np.flatnonzero(weight > 0)
    start, end = 3, rows.shape[0] - 2  # the node's slice
    rng = np.random.default_rng(seed + 100)
    w, mu = rng.normal(size=4), rng.normal(size=4) * 0.1
    b, feature, threshold = 0.2, 2, -0.1
    params = _co2_params(oblique_test="out_of_bag", oblique_penalty=penalty).kernel_args()
    data = (source, y, weight, rows, (rows, weight, start, end))
    got = O.oob_keeps(data, w, b, mu, feature, threshold, 3, params)
    node = rows[start:end]
    Xs = (source[0][node] - mean) / scale
    oblique = Xs @ w + (b - w @ mu) > 0
    axis = Xs[:, feature] - mu[feature] > threshold
    yn, wn = y[node], weight[node]
    gain = ref.co2_weighted_entropy(yn, wn, axis, 3) - ref.co2_weighted_entropy(yn, wn, oblique, 3)
    assert got == (gain >= penalty)  # a tie keeps the oblique split
    # no out-of-bag rows: no gain, the oblique split kept at margin 0 only; the test off: no say
    empty = (source, y, weight, rows, (rows, weight, 4, 4))
    assert O.oob_keeps(empty, w, b, mu, feature, threshold, 3, params) == (penalty == 0.0)
    fit = _co2_params(oblique_penalty=penalty).kernel_args()
    assert O.oob_keeps(data, w, b, mu, feature, threshold, 3, fit)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_split_oob_partitions_the_slice_by_the_stored_split(sparse, seed):
    X, _, weight = _oob_case(seed, m=50)
    rows, _, ostart, oend = O.out_of_bag(weight)
    oob = O.grow_oob((rows, weight, ostart, oend), 5)
    _, _, ostart, oend = oob
    ostart[2], oend[2] = 2, rows.shape[0] - 1  # node 2's slice
    w = np.random.default_rng(seed).normal(size=4)
    if sparse:
        Xc = sp.csr_matrix(np.where(np.abs(X) > 0.4, X, 0.0))
        source, dense = (Xc.indptr, Xc.indices.astype(np.int64), Xc.data), Xc.toarray()
    else:
        source = N.dense_source(np.ascontiguousarray(X))
        dense = X
    before = rows.copy()
    O.split_oob(oob, source, w, 0.1, 2, 3)
    node = before[2 : rows.shape[0] - 1]
    right = dense[node] @ w + 0.1 > 0
    assert (ostart[3], oend[4]) == (2, rows.shape[0] - 1) and oend[3] == ostart[4]
    assert sorted(rows[ostart[3] : oend[3]]) == sorted(node[~right])
    assert sorted(rows[ostart[4] : oend[4]]) == sorted(node[right])
    np.testing.assert_array_equal(rows[:2], before[:2])  # only the node's slice moves
    np.testing.assert_array_equal(rows[oend[4] :], before[oend[4] :])


# ------------------------------------------------------------------ grown trees
def _route(left, right, weights, bias, X):
    """Per node, the rows of ``X`` (standardised) routed down the grown tree's splits."""
    reach = [np.arange(X.shape[0])]
    reach += [None] * (left.shape[0] - 1)
    for node in range(left.shape[0]):  # parents before children
        if left[node] >= 0:
            r = reach[node]
            goes_right = X[r] @ weights[node] + bias[node] > 0
            reach[left[node]] = r[~goes_right]
            reach[right[node]] = r[goes_right]
    return reach


@pytest.mark.parametrize("seed", range(3))
def test_a_node_tests_on_the_out_of_bag_rows_routed_to_it(seed):
    # few out-of-bag rows: most nodes get none, or one class only, and must keep the start
    rng = np.random.default_rng(seed)
    X, y = make_classification(400, 6, n_informative=4, n_classes=3, random_state=seed)
    X = np.ascontiguousarray((X - X.mean(axis=0)) / X.std(axis=0))
    counts = rng.poisson(1.0, size=400).astype(np.float64)
    oob_weight = np.where((counts == 0) & (rng.random(400) < 0.4), 1.0, 0.0)
    # a margin above 0: a kept oblique split gained on its out-of-bag rows
    params = _co2_params(oblique_test="out_of_bag", oblique_penalty=1e-9, max_features=6)
    left, right, weights, bias, *_ = co2.grow_tree(X, y, counts, 3, seed, params, 0, oob_weight)
    weights = np.asarray(weights)
    X_oob, y_oob = X[oob_weight > 0], y[oob_weight > 0]
    reach = _route(left, right, weights, bias, X_oob)
    oblique = []
    for node in np.flatnonzero(left >= 0):
        if np.count_nonzero(weights[node]) > 1:  # kept oblique: a gain on its out-of-bag rows
            oblique.append(node)
            # so they hold two classes, and the split divides them (all on one side, its
            # sides' entropy is the node's, which the start's cannot exceed)
            r = reach[node]
            assert np.unique(y_oob[r]).shape[0] >= 2
            goes_right = X_oob[r] @ weights[node] + bias[node] > 0
            assert 0 < np.count_nonzero(goes_right) < r.shape[0]
    # below the root too: the children got their out-of-bag rows
    assert max(oblique, default=0) > 0 and len(oblique) < np.count_nonzero(left >= 0)
    # the same tree without out-of-bag rows keeps every start
    left0, _, weights0, *_ = co2.grow_tree(X, y, counts, 3, seed, params, 0, 0.0 * oob_weight)
    assert all(np.count_nonzero(weights0[n]) == 1 for n in np.flatnonzero(left0 >= 0))


@pytest.mark.parametrize("sparse", [False, True])
def test_an_unpayable_margin_keeps_every_axis_aligned_start(sparse):
    X, y = _data(sparse, seed=1)
    kw = dict(n_estimators=3, max_depth=6, random_state=0)
    never = CO2ForestClassifier(oblique_test="out_of_bag", oblique_penalty=1e12, **kw).fit(X, y)
    starts = CO2ForestClassifier(max_split_features=1, **kw).fit(X, y)
    assert _n_weights(never).max() == 1
    for a, b in zip(never.trees_, starts.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_array_equal(a.weight_index, b.weight_index)
        np.testing.assert_array_equal(a.bias, b.bias)
    np.testing.assert_array_equal(never.predict(X), starts.predict(X))


def test_sparse_matches_dense_with_the_out_of_bag_test():
    rng = np.random.RandomState(0)
    X = sp.random(250, 25, density=0.3, format="csr", random_state=0)
    y = (X @ rng.randn(25) > 0).astype(np.int64)
    fit = dict(
        n_estimators=2, random_state=0, max_depth=5, oblique_test="out_of_bag", oblique_penalty=0.0
    )
    dense = CO2ForestClassifier(**fit).fit(X.toarray(), y)
    sparse = CO2ForestClassifier(**fit).fit(X, y)
    assert (_n_weights(dense) > 1).any()
    for a, b in zip(dense.trees_, sparse.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_allclose(a.bias, b.bias, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(dense.predict(X.toarray()), sparse.predict(X))


@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_the_out_of_bag_test_is_the_same_for_any_n_jobs(Estimator):
    X, y = _data()
    kw = dict(
        n_estimators=4, random_state=0, max_depth=8, oblique_test="out_of_bag", oblique_penalty=0.0
    )
    one = Estimator(n_jobs=1, **kw).fit(X, y)
    two = Estimator(n_jobs=2, **kw).fit(X, y)
    for a, b in zip(one.trees_, two.trees_, strict=True):
        np.testing.assert_array_equal(a.weight_value, b.weight_value)
        np.testing.assert_array_equal(a.bias, b.bias)


def test_class_weight_and_sample_weight_weigh_the_out_of_bag_rows():
    X, y = _data()
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=y.shape[0])
    kw = dict(n_estimators=3, random_state=0, oblique_test="out_of_bag", oblique_penalty=0.0)
    for cw in (None, "balanced", "balanced_subsample"):
        model = CO2ForestClassifier(class_weight=cw, **kw).fit(X, y, sample_weight=sw)
        assert model.score(X, y) > 0.9


@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_without_bootstrap_margin_zero_keeps_every_oblique_split(Estimator):
    # no row is out of bag: every node keeps its oblique split, the paper's stump
    X, y = _data()
    kw = dict(n_estimators=2, random_state=0, bootstrap=False, max_depth=6)
    tested = Estimator(oblique_test="out_of_bag", oblique_penalty=0.0, **kw).fit(X, y)
    paper = Estimator(oblique_penalty=None, **kw).fit(X, y)
    for a, b in zip(tested.trees_, paper.trees_, strict=True):
        np.testing.assert_array_equal(a.weight_value, b.weight_value)
        np.testing.assert_array_equal(a.bias, b.bias)


# ---------------------------------------------------------------------- errors
def test_without_bootstrap_a_positive_margin_is_an_error():
    X, y = _data()
    model = CO2ForestClassifier(n_estimators=2, random_state=0).fit(X, y)
    before = model.predict_proba(X)
    state = set(vars(model))
    model.set_params(bootstrap=False, oblique_test="out_of_bag", oblique_penalty=0.5)
    with pytest.raises(ValueError, match="oblique_test.*oblique_penalty=0.5.*bootstrap"):
        model.fit(X, y)
    assert set(vars(model)) == state
    np.testing.assert_array_equal(model.predict_proba(X), before)
    fresh = CO2ForestRegressor(bootstrap=False, oblique_test="out_of_bag", oblique_penalty=1.0)
    with pytest.raises(ValueError, match="oblique_test.*bootstrap"):
        clone(fresh).fit(X, y)
    with pytest.raises(ValueError, match="oblique_test"):
        CO2ForestClassifier(oblique_test="held_out").fit(X, y)
