"""Export a fitted forest to ONNX and predict with onnxruntime.

Fits a small CO2ForestClassifier on scikit-learn's digits, writes it as an
ONNX file with ``obliquetrees.onnx.to_onnx``, loads the file with
onnxruntime (which needs neither obliquetrees nor scikit-learn to run it) and
compares its labels and probabilities with ``predict`` and
``predict_proba``. Then, after ``register_skl2onnx()``, converts a whole
pipeline (StandardScaler + forest) with ``skl2onnx.to_onnx``.

    pip install ".[onnx]" skl2onnx   # in a clone of the repository
    python examples/export_onnx.py

Without onnxruntime the script says so and exits; without skl2onnx it skips
the pipeline part.
"""

import tempfile
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from obliquetrees import CO2ForestClassifier


def report(name, label, proba, model, X):
    """Print how far onnxruntime's outputs are from the model's own."""
    same = np.mean(label == model.predict(X))
    diff = np.abs(proba - model.predict_proba(X)).max()
    print(
        f"{name}: labels as predict on {100 * same:.1f} % of {len(X)} test rows, "
        f"largest probability difference {diff:.1e}"
    )


def main():
    try:
        import onnx  # noqa: F401 (to_onnx builds the graph with it)
        import onnxruntime as ort
    except ImportError as error:
        print(f"export_onnx.py needs onnx and onnxruntime ({error}): pip install onnx onnxruntime")
        return
    from obliquetrees.onnx import to_onnx

    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    model = CO2ForestClassifier(n_estimators=5, max_depth=6, n_jobs=2, random_state=0)
    model.fit(X_train, y_train)
    print(f"CO2 forest, 5 trees of depth <= 6: test accuracy {model.score(X_test, y_test):.3f}")

    # one graph: X (n_samples, 64) -> label (n_samples,), probabilities (n_samples, 10)
    onx = to_onnx(model, dtype=np.float32)
    path = Path(tempfile.mkdtemp(prefix="obliquetrees-")) / "co2_forest.onnx"
    path.write_bytes(onx.SerializeToString())
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")

    # what a deployment runs: onnxruntime alone
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    label, proba = session.run(None, {"X": X_test.astype(np.float32)})
    report("onnxruntime, float32 graph", label, proba, model, X_test)

    try:
        from skl2onnx import to_onnx as skl2onnx_to_onnx

        from obliquetrees.onnx import register_skl2onnx
    except ImportError:
        print("skl2onnx is not installed (pip install skl2onnx): skipping the pipeline part")
        return
    register_skl2onnx()  # skl2onnx now converts every obliquetrees estimator
    pipe = make_pipeline(StandardScaler(), clone(model)).fit(X_train, y_train)
    onx = skl2onnx_to_onnx(pipe, X_train[:1].astype(np.float32), options={"zipmap": False})
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, proba = session.run(None, {"X": X_test.astype(np.float32)})
    # the graph scales in float32, scikit-learn in float64: a row whose margin is within
    # that rounding of 0 at some split could take the other branch
    report("skl2onnx pipeline (StandardScaler + forest)", label, proba, pipe, X_test)


if __name__ == "__main__":
    main()
