"""Edited and randomly corrupted pickles (issue 14: the safety boundary).

Every kind of model (each public estimator, converted and fine-tuned
models, decision machines with CSR and dense S) is pickled, edited in
memory and loaded again in a fresh interpreter: a defect must give a
``ValueError`` at ``pickle.loads`` (or, when the edit leaves a valid model,
a correct prediction), never a signal, a hang or another exception.
"""

import pytest

from tests.adversarial._cases import N_RANDOM, report
from tests.adversarial._models import MODEL_NAMES


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_edited_pickles_give_value_error_at_load(name):
    """Child ids 1e9 / negative / back to the root / own node / shared, feature 1e8,
    truncated arrays (hinge W too), n_features lowered/raised, NaN weights,
    edited n_features_in_, and the machine's template arrays: all caught at load."""
    results = report(name, "EDITS")
    assert all(got == "rejected" for got in results.values()), results


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_random_corruption_is_rejected_or_harmless(name):
    """Either ValueError at load, or finite output of the right shape; never a
    signal, a hang or another exception (the snippet asserts it per example)."""
    seen = report(name, "RANDOM")
    assert seen["rejected"] + seen["accepted"] > N_RANDOM // 2 and seen["rejected"] > 0, seen
