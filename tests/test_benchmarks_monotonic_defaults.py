"""benchmarks/monotonic_defaults.py's rule: the choice and the leave-one-set-out rows."""

import numpy as np
import pytest

from benchmarks.monotonic_defaults import FAMILIES, OFF, candidate_settings, choose, lodo

CANDIDATES = (OFF, "0.25", "0.5")


def _scores(table):
    pairs = (
        (name, c, s) for name, row in table.items() for c, s in zip(CANDIDATES, row, strict=True)
    )
    return {(name, c): s for name, c, s in pairs}


def test_the_best_mean_rank_is_chosen():
    val = _scores({"a": (0.1, 0.3, 0.2), "b": (0.1, 0.3, 0.2), "c": (0.3, 0.2, 0.1)})
    assert choose(val, ["a", "b", "c"], CANDIDATES, OFF) == "0.25"


def test_ties_go_to_the_incumbent_then_to_the_smallest_value():
    val = _scores({"a": (0.1, 0.3, 0.2), "b": (0.3, 0.1, 0.2)})  # off and 0.25 tie
    assert choose(val, ["a", "b"], CANDIDATES, OFF) == OFF
    val = _scores({"a": (0.0, 0.3, 0.2), "b": (0.0, 0.2, 0.3)})  # the steps tie
    assert choose(val, ["a", "b"], CANDIDATES, OFF) == "0.25"


def test_each_held_out_set_is_chosen_for_on_the_others_only():
    val = _scores({"a": (0.9, 0.1, 0.1), "b": (0.1, 0.9, 0.5), "c": (0.1, 0.9, 0.5)})
    test = _scores({"a": (1.0, 2.0, 3.0), "b": (4.0, 5.0, 6.0), "c": (7.0, 8.0, 9.0)})
    rows = lodo(val, test, ["a", "b", "c"], CANDIDATES, OFF)
    rows = {row["held-out set"]: row for row in rows}
    assert rows["a"]["choice on the others"] == "0.25" and rows["a"]["its test R2"] == 2.0
    assert rows["b"]["choice on the others"] in CANDIDATES
    assert rows["c"]["off test R2"] == 7.0


@pytest.mark.parametrize(
    "family, candidate",
    [(family, c) for family, spec in FAMILIES.items() for c in spec.candidates + spec.reference],
)
def test_a_candidate_is_set_only_inside_its_block(family, candidate):
    from obliquetrees import CO2ForestRegressor
    from obliquetrees.co2 import _refine
    from obliquetrees.e2edt import training
    from obliquetrees.hinge import _monotonic
    from obliquetrees.soft import training as soft_training

    def constants():
        return (
            _refine.STEP,
            _monotonic.POOL_FRACTION,
            dict(_monotonic.POOL_LEVELS),
            training.FREE_TREE_DEPTH,
            training.LOGIT_ROUNDS,
            dict(training.CONSTRAINED_RESTARTS),
            soft_training.FREE_TREE,
            training.LEAF_RANGE_MARGIN,
            soft_training.LEAF_RANGE_MARGIN,
            training.leaf_bounds,
            soft_training.leaf_bounds,
        )

    saved = constants()
    restarts_before = dict(training.CONSTRAINED_RESTARTS)
    with candidate_settings(family, candidate):
        if family == "co2-refine":
            assert CO2ForestRegressor._refines_leaves is (candidate != OFF)
            assert candidate == OFF or _refine.STEP == float(candidate)
        elif family == "hinge-pool":
            assert _monotonic.POOL_FRACTION == float(candidate)
        elif family.startswith("hinge-pool-levels"):
            assert _monotonic.POOL_LEVELS[FAMILIES[family].task] == int(candidate)
        elif family.startswith("soft-free-tree"):
            assert soft_training.FREE_TREE is (candidate != OFF)
        elif family == "e2edt-logit-rounds":
            assert training.LOGIT_ROUNDS == (0 if candidate == OFF else int(candidate))
        elif family.startswith("e2edt-restarts"):
            task = FAMILIES[family].task
            assert training.CONSTRAINED_RESTARTS == {**restarts_before, task: int(candidate)}
        elif family.endswith("leaf-margin"):
            module = training if family.startswith("e2edt") else soft_training
            target = np.array([1.0, 3.0, 2.0, 100.0])
            weight = np.array([1.0, 1.0, 0.5, 0.0])  # the 100 has no weight
            bounds = module.leaf_bounds(target, weight, module.LEAF_RANGE_MARGIN)
            if candidate == OFF:
                assert bounds == (-np.inf, np.inf)
            else:
                margin = 2.0 * float(candidate)  # the range [1, 3], of width 2
                assert bounds == (1.0 - margin, 3.0 + margin)
        else:
            depth = training.FREE_TREE_DEPTH
            assert depth is None if candidate == OFF else depth == int(candidate)
    assert CO2ForestRegressor._refines_leaves is True
    assert constants() == saved


def test_a_classification_family_names_its_score():
    """The leave-one-set-out columns say accuracy for a classifier's family."""
    val = _scores({"a": (0.9, 0.1, 0.1), "b": (0.1, 0.9, 0.5)})
    rows = lodo(val, val, ["a", "b"], CANDIDATES, OFF, "accuracy")
    assert all(any("accuracy" in key for key in row) for row in rows)
    assert not any("R2" in key for row in rows for key in row)
    assert FAMILIES["soft-free-tree-classifier"].task == "classification"
