"""Small fitted models of every kind, and ways to corrupt them, for the safety tests.

The pytest process fits the models once (:func:`model_file`) and writes their
pickles to a file; the adversarial cases then run in fresh interpreters
(``_subprocess.run_python``) that load that file, corrupt a model in memory,
pickle it again and load the result, so a crash or a hang fails one test.
"""

import atexit
import functools
import pickle
import shutil
import tempfile
from pathlib import Path

import numpy as np

from obliquetrees._registry import ESTIMATORS
from tests._helpers import TREE_ARRAYS

#: Every kind of model a user can pickle: each public estimator, converted
#: scikit-learn models, a fine-tuned forest and decision machines (CSR and dense S).
MODEL_NAMES = (
    *ESTIMATORS,
    "converted_classifier",
    "converted_regressor",
    "finetuned",
    "machine_sparse",
    "machine_dense",
)


def data():
    """Iris inputs, class labels and a regression target."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return X, y, X[:, 2] + 0.5 * X[:, 3]


@functools.cache
def model_file():
    """Path of a pickle holding ``{name: pickled model}`` for every ``MODEL_NAMES``."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeRegressor

    from obliquetrees.convert import from_sklearn
    from obliquetrees.machine import finetune, to_machine
    from tests.test_common import FAST_PARAMS, discover_estimators

    X, y, target = data()
    models = {}
    for cls in discover_estimators():
        est = cls(**FAST_PARAMS.get(cls.__name__, {}))
        if cls.__name__ == "SoftTreeRegressor":
            est.set_params(tol=0.0)  # grow more than one split on this small target
        models[cls.__name__] = est.fit(X, target if "Regressor" in cls.__name__ else y)
    rf = RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(X, y)
    models["converted_classifier"] = from_sklearn(rf)
    models["converted_regressor"] = from_sklearn(
        DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, target)
    )
    models["finetuned"] = finetune(models["converted_classifier"], X, y, epochs=2)
    models["machine_sparse"] = to_machine(models["converted_classifier"], cache=False)
    models["machine_dense"] = to_machine(models["HingeForestClassifier"], cache=False)
    assert sorted(models) == sorted(MODEL_NAMES)
    folder = tempfile.mkdtemp(prefix="obliquetrees-adversarial-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "models.pkl"
    path.write_bytes(pickle.dumps({name: pickle.dumps(m) for name, m in models.items()}))
    return str(path)


def load_blobs(path):
    """``{name: pickled model}`` written by :func:`model_file`."""
    return pickle.loads(Path(path).read_bytes())


def is_machine(model):
    return type(model).__name__ == "DecisionMachine"


def container(model):
    """The packed arrays behind an estimator: ``tree_`` or ``forest_``."""
    return model.__dict__.get("tree_", None) or model.forest_


def predict(model, X):
    """The model's float output: machine sums, class probabilities or predictions."""
    if is_machine(model):
        return model.predict_value(np.asarray(X, dtype=np.float32))
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)
    return np.asarray(model.predict(X), dtype=np.float64).reshape(X.shape[0], -1)


def outcome(blob, edit, X):
    """What loading ``blob`` after ``edit`` gives: ``"rejected"``, ``"correct"`` or why not.

    ``"rejected"``: ``ValueError`` at ``pickle.loads``; ``"correct"``: loaded
    and predicting gives the unedited model's output or a ``ValueError``.
    Any other exception propagates; a crash or hang kills the interpreter.
    """
    expected = predict(pickle.loads(blob), X)
    model = pickle.loads(blob)
    edit(model)
    edited = pickle.dumps(model)
    try:
        model = pickle.loads(edited)
    except ValueError:
        return "rejected"
    try:
        got = predict(model, X)
    except ValueError:
        return "correct"
    return "correct" if np.array_equal(got, expected) else "wrong prediction"


def _set(obj, name, index, value):
    vars(obj)[name][index] = value  # the stored array (not one built on access)


def _set_feature_id(obj, value):
    """Store feature id ``value`` in ``obj``: over its first stored id, or as the only one.

    A container whose splits are all dense stores no ids (format 4); an id
    added to it makes the stored ids too many for its weights.
    """
    stored = vars(obj)["weight_index"]
    if stored.size:
        stored[0] = value
    else:
        obj.weight_index = np.array([value], dtype=stored.dtype)


def _first_internal(tree_arrays, count=1):
    left = tree_arrays.children_left
    stop = tree_arrays.node_offset[1] if hasattr(tree_arrays, "node_offset") else left.shape[0]
    internal = np.flatnonzero(left[:stop] != -1)
    assert internal.size >= count, "the first tree needs more internal nodes for this case"
    return internal[:count]


def _share_child(c):
    i, j = _first_internal(c, 2)
    c.children_left[j] = c.children_left[i]


def tree_edits(model):
    """The named edits of the required cases for an estimator's container."""
    c = container(model)
    i = int(_first_internal(c)[0])
    deep = int(_first_internal(c, 2)[1])
    edits = {
        "child id 1e9": lambda m: _set(container(m), "children_left", i, 10**9),
        "feature index 1e8": lambda m: _set_feature_id(container(m), 10**8),
        "child points back to the root": lambda m: _set(container(m), "children_right", deep, 0),
        "node is its own child": lambda m: _set(container(m), "children_left", deep, deep),
        "negative child id": lambda m: _set(container(m), "children_right", i, -7),
        "two parents share a child": lambda m: _share_child(container(m)),
        "truncated children": lambda m: setattr(
            container(m), "children_left", container(m).children_left[:-1]
        ),
        "truncated weights": lambda m: setattr(
            container(m), "weight_value", container(m).weight_value[:-1]
        ),
        "truncated values": lambda m: setattr(container(m), "value", container(m).value[:-1]),
        "lowered n_features": lambda m: setattr(container(m), "n_features", c.n_features - 1),
        "raised n_features": lambda m: setattr(container(m), "n_features", c.n_features + 1),
        "lowered n_features and n_features_in_": lambda m: (
            setattr(container(m), "n_features", c.n_features - 1),
            setattr(m, "n_features_in_", c.n_features - 1),
        ),
        "NaN weight": lambda m: _set(container(m), "weight_value", 0, np.nan),
        "NaN leaf value": lambda m: _set(container(m), "value", -1, np.nan),
        "n_features_in_ edited": lambda m: setattr(m, "n_features_in_", m.n_features_in_ + 1),
        "wrong depth": lambda m: _set(container(m), "depth", -1, 10**6),
    }
    if "_leaf_counts" in model.__dict__:
        # hinge forests save no trees (they are built from the model and these
        # counts at load): the edits of the trees become edits of what is saved
        edits = {
            name: edit
            for name, edit in edits.items()
            if "n_features_in_" in name and "and" not in name
        }
        edits.update(
            {
                "hinge leaf counts truncated": lambda m: setattr(
                    m, "_leaf_counts", m._leaf_counts[:, :-1]
                ),
                "hinge NaN leaf count": lambda m: _set(m, "_leaf_counts", (0, 0), np.nan),
                "hinge negative feat": lambda m: _set(m._model, "feat", (0, -1), -1),
                "hinge NaN leaf weight": lambda m: _set(m._model, "W", (0, -1, 0), np.nan),
                "hinge x_scale truncated": lambda m: setattr(
                    m._model, "x_scale", m._model.x_scale[:-1]
                ),
            }
        )
    if "_model" in model.__dict__:
        edits.update(
            {
                "hinge W truncated": lambda m: setattr(m._model, "W", m._model.W[:, :-1]),
                "hinge feat 1e8": lambda m: _set(m._model, "feat", (0, 0), 10**8),
                "hinge A narrower": lambda m: setattr(m._model, "A", m._model.A[:, :-1]),
                "hinge NaN threshold": lambda m: _set(m._model, "thr", (0, 0), np.nan),
            }
        )
    if hasattr(model, "classes_"):
        edits["classes_ truncated"] = lambda m: setattr(m, "classes_", m.classes_[:-1])
    return edits


def machine_edits(machine):
    """The named edits of the required cases for a DecisionMachine."""
    edits = {
        "template_skip 1e9": lambda m: _set(m, "template_skip", 0, 10**9),
        "template_skip back to the first leaf": lambda m: m.template_skip.fill(0),
        "B column 1e9": lambda m: _set(m.B, "indices", 0, 10**9),
        "B sign flipped": lambda m: _set(m.B, "data", 0, -m.B.data[0]),
        "B row pointer truncated": lambda m: setattr(m.B, "indptr", m.B.indptr[:-1]),
        "leaf_offset past the leaves": lambda m: _set(m, "leaf_offset", -1, 10**9),
        "negative leaf_node": lambda m: _set(m, "leaf_node", 0, -3),
        "V truncated": lambda m: setattr(m, "V", m.V[:-1]),
        "NaN bias": lambda m: _set(m, "bias", 0, np.nan),
        "lowered n_features": lambda m: setattr(m, "n_features", m.n_features - 1),
        "raised n_features": lambda m: setattr(m, "n_features", m.n_features + 1),
    }
    if hasattr(machine.S, "indices"):
        edits["S feature index 1e8"] = lambda m: _set(m.S, "indices", 0, 10**8)
    else:
        edits["S truncated"] = lambda m: setattr(m, "S", m.S[:, :-1])
    return edits


def edits_for(model):
    return machine_edits(model) if is_machine(model) else tree_edits(model)


def corruptible_arrays(model):
    """``(owner, attribute)`` of every array a random corruption may hit."""
    if is_machine(model):
        return [
            (model, n)
            for n in (
                "bias",
                "V",
                "split_node",
                "leaf_node",
                "split_offset",
                "leaf_offset",
                "template_skip",
            )
        ] + [(model.B, n) for n in ("indptr", "indices", "data")]
    c = container(model)
    names = list(TREE_ARRAYS)
    if hasattr(c, "node_offset"):
        names += ["node_offset", "weight_offset"]
    found = [(c, n) for n in names]
    if "_leaf_counts" in model.__dict__:  # hinge forests save these, not their trees
        found = [(model, "_leaf_counts")]
    if "_model" in model.__dict__:
        found += [
            (model._model, n)
            for n in ("A", "bn_mean", "bn_var", "feat", "thr", "W", "x_mean", "x_scale")
        ]
    return found
