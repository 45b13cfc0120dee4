"""E2EDT's pruned routing: the blocked kernel against the row-wise one, bit for bit.

:func:`PK.pruned_em_batch` (node by node over blocks of samples) must return
exactly what its row-wise form (``rowwise=True``, sample by sample) returns;
the row-wise kernel itself is checked against the plain-numpy reference in
``test_e2edt.py`` (through both kernels' shared results).
"""

import numpy as np
import pytest

from obliquetrees.e2edt import _pruned_kernels as PK
from tests import reference as ref
from tests.e2edt.test_training import _NO_SUBSETS, _kernel_layout, feature_subsets


def _visit_order_reference(split_col, left, right):
    """Breadth first from the root, right child before left (plain Python)."""
    order, queue = [], [0]
    while queue:
        node = queue.pop(0)
        order.append(node)
        if split_col[node] >= 0:
            queue += [right[node], left[node]]
    return np.array(order)


def _tree(rng, max_depth):
    tree = ref.random_tree(rng, 3, max_depth=max_depth, split_prob=0.85)
    while tree.node_count < 3:
        tree = ref.random_tree(rng, 3, max_depth=max_depth, split_prob=0.85)
    return _kernel_layout(tree)


def _permuted(layout, rng):
    """The same tree under a random relabelling of the nodes (root stays 0, parents first
    no longer guaranteed to match breadth-first ids)."""
    left, right, split_col, leaf_col = layout
    n = left.shape[0]
    perm = np.r_[0, 1 + rng.permutation(n - 1)]  # old id -> new id
    new = [np.full(n, -1, dtype=np.int64) for _ in range(4)]
    for old in range(n):
        new[0][perm[old]] = perm[left[old]] if left[old] >= 0 else -1
        new[1][perm[old]] = perm[right[old]] if right[old] >= 0 else -1
        new[2][perm[old]] = split_col[old]
        new[3][perm[old]] = leaf_col[old]
    return tuple(new)


@pytest.mark.parametrize("seed", range(6))
def test_visit_order_is_breadth_first_right_child_first(seed):
    rng = np.random.default_rng(seed)
    layout = _tree(rng, max_depth=6)
    if seed % 2:
        layout = _permuted(layout, rng)
    left, right, split_col, _ = layout
    order = PK.visit_order(split_col, left, right)
    np.testing.assert_array_equal(order, _visit_order_reference(split_col, left, right))
    assert sorted(order) == list(range(left.shape[0]))


def _problem(seed, n, p, dtype, subsets, regression, max_depth=7):
    """A random tree, data, leaves and feature lists for the pruned kernels."""
    rng = np.random.default_rng(seed)
    left, right, split_col, leaf_col = _tree(rng, max_depth)
    n_splits, n_leaves = int((left >= 0).sum()), int((left < 0).sum())
    X = rng.normal(size=(n, p)).astype(dtype)
    W = rng.normal(scale=1.0, size=(n_splits, p))
    fp, fi = feature_subsets(rng, W) if subsets else (_NO_SUBSETS, _NO_SUBSETS)
    b = rng.normal(size=n_splits)
    gamma = rng.uniform(0.5, 4.0, n_splits)
    if regression:  # Gaussian leaves: (means, precisions, log normaliser)
        d = 2
        prec = rng.uniform(0.5, 2.0, (n_leaves, d))
        c = 0.5 * np.log(prec / (2 * np.pi)).sum(axis=1, keepdims=True)
        pi = np.hstack([rng.normal(size=(n_leaves, d)), prec, c])
        y = rng.normal(size=(n, d))
    else:
        pi = rng.dirichlet(np.ones(4), n_leaves)
        y = rng.integers(0, 4, n).astype(np.int64)
    sw = rng.uniform(0.0, 2.0, n)
    tree = (W, b, gamma, left, right, split_col, leaf_col, fp, fi)
    return rng, X, tree, pi, y, sw


def _both(X, rows, tree, eps, pi, y, sw, coef, grad=True):
    """Results of the blocked and the row-wise kernel on fresh accumulators."""
    out = []
    for rowwise in (False, True):
        W = tree[0]
        n_stats = pi.shape[1] if y.ndim == 1 else 1 + 2 * y.shape[1]
        counts = np.full((pi.shape[0], n_stats), 0.25)  # accumulated into
        gW = np.full(W.shape, 0.5) if grad else np.empty((0, 0))
        gb = np.full(W.shape[0], -0.5)
        loglik, visits = PK.pruned_em_batch(
            X, rows, *tree, eps, pi, y, sw, coef, counts, gW, gb, rowwise
        )
        out.append((loglik, visits, counts, gW, gb))
    return out


def _assert_same_bits(blocked, rowwise):
    assert blocked[0] == rowwise[0] or (np.isnan(blocked[0]) and np.isnan(rowwise[0]))
    assert blocked[1] == rowwise[1]
    for a, b in zip(blocked[2:], rowwise[2:], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("regression", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("subsets", [False, True])
@pytest.mark.parametrize("eps", [1e-300, 1e-3, 0.2])
@pytest.mark.parametrize("seed", range(3))
def test_blocked_kernel_returns_the_row_wise_bits(seed, eps, subsets, dtype, regression):
    """Several blocks (the last one partial), repeated rows, every leaf model and layout."""
    n = 2 * PK.BLOCK + 37
    rng, X, tree, pi, y, sw = _problem(seed, n, 7, dtype, subsets, regression)
    rows = rng.integers(0, n, n + 11).astype(np.int64)  # repeats: a bootstrap-like batch
    coef = rng.uniform(0.0, 1e-2, rows.shape[0])
    blocked, rowwise = _both(X, rows, tree, eps, pi, y, sw, coef)
    _assert_same_bits(blocked, rowwise)
    assert np.any(blocked[3] != 0.5)  # the gradient was accumulated


@pytest.mark.parametrize("seed", range(3))
def test_blocked_kernel_without_gradient_returns_the_row_wise_bits(seed):
    rng, X, tree, pi, y, sw = _problem(seed, 700, 5, np.float32, False, False)
    rows = np.arange(700, dtype=np.int64)
    blocked, rowwise = _both(X, rows, tree, 1e-3, pi, y, sw, sw, grad=False)
    _assert_same_bits(blocked, rowwise)


@pytest.mark.parametrize("seed", range(3))
def test_blocks_needing_the_log_space_rescue_return_the_row_wise_bits(seed):
    """Impossible labels (leaves with a zero class) and underflowing products in some
    blocks only: those blocks fall back to the row-wise kernel, the others do not."""
    n = 3 * PK.BLOCK
    rng, X, tree, pi, y, sw = _problem(seed, n, 6, np.float64, False, False)
    pi[:, 0] = 0.0
    pi /= pi.sum(axis=1, keepdims=True)
    y[y == 0] = 1
    y[PK.BLOCK : PK.BLOCK + 5] = 0  # impossible in every leaf, in the second block only
    rows = np.arange(n, dtype=np.int64)
    coef = sw / sw.sum()
    blocked, rowwise = _both(X, rows, tree, 1e-3, pi, y, sw, coef)
    _assert_same_bits(blocked, rowwise)
    assert blocked[0] == -np.inf
    # underflow: tiny leaf likelihoods times soft path probabilities
    W, b = tree[0], tree[1]
    soft = (W * 0.01, b * 0.01, *tree[2:])
    tiny = np.full_like(pi, 5e-324)
    tiny[: pi.shape[0] // 2] = pi[: pi.shape[0] // 2]  # some samples still fine
    y[:] = 1
    blocked, rowwise = _both(X, rows, soft, 1e-3, tiny, y, sw, coef)
    _assert_same_bits(blocked, rowwise)
    assert np.isfinite(blocked[0])
