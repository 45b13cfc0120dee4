"""benchmarks/hinge_concrete_cost.py: the offsets' projection and the monotonicity it keeps.

The projection is checked against scipy's SLSQP on random small problems;
a constrained raw-input hinge forest with fitted offsets is swept along
random lines of its constrained inputs (it must never move against them).
"""

import numpy as np
import pytest
from scipy.optimize import minimize

from benchmarks.bench_monotonic import CONSTRAINTS
from benchmarks.hinge_concrete_cost import (
    CONCRETE,
    INPUTS,
    LeafOffsets,
    fold_scores,
    order_halves,
    rising_halves,
)
from obliquetrees import HingeForestRegressor
from tests._helpers import monotone_violations


def _reference(values, weights, rising):
    """SLSQP's minimum of the weighted squared move under min(rising) >= max(others)."""
    up, down = np.flatnonzero(rising), np.flatnonzero(~rising)
    pairs = [(i, j) for i in up for j in down]
    result = minimize(
        lambda b: np.sum(weights * (b - values) ** 2),
        values,
        jac=lambda b: 2 * weights * (b - values),
        constraints=[{"type": "ineq", "fun": lambda b, i=i, j=j: b[i] - b[j]} for i, j in pairs],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return result.x


@pytest.mark.parametrize("seed", range(20))
def test_order_halves_is_the_weighted_projection(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    values = rng.normal(size=n)
    weights = rng.uniform(0.1, 3.0, size=n)
    rising = rng.random(n) < 0.5
    rising[0], rising[-1] = True, False  # both sides hold a leaf
    projected = order_halves(values, weights, rising)
    assert projected[rising].min() >= projected[~rising].max() - 1e-12
    expected = _reference(values, weights, rising)
    cost = np.sum(weights * (projected - values) ** 2)
    assert cost <= np.sum(weights * (expected - values) ** 2) + 1e-9
    np.testing.assert_allclose(projected, expected, atol=1e-5)


def test_ordered_offsets_are_kept():
    values = np.array([-1.0, 0.0, 2.0, 3.0])
    rising = np.array([False, False, True, True])
    np.testing.assert_array_equal(order_halves(values, np.ones(4), rising), values)


def test_the_study_names_concretes_constraints():
    assert CONCRETE == CONSTRAINTS["concrete"]
    assert sorted(INPUTS.values()) == sorted(CONCRETE)


def _data(seed, n=200, p=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] - X[:, 3] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 4] + 0.3 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_offsets_keep_the_constraint(seed):
    X, y = _data(seed)
    cst = np.zeros(8, dtype=int)
    cst[[0, 3, 7]] = [1, -1, 1]
    small = dict(n_estimators=10, max_depth=4, max_epochs=10, n_hinge_features=None)
    forest = HingeForestRegressor(monotonic_cst=cst, random_state=seed, **small).fit(X, y)
    rising, ordered = rising_halves(forest)
    assert ordered.all()
    model = LeafOffsets(forest).fit(X, y)
    assert np.abs(model.offsets_).max() > 0  # the offsets moved
    for m in range(rising.shape[0]):
        assert model.offsets_[m, rising[m]].min() >= model.offsets_[m, ~rising[m]].max()
    assert monotone_violations(model.predict, X, cst, n_lines=60) <= 1e-12
    free = HingeForestRegressor(random_state=seed, **small).fit(X, y)
    assert rising_halves(free) is None


def test_one_fold_scores_every_variant():
    X, y = _data(2, n=120)
    cst = np.zeros(8, dtype=int)
    for j, c in CONCRETE.items():
        cst[j] = c
    train, test = np.arange(90), np.arange(90, 120)
    row = fold_scores(X, y, train, test, cst, 0, 1)
    assert {"free", "auto", "raw", "learnt", "raw, water only", "HGB"} <= set(row)
    assert all(np.isfinite(v) for v in row.values())
    assert row["violation"] <= 1e-12
