"""CO2's grown tree stored without per-weight temporaries (obliquetrees/co2/training.py).

:func:`~obliquetrees.co2.training.stored_tree` reads the growth table once in a
kernel (:func:`~obliquetrees.co2._grow.fold_split_weights`); these
tests pin it to the numpy reference it replaced, ``fold_standardization`` of
``ObliqueTree.from_dense``, bit for bit: same arrays, same dtypes, same
missing-value form.
"""

import numpy as np
import pytest

co2 = pytest.importorskip("obliquetrees.co2.training")
from obliquetrees._core.tree import (  # noqa: E402
    ARRAY_NAMES,
    ObliqueTree,
    fold_standardization,
)


def _reference(left, right, weights, bias, value, nns, depth, mean, scale):
    tree = ObliqueTree.from_dense(left, right, weights, bias, value, nns, depth)
    return fold_standardization(tree, mean, scale)


def _assert_same_bits(got, expected):
    for name in (*ARRAY_NAMES, "missing_fill"):
        a, b = got.__dict__.get(name), expected.__dict__.get(name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert a.tobytes() == b.tobytes(), name  # bits: signed zeros too
    assert got.n_features == expected.n_features


def _table(rng, n_nodes=61, p=9, zero_mean=False):
    """A grown table's arrays: leaves with zero rows, splits with some zero weights."""
    left = np.full(n_nodes, -1, dtype=np.int64)
    right = np.full(n_nodes, -1, dtype=np.int64)
    n_split = (n_nodes - 1) // 2
    left[:n_split] = np.arange(1, 2 * n_split, 2)
    right[:n_split] = left[:n_split] + 1
    weights = rng.normal(size=(n_nodes, p)) * rng.uniform(0.1, 10.0, size=p)
    weights[rng.random(weights.shape) < 0.3] = 0.0
    weights[rng.random(weights.shape) < 0.05] = -0.0
    weights[n_split:] = 0.0  # the grower never writes a leaf's row
    bias = np.where(left >= 0, rng.normal(size=n_nodes), 0.0)
    value = rng.random((n_nodes, 3))
    nns = rng.integers(1, 50, size=n_nodes).astype(np.float64)
    depth = np.zeros(n_nodes, dtype=np.int64)
    if zero_mean:  # the sparse fit's mean: products of negative weights are -0.0
        mean = np.zeros(p)
    else:
        mean = rng.normal(size=p) * 100.0
    scale = rng.uniform(0.01, 100.0, size=p)
    scale[2] = np.inf  # a constant feature: its weights are dropped
    return left, right, weights, bias, value, nns, depth, mean, scale


@pytest.mark.parametrize("zero_mean", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_stored_tree_is_the_folded_dense_tree(seed, zero_mean):
    arrays = _table(np.random.default_rng(seed), zero_mean=zero_mean)
    got = co2.stored_tree(*arrays)
    expected = _reference(*arrays)
    _assert_same_bits(got, expected)
    # both forms of the missing-value terms are exercised
    assert (got.missing_fill is None) == zero_mean


def test_stored_tree_reads_a_view_of_a_larger_table():
    # the grower returns its split weights as a view of a table with spare rows
    rng = np.random.default_rng(7)
    left, right, weights, *rest = _table(rng)
    table = np.vstack([weights, rng.normal(size=(40, weights.shape[1]))])
    got = co2.stored_tree(left, right, table[: weights.shape[0]], *rest)
    _assert_same_bits(got, _reference(left, right, weights, *rest))


def test_stored_tree_of_a_single_leaf():
    rng = np.random.default_rng(3)
    arrays = _table(rng, n_nodes=1)
    _assert_same_bits(co2.stored_tree(*arrays), _reference(*arrays))


def test_stored_tree_refuses_overflowing_weights_as_the_reference():
    arrays = list(_table(np.random.default_rng(1)))
    arrays[8] = arrays[8].copy()
    arrays[8][0] = 1e-310  # a weight / scale overflows
    arrays[2][0, 0] = 5.0
    with pytest.raises(ValueError, match="overflow float64") as expected:
        with np.errstate(over="ignore"):
            _reference(*arrays)
    with pytest.raises(ValueError, match="overflow float64") as got:
        co2.stored_tree(*arrays)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("sparse", [False, True])
def test_grown_trees_are_stored_as_the_reference_stores_them(sparse):
    import scipy.sparse as sp

    from obliquetrees._core.tree import standardization
    from obliquetrees.utils.validation import as_training_csr
    from tests.co2.test_training import _co2_params, weight_table

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 6)) * rng.uniform(0.1, 10.0, size=6) + rng.normal(size=6)
    X[:, 4] = 1.5  # constant
    if sparse:
        X[rng.random(X.shape) < 0.6] = 0.0
    y = np.argmax(X @ rng.normal(size=(6, 3)), axis=1).astype(np.int64)
    mean, scale = standardization(X)
    if sparse:
        source = co2.scaled_csr(as_training_csr(sp.csr_matrix(X)), scale)
        mean = np.zeros_like(mean)
    else:
        source = (X, mean, scale)
    left, right, weights, bias, value, nns, depth, _ = co2.grow_tree(
        source, y, co2.bootstrap_counts(300, 5), 3, 11, _co2_params()
    )
    assert left.shape[0] > 15  # a real tree
    # CSR input keeps the weights as CSR: stored as the reference stores their table
    table = weight_table(weights, X.shape[1])
    assert isinstance(weights, tuple) == sparse
    arrays = (left, right, weights, bias, value, nns, depth, mean, scale)
    reference = _reference(left, right, table, bias, value, nns, depth, mean, scale)
    _assert_same_bits(co2.stored_tree(*arrays), reference)


def test_the_growth_tables_capacity_changes_no_result():
    from tests.co2.test_training import _co2_params

    rng = np.random.default_rng(8)
    X = rng.normal(size=(400, 5))
    y = np.argmax(X @ rng.normal(size=(5, 3)) + rng.normal(size=(400, 3)), axis=1)
    w = co2.bootstrap_counts(400, 2)
    grown = [
        co2.grow_tree(X, y.astype(np.int64), w, 3, 4, _co2_params(), capacity)
        for capacity in (0, 1, 70, 100_000)  # default, tiny (grows), just above 64, ample
    ]
    assert grown[0][0].shape[0] > 100  # grown past the first tables
    for other in grown[1:]:
        for a, b in zip(grown[0], other, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_fit_forest_sizes_the_tables_after_the_trees_grown_so_far(monkeypatch):
    from tests.co2.test_training import _co2_params

    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(np.int64)
    capacities = []
    grow = co2.grow_tree

    def spy(*args, **kwargs):
        capacities.append(args[-1])
        return grow(*args, **kwargs)

    monkeypatch.setattr(co2, "grow_tree", spy)
    trees, _ = co2.fit_co2(
        X, y, np.ones(X.shape[0]), _co2_params(), [1, 2, 3], n_classes=2, n_jobs=1
    )
    sizes = [t.node_count for t in trees]
    assert capacities == [0, sizes[0] + sizes[0] // 8, max(sizes[:2]) + max(sizes[:2]) // 8]
