"""A constrained E2EDT regressor's free tree (``e2edt.training._with_free_tree``).

The stored tree is the constrained tree ``T`` with a copy of the free-input
tree ``F`` grafted under every leaf (:func:`graft_sum`): its prediction must
be ``T``'s plus ``F``'s exactly, under hard and soft routing, with NaN
terms too, and ``F``'s copies must carry no weight on a constrained input.
"""

import numpy as np
import pytest
from scipy import sparse

from obliquetrees import E2EDTRegressor
from obliquetrees._core.soft import soft_predict
from obliquetrees.e2edt import training
from tests._helpers import model_violation, monotone_problem_with_free_input, record_grafts


def _regressor(**params):
    fast = dict(max_depth=4, max_epochs=4, finetune_epochs=4, batch_size=64, random_state=0)
    return E2EDTRegressor(**{**fast, **params})


@pytest.mark.parametrize("routing", ["soft", "hard"])
@pytest.mark.parametrize("as_sparse", [False, True])
def test_a_constrained_regressor_stores_its_tree_plus_a_free_tree(routing, as_sparse, monkeypatch):
    """The stored tree is :func:`graft_sum` of a constrained tree and a tree with no weight
    on a constrained input, and is monotone (dense with NaN, and CSR input)."""
    X, y, _, cst = monotone_problem_with_free_input(3, n=300, nan_rows=0.0 if as_sparse else 0.1)
    if as_sparse:
        X[np.abs(X) < 0.5] = 0.0
    grafts = record_grafts(monkeypatch, training)
    model = _regressor(monotonic_cst=cst, routing=routing)
    model.fit(sparse.csr_matrix(X) if as_sparse else X, y)
    (((tree, _, other, _), (grafted, steepness)),) = grafts
    assert other.n_leaves > 1 and tree.n_leaves > 1
    assert not np.any(other.dense_weights()[:, cst != 0])
    stored = model.trees_[0]
    assert np.array_equal(stored.children_left, grafted.children_left)
    assert np.array_equal(stored.value[stored.is_leaf], grafted.value[grafted.is_leaf])
    assert np.array_equal(model.steepness_[0], steepness)
    # soft output through the two parts: the whole tree's up to rounding
    whole = soft_predict(stored, X, stored.value, steepness)
    np.testing.assert_allclose(
        training.tree_output(stored, steepness, X, "soft"), whole, atol=1e-12
    )
    assert model_violation(model, X, cst, n_lines=200) <= 1e-12


def test_no_free_tree_without_a_free_input_or_a_constrained_one(monkeypatch):
    """All inputs constrained, or none (all zeros fit as unconstrained): one tree, no graft."""
    X, y, _, cst = monotone_problem_with_free_input(4, n=200)
    monkeypatch.setattr(training, "graft_sum", None)  # calling it would fail
    for constraint in (np.where(cst == 0, 1, cst), np.zeros_like(cst)):
        model = _regressor(monotonic_cst=constraint).fit(X, y)
        assert model.trees_[0].max_depth <= 4
