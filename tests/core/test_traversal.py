"""Traversal kernels against the plain-numpy references in tests/reference.py."""

import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from obliquetrees._core import traversal, traversal_numpy
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import ObliqueTree
from tests import reference


def _random_forest(seed, n_trees, n_features, n_outputs, max_depth, value_zeros=0.0):
    rng = np.random.default_rng(seed)
    trees = [
        reference.random_tree(
            rng, n_features, n_outputs, max_depth, density=rng.random(), value_zeros=value_zeros
        )
        for _ in range(n_trees)
    ]
    return trees, ObliqueForest.from_trees(trees)


def _layouts(X):
    """The input layouts the kernels accept: dtypes, orders, read-only, CSR."""
    readonly = X.copy()
    readonly.flags.writeable = False
    return {
        "C": X,
        "F": np.asfortranarray(X),
        "readonly": readonly,
        "strided": np.repeat(X, 2, axis=1)[:, ::2],
        "csr": sp.csr_matrix(X),
    }


forest_params = dict(
    seed=st.integers(0, 2**31 - 1),
    n_trees=st.integers(1, 4),
    n_features=st.integers(1, 12),
    n_outputs=st.integers(1, 6),
    max_depth=st.integers(0, 7),
    n_samples=st.integers(0, 150),
    dtype=st.sampled_from([np.float32, np.float64]),
    # leaf value rows with one nonzero entry are stored inline, others in a table
    value_zeros=st.sampled_from([0.0, 0.6, 0.9]),
)


@settings(max_examples=40, deadline=None)
@given(**forest_params)
def test_kernels_match_reference(
    seed, n_trees, n_features, n_outputs, max_depth, n_samples, dtype, value_zeros
):
    trees, forest = _random_forest(seed, n_trees, n_features, n_outputs, max_depth, value_zeros)
    rng = np.random.default_rng(seed + 1)
    X = rng.normal(size=(n_samples, n_features)).astype(dtype)
    X[rng.random(X.shape) < 0.3] = 0  # exact zeros exercise CSR and ties
    expected_leaves = reference.apply(trees, X)
    expected_value = reference.predict_value(trees, X)
    expected_path = reference.decision_path(trees, X)
    for name, Xl in _layouts(X).items():
        np.testing.assert_array_equal(traversal.apply(forest, Xl), expected_leaves, err_msg=name)
        np.testing.assert_array_equal(
            traversal.predict_value(forest, Xl), expected_value, err_msg=name
        )
        path = traversal.decision_path(forest, Xl)
        np.testing.assert_array_equal(path.toarray(), expected_path, err_msg=name)
        if name != "csr":  # the numpy walk takes dense input only
            np.testing.assert_array_equal(
                traversal_numpy.apply(forest, Xl), expected_leaves, err_msg=name
            )
            np.testing.assert_array_equal(
                traversal_numpy.predict_value(forest, Xl), expected_value, err_msg=name
            )


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_samples=st.integers(1, 700))
def test_results_identical_for_any_thread_count(seed, n_samples):
    _, forest = _random_forest(seed, 5, 8, 3, 8)
    X = np.random.default_rng(seed).normal(size=(n_samples, 8))
    for kernel in (traversal.apply, traversal.predict_value):
        one = kernel(forest, X, n_threads=1)
        two = kernel(forest, X, n_threads=2)
        assert one.tobytes() == two.tobytes()
    path1 = traversal.decision_path(forest, X, n_threads=1)
    path2 = traversal.decision_path(forest, X, n_threads=2)
    assert (path1 != path2).nnz == 0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_samples=st.integers(0, 300), cut=st.integers(1, 4))
def test_a_forest_summed_in_parts_gives_the_whole_sum_bit_for_bit(seed, n_samples, cut):
    # the dask prediction of a model too large for a worker sums it group of trees by group
    trees, forest = _random_forest(seed, 5, 6, 3, 6)
    X = np.random.default_rng(seed).normal(size=(n_samples, 6))
    first = traversal.predict_value(ObliqueForest.from_trees(trees[:cut]), X)
    kept = first.copy()
    whole = traversal.predict_value(ObliqueForest.from_trees(trees[cut:]), X, initial=first)
    assert whole.tobytes() == traversal.predict_value(forest, X).tobytes()
    np.testing.assert_array_equal(whole, reference.predict_value(trees, X))
    assert first.tobytes() == kept.tobytes()  # initial is not written to
    with pytest.raises(ValueError, match="initial must be float64 of shape"):
        traversal.predict_value(forest, X, initial=first[:, :2])


def test_ties_go_left():
    # root: x0 - 0.5 > 0 goes right; x0 == 0.5 exactly is a tie
    tree = ObliqueTree(
        [1, -1, -1],
        [2, -1, -1],
        [0, 1, 1, 1],
        [0],
        [1.0],
        [-0.5, 0, 0],
        [[0.0], [1.0], [2.0]],
        [3, 2, 1],
        n_features=1,
    )
    forest = ObliqueForest.from_trees([tree])
    X = np.array([[0.5], [np.nextafter(0.5, 1)], [np.nextafter(0.5, 0)]])
    np.testing.assert_array_equal(traversal.apply(forest, X)[:, 0], [1, 2, 1])
    np.testing.assert_array_equal(traversal_numpy.apply(forest, X)[:, 0], [1, 2, 1])


def test_numpy_walk_only_for_small_dense_batches_before_the_kernels_load():
    """In this process the kernels have run, so the numpy walk is never chosen;
    its size rule is checked with the kernels reported as not loaded."""
    _, forest = _random_forest(0, 3, 4, 2, 5)
    traversal.apply(forest, np.zeros((1, 4)))
    assert traversal_numpy.kernels_loaded()
    assert not traversal_numpy.use_for_batch(forest, np.zeros((1, 4)))


def test_kernels_being_imported_by_another_thread_are_not_loaded(monkeypatch):
    # what sys.modules holds while another thread runs the module's first lines
    partial = types.ModuleType("obliquetrees._core.traversal")
    monkeypatch.setitem(sys.modules, "obliquetrees._core.traversal", partial)
    assert not traversal_numpy.kernels_loaded()


def test_numpy_walk_size_rule(monkeypatch):
    monkeypatch.setattr(traversal_numpy, "kernels_loaded", lambda: False)
    # a fresh process's budget: numpy walks of earlier tests in this one spent some
    monkeypatch.setattr(traversal_numpy, "_spent_seconds", 0.0)
    _, forest = _random_forest(0, 3, 4, 2, 5)
    assert traversal_numpy.use_for_batch(forest, np.zeros((100, 4)))
    assert not traversal_numpy.use_for_batch(forest, sp.csr_matrix(np.zeros((100, 4))))
    rows = traversal_numpy.MAX_WORK  # at least one unit of work per row
    assert not traversal_numpy.use_for_batch(forest, np.zeros((rows + 1, 4)))
    # once the process's numpy walks have taken their budget, batches go to the kernels
    monkeypatch.setattr(traversal_numpy, "_spent_seconds", traversal_numpy.RENT_SECONDS + 1)
    assert not traversal_numpy.use_for_batch(forest, np.zeros((100, 4)))


def test_csr_with_many_features_uses_bounded_buffer():
    rng = np.random.default_rng(0)
    n_features = 300_000  # one CSR block row fits the buffer; rows are processed one by one
    tree = reference.random_tree(rng, 5, 2, 4, density=1.0)
    tree = ObliqueTree(
        tree.children_left,
        tree.children_right,
        tree.weight_indptr,
        tree.weight_index * 50_000,
        tree.weight_value,
        tree.bias,
        tree.value,
        tree.n_node_samples,
        n_features=n_features,
    )
    X = sp.random(20, n_features, density=1e-4, format="lil", random_state=0)
    X[:, 50_000] = 1.0
    X = X.tocsr()
    forest = ObliqueForest.from_trees([tree])
    np.testing.assert_array_equal(traversal.apply(forest, X), reference.apply([tree], X))


@pytest.mark.parametrize("n_samples", [0, 1, 65])
def test_output_shapes(n_samples):
    _, forest = _random_forest(0, 3, 4, 2, 5)
    X = np.zeros((n_samples, 4))
    assert traversal.apply(forest, X).shape == (n_samples, 3)
    assert traversal.predict_value(forest, X).shape == (n_samples, 2)
    assert traversal.decision_path(forest, X).shape == (n_samples, forest.node_offset[-1])


def test_single_nonzero_leaf_values_are_stored_inline():
    """Both leaf paths of the routing layout are taken, and agree with the reference."""
    trees, forest = _random_forest(3, 4, 5, 6, 6, value_zeros=0.8)
    _, nodes, _, _, _, leaf_value = forest.routing_arrays()
    leaves = nodes[nodes["left"] == -1]
    inline = leaves["right"] >= 0
    assert inline.any() and not inline.all()
    rows = leaf_value[leaves["feature"][inline]]
    np.testing.assert_array_equal((rows != 0).sum(axis=1), 1)
    np.testing.assert_array_equal(rows[np.arange(rows.shape[0]), leaves["right"][inline]],
                                  leaves["weight"][inline])  # fmt: skip
    X = np.random.default_rng(0).normal(size=(300, 5))
    np.testing.assert_array_equal(
        traversal.predict_value(forest, X, n_threads=2), reference.predict_value(trees, X)
    )


def _drop_full_rows(tree):
    """``tree`` without a weight on its last feature, so that no row is full."""
    dense = tree.dense_weights()
    dense[:, -1] = 0.0
    return ObliqueTree.from_dense(
        tree.children_left, tree.children_right, dense, tree.bias, tree.value,
        tree.n_node_samples, depth=tree.depth,
    )  # fmt: skip


def test_routing_reads_the_containers_weights_without_a_copy(tmp_path):
    """The layout adds no memory per weight; a read-only (memory-mapped) forest gets a copy."""
    import joblib

    trees, forest = _random_forest(4, 3, 6, 2, 7)
    _, _, _, extra_index, (index, values), _ = forest.routing_arrays()
    assert values is forest.weight_value
    # this forest has full rows, whose ids are implicit: the kernels read the
    # stored ids, then 0 .. n_features - 1 for the full rows
    stored = vars(forest)["weight_index"]
    assert stored.shape[0] < values.shape[0]
    ids = np.concatenate([stored, np.arange(6)])
    np.testing.assert_array_equal(index, ids)
    # without full rows the ids are explicit and read in place
    sparse_forest = ObliqueForest.from_trees([_drop_full_rows(t) for t in trees])
    _, _, extra_start, extra_index, (index, values), _ = sparse_forest.routing_arrays()
    assert index is vars(sparse_forest)["weight_index"] and extra_index is extra_start
    joblib.dump(forest, tmp_path / "forest.joblib")
    mapped = joblib.load(tmp_path / "forest.joblib", mmap_mode="r")
    assert not mapped.weight_value.flags.writeable
    _, _, _, _, (index, values), _ = mapped.routing_arrays()
    assert type(values) is np.ndarray and values.flags.writeable
    np.testing.assert_array_equal(values, forest.weight_value)
    np.testing.assert_array_equal(index, ids)
    X = np.random.default_rng(1).normal(size=(200, 6))
    np.testing.assert_array_equal(
        traversal.predict_value(mapped, X), reference.predict_value(trees, X)
    )
