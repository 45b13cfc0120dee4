"""ONNX export: onnxruntime on the exported graph agrees with ``predict`` for every model.

Real data (scikit-learn's bundled digits and diabetes), with and without
missing values, float32 and float64 inputs, batches of 0, 1 and 100k rows;
labels must be identical, probabilities and values equal within 1e-5
relative (float64) or 1e-4 (float32). The skl2onnx registration converts
pipelines in one call.
"""

import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import load_diabetes, load_digits
from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import obliquetrees as ot
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import finetune
from tests.test_common import FAST_PARAMS, discover_estimators

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
from obliquetrees.onnx import _parts, register_skl2onnx, to_onnx  # noqa: E402

TOLERANCE = {np.float64: 1e-5, np.float32: 1e-4}


def _with_nan(X, rate, seed):
    X = X.copy()
    X[np.random.default_rng(seed).random(X.shape) < rate] = np.nan
    return X


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:500], y[:500], X[1000:1300]


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X[:300], y[:300], X[300:]


#: Constraints of a binary digits model (odd against even): two pixels, the others free.
DIGIT_CST = [0] * 64
DIGIT_CST[21], DIGIT_CST[42] = 1, -1


def _fast(cls, **params):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), **params})


# name -> (task, fit(X, y) -> fitted model)
MODELS = {
    "co2": ("clf", lambda X, y: _fast(ot.CO2ForestClassifier, random_state=0).fit(X, y)),
    "co2_trained_with_nan": (
        "clf",
        lambda X, y: _fast(ot.CO2ForestClassifier, max_depth=5, random_state=0).fit(
            _with_nan(X, 0.2, 1), y
        ),
    ),
    "co2_string_classes": (
        "clf",
        lambda X, y: _fast(ot.CO2ForestClassifier, n_estimators=2, random_state=0).fit(
            X, np.array(["even", "odd"])[y % 2]
        ),
    ),
    "e2edt_hybrid": ("clf", lambda X, y: _fast(ot.E2EDTClassifier, random_state=0).fit(X, y)),
    "e2edt_soft": (
        "clf",
        lambda X, y: _fast(ot.E2EDTClassifier, routing="soft", random_state=0).fit(X, y),
    ),
    "e2edt_hard_forest": (
        "clf",
        lambda X, y: _fast(
            ot.E2EDTClassifier, routing="hard", n_estimators=3, max_depth=3, random_state=0
        ).fit(X, y),
    ),
    "e2edt_hybrid_forest": (
        "clf",
        lambda X, y: _fast(ot.E2EDTClassifier, n_estimators=3, max_depth=3, random_state=0).fit(
            _with_nan(X, 0.2, 2), y
        ),
    ),
    "e2edt_reg": (
        "reg",
        lambda X, y: _fast(ot.E2EDTRegressor, routing="hard", random_state=0).fit(X, y),
    ),
    "e2edt_reg_soft_forest_nan": (
        "reg",
        lambda X, y: _fast(
            ot.E2EDTRegressor, routing="soft", n_estimators=3, max_depth=3, random_state=0
        ).fit(_with_nan(X, 0.2, 7), y),
    ),
    # constrained with free inputs: a tree of the free inputs grafted under every leaf
    "soft_clf_monotonic": (
        "clf",
        lambda X, y: _fast(ot.SoftTreeClassifier, monotonic_cst=DIGIT_CST).fit(X, y % 2),
    ),
    "soft_reg_monotonic": (
        "reg",
        lambda X, y: _fast(ot.SoftTreeRegressor, monotonic_cst=[0, 0, 1, 1] + [0] * 6).fit(
            _with_nan(X, 0.1, 3), y
        ),
    ),
    "e2edt_reg_monotonic": (
        "reg",
        lambda X, y: _fast(ot.E2EDTRegressor, monotonic_cst=[0, 0, 1, 1] + [0] * 6).fit(X, y),
    ),
    "soft_clf": ("clf", lambda X, y: _fast(ot.SoftTreeClassifier).fit(X, y)),
    "soft_clf_hard": ("clf", lambda X, y: _fast(ot.SoftTreeClassifier, routing="hard").fit(X, y)),
    "soft_reg": ("reg", lambda X, y: _fast(ot.SoftTreeRegressor).fit(X, y)),
    "soft_reg_hard_nan": (
        "reg",
        lambda X, y: _fast(ot.SoftTreeRegressor, routing="hard").fit(_with_nan(X, 0.2, 3), y),
    ),
    "hinge_clf_fern": ("clf", lambda X, y: _fast(ot.HingeForestClassifier).fit(X, y)),
    "hinge_clf_tree_linear": (
        "clf",
        lambda X, y: _fast(ot.HingeForestClassifier, tree_type="tree", head="linear").fit(
            _with_nan(X, 0.2, 4), y
        ),
    ),
    "hinge_clf_screened": (
        "clf",
        lambda X, y: _fast(ot.HingeForestClassifier, feature_screening=True).fit(X, y),
    ),
    "hinge_reg": ("reg", lambda X, y: _fast(ot.HingeForestRegressor).fit(X, y)),
    "hinge_reg_tree_nan": (
        "reg",
        lambda X, y: _fast(ot.HingeForestRegressor, tree_type="tree").fit(_with_nan(X, 0.2, 6), y),
    ),
    "converted_rf": (
        "clf",
        lambda X, y: from_sklearn(RandomForestClassifier(20, random_state=0).fit(X, y)),
    ),
    "converted_tree_nan": (
        "clf",
        lambda X, y: from_sklearn(
            DecisionTreeClassifier(random_state=0).fit(_with_nan(X, 0.2, 5), y)
        ),
    ),
    "converted_et_two_outputs": (
        "reg",
        lambda X, y: from_sklearn(
            ExtraTreesRegressor(10, random_state=0).fit(X, np.column_stack([y, y**2]))
        ),
    ),
    "converted_single_leaf": (
        "reg",
        lambda X, y: from_sklearn(DecisionTreeRegressor().fit(X, np.full(X.shape[0], 2.5))),
    ),
    "finetuned": (
        "clf",
        lambda X, y: finetune(
            _fast(ot.CO2ForestClassifier, n_estimators=2, max_depth=3, random_state=0).fit(X, y),
            X,
            y,
            epochs=2,
        ),
    ),
}
# every registered estimator at its fast settings, so a new method is exported here too;
# depth at most 6: the graph computes every split's margin for a whole batch at once
# (100k rows x a fully grown regression forest's thousands of splits would be GBs)
MODELS.update(
    {
        f"registry_{cls.__name__}": (
            "clf" if is_classifier(cls()) else "reg",
            lambda X, y, cls=cls: cls(
                **{"max_depth": 6, **FAST_PARAMS.get(cls.__name__, {}), "random_state": 0}
            ).fit(X, y),
        )
        for cls in discover_estimators()
    }
)


@pytest.fixture(scope="module")
def fitted(digits, diabetes):
    """``fitted(name)``: the model fitted once per module, and its test rows (with NaN)."""
    cache = {}

    def get(name):
        if name not in cache:
            task, fit = MODELS[name]
            X, y, X_test = digits if task == "clf" else diabetes
            model = fit(X, y)
            cache[name] = (model, np.vstack([X_test, _with_nan(X_test, 0.1, 7)]))
        return cache[name]

    return get


def _session(onx):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        onx.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _check_agrees(model, outputs, X):
    tol = TOLERANCE[X.dtype.type]
    if len(outputs) == 2:  # classifier: label, probabilities
        label, proba = outputs
        np.testing.assert_array_equal(label, model.predict(X))
        np.testing.assert_allclose(proba, model.predict_proba(X), rtol=tol, atol=1e-12)
        assert proba.dtype == X.dtype
    else:
        (value,) = outputs
        expected = model.predict(X).reshape(X.shape[0], -1)
        np.testing.assert_allclose(value, expected, rtol=tol, atol=1e-12)
        assert value.dtype == X.dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_onnxruntime_agrees_with_predict(fitted, name, dtype):
    model, X = fitted(name)
    X = X.astype(dtype)
    session = _session(to_onnx(model, dtype=dtype))
    _check_agrees(model, session.run(None, {"X": X}), X)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_batches_of_zero_one_and_100k_rows(fitted, name):
    model, X = fitted(name)
    session = _session(to_onnx(model))
    X = X.astype(np.float32)
    rows = np.random.default_rng(0).integers(0, X.shape[0], 100_000)
    for batch in (X[:0], X[:1], X[rows]):
        outputs = session.run(None, {"X": batch})
        assert all(out.shape[0] == batch.shape[0] for out in outputs)
        if batch.shape[0]:
            _check_agrees(model, outputs, batch)


#: Models routed by hard traversal alone (the routing choice applies to them).
HARD = [
    "co2",
    "co2_trained_with_nan",
    "e2edt_hard_forest",
    "e2edt_reg",
    "soft_clf_hard",
    "soft_reg_hard_nan",
    "converted_tree_nan",
    "converted_single_leaf",
    "finetuned",
]


@pytest.mark.parametrize("name", HARD)
def test_walk_and_margin_product_route_alike(fitted, name, monkeypatch):
    """Both ways of routing in the graph give predict's outputs (deep or shallow forests)."""
    model, X = fitted(name)
    X = X.astype(np.float64)
    for walk in (True, False):
        monkeypatch.setattr(_parts, "_walk_is_cheaper", lambda forest, walk=walk: walk)
        onx = to_onnx(model, dtype=np.float64)
        ops = {node.op_type for node in onx.graph.node}
        assert ("TreeEnsembleRegressor" in ops) is not walk
        _check_agrees(model, _session(onx).run(None, {"X": X}), X)


def test_deep_oblique_forest_is_walked(fitted):
    """A forest with far more oblique splits than a row visits is walked level by level."""
    model, _ = fitted("co2")
    forest = model._forest()
    n_splits = int(np.count_nonzero(forest.children_left >= 0))
    visits = forest.n_trees * int(forest.depth.max())
    assert _parts._walk_is_cheaper(forest) is (n_splits > _parts.WALK_RATIO * visits)
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        m.setattr(_parts, "WALK_RATIO", n_splits / visits / 2)
        assert _parts._walk_is_cheaper(forest)
        m.setattr(_parts, "WALK_RATIO", n_splits / visits * 2)
        assert not _parts._walk_is_cheaper(forest)
        m.setattr(_parts, "MAX_MARGINS", n_splits - 1)
        assert _parts._walk_is_cheaper(forest)


def test_converted_forest_routes_on_raw_features(fitted):
    """A converted scikit-learn forest needs no margin product: one tree ensemble."""
    model, X = fitted("converted_rf")
    ops = [node.op_type for node in to_onnx(model).graph.node]
    assert "MatMul" not in ops and ops.count("TreeEnsembleRegressor") == 1


def test_target_opset(fitted):
    model, X = fitted("e2edt_hybrid")
    X = X.astype(np.float32)
    for opset in (13, {"": 15, "ai.onnx.ml": 3}):
        onx = to_onnx(model, target_opset=opset)
        assert {o.domain: o.version for o in onx.opset_import}[""] in (13, 15)
        _check_agrees(model, _session(onx).run(None, {"X": X}), X)


def test_errors(fitted):
    model, _ = fitted("co2")
    with pytest.raises(NotFittedError):
        to_onnx(ot.CO2ForestClassifier())
    with pytest.raises(TypeError, match="obliquetrees estimator"):
        to_onnx(LogisticRegression())
    with pytest.raises(ValueError, match="dtype"):
        to_onnx(model, dtype=np.int64)
    with pytest.raises(ValueError, match="target_opset"):
        to_onnx(model, target_opset=12)
    with pytest.raises(ValueError, match="ai.onnx.ml"):
        to_onnx(model, target_opset={"": 17, "ai.onnx.ml": 2})
    with pytest.raises(TypeError, match="target_opset"):
        to_onnx(model, target_opset="17")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_skl2onnx_converts_pipelines(digits, diabetes, dtype):
    skl2onnx = pytest.importorskip("skl2onnx")
    register_skl2onnx()
    register_skl2onnx()  # twice changes nothing
    X, y, X_test = digits
    clf = make_pipeline(StandardScaler(), _fast(ot.CO2ForestClassifier, random_state=0)).fit(X, y)
    X_test = X_test.astype(dtype)
    onx = skl2onnx.to_onnx(clf, X[:1].astype(dtype), options={"zipmap": False})
    label, proba = _session(onx).run(None, {"X": X_test})
    # skl2onnx's float32 scaler is ONNX's Scaler op, (x - mean) * (1 / scale) in float32,
    # where scikit-learn divides: a row within that rounding of an oblique split can change
    # sides, so the forest is compared on the rows the graph's scaler gives it
    scaler = clf[0]
    if dtype == np.float32:
        scaled = (X_test - scaler.mean_.astype(dtype)) * (1 / scaler.scale_).astype(dtype)
    else:
        scaled = scaler.transform(X_test)
    np.testing.assert_array_equal(label, clf[-1].predict(scaled))
    np.testing.assert_allclose(
        proba, clf[-1].predict_proba(scaled), rtol=TOLERANCE[dtype], atol=1e-12
    )

    if dtype == np.float32:  # ONNX's ZipMap takes float32 only
        zipped = skl2onnx.to_onnx(clf, X[:1].astype(dtype))  # skl2onnx's default: a ZipMap
        _, proba_maps = _session(zipped).run(None, {"X": X_test})
        assert sorted(proba_maps[0]) == list(clf.classes_)
        assert proba_maps[0][label[0]] == pytest.approx(proba[0, label[0]])

    X_clf = X
    X, y, X_test = diabetes
    reg = make_pipeline(StandardScaler(), _fast(ot.HingeForestRegressor)).fit(X, y)
    X_test = X_test.astype(dtype)
    (value,) = _session(skl2onnx.to_onnx(reg, X[:1].astype(dtype))).run(None, {"X": X_test})
    np.testing.assert_allclose(value[:, 0], reg.predict(X_test), rtol=TOLERANCE[dtype])

    with pytest.raises(ValueError, match="opset 13 or later"):
        skl2onnx.to_onnx(clf, X_clf[:1].astype(dtype), target_opset=12)


def test_export_example_runs():
    """examples/export_onnx.py: onnxruntime gives predict's labels on digits."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "examples" / "export_onnx.py"
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "onnxruntime, float32 graph: labels as predict on 100.0 %" in result.stdout
    assert "skl2onnx pipeline" in result.stdout
