"""A constrained soft tree's free tree (``soft.training._with_free_tree``).

With constrained and free inputs the stored tree is the constrained tree
``T`` with a copy of the free-input tree ``F`` grafted under every leaf: a
regressor's output, and a binary classifier's logit, must be ``T``'s plus
``F``'s, ``F`` must carry no weight on a constrained input, and the grafted
tree must be evaluated through its two parts. The binary ``F`` is fitted
beside ``T``'s logits (offsets), checked here against the same fits done
with numpy.
"""

import numpy as np
import pytest
from scipy import sparse

from obliquetrees import SoftTreeClassifier, SoftTreeRegressor
from obliquetrees._core.graft import split_graft
from obliquetrees._core.soft import soft_predict
from obliquetrees.soft import _finetune as FT
from obliquetrees.soft import _kernels as K
from obliquetrees.soft import training
from tests._helpers import model_violation, monotone_problem_with_free_input, record_grafts
from tests.soft._params import soft_params

# (2 restarts would leave many a split untrained: every restart may diverge at the
# default learning rate)
FAST = dict(max_epochs=5, random_state=0)


def _product_problem(seed, n=400, nan_rows=0.1):
    """Rows whose target rises with input 0, falls with input 2 and varies with the product
    of the free inputs 1 and 3 (the benchmark's synthetic set): a free tree then has
    something to fit. Returns ``X`` (NaN in a fraction ``nan_rows`` of the rows), ``y``,
    labels ``y > 0`` and the constraints."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = 2 * X[:, 0] - X[:, 2] + 2 * X[:, 1] * X[:, 3] + 0.3 * rng.normal(size=n)
    hidden = rng.random(n) < nan_rows
    X[hidden, rng.integers(4, size=hidden.sum())] = np.nan
    return X, y, (y > 0).astype(int), np.array([1, 0, -1, 0])


@pytest.mark.parametrize("estimator", [SoftTreeRegressor, SoftTreeClassifier])
@pytest.mark.parametrize("as_sparse", [False, True])
def test_a_constrained_soft_tree_stores_its_tree_plus_a_free_tree(
    estimator, as_sparse, monkeypatch
):
    """The stored tree is :func:`graft_sum` of a constrained tree and a tree with no weight
    on a constrained input; it is recognised and evaluated through its two parts, and it is
    monotone (dense with NaN, and CSR input)."""
    X, y, labels, cst = _product_problem(1, nan_rows=0.0 if as_sparse else 0.1)
    if as_sparse:
        X[np.abs(X) < 0.5] = 0.0
    grafts = record_grafts(monkeypatch, training)
    model = estimator(monotonic_cst=cst, **FAST)
    target = y if estimator is SoftTreeRegressor else labels
    model.fit(sparse.csr_matrix(X) if as_sparse else X, target)
    (((tree, _, other, _), (grafted, _)),) = grafts
    assert tree.n_leaves > 1 and other.n_leaves > 1
    assert not np.any(other.dense_weights()[:, : cst.shape[0]][:, cst != 0])
    stored = model.tree_
    assert np.array_equal(stored.children_left, grafted.children_left)
    leaves = stored.is_leaf
    # the training convention's values are the outputs (classifier: logits), leaf by leaf
    # the sum of T's and F's
    if estimator is SoftTreeClassifier:
        logit = np.log(stored.value[leaves, 1]) - np.log(stored.value[leaves, 0])
        np.testing.assert_allclose(logit, grafted.value[leaves, 0], rtol=1e-9, atol=1e-9)
    assert {entry["part"] for entry in model.growth_log_} == {"constrained", "free"}
    ones = np.ones(stored.node_count)
    assert split_graft(stored, ones) is not None
    rows = np.random.default_rng(0).normal(size=(300, X.shape[1]))
    rows[::7, 1] = np.nan
    values = stored.value if estimator is SoftTreeRegressor else np.log(stored.value)
    whole = soft_predict(stored, rows, values)
    np.testing.assert_allclose(model._soft_output(rows, values), whole, rtol=0, atol=1e-12)
    assert model_violation(model, X, cst, n_lines=200) <= 1e-12


def test_a_classifier_finetunes_each_part_beside_the_other():
    """``finetune_epochs``: each part is finetuned beside the other's logits; the finetune
    keeps its best validation state and the sum stays monotone."""
    X, _, labels, cst = _product_problem(1)
    model = SoftTreeClassifier(monotonic_cst=cst, finetune_epochs=3, **FAST).fit(X, labels)
    info = model.finetune_info_
    assert info is not None and info["error_after"] <= info["error_before"]
    assert split_graft(model.tree_, np.ones(model.tree_.node_count)) is not None
    assert model_violation(model, X, cst, n_lines=200) <= 1e-12


@pytest.mark.parametrize("estimator", [SoftTreeRegressor, SoftTreeClassifier])
def test_no_free_tree_without_a_free_input_or_a_constrained_one(estimator, monkeypatch):
    """All inputs constrained, or none (all zeros fit as unconstrained): one tree, no graft."""
    X, y, labels, cst = monotone_problem_with_free_input(4, n=200)
    monkeypatch.setattr(training, "graft_sum", None)  # calling it would fail
    target = y if estimator is SoftTreeRegressor else labels
    for constraint in (np.where(cst == 0, 1, cst), np.zeros_like(cst)):
        model = estimator(monotonic_cst=constraint, **FAST).fit(X, target)
        assert "part" not in (model.growth_log_ or [{}])[0]


def _binary_data(seed, n=240, d=3):
    """Rows, 0/1 targets whose logit is ``3 x0`` plus an offset, weights and the offset."""
    rng = np.random.default_rng(seed)
    X = np.ascontiguousarray(rng.normal(size=(n, d)))
    offset = rng.normal(size=n)
    R = (rng.random(n) < 1 / (1 + np.exp(-3 * X[:, 0] - offset))).astype(np.float64)[:, None]
    return X, R, rng.uniform(0.5, 2.0, size=n), offset


def _log_loss(F, R, sw):
    """The weighted mean binary log-loss of logits ``F`` (n, 1), with numpy."""
    z = F[:, 0]
    losses = np.logaddexp(0.0, z) - R[:, 0] * z
    return np.dot(sw, losses) / sw.sum()


@pytest.mark.parametrize("seed", range(3))
def test_an_offset_is_added_to_the_output_before_the_loss(seed):
    """``tree_error`` and the finetune's gradient with an offset, against numpy: the error
    of ``F + offset``, and the gradient of the loss of ``F + offset`` (central differences)."""
    X, R, sw, offset = _binary_data(seed)
    rng = np.random.default_rng(seed + 10)
    cl, cr = np.array([1, -1, 3, -1, -1]), np.array([2, -1, 4, -1, -1])
    W, b, Z = rng.normal(size=(5, 3)), rng.normal(size=5), rng.normal(size=(5, 1))
    F, _, _ = K.forward_context(X, cl, cr, W, b, Z, 5, -1)
    error = K.tree_error(X, R, sw, cl, cr, W, b, Z, 5, K.LOSS_BINARY, 0, offset[:, None])
    assert error == pytest.approx(_log_loss(F + offset[:, None], R, sw), rel=1e-12)
    grads = (np.empty(W.shape), np.empty(5), np.empty(Z.shape))
    scratch = FT._scratch(5, 1)
    tree = (cl, cr, W, b, Z, 5)
    n = X.shape[0]
    total = FT._tree_grad(
        X, R, sw, np.arange(n), 0, n, tree, K.LOSS_BINARY, grads, scratch, offset[:, None]
    )
    assert total / sw.sum() == pytest.approx(_log_loss(F + offset[:, None], R, sw), rel=1e-12)

    def loss_at(Z_moved):
        moved, _, _ = K.forward_context(X, cl, cr, W, b, Z_moved, 5, -1)
        return _log_loss(moved + offset[:, None], R, sw) * sw.sum()

    for leaf in (1, 3, 4):
        step = np.zeros_like(Z)
        step[leaf] = 1e-6
        numeric = (loss_at(Z + step) - loss_at(Z - step)) / 2e-6
        assert grads[2][leaf, 0] == pytest.approx(numeric, rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_a_tree_grown_beside_an_offset_fits_what_the_offset_leaves(seed):
    """The binary root starts at the log-loss minimiser beside the offset (its gradient 0),
    and the grown tree lowers the training loss of the offset alone."""
    X, R, sw, offset = _binary_data(seed, n=400)
    root = training._offset_leaf(offset, R, sw)
    gradient = np.dot(sw, 1 / (1 + np.exp(-(offset + root[0]))) - R[:, 0])
    assert abs(gradient) < 1e-9 * sw.sum()
    params = soft_params(max_epochs=5, tol=1e-4)
    half = X.shape[0] // 2
    parts = (X[:half], R[:half], sw[:half], X[half:], R[half:], sw[half:])
    offsets = (offset[:half], offset[half:])
    tree, _ = training.grow_soft_tree(
        *parts, loss=K.LOSS_BINARY, metric=0, params=params, seed=seed, offset=offsets
    )
    assert tree.n_nodes > 1
    cl, cr, W, b, Z, n_nodes = training.dense_arrays(tree)
    F, _, _ = K.forward_context(X[:half], cl, cr, W, b, Z, n_nodes, -1)
    alone = _log_loss(offset[:half, None], R[:half], sw[:half])
    assert _log_loss(F + offset[:half, None], R[:half], sw[:half]) < alone
    with pytest.raises(ValueError, match="binary loss only"):
        training.grow_soft_tree(
            *parts, loss=K.LOSS_SQUARED, metric=0, params=params, seed=seed, offset=offsets
        )
