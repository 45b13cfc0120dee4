"""The hand-off from estimator to training: one form of ``sample_weight``.

``validate_fit_data`` (every ``fit``) and ``validate_more_fit_data`` (every
``partial_fit`` batch) return the weights as one float64 array, ones when the
user gave none, so no layer below re-derives them from None.
"""

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path

import numpy as np
import pytest

from obliquetrees import CO2ForestClassifier, HingeForestRegressor
from obliquetrees.utils.validation import validate_fit_data, validate_more_fit_data
from tests.test_common import discover_estimators
from tests.test_determinism import _data, _make, _state

PACKAGE = Path(__file__).resolve().parents[1] / "obliquetrees"
#: The training side of the hand-off: method folders and the shared training code.
TRAINING_FOLDERS = ("co2", "e2edt", "soft", "hinge", "_training")
#: The names sample weights go by there (``class_weight`` may be None: no class weights).
WEIGHT_NAMES = {"sample_weight", "sw", "row_weight", "w"}


@pytest.mark.parametrize("cls", discover_estimators(), ids=lambda c: c.__name__)
def test_no_weights_and_unit_weights_give_the_same_model(cls):
    X, y = _data(cls)
    unweighted = _state(_make(cls).fit(X, y), X)
    assert _state(_make(cls).fit(X, y, sample_weight=np.ones(X.shape[0])), X) == unweighted


def test_validation_gives_unit_weights_when_none_are_given():
    X, y = np.arange(12.0).reshape(6, 2), np.array([0, 1] * 3)
    _, _, weights = validate_fit_data(CO2ForestClassifier(), X, y, None, classifier=True)
    assert weights.dtype == np.float64 and weights.tolist() == [1.0] * 6
    fitted = HingeForestRegressor(n_estimators=2, max_depth=2, max_epochs=1, random_state=0)
    fitted.fit(X, y.astype(float))
    _, _, weights = validate_more_fit_data(fitted, X[:4], y[:4], None, classifier=False)
    assert weights.dtype == np.float64 and weights.tolist() == [1.0] * 4


def _weight_none_tests(path):
    """Places of ``<weights> is (not) None`` tests in ``path`` (:data:`WEIGHT_NAMES`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id in WEIGHT_NAMES
            and isinstance(node.ops[0], (ast.Is, ast.IsNot))
            and isinstance(node.comparators[0], ast.Constant)
            and node.comparators[0].value is None
        ):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_training_code_never_rederives_weights_from_none():
    files = [p for folder in TRAINING_FOLDERS for p in sorted((PACKAGE / folder).rglob("*.py"))]
    assert files
    assert [line for path in files for line in _weight_none_tests(path)] == []


#: Each method folder's training module: its entry, how the entry runs in parallel
#: (``n_jobs``: joblib workers over trees, resolved by ``parallel_map``; ``n_threads``:
#: numba threads, the estimator's ``_n_threads()``) and its params class.
TRAINING = {
    "co2": ("fit_co2", "n_jobs", "CO2Params"),
    "e2edt": ("fit_e2edt", "n_jobs", "E2EDTParams"),
    "soft": ("fit_soft_tree", "n_threads", "SoftTreeParams"),
    "hinge": ("fit_hinge", "n_threads", "HingeParams"),
}


def _training_module(folder):
    return importlib.import_module(f"obliquetrees.{folder}.training")


@pytest.mark.parametrize("folder", sorted(TRAINING))
def test_training_entries_share_one_signature(folder):
    entry, parallel, _ = TRAINING[folder]
    parameters = inspect.signature(getattr(_training_module(folder), entry)).parameters
    positional = [p.name.lower() for p in parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == ["x", "y", "sample_weight", "params", "seeds"]
    assert {"n_jobs", "n_threads"} & set(parameters) == {parallel}
    assert parameters[parallel].kind == inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("folder", sorted(TRAINING))
def test_params_classes_have_no_defaults_of_their_own(folder):
    params_class = getattr(_training_module(folder), TRAINING[folder][2])
    assert dataclasses.is_dataclass(params_class)
    assert params_class.__dataclass_params__.frozen
    defaulted = [
        field.name
        for field in dataclasses.fields(params_class)
        if field.default is not dataclasses.MISSING
        or field.default_factory is not dataclasses.MISSING
    ]
    assert defaulted == []


def test_every_method_folder_with_training_is_listed():
    assert {p.parent.name for p in PACKAGE.glob("*/training.py")} == set(TRAINING)


def test_training_params_names_what_it_cannot_fill():
    from obliquetrees import SoftTreeClassifier
    from obliquetrees.hinge.training import HingeParams
    from obliquetrees.soft.training import SoftTreeParams

    params = SoftTreeClassifier(max_depth=3)._training_params(SoftTreeParams, tol=0.5)
    assert params.max_depth == 3 and params.tol == 0.5
    with pytest.raises(TypeError, match=r"SoftTreeParams has no field \['depth'\]"):
        SoftTreeClassifier()._training_params(SoftTreeParams, depth=3)
    with pytest.raises(AttributeError, match="task"):
        SoftTreeClassifier()._training_params(HingeParams)
