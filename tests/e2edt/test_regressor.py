"""E2EDTRegressor: Gaussian-leaf kernels against tests/reference.py, and the estimator."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_regression
from sklearn.tree import DecisionTreeRegressor

from obliquetrees import E2EDTRegressor
from obliquetrees._training import leaf_models as L
from obliquetrees.e2edt import _greedy as G
from obliquetrees.e2edt import _kernels as K
from obliquetrees.e2edt import _sparse as S
from obliquetrees.e2edt import training as E
from obliquetrees.e2edt._greedy import _empty_adjacency
from tests import reference as ref
from tests.e2edt.test_estimator import assert_finetune_improves_training_fit
from tests.e2edt.test_training import assert_gradient_is_finite_differences, random_splits

FAST = dict(max_depth=3, max_epochs=5, learning_rate=0.05, random_state=0)


# ------------------------------------------------------------------ kernels
def _gaussian_problem(seed, n=60, d=2, scale=3.0, max_depth=4):
    rng, layout, n_leaves, A, gamma = random_splits(seed, n, max_depth, scale)
    var = rng.uniform(0.2, 2.0, d)
    theta = np.array([ref.e2edt_gaussian_row(rng.normal(size=d), var) for _ in range(n_leaves)])
    Y = rng.normal(scale=1.5, size=(n, d))
    sw = rng.uniform(0.0, 2.0, n)
    return rng, layout, A, gamma, theta, Y, sw


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("scale", [1.0, 400.0])  # 400: products underflow, log-space rescue
def test_gaussian_e_step_matches_reference(seed, d, scale):
    _, (left, right, split_col, leaf_col), A, gamma, theta, Y, sw = _gaussian_problem(
        seed, d=d, scale=scale
    )
    Y[:3] += 60.0  # far from every leaf: the Gaussian likelihoods underflow too
    At = np.ascontiguousarray(A.T)
    Ex = K.steep_activations(At, gamma)
    h = np.empty((theta.shape[0], A.shape[0]))
    stats = K.empty_statistics(theta, Y)
    assert stats.shape == (theta.shape[0], 1 + 2 * d)
    loglik = K.e_step(At, Ex, gamma, left, right, split_col, leaf_col, theta, Y, sw, h, stats)
    h_ref, stats_ref, loglik_ref = ref.e2edt_gaussian_e_step(
        A, gamma, left, right, split_col, theta, Y, sw
    )
    np.testing.assert_allclose(h.T, h_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(stats, stats_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(loglik, loglik_ref, rtol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_gaussian_m_step_matches_reference_and_maximises_the_leaf_likelihood(seed):
    rng, layout, A, gamma, theta, Y, sw = _gaussian_problem(seed, d=2)
    left, right, split_col, leaf_col = layout
    h, stats, _ = ref.e2edt_gaussian_e_step(A, gamma, left, right, split_col, theta, Y, sw)
    stats[0] = 0.0  # an empty leaf keeps its mean
    new = theta.copy()
    K.update_leaves(stats, new, Y)
    want = ref.e2edt_gaussian_m_step(stats, theta, L.VAR_FLOOR)
    np.testing.assert_allclose(new, want, rtol=1e-12)
    np.testing.assert_array_equal(new[0, :2], theta[0, :2])

    # the closed form maximises sum_n sw_n sum_l h_nl log N(y_n; m_l, var): any
    # perturbation of a mean or of the shared variance lowers it
    def q(th):
        return float(sw @ (h[:, 1:] * ref.e2edt_gaussian_leaf_loglik(th[1:], Y)).sum(axis=1))

    best = q(new)
    for delta in (1e-3, -1e-3):
        moved = new.copy()
        moved[1, 0] += delta
        assert q(moved) < best
        var = 1.0 / new[0, 2:4] * (1 + delta)
        assert q(np.array([ref.e2edt_gaussian_row(m, var) for m in new[:, :2]])) < best


def test_gaussian_m_step_floors_the_variance_and_leaves_empty_trees_alone():
    theta = np.array([ref.e2edt_gaussian_row([0.0], [1.0])] * 2)
    exact = np.array([[2.0, 2.0, 2.0], [1.0, -1.0, 1.0]])  # every row on its leaf's mean
    new = theta.copy()
    K.update_leaves(exact, new, np.zeros((1, 1)))
    np.testing.assert_allclose(new[:, 1], 1.0 / L.VAR_FLOOR)
    np.testing.assert_allclose(new[:, 0], [1.0, -1.0])
    untouched = theta.copy()
    K.update_leaves(np.zeros((2, 3)), untouched, np.zeros((1, 1)))
    np.testing.assert_array_equal(untouched, theta)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_of_the_log_likelihood_by_finite_differences(seed):
    """EM's identity: at the current parameters the gradient of eq. 14 with the
    E-step's responsibilities is the gradient of the Gaussian mixture's
    log-likelihood, so the kernels' factors match central differences of it."""
    rng, layout, _, gamma, theta, Y, sw = _gaussian_problem(seed, n=40, d=2)
    left, right, split_col, leaf_col = layout
    n_splits, p = int((left >= 0).sum()), 4
    X = rng.normal(size=(40, p))
    W = rng.normal(size=(n_splits, p))
    b = rng.normal(size=n_splits)
    At = np.ascontiguousarray((X @ W.T + b).T)
    Ex = K.steep_activations(At, gamma)
    G = np.empty_like(At)
    gsum = np.zeros(n_splits)
    stats = K.empty_statistics(theta, Y)
    K.em_batch(At, Ex, gamma, left, right, split_col, leaf_col, theta, Y, sw, sw, stats, G, gsum)
    gW = G @ X

    def f(W_, b_):
        return ref.e2edt_gaussian_loglik(W_, b_, gamma, left, right, split_col, theta, Y, sw, X)

    assert_gradient_is_finite_differences(f, W, b, gW, gsum, atol=1e-7)


def _stump_problem(n=150, k=5, d=1, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k))
    Y = np.column_stack([np.sign(X[:, 0] + X[:, 1]) + 0.3 * rng.normal(size=n)] * d)
    Y[:, 1:] *= -2.0
    Y = (Y - Y.mean(axis=0)) / Y.std(axis=0)
    sw = rng.uniform(0.5, 1.5, n)
    w0 = rng.normal(size=k)
    w0 /= np.linalg.norm(w0)
    node = L.Gaussian(np.zeros(d), np.ones(d)).node_value(Y, sw)
    theta0 = np.tile(node, (2, 1))
    order = rng.permuted(np.tile(np.arange(n), (5, 1)), axis=1)
    return X, Y, sw, w0, theta0, order


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gaussian_fit_stump_matches_reference(d, dtype):
    X, Y, sw, w0, theta0, order = _stump_problem(d=d)
    M = np.zeros((X.shape[1], X.shape[1]))
    args = (1.0, 0.1, 6, order, 40, 0.05, 0.9, 0.999, 1e-8, 0.0)
    w, b, theta = w0.copy(), np.array([0.1]), theta0.copy()
    gamma = K.fit_stump(X.astype(dtype), Y, sw, w, b, theta, *args, *_empty_adjacency(5))
    w_ref, b_ref, theta_ref, gamma_ref = ref.e2edt_fit_stump(
        X.astype(dtype).astype(np.float64), Y, sw, w0, 0.1, theta0, *args, M
    )
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(w, w_ref, **tol)
    np.testing.assert_allclose(b[0], b_ref, **tol)
    np.testing.assert_allclose(theta, theta_ref, **tol)
    assert gamma == pytest.approx(gamma_ref)
    # the stump found the oblique step: its leaf means have opposite signs
    assert theta[0, 0] * theta[1, 0] < 0


def test_gaussian_csr_stump_kernel_follows_the_dense_kernel():
    X, Y, sw, w0, theta0, order = _stump_problem(d=2)
    X[X < 0.3] = 0.0
    mean, scale = X.mean(axis=0), X.std(axis=0)
    Zs = S.StandardizedCSR.from_scale(sp.csr_matrix(X), mean, scale)
    args = (1.0, 0.1, 6, order, 40, 0.05, 0.9, 0.999, 1e-8, 0.0, *_empty_adjacency(5))
    w, b, theta = w0.copy(), np.array([0.1]), theta0.copy()
    w_d, b_d, theta_d = w0.copy(), np.array([0.1]), theta0.copy()
    S.fit_stump(Zs, Y, sw, w, b, theta, *args)
    K.fit_stump((X - mean) / scale, Y, sw, w_d, b_d, theta_d, *args)
    np.testing.assert_allclose(w, w_d, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(theta, theta_d, rtol=1e-9, atol=1e-12)


def _node_split(n, p_right):
    """Two-output targets and weights of ``n`` rows, a random split sending each row
    right with probability ``p_right``, and a unit Gaussian leaf model (seed 0)."""
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(n, 2))
    sw = rng.uniform(0.5, 2.0, n)
    right = rng.random(n) < p_right
    return Y, sw, right, L.Gaussian(np.zeros(2), np.ones(2))


def test_variance_reduction_gain_is_the_squared_error_decrease():
    Y, sw, right, gauss = _node_split(50, 0.4)
    value = gauss.node_value(Y, sw)

    def sse(rows):
        m = np.average(Y[rows], axis=0, weights=sw[rows])
        return float((sw[rows, None] * (Y[rows] - m) ** 2).sum())

    want = (sse(np.ones(50, bool)) - sse(right) - sse(~right)) / sw.sum()
    assert gauss.gain(value, None, Y, sw, right) == pytest.approx(want, rel=1e-12)
    assert gauss.gain(value, None, Y, sw, np.zeros(50, bool)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_axis_split_of_a_node_is_scikit_learns_on_dense_and_sparse_rows(seed):
    """The axis-aligned candidate of a greedy node: DecisionTreeRegressor's root split
    (weighted, multi-output), found alike on the standardised dense and CSR rows."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 6))
    X[rng.random(X.shape) < 0.5] = 0.0
    Y = np.column_stack([np.sin(2 * X[:, seed]), X[:, 3] > 0.2]) + 0.1 * rng.normal(size=(300, 2))
    sw = rng.uniform(0.2, 2.0, 300)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    Z = ((X - mean) / scale).astype(np.float32)
    feature, threshold = G.best_axis_split(Z, Y, sw)
    Zs = S.StandardizedCSR.from_scale(sp.csr_matrix(X), mean, scale)
    assert G.best_axis_split(Zs, Y, sw) == pytest.approx((feature, threshold), rel=1e-6)
    cart = DecisionTreeRegressor(max_depth=1).fit(Z, Y, sample_weight=sw).tree_
    assert feature == cart.feature[0]
    assert threshold == pytest.approx(cart.threshold[0], rel=1e-6)
    assert G.best_axis_split(np.zeros((5, 3), np.float32), Y[:5], sw[:5])[0] == -1


def test_split_leaves_are_one_m_step_from_the_hard_split():
    Y, sw, right, gauss = _node_split(40, 0.3)
    pi = gauss.split_leaves(gauss.node_value(Y, sw), Y, sw, right)
    means = [np.average(Y[side], axis=0, weights=sw[side]) for side in (~right, right)]
    resid = np.where(right[:, None], Y - means[1], Y - means[0])
    var = (sw[:, None] * resid**2).sum(axis=0) / sw.sum()  # pooled within the two sides
    for leaf in range(2):
        np.testing.assert_allclose(pi[leaf], ref.e2edt_gaussian_row(means[leaf], var), rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_greedy_split_fits_at_least_as_well_as_the_axis_aligned_split(seed):
    """Each greedy split is the paper's stump or the node's best axis-aligned split,
    whichever gains more: a stump (no finetune, leaves = hard means) has no larger
    training error than CART's, and an axis-aligned target gets (nearly) CART's split."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, 5))
    y = np.where(X[:, 2] > 0.5, 1.0, -1.0) + np.abs(X[:, 0]) + 0.3 * rng.normal(size=400)
    ours = E2EDTRegressor(max_depth=1, finetune_epochs=0, routing="hard", random_state=seed)
    ours.fit(X, y)
    cart = DecisionTreeRegressor(max_depth=1).fit(X, y)
    mse = [np.mean((m.predict(X) - y) ** 2) for m in (ours, cart)]
    assert mse[0] <= mse[1] * (1 + 1e-9)
    w = ours.tree_.dense_weights()[0]
    assert np.abs(w[2]) > 5 * np.abs(np.delete(w, 2)).max()


def test_classifier_stumps_stay_the_papers():
    """The axis-aligned candidate is the regressor's: the classifier's leaf model has none."""
    assert not L.Categorical(3).axis_candidate and L.Gaussian.axis_candidate


def test_best_first_growth_follows_variance_reduction():
    """max_leaf_nodes grows the split with the larger squared-error decrease first."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = 5.0 * (X[:, 0] > 0) + 0.5 * (X[:, 1] > 0) + 0.05 * rng.normal(size=600)
    reg = E2EDTRegressor(max_leaf_nodes=3, batch_size=50, random_state=0).fit(X, y)
    tree = reg.tree_
    assert tree.n_leaves == 3
    w_root = tree.dense_weights()[0]
    assert abs(w_root[0]) > 3 * abs(w_root[1])  # the big step is split first
    second = tree.children_left[0] if tree.children_left[tree.children_left[0]] >= 0 else 2
    w_second = tree.dense_weights()[second]
    assert abs(w_second[1]) > 3 * abs(w_second[0])  # then the small one
    assert reg.score(X, y) > 0.95


# ---------------------------------------------------------------- estimator
@pytest.fixture(scope="module")
def problem():
    X, y = make_regression(n_samples=400, n_features=6, n_informative=4, noise=5.0, random_state=0)
    return X * np.arange(1, 7) * 10 + 5, y * 100 + 1e4  # badly scaled on purpose


def test_fit_predict_single_tree_and_stored_values(problem):
    X, y = problem
    reg = E2EDTRegressor(**FAST, routing="hard").fit(X, y)
    tree = reg.tree_
    tree.check_invariants()
    assert reg.n_outputs_ == 1 and tree.value.shape == (tree.node_count, 1)
    assert tree.max_depth <= 3
    assert reg.predict(X).shape == (len(y),)
    assert reg.apply(X).shape == (len(y),)
    assert reg.decision_path(X).shape == (len(y), tree.node_count)
    # every node, leaves included, stores the mean target of the training rows
    # that hard routing sends through it, in raw units
    leaves = reg.apply(X)
    assert tree.value[0, 0] == pytest.approx(y.mean())
    assert tree.n_node_samples[0] == len(y)
    path = reg.decision_path(X).toarray().astype(bool)
    for node in range(tree.node_count):
        assert tree.value[node, 0] == pytest.approx(y[path[:, node]].mean(), rel=1e-12)
    np.testing.assert_array_equal(reg.predict(X), tree.value[leaves, 0])
    assert reg.score(X, y) > 0.7
    imp = reg.feature_importances_
    assert imp.shape == (6,) and imp.sum() == pytest.approx(1.0)


def test_standardised_targets_make_the_scale_irrelevant(problem):
    """Targets are standardised inside: an affine change of y gives the affine model."""
    X, y = problem
    a = E2EDTRegressor(**FAST).fit(X, y)
    b = E2EDTRegressor(**FAST).fit(X, (y - 1e4) * 1e-6)
    np.testing.assert_allclose((a.predict(X) - 1e4) * 1e-6, b.predict(X), rtol=1e-6, atol=1e-12)


def test_recovers_an_oblique_step_better_than_an_axis_aligned_tree():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    y = np.sign(X[:, 0] + X[:, 1]) + 2.0 * np.sign(X[:, 2] - X[:, 3] + 0.5)
    y = y + 0.1 * rng.normal(size=2000)
    Xtr, Xte, ytr, yte = X[:1500], X[1500:], y[:1500], y[1500:]
    ours = E2EDTRegressor(max_depth=2, random_state=0).fit(Xtr, ytr)
    cart = DecisionTreeRegressor(max_depth=2, random_state=0).fit(Xtr, ytr)
    assert ours.score(Xte, yte) > 0.9 > cart.score(Xte, yte) + 0.2


def test_finetune_improves_the_training_fit(problem):
    X, y = problem
    assert_finetune_improves_training_fit(E2EDTRegressor, FAST, X, y)


def test_soft_routing_is_the_mixture_of_leaf_means(problem):
    from obliquetrees._core.soft import soft_predict

    X, y = problem
    reg = E2EDTRegressor(**FAST, n_estimators=2, routing="soft").fit(X, y)
    want = np.mean(
        [
            soft_predict(t, X, t.value, steepness=s)[:, 0]
            for t, s in zip(reg.trees_, reg.steepness_, strict=True)
        ],
        axis=0,
    )
    np.testing.assert_allclose(reg.predict(X), want, rtol=1e-12)
    hard = reg.set_params(routing="hard").predict(X)
    assert not np.allclose(hard, want) and np.corrcoef(hard, want)[0, 1] > 0.9


def test_multi_output_targets(problem):
    X, y = problem
    Y = np.column_stack([y, -3.0 * y + 7.0])
    reg = E2EDTRegressor(**FAST).fit(X, Y)
    assert reg.n_outputs_ == 2 and reg.predict(X).shape == (len(y), 2)
    assert reg.tree_.value.shape[1] == 2
    # the second output is an affine image of the first: so are the leaf means
    np.testing.assert_allclose(reg.predict(X)[:, 1], -3.0 * reg.predict(X)[:, 0] + 7.0, rtol=1e-8)
    one = E2EDTRegressor(**FAST).fit(X, y[:, None])
    assert one.n_outputs_ == 1 and one.predict(X).shape == (len(y),)


def test_sample_weight_ones_and_zeros(problem):
    """Unit weights give the unweighted model bit for bit (as the classifier's test);
    zero-weight rows are routed but neither fit leaves nor split nodes."""
    X, y = problem
    ones = E2EDTRegressor(**FAST).fit(X, y, sample_weight=np.ones(len(y)))
    none = E2EDTRegressor(**FAST).fit(X, y)
    np.testing.assert_array_equal(ones.tree_.weight_value, none.tree_.weight_value)
    np.testing.assert_array_equal(ones.predict(X), none.predict(X))
    sw = np.ones(len(y))
    sw[:100] = 0.0
    y_bad = y.copy()
    y_bad[:100] = 1e9  # would dominate every mean if it counted
    zero = E2EDTRegressor(**FAST).fit(X, y_bad, sample_weight=sw)
    assert zero.tree_.value.max() < y.max() + 1.0
    assert zero.score(X[100:], y[100:]) > 0.6


def test_leaves_store_the_weighted_mean_of_their_hard_routed_rows(problem):
    """Leaf values are the least-squares fit of the deterministic tree's partition
    (sample weights included); the EM means are what soft routing was trained with."""
    X, y = problem
    sw = np.random.default_rng(1).uniform(0.0, 3.0, len(y))
    reg = E2EDTRegressor(**FAST).fit(X, y, sample_weight=sw)
    leaf_of = reg.apply(X)
    for leaf in np.unique(leaf_of):
        rows = leaf_of == leaf
        assert reg.tree_.value[leaf, 0] == pytest.approx(np.average(y[rows], weights=sw[rows]))
    assert reg.tree_.n_node_samples[leaf_of] == pytest.approx(
        np.bincount(leaf_of, weights=sw)[leaf_of]
    )


def test_gaussian_leaf_values_keep_the_em_mean_of_unreached_leaves():
    leaves = L.Gaussian(np.array([10.0, -1.0]), np.array([2.0, 0.5]))
    pi = np.array([L._gaussian_row(np.array([1.0, 2.0]), np.ones(2))] * 2)
    weight = np.array([0.0, 4.0])
    sums = np.array([[0.0, 0.0], [2.0, -4.0]])  # standardised units
    values = leaves.leaf_values(pi, weight, sums)
    np.testing.assert_allclose(values[0], [1.0 * 2.0 + 10.0, 2.0 * 0.5 - 1.0])  # EM mean
    np.testing.assert_allclose(values[1], [0.5 * 2.0 + 10.0, -1.0 * 0.5 - 1.0])  # sums / weight


def test_nan_and_sparse_inputs(problem):
    X, y = problem
    Xn = X.copy()
    Xn[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    reg = E2EDTRegressor(**FAST).fit(Xn, y)
    assert np.all(np.isfinite(reg.predict(Xn))) and reg.score(Xn, y) > 0.5
    Xs = np.where(X > np.median(X, axis=0), X, 0.0)
    dense = E2EDTRegressor(**FAST, routing="hard").fit(Xs, y)
    for fmt in (sp.csr_matrix, sp.csc_matrix):  # hard routing: they differ only near splits
        sparse_fit = E2EDTRegressor(**FAST, routing="hard").fit(fmt(Xs), y)
        agree = np.isclose(sparse_fit.predict(Xs), dense.predict(Xs), rtol=1e-6)
        assert agree.mean() > 0.95


def test_forest_same_model_for_any_n_jobs_and_oob(problem):
    X, y = problem
    kw = dict(FAST, n_estimators=4, max_features=4, bootstrap=True, oob_score=True, routing="hard")
    with pytest.warns(UserWarning, match="drawn by every bootstrap"):
        a = E2EDTRegressor(**kw, n_jobs=1).fit(X, y)
    with pytest.warns(UserWarning, match="drawn by every bootstrap"):
        b = E2EDTRegressor(**kw, n_jobs=2).fit(X, y)
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(ta.weight_value, tb.weight_value)
        np.testing.assert_array_equal(ta.value, tb.value)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_array_equal(a.oob_prediction_, b.oob_prediction_)
    # the out-of-bag prediction of a row: mean over the trees whose bootstrap left it out
    from obliquetrees.e2edt.training import bootstrap_counts

    total, count = np.zeros(len(y)), np.zeros(len(y))
    for tree, seed in zip(a.trees_, a._tree_seeds, strict=True):
        oob = bootstrap_counts(len(y), seed) == 0
        total[oob] += ref.predict_value([tree], X[oob])[:, 0]
        count[oob] += 1
    covered = count > 0
    np.testing.assert_allclose(a.oob_prediction_[covered], total[covered] / count[covered])
    assert np.all(np.isnan(a.oob_prediction_[~covered]))
    from sklearn.metrics import r2_score

    assert a.oob_score_ == pytest.approx(r2_score(y[covered], a.oob_prediction_[covered]))


def test_warm_start_equals_cold_fit(problem):
    X, y = problem
    kw = dict(FAST, bootstrap=True, max_features=4)
    warm = E2EDTRegressor(**kw, n_estimators=1, warm_start=True).fit(X, y)
    warm.set_params(n_estimators=3).fit(X, y)
    cold = E2EDTRegressor(**kw, n_estimators=3).fit(X, y)
    np.testing.assert_array_equal(warm.predict(X), cold.predict(X))
    with pytest.raises(ValueError, match="outputs"):
        warm.set_params(n_estimators=4).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="features"):
        warm.set_params(n_estimators=4).fit(X[:, :5], y)
    assert len(warm.trees_) == 3


def test_failed_fit_leaves_the_estimator_unchanged(problem, monkeypatch):
    X, y = problem
    reg = E2EDTRegressor(**FAST, n_estimators=2).fit(X, y)
    before = pickle.dumps(reg)

    def boom(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(E, "_fit_one_tree", boom)
    with pytest.raises(ValueError, match="boom"):
        reg.fit(X[:, :4], -y)
    assert pickle.dumps(reg) == before


def test_diverged_training_is_a_clear_error_and_leaves_the_estimator_unchanged(
    problem, monkeypatch
):
    """Non-finite split weights after finetuning: "diverged", not an overflow of X's scale."""
    X, y = problem
    reg = E2EDTRegressor(**FAST).fit(X, y)
    before = pickle.dumps(reg)
    step = E._adam_step

    def diverging_step(tt, *args):
        step(tt, *args)
        tt.W[0, 0] = np.nan

    monkeypatch.setattr(E, "_adam_step", diverging_step)
    with pytest.raises(ValueError, match="diverged.*lower learning_rate"):
        reg.fit(X, -y)
    assert pickle.dumps(reg) == before


def test_pickle_roundtrip(problem):
    X, y = problem
    reg = E2EDTRegressor(**FAST, routing="soft").fit(X, y)
    clone = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(clone.predict(X), reg.predict(X))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(routing="hybrid"), "routing"),
        (dict(class_weight="balanced"), "class_weight"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(oob_score=True), "bootstrap=True"),
        (dict(patch_size=2), "patch_size needs image_shape"),
    ],
)
def test_bad_parameters_are_clear_errors(problem, params, match):
    X, y = problem
    with pytest.raises((ValueError, TypeError), match=match):
        E2EDTRegressor(**params).fit(X, y)


def test_bad_targets_are_clear_errors(problem):
    X, y = problem
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        E2EDTRegressor(**FAST).fit(X, bad)
    with pytest.raises(ValueError):
        E2EDTRegressor(**FAST).fit(X, np.array(["a"] * len(y)))
    with pytest.raises(ValueError, match="standardize=False"):
        E2EDTRegressor(**FAST, standardize=False).fit(X * 1e38, y)


def test_constant_target_gives_a_single_leaf(problem):
    X, _ = problem
    reg = E2EDTRegressor(**FAST).fit(X, np.full(len(X), 3.5))
    assert reg.tree_.node_count == 1
    np.testing.assert_allclose(reg.predict(X), 3.5)
