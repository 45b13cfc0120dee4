"""The joint refinement of constrained CO2 regression forests (:mod:`obliquetrees.co2._refine`).

The pass kernel against a plain-numpy pass on random inputs; the refined
forests keep the constraints, the same model for any ``n_jobs``, and the
subsampled path; the classifier and unconstrained fits do not refine.
"""

import numpy as np
import pytest

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from obliquetrees._core.forest import ObliqueForest
from obliquetrees.co2 import _refine
from obliquetrees.co2._monotone import order_leaves
from tests._helpers import monotone_violations

FAST = {"n_estimators": 6, "max_cccp_iter": 5, "random_state": 0}


def _problem(seed, n=400, p=4):
    """A monotone truth in features 0 (rising) and 2 (falling), an interaction, noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = 2 * X[:, 0] - np.sin(2 * X[:, 0]) - X[:, 2] + X[:, 1] * X[:, 3] + 0.3 * rng.normal(size=n)
    return X, y, np.array([1, 0, -1, 0])


def _reference_pass(leaf, counts, weight, y, total, offsets, left, right, constrained, value,
                    step, held_leaf, held_total):  # fmt: skip
    """:func:`~obliquetrees.co2._refine.refine_pass` in plain numpy, tree by tree."""
    n_trees = offsets.shape[0] - 1
    for t in range(n_trees):
        a, b = offsets[t], offsets[t + 1]
        before = value[a:b, 0].copy()
        w = counts[t] * weight
        sums = np.bincount(leaf[t], weights=w * (y - total / n_trees), minlength=b - a)
        mass = np.bincount(leaf[t], weights=w, minlength=b - a)
        move = (left[a:b] < 0) & (mass > 0)
        value[a:b, 0][move] += step * sums[move] / mass[move]
        order_leaves(constrained[a:b], left[a:b], right[a:b], value[a:b], np.maximum(mass, 1e-12))
        total += value[a + leaf[t], 0] - before[leaf[t]]
        held_total += value[a + held_leaf[t], 0] - before[held_leaf[t]]


@pytest.mark.parametrize("seed", range(4))
def test_a_pass_matches_the_numpy_reference(seed):
    X, y, cst = _problem(seed)
    model = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    forest = ObliqueForest.from_trees(model.trees_, validate=False)
    rng = np.random.default_rng(seed)
    n, n_held = 300, 50
    rows = rng.normal(size=(n + n_held, X.shape[1]))
    leaf = np.ascontiguousarray(model.apply(rows[:n]).T)
    held_leaf = np.ascontiguousarray(model.apply(rows[n:]).T)
    counts = rng.integers(0, 4, size=leaf.shape).astype(np.float64)
    weight = rng.uniform(0.1, 2.0, size=n)
    target = rng.normal(size=n)
    offsets = np.asarray(forest.node_offset, dtype=np.int64)
    constrained = np.concatenate([_refine.constrained_nodes(t, cst) for t in model.trees_])
    assert constrained.any()
    value = np.array(forest.value)

    def totals(value, leaf):
        return sum(value[offsets[t] + leaf[t], 0] for t in range(leaf.shape[0]))

    got = [value.copy(), totals(value, leaf), totals(value, held_leaf)]
    want = [value.copy(), totals(value, leaf), totals(value, held_leaf)]
    size = int(np.max(np.diff(offsets)))
    arrays = (forest.children_left, forest.children_right, constrained)
    for _ in range(3):
        _refine.refine_pass(
            leaf, counts, weight, target, got[1], offsets, *arrays, got[0], 0.5,
            held_leaf, got[2], np.empty(size), np.empty(size), np.empty(size),
        )  # fmt: skip
        _reference_pass(
            leaf, counts, weight, target, want[1], offsets, *arrays, want[0], 0.5,
            held_leaf, want[2],
        )  # fmt: skip
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert not np.array_equal(got[0], np.array(forest.value))  # the pass moved leaves
    # the kept totals are the forest's sums at the new values
    np.testing.assert_allclose(got[1], totals(got[0], leaf), rtol=1e-12, atol=1e-12)


def test_the_refined_forest_keeps_the_constraints_and_is_the_same_for_any_n_jobs():
    X, y, cst = _problem(0)
    one = CO2ForestRegressor(monotonic_cst=cst, n_jobs=1, **FAST).fit(X, y)
    two = CO2ForestRegressor(monotonic_cst=cst, n_jobs=2, **FAST).fit(X, y)
    assert one.n_refine_passes_ >= 1  # a clean truth: the held-out rows ask for passes
    assert one.n_refine_passes_ == two.n_refine_passes_
    np.testing.assert_array_equal(one.predict(X), two.predict(X))
    score = one.predict
    assert monotone_violations(score, X, cst, n_lines=200, seed=1) <= 1e-12
    assert monotone_violations(score, X, cst, n_lines=200, nan_fraction=0.3, seed=2) <= 1e-12


def test_refinement_moves_the_leaves_the_growth_left():
    X, y, cst = _problem(1)
    grown = CO2ForestRegressor(monotonic_cst=cst, **FAST)
    grown._refines_leaves = False  # the forest as grown, each tree ordered on its own
    grown.fit(X, y)
    refined = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    assert refined.n_refine_passes_ >= 1 and not hasattr(grown, "n_refine_passes_")
    for a, b in zip(grown.trees_, refined.trees_, strict=True):  # the same structure
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_array_equal(a.weight_value, b.weight_value)
    assert not np.array_equal(grown.predict(X), refined.predict(X))
    # the refinement fits the training targets more closely than the independent clamps
    assert np.mean((refined.predict(X) - y) ** 2) < np.mean((grown.predict(X) - y) ** 2)


def test_subsampled_refinement_keeps_the_constraints(monkeypatch):
    monkeypatch.setattr(_refine, "MAX_ROWS", 120)
    X, y, cst = _problem(2)
    model = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    again = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), again.predict(X))
    assert monotone_violations(model.predict, X, cst, n_lines=200, seed=3) <= 1e-12


def test_sample_weight_and_no_bootstrap_keep_the_constraints():
    X, y, cst = _problem(3)
    weight = np.random.default_rng(3).uniform(0.0, 3.0, size=len(y))
    for params in ({}, {"bootstrap": False}, {"max_samples": 0.5}):
        model = CO2ForestRegressor(monotonic_cst=cst, **FAST, **params)
        model.fit(X, y, sample_weight=weight)
        assert monotone_violations(model.predict, X, cst, n_lines=100, seed=4) <= 1e-12


def test_too_few_rows_choose_no_pass():
    X, y, cst = _problem(4, n=4)
    model = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    assert model.n_refine_passes_ == 0


def test_only_constrained_regressors_refine():
    X, y, cst = _problem(5)
    assert not hasattr(CO2ForestRegressor(**FAST).fit(X, y), "n_refine_passes_")
    classes = (y > np.median(y)).astype(int)
    clf = CO2ForestClassifier(monotonic_cst=cst, **FAST).fit(X, classes)
    assert not hasattr(clf, "n_refine_passes_")
    # a refit without constraints drops the count of the constrained fit before it
    model = CO2ForestRegressor(monotonic_cst=cst, **FAST).fit(X, y)
    assert not hasattr(model.set_params(monotonic_cst=None).fit(X, y), "n_refine_passes_")


def test_a_failed_warm_start_leaves_the_fitted_forest_as_it_was(monkeypatch):
    X, y, cst = _problem(6)
    model = CO2ForestRegressor(monotonic_cst=cst, warm_start=True, **FAST).fit(X, y)
    before = model.forest_.value.copy()
    predicted = model.predict(X)

    def fail(*args):
        raise MemoryError("packing failed")

    # the kept trees are refined again, then the forest is packed: make the packing fail
    monkeypatch.setattr(type(model), "_store_trees", fail)
    with pytest.raises(MemoryError):
        model.set_params(n_estimators=8).fit(X, y)
    np.testing.assert_array_equal(model.forest_.value, before)
    np.testing.assert_array_equal(model.predict(X), predicted)
    assert len(model.trees_) == 6
