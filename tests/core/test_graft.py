"""Grafted trees (:mod:`obliquetrees._core.graft`): one stored tree predicting a sum.

:func:`graft_sum` hangs a copy of a tree ``F`` under every leaf of a tree
``T``: the result must predict ``T``'s output plus ``F``'s exactly under hard
and soft routing, with NaN terms too; :func:`split_graft` must recognise the
layout from the arrays alone (and nothing else), and
:func:`graft_soft_predict` must give the whole tree's soft output from the
two parts.
"""

import copy

import numpy as np
import pytest
from scipy import sparse

from obliquetrees._core import traversal
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.graft import graft_soft_predict, graft_sum, split_graft
from obliquetrees._core.soft import soft_predict
from obliquetrees._core.tree import ObliqueTree


def _random_tree(rng, n_splits, n_features, n_outputs):
    """A random tree (parents before children) with sparse weights and NaN terms,
    and a random steepness per node."""
    left, right = [-1], [-1]
    for _ in range(n_splits):
        leaf = rng.choice(np.flatnonzero(np.array(left) < 0))
        left[leaf], right[leaf] = len(left), len(left) + 1
        left += [-1, -1]
        right += [-1, -1]
    n_nodes = len(left)
    weights = rng.normal(size=(n_nodes, n_features)) * (rng.random((n_nodes, n_features)) < 0.6)
    missing = rng.normal(size=(n_nodes, n_features)) * (weights != 0)
    tree = ObliqueTree.from_dense(
        left,
        right,
        weights,
        rng.normal(size=n_nodes),
        rng.normal(size=(n_nodes, n_outputs)),
        rng.uniform(1, 5, size=n_nodes),
        missing=missing,
    )
    return tree, rng.uniform(0.2, 3.0, size=n_nodes)


def _hard(tree, X):
    return traversal.predict_value(ObliqueForest.from_trees([tree]), X, 1)


def _two_trees(seed, min_splits=0):
    """Two random trees with at least ``min_splits`` splits each, as ``(tree, steepness)``,
    and rows with NaN; 1 or 2 outputs by the seed."""
    rng = np.random.default_rng(seed)
    n_features, n_outputs = 6, 1 + seed % 2
    tree = _random_tree(rng, rng.integers(min_splits, 12), n_features, n_outputs)
    other = _random_tree(rng, rng.integers(min_splits, 8), n_features, n_outputs)
    X = rng.normal(size=(500, n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    return tree, other, X


@pytest.mark.parametrize("seed", range(8))
def test_a_grafted_tree_predicts_the_sum_of_its_two_trees(seed):
    (tree, steep), (other, other_steep), X = _two_trees(seed)
    grafted, grafted_steep = graft_sum(tree, steep, other, other_steep)
    grafted.check_invariants()
    assert grafted.n_leaves == tree.n_leaves * other.n_leaves
    assert grafted.max_depth <= tree.max_depth + other.max_depth
    assert np.array_equal(_hard(grafted, X), _hard(tree, X) + _hard(other, X))
    soft_sum = soft_predict(tree, X, tree.value, steep) + soft_predict(
        other, X, other.value, other_steep
    )
    soft = soft_predict(grafted, X, grafted.value, grafted_steep)
    np.testing.assert_allclose(soft, soft_sum, rtol=0, atol=1e-12)


def _graft_problem(seed):
    """The first tree of :func:`_two_trees` (both with splits), their graft and its
    steepness, and the rows."""
    (tree, steep), (other, other_steep), X = _two_trees(seed, min_splits=1)
    return (tree, *graft_sum(tree, steep, other, other_steep), X)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("as_sparse", [False, True])
def test_a_grafted_tree_is_evaluated_softly_through_its_two_parts(seed, as_sparse):
    """:func:`split_graft` recognises :func:`graft_sum`'s layout from the arrays alone, and
    the parts give the whole tree's soft output up to rounding (dense and CSR, NaN)."""
    tree, grafted, steep, X = _graft_problem(seed)
    parts = split_graft(grafted, steep)
    assert parts is not None
    np.testing.assert_array_equal(parts[2], np.flatnonzero(tree.children_left < 0))
    if as_sparse:
        X = sparse.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    whole = soft_predict(grafted, X, grafted.value, steep)
    np.testing.assert_allclose(
        graft_soft_predict(parts, X, grafted.value), whole, rtol=0, atol=1e-12
    )
    # any leaf values, e.g. a classifier's log-probabilities
    logs = np.log1p(np.abs(grafted.value))
    np.testing.assert_allclose(
        graft_soft_predict(parts, X, logs), soft_predict(grafted, X, logs, steep), atol=1e-12
    )


def _last_copy_changed(grafted, steep, change):
    """``grafted`` and its steepness with one node of its last copy changed."""
    tree = copy.deepcopy(grafted)
    steep = steep.copy()
    node = tree.node_count - 1  # in the last copy
    while tree.children_left[node] < 0:
        node -= 1
    first = tree.weight_indptr[node]
    if change == "bias":
        tree.bias[node] += 1.0
    elif change == "weight":
        tree.weight_value[first] += 1.0
    elif change == "steepness":
        steep[node] += 1.0
    elif change == "children":
        tree.children_left[node], tree.children_right[node] = (
            tree.children_right[node],
            tree.children_left[node],
        )
    return tree, steep


@pytest.mark.parametrize("change", ["bias", "weight", "steepness", "children"])
def test_a_tree_whose_copies_differ_is_evaluated_whole(change):
    """A copy that differs from the others (or an ordinary tree): no parts, the whole tree."""
    tree, grafted, steep, X = _graft_problem(3)
    changed, changed_steep = _last_copy_changed(grafted, steep, change)
    assert split_graft(changed, changed_steep) is None
    for seed in range(5):  # ordinary random trees
        ordinary, ordinary_steep = _random_tree(np.random.default_rng(seed), 20, 6, 1)
        assert split_graft(ordinary, ordinary_steep) is None
