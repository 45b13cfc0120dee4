"""predict_quantiles: the leaf-target container, its kernel and every regressor that has it."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import NotFittedError

from obliquetrees import (
    CO2ForestRegressor,
    E2EDTRegressor,
    HingeForestRegressor,
    SoftTreeRegressor,
)
from obliquetrees._core import quantiles as kernel
from obliquetrees._core.leaf_targets import LeafTargets
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import refit_leaves
from tests import reference

CO2 = dict(n_estimators=4, max_cccp_iter=2, random_state=0)
E2EDT = dict(max_depth=3, max_epochs=2, routing="hard", random_state=0)


@pytest.fixture(scope="module")
def data():
    X, y = make_friedman1(n_samples=240, n_features=6, random_state=0)
    return X, y


@pytest.fixture(scope="module")
def co2(data):
    return CO2ForestRegressor(**CO2).fit(*data)


@pytest.fixture(scope="module")
def tree(data):
    return E2EDTRegressor(**E2EDT).fit(*data)


def _random_store(rng, n_nodes, n_outputs, integer_weights=False):
    """A LeafTargets over ``n_nodes`` nodes, some of them empty, and its leaf ids."""
    sizes = rng.integers(0, 6, n_nodes)
    sizes[rng.random(n_nodes) < 0.2] = 0
    leaf_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    m = int(leaf_ptr[-1])
    targets = rng.normal(size=(n_outputs, m)).round(1)  # rounded: ties among targets
    weights = rng.integers(1, 4, (n_outputs, m)).astype(float)
    if not integer_weights:
        weights *= rng.uniform(0.5, 2.0, (n_outputs, m))
    for o in range(n_outputs):  # sort each leaf's entries by target
        for g in range(n_nodes):
            part = slice(leaf_ptr[g], leaf_ptr[g + 1])
            order = np.argsort(targets[o, part], kind="stable")
            targets[o, part] = targets[o, part][order]
            weights[o, part] = weights[o, part][order]
    return LeafTargets(leaf_ptr, targets, weights)


def _kernel(nodes, store, levels):
    out = np.empty((nodes.shape[0], store.n_outputs, levels.shape[0]))
    kernel._forest_quantiles(nodes, store.leaf_ptr, store.targets, store.weights, levels, out)
    return out


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_kernel_matches_the_numpy_reference(rng, n_outputs):
    store = _random_store(rng, 60, n_outputs)
    nodes = rng.integers(0, 60, (50, 5))
    levels = np.r_[0.0, rng.uniform(size=6), 0.5, 1.0]
    expected = reference.forest_quantiles(
        nodes, store.leaf_ptr, store.targets, store.weights, levels, kernel.TIE_TOLERANCE
    )
    assert_allclose(_kernel(nodes, store, levels), expected, rtol=1e-12, equal_nan=True)


def test_kernel_is_numpys_averaged_inverted_cdf_of_the_repeated_targets(rng):
    """Integer weights: each tree's leaf as its entries repeated (to a common total).

    Levels k/16 are exact in binary, so numpy's ``q * n`` finds the exact ties
    too (at q = 0.35 and n = 20 it computes 7.000000000000001 and misses the
    tie the kernel's tolerance finds).
    """
    store = _random_store(rng, 30, 1, integer_weights=True)
    nonempty = np.flatnonzero(np.diff(store.leaf_ptr))
    levels = np.linspace(0, 1, 17)
    for _ in range(20):
        nodes = rng.choice(nonempty, rng.integers(1, 4))
        parts = [slice(store.leaf_ptr[g], store.leaf_ptr[g + 1]) for g in nodes]
        totals = [int(store.weights[0, p].sum()) for p in parts]
        common = int(np.prod(totals))  # every leaf repeated to the same total weight
        sample = np.concatenate(
            [
                np.repeat(store.targets[0, p], store.weights[0, p].astype(int) * common // t)
                for p, t in zip(parts, totals, strict=True)
            ]
        )
        expected = np.quantile(sample, levels, method="averaged_inverted_cdf")
        got = _kernel(nodes[None, :], store, levels)[0, 0]
        assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_a_row_whose_leaves_hold_no_entry_gets_nan(rng):
    store = LeafTargets(
        np.array([0, 0, 2], dtype=np.int64), np.array([[1.0, 2.0]]), np.ones((1, 2))
    )
    out = _kernel(np.array([[0], [1]]), store, np.array([0.5]))
    assert np.isnan(out[0, 0, 0]) and out[1, 0, 0] == 1.5


def test_one_tree_median_is_the_leaf_median(data, tree):
    """E2EDT's single tree sees every row once: the 0.5-quantile is np.median of its leaf."""
    X, y = data
    leaf = tree.apply(X)
    expected = [np.median(y[leaf == node]) for node in leaf[:40]]
    assert_array_equal(tree.predict_quantiles(X[:40], 0.5), expected)


def test_one_tree_of_a_bootstrap_forest_weighs_its_draws(data):
    from obliquetrees.co2.training import tree_bootstrap_counts

    X, y = data
    model = CO2ForestRegressor(**{**CO2, "n_estimators": 1, "max_depth": 3}).fit(X, y)
    counts = tree_bootstrap_counts(len(y), model._tree_seeds[0], model._n_draws).astype(int)
    leaf = model.apply(X)[:, 0]
    drawn = [np.repeat(y[leaf == node], counts[leaf == node]) for node in leaf[:30]]
    assert_array_equal(model.predict_quantiles(X[:30], 0.5), [np.median(d) for d in drawn])
    assert_array_equal(model.predict_quantiles(X[:30], 0.0), [d.min() for d in drawn])


def test_shapes(data, co2):
    X, y = data
    assert co2.predict_quantiles(X[:7]).shape == (7, 3)
    assert co2.predict_quantiles(X[:7], 0.5).shape == (7,)
    assert co2.predict_quantiles(X[:7], [0.5]).shape == (7, 1)
    two = CO2ForestRegressor(**CO2).fit(X, np.c_[y, -y])
    assert two.predict_quantiles(X[:7]).shape == (7, 2, 3)
    assert two.predict_quantiles(X[:7], 0.9).shape == (7, 2)
    q = two.predict_quantiles(X[:7], [0.1, 0.9])  # y and -y: mirrored quantiles
    assert_allclose(q[:, 1], -q[:, 0, ::-1])


def test_quantiles_are_ordered_and_in_the_training_range(data, co2):
    X, y = data
    q = co2.predict_quantiles(X, np.linspace(0, 1, 11))
    assert np.all(np.diff(q, axis=1) >= 0)
    assert q.min() >= y.min() and q.max() <= y.max()


@pytest.mark.parametrize(
    "quantiles, message",
    [
        (1.5, r"in \[0, 1\]"),
        ([-0.1, 0.5], r"in \[0, 1\]"),
        ([0.5, np.nan], "NaN"),
        ([[0.1, 0.9]], "1-D"),
        ([], "non-empty"),
        ("0.5", "numbers"),
        ([True, False], "numbers"),
    ],
)
def test_quantiles_are_validated(data, co2, quantiles, message):
    with pytest.raises(ValueError, match=message):
        co2.predict_quantiles(data[0][:3], quantiles)


def test_dense_float32_and_csr_agree_and_routing_is_predicts(data, co2):
    X = data[0][:50].copy()
    X[X < 0.1] = 0.0
    q = co2.predict_quantiles(X)
    assert_array_equal(co2.predict_quantiles(sp.csr_matrix(X)), q)
    leaves = co2.apply(X) + co2.forest_.node_offset[:-1]
    store = co2._leaf_targets
    expected = reference.forest_quantiles(
        leaves,
        store.leaf_ptr,
        store.targets,
        store.weights,
        [0.05, 0.5, 0.95],
        kernel.TIE_TOLERANCE,
    )
    assert_allclose(q, expected[:, 0], rtol=1e-12)
    assert co2.predict_quantiles(X.astype(np.float32)).shape == q.shape


def test_missing_values_route_as_predict(data):
    X, y = data
    X = X.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.15] = np.nan
    model = CO2ForestRegressor(**CO2).fit(X, y)
    leaves = model.apply(X) + model.forest_.node_offset[:-1]
    store = model._leaf_targets
    expected = reference.forest_quantiles(
        leaves, store.leaf_ptr, store.targets, store.weights, [0.5], kernel.TIE_TOLERANCE
    )
    assert_allclose(model.predict_quantiles(X, [0.5]), expected[:, 0], rtol=1e-12)
    assert_array_equal(model.predict_quantiles(sp.csr_matrix(X), [0.5]), expected[:, 0])


def test_results_do_not_depend_on_n_jobs(data):
    X, y = data
    one = CO2ForestRegressor(**CO2, n_jobs=1).fit(X, y)
    two = CO2ForestRegressor(**CO2, n_jobs=2).fit(X, y)
    assert_array_equal(one._leaf_targets.targets, two._leaf_targets.targets)
    assert_array_equal(one.predict_quantiles(X), two.predict_quantiles(X))


def test_weights_whose_total_overflows_are_rescaled_as_in_training(data, co2):
    # equal weights of 1e308 sum to infinity in a leaf: unscaled, every share was 0
    # and every quantile the leaf's smallest target; the quantiles read only ratios
    X, y = data
    plain = clone(co2).fit(X, y).record_leaf_targets(X, y)
    huge = clone(co2).fit(X, y).record_leaf_targets(X, y, sample_weight=np.full(len(y), 1e308))
    weights = huge._leaf_targets.weights  # rescaled by a power of two: equal, finite
    assert np.isfinite(weights).all() and (weights == weights[0, 0]).all()
    assert_array_equal(huge.predict_quantiles(X), plain.predict_quantiles(X))


def test_store_matches_the_in_bag_rows(data, co2):
    """Leaf entries are the in-bag rows; their weighted means are the leaf values (CO2)."""
    store = co2._leaf_targets
    leaves = np.flatnonzero(co2.forest_.children_left == -1)
    sizes = np.diff(store.leaf_ptr)
    assert sizes[co2.forest_.children_left != -1].sum() == 0
    sums = np.add.reduceat(store.targets[0] * store.weights[0], store.leaf_ptr[leaves])
    totals = np.add.reduceat(store.weights[0], store.leaf_ptr[leaves])
    assert_allclose(sums / totals, co2.forest_.value[leaves, 0], rtol=1e-9)


def test_storing_off_raises_a_clear_error_until_recorded(data):
    X, y = data
    model = CO2ForestRegressor(**CO2, store_leaf_targets=False).fit(X, y)
    assert "_leaf_targets" not in model.__dict__
    with pytest.raises(NotFittedError, match="store_leaf_targets=False"):
        model.predict_quantiles(X)
    model.record_leaf_targets(X, y)
    assert model.predict_quantiles(X[:3]).shape == (3, 3)
    model.set_params(store_leaf_targets=False).fit(X, y)  # a new fit drops them
    assert "_leaf_targets" not in model.__dict__


def test_unfitted_model_raises_not_fitted(data):
    with pytest.raises(NotFittedError):
        CO2ForestRegressor().predict_quantiles(data[0])


def test_pickle_round_trip(data, co2):
    X = data[0][:20]
    loaded = pickle.loads(pickle.dumps(co2))
    assert_array_equal(loaded.predict_quantiles(X), co2.predict_quantiles(X))


def _corrupt(model, key, value):
    state = model.__getstate__()
    entry = state["_obliquetrees_containers"]["_leaf_targets"]["state"]
    state["_obliquetrees_containers"]["_leaf_targets"]["state"] = {**entry, key: value(entry)}
    return state


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("leaf_ptr", lambda s: s["leaf_ptr"][::-1].copy(), "start at 0"),
        ("leaf_ptr", lambda s: np.delete(s["leaf_ptr"], 1), "cover"),  # the root's empty range
        ("leaf_ptr", lambda s: s["leaf_ptr"].astype(np.int32), "int64"),
        ("targets", lambda s: s["targets"][:, :-1], "shape"),
        (
            "targets",
            lambda s: np.where(np.arange(s["targets"].size) == 3, np.nan, s["targets"]),
            "NaN",
        ),
        ("weights", lambda s: -s["weights"], "positive"),
        ("targets", lambda s: s["targets"][:, ::-1].copy(), "sorted"),
        ("format_version", lambda s: 99, "newer"),
    ],
)
def test_a_corrupted_pickle_is_rejected(data, key, value, message):
    shallow = CO2ForestRegressor(**CO2, max_depth=3).fit(*data)  # leaves of several rows
    state = _corrupt(shallow, key, value)
    with pytest.raises(ValueError, match=message):
        CO2ForestRegressor.__new__(CO2ForestRegressor).__setstate__(state)


def test_leaf_targets_on_split_nodes_are_rejected(co2):
    def shifted(s):  # the first entry moved to the root
        ptr = s["leaf_ptr"].copy()
        ptr[1] = 1
        return np.maximum.accumulate(ptr)

    state = _corrupt(co2, "leaf_ptr", shifted)
    with pytest.raises(ValueError, match="Invalid unpickled CO2ForestRegressor: .*split nodes"):
        CO2ForestRegressor.__new__(CO2ForestRegressor).__setstate__(state)


def test_a_failed_fit_keeps_the_previous_model(data, monkeypatch):
    X, y = data
    model = CO2ForestRegressor(**CO2).fit(X, y)
    before = model.predict_quantiles(X[:10])

    def fail(*args, **kwargs):
        raise RuntimeError("recording failed")

    monkeypatch.setattr(LeafTargets, "from_rows", classmethod(fail))
    with pytest.raises(RuntimeError, match="recording failed"):
        model.set_params(random_state=1).fit(X, y)
    monkeypatch.undo()
    assert model.random_state == 1  # set_params happened; the fit did not
    assert_array_equal(model.predict_quantiles(X[:10]), before)


def test_warm_start_stores_what_a_cold_fit_stores(data):
    X, y = data
    warm = CO2ForestRegressor(**{**CO2, "n_estimators": 2}, warm_start=True).fit(X, y)
    warm.set_params(n_estimators=4).fit(X, y)
    cold = CO2ForestRegressor(**CO2).fit(X, y)
    for name in ("leaf_ptr", "targets", "weights"):
        assert_array_equal(getattr(warm._leaf_targets, name), getattr(cold._leaf_targets, name))


def test_soft_path_probabilities_match_the_numpy_reference(data, rng):
    from obliquetrees._core.soft import path_probabilities, soft_predict

    X, y = data
    X = X.copy()
    X[rng.random(X.shape) < 0.1] = np.nan
    model = E2EDTRegressor(**E2EDT, n_estimators=2, bootstrap=True).fit(X, y)
    for tree, steep in zip(model.trees_, model.steepness_, strict=True):
        got = path_probabilities(tree, X, steep)
        assert_allclose(got, reference.path_probabilities(tree, X, steep), rtol=1e-9, atol=1e-15)
        leaf = tree.children_left < 0
        assert_allclose(got[:, leaf].sum(axis=1), 1.0, rtol=1e-12)
        expected = soft_predict(tree, X, tree.value, steep)
        assert_allclose(got[:, leaf] @ tree.value[leaf], expected, rtol=1e-12)


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_soft_quantiles_match_the_numpy_reference(data, n_outputs):
    from obliquetrees._core.soft import path_probabilities

    X, y = data
    y = y if n_outputs == 1 else np.c_[y, np.sin(y)]
    params = dict(E2EDT, n_estimators=3, bootstrap=True, routing="soft")
    model = E2EDTRegressor(**params).fit(X, y)
    store, levels = model._leaf_targets, np.array([0.0, 0.05, 0.3, 0.5, 0.95, 1.0])
    trees = zip(model.trees_, model.steepness_, strict=True)
    probability = np.hstack([path_probabilities(t, X[:40], s) for t, s in trees])
    expected = reference.soft_forest_quantiles(
        probability,
        model.forest_.node_offset,
        store.leaf_ptr,
        store.targets,
        store.weights,
        levels,
        kernel.TIE_TOLERANCE,
    )
    got = model.predict_quantiles(X[:40], levels).reshape(expected.shape)
    assert_allclose(got, expected, rtol=1e-12)
    # quantiles are monotone in the level and within the training targets
    assert np.all(np.diff(got, axis=-1) >= 0)
    assert got.min() >= y.min() and got.max() <= y.max()


def test_soft_quantiles_are_the_hard_ones_in_the_steep_limit(data):
    """Steepness x 1e12: every path probability is 0 or 1, so soft routing is hard."""
    X, y = data
    model = E2EDTRegressor(**E2EDT, n_estimators=3, bootstrap=True).fit(X, y)
    hard = model.predict_quantiles(X, [0.1, 0.5, 0.9])
    model.steepness_ = [s * 1e12 for s in model.steepness_]
    soft = model.set_params(routing="soft").predict_quantiles(X, [0.1, 0.5, 0.9])
    assert_allclose(soft, hard, rtol=1e-12)


def test_soft_quantiles_chunk_rows_and_ignore_n_jobs(data, monkeypatch):
    X, y = data
    model = E2EDTRegressor(**dict(E2EDT, n_estimators=2, routing="soft")).fit(X, y)
    whole = model.predict_quantiles(X)
    monkeypatch.setattr(kernel, "SOFT_CHUNK_CELLS", 7 * model.forest_.node_offset[-1])
    assert_array_equal(model.set_params(n_jobs=2).predict_quantiles(X), whole)
    assert_array_equal(model.predict_quantiles(sp.csr_matrix(X)), whole)


def test_e2edt_forest_with_bootstrap_and_soft_routing(data):
    X, y = data
    model = E2EDTRegressor(**E2EDT, n_estimators=3, bootstrap=True).fit(X, y)
    q = model.predict_quantiles(X[:5])
    soft = model.set_params(routing="soft").predict_quantiles(X[:5])
    assert soft.shape == q.shape and np.all(np.isfinite(soft)) and not np.array_equal(soft, q)
    assert_array_equal(model.set_params(routing="hard").predict_quantiles(X[:5]), q)


def test_converted_forest_records_its_rows(data):
    X, y = data
    rf = RandomForestRegressor(n_estimators=1, bootstrap=False, min_samples_leaf=4).fit(X, y)
    model = from_sklearn(rf)
    with pytest.raises(NotFittedError, match="record_leaf_targets"):
        model.predict_quantiles(X)
    model.record_leaf_targets(X, y)
    leaf = rf.apply(X)[:, 0]
    expected = [np.median(y[leaf == node]) for node in leaf[:30]]
    assert_array_equal(model.predict_quantiles(X[:30], 0.5), expected)
    with pytest.raises(ValueError, match="outputs"):
        model.record_leaf_targets(X, np.c_[y, y])


def test_refitted_leaves_hold_their_rows(data, co2):
    X, y = data
    refitted = refit_leaves(co2, X[:150], y[:150], n_iter=0)
    assert np.all(np.isfinite(refitted.predict_quantiles(X[:150])))
    # a row of the other 90 whose leaves none of the 150 reached has none to weigh
    store = refitted._leaf_targets
    nodes = refitted.apply(X[150:]) + refitted.forest_.node_offset[:-1]
    empty = np.all(np.diff(store.leaf_ptr)[nodes] == 0, axis=1)
    assert empty.any()
    assert_array_equal(np.isnan(refitted.predict_quantiles(X[150:], 0.5)), empty)
    assert store.weights.shape[1] == 150 * co2.n_estimators  # every row in every tree


def test_soft_and_hinge_regressors(data):
    X, y = data
    soft = SoftTreeRegressor(max_depth=2, n_restarts=1, max_epochs=2, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="routing='hard'"):
        soft.predict_quantiles(X)
    soft.set_params(routing="hard")
    with pytest.raises(NotFittedError, match="record_leaf_targets"):
        soft.predict_quantiles(X)
    assert soft.record_leaf_targets(X, y).predict_quantiles(X[:4]).shape == (4, 3)
    hinge = HingeForestRegressor(n_estimators=2, max_depth=2, max_epochs=2, random_state=0)
    hinge.fit(X, y)
    for call in (lambda: hinge.predict_quantiles(X), lambda: hinge.record_leaf_targets(X, y)):
        with pytest.raises(TypeError, match="not an average of"):
            call()
