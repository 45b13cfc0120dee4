"""``monotonic_cst`` of E2EDT: projected greedy growth, Adam and M-steps keep the model monotone.

On random problems with random constraint vectors (NaN-free and with NaN in
training rows), the property of :func:`tests._helpers.monotone_violations`
holds for every routing and through every training path (forests on
feature subsets with bootstrap, best-first growth, pruned routing, the row
budget, no finetune, sparse input): thousands of random lines in all.
"""

import numpy as np
import pytest

from obliquetrees import E2EDTClassifier, E2EDTRegressor
from obliquetrees.e2edt import training
from tests._helpers import (
    check_monotonic_api,
    model_violation,
    monotone_cost,
    monotone_problem,
    sparse_monotone_violation,
)

#: A short schedule (the property does not depend on it).
FAST = dict(max_depth=4, max_epochs=4, finetune_epochs=4, batch_size=64, random_state=0)
#: The training paths, one per fit.
PATHS = [
    {},
    dict(n_estimators=3, max_features=2, bootstrap=True),
    dict(max_leaf_nodes=8),
    dict(prune_threshold=1e-2),
    dict(max_finetune_samples=100),
    dict(finetune_epochs=0),
]


def _make(classifier, **params):
    return (E2EDTClassifier if classifier else E2EDTRegressor)(**{**FAST, **params})


@pytest.mark.parametrize("path", range(len(PATHS)))
@pytest.mark.parametrize("classifier", [False, True])
def test_monotone_along_random_lines(path, classifier):
    X, y, labels, cst = monotone_problem(path, nan_rows=0.1 if path % 2 else 0.0)
    model = _make(classifier, monotonic_cst=cst, **PATHS[path])
    model.fit(X, labels if classifier else y)
    assert model.trees_[0].node_count >= 3
    for routing in ("hybrid", "hard", "soft") if classifier else ("hard", "soft"):
        model.set_params(routing=routing)
        assert model_violation(model, X, cst, n_lines=100, seed=path) <= 1e-12


def test_monotone_on_sparse_input():
    assert sparse_monotone_violation(_make, True) <= 1e-12


def test_constraints_cost_little_where_the_truth_is_monotone():
    assert monotone_cost(_make) < 0.05


def test_scikit_learn_semantics():
    X, y, labels, cst = monotone_problem(9, n=200)
    check_monotonic_api(_make, X, y, labels, cst)


@pytest.mark.parametrize("classifier", [False, True])
def test_warm_start_keeps_the_constraints_of_the_first_fit(classifier):
    X, y, labels, cst = monotone_problem(10, n=200)
    target = labels if classifier else y
    model = _make(classifier, monotonic_cst=cst, warm_start=True, n_estimators=1).fit(X, target)
    model.set_params(n_estimators=2).fit(X, target)
    assert len(model.trees_) == 2
    assert model_violation(model, X, cst, n_lines=50) <= 1e-12
    for other in (None, -cst):
        model.set_params(n_estimators=3, monotonic_cst=other)
        with pytest.raises(ValueError, match="needs the monotonic_cst of the previous fit"):
            model.fit(X, target)
    # an unconstrained model warm-starts unconstrained (all zeros constrain nothing)
    model = _make(classifier, warm_start=True, n_estimators=1).fit(X, target)
    model.set_params(n_estimators=2, monotonic_cst=[0] * X.shape[1]).fit(X, target)
    assert len(model.trees_) == 2


@pytest.mark.parametrize("seed", range(3))
def test_soft_routing_refits_constrained_leaves_to_the_soft_prediction(seed, monkeypatch):
    """``routing="soft"`` grows the tree ``routing="hard"`` grows (same splits); a constrained
    regressor's leaves are then the constrained least-squares fit of the soft prediction, so
    its training error under soft routing is at most that of the ordered hard-routed means.
    Unconstrained, the leaves are the paper's under either routing. (Of the constrained tree
    alone, from one seed: with its free tree the two routings backfit different residuals, and
    with restarts each routing keeps the restart of least loss under its own routing.)"""
    monkeypatch.setattr(training, "FREE_TREE_DEPTH", None)
    monkeypatch.setattr(training, "CONSTRAINED_RESTARTS", {"regression": 1, "classification": 1})
    X, y, _, cst = monotone_problem(20 + seed, n=300)
    for constraint in (cst, None):
        soft = _make(False, monotonic_cst=constraint, random_state=seed).fit(X, y)
        hard = _make(False, monotonic_cst=constraint, random_state=seed, routing="hard").fit(X, y)
        a, b = soft.trees_[0], hard.trees_[0]
        assert np.array_equal(a.dense_weights(), b.dense_weights())
        assert np.array_equal(a.bias, b.bias)
        if constraint is None:
            assert np.array_equal(a.value, b.value)
            continue
        error_soft = np.mean((soft.predict(X) - y) ** 2)
        soft.trees_[0].value[:] = b.value  # the hard fit's ordered means, routed softly
        error_means = np.mean((soft.predict(X) - y) ** 2)
        assert error_soft <= error_means
        assert error_soft < 0.999 * error_means  # the refit moved them
