"""E2EDT helpers against the plain forms they replace, bit for bit.

The hard-routed node statistics of stored trees (:func:`path_sums`, the
leaf models' ``node_sums``) against the sparse product ``indicator.T @
values`` of the node indicator; the blockwise standardisation of the
training inputs against the whole-array expression.
"""

import numpy as np
import pytest
from scipy import sparse

from obliquetrees._training.leaf_models import Categorical, Gaussian, path_sums
from obliquetrees.e2edt.training import _standardized_float32


def _random_tree(rng, n_splits):
    """``parent`` of a random binary tree (parents first) and its leaves."""
    left, right = [-1], [-1]
    for _ in range(n_splits):
        node = rng.choice([i for i in range(len(left)) if left[i] < 0])
        left[node], right[node] = len(left), len(left) + 1
        left += [-1, -1]
        right += [-1, -1]
    parent = np.full(len(left), -1, dtype=np.int64)
    for node, (a, b) in enumerate(zip(left, right, strict=True)):
        if a >= 0:
            parent[a] = parent[b] = node
    leaves = np.flatnonzero(np.array(left) < 0)
    return parent, leaves


def _indicator(leaf, parent):
    """The node indicator (CSR of int64 ones) of the rows' root-to-leaf paths, plain Python."""
    rows, cols = [], []
    for r, node in enumerate(leaf):
        path = []
        while node >= 0:
            path.append(node)
            node = parent[node]
        rows += [r] * len(path)
        cols += sorted(path)
    data = np.ones(len(rows), dtype=np.int64)
    return sparse.csr_matrix((data, (rows, cols)), shape=(leaf.shape[0], parent.shape[0]))


def _problem(seed, n=300, n_splits=12):
    rng = np.random.default_rng(seed)
    parent, leaves = _random_tree(rng, n_splits)
    leaf = rng.choice(leaves, n).astype(np.int64)
    # fractional weights over decades (zeros too): any reordering would show in the bits
    sw = rng.uniform(0, 1, n) * 10.0 ** rng.uniform(-6, 6, n)
    sw[rng.random(n) < 0.1] = 0.0
    return rng, parent, leaf, sw


@pytest.mark.parametrize("seed", range(4))
def test_path_sums_matches_the_sparse_product(seed):
    rng, parent, leaf, sw = _problem(seed)
    values = rng.normal(size=(leaf.shape[0], 3)) * sw[:, None]
    expected = np.asarray(_indicator(leaf, parent).T @ values)
    np.testing.assert_array_equal(path_sums(leaf, parent, values), expected)


@pytest.mark.parametrize("seed", range(4))
def test_node_sums_of_both_leaf_models_match_the_sparse_product(seed):
    rng, parent, leaf, sw = _problem(seed)
    indicator = _indicator(leaf, parent)
    n_classes = 4
    y = rng.integers(0, n_classes, leaf.shape[0])
    onehot = np.zeros((y.shape[0], n_classes))
    onehot[np.arange(y.shape[0]), y] = sw
    counts = np.asarray(indicator.T @ onehot)
    weight, sums = Categorical(n_classes).node_sums(leaf, parent, y, sw)
    np.testing.assert_array_equal(sums, counts)
    np.testing.assert_array_equal(weight, counts.sum(axis=1))

    targets = rng.normal(size=(leaf.shape[0], 2)) * 10.0 ** rng.uniform(-3, 3, (leaf.shape[0], 1))
    weight, sums = Gaussian(np.zeros(2), np.ones(2)).node_sums(leaf, parent, targets, sw)
    np.testing.assert_array_equal(weight, np.asarray(indicator.T @ sw).ravel())
    np.testing.assert_array_equal(sums, np.asarray(indicator.T @ (sw[:, None] * targets)))


@pytest.mark.parametrize("n", [0, 1, 7, 64, 65, 300])
def test_blockwise_standardization_matches_the_expression(n):
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 5)) * 10.0 ** rng.uniform(-20, 20, (n, 5))
    mean = rng.normal(size=5)
    scale = np.array([1.0, 3.0, np.inf, 1e-10, 7.5])  # inf: a constant feature
    expected = np.ascontiguousarray((X - mean) / scale, dtype=np.float32)
    Z = _standardized_float32(X, mean, scale, block=16)
    assert Z.dtype == np.float32 and Z.flags.c_contiguous
    np.testing.assert_array_equal(Z, expected)
