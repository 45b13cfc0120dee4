"""E2EDT training kernels against the plain-numpy references (tests/reference.py)."""

import numpy as np
import pytest

from obliquetrees._core import traversal
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.soft import soft_predict
from obliquetrees._training._optim import adam_update, adam_update_2d
from obliquetrees.e2edt import _kernels as K
from obliquetrees.e2edt import _pruned_kernels as PK
from obliquetrees.e2edt import training as E
from tests import reference as ref
from tests.e2edt._params import e2edt_params


def _kernel_layout(tree):
    """The kernels' tree layout (docstring of obliquetrees.e2edt._kernels) of a stored tree."""
    left, right = tree.children_left, tree.children_right
    internal = left >= 0
    split_col = np.full(left.shape[0], -1, dtype=np.int64)
    leaf_col = np.full(left.shape[0], -1, dtype=np.int64)
    split_col[internal] = np.arange(internal.sum())
    leaf_col[~internal] = np.arange((~internal).sum())
    return left, right, split_col, leaf_col


def _layout(rng, max_depth=4, n_features=5):
    tree = ref.random_tree(rng, n_features, max_depth=max_depth, split_prob=0.85)
    while tree.node_count < 3:
        tree = ref.random_tree(rng, n_features, max_depth=max_depth, split_prob=0.85)
    return tree, _kernel_layout(tree)


def random_splits(seed, n, max_depth, scale):
    """A seeded generator, a random tree's layout, its number of leaves, the split
    outputs ``A`` (n, n_splits) and the splits' ``gamma``: the leaves are drawn next."""
    rng = np.random.default_rng(seed)
    _, layout = _layout(rng, max_depth)
    n_splits, n_leaves = int((layout[0] >= 0).sum()), int((layout[0] < 0).sum())
    A = rng.normal(scale=scale, size=(n, n_splits))
    gamma = rng.uniform(0.5, 3.0, n_splits)
    return rng, layout, n_leaves, A, gamma


def _problem(seed, n=60, n_classes=3, max_depth=4, scale=3.0):
    rng, layout, n_leaves, A, gamma = random_splits(seed, n, max_depth, scale)
    pi = rng.dirichlet(np.ones(n_classes), n_leaves)
    y = rng.integers(0, n_classes, n)
    sw = rng.uniform(0.0, 2.0, n)
    return rng, layout, A, gamma, pi, y, sw


@pytest.mark.parametrize("seed", range(5))
def test_soft_evaluation_gives_the_path_probabilities_of_eq_1(seed):
    """The core soft evaluation with E2EDT's steepness is ``mu_l`` of eq. 1."""
    rng = np.random.default_rng(seed)
    tree, (left, right, split_col, _) = _layout(rng)
    internal, leaves = left >= 0, np.flatnonzero(left < 0)
    X = rng.normal(scale=3.0, size=(60, tree.n_features))
    A = X @ tree.dense_weights()[internal].T + tree.bias[internal]
    gamma = rng.uniform(0.5, 3.0, int(internal.sum()))
    steepness = np.zeros(tree.node_count)
    steepness[internal] = gamma
    one_hot = np.zeros((tree.node_count, leaves.shape[0]))
    one_hot[leaves, np.arange(leaves.shape[0])] = 1.0
    mu = soft_predict(tree, X, one_hot, steepness=steepness)
    want = np.exp(ref.e2edt_log_path_probs(A, gamma, left, right, split_col))
    np.testing.assert_allclose(mu, want, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(mu.sum(axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
# underflow: the products underflow to 0 (activations x 400); subnormal: every total is
# 1e-309 sum_l mu_l, whose reciprocal overflows to inf. Both are redone in log space.
@pytest.mark.parametrize("case", ["plain", "underflow", "subnormal"])
def test_e_step_matches_reference(seed, case):
    scale = 400.0 if case == "underflow" else 1.0
    _, (left, right, split_col, leaf_col), A, gamma, pi, y, sw = _problem(seed, scale=scale)
    if case == "subnormal":
        pi = np.full_like(pi, 1e-309)
    else:
        pi[0, :] = 0.0  # leaves with zero probability for some labels
        pi[0, 0] = 1.0
    At = np.ascontiguousarray(A.T)
    Ex = K.steep_activations(At, gamma)
    h = np.empty((pi.shape[0], A.shape[0]))
    counts = np.zeros_like(pi)
    loglik = K.e_step(At, Ex, gamma, left, right, split_col, leaf_col, pi, y, sw, h, counts)
    h_ref, counts_ref, loglik_ref = ref.e2edt_e_step(A, gamma, left, right, split_col, pi, y, sw)
    np.testing.assert_allclose(h.T, h_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(counts, counts_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(loglik, loglik_ref, rtol=1e-9)
    assert np.all(np.isfinite(h))


def test_e_step_impossible_label_falls_back_to_path_posterior():
    _, (left, right, split_col, leaf_col), A, gamma, pi, y, sw = _problem(0)
    pi[:, 0] = 0.0
    pi /= pi.sum(axis=1, keepdims=True)
    y[:5] = 0  # label 0 has probability 0 in every leaf
    At = np.ascontiguousarray(A.T)
    Ex = K.steep_activations(At, gamma)
    h = np.empty((pi.shape[0], A.shape[0]))
    counts = np.zeros_like(pi)
    loglik = K.e_step(At, Ex, gamma, left, right, split_col, leaf_col, pi, y, sw, h, counts)
    mu = np.exp(ref.e2edt_log_path_probs(A, gamma, left, right, split_col))
    np.testing.assert_allclose(h.T[:5], mu[:5], rtol=1e-9)
    assert loglik == -np.inf
    assert np.all(np.isfinite(counts))


def assert_gradient_is_finite_differences(f, W, b, gW, gb, atol):
    """``gW`` and ``gb`` are the central differences (step 1e-6, ``rtol=1e-5``) of
    ``f(W, b)``: split by split, each weight and then the bias."""
    eps = 1e-6
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            Wp, Wm = W.copy(), W.copy()
            Wp[i, j] += eps
            Wm[i, j] -= eps
            fd = (f(Wp, b) - f(Wm, b)) / (2 * eps)
            np.testing.assert_allclose(fd, gW[i, j], rtol=1e-5, atol=atol)
        bp, bm = b.copy(), b.copy()
        bp[i] += eps
        bm[i] -= eps
        np.testing.assert_allclose((f(W, bp) - f(W, bm)) / (2 * eps), gb[i], rtol=1e-5, atol=atol)


@pytest.mark.parametrize("seed", range(5))
def test_split_gradient_matches_reference_and_finite_differences(seed):
    rng, (left, right, split_col, leaf_col), _, gamma, pi, y, sw = _problem(seed, n=40)
    n_splits = int((left >= 0).sum())
    p = 4
    X = rng.normal(size=(40, p))
    W = rng.normal(size=(n_splits, p))
    b = rng.normal(size=n_splits)
    A = X @ W.T + b
    h, _, _ = ref.e2edt_e_step(A, gamma, left, right, split_col, pi, y, sw)
    coef = sw / sw.sum()
    At = np.ascontiguousarray(A.T)
    Ex = K.steep_activations(At, gamma)
    G = np.empty_like(At)
    K.split_gradient_factors(
        At, Ex, gamma, left, right, split_col, leaf_col, np.ascontiguousarray(h.T), coef, G
    )
    gW, gb, dA = ref.e2edt_split_gradient(W, b, gamma, left, right, split_col, h, coef, X)
    np.testing.assert_allclose(G, dA.T, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(G @ X, gW, rtol=1e-10, atol=1e-14)

    # central finite differences of eq. 14
    def f(W_, b_):
        return ref.e2edt_split_objective(W_, b_, gamma, left, right, split_col, h, coef, X)

    assert_gradient_is_finite_differences(f, W, b, gW, [row.sum() for row in G], atol=1e-8)


def test_leaf_m_step_matches_reference_and_guards_empty_leaves():
    rng = np.random.default_rng(0)
    counts = rng.uniform(size=(6, 4))
    counts[2] = 0.0
    pi = rng.dirichlet(np.ones(4), 6)
    want = ref.e2edt_leaf_m_step(counts, pi)
    K.leaf_m_step(counts, pi)
    np.testing.assert_array_equal(pi, want)
    assert np.all(np.isfinite(pi))


def test_adam_update_matches_reference():
    rng = np.random.default_rng(0)
    p, m, v = rng.normal(size=20), rng.normal(size=20) * 0.1, rng.uniform(size=20)
    g = rng.normal(size=20)
    want = ref.adam_step(p, m, v, g, 7, 0.01)
    adam_update(p, g, m, v, 7, 0.01, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(p, want[0], rtol=1e-14)
    np.testing.assert_allclose(m, want[1], rtol=1e-14)
    np.testing.assert_allclose(v, want[2], rtol=1e-14)


@pytest.mark.parametrize("shape", [(3, 4), (5, 5)])
def test_grid_adjacency_and_laplacian(shape):
    rng = np.random.default_rng(0)
    M = ref.e2edt_grid_laplacian(shape)
    p = shape[0] * shape[1]
    indptr, indices = E.grid_adjacency(shape)
    dense = np.zeros((p, p))
    for i in range(p):
        dense[i, indices[indptr[i] : indptr[i + 1]]] = 1
    np.testing.assert_array_equal(dense, (M < 0).astype(float))
    W = rng.normal(size=(3, p))
    mask = (rng.random((3, p)) < 0.7).astype(np.uint8)
    W *= mask
    out = np.zeros_like(W)
    K.add_laplacian_grad(W, mask, indptr, indices, 0.3, out)
    for i in range(3):
        Li = ref.e2edt_masked_laplacian(M, mask[i])
        np.testing.assert_allclose(out[i], 2 * 0.3 * Li @ W[i], rtol=1e-12, atol=1e-14)
    # induced adjacency of a feature subset = masked Laplacian in local indices
    feats = np.sort(rng.choice(p, 7, replace=False))
    li, lx = E.induced_adjacency(feats, indptr, indices, p)
    local = np.zeros((7, 7))
    for i in range(7):
        local[i, lx[li[i] : li[i + 1]]] = 1
    np.testing.assert_array_equal(local, (M[np.ix_(feats, feats)] < 0).astype(float))


@pytest.mark.parametrize("lam", [0.0, 0.05])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_stump_matches_reference(lam, dtype):
    rng = np.random.default_rng(1)
    shape = (3, 3)
    n, k = 150, 9
    X = rng.normal(size=(n, k))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(np.int64) + (X[:, 1] > 1)
    sw = rng.uniform(0.5, 1.5, n)
    w0 = rng.normal(size=k)
    w0 /= np.linalg.norm(w0)
    pi0 = np.full((2, 3), 1 / 3)
    n_epochs, batch = 6, 40
    order = rng.permuted(np.tile(np.arange(n), (n_epochs - 1, 1)), axis=1)
    indptr, indices = E.grid_adjacency(shape)
    w, b, pi = w0.copy(), np.array([0.1]), pi0.copy()
    # gamma0, its growth, epochs, order, batch, Adam's step, beta1, beta2 and eps, lambda
    hyper = (1.0, 0.1, n_epochs, order, batch, 0.01, 0.9, 0.999, 1e-8, lam)
    gamma = K.fit_stump(X.astype(dtype), y, sw, w, b, pi, *hyper, indptr, indices)
    w_ref, b_ref, pi_ref, gamma_ref = ref.e2edt_fit_stump(
        X.astype(dtype).astype(np.float64),
        y,
        sw,
        w0,
        0.1,
        pi0,
        *hyper,
        ref.e2edt_grid_laplacian(shape),
    )
    tol = 1e-9 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(w, w_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(b[0], b_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(pi, pi_ref, rtol=tol, atol=tol)
    assert gamma == pytest.approx(gamma_ref)
    assert gamma == pytest.approx(1.0 + 0.1 * n_epochs)


def test_em_leaf_iterations_do_not_decrease_likelihood():
    """With the splits fixed, E-step + closed-form leaves is exact EM."""
    _, (left, right, split_col, leaf_col), A, gamma, pi, y, sw = _problem(3, n=200)
    At = np.ascontiguousarray(A.T)
    Ex = K.steep_activations(At, gamma)
    pi = np.full_like(pi, 1.0 / pi.shape[1])
    previous = -np.inf
    no_h = np.empty((pi.shape[0], 0))
    for _ in range(15):
        counts = np.zeros_like(pi)
        loglik = K.e_step(At, Ex, gamma, left, right, split_col, leaf_col, pi, y, sw, no_h, counts)
        assert loglik >= previous - 1e-9
        previous = loglik
        K.leaf_m_step(counts, pi)


def _toy(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] > 0).astype(np.int64) + 2 * (X[:, 1] + X[:, 2] > 0.5)
    return X, y


def _build(X, y, **kw):
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    params = e2edt_params(
        **{"max_depth": 3, "max_epochs": 5, "finetune_epochs": 5, "learning_rate": 0.02, **kw}
    )
    return E._fit_one_tree(X, Z, y, np.ones(len(y)), int(y.max()) + 1, mean, scale, params, 0)


def test_soft_model_with_huge_steepness_equals_hard_traversal():
    X, y = _toy()
    tree, steep = _build(X, y)
    tree.check_invariants()
    hard = traversal.predict_value(ObliqueForest.from_trees([tree]), X, 1)
    soft = soft_predict(tree, X, tree.value, steepness=steep * 1e9)
    np.testing.assert_allclose(soft, hard, atol=1e-9)
    # and the default steepness gives a proper distribution close to it
    soft = soft_predict(tree, X, tree.value, steepness=steep)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-12)


def test_stored_tree_statistics_and_folding():
    X, y = _toy()
    X = X * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0
    tree, steep = _build(X, y)
    tree.check_invariants()
    assert tree.n_node_samples[0] == len(y)
    internal = tree.children_left >= 0
    np.testing.assert_allclose(
        tree.n_node_samples[internal],
        tree.n_node_samples[tree.children_left[internal]]
        + tree.n_node_samples[tree.children_right[internal]],
    )
    np.testing.assert_allclose(tree.value.sum(axis=1), 1.0)
    assert np.all(steep[internal] > 0) and np.all(steep[~internal] == 0)


def test_greedy_growth_limits():
    X, y = _toy()
    tree, _ = _build(X, y, max_depth=2, finetune_epochs=0)
    assert tree.max_depth <= 2
    tree, _ = _build(X, y, max_depth=None, max_leaf_nodes=3, finetune_epochs=0)
    assert tree.n_leaves <= 3
    tree, _ = _build(X, y, min_samples_split=10**6)
    assert tree.node_count == 1
    np.testing.assert_allclose(tree.value[0], np.bincount(y) / len(y))


def test_pure_data_gives_a_single_leaf():
    X, _ = _toy()
    tree, _ = _build(X, np.zeros(len(X), dtype=np.int64))
    assert tree.node_count == 1


def test_patches_are_anywhere_and_features_subsets_respected():
    rng = np.random.default_rng(0)
    shape = (6, 6)
    X = rng.normal(size=(400, 36))
    y = (X[:, 14] + X[:, 21] > 0).astype(np.int64)
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    params = e2edt_params(
        max_depth=4,
        max_epochs=3,
        finetune_epochs=2,
        image_shape=shape,
        patch_size=3,
        spatial_reg=0.01,
    )
    starts = set()
    for seed in range(4):
        tree, _ = E._fit_one_tree(X, Z, y, np.ones(400), 2, mean, scale, params, seed)
        W = tree.dense_weights()
        for i in np.flatnonzero(tree.children_left >= 0):
            rows, cols = np.nonzero(W[i].reshape(shape))
            assert rows.max() - rows.min() < 3 and cols.max() - cols.min() < 3
            starts.add((rows.min(), cols.min()))
    assert any(r != c for r, c in starts)  # not only on the diagonal
    params = e2edt_params(max_depth=3, max_epochs=3, finetune_epochs=2, max_features=5)
    tree, _ = E._fit_one_tree(X, Z, y, np.ones(400), 2, mean, scale, params, 0)
    assert np.all(np.diff(tree.weight_indptr)[tree.children_left >= 0] <= 5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(3))
def test_fused_em_batch_equals_e_step_then_gradient(seed, dtype):
    # n = 600 spans several chunks, the last one partial
    _, (left, right, split_col, leaf_col), A, gamma, pi, y, sw = _problem(seed, n=600)
    At = np.ascontiguousarray(A.T, dtype=dtype)
    Ex = K.steep_activations(At, gamma)
    coef = sw / sw.sum()
    h1 = np.empty((pi.shape[0], A.shape[0]))
    c1 = np.zeros_like(pi)
    ll1 = K.e_step(At, Ex, gamma, left, right, split_col, leaf_col, pi, y, sw, h1, c1)
    G1 = np.empty_like(At)
    K.split_gradient_factors(At, Ex, gamma, left, right, split_col, leaf_col, h1, coef, G1)
    c2 = np.zeros_like(pi)
    G2 = np.empty_like(At)
    gsum = np.zeros(At.shape[0])
    ll2 = K.em_batch(At, Ex, gamma, left, right, split_col, leaf_col, pi, y, sw, coef, c2, G2, gsum)
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(G1, G2)
    assert ll1 == ll2
    # the bias gradient: row sums of the factors before rounding to the data dtype
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(
        gsum, G1.sum(axis=1, dtype=np.float64), rtol=tol, atol=tol * np.abs(G1).sum(axis=1).max()
    )


def test_steep_activations_matches_numpy():
    rng = np.random.default_rng(0)
    A = rng.normal(scale=5.0, size=(7, 50))
    gamma = rng.uniform(0.5, 3.0, 7)
    A0 = A.copy()
    Ex = K.steep_activations(A, gamma)
    np.testing.assert_array_equal(A, A0)  # not modified
    np.testing.assert_allclose(Ex, np.exp(-np.abs(gamma[:, None] * A)), rtol=1e-14)


def test_adam_update_2d_on_strided_blocks_matches_reference():
    rng = np.random.default_rng(0)
    P, M, V, G = (rng.normal(size=(6, 9)) for _ in range(4))
    V = np.abs(V)
    block = (slice(1, 5), slice(2, 8))
    want = ref.adam_step(
        P[block].ravel(), M[block].ravel(), V[block].ravel(), G[block].ravel(), 3, 0.01
    )
    P0, M0, V0 = P.copy(), M.copy(), V.copy()
    adam_update_2d(P[block], G[block], M[block], V[block], 3, 0.01, 0.9, 0.999, 1e-8)
    for got, w in zip((P, M, V), want, strict=True):
        np.testing.assert_allclose(got[block].ravel(), w, rtol=1e-14)
    outside = np.ones(P.shape, dtype=bool)
    outside[block] = False
    for got, before in ((P, P0), (M, M0), (V, V0)):
        np.testing.assert_array_equal(got[outside], before[outside])


@pytest.mark.parametrize("band_width", [None, 6])
def test_training_tree_bands_match_dense_products(band_width):
    """Banded GEMMs = the dense products with the masked weight matrix."""
    rng = np.random.default_rng(0)
    shape = (6, 6)
    X = rng.normal(size=(300, 36))
    y = (X[:, 14] + X[:, 21] > 0).astype(np.int64) + (X[:, 3] > 0.5)
    params = e2edt_params(
        max_depth=4, max_epochs=2, finetune_epochs=0, image_shape=shape, patch_size=3
    )
    greedy = E.grow_greedy(X, y, np.ones(300), 3, params, rng, None)
    tt = E.TrainingTree(greedy, 36, band_width)
    assert tt.n_splits >= 3
    if band_width is None:
        assert len(tt.bands) == 1
    else:
        assert len(tt.bands) > 1
    # bands tile the split rows, and every split's features lie in its band
    assert tt.bands[0][0] == 0 and tt.bands[-1][1] == tt.n_splits
    for (r0, r1, c0, c1), nxt in zip(tt.bands, tt.bands[1:] + [None], strict=True):
        assert nxt is None or nxt[0] == r1
        cols = np.flatnonzero(tt.mask[r0:r1].any(axis=0))
        assert cols.min() >= c0 and cols.max() < c1
    # split columns map back to the nodes' own weights
    for c, node in enumerate(tt.split_nodes):
        np.testing.assert_array_equal(tt.W[c, greedy.features[node]], greedy.weights[node])
        assert tt.split_col[node] == c
    tt.W += rng.normal(size=tt.W.shape) * tt.mask  # generic weights inside the masks
    np.testing.assert_allclose(tt.activations(X), tt.W @ X.T + tt.b[:, None], rtol=1e-12)
    G = rng.normal(size=(tt.n_splits, 300))
    out = np.full(tt.W.shape, 7.0)
    tt.minus_weight_gradient(G, X, out)
    inside = np.zeros(tt.W.shape, dtype=bool)
    for r0, r1, c0, c1 in tt.bands:
        inside[r0:r1, c0:c1] = True
    np.testing.assert_allclose(out[inside], (-(G @ X) * tt.mask)[inside], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out[~inside], 7.0)


# --------------------------------------------------------------- bootstrap
def test_bootstrap_counts_are_a_seeded_draw_of_n_rows():
    a = E.bootstrap_counts(500, 3)
    np.testing.assert_array_equal(a, E.bootstrap_counts(500, 3))
    assert a.sum() == 500 and a.dtype == np.float64
    assert 0.3 < np.mean(a == 0) < 0.44  # about 1/e of the rows out of bag
    assert not np.array_equal(a, E.bootstrap_counts(500, 4))
    params = e2edt_params()
    sw = np.ones(500)
    assert E.tree_weights(sw, np.zeros(500, dtype=np.int64), 1, params, 3) is sw


def test_bootstrapped_tree_is_the_tree_of_its_integer_weights():
    """bootstrap=True trains exactly as bootstrap=False with sample weights = draw counts."""
    X, y = _toy()
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    kw = dict(max_depth=3, max_epochs=4, finetune_epochs=3, learning_rate=0.02)
    sw = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    boot, boot_steep = E._fit_one_tree(
        X, Z, y, sw, 4, mean, scale, e2edt_params(**kw, bootstrap=True), 7
    )
    counts = E.bootstrap_counts(len(y), 7)
    plain, plain_steep = E._fit_one_tree(
        X, Z, y, sw * counts, 4, mean, scale, e2edt_params(**kw), 7
    )
    for name in ("children_left", "weight_value", "bias", "value", "n_node_samples"):
        np.testing.assert_array_equal(getattr(boot, name), getattr(plain, name))
    np.testing.assert_array_equal(boot_steep, plain_steep)


def test_tree_without_weight_is_a_leaf_with_the_prior():
    X, y = _toy()
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    sw = np.zeros(len(y))
    sw[:3] = [1.0, 2.0, 1.0]
    seed = next(s for s in range(100) if not E.bootstrap_counts(len(y), s)[:3].any())
    params = e2edt_params(max_depth=3, max_epochs=2, finetune_epochs=1, bootstrap=True)
    tree, steep = E._fit_one_tree(X, Z, y, sw, 4, mean, scale, params, seed)
    tree.check_invariants()
    assert tree.node_count == 1
    np.testing.assert_allclose(tree.value[0], np.bincount(y[:3], weights=sw[:3], minlength=4) / 4)
    np.testing.assert_array_equal(steep, [0.0])


def test_zero_weight_rows_neither_split_nodes_nor_fill_a_side():
    """Every greedy split sends positive weight both ways; zero-weight rows do not count."""
    X, y = _toy(n=400)
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    sw = np.where(np.random.default_rng(2).random(len(y)) < 0.4, 0.0, 1.0)
    params = e2edt_params(max_depth=6, max_epochs=3, finetune_epochs=0, learning_rate=0.05)
    tree, _ = E._fit_one_tree(X, Z, y, sw, 4, mean, scale, params, 0)
    assert tree.node_count > 3
    assert np.all(tree.n_node_samples > 0)
    # min_samples_split counts rows of positive weight only
    params = e2edt_params(max_depth=3, max_epochs=2, finetune_epochs=0, min_samples_split=300)
    tree, _ = E._fit_one_tree(X, Z, y, sw, 4, mean, scale, params, 0)
    assert np.count_nonzero(sw) < 300 and tree.node_count == 1


#: The kernels' feature lists when every split uses every feature.
_NO_SUBSETS = np.empty(0, dtype=np.int64)


def feature_subsets(rng, W):
    """Each split (row of ``W``) on a random subset of the features, each one kept
    with probability 0.6 and at least one: zeroes ``W`` elsewhere and returns the
    kernels' feature lists (CSR-like ``indptr``, ``indices``)."""
    n_splits, p = W.shape
    mask = rng.random((n_splits, p)) < 0.6
    mask[np.arange(n_splits), rng.integers(0, p, n_splits)] = True
    W *= mask
    feat_ptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(np.int64)
    return feat_ptr, np.nonzero(mask)[1].astype(np.int64)


def _pruned_problem(seed, n=300, p=5, subsets=False, dtype=np.float64):
    """A random tree with weights, data, leaves and the kernel's feature lists."""
    rng, layout, _, gamma, pi, y, sw = _problem(seed, n=n)
    left = layout[0]
    n_splits = int((left >= 0).sum())
    X = rng.normal(size=(n, p)).astype(dtype)
    W = rng.normal(scale=2.0, size=(n_splits, p))
    feat_ptr, feat_idx = feature_subsets(rng, W) if subsets else (_NO_SUBSETS, _NO_SUBSETS)
    b = rng.normal(size=n_splits)
    return rng, layout, X, W, b, gamma, pi, y, sw, feat_ptr, feat_idx


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("subsets", [False, True])
@pytest.mark.parametrize("eps", [1e-300, 1e-4, 1e-2, 0.3])
@pytest.mark.parametrize("seed", range(3))
def test_pruned_em_batch_matches_reference(seed, eps, subsets, dtype):
    """Responsibilities, statistics and gradients of pruned routing on random inputs."""
    rng, (left, right, split_col, leaf_col), X, W, b, gamma, pi, y, sw, fp, fi = _pruned_problem(
        seed, subsets=subsets, dtype=dtype
    )
    rows = rng.permutation(X.shape[0])[:200].astype(np.int64)
    coef = sw[rows] / sw[rows].sum()
    counts = np.zeros_like(pi)
    gW = np.zeros_like(W)
    gb = np.zeros_like(b)
    tree = (W, b, gamma, left, right, split_col, leaf_col, fp, fi, eps, pi)
    loglik, visits = PK.pruned_em_batch(X, rows, *tree, y, sw, coef, counts, gW, gb)
    X64 = X[rows].astype(np.float64)
    h, counts_ref, loglik_ref, kept = ref.e2edt_pruned_e_step(
        X64, W, b, gamma, left, right, split_col, pi, y[rows], sw[rows], eps
    )
    gW_ref, gb_ref, _ = ref.e2edt_split_gradient(W, b, gamma, left, right, split_col, h, coef, X64)
    if subsets:  # a split's gradient lives on its features only
        gW_ref *= W != 0
    np.testing.assert_allclose(counts, counts_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(loglik, loglik_ref, rtol=1e-9)
    np.testing.assert_allclose(-gW, gW_ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(-gb, gb_ref, rtol=1e-8, atol=1e-12)
    assert np.all(kept.any(axis=1))  # the hard path always reaches a leaf
    if eps == 1e-300:  # nothing is pruned: the exact E-step of every leaf
        assert visits == rows.shape[0] * left.shape[0]
        A = X64 @ W.T + b
        h_full, counts_full, _ = ref.e2edt_e_step(
            A, gamma, left, right, split_col, pi, y[rows], sw[rows]
        )
        np.testing.assert_allclose(counts, counts_full, rtol=1e-9, atol=1e-12)
    else:
        assert visits < rows.shape[0] * left.shape[0]


def test_pruned_em_batch_without_gradient_and_impossible_labels():
    """No gradient buffer: only statistics; a label impossible in every leaf: path posterior."""
    rng, (left, right, split_col, leaf_col), X, W, b, gamma, pi, y, sw, fp, fi = _pruned_problem(1)
    pi[:, 0] = 0.0
    pi /= pi.sum(axis=1, keepdims=True)
    y[:5] = 0
    rows = np.arange(X.shape[0], dtype=np.int64)
    counts = np.zeros_like(pi)
    gb = np.zeros_like(b)
    tree = (W, b, gamma, left, right, split_col, leaf_col, fp, fi, 1e-3, pi)
    loglik, _ = PK.pruned_em_batch(X, rows, *tree, y, sw, sw, counts, np.empty((0, 0)), gb)
    _, counts_ref, loglik_ref, _ = ref.e2edt_pruned_e_step(
        X, W, b, gamma, left, right, split_col, pi, y, sw, 1e-3
    )
    assert loglik == loglik_ref == -np.inf
    np.testing.assert_allclose(counts, counts_ref, rtol=1e-9, atol=1e-12)
    assert np.all(gb == 0.0)


# 5e-324, the smallest double, times a path probability below 1/2 rounds to 0; 1e-309
# gives subnormal totals, whose reciprocal overflows to inf
@pytest.mark.parametrize("leaf_probability", [5e-324, 1e-309])
def test_pruned_em_batch_rescues_underflow_in_log_space(leaf_probability):
    """Products ``pi_l[y] mu_l`` whose sum underflows to 0 or to a subnormal: the sample
    is redone in log space."""
    rng, (left, right, split_col, leaf_col), X, W, b, gamma, pi, y, sw, fp, fi = _pruned_problem(2)
    W *= 0.01  # soft routing: every path probability below 1/2
    b *= 0.01
    pi = np.full_like(pi, leaf_probability)
    rows = np.arange(X.shape[0], dtype=np.int64)
    coef = sw / sw.sum()
    counts = np.zeros_like(pi)
    gW = np.zeros_like(W)
    gb = np.zeros_like(b)
    tree = (W, b, gamma, left, right, split_col, leaf_col, fp, fi, 1e-3, pi)
    loglik, _ = PK.pruned_em_batch(X, rows, *tree, y, sw, coef, counts, gW, gb)
    h, counts_ref, loglik_ref, kept = ref.e2edt_pruned_e_step(
        X, W, b, gamma, left, right, split_col, pi, y, sw, 1e-3
    )
    mu = np.exp(ref.e2edt_log_path_probs(X @ W.T + b, gamma, left, right, split_col))
    assert np.mean(np.where(kept, mu, 0.0).max(axis=1) < 0.5) > 0.5  # most rows underflow
    gW_ref, _, _ = ref.e2edt_split_gradient(W, b, gamma, left, right, split_col, h, coef, X)
    np.testing.assert_allclose(counts, counts_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(loglik, loglik_ref, rtol=1e-9)
    np.testing.assert_allclose(-gW, gW_ref, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("regression", [False, True])
@pytest.mark.parametrize("patches", [False, True])
def test_finetune_without_pruning_equals_the_dense_pass(patches, regression):
    """A threshold below every path probability reproduces the exact (dense) finetune."""
    import dataclasses

    from obliquetrees._training.leaf_models import leaf_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 36))
    y = (X[:, 14] + X[:, 21] > 0).astype(np.int64) + (X[:, 3] > 0.5)
    sw = np.ones(400)
    if regression:  # Gaussian leaves on standardised targets
        leaves = leaf_model(np.c_[X[:, 14] + X[:, 21], X[:, 3]], None, sw)
        y = leaves.training_targets(np.c_[X[:, 14] + X[:, 21], X[:, 3]])
    else:
        leaves = 3
    kw = dict(image_shape=(6, 6), patch_size=3) if patches else {}
    params = e2edt_params(max_depth=4, max_epochs=3, finetune_epochs=3, batch_size=64, **kw)
    greedy = E.grow_greedy(X, y, sw, leaves, params, np.random.default_rng(1), None)
    band_width = 6 if patches else None
    tuned = []
    for threshold in (0.0, 1e-300):
        tt = E.TrainingTree(greedy, 36, band_width)
        p = dataclasses.replace(params, prune_threshold=threshold)
        E.finetune(tt, X, y, sw, p, np.random.default_rng(2), None)
        tuned.append(tt)
    dense, pruned = tuned
    assert dense.n_splits >= 3
    # the same arithmetic up to the summation order of the products
    np.testing.assert_allclose(pruned.pi, dense.pi, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pruned.W, dense.W, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(pruned.b, dense.b, rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(pruned.gamma, dense.gamma)


def test_finetune_schedule_fields_replace_steepness_increase_and_learning_rate():
    """``finetune_steepness_increase`` / ``finetune_learning_rate`` act as those of the finetune."""
    import dataclasses

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.5)
    sw = np.ones(300)
    params = e2edt_params(max_depth=3, max_epochs=3, finetune_epochs=4, batch_size=64)
    greedy = E.grow_greedy(X, y, sw, 3, params, np.random.default_rng(1), None)
    own = dataclasses.replace(params, finetune_steepness_increase=0.4, finetune_learning_rate=0.01)
    shared = dataclasses.replace(params, steepness_increase=0.4, learning_rate=0.01)
    tuned = []
    for p in (params, own, shared):
        tt = E.TrainingTree(greedy, 6)
        gamma0 = tt.gamma.copy()
        E.finetune(tt, X, y, sw, p, np.random.default_rng(2), None)
        tuned.append((tt, gamma0))
    (base, g0), (a, _), (b, _) = tuned
    assert base.n_splits >= 3
    np.testing.assert_allclose(base.gamma - g0, 4 * 0.1)
    np.testing.assert_allclose(a.gamma - g0, 4 * 0.4)
    for name in ("W", "b", "pi", "gamma"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.W, base.W)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("classes", [False, True])
def test_internal_values_follow_the_rule_node_by_node(seed, classes):
    """Every internal node: the leaf model's value of its hard-routed rows, or, when no
    weighted row reaches it, its parent's (the fallback at the root), as a walk from the
    root computes it (zero weights and empty subtrees included; seed 0: an empty tree)."""
    from obliquetrees._training.leaf_models import leaf_model

    rng = np.random.default_rng(seed)
    tree = ref.random_tree(rng, 3, n_outputs=3 if classes else 2, max_depth=6)
    while tree.node_count < 7:
        tree = ref.random_tree(rng, 3, n_outputs=3 if classes else 2, max_depth=6)
    left, right = tree.children_left, tree.children_right
    internal = np.flatnonzero(left >= 0)
    parent = np.full(tree.node_count, -1, dtype=np.int64)
    parent[left[internal]] = internal
    parent[right[internal]] = internal
    n = 40
    leaf = rng.choice(np.flatnonzero(left < 0)[::3], n)  # whole subtrees get no row
    sw = rng.uniform(0.0, 2.0, n) * (rng.random(n) < 0.6) * (seed != 0)
    y = rng.integers(0, 3, n) if classes else rng.normal(size=(n, 2))
    model = leaf_model(y, 3 if classes else None, np.ones(n))
    weight, sums = model.node_sums(leaf, parent, y, sw)
    assert (weight[internal] == 0).any()
    E._set_internal_values(tree, internal, weight, sums, parent, model)

    def walk(node, inherited):
        own = model.sums_value(sums[node], weight[node]) if weight[node] > 0 else inherited
        if left[node] >= 0:
            np.testing.assert_array_equal(tree.value[node], own)
            walk(left[node], own)
            walk(right[node], own)

    walk(0, np.broadcast_to(model.fallback_value(), tree.value.shape[1:]))
