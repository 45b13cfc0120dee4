"""CO2's dense input standardised as it is read (obliquetrees/co2/_node.py, co2.py).

The growth kernels read ``(X[r, j] - mean[j]) / scale[j]`` from the caller's ``X``
instead of a standardised copy: these tests pin that the values and whole
trees are those of the copy, bit for bit, and that no copy is made.
"""

import numpy as np
import pytest

N = pytest.importorskip("obliquetrees.co2._node")
co2 = pytest.importorskip("obliquetrees.co2.training")
from obliquetrees._core.tree import standardization  # noqa: E402
from tests.co2.test_training import _co2_params  # noqa: E402


def _raw(rng, m=300, p=7):
    """Raw features on mixed scales and offsets, one constant (infinite scale)."""
    X = rng.normal(size=(m, p)) * rng.uniform(0.01, 100.0, size=p) + rng.normal(size=p) * 50
    X[:, 3] = 2.5
    return np.ascontiguousarray(X)


def _classes(rng, X, n_classes=3):
    W = rng.normal(size=(X.shape[1], n_classes))
    Xs = (X - X.mean(axis=0)) / (X.std(axis=0) + 1.0)
    return np.argmax(Xs @ W + 0.3 * rng.normal(size=(X.shape[0], n_classes)), axis=1)


def _params(**kw):
    return _co2_params(**{"max_features": 3, "batch_size": 64, "max_cccp_iter": 4, **kw})


@pytest.mark.parametrize("seed", range(3))
def test_standardized_rows_are_the_copys_bits(seed):
    # numpy reference: the standardised copy fit_co2 used to make
    rng = np.random.default_rng(seed)
    X = _raw(rng)
    mean, scale = standardization(X)
    X[rng.random(X.shape) < 0.05] = np.nan  # NaN stays NaN
    assert np.isinf(scale[3])  # the constant feature: standardised to 0
    copy = np.subtract(X, mean, order="C")
    copy /= scale
    source = N.dense_source(X, mean, scale)
    out = np.empty(X.shape[1])
    block = np.empty((3, X.shape[1]))
    for r in rng.integers(0, X.shape[0], size=40):
        N.standardized_row(source, r, out)
        np.testing.assert_array_equal(out, copy[r])  # NaN in the same places
        N.standardized_row_at(source, r, block, 1)
        np.testing.assert_array_equal(block[1], copy[r])
        j = int(rng.integers(0, X.shape[1]))
        np.testing.assert_array_equal(N.standardized(source, r, j), copy[r, j])


def _tree_arrays_equal(a, b):
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("max_cccp_samples", [None, 60])
@pytest.mark.parametrize("targets", [False, True])
def test_tree_grown_on_raw_rows_is_the_copys(max_cccp_samples, targets):
    # whole trees: block nodes (gather, centring, partition) and sampled nodes (the
    # sample and its mean, sides, axis-aligned fallback with min_samples_leaf), classes and targets
    rng = np.random.default_rng(4)
    X = _raw(rng, m=400)
    if targets:
        y = np.ascontiguousarray(X[:, :2] @ rng.normal(size=(2, 2)) + rng.normal(size=(400, 2)))
        y = (y - y.mean(axis=0)) / y.std()
        n_out = 2
    else:
        y = _classes(rng, X).astype(np.int64)
        n_out = 3
    mean, scale = standardization(X)
    copy = np.ascontiguousarray((X - mean) / scale)
    row_weight = co2.bootstrap_counts(400, 7)
    for leaf in (1, 20):
        params = _params(max_cccp_samples=max_cccp_samples, min_samples_leaf=leaf)
        expected = co2.grow_tree(copy, y, row_weight, n_out, 3, params)
        got = co2.grow_tree((X, mean, scale), y, row_weight, n_out, 3, params)
        _tree_arrays_equal(got, expected)
        assert expected[0].shape[0] > 15  # a real tree
        if leaf == 20 and max_cccp_samples is None and not targets:
            assert expected[-1][2] > 0  # axis-aligned fallbacks were taken


def test_fit_forest_reads_the_callers_x_without_a_copy(monkeypatch):
    rng = np.random.default_rng(1)
    X = _raw(rng, m=200)
    y = _classes(rng, X)
    seen = []
    grow = co2._grow_tree

    def spy(source, *args):
        seen.append(source[0])
        return grow(source, *args)

    monkeypatch.setattr(co2, "_grow_tree", spy)
    trees, _ = co2.fit_co2(X, y, np.ones(X.shape[0]), _params(), [1, 2], n_classes=3)
    assert len(seen) == 2 and all(s is X for s in seen)  # the caller's array itself
    # another layout is copied once, to C order, shared by the trees
    seen.clear()
    co2.fit_co2(np.asfortranarray(X), y, np.ones(X.shape[0]), _params(), [1, 2], n_classes=3)
    assert seen[0] is seen[1] and seen[0].flags.c_contiguous
    np.testing.assert_array_equal(seen[0], X)


def test_dense_source_rejects_bad_arrays():
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="2-D float64"):
        N.dense_source(X.astype(np.float32))
    with pytest.raises(ValueError, match="2-D float64"):
        N.dense_source(np.zeros(3))
    with pytest.raises(ValueError, match="C-contiguous"):
        N.dense_source(np.asfortranarray(X))
    with pytest.raises(ValueError, match="mean must be"):
        N.dense_source(X, np.zeros(2), np.ones(3))
    with pytest.raises(ValueError, match="scale must be"):
        N.dense_source(X, np.zeros(3), np.ones(3, dtype=np.float32))
    source = N.dense_source(X)
    assert source[0] is X
    np.testing.assert_array_equal(source[1], 0.0)
    np.testing.assert_array_equal(source[2], 1.0)


def _ref_partition(X, w, b, rows, start, end):
    """numpy reference of the dense partition: rows[lo]'s side from z = b + sum w[j] x[j]."""
    rows = rows.copy()
    lo, hi = start, end - 1
    while lo <= hi:
        z = b
        for j in range(w.shape[0]):  # the kernel's order of summation
            z += w[j] * X[rows[lo], j]
        if z > 0.0:
            rows[lo], rows[hi] = rows[hi], rows[lo]
            hi -= 1
        else:
            lo += 1
    return lo - start, rows


@pytest.mark.parametrize("seed", range(4))
def test_partition_of_kept_rows_matches_reference(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 6))
    rows = rng.permutation(200).astype(np.int64)
    start, end = 30, 170
    w = rng.normal(size=6)
    w[rng.random(6) < 0.3] = 0.0
    b = float(rng.normal() * 0.3)
    kept = np.ascontiguousarray(X[rows[start:end]])  # the node's rows, in their order
    expected_left, expected_rows = _ref_partition(X, w, b, rows, start, end)
    got_rows = rows.copy()
    assert N.partition_kept(kept, w, b, got_rows, start, end) == expected_left
    np.testing.assert_array_equal(got_rows, expected_rows)
    assert 0 < expected_left < end - start  # both sides taken


def test_block_above_the_kept_size_is_the_copys_tree():
    # a root block of more than MAX_KEPT_BLOCK entries standardises its rows again as it
    # partitions them; its children (below the size) keep them: the same tree either way
    rng = np.random.default_rng(9)
    p = 40
    m = N.MAX_KEPT_BLOCK // p + 500
    X = _raw(rng, m=m, p=p)
    y = _classes(rng, X).astype(np.int64)
    mean, scale = standardization(X)
    copy = np.ascontiguousarray((X - mean) / scale)
    row_weight = np.ones(m)
    params = _params(max_depth=2, max_cccp_iter=2, batch_size=1024)
    expected = co2.grow_tree(copy, y, row_weight, 3, 5, params)
    got = co2.grow_tree((X, mean, scale), y, row_weight, 3, 5, params)
    _tree_arrays_equal(got, expected)
    left, right, weights, bias = got[:4]
    goes = copy @ weights[0] + bias[0] > 0  # the stored root split is the partition
    assert got[5][left[0]] == np.count_nonzero(~goes) and got[5][right[0]] == goes.sum()
    assert left[left[0]] >= 0  # the children (kept blocks) were split too
