"""The decision-machine matrix form: template matrix and leaf selection against references."""

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.machine import machine_of
from tests.reference import machine_select_leaves, machine_template_matrix, random_tree

K = pytest.importorskip("obliquetrees._core._machine_kernels")


def _forest(rng, n_trees=3, n_features=5, n_outputs=3, max_depth=5):
    trees = [random_tree(rng, n_features, n_outputs, max_depth=max_depth) for _ in range(n_trees)]
    return ObliqueForest.from_trees(trees)


@pytest.mark.parametrize("seed", range(5))
def test_template_matrix_matches_recursive_reference(seed):
    rng = np.random.default_rng(seed)
    forest = _forest(rng, n_trees=4)
    dm = machine_of(forest, cache=False)
    for k, tree in enumerate(forest.trees):
        ref = machine_template_matrix(tree.children_left, tree.children_right)
        a, b = dm.leaf_offset[k], dm.leaf_offset[k + 1]
        c, d = dm.split_offset[k], dm.split_offset[k + 1]
        block = dm.B[a:b].toarray()
        # rows are stored left to right; the reference lists leaves by node id
        ref = ref[np.searchsorted(np.flatnonzero(tree.is_leaf), dm.leaf_node[a:b])]
        np.testing.assert_array_equal(block[:, c:d], ref)
        # block diagonal: no entry outside the tree's own columns
        assert np.count_nonzero(block) == np.count_nonzero(ref)
        # paper sect. 2.2: ||B_l||_1 is the leaf depth; every column has a +1 and a -1
        np.testing.assert_array_equal(dm.leaf_norm[a:b], tree.depth[dm.leaf_node[a:b]])
        if d > c:
            assert np.all((ref == 1).any(axis=0)) and np.all((ref == -1).any(axis=0))
            assert np.trace(ref @ ref.T) == tree.depth[tree.is_leaf].sum()


@pytest.mark.parametrize("seed", range(5))
def test_select_leaves_matches_argmax_reference(seed):
    rng = np.random.default_rng(seed)
    forest = _forest(rng)
    dm = machine_of(forest, cache=False)
    X = rng.normal(size=(300, forest.n_features))
    H = dm.margins(X) > 0
    np.testing.assert_array_equal(dm._signs(X, K), H)
    out = np.empty((X.shape[0], dm.n_trees), dtype=np.int64)
    tindptr, tindex, tright, tskip = dm._template_arrays()
    K.select_leaves(H, tindptr, tindex, tright, tskip, dm.leaf_offset, out)
    ref = machine_select_leaves(np.where(H, 1.0, -1.0), dm.B.toarray(), dm.leaf_offset)
    np.testing.assert_array_equal(out, ref)
    total = np.zeros((X.shape[0], dm.n_outputs))
    K.select_leaves_value(H, tindptr, tindex, tright, tskip, dm.leaf_offset, dm.V, total)
    A = dm.margins(X)
    if sp.issparse(dm.S):
        np.testing.assert_allclose(A, (dm.S @ X.T).T + dm.bias, rtol=1e-13, atol=1e-13)
    expected = np.zeros_like(total)
    for t in range(dm.n_trees):
        expected += dm.V[ref[:, t]]
    np.testing.assert_array_equal(total, expected)
