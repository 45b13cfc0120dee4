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
