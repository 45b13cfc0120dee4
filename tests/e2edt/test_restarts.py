"""Restarts of a constrained E2EDT tree (``e2edt.training._least_loss_fit``).

With :data:`CONSTRAINED_RESTARTS` above one, a constrained tree is fitted
from that many seeds and the fit of least training loss is kept: the loss
must be the estimator's own (log-loss of ``predict_proba``, squared error of
``predict``), the stored tree that fit's, one restart the single fit with no
loss computed, and the kept model monotone.
"""

import numpy as np
import pytest
from sklearn.metrics import log_loss, mean_squared_error

from obliquetrees import E2EDTClassifier, E2EDTRegressor
from obliquetrees.e2edt import training
from tests._helpers import model_violation, monotone_problem_with_free_input

FAST = dict(max_depth=4, max_epochs=4, finetune_epochs=4, batch_size=64, random_state=0)


def _record_fits(monkeypatch):
    """Every ``(loss, tree)`` that ``_least_loss_fit`` scores during a fit."""
    scored = []
    training_loss = training._training_loss

    def recording_loss(tree, *args):
        scored.append((training_loss(tree, *args), tree))
        return scored[-1][0]

    monkeypatch.setattr(training, "_training_loss", recording_loss)
    return scored


@pytest.mark.parametrize("routing", ["soft", "hard"])
@pytest.mark.parametrize("classifier", [False, True])
def test_restarts_keep_the_fit_of_least_training_loss(classifier, routing, monkeypatch):
    """Three restarts: three different fits scored, the stored tree is the one of least
    loss, and that loss is the fitted model's log-loss (``predict_proba``) or mean squared
    error (``predict``) on the training rows."""
    X, y, labels, cst = monotone_problem_with_free_input(2, n=300, nan_rows=0.1)
    monkeypatch.setattr(training, "CONSTRAINED_RESTARTS", {"regression": 3, "classification": 3})
    scored = _record_fits(monkeypatch)
    make = E2EDTClassifier if classifier else E2EDTRegressor
    model = make(monotonic_cst=cst, routing=routing, **FAST)
    model.fit(X, labels if classifier else y)

    assert len(scored) == 3
    losses = [loss for loss, _ in scored]
    assert len(set(losses)) == 3  # the restarts are different fits
    kept = scored[int(np.argmin(losses))][1]
    stored = model.trees_[0]
    assert np.array_equal(stored.children_left, kept.children_left)
    assert np.array_equal(stored.weight_value, kept.weight_value)
    assert np.array_equal(stored.value, kept.value)
    if classifier:
        own = log_loss(labels, model.predict_proba(X))
    else:
        own = mean_squared_error(y, model.predict(X))
    np.testing.assert_allclose(min(losses), own, rtol=1e-9)
    assert model_violation(model, X, cst, n_lines=200) <= 1e-12


@pytest.mark.parametrize("classifier", [False, True])
def test_one_restart_is_the_single_fit(classifier, monkeypatch):
    """One restart fits once (``_fit_weighted_rows``) and scores nothing."""
    X, y, labels, cst = monotone_problem_with_free_input(3, n=200)
    monkeypatch.setattr(training, "CONSTRAINED_RESTARTS", {"regression": 1, "classification": 1})
    monkeypatch.setattr(training, "_training_loss", None)  # calling it would fail
    calls = []
    fit_rows = training._fit_weighted_rows

    def recording_fit(*args):
        calls.append(args)
        return fit_rows(*args)

    monkeypatch.setattr(training, "_fit_weighted_rows", recording_fit)
    make = E2EDTClassifier if classifier else E2EDTRegressor
    make(monotonic_cst=cst, **FAST).fit(X, labels if classifier else y)
    assert len(calls) == 1


def test_restarts_leave_unconstrained_fits_alone(monkeypatch):
    """Without constraints (or with all-zero ones) there is one fit whatever the setting."""
    X, y, _, cst = monotone_problem_with_free_input(4, n=200)
    monkeypatch.setattr(training, "CONSTRAINED_RESTARTS", {"regression": 3, "classification": 3})
    monkeypatch.setattr(training, "_least_loss_fit", None)  # calling it would fail
    for constraint in (None, np.zeros_like(cst)):
        E2EDTRegressor(monotonic_cst=constraint, **FAST).fit(X, y)
