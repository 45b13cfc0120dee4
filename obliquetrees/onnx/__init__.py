"""Export fitted models to ONNX, for prediction without Python.

:func:`to_onnx` writes any fitted obliquetrees estimator (forests, single
trees, soft trees, hinge forests, converted and fine-tuned scikit-learn
forests) as an ``onnx.ModelProto`` that onnxruntime (or any ONNX runtime with
the ``ai.onnx.ml`` domain) runs on batches of any size, in float32 or
float64. :func:`register_skl2onnx` lets ``skl2onnx.to_onnx`` convert
pipelines that contain them.

How an oblique model becomes ONNX: ONNX's ``TreeEnsemble*`` operators test
one feature per node, so the margins of all oblique splits are computed first
by one ``MatMul`` (``Z = X S + b``, the decision-machine view of
:mod:`obliquetrees.machine`), and a standard tree ensemble then routes on
those *virtual features* (``z <= 0`` goes left, the package's ties). Splits
with one weight of +-1 (converted scikit-learn trees) route on the raw
feature. Soft routing evaluates its sigmoid gates level by level; hinge
forests run their linear layer, batch norm and margin-weighted leaves.
Missing values (NaN) are handled as ``predict`` handles them: each split
adds its weights' missing-value terms.

Outputs follow skl2onnx's conventions: classifiers give ``label`` (int64, or
string for string classes) and ``probabilities`` (no ZipMap), regressors
``variable`` of shape (n_samples, n_outputs). The input is ``X``.

Agreement with ``predict``: every computation runs in float64 (as the
package's own kernels, which read float32 input in float64), so labels are
those of ``predict`` except where a margin is within rounding of 0 (the
matrix product sums in another order than the traversal), and probabilities
and values agree to about 1e-12 relative (float64 outputs) or to float32
rounding (float32 outputs). Infinite inputs, which ``predict`` refuses,
give undefined outputs. Sparse input must be densified by the caller.

Needs the optional dependencies ``onnx`` (and ``onnxruntime`` to run the
result): ``pip install onnx onnxruntime``, or ``pip install ".[onnx]"`` in a clone.

Examples
--------
>>> import numpy as np
>>> import onnxruntime as ort
>>> from sklearn.datasets import load_iris
>>> from obliquetrees import CO2ForestClassifier
>>> from obliquetrees.onnx import to_onnx
>>> X, y = load_iris(return_X_y=True)
>>> model = CO2ForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
>>> onx = to_onnx(model, dtype=np.float64)
>>> session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
>>> label, proba = session.run(None, {"X": X})
>>> bool((label == model.predict(X)).all())
True
"""

import numbers

import numpy as np
from sklearn.base import ClassifierMixin, is_classifier
from sklearn.utils.validation import check_is_fitted

from obliquetrees.base import BaseObliqueEstimator

__all__ = ["to_onnx", "register_skl2onnx"]


def _require_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError(
            'ONNX export needs the package "onnx": pip install onnx onnxruntime.'
        ) from None


def _check_model(model):
    """``model`` as loading it from a pickle rebuilds it: every fitted array checked.

    The graph is built from the arrays as they are (a lowered ``depth`` or
    a NaN ``value`` would export wrong probabilities, an id out of range a
    raw ``IndexError`` or a graph no runtime loads), so the estimator goes
    through exactly the checks unpickling runs: its ``__setstate__`` on its
    ``__getstate__``, which shares the arrays (none is copied) and rebuilds
    what pickles leave out. The result is what is exported.

    Raises
    ------
    TypeError
        If ``model`` is not an obliquetrees estimator.
    NotFittedError
        If it is not fitted.
    ValueError
        If its fitted arrays fail those checks (the unpickling message).
    """
    if not isinstance(model, BaseObliqueEstimator):
        raise TypeError(
            f"to_onnx takes a fitted obliquetrees estimator; got a {type(model).__name__}."
        )
    check_is_fitted(model)
    checked = type(model).__new__(type(model))
    try:
        checked.__setstate__(model.__getstate__())
    except ValueError as exc:
        raise ValueError(
            f"to_onnx refuses this {type(model).__name__}: its fitted arrays fail the "
            f"checks a loaded model passes ({exc})"
        ) from None
    return checked


def _label_type(classes):
    """ONNX element type and constant array of the ``label`` output."""
    from onnx import TensorProto

    kind = classes.dtype.kind
    if kind in "biu":
        return TensorProto.INT64, classes.astype(np.int64)
    if kind == "f":
        return TensorProto.DOUBLE, classes.astype(np.float64)
    if kind in "US" or (kind == "O" and all(isinstance(c, str) for c in classes)):
        return TensorProto.STRING, np.asarray([str(c) for c in classes])
    raise TypeError(
        f"to_onnx exports classifiers whose classes are integers, floats or strings; "
        f"classes_ has dtype {classes.dtype}."
    )


def _n_outputs(model):
    return len(model.classes_) if is_classifier(model) else model._forest().n_outputs


def _model_outputs(g, model, inp):
    """``(scores, values)`` of ``model`` on input ``inp`` (names of float64 tensors).

    ``scores`` is what ``predict`` takes the row-wise argmax of (None for
    regressors); ``values`` is ``predict_proba`` (classifiers) or
    ``predict`` (regressors, (n_samples, n_outputs)). The graph follows the
    model's own account of how it predicts (``_prediction_form``), so no
    method's classes are imported here.
    """
    kind, data = model._prediction_form()
    writers = {
        "hard": _hard_outputs,
        "routed": _routed_outputs,
        "soft_tree": _soft_tree_outputs,
        "hinge": _hinge_outputs,
    }
    if kind not in writers:
        raise TypeError(f"to_onnx does not know how {type(model).__name__} predicts ({kind!r}).")
    return writers[kind](g, inp, model._forest(), is_classifier(model), **data)


def _hard_mean(g, inp, forest, z_all=None):
    from obliquetrees.onnx._parts import hard_sum

    total = hard_sum(g, inp, forest, z_all)
    return g.op("Div", [total, g.const(np.array(float(forest.n_trees)), "n_trees")], "mean")


def _hard_outputs(g, inp, forest, classifier):
    """The mean of the reached leaves' values (hard routing)."""
    mean = _hard_mean(g, inp, forest)
    return (mean if classifier else None), mean


def _routed_outputs(g, inp, forest, classifier, proba_rule, predict_rule, steepness):
    """E2EDT: the probabilistic output and ``predict`` each by soft or hard routing."""
    from obliquetrees.onnx._parts import soft_sum

    soft = z_all = None
    if "soft" in (proba_rule, predict_rule):
        trees = forest.trees
        values = [t.value for t in trees]
        total, z_all = soft_sum(g, inp, trees, values, steepness, forest.n_features)
        if classifier:  # as _mean_of_soft: the mean distribution, renormalised
            norm = g.op("ReduceSum", [total, g.const(np.array([1]), "axis1")], keepdims=1)
        else:  # the mean over the trees
            norm = g.const(np.array(float(forest.n_trees)), "n_trees_soft")
        soft = g.op("Div", [total, norm], "proba_soft" if classifier else "mean_soft")
    hard_out = _hard_mean(g, inp, forest, z_all) if "hard" in (proba_rule, predict_rule) else None
    outputs = {"soft": soft, "hard": hard_out}
    if not classifier:
        return None, outputs[predict_rule]
    return outputs[predict_rule], outputs[proba_rule]


def _soft_tree_outputs(g, inp, forest, classifier):
    """One soft-routed tree (soft trees): leaf log-probabilities under softmax, or values."""
    from obliquetrees.onnx._parts import soft_sum

    tree = forest.trees[0]
    if classifier:  # as SoftTreeClassifier: softmax of soft-routed leaf log-probabilities
        leaf = np.log(np.maximum(tree.value, 1e-300))
        scores, _ = soft_sum(g, inp, [tree], [leaf], [None], forest.n_features)
        proba = g.op("Softmax", [scores], "proba", axis=1)
        return proba, proba
    values, _ = soft_sum(g, inp, [tree], [tree.value], [None], forest.n_features)
    return None, values


def _hinge_outputs(g, inp, forest, classifier, model, missing, bn_eps, y_mean=0.0, y_scale=1.0):
    """A hinge model's forward pass; regressors scale back to the units of ``y``."""
    from obliquetrees.onnx._parts import hinge_decision

    F = hinge_decision(g, inp, model, missing, bn_eps)
    if classifier:
        return F, g.op("Softmax", [F], "proba", axis=1)
    scaled = g.op("Mul", [F, g.const(np.atleast_1d(y_scale), "y_scale")])
    return None, g.op("Add", [scaled, g.const(np.atleast_1d(y_mean), "y_mean")])


def _double_input(g, model, x_name):
    """The graph's input ``x_name`` as the float64 matrix the model's parts read."""
    from obliquetrees.onnx._parts import DoubleInput

    via_float32 = tuple(model._predict_dtype) == (np.float32,)  # converted scikit-learn models
    return DoubleInput(g, x_name, via_float32)


def _categorical_inputs(g, model, table, elem):
    """Inputs of a model with categorical features, and its float64 input matrix.

    ``X`` holds the numeric features in their order (absent if none); each
    categorical feature is an input of its own, shape (n_samples, 1), named
    as the feature (``x<j>`` without feature names): strings for ``str``
    categories, ``elem`` floats for number labels. Its labels become their
    coordinates in the graph, as ``predict`` maps them (NaN if missing or
    unseen, so a missing value is an empty string or NaN).
    """
    from onnx import TensorProto, helper

    from obliquetrees.onnx._parts import DoubleInput, assemble_columns, category_coordinates

    n = int(model.n_features_in_)
    names = getattr(model, "feature_names_in_", None)
    numeric = np.setdiff1d(np.arange(n), table.columns)
    inputs, parts, order = [], [], np.empty(n, dtype=np.int64)
    if numeric.size:
        x_name = g.reserve("X")
        inputs.append(helper.make_tensor_value_info(x_name, elem, ["N", int(numeric.size)]))
        parts.append(g.op("Cast", [x_name], "x_numeric", to=TensorProto.DOUBLE))
        order[numeric] = np.arange(numeric.size)
    for i, j in enumerate(table.columns):
        name = g.reserve(str(names[j]) if names is not None else f"x{j}")
        known = table.categories[i]
        kind = TensorProto.STRING if known.dtype.kind == "O" else elem
        inputs.append(helper.make_tensor_value_info(name, kind, ["N", 1]))
        parts.append(category_coordinates(g, name, known, table.values[i]))
        order[j] = numeric.size + i
    return inputs, DoubleInput.of_double(g, assemble_columns(g, parts, order))


def _build(g, model, inp, dtype, output_names):
    """Add ``model``'s graph from its input ``inp`` to ``output_names`` (``dtype`` floats)."""
    from obliquetrees.onnx._graph import ONNX_TYPE

    scores, values = _model_outputs(g, model, inp)
    if is_classifier(model):
        label_name, proba_name = output_names
        _, classes = _label_type(model.classes_)
        index = g.op("ArgMax", [scores], "class_index", axis=1, keepdims=0)
        g.op("Gather", [g.const(classes, "classes"), index], outputs=label_name, axis=0)
        g.op("Cast", [values], outputs=proba_name, to=ONNX_TYPE[dtype])
    else:
        g.op("Cast", [values], outputs=output_names[0], to=ONNX_TYPE[dtype])


def _opsets(target_opset):
    """``{domain: version}`` of the exported model."""
    import onnx

    from obliquetrees.onnx._graph import DEFAULT_OPSET, MIN_OPSET, ML_DOMAIN, ML_OPSET

    newest = onnx.defs.onnx_opset_version()
    if target_opset is None:
        main = min(DEFAULT_OPSET, newest)
    elif isinstance(target_opset, dict):
        main = target_opset.get("", min(DEFAULT_OPSET, newest))
        ml = target_opset.get(ML_DOMAIN, ML_OPSET)
        if not isinstance(ml, numbers.Integral) or ml < ML_OPSET:
            raise ValueError(
                f"target_opset[{ML_DOMAIN!r}] must be at least {ML_OPSET} "
                f"(TreeEnsembleRegressor with float64 thresholds); got {ml!r}."
            )
    else:
        main = target_opset
    if isinstance(main, bool) or not isinstance(main, numbers.Integral):
        raise TypeError(f"target_opset must be an int or a dict; got {target_opset!r}.")
    if not MIN_OPSET <= main <= newest:
        raise ValueError(
            f"target_opset must be between {MIN_OPSET} and {newest} (the newest this onnx "
            f"knows); got {main}."
        )
    return {"": int(main), ML_DOMAIN: ML_OPSET}


def to_onnx(model, *, target_opset=None, dtype=np.float32):
    """Export a fitted estimator as an ONNX model.

    Parameters
    ----------
    model : fitted obliquetrees estimator
        Any public estimator, including ``from_sklearn`` and ``finetune``
        results.
    target_opset : int or dict, default=None
        Version of the main ONNX domain (13 or later; default 17), or a dict
        ``{"": version, "ai.onnx.ml": version}`` as skl2onnx takes it (the
        ML domain needs version 3).
    dtype : {np.float32, np.float64}, default=np.float32
        Element type of the input ``X`` and of the float outputs. The graph
        computes in float64 either way.

    Returns
    -------
    onnx.ModelProto
        Input ``X`` of shape (n_samples, n_features_in_); a model fitted
        with categorical features takes its numeric features as ``X`` and
        each categorical feature as an input of its own (see Notes).
        Classifiers output
        ``label`` (n_samples,; int64 for integer or boolean classes, float64
        for float classes, string for string classes) and ``probabilities``
        (n_samples, n_classes), regressors ``variable`` (n_samples,
        n_outputs).

    Raises
    ------
    TypeError
        If ``model`` is not an obliquetrees estimator, or its classes are
        neither integers, floats nor strings.
    NotFittedError
        If ``model`` is not fitted.
    ValueError
        If ``dtype`` or ``target_opset`` is not supported, a tree has 2**24
        nodes or more, or the fitted arrays fail the checks that loading
        the model from a pickle runs (a tampered model: the message names
        the defect).

    Notes
    -----
    Categorical features (``category_coordinates_``): ``X`` holds the
    numeric features in their order (no ``X`` if there is none), and each
    categorical feature is an input of shape (n_samples, 1) named as the
    feature (``x<j>`` when fitted without feature names), of strings for
    ``str`` categories or of ``dtype`` for number labels. The graph maps
    each label to its coordinate as ``predict`` does: a category not seen
    in training, an empty string or NaN is a missing value.
    """
    _require_onnx()
    from onnx import checker, helper

    from obliquetrees import __version__
    from obliquetrees.onnx._graph import ONNX_TYPE, GraphBuilder

    model = _check_model(model)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        dtype = None
    if dtype not in ONNX_TYPE:
        raise ValueError("dtype must be np.float32 or np.float64.")
    opsets = _opsets(target_opset)
    g = GraphBuilder()
    n_out = _n_outputs(model)
    elem = ONNX_TYPE[dtype]
    table = model.__dict__.get("category_coordinates_")
    if table is None:
        x_name = g.reserve("X")
        inputs = [helper.make_tensor_value_info(x_name, elem, ["N", int(model.n_features_in_)])]
        inp = _double_input(g, model, x_name)
    else:
        inputs, inp = _categorical_inputs(g, model, table, elem)
    if is_classifier(model):
        names = [g.reserve("label"), g.reserve("probabilities")]
        label_type, _ = _label_type(model.classes_)
        outputs = [
            helper.make_tensor_value_info(names[0], label_type, ["N"]),
            helper.make_tensor_value_info(names[1], elem, ["N", n_out]),
        ]
    else:
        names = [g.reserve("variable")]
        outputs = [helper.make_tensor_value_info(names[0], elem, ["N", n_out])]
    _build(g, model, inp, dtype, names)
    graph = helper.make_graph(
        g.nodes, type(model).__name__, inputs, outputs, initializer=g.initializers
    )
    opset_ids = [helper.make_opsetid(domain, version) for domain, version in opsets.items()]
    onx = helper.make_model(
        graph,
        opset_imports=opset_ids,
        producer_name="obliquetrees",
        producer_version=__version__,
    )
    onx.ir_version = max(helper.find_min_ir_version_for(opset_ids), 8)
    checker.check_model(onx)
    return onx


# ---------------------------------------------------------------- skl2onnx
def _skl2onnx_shape(operator):
    """skl2onnx shape calculator: output types from the input's type."""
    from skl2onnx.common.data_types import (
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    model = operator.raw_operator
    in_type = operator.inputs[0].type
    n = in_type.shape[0] if in_type.shape else None
    tensor = DoubleTensorType if isinstance(in_type, DoubleTensorType) else FloatTensorType
    n_out = _n_outputs(model)
    if is_classifier(model):
        kind = model.classes_.dtype.kind
        label = (
            Int64TensorType
            if kind in "biu"
            else DoubleTensorType
            if kind == "f"
            else StringTensorType
        )
        operator.outputs[0].type = label([n])
        operator.outputs[1].type = tensor([n, n_out])
    else:
        operator.outputs[0].type = tensor([n, n_out])


def _skl2onnx_convert(scope, operator, container):
    """skl2onnx converter: the graph of :func:`to_onnx` inside a pipeline's graph."""
    from skl2onnx.common.data_types import DoubleTensorType

    from obliquetrees.onnx._graph import MIN_OPSET, Skl2OnnxBuilder

    model = _check_model(operator.raw_operator)
    opset = container.target_opset
    if opset is not None and opset < MIN_OPSET:
        raise ValueError(
            f"{type(model).__name__} exports to ONNX opset {MIN_OPSET} or later; "
            f"skl2onnx was asked for opset {opset}."
        )
    if model.__dict__.get("category_coordinates_") is not None:
        raise NotImplementedError(
            f"{type(model).__name__} was fitted with categorical features: export it alone "
            "with obliquetrees.onnx.to_onnx (one input per categorical feature); inside a "
            "skl2onnx pipeline it would receive one numeric matrix."
        )
    g = Skl2OnnxBuilder(scope, container)
    dtype = np.float64 if isinstance(operator.inputs[0].type, DoubleTensorType) else np.float32
    names = [out.full_name for out in operator.outputs]
    inp = _double_input(g, model, operator.inputs[0].full_name)
    _build(g, model, inp, np.dtype(dtype), names)


def register_skl2onnx():
    """Register every public estimator with skl2onnx.

    After this call, ``skl2onnx.to_onnx`` converts pipelines that contain
    obliquetrees estimators (e.g. ``make_pipeline(StandardScaler(),
    CO2ForestClassifier())``). Classifier outputs then follow skl2onnx's
    defaults (a ZipMap on the probabilities unless the option
    ``{"zipmap": False}`` is given). Calling it again changes nothing.

    Raises
    ------
    ImportError
        If skl2onnx is not installed.
    """
    try:
        from skl2onnx import update_registered_converter
    except ImportError:
        raise ImportError(
            'register_skl2onnx needs the package "skl2onnx": pip install skl2onnx.'
        ) from None
    from obliquetrees._registry import DERIVED_MODELS, ESTIMATORS, load

    for name in [*ESTIMATORS, *DERIVED_MODELS]:
        cls = load(name)
        # skl2onnx's classifier parser reads "nocl" (labels as class indices): not offered
        options = {"zipmap": [True, False, "columns"], "nocl": [False]}
        update_registered_converter(
            cls,
            f"Obliquetrees{cls.__name__}",
            _skl2onnx_shape,
            _skl2onnx_convert,
            options=options if issubclass(cls, ClassifierMixin) else None,
        )
