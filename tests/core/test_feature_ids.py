"""Container format 4: full split rows store no feature ids."""

import pickle

import numpy as np
import pytest

from obliquetrees._core import traversal, traversal_numpy
from obliquetrees._core.feature_ids import (
    explicit_feature_ids,
    id_starts,
    keeps_full_row_ids,
    node_weight_counts,
    stored_feature_ids,
)
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import ObliqueTree
from tests import reference


def _reference_stored(counts, ids, n_features):
    """Plain-Python stored form: drop every full row's ids if all are 0..p-1 in order."""
    rows, start = [], 0
    for c in counts:
        rows.append(list(ids[start : start + c]))
        start += c
    full = [r for r in rows if len(r) == n_features]
    if not full or any(r != list(range(n_features)) for r in full):
        return np.asarray(ids)
    return np.asarray([j for r in rows if len(r) != n_features for j in r], dtype=np.int32)


@pytest.mark.parametrize("seed", range(20))
def test_stored_and_explicit_ids_match_a_plain_reference(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(1, 6))
    counts = rng.integers(0, p + 1, size=int(rng.integers(1, 30)))
    ids = np.concatenate(
        [np.sort(rng.choice(p, size=c, replace=False)) for c in counts] + [np.zeros(0)]
    ).astype(np.int32)
    if seed % 4 == 0 and np.any(counts == p) and p > 1:  # one full row out of order
        row = int(np.flatnonzero(counts == p)[0])
        start = int(counts[:row].sum())
        ids[start : start + p] = ids[start : start + p][::-1]
    stored = stored_feature_ids(counts, ids, p)
    np.testing.assert_array_equal(stored, _reference_stored(counts, ids, p))
    np.testing.assert_array_equal(explicit_feature_ids(counts, stored, p), ids)
    assert stored_feature_ids(counts, stored, p) is stored  # already in its stored form
    # each node's ids start after those the earlier nodes store
    stored_per_node = [0 if c == p and stored.shape[0] < ids.shape[0] else c for c in counts]
    np.testing.assert_array_equal(id_starts(counts, stored, p), np.cumsum([0, *stored_per_node]))
    assert keeps_full_row_ids(counts, stored, p) == (
        stored.shape[0] == ids.shape[0] and bool(np.any(counts == p))
    )


def _dense_tree(rng, n_features=5, max_depth=4):
    """A random tree in which every split uses every feature (all rows full)."""
    return reference.random_tree(rng, n_features, 2, max_depth, density=1.0, split_prob=1.0)


def test_a_dense_tree_stores_no_ids_and_gives_them_back(rng):
    tree = _dense_tree(rng)
    n_splits = np.count_nonzero(tree.children_left != -1)
    assert vars(tree)["weight_index"].shape == (0,)
    np.testing.assert_array_equal(tree.weight_index, np.tile(np.arange(5), n_splits))
    back = pickle.loads(pickle.dumps(tree))
    assert vars(back)["weight_index"].shape == (0,)
    np.testing.assert_array_equal(back.dense_weights(), tree.dense_weights())


def test_a_full_row_out_of_order_keeps_the_ids_explicit(rng):
    tree = _dense_tree(rng)
    ids = tree.weight_index.copy()
    ids[:5] = ids[:5][::-1]
    values = tree.weight_value.copy()
    values[:5] = values[:5][::-1]  # the same split, stored in another order
    swapped = ObliqueTree(
        tree.children_left, tree.children_right, tree.weight_indptr, ids, values,
        tree.bias, tree.value, tree.n_node_samples, n_features=5, depth=tree.depth,
    )  # fmt: skip
    assert vars(swapped)["weight_index"] is not None
    np.testing.assert_array_equal(vars(swapped)["weight_index"], ids)
    forest = ObliqueForest.from_trees([tree, swapped])
    # one tree needs explicit ids, so the packed forest stores them all
    np.testing.assert_array_equal(
        vars(forest)["weight_index"], np.concatenate([tree.weight_index, ids])
    )
    X = rng.normal(size=(50, 5))
    np.testing.assert_allclose(
        traversal.predict_value(forest, X), reference.predict_value([tree, swapped], X)
    )


def test_mixed_rows_pack_route_and_view_like_the_explicit_trees(rng):
    trees = [reference.random_tree(rng, 3, 2, 5, density=0.7) for _ in range(6)]
    trees.append(_dense_tree(rng, n_features=3))
    forest = ObliqueForest.from_trees(trees)
    stored = vars(forest)["weight_index"]
    assert stored.shape[0] < forest.weight_value.shape[0]
    counts = node_weight_counts(forest.weight_indptr, forest.node_offset)
    np.testing.assert_array_equal(
        forest.weight_index, np.concatenate([t.weight_index for t in trees])
    )
    np.testing.assert_array_equal(explicit_feature_ids(counts, stored, 3), forest.weight_index)
    for view, tree in zip(forest.trees, trees, strict=True):
        np.testing.assert_array_equal(view.weight_index, tree.weight_index)
        np.testing.assert_array_equal(view.weight_value, tree.weight_value)
    X = rng.normal(size=(200, 3))
    X[rng.random(X.shape) < 0.1] = np.nan
    expected = reference.predict_value(trees, X)
    np.testing.assert_array_equal(traversal.predict_value(forest, X, n_threads=2), expected)
    np.testing.assert_array_equal(traversal_numpy.predict_value(forest, X), expected)
    back = pickle.loads(pickle.dumps(forest))
    np.testing.assert_array_equal(traversal.predict_value(back, X), expected)


def test_a_dense_forest_stores_values_but_no_ids(rng):
    trees = [_dense_tree(rng, n_features=8) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    n_weights = sum(t.weight_value.shape[0] for t in trees)
    assert vars(forest)["weight_index"].shape == (0,) and forest.weight_value.shape == (n_weights,)
    assert forest.weight_index.shape == (n_weights,)


@pytest.mark.parametrize("drop", [1, -1])
def test_stored_ids_of_a_wrong_length_are_refused_on_unpickling(rng, drop):
    trees = [reference.random_tree(rng, 3, 2, 5, density=0.7) for _ in range(3)]
    trees.append(_dense_tree(rng, n_features=3))
    forest = ObliqueForest.from_trees(trees)
    state = forest.__getstate__()
    stored = state["weight_index"]
    state["weight_index"] = (
        stored[:-1] if drop > 0 else np.concatenate([stored, [0]]).astype(np.int32)
    )
    with pytest.raises(ValueError, match="weight_index has .* ids"):
        ObliqueForest.__new__(ObliqueForest).__setstate__(state)
