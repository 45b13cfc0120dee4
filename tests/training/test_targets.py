"""CO2's regression leaf model (obliquetrees/_training/targets.py, squared loss)
against tests/reference.py: the same kernels as the classifier's, given 2-D targets."""

import numpy as np
import pytest

from tests import reference as ref
from tests.co2.test_training import (
    _co2_params,
    _state,
    assert_cccp_matches_reference,
    assert_gradient_is_finite_differences,
    descend_gradient,
)

K = pytest.importorskip("obliquetrees.co2._kernels")
N = pytest.importorskip("obliquetrees.co2._node")
A = pytest.importorskip("obliquetrees._training.axis_split")
co2 = pytest.importorskip("obliquetrees.co2.training")
T = pytest.importorskip("obliquetrees._training.targets")


def _problem(rng, m=120, p=5, n_outputs=2, integer_weights=True):
    X = rng.normal(size=(m, p))
    Y = np.tanh(X @ rng.normal(size=(p, n_outputs))) + 0.1 * rng.normal(size=(m, n_outputs))
    if integer_weights:
        w = rng.integers(1, 4, size=m).astype(np.float64)
    else:
        w = rng.uniform(0.2, 2.0, size=m)
    return np.ascontiguousarray(X), np.ascontiguousarray(Y), w


def _stump(rng, p, n_outputs):
    return (
        rng.normal(size=p),
        float(rng.normal()),
        rng.normal(size=n_outputs),
        rng.normal(size=n_outputs),
    )


@pytest.mark.parametrize("seed", range(4))
def test_surrogate_matches_reference_and_bounds_the_squared_loss(seed):
    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, integer_weights=bool(seed % 2))
    w, b, t0, t1 = _stump(rng, X.shape[1], Y.shape[1])
    signs = np.empty(X.shape[0])
    sur, emp = K.surrogate(X, Y, wt, X.shape[0], w, b, t0, t1, signs)
    rsur, remp = ref.co2_surrogate(X, Y, wt, w, b, t0, t1)
    np.testing.assert_allclose([sur, emp], [rsur, remp], rtol=1e-12)
    assert sur >= emp - 1e-12  # Eq. 10 bounds the stump's loss, whatever the loss
    np.testing.assert_array_equal(signs, np.where(X @ w + b > 0, 1.0, -1.0))


@pytest.mark.parametrize("seed", range(4))
def test_minibatch_gradient_matches_reference(seed):
    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, integer_weights=bool(seed % 2))
    w, b, t0, t1 = _stump(rng, X.shape[1], Y.shape[1])
    signs = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    perm = rng.permutation(X.shape[0]).astype(np.int64)
    got = descend_gradient(X, Y, wt, perm[10:45], w, b, t0, t1, signs)
    gw, gb, g0, g1, run, wsum = ref.co2_minibatch_gradient(
        X, Y, wt, perm[10:45], w, b, t0, t1, signs
    )
    # descend returns the weighted mean surrogate
    for g, e in zip(got, (gw, gb, g0, g1, run / wsum), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_minibatch_gradient_finite_differences(seed):
    """Away from the kinks the subgradient is the gradient of the linearised objective (Eq. 11)."""
    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, m=40, n_outputs=3)
    w, b, t0, t1 = _stump(rng, X.shape[1], 3)
    signs = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    assert_gradient_is_finite_differences(X, Y, wt, np.arange(40), w, b, t0, t1, signs)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_samples_leaf", [1, 7])
def test_best_axis_split_is_the_least_squared_error(seed, min_samples_leaf):
    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, m=60)
    X[:, 1] = np.round(X[:, 1])  # ties
    f, thr, imp = A.best_axis_split(X, Y, wt, 60, 2, 3, min_samples_leaf, _state(seed))
    rf, rthr, rimp = ref.co2_best_axis_split(X, Y, wt, 2, 3, min_samples_leaf, ref.Co2Rng(seed))
    assert (f, thr) == (rf, rthr)
    # the kernel's criterion is the sum of squared errors minus sum(w y^2) of the node
    np.testing.assert_allclose(imp, rimp - np.sum(wt[:, None] * Y**2), rtol=1e-9)


def test_init_theta_is_the_mean_of_each_side():
    rng = np.random.default_rng(0)
    X, Y, wt = _problem(rng, m=50)
    t0, t1 = A.init_theta(X, Y, wt, 50, 1, 0.2, 2, 1.0)
    r0, r1 = ref.co2_init_theta(X, Y, wt, 1, 0.2, 2, 1.0)
    np.testing.assert_allclose(t0, r0, rtol=1e-12)
    np.testing.assert_allclose(t1, r1, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("nu", [0.5, 10.0])
def test_cccp_matches_reference(seed, nu):
    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, m=150)
    X -= np.average(X, axis=0, weights=wt)
    f, thr, _ = A.best_axis_split(X, Y, wt, 150, 2, 2, 1, _state(seed))
    w = np.zeros(X.shape[1])
    w[f] = 1.0
    t0, t1 = A.init_theta(X, Y, wt, 150, f, thr, 2, 1.0)
    _, _, history = assert_cccp_matches_reference(X, Y, wt, w, -thr, t0, t1, nu=nu, seed=seed)
    assert history.size >= 2 and history[-1] < history[0]


def test_node_value_is_the_weighted_mean_and_flags_constant_targets():
    rng = np.random.default_rng(1)
    _, Y, wt = _problem(rng, m=30)
    rows = rng.permutation(30).astype(np.int64)
    value, nns = np.zeros((2, 2)), np.zeros(2)
    assert N.node_value(Y, wt, rows, 5, 20, 1, value, nns) == 2
    sel = rows[5:20]
    np.testing.assert_allclose(value[1], wt[sel] @ Y[sel] / wt[sel].sum(), rtol=1e-12)
    assert nns[1] == wt[sel].sum()
    Y[sel] = [1.5, -2.0]
    assert N.node_value(Y, wt, rows, 5, 20, 0, value, nns) == 1  # nothing to split


@pytest.mark.parametrize("seed", range(3))
def test_impurity_decrease_is_scikit_learns_for_squared_error(seed):
    """The variance decrease, as DecisionTreeRegressor's ``min_impurity_decrease`` counts it."""
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(seed)
    X, Y, wt = _problem(rng, m=80)
    tree = DecisionTreeRegressor(max_depth=1).fit(X, Y, sample_weight=wt).tree_
    goes_left = X[:, tree.feature[0]] <= tree.threshold[0]
    rows = np.concatenate([np.flatnonzero(goes_left), np.flatnonzero(~goes_left)])
    got = T_decrease(Y, wt, rows.astype(np.int64), goes_left.sum())
    imp, nw = tree.impurity, tree.weighted_n_node_samples
    expected = imp[0] - (nw[1] * imp[1] + nw[2] * imp[2]) / nw[0]
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def T_decrease(Y, wt, rows, mid):
    """``impurity_decrease`` through the growth kernel's module (numba only)."""
    from numba import njit

    @njit
    def call(Y, wt, rows, mid, n_outputs, total):
        return T.impurity_decrease(Y, wt, rows, 0, mid, rows.shape[0], n_outputs, total)

    return call(Y, wt, rows, mid, Y.shape[1], wt.sum())


def test_standardize_targets_scales_min_impurity_decrease():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(50, 2)) * [3.0, 1.0] + [10.0, -4.0]
    ys, (mean, scale), params = co2.standardize_targets(
        Y, None, _co2_params(min_impurity_decrease=2.0)
    )
    np.testing.assert_allclose(ys.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.mean(ys.var(axis=0)), 1.0, rtol=1e-12)  # one common scale
    np.testing.assert_allclose(mean + scale * ys, Y, rtol=1e-12)
    assert params.min_impurity_decrease == pytest.approx(2.0 / scale**2)
    _, (_, one), _ = co2.standardize_targets(np.ones(9), None, _co2_params())
    assert one == 1.0  # constant targets: no scaling


def test_sparse_fit_equals_dense_fit():
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    X, Y, wt = _problem(rng, m=200, p=6, integer_weights=False)
    X[rng.random(X.shape) < 0.5] = 0.0
    params = _co2_params(max_depth=4, max_features=3)
    dense, _ = co2.fit_co2(X, Y, wt, params, [1, 2], n_classes=None)
    sparse, _ = co2.fit_co2(sp.csr_matrix(X), Y, wt, params, [1, 2], n_classes=None)
    for a, b in zip(dense, sparse, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_allclose(a.value, b.value, rtol=1e-9)
