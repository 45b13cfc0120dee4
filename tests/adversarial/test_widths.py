"""Input narrower or wider than the model, at every prediction entry (issue 14).

The kernels index ``X`` by stored feature ids without bounds checks, so each
entry (numba traversal, the numpy walk, the BLAS/decision-machine path and
every ``DecisionMachine`` method, soft and hinge evaluation, the estimators'
own methods) must raise a ``ValueError`` naming both widths. Each model's
entries run in one fresh interpreter: on a defect a narrow input can crash it.
"""

import pytest

from tests.adversarial._cases import report
from tests.adversarial._models import MODEL_NAMES
from tests.adversarial._subprocess import assert_ok, run_python


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_entry_rejects_narrower_and_wider_input(name):
    results = report(name, "WIDTHS")
    assert results and all(got == "ok" for got in results.values()), results


def test_wide_tree_machine_with_sparse_S_rejects_a_one_column_input():
    """The measured crash: a tree over 2M features, S stored sparse, X of width 1."""
    proc = run_python(
        """
        import numpy as np
        from obliquetrees._core.tree import ObliqueTree
        from obliquetrees.machine import to_machine

        tree = ObliqueTree([1, -1, -1], [2, -1, -1], [0, 1, 1, 1], [1_999_999], [1.0],
                           [0.0, 0.0, 0.0], [[1.0], [2.0], [3.0]], [2, 1, 1], n_features=2_000_000)
        dm = to_machine(tree)
        assert not isinstance(dm.S, np.ndarray)  # CSR
        for method in (dm.predict_value, dm.apply, dm.margins, dm.leaf_scores, dm.relaxed_value):
            try:
                method(np.zeros((1, 1)))
            except ValueError as exc:
                assert "1 features" in str(exc) and "2000000" in str(exc), exc
            else:
                raise AssertionError(f"{method.__name__} accepted X of width 1")
        print("ok")
        """,
        timeout=120,
    )
    assert_ok(proc)
