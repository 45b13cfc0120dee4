"""Decision machines: trees and forests as matrices (Zhang, "Decision Machines").

A binary tree with ``L`` leaves and ``L - 1`` splits is four matrices:

- ``S`` (splits x features): the split weights, one row per internal node;
- ``t`` (splits,): the thresholds, ``t = -b`` in the container's terms (a
  split sends ``x`` right iff ``w . x + b > 0``, i.e. ``S x - t > 0``);
- ``B`` in {-1, 0, 1}^(L x (L-1)), the *template matrix*: row ``l`` holds, for
  every internal node, +1 if leaf ``l`` lies in its right subtree, -1 if in
  its left subtree, 0 if the node is not an ancestor of ``l``;
- ``V`` (leaves x outputs): the leaf values.

With ``sgn(0) = -1`` (ties go left, the package's rule) and ``B~ = diag(1 /
||B_l||_1) B``, the leaf reached by ``x`` is ``argmax_l (B~ sgn(S x - t))_l``
(the paper's "logical decision machine", eq. 3; the maximum is exactly 1
and unique, Theorem 1). Replacing ``sgn`` by an odd saturating ``sigma`` and
the argmax by a softmax with temperature gives the differentiable "analytic
decision machine" (eq. 8)::

    T(x) = softmax(B~ sigma(S x - t) / temperature) V

A forest is the block-diagonal stack of its trees (paper eq. 16), its output
the sum (``predict_value``) or mean of the trees' outputs.

What this module offers
-----------------------
- :func:`to_machine` builds a :class:`DecisionMachine` from any fitted tree or
  forest of the package, a converted scikit-learn model (or a fitted
  scikit-learn tree/forest, converted on the fly), an :class:`ObliqueTree`
  or an :class:`ObliqueForest`. ``S`` and ``B`` are scipy CSR matrices,
  ``S`` dense when that is smaller.
- Matrix-form hard evaluation (:meth:`DecisionMachine.apply`,
  :meth:`DecisionMachine.predict_value`, :func:`predict_value`): all split
  margins of a row block in one BLAS product ``X S^T``, then leaf selection by
  template matching (numba). Same leaves as the traversal kernels except
  where a margin is within rounding of 0 (oblique splits only: the product
  sums in a different order; axis-aligned splits give bit-identical margins).
- The relaxation (:meth:`DecisionMachine.relaxed_value`) with the paper's
  saturated linear ``sigma`` or ``tanh(z / eps)``.
- :func:`choose_inference_path`: the measured rule that picks BLAS or
  traversal for a forest and a batch (``benchmarks/results/decision_machine.md``).
- :func:`finetune`: end-to-end fine-tuning of the split weights and leaf
  values of a fitted classifier or regressor tree/forest with its structure
  kept, through the relaxation with an annealed temperature;
  :func:`refit_leaves`, the leaf-only baseline.

Examples
--------
>>> import numpy as np
>>> from sklearn.datasets import load_iris
>>> from sklearn.ensemble import RandomForestClassifier
>>> from obliquetrees.machine import to_machine
>>> X, y = load_iris(return_X_y=True)
>>> rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
>>> dm = to_machine(rf)
>>> bool(np.array_equal(dm.apply(X.astype(np.float32)), rf.apply(X.astype(np.float32))))
True

References
----------
J. Zhang, "Decision Machines: An Extension of Decision Trees",
arXiv:2101.11347.
"""

import numpy as np

# The matrix form lives in _core.machine, the cost rule in _core.predict, the
# fine-tuning arithmetic in machine._finetune; this module is their public face
# and re-exports the names it documented before the split.
from obliquetrees._core import predict as _predict
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.machine import BLOCK_ELEMENTS, DecisionMachine, machine_of  # noqa: F401
from obliquetrees._core.missing import MissingValues
from obliquetrees._core.predict import MIN_BLAS_ROWS  # noqa: F401
from obliquetrees._core.tree import ObliqueTree
from obliquetrees._training._parallel import n_threads_from_jobs
from obliquetrees.base import (
    BaseObliqueForest,
    CreatedFittedMixin,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.machine import _finetune
from obliquetrees.machine._finetune import TRAIN_BLAS_THREADS, FinetuneConfig  # noqa: F401
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import (
    Integral,
    Interval,
    Real,
    StrOptions,
    validate_params,
)
from obliquetrees.utils.categorical import apply_categories

#: A positive finite float (NaN and inf fail it).
_POSITIVE = Interval(Real, 0, np.inf, closed="neither")
_NON_NEGATIVE_INT = Interval(Integral, 0, None, closed="left")
#: Parameters shared by relaxed_nll and relaxed_squared_error.
_RELAXED_CONSTRAINTS = {
    "machine": "no_validation",
    "X": ["array-like"],
    "temperature": [_POSITIVE],
    "eps": [_POSITIVE],
    "sigma": [StrOptions({"tanh", "saturated"})],
    "sample_weight": ["array-like", None],
    "W": ["array-like", None],
    "b": ["array-like", None],
    "V": ["array-like", None],
}

__all__ = [
    "DecisionMachine",
    "FinetunedForestClassifier",
    "FinetunedForestRegressor",
    "choose_inference_path",
    "finetune",
    "predict_value",
    "refit_leaves",
    "relaxed_nll",
    "relaxed_squared_error",
    "to_machine",
]


# ================================================================= building
def _as_forest(model):
    """The packed forest behind ``model`` (see :func:`to_machine`)."""
    if isinstance(model, ObliqueForest):
        return model
    if isinstance(model, ObliqueTree):
        return ObliqueForest.from_trees([model])
    if isinstance(model, list | tuple) and model and all(isinstance(t, ObliqueTree) for t in model):
        return ObliqueForest.from_trees(model)
    if hasattr(model, "_forest"):
        from obliquetrees.utils.validation import check_is_fitted

        check_is_fitted(model)
        return model._forest()
    if type(model).__module__.startswith("sklearn."):
        from obliquetrees.convert import from_sklearn

        return from_sklearn(model)._forest()
    raise TypeError(
        "Expected a fitted obliquetrees estimator, a fitted scikit-learn tree or forest, an "
        f"ObliqueTree, a list of them or an ObliqueForest; got {type(model).__name__}."
    )


@validate_params(
    {"model": "no_validation", "cache": ["boolean"]},
    prefer_skip_nested_validation=True,
)
def to_machine(model, cache=True):
    """The decision machine ``(S, t, B, V)`` of a fitted tree or forest.

    Parameters
    ----------
    model : estimator, ObliqueTree, list of ObliqueTree or ObliqueForest
        Any fitted tree or forest of the package, a converted scikit-learn
        model (:func:`obliquetrees.convert.from_sklearn`), or a fitted
        scikit-learn DecisionTree/RandomForest/ExtraTrees (converted first).
    cache : bool, default=True
        Keep the machine on the packed forest (a fitted estimator's, or the
        ``ObliqueForest`` given) and reuse it on the next call: trees and
        forests are never modified in place. A bare ``ObliqueTree`` or list of
        them is packed anew on every call, so nothing is reused for it.

    Returns
    -------
    machine : DecisionMachine
    """
    return machine_of(_as_forest(model), cache)


# ============================================================ inference path
def predict_value(forest, X, n_threads=1):
    """Matrix-form twin of :func:`obliquetrees._core.traversal.predict_value`.

    Parameters
    ----------
    forest : ObliqueForest (or anything :func:`to_machine` takes)
    X : ndarray of float32/float64 or CSR matrix, shape (n_samples, n_features)
    n_threads : int, default=1

    Returns
    -------
    total : ndarray of float64, shape (n_samples, n_outputs)
        Sum over the trees of the selected leaves' values.
    """
    return machine_of(_as_forest(forest)).predict_value(X, n_threads)


def inference_costs(forest, n_samples=1):
    """Modelled time (ns) of the two hard paths: ``{"blas": .., "traversal": ..}``.

    Parameters
    ----------
    forest : ObliqueForest
    n_samples : int, default=1
        Rows of the batch.
    """
    return _predict.inference_costs(_as_forest(forest), n_samples)


def choose_inference_path(forest, n_samples, sparse_input=False):
    """``"blas"`` or ``"traversal"``: the faster hard-inference path, by a measured rule.

    Parameters
    ----------
    forest : ObliqueForest (or anything :func:`to_machine` takes)
    n_samples : int
        Rows of the batch.
    sparse_input : bool, default=False
        CSR input always takes the traversal (its kernels scatter rows into
        dense blocks; the BLAS path would densify the whole margin product).

    Returns
    -------
    path : {"blas", "traversal"}

    Notes
    -----
    The rule compares modelled batch costs (:func:`inference_costs`), whose
    constants were fitted on this repository's benchmark grid (depth 2..12,
    features, batch size, forest size); batches smaller than
    ``MIN_BLAS_ROWS`` rows always traverse. What it encodes, as measured: the
    BLAS path evaluates all ``2^d - 1`` splits per tree instead of ``d``, so
    it wins only with dense oblique splits on many features and shallow
    trees (256 dense features: up to depth 6-7, up to ~30x on 30 trees;
    16 features: depth 2-3 at most); for axis-aligned splits (converted
    scikit-learn forests) the traversal is faster or within 1.5x everywhere.
    The rule picked the faster path in 90 % of the grid's configurations
    (mean time lost 6 %); see ``benchmarks/results/decision_machine.md``.
    """
    return _predict.choose_inference_path(_as_forest(forest), n_samples, sparse_input)


# ============================================================== relaxation
@validate_params(
    {**_RELAXED_CONSTRAINTS, "y": ["array-like"]},
    prefer_skip_nested_validation=True,
)
@fill_doc
def relaxed_nll(
    machine, X, y, temperature, eps=0.1, sigma="tanh", sample_weight=None, W=None, b=None, V=None
):
    """Weighted negative log-likelihood of the relaxed forest and its gradients.

    The objective :func:`finetune` minimises (before its standardisation):
    ``-sum_i sw_i log(mean_t softmax(B~_t sigma(W_t x_i + b_t) / temperature) V_t[:, y_i])``.

    Parameters
    ----------
    machine : DecisionMachine
    X : ndarray (n, n_features)
    y : ndarray of int (n,)
        Column indices of ``V``.
    %(relaxed_parameters)s

    Returns
    -------
    loss : float
    grad_W : ndarray (n_splits, n_features)
    grad_b : ndarray (n_splits,)
    """
    return _finetune.relaxed_nll(machine, X, y, temperature, eps, sigma, sample_weight, W, b, V)


@validate_params(
    {
        **_RELAXED_CONSTRAINTS,
        "Y": ["array-like"],
        "objective": [StrOptions({"trees", "forest"})],
    },
    prefer_skip_nested_validation=True,
)
@fill_doc
def relaxed_squared_error(
    machine,
    X,
    Y,
    temperature,
    eps=0.1,
    sigma="tanh",
    sample_weight=None,
    W=None,
    b=None,
    V=None,
    objective="trees",
):
    """Weighted squared error of the relaxed trees and its gradients.

    The objective :func:`finetune` minimises for regressors (before its
    standardisation), with ``P_t(x) = softmax(B~_t sigma(W_t x + b_t) /
    temperature) V_t`` the relaxed tree ``t``: ``sum_i sw_i mean_t ||P_t(x_i)
    - Y_i||^2`` (``objective="trees"``) or ``sum_i sw_i ||mean_t P_t(x_i) -
    Y_i||^2`` (``"forest"``).

    Parameters
    ----------
    machine : DecisionMachine
    X : ndarray (n, n_features)
    Y : ndarray (n, n_outputs)
    %(relaxed_parameters)s
    objective : {"trees", "forest"}, default="trees"

    Returns
    -------
    loss : float
    grad_W : ndarray (n_splits, n_features)
    grad_b : ndarray (n_splits,)
    grad_V : ndarray (n_leaves, n_outputs)
    """
    return _finetune.relaxed_squared_error(
        machine, X, Y, temperature, eps, sigma, sample_weight, W, b, V, objective
    )


# ================================================================ finetune
class _CreatedByFinetune(CreatedFittedMixin):
    _created_by = "obliquetrees.machine.finetune()"
    _refit_advice = "call finetune() on the source model instead."


@fill_doc
class FinetunedForestClassifier(_CreatedByFinetune, ObliqueClassifierMixin, BaseObliqueForest):
    """A fine-tuned classifier forest (hard routing), as returned by :func:`finetune`.

    Created fitted; it predicts the mean over its trees of the class
    distribution of the reached leaf (like every hard-routed model of the
    package).

    %(created_classifier_sections)s
    history_ : dict
        ``"loss"`` (relaxed negative log-likelihood per epoch),
        ``"temperature"`` per epoch, ``"weight_density"`` (stored weights per
        split after fine-tuning).
    monotonic_cst_ : ndarray of int8 of shape (n_features_in_,) or None
        The constraints :func:`finetune` kept (the probability of
        ``classes_[1]`` only rises with features at 1, only falls with those
        at -1); None: unconstrained.
    %(categorical_attributes)s
    """


@fill_doc
class FinetunedForestRegressor(_CreatedByFinetune, ObliqueRegressorMixin, BaseObliqueForest):
    """A fine-tuned regressor forest (hard routing), as returned by :func:`finetune`.

    Created fitted; it predicts the mean over its trees of the value of the
    reached leaf (like every hard-routed model of the package). It holds the
    targets of the rows it was tuned or refitted on, every row once in every
    tree, for :meth:`predict_quantiles`.

    %(created_regressor_sections)s
    history_ : dict
        ``"loss"`` (the relaxed objective's squared error per sample and
        epoch, on targets standardised with the training mean and standard
        deviation),
        ``"temperature"`` per epoch, ``"weight_density"`` (stored weights per
        split after fine-tuning).
    monotonic_cst_ : ndarray of int8 of shape (n_features_in_,) or None
        The constraints :func:`finetune` kept (the prediction only rises
        with features at 1, only falls with those at -1); None:
        unconstrained.
    %(categorical_attributes)s
    """


def _model_inputs(model, X, y, sample_weight):
    """Source model, forest, task, validated X (float64), targets and weights.

    Classifiers: ``y`` encoded as column indices of the leaf distributions;
    regressors: ``y`` as float64 ``(n, n_outputs)``.
    """
    from sklearn.base import is_classifier, is_regressor
    from sklearn.utils import check_array, check_consistent_length

    if type(model).__module__.startswith("sklearn."):
        from obliquetrees.convert import from_sklearn

        model = from_sklearn(model)
    if not getattr(model, "_predicts_leaf_values", True):
        raise TypeError(
            "finetune/refit_leaves need a model that predicts its leaves' values; a hinge "
            "tree's output also scales with its smallest margin."
        )
    if not (hasattr(model, "_forest") and (is_classifier(model) or is_regressor(model))):
        raise TypeError(
            "finetune/refit_leaves take a fitted classifier or regressor of obliquetrees or a "
            f"fitted scikit-learn tree/forest; got {type(model).__name__}."
        )
    forest = _as_forest(model)
    # a model fitted with categorical features reads their labels through its table
    X = check_array(
        apply_categories(model, X), dtype=np.float64, order="C", ensure_all_finite="allow-nan"
    )
    if X.shape[1] != forest.n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model {forest.n_features}.")
    if sample_weight is None:
        sw = np.ones(X.shape[0])
    else:
        sw = np.ascontiguousarray(sample_weight, dtype=np.float64).ravel()
        check_consistent_length(X, sw)
        if np.any(sw < 0) or not np.all(np.isfinite(sw)) or sw.sum() <= 0:
            raise ValueError("sample_weight must be finite, non-negative, not all zero.")
    if is_regressor(model):
        Y = check_array(y, dtype=np.float64, ensure_2d=False, input_name="y")
        Y = Y.reshape(Y.shape[0], -1)
        check_consistent_length(X, Y)
        if Y.shape[1] != forest.n_outputs:
            raise ValueError(f"y has {Y.shape[1]} outputs, the model {forest.n_outputs}.")
        return model, forest, "regression", X, Y, sw
    return (model, forest, "classification", X) + _class_codes(model, forest, X, y) + (sw,)


def _class_codes(model, forest, X, y):
    """``(y,)`` encoded as indices into ``model.classes_``, after checking the leaves."""
    from sklearn.utils import check_consistent_length

    classes = np.asarray(model.classes_)
    leaves = forest.children_left < 0
    V = forest.value[leaves]
    if forest.n_outputs != classes.shape[0] or np.any(V < 0) or not np.allclose(V.sum(axis=1), 1):
        raise ValueError(
            f"{type(model).__name__}'s leaves do not hold class distributions; finetune "
            "works on hard-routed classifiers whose leaf values are class probabilities."
        )
    y = np.asarray(y).ravel()
    check_consistent_length(X, y)
    code = np.searchsorted(classes, y)
    code = np.clip(code, 0, classes.shape[0] - 1)
    if not np.array_equal(classes[code], y):
        raise ValueError("y holds labels that are not among the model's classes_.")
    return (code.astype(np.int64),)


def _new_model(source, trees, history, n_jobs, rows, monotonic_cst=None):
    """The fitted model of ``trees``; a regressor records ``rows`` (X, y, weights) as its
    leaf targets, for ``predict_quantiles``: every row of the data it was tuned on, once.
    ``monotonic_cst``: the checked constraints the trees keep (or None)."""
    from sklearn.base import is_classifier

    n_jobs = getattr(source, "n_jobs", None) if n_jobs is None else n_jobs
    if is_classifier(source):
        model = FinetunedForestClassifier(n_jobs=n_jobs)
        model.classes_ = np.asarray(source.classes_)
        model.n_classes_ = len(model.classes_)
    else:
        model = FinetunedForestRegressor(n_jobs=n_jobs)
        model.n_outputs_ = trees[0].n_outputs
    model.n_features_in_ = trees[0].n_features
    if hasattr(source, "feature_names_in_"):
        model.feature_names_in_ = source.feature_names_in_
    model.history_ = history
    model.monotonic_cst_ = monotonic_cst
    if source.__dict__.get("category_coordinates_") is not None:  # the source's categories
        model.is_categorical_ = source.is_categorical_
        model.category_coordinates_ = source.category_coordinates_
    model._set_trees(trees)
    if not is_classifier(source):
        # routed on a sibling sharing the arrays: the model builds its routing layout
        # when it first predicts, as models returned before they held leaf targets did
        sibling = ObliqueForest.__new__(ObliqueForest)
        sibling.__setstate__(model._forest().__getstate__())
        model._leaf_targets = model._leaf_targets_from(*rows, forest=sibling)
    return model


@validate_params(
    {
        "model": "no_validation",
        "X": ["array-like"],
        "y": ["array-like"],
        "sample_weight": ["array-like", None],
        "epochs": [_NON_NEGATIVE_INT],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [_POSITIVE],
        "temperature": [_POSITIVE, tuple, list],
        "eps": [_POSITIVE],
        "sigma": [StrOptions({"tanh", "saturated"})],
        "support": [StrOptions({"original", "dense"}), _NON_NEGATIVE_INT],
        "objective": [StrOptions({"forest", "trees"}), None],
        "refit_iter": [_NON_NEGATIVE_INT],
        "random_state": [_NON_NEGATIVE_INT, None],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "monotonic_cst": ["array-like", dict, None],
    },
    prefer_skip_nested_validation=True,
)
def finetune(
    model,
    X,
    y,
    *,
    sample_weight=None,
    epochs=20,
    batch_size=256,
    learning_rate=0.01,
    temperature=(0.1, 0.01),
    eps=0.1,
    sigma="tanh",
    support="original",
    objective=None,
    refit_iter=10,
    random_state=0,
    n_jobs=None,
    verbose=0,
    monotonic_cst=None,
):
    """Fine-tune a fitted tree/forest end to end, structure kept.

    The forest's prediction ``mean_t softmax(B~_t sigma(S_t x - t_t) /
    temperature) V_t`` (the analytic decision machine of every tree, averaged)
    is trained with the temperature annealed geometrically from
    ``temperature[0]`` to ``temperature[1]``, split weights and offsets by
    Adam on minibatches. Classifiers: on the likelihood of ``y`` under the
    forest's mean class distribution, leaf distributions by the closed-form
    EM step of the forest mixture (E2EDT's M-step, run once per epoch on the
    epoch's responsibilities); at the end the leaves are refitted under hard
    routing (``refit_iter`` EM iterations, as :func:`refit_leaves`).
    Regressors: on a weighted squared error (targets standardised with their
    training mean and standard deviation), leaf values by Adam with the
    splits, either of every tree's own relaxed prediction (``objective=
    "trees"``, then each leaf takes the mean target of the samples it
    receives under hard routing) or of the forest's mean prediction
    (``"forest"``, then ``refit_iter`` backfitting sweeps). The trees are
    returned as a deterministic, hard-routed model.

    Parameters
    ----------
    model : fitted classifier or regressor
        An obliquetrees model that predicts the mean of its reached leaves'
        values (E2EDT, CO2, soft trees routed hard, converted models; not hinge
        forests, whose output also depends on a margin) or a fitted
        scikit-learn DecisionTree / RandomForest / ExtraTrees classifier or
        regressor (converted with :func:`obliquetrees.convert.from_sklearn`).
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Labels among ``model.classes_`` (classifiers) or targets.
    sample_weight : array-like of shape (n_samples,), default=None
    epochs : int, default=20
    batch_size : int, default=256
    learning_rate : float, default=0.01
        Adam step size (on standardised, unit-norm split parameters).
    temperature : float or (float, float), default=(0.1, 0.01)
        Softmax temperature at the first and the last epoch (geometric in
        between); a float keeps it fixed.
    eps : float, default=0.1
        Width of ``sigma``'s transition, in units of the standardised input
        (every split is rescaled to a unit normal first, so a margin is a
        signed distance).
    sigma : {"tanh", "saturated"}, default="tanh"
        ``tanh(z / eps)`` or the paper's saturated linear function (zero
        gradient outside ``[-eps, eps]``).
    support : {"original", "dense"} or int, default="original"
        Which weights may change. ``"original"``: only the stored (non-zero)
        weights and the offsets, so an axis-aligned split stays axis-aligned
        and prediction cost is unchanged; ``"dense"``: every feature; an int
        ``k``: the stored weights plus, per split, the ``k`` features with the
        largest initial gradient.
    objective : {"forest", "trees"} or None, default=None
        What the relaxation is trained on. ``"forest"``: the forest's mean
        prediction (the only choice for classifiers: the likelihood of the
        forest mixture). ``"trees"`` (regressors): every tree's own squared
        error, like the independently grown trees of a random forest. None:
        ``"forest"`` for classifiers, ``"trees"`` for regressors. Measured on
        converted random forests of regressors
        (``benchmarks/results/decision_machine.md``): ``"forest"`` raised
        test R^2 by up to 0.11 where data are plentiful for the number of
        leaves but overfitted small or noisy sets badly (every leaf of every
        tree is a free parameter of one additive model); ``"trees"`` stayed
        within 0.03 of the forest it starts from, either way. Neither wins
        everywhere: compare them on held-out data.
    refit_iter : int, default=10
        Iterations of the final hard leaf refit of the ``"forest"`` objective
        (EM for classifiers, backfitting for regressors; 0: per-leaf class
        frequencies / mean targets, every tree on its own).
    random_state : int, default=0
        Seed of the minibatch order; the same seed gives the same model.
    n_jobs : int, default=None
        Threads of the numba kernels during training and ``n_jobs`` of the
        returned model. Results do not depend on it.
    verbose : int, default=0
    monotonic_cst : array-like of int of shape (n_features,), dict or None, default=None
        Monotonicity constraints the returned model keeps (1: the prediction,
        or a binary classifier's probability of ``classes_[1]``, only rises
        with the feature; -1: only falls; 0: free; a dict maps feature names
        to them), checked as scikit-learn checks them (multiclass and
        multi-output models raise a ``ValueError``). None: the source's
        (a scikit-learn model's ``monotonic_cst``, a converted or fine-tuned
        model's ``monotonic_cst_``, an obliquetrees estimator's
        ``monotonic_cst``); all zeros: unconstrained. See Notes.

    Returns
    -------
    model : FinetunedForestClassifier or FinetunedForestRegressor
        Same trees (node ids, children) with new split weights, offsets and
        leaf values; ``history_`` holds the training curve.

    Raises
    ------
    ValueError
        If a parameter is out of range, or if the optimisation diverges (a
        split or leaf parameter becomes NaN or infinite, checked after every
        epoch and after the final refit): no model with non-finite
        parameters is ever returned; ``model`` is never modified.

    Notes
    -----
    Gaps the paper leaves open, filled here: the loss (the negative
    log-likelihood of the forest's mean class distribution; the squared error
    of each tree or of the forest for regressors), the optimiser (Adam for
    splits, EM for classifier leaves, from E2EDT; Adam for regressor
    leaves), the temperature schedule,
    working on standardised inputs with unit-norm splits (folded back into
    raw units when stored), and the final hard leaf refit.

    Missing values (NaN in ``X``): every feature with NaN in ``X`` gets a
    missing indicator input whose weight starts from the split's current
    missing-value term and is tuned with the split (as in training, see
    :mod:`obliquetrees._core.missing`); the tuned model treats a NaN in a
    feature without NaN in ``X`` as that feature's mean over ``X``.

    Monotonic constraints: each split keeps the orientation it starts with,
    ``d``, the sign of ``sum_j c_j w_j`` over the constrained features
    ``j`` (a converted scikit-learn split ``x_j <= t`` has ``w_j = 1``, so
    ``d = c_j``; 0 without constrained weights). Every Adam step on the
    splits is followed by the projection onto ``d c_j w_j >= 0`` (the
    weight is zeroed where the sign is wrong, and every constrained weight
    of a split with ``d = 0``), so along a constrained feature a sample can
    only cross a split one way. The leaf values (regression values, the
    probability of ``classes_[1]``) are clipped after every epoch and after
    the final hard refit to bounds passed top down as scikit-learn passes
    them: a split with ``d != 0`` gives its lower child the bounds below a
    value ``mid`` and its upper child those above it (``mid`` between the
    two subtrees' values when they are already ordered; otherwise the value
    that moves the leaves out of order least, in squares weighted by their
    training samples). The returned model is then exactly monotone, for every
    input, NaN in other features included (a NaN adds a constant to a
    margin). The relaxed (soft) model trained in between is not constrained
    to be monotone; only the hard-routed result is. The missing-value
    indicator inputs are free. Without constraints nothing changes.
    """
    if isinstance(temperature, Real):
        temperature = (float(temperature), float(temperature))
    if len(temperature) != 2 or not all(_POSITIVE.is_satisfied_by(v) for v in temperature):
        raise ValueError(
            f"temperature must be a positive finite float or a pair of them; got {temperature!r}."
        )
    n_threads = n_threads_from_jobs(n_jobs)
    source, forest, task, X, y, sw = _model_inputs(model, X, y, sample_weight)
    cst = _source_constraints(source, monotonic_cst)
    regression = task == "regression"
    if objective is None:
        objective = "trees" if regression else "forest"
    elif objective == "trees" and not regression:
        raise ValueError(
            "objective='trees' is for regressors; classifiers fine-tune the "
            "forest's likelihood (objective='forest')."
        )
    # every feature with NaN, not only informative ones: the fold would give a
    # feature without indicator the mean rule, discarding the model's own term
    missing = MissingValues.from_data(X, sw)
    config = FinetuneConfig(
        epochs=int(epochs),
        batch_size=int(batch_size),
        learning_rate=learning_rate,
        temperature=tuple(float(v) for v in temperature),
        eps=eps,
        sigma=sigma,
        support=support,
        objective=objective,
        refit_iter=refit_iter,
        random_state=random_state,
        n_threads=n_threads,
        verbose=verbose,
        # the missing-value indicators appended below are free
        monotonic_cst=None if cst is None else np.pad(cst, (0, missing.columns.size)),
    )
    rows = (X, y, sw)
    if missing.columns.size:  # tune on indicator-augmented inputs, fold back
        forest = ObliqueForest.from_trees([missing.unfold(tree) for tree in forest.trees])
        X = missing.augment(X)
    trees, history = _finetune.fit_finetune(forest, X, y, sw, regression, config)
    if missing.columns.size:
        trees = [missing.fold(tree) for tree in trees]
    return _new_model(source, trees, history, n_jobs, rows, cst)


def _source_constraints(source, monotonic_cst):
    """``monotonic_cst`` checked against ``source``; None: the source's own.

    A converted or fine-tuned model's ``monotonic_cst_``, or the
    ``monotonic_cst`` parameter of an estimator that has one. A stored
    ``monotonic_cst_`` is checked again: an unpickled model's could have any
    length, and it indexes the features in the fine-tuning kernels.
    """
    from obliquetrees.utils.validation import check_monotonic_cst

    if monotonic_cst is None:
        if hasattr(source, "monotonic_cst_"):
            monotonic_cst = source.monotonic_cst_
        else:
            monotonic_cst = getattr(source, "monotonic_cst", None)
    return check_monotonic_cst(source, monotonic_cst)


@validate_params(
    {
        "model": "no_validation",
        "X": ["array-like"],
        "y": ["array-like"],
        "sample_weight": ["array-like", None],
        "n_iter": [_NON_NEGATIVE_INT],
        "n_jobs": [Integral, None],
    },
    prefer_skip_nested_validation=True,
)
def refit_leaves(model, X, y, *, sample_weight=None, n_iter=10, n_jobs=None):
    """Leaf-only baseline: the same splits, leaf values refitted on (X, y).

    Parameters
    ----------
    model : fitted classifier or regressor
        As for :func:`finetune`.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
    sample_weight : array-like of shape (n_samples,), default=None
    n_iter : int, default=10
        0: per-leaf class frequencies (classifiers) or mean targets
        (regressors) of the samples each leaf receives, every tree on its own
        (how regressors fine-tuned with ``objective="trees"`` end). >0: that
        many iterations, from the model's leaves, on the forest's mean
        prediction (how ``objective="forest"`` ends): EM on the likelihood
        (classifiers), backfitting sweeps on the squared error (regressors).
    n_jobs : int, default=None
        ``n_jobs`` of the returned model (None: the source's).

    Returns
    -------
    model : FinetunedForestClassifier or FinetunedForestRegressor
    """
    source, forest, task, X, y, sw = _model_inputs(model, X, y, sample_weight)
    trees = _finetune.refit_leaf_values(forest, X, y, sw, task == "regression", int(n_iter))
    return _new_model(source, trees, {"loss": [], "temperature": []}, n_jobs, (X, y, sw))
