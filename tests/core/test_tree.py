"""The ObliqueTree / ObliqueForest containers: invariants, folding, persistence."""

import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest

from obliquetrees._core import traversal
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import (
    FORMAT_VERSION,
    ObliqueTree,
    fold_standardization,
    standardization,
)
from tests import reference
from tests._helpers import TREE_ARRAYS

ROOT = Path(__file__).resolve().parents[2]


def assert_tree_equal(a, b):
    """Every array and scalar of two trees is identical."""
    for name in TREE_ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.n_features == b.n_features


def _stump(**overrides):
    args = dict(
        children_left=[1, -1, -1],
        children_right=[2, -1, -1],
        weight_indptr=[0, 2, 2, 2],
        weight_index=[0, 2],
        weight_value=[1.0, -2.0],
        bias=[0.5, 0, 0],
        value=[[0.5, 0.5], [1, 0], [0, 1]],
        n_node_samples=[10, 6, 4],
        n_features=3,
    )
    args.update(overrides)
    return ObliqueTree(**args)


def test_properties_and_dense_weights():
    tree = _stump()
    tree.check_invariants()
    assert (tree.node_count, tree.n_leaves, tree.max_depth, tree.n_outputs) == (3, 2, 1, 2)
    np.testing.assert_array_equal(tree.depth, [0, 1, 1])
    np.testing.assert_array_equal(tree.dense_weights(), [[1, 0, -2], [0, 0, 0], [0, 0, 0]])
    rebuilt = ObliqueTree.from_dense(
        tree.children_left,
        tree.children_right,
        tree.dense_weights(),
        tree.bias,
        tree.value,
        tree.n_node_samples,
    )
    assert_tree_equal(rebuilt, tree)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(children_right=[2, 0, -1]), "exactly one child"),
        (dict(children_left=[1, -1, -1], children_right=[1, -1, -1]), "exactly one parent"),
        (dict(children_left=[3, -1, -1]), r"\[1, n_nodes\)"),
        (dict(weight_indptr=[0, 1, 2, 2]), "Leaves must not store"),
        (dict(weight_index=[0, 3]), "n_features"),
        (dict(bias=[np.nan, 0, 0]), "bias contains NaN"),
        (dict(value=[[0.5, 0.5], [1, 0]]), "value has 2 rows"),
        (dict(weight_indptr=[0, 2, 2]), "n_nodes \\+ 1"),
    ],
)
def test_invariants_catch_broken_trees(overrides, message):
    with pytest.raises(ValueError, match=message):
        _stump(**overrides).check_invariants()


def test_fold_standardization_routes_raw_inputs_like_standardised_ones(rng):
    tree = reference.random_tree(rng, 6, 2, 6, density=0.7)
    X = rng.normal(3.0, 5.0, size=(400, 6))
    mean, scale = X.mean(axis=0), X.std(axis=0)
    folded = fold_standardization(tree, mean, scale)
    folded.check_invariants()
    margins_raw = folded.dense_weights() @ X.T + folded.bias[:, None]
    margins_std = tree.dense_weights() @ ((X - mean) / scale).T + tree.bias[:, None]
    internal = ~tree.is_leaf
    np.testing.assert_allclose(margins_raw[internal], margins_std[internal], atol=1e-9)


def test_random_forest_views_are_zero_copy_and_consistent(rng):
    trees = [reference.random_tree(rng, 4, 3, 5) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    for original, view in zip(trees, forest.trees, strict=True):
        view.check_invariants()
        assert_tree_equal(original, view)
        assert np.shares_memory(view.value, forest.value)
    single = ObliqueForest.from_trees(trees[:1])
    assert single.value is trees[0].value  # one tree is wrapped, not copied


def test_forest_rejects_mismatched_trees(rng):
    with pytest.raises(ValueError, match="n_features"):
        ObliqueForest.from_trees([reference.random_tree(rng, 3), reference.random_tree(rng, 4)])
    with pytest.raises(ValueError, match="at least one tree"):
        ObliqueForest.from_trees([])


def test_pickle_round_trip(rng):
    trees = [reference.random_tree(rng, 5, 2, 6) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    assert len(forest.trees) == 3  # builds the cached views, which must not be pickled
    clone = pickle.loads(pickle.dumps(forest))
    assert clone._trees is None
    for a, b in zip(forest.trees, clone.trees, strict=True):
        assert_tree_equal(a, b)
    assert_tree_equal(pickle.loads(pickle.dumps(trees[0])), trees[0])


def test_memmap_reload_predicts_identically(rng, tmp_path):
    trees = [reference.random_tree(rng, 5, 2, 6) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    X = rng.normal(size=(50, 5))
    joblib.dump(forest, tmp_path / "forest.joblib")
    loaded = joblib.load(tmp_path / "forest.joblib", mmap_mode="r")
    assert isinstance(loaded.value, np.memmap) and not loaded.value.flags.writeable
    np.testing.assert_array_equal(
        traversal.predict_value(loaded, X), traversal.predict_value(forest, X)
    )


@pytest.mark.parametrize("container", ["tree", "forest"])
def test_unknown_format_version_is_a_clear_error(rng, container):
    tree = reference.random_tree(rng, 3)
    obj = tree if container == "tree" else ObliqueForest.from_trees([tree, tree])
    obj.format_version = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match="container format version"):
        pickle.loads(pickle.dumps(obj))


def test_standardization_is_weighted_and_keeps_tiny_units(rng):
    X = rng.normal(size=(200, 4))
    X[:, 1] = 7.0  # constant
    X[:, 2] *= 1e-30  # tiny units, not constant
    w = rng.uniform(0.1, 2.0, 200)
    mean, scale = standardization(X, w)
    np.testing.assert_allclose(mean, np.average(X, axis=0, weights=w), rtol=1e-12, atol=1e-300)
    expected = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w))
    assert scale[1] == np.inf  # constant: standardised to 0, no weight
    np.testing.assert_allclose(scale[[0, 2, 3]], expected[[0, 2, 3]], rtol=1e-12)
    assert 1e-31 < scale[2] < 1e-29


def test_consuming_pack_releases_the_input_trees_only(rng):
    trees = [reference.random_tree(rng, 4, 2, 5) for _ in range(3)]
    expected = ObliqueForest.from_trees(trees)
    wrappers = [
        ObliqueTree(
            t.children_left,
            t.children_right,
            t.weight_indptr,
            t.weight_index,
            t.weight_value,
            t.bias,
            t.value,
            t.n_node_samples,
            n_features=t.n_features,
        )
        for t in trees
    ]
    packed = ObliqueForest.from_trees(wrappers, consume=True)
    assert all(w.value is None for w in wrappers)
    for a, b in zip(packed.trees, expected.trees, strict=True):
        assert_tree_equal(a, b)
    for original in trees:  # the arrays themselves are untouched
        original.check_invariants()


_PACK_PEAK_SCRIPT = """
import resource, sys
import numpy as np
from obliquetrees._core.forest import ObliqueForest
from tests import reference
# Mimic a training process: freeing a large temporary raises glibc's mmap
# threshold, so the trees' arrays live on the heap rather than in their own
# mmaps; arrays that outlive the trees keep the trees' freed memory from
# sitting at the top of the heap, where glibc would trim it anyway.
np.ones(1 << 20).sum()
rng = np.random.default_rng(0)
trees, pins = [], []
for _ in range(80):
    trees.append(reference.random_tree(rng, 16, 26, max_depth=11, split_prob=0.9))
    pins.append(np.ones(8192))
forest_mb = sum(a.nbytes for t in trees for a in (t.value, t.bias, t.weight_value)) / 2**20
def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before, peak_before = resident_mb(), peak_mb()
ObliqueForest.from_trees(trees, consume=True)
print(forest_mb, resident_mb() - before, peak_mb() - peak_before)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="/proc/self/statm, ru_maxrss in KiB and glibc's malloc_trim are Linux specifics",
)
def test_consuming_pack_never_holds_two_copies_of_the_forest():
    # the fresh process's peak RSS may grow by a fraction of the forest while
    # packing (one array kind's last few MiB in flight), never by a second copy
    out = subprocess.run(
        [sys.executable, "-c", _PACK_PEAK_SCRIPT],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.split()
    forest_mb, resident_growth_mb, peak_growth_mb = map(float, out)
    assert forest_mb > 20
    # resident after packing: the consumed trees' memory went back to the OS
    assert resident_growth_mb < 0.4 * forest_mb, (forest_mb, resident_growth_mb)
    # peak while packing (an upper bound check: the peak may predate packing)
    assert peak_growth_mb < 0.4 * forest_mb, (forest_mb, peak_growth_mb)
