"""Presorted rows in CO2's growth (``column_order``).

The kernels against plain-numpy references on random inputs with many ties:
the column order, the tree's rows sorted by every feature, their stable
partition down the tree, and the order a node's (or a sampled node's)
axis-aligned search reads from them. Then whole trees: on inputs without
ties every sort of a node's values is the same, so a growth on presorted
rows must equal, bit for bit, one that sorts in every node (dense and CSR,
classes and targets, with the out-of-bag test and monotonic constraints).
A sparse node without presorted rows scans each column from its stored entries,
the rows without one in a single step
(:func:`~obliquetrees._training.axis_split.scan_column`): its scan against a
numpy reference, its search against the dense block's, and its growth against
presorted rows on zero-heavy inputs (two classes, whole weights: exact sums).
"""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from obliquetrees._core.tree import standardization
from obliquetrees._training.axis_split import (
    FEATURE_THRESHOLD,
    axis_scan_start,
    column_presort,
    node_order,
    ranked_axis_split,
    scan_column,
)
from obliquetrees.co2 import _grow as G
from obliquetrees.co2 import _node as N
from obliquetrees.co2 import training as co2
from obliquetrees.co2._sparse_kernels import transpose
from tests.co2.test_training import _co2_params


@numba.njit
def _presorted(column_order, rows):
    return G.presorted_rows(column_order, rows)


@numba.njit
def _partition(presorted, rows, start, middle, end):
    G.partition_presorted(presorted, rows, start, middle, end)


@numba.njit
def _node_order(presorted, rows, start, end, vals, f):
    node = N.node_presorted(presorted, rows, start, end)
    return node_order(node, vals, f, end - start)


@numba.njit
def _sample_order(presorted, rows, start, end, pick, vals, f):
    sample = N.sample_presorted(presorted, rows, start, end, pick)
    return node_order(sample, vals, f, pick.shape[0])


@numba.njit
def _sparse_node(local_csr, mu):
    lptr, lidx, lval = local_csr
    return transpose(lptr, lidx, lval, lptr.shape[0] - 1, mu.shape[0]), mu


@numba.njit
def _sparse_scan(local_csr, mu, yb, wb, n_classes, f, min_samples_leaf, direction):
    """One column's scan of a sparse node, from its stored entries (:func:`scan_column`)."""
    node = _sparse_node(local_csr, mu)
    m = local_csr[0].shape[0] - 1
    start = axis_scan_start(yb, wb, m, n_classes)
    columns = column_presort(node, None, m)
    vals = np.empty(m)
    return scan_column(
        node, f, m, vals, yb, wb, start, min_samples_leaf, np.inf, direction, columns
    )


@numba.njit
def _ranked_split(node, yb, wb, seed, p):
    """The node's axis-aligned search over all ``p`` features, and each one's score."""
    state = np.full(1, seed, dtype=np.uint64)
    scores = np.full(p, -1.0)
    found = ranked_axis_split(node, yb, wb, yb.shape[0], 2, p, 1, state, scores)
    return found, scores


def _zero_heavy(rng, m, p, density, levels=None):
    """A dense ``(m, p)`` block to store as CSR: most entries 0, a quarter of the columns
    empty, values of both signs."""
    dense = rng.normal(size=(m, p)) * (rng.random((m, p)) < density)
    if levels is not None:  # ties among the stored entries too
        dense = np.round(dense * levels) / levels
    dense[:, rng.choice(p, size=p // 4, replace=False)] = 0.0
    return dense


def _local_csr(dense):
    X = sp.csr_matrix(dense)
    return X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64)


def _reference_scan(v, yb, wb, n_classes, min_samples_leaf, direction):
    """Plain numpy: ``(visited, impurity, threshold)`` of the best split of the values ``v``.

    Every threshold between consecutive distinct sorted values (more than
    FEATURE_THRESHOLD apart) at their midpoint, a row going left iff its value
    is at most it; classes: ``sum over sides of N log N - sum_c n_c log n_c``,
    targets: ``-(|S_L|^2 / N_L + |S_R|^2 / N_R)``; the first best in increasing
    threshold order.
    """
    u = np.unique(v)
    if u[-1] <= u[0] + FEATURE_THRESHOLD:
        return 0, np.inf, 0.0
    xlogx = lambda a: np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)  # noqa: E731
    best, best_thr = np.inf, 0.0
    for lo, hi in zip(u[:-1], u[1:], strict=True):
        if hi <= lo + FEATURE_THRESHOLD:
            continue
        left = v <= lo
        if min(left.sum(), (~left).sum()) < min_samples_leaf:
            continue
        n = np.array([wb[left].sum(), wb[~left].sum()])
        if yb.ndim == 1:
            counts = np.array(
                [np.bincount(yb[side], wb[side], n_classes) for side in (left, ~left)]
            )
            if direction and direction * (counts[0, 1] * n[1] - counts[1, 1] * n[0]) > 0:
                continue
            imp = (xlogx(n) - xlogx(counts).sum(axis=1)).sum()
        else:
            if not (n > 0).all():
                continue
            sums = np.array([wb[side] @ yb[side] for side in (left, ~left)])
            if direction and direction * (sums[0, 0] * n[1] - sums[1, 0] * n[0]) > 0:
                continue
            imp = -((sums**2).sum(axis=1) / n).sum()
        if imp < best:
            best, best_thr = imp, 0.5 * (lo + hi)
    return 1, best, best_thr


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "target", ["binary counts", "binary weights", "three classes", "targets", "two targets"]
)
@pytest.mark.parametrize("min_samples_leaf", [1, 5])
def test_a_sparse_column_scan_matches_a_numpy_reference(seed, target, min_samples_leaf):
    # the node's stored entries only, the rows without one (a single value) moved in one step:
    # ties among the entries and with the block (explicit zeros), full and near-empty columns
    rng = np.random.default_rng(seed)
    m, p = 70, 14
    dense = _zero_heavy(rng, m, p, density=0.2, levels=2 if seed % 2 else None)
    dense[:, 0] = rng.normal(size=m)  # no row without an entry
    dense[rng.integers(m), 1] = 1.5  # one entry
    X = sp.csr_matrix(dense)
    X.data[np.flatnonzero(X.indices == 2)[::2]] = 0.0  # stored zeros: ties with the block
    dense = X.toarray()
    local = X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64)
    weights = {"binary counts": rng.integers(1, 4, m).astype(np.float64)}
    wb = weights.get(target, rng.uniform(0.2, 2.0, m))
    if target in ("targets", "two targets"):
        yb = rng.normal(size=(m, 1 if target == "targets" else 2)) + dense[:, :1]
        n_classes = yb.shape[1]
    else:
        n_classes = 3 if target == "three classes" else 2
        yb = (rng.integers(0, n_classes, m) + (dense[:, 0] > 0)) % n_classes
    mu = (wb @ dense) / wb.sum()
    direction = 1 if n_classes == 1 or target.startswith("binary") else 0
    for f in range(p):
        for d in {0, direction}:
            found = _sparse_scan(local, mu, yb, wb, n_classes, f, min_samples_leaf, d)
            expected = _reference_scan(dense[:, f] - mu[f], yb, wb, n_classes, min_samples_leaf, d)
            assert found[0] == expected[0]
            np.testing.assert_allclose(found[1], expected[1], rtol=1e-11, atol=1e-11)
            assert found[2] == expected[2]


@pytest.mark.parametrize("seed", range(4))
def test_a_sparse_node_searches_as_its_dense_block(seed):
    # two classes and whole weights: every sum of the search is exact, so the sparse node
    # (empty columns skipped, stored entries sorted) scores each candidate with the bits of
    # the dense block's scans (every value sorted)
    rng = np.random.default_rng(seed)
    m, p = 80, 15
    dense = _zero_heavy(rng, m, p, density=0.2, levels=2)
    yb = rng.integers(0, 2, m)
    wb = rng.integers(1, 4, m).astype(np.float64)
    mu = (wb @ dense) / wb.sum()
    sparse_node = _sparse_node(_local_csr(dense), mu)
    sparse_found, sparse_scores = _ranked_split(sparse_node, yb, wb, seed, p)
    dense_found, dense_scores = _ranked_split(np.ascontiguousarray(dense - mu), yb, wb, seed, p)
    assert dense_found[0] >= 0
    assert sparse_found == dense_found
    empty = ~dense.any(axis=0)
    assert np.all(np.isinf(sparse_scores[empty]))
    np.testing.assert_array_equal(sparse_scores, dense_scores)


@pytest.mark.parametrize("seed", range(2))
def test_sparse_sorting_growth_equals_presorted_growth_on_zero_heavy_classes(seed):
    # ties at 0 in every column: the two routes order the block of zeros differently (node
    # rows in block order, presorted rows by id), which two classes and whole weights
    # (bootstrap counts) sum exactly
    rng = np.random.default_rng(seed)
    X = _zero_heavy(rng, 400, 10, density=0.3)
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(np.int64)
    params = _co2_params(
        max_features=X.shape[1], oblique_test="out_of_bag", oblique_penalty=0.0
    )  # fmt: skip
    sorting, presorted = _grow_both(X, y, 2, seed, params, sparse=True)
    assert sorting[0].shape[0] > 31
    _assert_same_growth(sorting, presorted)


def _tied(rng, n=300, p=5, levels=4):
    """Integer-valued columns: most values are tied."""
    return rng.integers(0, levels, size=(n, p)).astype(np.float64)


def _by_value_then_id(X, rows, f):
    """``rows`` in increasing order of ``X[:, f]``, ties by row id (the reference)."""
    return rows[np.lexsort((rows, X[rows, f]))]


@pytest.mark.parametrize("seed", range(3))
def test_column_order_sorts_every_column_ties_by_row_id(seed):
    X = _tied(np.random.default_rng(seed))
    X[X == 1] = -0.0  # -0.0 and 0.0 are equal values
    order = co2.column_order(X)
    assert order.dtype == np.int32 and order.shape == X.shape[::-1]
    everything = np.arange(X.shape[0])
    for f in range(X.shape[1]):
        np.testing.assert_array_equal(order[f], _by_value_then_id(X, everything, f))
    # CSR: implicit and stored zeros alike
    np.testing.assert_array_equal(co2.column_order(sp.csr_matrix(X)), order)


def test_column_order_is_none_above_the_limit(monkeypatch):
    X = _tied(np.random.default_rng(0))
    monkeypatch.setattr(co2, "MAX_PRESORTED_ENTRIES", X.size - 1)
    assert co2.column_order(X) is None
    assert co2.column_order(sp.csr_matrix(X)) is None


def _check_slices(X, presorted, rows, slices):
    sorted_rows = presorted[0]
    for start, end in slices:
        for f in range(X.shape[1]):
            expected = _by_value_then_id(X, rows[start:end], f)
            np.testing.assert_array_equal(sorted_rows[f, start:end], expected)


@pytest.mark.parametrize("seed", range(4))
def test_partitions_keep_every_node_slice_sorted(seed):
    rng = np.random.default_rng(seed)
    X = _tied(rng)
    row_weight = rng.poisson(1.0, X.shape[0]).astype(np.float64)  # a bootstrap: zeros left out
    rows = np.flatnonzero(row_weight > 0)
    presorted = _presorted(co2.column_order(X), rows)
    _check_slices(X, presorted, rows, [(0, rows.shape[0])])
    # grow a random tree: each split sends a random subset left, in any order, as the
    # kernels partition rows[start:end] in place
    pending, leaves = [(0, rows.shape[0])], []
    while pending:
        start, end = pending.pop()
        if end - start < 4:
            leaves.append((start, end))
            continue
        middle = start + int(rng.integers(1, end - start))
        rows[start:end] = rng.permutation(rows[start:end])
        _partition(presorted, rows, start, middle, end)
        _check_slices(X, presorted, rows, [(start, middle), (middle, end)])
        pending += [(start, middle), (middle, end)]
    _check_slices(X, presorted, rows, leaves)


def _two_nodes(rng):
    """Tied ``X``, the presorted rows of all its rows and one split into two nodes.

    Returns ``X``, the presorted tuple, ``rows`` (shuffled, then partitioned at
    row 140) and the two nodes' ``(start, end)`` slices.
    """
    X = _tied(rng)
    rows = np.arange(X.shape[0])
    presorted = _presorted(co2.column_order(X), rows)
    middle = 140
    rows = rng.permutation(rows)
    _partition(presorted, rows, 0, middle, rows.shape[0])
    return X, presorted, rows, [(0, middle), (middle, rows.shape[0])]


@pytest.mark.parametrize("seed", range(3))
def test_a_node_reads_its_block_in_order_of_each_feature(seed):
    rng = np.random.default_rng(seed)
    X, presorted, rows, nodes = _two_nodes(rng)
    for start, end in nodes:
        block = rows[start:end]  # the node block's rows, in the order they are gathered
        for f in range(X.shape[1]):
            vals = X[block, f] - X[block, f].mean()  # centred, as the kernels' block
            order = _node_order(presorted, rows, start, end, vals, f)
            # positions in the block, by value then row id; a valid sort of vals
            np.testing.assert_array_equal(order, np.lexsort((block, vals)))
            assert np.all(np.diff(vals[order]) >= 0)


@pytest.mark.parametrize("seed", range(3))
def test_a_sampled_node_reads_its_sample_in_order_of_each_feature(seed):
    rng = np.random.default_rng(seed)
    X, presorted, rows, nodes = _two_nodes(rng)
    for start, end in nodes:
        m = end - start
        # a sample of a quarter walks the node's order; of a twentieth, sorts its values
        for size, walks in [(m // 4, True), (m // 20, False)]:
            assert (m <= N.SAMPLE_WALK_RATIO * size) == walks
            pick = np.sort(rng.choice(m, size=size, replace=False))
            sample = rows[start + pick]  # gathered in the order of pick, as the kernels do
            for f in range(X.shape[1]):
                vals = X[sample, f] - X[sample, f].mean()
                order = _sample_order(presorted, rows, start, end, pick, vals, f)
                np.testing.assert_array_equal(np.sort(order), np.arange(size))
                assert np.all(np.diff(vals[order]) >= 0)
                if walks:  # by value then row id
                    np.testing.assert_array_equal(order, np.lexsort((sample, vals)))


def _no_ties(task, seed, n=400, p=6):
    if task == "classes":
        X, y = make_classification(n, p, n_informative=4, n_classes=3, random_state=seed)
        return X, y.astype(np.int64), 3
    X, y = make_regression(n, p, noise=5.0, random_state=seed)
    return X, ((y - y.mean()) / y.std())[:, None], 1


def _grow_both(X, y, n_classes, seed, params, sparse, cst=None):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(1.0, X.shape[0]).astype(np.float64)
    oob_weight = (counts == 0).astype(np.float64)
    mean, scale = standardization(X, None)
    if sparse:
        Xs = co2.scaled_csr(sp.csr_matrix(X), scale)
    else:
        Xs = (np.ascontiguousarray(X), mean, scale)
    order = co2.column_order(sp.csr_matrix(X) if sparse else X)
    assert order is not None
    kw = dict(oob_weight=oob_weight, cst=cst)
    sorting = co2.grow_tree(Xs, y, counts, n_classes, seed, params, **kw)
    presorted = co2.grow_tree(Xs, y, counts, n_classes, seed, params, column_order=order, **kw)
    return sorting, presorted


def _assert_same_growth(a, b):
    names = ("left", "right", "weights", "bias", "value", "n_node_samples", "depth", "stats")
    for name, x, z in zip(names, a, b, strict=True):
        if isinstance(x, tuple):  # the CSR form of sparse growth's weights
            for xi, zi in zip(x, z, strict=True):
                np.testing.assert_array_equal(xi, zi, err_msg=name)
        else:
            np.testing.assert_array_equal(x, z, err_msg=name)


@pytest.mark.parametrize("task", ["classes", "targets"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("max_cccp_samples", [8, 64])
def test_presorted_growth_equals_sorting_growth_without_ties(task, sparse, seed, max_cccp_samples):
    X, y, n_classes = _no_ties(task, seed)
    assert all(np.unique(X[:, f]).shape[0] == X.shape[0] for f in range(X.shape[1]))
    # small CCCP samples: large nodes search a sample (64: every sample walks its node's
    # presorted rows; 8: nodes above 128 rows sort their sample), the others presorted rows
    params = _co2_params(
        max_features=X.shape[1], max_cccp_samples=max_cccp_samples, oblique_test="out_of_bag",
        oblique_penalty=0.0,
    )  # fmt: skip
    sorting, presorted = _grow_both(X, y, n_classes, seed, params, sparse)
    assert sorting[0].shape[0] > 31  # a tree of some depth
    _assert_same_growth(sorting, presorted)


@pytest.mark.parametrize("sparse", [False, True])
def test_presorted_growth_keeps_monotonic_constraints_as_sorting_growth(sparse):
    X, y, _ = _no_ties("targets", 3)
    cst = np.array([1, 0, -1, 0, 0, 0], dtype=np.int8)
    params = _co2_params(max_features=X.shape[1])
    sorting, presorted = _grow_both(X, y, 1, 3, params, sparse, cst=cst)
    _assert_same_growth(sorting, presorted)


@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_fits_above_the_presort_limit_sort_instead(Estimator, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))  # no ties: both routes grow the same forest
    y = (X[:, 0] + X[:, 1] > 0).astype(int) if Estimator is CO2ForestClassifier else X[:, 0]
    presorted = Estimator(n_estimators=3, random_state=0).fit(X, y)
    monkeypatch.setattr(co2, "MAX_PRESORTED_ENTRIES", 0)
    sorting = Estimator(n_estimators=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(presorted.forest_.weight_value, sorting.forest_.weight_value)
    np.testing.assert_array_equal(presorted.predict(X), sorting.predict(X))


def test_tied_inputs_grow_the_same_trees_dense_and_sparse():
    # integer columns: the nodes' axis-aligned searches break ties by row id on both inputs
    rng = np.random.default_rng(5)
    X = _tied(rng, n=400, p=8, levels=3)
    y = (X[:, 0] + X[:, 1] + rng.normal(size=400) > 2).astype(int)
    # margin 0 pinned: the default "auto" chose margin 0 on the dense input and 2 on the
    # sparse one here, whose margin-2 trees already weighed these tied inputs differently
    kw = dict(n_estimators=4, random_state=0, oblique_penalty=0.0)
    dense = CO2ForestClassifier(**kw).fit(X, y)
    sparse = CO2ForestClassifier(**kw).fit(sp.csr_matrix(X), y)
    for a, b in zip(dense.trees_, sparse.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_array_equal(a.value, b.value)
