"""``monotonic_cst`` of the soft trees: projected SGD keeps the model monotone.

On random problems with random constraint vectors (NaN-free and with NaN in
training rows), the property of :func:`tests._helpers.monotone_violations`
holds for soft and hard routing, growth alone and with finetuning, dense
and sparse input: thousands of random lines in all.
"""

import numpy as np
import pytest

from obliquetrees import SoftTreeClassifier, SoftTreeRegressor
from tests._helpers import (
    check_monotonic_api,
    model_violation,
    monotone_cost,
    monotone_problem,
    sparse_monotone_violation,
)

#: A short SGD schedule (the property does not depend on it) that still grows trees.
FAST = dict(max_epochs=5, n_restarts=3, tol=1e-4, random_state=0)


def _make(classifier, **params):
    return (SoftTreeClassifier if classifier else SoftTreeRegressor)(**FAST, **params)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("classifier", [False, True])
def test_monotone_along_random_lines(seed, classifier):
    X, y, labels, cst = monotone_problem(seed, nan_rows=0.1 if seed % 2 else 0.0)
    finetune = dict(finetune_epochs=3) if seed % 3 == 0 else {}
    model = _make(classifier, monotonic_cst=cst, **finetune).fit(X, labels if classifier else y)
    assert model.tree_.node_count >= 3
    for routing in ("soft", "hard"):
        model.set_params(routing=routing)
        assert model_violation(model, X, cst, n_lines=100, seed=seed) <= 1e-12


def test_monotone_on_sparse_input():
    assert sparse_monotone_violation(_make, False, finetune_epochs=2) <= 1e-12


def test_constraints_cost_little_where_the_truth_is_monotone():
    assert monotone_cost(_make) < 0.05


def test_scikit_learn_semantics():
    X, y, labels, cst = monotone_problem(9, n=200)
    check_monotonic_api(_make, X, y, labels, cst)


def test_the_initial_hard_split_agrees_with_its_feature_constraint():
    from obliquetrees.soft import _axis_split as A
    from obliquetrees.soft.training import presort

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    Y = (-3 * X[:, :1] + 0.1 * X[:, 1:]).copy()  # falls with x0, rises a little with x1
    u = np.ones(200)
    dense = (X, *presort(X), u, Y)
    assert A.best_axis_split(*dense)[0] == 0
    feature, _, left, right, _ = A.best_axis_split(*dense, np.array([1.0, 0.0]))
    assert feature == 1 or left[0] <= right[0]
    feature, _, left, right, _ = A.best_axis_split(*dense, np.array([-1.0, 0.0]))
    assert feature == 0 and left[0] >= right[0]


@pytest.mark.parametrize("seed", range(3))
def test_the_hard_start_search_keeps_to_the_allowed_features(seed):
    """With ``allowed``, the dense and sparse searches find the best split of those
    features: the unmasked search's on the same columns alone."""
    import scipy.sparse as sp

    from obliquetrees._training._rows import sorted_columns, sparse_rows
    from obliquetrees.soft import _axis_split as A
    from obliquetrees.soft.training import presort

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 6))
    X[rng.random(X.shape) < 0.5] = 0.0  # zeros stored implicitly in the sparse form
    u, Y = rng.random(120), (X @ rng.normal(size=6))[:, None]
    direction = np.array([1.0, 0.0, -1.0, 0.0, 0.0, 1.0])
    allowed = rng.random(6) < 0.5
    allowed[seed] = True
    cols = np.flatnonzero(allowed)
    dense = A.best_axis_split(X, *presort(X), u, Y, direction, allowed)
    Xs = np.ascontiguousarray(X[:, cols])
    alone = A.best_axis_split(Xs, *presort(Xs), u, Y, direction[cols])
    assert dense[0] == cols[alone[0]] and dense[1] == alone[1]
    np.testing.assert_array_equal(dense[2], alone[2])
    rows = sparse_rows(sp.csr_matrix(X), np.zeros(6), np.ones(6))
    sparse = A.best_axis_split_sparse(sorted_columns(rows), u, Y, direction, allowed)
    assert sparse[0] == dense[0] and sparse[1] == dense[1]
    np.testing.assert_allclose(sparse[2], dense[2], rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_each_split_keeps_the_better_of_its_ordered_and_free_versions(seed):
    """Constrained and free inputs mixed: every split is trained as an ordered and as a
    free split, and growth keeps the one of lower validation error."""
    from obliquetrees._training.monotonic import constraint_signs
    from obliquetrees.soft import _kernels as K
    from obliquetrees.soft import training as T
    from tests.soft._params import soft_params

    X, y, _, cst = monotone_problem(40 + seed, n=400)
    cst[:2] = (1, 0)  # at least one constrained and one free input
    R = ((y - y.mean()) / y.std())[:, None]
    sw = np.ones(len(y))
    sign = -constraint_signs(cst.astype(np.int8), X.shape[1])
    params = soft_params(max_epochs=5, n_restarts=2, tol=1e-4)
    tree, log = T.grow_soft_tree(
        X[:250], R[:250], sw[:250], X[250:], R[250:], sw[250:],
        loss=K.LOSS_SQUARED, metric=0, params=params, seed=seed, sign=sign,
    )  # fmt: skip
    both = [entry for entry in log if len(entry["tried"]) == 2]
    assert both and any(entry["accepted"] for entry in both)
    ordered = tree.arrays()["ordered"]
    children = tree.arrays()["children_left"]
    for entry in both:
        (first, e1), (second, e2) = entry["tried"]
        assert first != second
        assert entry["error_after"] == min(e1, e2)
        if entry["accepted"]:
            assert children[entry["node"]] >= 0
            assert ordered[entry["node"]] == (first if e1 <= e2 else second)


@pytest.mark.parametrize("sparse_rows", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_joint_leaves_refit_every_leaf_within_the_ordering(seed, sparse_rows, monkeypatch):
    """:func:`~obliquetrees.soft.training.joint_leaves` of a grown constrained tree and a new
    split: the refitted leaves keep the ordering, lower the training error of the frozen
    start (the new pair at its leaf's value), and its outputs are the split tree's.
    Sparse row tuples, read in blocks of a few rows, give the same up to rounding."""
    import scipy.sparse as sp

    from obliquetrees._training._rows import sparse_rows as to_rows
    from obliquetrees._training.monotonic import constraint_signs, order_leaves
    from obliquetrees.soft import _kernels as K
    from obliquetrees.soft import training as T
    from tests.soft._params import soft_params

    X, y, _, cst = monotone_problem(30 + seed, n=400)
    R = ((y - y.mean()) / y.std())[:, None]
    sw = np.ones(len(y))
    train, valid = slice(0, 250), slice(250, None)
    sign = -constraint_signs(cst.astype(np.int8), X.shape[1])  # P(left)'s signs
    params = soft_params(max_epochs=5, n_restarts=2, tol=1e-4)
    args = (X[train], R[train], sw[train], X[valid], R[valid], sw[valid])
    tree, _ = T.grow_soft_tree(
        *args, loss=K.LOSS_SQUARED, metric=0, params=params, seed=seed, sign=sign
    )
    cl, cr, W, b, Z, n_nodes = T.dense_arrays(tree)
    m = int(np.flatnonzero(cl[:n_nodes] < 0)[0])
    rng = np.random.default_rng(seed)
    w = rng.normal(size=X.shape[1])
    ordered = bool(seed % 2)
    data = (X[train], R[train], sw[train]), (X[valid], R[valid], sw[valid])
    if sparse_rows:
        monkeypatch.setattr(T, "JOINT_BLOCK_CELLS", 64)
        rows = [
            to_rows(sp.csr_matrix(part[0]), np.zeros(X.shape[1]), np.ones(X.shape[1]))
            for part in data
        ]
        data = tuple((r, *part[1:]) for r, part in zip(rows, data, strict=True))
    error, grown, z, Fv = T.joint_leaves(tree, m, (w, 0.1, ordered), *data, metric=0)
    leaves = grown[-1]
    F = T.tree_output(data[0][0], data[0][1].shape[0], grown, z)  # the output once kept
    left, right = tree.add_children(m, n_left=0)
    tree.W[m], tree.b[m], tree.ordered[m] = w, 0.1, ordered
    cl, cr, W, b, Z, n_nodes = T.dense_arrays(tree)
    start = Z.copy()
    start[left] = start[right] = Z[m]
    tree.Z[leaves, 0] = z
    cl, cr, W, b, Z, n_nodes = T.dense_arrays(tree)
    value = Z[:n_nodes, 0].copy()
    projected = value.copy()
    order_leaves(
        cl[:n_nodes], cr[:n_nodes], tree.arrays()["ordered"][:n_nodes], projected, np.ones(n_nodes)
    )
    np.testing.assert_array_equal(projected, value)  # the identity: feasible
    fresh, _, _ = K.forward_context(X[train], cl, cr, W, b, Z, n_nodes, -1)
    np.testing.assert_allclose(F, fresh, rtol=1e-10, atol=1e-12)
    fresh_v, _, _ = K.forward_context(X[valid], cl, cr, W, b, Z, n_nodes, -1)
    np.testing.assert_allclose(Fv, fresh_v, rtol=1e-10, atol=1e-12)
    assert error == pytest.approx(np.mean((R[valid] - fresh_v) ** 2), rel=1e-10)
    frozen, _, _ = K.forward_context(X[train], cl, cr, W, b, start, n_nodes, -1)
    assert np.sum((R[train] - F) ** 2) <= np.sum((R[train] - frozen) ** 2)
