"""Turn fitted scikit-learn trees and forests into obliquetrees containers.

An axis-aligned split ``x_j <= threshold`` (left) becomes the oblique split
``1.0 * x_j - threshold`` with one stored weight: the sample goes right iff
``x_j - threshold > 0``, which in IEEE arithmetic is exactly ``x_j >
threshold``. Inputs are cast to float32 before routing, as scikit-learn does,
so converted models route every sample exactly like the original.

The converted predictor runs on the package's traversal kernels (one kernel
call for the whole forest) and is the starting point of decision-machine
fine-tuning.

Examples
--------
>>> from sklearn.datasets import load_iris
>>> from sklearn.ensemble import RandomForestClassifier
>>> from obliquetrees.convert import from_sklearn
>>> X, y = load_iris(return_X_y=True)
>>> rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)
>>> model = from_sklearn(rf)
>>> bool((model.predict(X) == rf.predict(X)).all())
True
"""

import numpy as np
from sklearn.base import is_classifier
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.validation import check_is_fitted

from obliquetrees._core.tree import ObliqueTree
from obliquetrees.base import (
    BaseObliqueForest,
    CreatedFittedMixin,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import Integral, validate_params
from obliquetrees.utils.validation import check_monotonic_cst

__all__ = ["ConvertedForestClassifier", "ConvertedForestRegressor", "from_sklearn"]

_SINGLE_TREES = (DecisionTreeClassifier, DecisionTreeRegressor)
_FORESTS = (
    RandomForestClassifier,
    RandomForestRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
)


class _ConvertedMixin(CreatedFittedMixin):
    # scikit-learn casts prediction input to float32; so do we, so that
    # routing matches the original model bit for bit.
    _predict_dtype = (np.float32,)
    _created_by = "obliquetrees.convert.from_sklearn()"
    _refit_advice = "refit the scikit-learn model and convert it again."


@fill_doc
class ConvertedForestClassifier(_ConvertedMixin, ObliqueClassifierMixin, BaseObliqueForest):
    """A scikit-learn tree or forest classifier running on obliquetrees kernels.

    Build it with :func:`from_sklearn`; it is already fitted.

    %(created_classifier_sections)s
    monotonic_cst_ : ndarray of int8 of shape (n_features_in_,) or None
        The source's ``monotonic_cst`` (the probability of ``classes_[1]``
        only rises with features at 1, only falls with those at -1), which
        :func:`obliquetrees.machine.finetune` keeps by default; None:
        unconstrained.
    """


@fill_doc
class ConvertedForestRegressor(_ConvertedMixin, ObliqueRegressorMixin, BaseObliqueForest):
    """A scikit-learn tree or forest regressor running on obliquetrees kernels.

    Build it with :func:`from_sklearn`; it is already fitted.

    %(created_regressor_sections)s
    monotonic_cst_ : ndarray of int8 of shape (n_features_in_,) or None
        The source's ``monotonic_cst`` (the prediction only rises with
        features at 1, only falls with those at -1), which
        :func:`obliquetrees.machine.finetune` keeps by default; None:
        unconstrained.
    """


def _convert_tree(sk_tree, n_features, classifier):
    """One ``sklearn.tree._tree.Tree`` as an :class:`ObliqueTree`.

    ``x_f <= t`` goes left, so the split is ``x_f - t > 0`` (right). A NaN
    goes where scikit-learn sends it (``missing_go_to_left``): its
    missing-value term is ``t`` (margin 0: left) or the next float above
    ``t`` (margin > 0: right). A split scikit-learn learned on missing values
    alone has ``t = inf`` (every observed value goes left): it is stored as
    the weight 0, bias 0 and missing-value term 1 (NaN right) or 0.
    """
    left = sk_tree.children_left
    internal = left != -1
    threshold = sk_tree.threshold[internal]
    go_left = getattr(sk_tree, "missing_go_to_left", None)
    if go_left is None:  # scikit-learn < 1.3: NaN goes to the child with more samples
        counts = sk_tree.weighted_n_node_samples
        go_left = counts[left] >= counts[sk_tree.children_right]
    go_left = np.asarray(go_left, dtype=bool)[internal]
    only_missing = np.isposinf(threshold)
    weight = np.where(only_missing, 0.0, 1.0)
    bias = np.zeros(sk_tree.node_count)
    bias[internal] = np.where(only_missing, 0.0, -threshold)
    if only_missing.any():
        threshold = np.where(only_missing, 0.0, threshold)
    missing = np.where(go_left, threshold, np.nextafter(threshold, np.inf))
    missing[only_missing] = np.where(go_left[only_missing], 0.0, 1.0)
    indptr = np.zeros(sk_tree.node_count + 1, dtype=np.int64)
    np.cumsum(internal, out=indptr[1:])
    value = np.asarray(sk_tree.value, dtype=np.float64)
    if classifier:
        value = value[:, 0, :]
        # Older scikit-learn stores weighted counts, newer ones fractions;
        # normalising gives the tree's predict_proba either way.
        totals = value.sum(axis=1, keepdims=True)
        value = np.divide(value, totals, out=np.zeros_like(value), where=totals > 0)
    else:
        value = value[:, :, 0]
    return ObliqueTree(
        children_left=left,
        children_right=sk_tree.children_right,
        weight_indptr=indptr,
        weight_index=sk_tree.feature[internal],
        weight_value=weight,
        bias=bias,
        value=value,
        n_node_samples=sk_tree.weighted_n_node_samples,
        n_features=n_features,
        weight_missing=missing,
    )


@validate_params(
    {"model": "no_validation", "n_jobs": [Integral, None]},
    prefer_skip_nested_validation=True,
)
def from_sklearn(model, n_jobs=None):
    """Convert a fitted scikit-learn tree or forest.

    Parameters
    ----------
    model : estimator
        A fitted DecisionTreeClassifier, DecisionTreeRegressor,
        RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier or
        ExtraTreesRegressor. Classifiers must be single-output.
    n_jobs : int, default=None
        Threads the converted model uses for prediction.

    Returns
    -------
    converted : ConvertedForestClassifier or ConvertedForestRegressor
        Fitted; a single tree becomes a forest of one tree. It predicts what
        ``model`` predicts (inputs are cast to float32 like scikit-learn;
        NaN input is rejected, so models relying on scikit-learn's missing
        value support are routed only on complete rows). ``monotonic_cst_``
        holds the source's ``monotonic_cst`` (int8, or None when it
        constrains nothing).

    Raises
    ------
    TypeError
        If ``model`` is not one of the supported types.
    ValueError
        If ``model`` is a multi-output classifier.
    """
    if not isinstance(model, _SINGLE_TREES + _FORESTS):
        supported = ", ".join(c.__name__ for c in _SINGLE_TREES + _FORESTS)
        raise TypeError(f"from_sklearn supports {supported}; got {type(model).__name__}.")
    check_is_fitted(model)
    classifier = is_classifier(model)
    if classifier and model.n_outputs_ != 1:
        raise ValueError("Multi-output classifiers cannot be converted.")
    estimators = [model] if isinstance(model, _SINGLE_TREES) else model.estimators_
    trees = [_convert_tree(est.tree_, model.n_features_in_, classifier) for est in estimators]
    if classifier:
        converted = ConvertedForestClassifier(n_jobs=n_jobs)
        converted.classes_ = model.classes_
        converted.n_classes_ = len(model.classes_)
    else:
        converted = ConvertedForestRegressor(n_jobs=n_jobs)
        converted.n_outputs_ = model.n_outputs_
    converted.n_features_in_ = model.n_features_in_
    if hasattr(model, "feature_names_in_"):
        converted.feature_names_in_ = model.feature_names_in_
    converted.monotonic_cst_ = check_monotonic_cst(converted, getattr(model, "monotonic_cst", None))
    return converted._set_trees(trees)
