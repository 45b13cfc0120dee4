"""Base classes shared by every estimator of the package.

The estimators are thin: they validate input, resolve parameters, draw seeds
and call one training function that returns :class:`ObliqueTree` objects.
Everything after training (storage, ``predict``, ``predict_proba``, ``apply``,
``decision_path``) lives here and goes through the shared traversal kernels.

Class layout (mixins first, as scikit-learn requires)::

    class MyClassifier(ObliqueClassifierMixin, BaseObliqueForest): ...
    class MyRegressor(ObliqueRegressorMixin, BaseObliqueTree): ...

- :class:`BaseObliqueTree`: a single tree, stored as ``tree_`` (and packed
  once, privately, for the forest kernels).
- :class:`BaseObliqueForest`: several trees packed into ``forest_`` (an
  :class:`ObliqueForest`), exposed as the list ``trees_``.

A subclass whose prediction is not "average of the reached leaves' values"
(soft routing, hinge margins) overrides :meth:`_predict_output`. Prediction
goes through the one dispatcher of :mod:`obliquetrees._core.predict`.

Saving (pickle, joblib, skops): an estimator's saved state holds its
containers as dicts of arrays (:func:`_containers_as_data`), so a file names
no private type, and loading rebuilds each container through its own checks
before the estimator checks its attributes against them.
"""

import dataclasses
import inspect
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import NotFittedError

from obliquetrees._core.categories import CategoryCoordinates
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.importances import feature_importances
from obliquetrees._core.predict import predict_mean
from obliquetrees._core.tree import ObliqueTree
from obliquetrees._core.validation import check_int
from obliquetrees._registry import CONTAINERS, load
from obliquetrees._training._parallel import n_threads_from_jobs
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import _fit_context
from obliquetrees.utils.validation import (
    bounded_weights,
    check_is_fitted,
    same_constraints,
    validate_fit_data,
    validate_leaf_rows,
    validate_more_fit_data,
    validate_predict_data,
)

#: Largest model a fit may start, in bytes projected from its parameters
#: (hinge forests: ``_projected_bytes``; other forests: :func:`check_forest_size`).
MAX_MODEL_BYTES = 2**34


def check_forest_size(n_estimators, bytes_per_tree):
    """Refuse ``n_estimators`` trees that cannot fit in :data:`MAX_MODEL_BYTES`.

    Checked before anything is allocated per tree (seeds, tasks, results),
    so an absurd ``n_estimators`` fails at once instead of filling the
    memory before the first tree is grown. ``bytes_per_tree`` is a floor:
    what a fit holds per tree even when every tree is a single leaf, so a
    forest below the limit is never refused for its size alone.

    Raises
    ------
    ValueError
        Naming ``n_estimators`` and the projected memory.
    """
    size = int(n_estimators) * int(bytes_per_tree)
    if size > MAX_MODEL_BYTES:
        raise ValueError(
            f"n_estimators={n_estimators} trees take at least {size / 2**30:.3g} GiB "
            f"({bytes_per_tree} bytes per tree even as a single leaf), above the "
            f"limit of {MAX_MODEL_BYTES / 2**30:.0f} GiB; lower n_estimators."
        )


def class_weight_vector(class_weight, classes, y):
    """Weights of the classes, in the order of ``classes``, from a ``class_weight`` parameter.

    Parameters
    ----------
    class_weight : "balanced", dict or None
        As scikit-learn's ``class_weight``: ``"balanced"`` weighs class ``c``
        ``n_samples / (n_classes * count_c)`` (a class absent from ``y``
        counts once); a dict maps class labels to finite non-negative
        weights (classes it does not name weigh 1). Callers resolve their
        other options (CO2's ``"balanced_subsample"``) themselves.
    classes : ndarray of shape (n_classes,)
        The class labels (``classes_``).
    y : ndarray of int64, shape (n_samples,)
        Class indices into ``classes``.

    Returns
    -------
    weight : ndarray of float64, shape (n_classes,) or None
        None for ``class_weight=None``.

    Raises
    ------
    ValueError
        A dict names a label that is not a class, or a weight that is not a
        finite non-negative number (as scikit-learn: a typo must not pass
        silently).
    """
    if class_weight is None:
        return None
    n_classes = classes.shape[0]
    if isinstance(class_weight, str):  # "balanced": the only string resolved here
        counts = np.bincount(y, minlength=n_classes)
        return y.shape[0] / (n_classes * np.maximum(counts, 1))
    weight = np.ones(n_classes)
    for label, value in class_weight.items():
        pos = np.flatnonzero(classes == label)
        if not pos.size:
            raise ValueError(
                f"class_weight has label {label!r}, which is not a class of y {classes.tolist()}."
            )
        if not (
            isinstance(value, Real)
            and not isinstance(value, bool)
            and np.isfinite(value)
            and value >= 0
        ):
            raise ValueError(
                f"class_weight[{label!r}] = {value!r}; class weights must be "
                "finite non-negative numbers."
            )
        weight[pos[0]] = value
    return weight


def class_weighted_sample_weight(class_weight, classes, y, sample_weight):
    """``sample_weight`` times the weight of each sample's class (:func:`class_weight_vector`).

    Returns ``sample_weight`` itself when ``class_weight`` is
    None, so a model fitted without class weights is unchanged; a product
    whose total is out of range is divided by a power of two
    (:func:`~obliquetrees.utils.validation.bounded_weights`).

    Raises
    ------
    ValueError
        For an invalid ``class_weight``, and when the product is zero for
        every sample (nothing left to learn from) or overflows.
    """
    weight = class_weight_vector(class_weight, classes, y)
    if weight is None:
        return sample_weight
    combined = sample_weight * weight[y]
    if not np.all(np.isfinite(combined)):
        raise ValueError("sample_weight times class_weight overflows: scale the weights down.")
    if not np.any(combined > 0):
        raise ValueError(
            "sample_weight times class_weight is zero for every training sample: "
            "the weights must not sum to zero."
        )
    return bounded_weights(combined)


#: Key of a saved estimator state that holds its containers as plain data.
_CONTAINERS_KEY = "_obliquetrees_containers"
#: Classes whose instances an estimator may hold and that are saved as plain
#: data, by name. Each one checks its arrays in ``__setstate__``.
_CONTAINER_NAMES = tuple(CONTAINERS)


def _container_class(name):
    """The container class saved under ``name`` (imported on demand: the hinge
    model's module loads numba, which only hinge forests need)."""
    return load(name)


def _containers_as_data(state):
    """``state`` with every container attribute replaced by plain data.

    The containers move to one entry, ``{attribute: {"type": class name,
    "state": the container's __getstate__()}}``, whose states hold numpy
    arrays, numbers, strings and dicts of them. A skops file of a fitted
    estimator therefore names no private type: loading it needs to trust
    only the estimator classes (``obliquetrees.utils.persistence``).
    """
    saved = {}
    for key, value in state.items():
        name = type(value).__name__
        if name in _CONTAINER_NAMES and type(value) is _container_class(name):
            saved[key] = {"type": name, "state": value.__getstate__()}
    if not saved:
        return state
    state = {key: value for key, value in state.items() if key not in saved}
    state[_CONTAINERS_KEY] = saved
    return state


def _containers_from_data(state):
    """Inverse of :func:`_containers_as_data`; other states are returned as they are.

    Every container is rebuilt by its own ``__setstate__``, which checks its
    arrays before any kernel can read them, whether the state comes from
    pickle, joblib or skops.

    Raises
    ------
    ValueError
        If the saved entry is malformed, names an unknown container type, or a
        container's arrays fail its checks.
    """
    state = dict(state)
    saved = state.pop(_CONTAINERS_KEY, None)
    if saved is None:
        return state  # unfitted, or saved before containers were saved as data
    if not isinstance(saved, dict):
        raise ValueError(f"the saved containers are a {type(saved).__name__}, not a dict.")
    for key, entry in saved.items():
        if not (
            isinstance(key, str)
            and isinstance(entry, dict)
            and entry.keys() == {"type", "state"}
            and entry["type"] in _CONTAINER_NAMES
            and isinstance(entry["state"], dict)
        ):
            raise ValueError(
                f"the saved container {key!r} is not a {{'type': one of "
                f"{list(_CONTAINER_NAMES)}, 'state': dict}} entry."
            )
        cls = _container_class(entry["type"])
        container = cls.__new__(cls)
        container.__setstate__(entry["state"])
        state[key] = container
    return state


class BaseObliqueEstimator(BaseEstimator):
    """Storage, validation and prediction plumbing common to all estimators."""

    #: dtype(s) prediction input is converted to (float32 input stays float32).
    _predict_dtype = (np.float64, np.float32)
    #: Whether the output is the mean of the reached leaves' values under hard
    #: routing; decision-machine fine-tuning (obliquetrees.machine) needs it.
    _predicts_leaf_values = True
    #: The ``routing`` values under which :meth:`predict_quantiles` is defined.
    _quantile_routings = ("hard",)
    #: Whether ``fit`` takes sparse X (as canonical CSR, without densifying it).
    _fit_accepts_sparse = False
    #: Whether ``fit`` takes a 2-D ``y`` (several regression outputs).
    _fit_multi_output = False

    def _prediction_form(self):
        """How the fitted model predicts, for exporters (:mod:`obliquetrees.onnx`).

        ``(kind, data)``: ``("hard", {})`` is the mean of the reached leaves'
        values (:attr:`_predicts_leaf_values`); a method that predicts
        otherwise overrides this with one of the kinds the exporters know:
        ``"routed"`` (E2EDT: ``proba_rule``/``predict_rule`` each ``"soft"``
        or ``"hard"``, per-tree ``steepness``), ``"soft_tree"`` (one
        soft-routed tree) and ``"hinge"`` (a hinge model's forward pass:
        ``model``, ``missing``, ``bn_eps``, ``y_mean``/``y_scale`` for
        regressors). Exporters read only this, never a method's classes.
        """
        if not self._predicts_leaf_values:
            raise TypeError(f"{type(self).__name__} does not say how it predicts.")
        return "hard", {}

    # ------------------------------------------------------------------ fit
    def _store_init_parameters(self, values):
        """Set each ``__init__`` argument in ``values`` (its ``locals()``) as an attribute.

        Each public class has its own ``__init__`` (scikit-learn reads the
        parameters and their defaults from its signature, and an unknown
        keyword names the public class) whose body is this one call.
        """
        for name, value in values.items():
            if name not in ("self", "__class__"):
                setattr(self, name, value)

    def _training_params(self, params_class, **resolved):
        """The training parameters of a fit: ``params_class`` filled from this estimator.

        The one way every method builds its params object (a frozen dataclass
        named as the estimator's parameters, with no defaults of its own): each
        field takes the attribute of the same name, unless ``resolved`` gives
        its value (a parameter resolved at fit, such as ``"auto"`` or a
        fraction of the features).

        Raises
        ------
        TypeError
            If ``resolved`` names no field of ``params_class``.
        AttributeError
            If a field is neither resolved nor an attribute of the estimator.
        """
        names = [field.name for field in dataclasses.fields(params_class)]
        unknown = sorted(set(resolved) - set(names))
        if unknown:
            raise TypeError(f"{params_class.__name__} has no field {unknown}.")
        values = {
            name: resolved[name] if name in resolved else getattr(self, name) for name in names
        }
        return params_class(**values)

    @_fit_context(prefer_skip_nested_validation=True)
    @fill_doc
    def fit(self, X, y, sample_weight=None):
        """Fit the model to the training data ``(X, y)``.

        %(fit_parameters_multioutput)s
            Several outputs where the estimator's docstring says so.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples (None: all 1), multiplied with
            ``class_weight`` (classifiers) and the bootstrap counts (forests
            with ``bootstrap=True``).

        %(fit_returns)s
        """
        # the parameters are validated (``_fit_context``); each method's ``_fit``
        # validates the data and fits, and a fit that fails changes nothing
        return self._fit(X, y, sample_weight)

    def _validate_fit_data(self, X, y, sample_weight=None):
        """Validate training data; see :func:`~obliquetrees.utils.validation.validate_fit_data`."""
        return validate_fit_data(
            self,
            X,
            y,
            sample_weight,
            classifier=isinstance(self, ClassifierMixin),
            accept_sparse=self._fit_accepts_sparse,
            multi_output=self._fit_multi_output,
        )

    def _validate_more_fit_data(self, X, y, sample_weight=None):
        """Validate a later ``partial_fit`` batch; see :func:`~obliquetrees.utils.validation.validate_more_fit_data`."""  # noqa: E501
        return validate_more_fit_data(
            self,
            X,
            y,
            sample_weight,
            classifier=isinstance(self, ClassifierMixin),
            accept_sparse=self._fit_accepts_sparse,
        )

    # -------------------------------------------------------------- predict
    def _validate_X_predict(self, X):
        return validate_predict_data(self, X, dtype=self._predict_dtype)

    def _n_threads(self):
        """numba threads from ``n_jobs``: prediction, and training of the thread-parallel methods.

        The one conversion of ``n_jobs`` to threads of this process. Forests
        that grow their trees in parallel (CO2, E2EDT) hand ``n_jobs`` itself
        to :func:`~obliquetrees._training._parallel.parallel_map`, which
        resolves it once against the trees and the active joblib backend.
        """
        return n_threads_from_jobs(getattr(self, "n_jobs", None))

    def _predict_output(self, X):
        """The output ``predict`` (and ``predict_proba``) reads: :meth:`_hard_output` by default.

        Parameters
        ----------
        X : ndarray or CSR matrix, already validated

        Returns
        -------
        output : ndarray of float64, shape (n_samples, n_outputs)
            Class probabilities for classifiers, predictions for regressors.
        """
        return self._hard_output(X)

    def _hard_output(self, X):
        """Mean over the trees of the value of the leaf each sample reaches (hard routing)."""
        return predict_mean(self._forest(), X, self._n_threads())

    @fill_doc
    def apply(self, X):
        """Index of the leaf each sample reaches (hard routing).

        %(predict_parameters)s

        Returns
        -------
        leaves : ndarray of int64
            Node ids local to each tree: shape (n_samples,) for a model that
            is a single tree (it has ``tree_``), (n_samples, n_trees) for a
            forest, as in scikit-learn (DecisionTreeClassifier vs
            RandomForestClassifier).
        """
        from obliquetrees._core import traversal  # numba is imported on first use

        X = self._validate_X_predict(X)
        leaves = traversal.apply(self._forest(), X, self._n_threads())
        return leaves[:, 0] if self._is_single_tree() else leaves

    @fill_doc
    def decision_path(self, X):
        """Nodes on each sample's root-to-leaf path (hard routing).

        %(predict_parameters)s

        Returns
        -------
        indicator : scipy.sparse.csr_matrix of shape (n_samples, n_nodes)
            ``indicator[i, j]`` is 1 iff sample ``i`` goes through node ``j``.
            A single tree (a model with ``tree_``) returns only this, as
            scikit-learn's trees do.
        n_nodes_ptr : ndarray of int64, shape (n_trees + 1,)
            Forests only: the columns of tree ``t`` are
            ``n_nodes_ptr[t]:n_nodes_ptr[t + 1]`` (as in scikit-learn).
        """
        from obliquetrees._core import traversal  # numba is imported on first use

        X = self._validate_X_predict(X)
        forest = self._forest()
        indicator = traversal.decision_path(forest, X, self._n_threads())
        if self._is_single_tree():
            return indicator
        return indicator, forest.node_offset.copy()

    def _is_single_tree(self):
        """Whether the fitted model is one tree, exposed as ``tree_``.

        ``apply`` and ``decision_path`` then drop the tree axis, as
        scikit-learn's single trees do: always for :class:`BaseObliqueTree`,
        and for a forest estimator that fitted one tree and says so by
        setting ``tree_`` (``E2EDTClassifier(n_estimators=1)``).
        """
        return "tree_" in self.__dict__

    @property
    def feature_importances_(self):
        """ndarray of shape (n_features_in_,): impurity-based feature importances.

        Each split's weighted impurity decrease (Gini for class distributions,
        squared error for values) is shared among its features in proportion
        to ``|w_j| * std(x_j)`` (training standard deviation), normalised per
        tree, averaged over trees and normalised to sum to 1; all zeros when
        every tree is a single leaf. Full definition:
        :mod:`obliquetrees.inspection`. Computed on access, O(n_nodes).
        """
        check_is_fitted(self)
        return feature_importances(self._forest(), getattr(self, "_feature_std", None))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._fit_accepts_sparse  # predict always accepts CSR
        tags.input_tags.allow_nan = True  # NaN is a missing value (obliquetrees._core.missing)
        tags.target_tags.multi_output = self._fit_multi_output
        return tags

    # --------------------------------------------------------------- pickle
    #: Attributes rebuilt on load instead of being saved.
    _not_saved = ()

    def __getstate__(self):
        """The state that pickle, joblib and skops save: plain data only.

        Containers (trees, forests, the hinge forests' trained state, the
        missing-value plan) are saved as the dicts of arrays and numbers
        their ``__getstate__`` gives, so that a file holds numpy arrays,
        builtins and the estimator's own (public) class, and nothing else;
        see :func:`_containers_as_data`.
        """
        state = dict(super().__getstate__())  # a copy: the estimator keeps its attributes
        for name in self._not_saved:
            state.pop(name, None)
        return _containers_as_data(state)

    def __setstate__(self, state):
        state = _containers_from_data(state)  # each container checks its arrays
        # A model saved before one of today's parameters existed gets that
        # parameter's default, so get_params, clone and a refit work on it.
        for name, default in self._get_param_defaults().items():
            state.setdefault(name, default)
        super().__setstate__(state)
        # The containers checked themselves when unpickled; what is left is
        # that the estimator's own attributes agree with them.
        if self._fitted_container_names() & self.__dict__.keys():
            try:
                self._check_fitted_state()
            except (ValueError, AttributeError, TypeError, KeyError, IndexError) as exc:
                raise ValueError(f"Invalid unpickled {type(self).__name__}: {exc}") from None

    @classmethod
    def _get_param_defaults(cls):
        """The constructor's parameters and their defaults."""
        signature = inspect.signature(cls.__init__)
        return {
            name: p.default
            for name, p in signature.parameters.items()
            if name != "self" and p.default is not inspect.Parameter.empty
        }

    def _fitted_container_names(self):
        """Attributes whose presence means the estimator is fitted."""
        return {"forest_", "tree_"}

    def _check_fitted_state(self):
        """Raise if the fitted attributes disagree with the container.

        Checks ``n_features_in_`` (and ``feature_names_in_``) against the
        trees' ``n_features``, ``classes_``/``n_classes_`` and the number of
        outputs; subclasses add what their own prediction reads.
        """
        forest = self._forest()
        if not isinstance(forest, ObliqueForest):
            raise ValueError(f"the trees are a {type(forest).__name__}, not an ObliqueForest.")
        n_in = check_int(self.n_features_in_, "n_features_in_", low=1)
        if n_in != forest.n_features:
            raise ValueError(
                f"n_features_in_ is {n_in} but the trees use {forest.n_features} features."
            )
        tree = self.__dict__.get("tree_")  # E2EDT keeps its single tree in both
        if tree is not None and (tree.n_features, tree.n_outputs) != (n_in, forest.n_outputs):
            raise ValueError("tree_ disagrees with the fitted features or outputs.")
        names = getattr(self, "feature_names_in_", None)
        if names is not None and len(names) != n_in:
            raise ValueError(f"feature_names_in_ has {len(names)} names for {n_in} features.")
        self._check_categories(n_in)
        if isinstance(self, ClassifierMixin):
            classes = self.classes_
            if not isinstance(classes, np.ndarray) or classes.ndim != 1 or not classes.size:
                raise ValueError("classes_ must be a non-empty 1-D array.")
            if self.n_classes_ != classes.shape[0]:
                raise ValueError(f"n_classes_ is {self.n_classes_}, classes_ has {classes.size}.")
        self._check_outputs(forest)

    def _check_categories(self, n_features):
        """``is_categorical_`` against ``category_coordinates_`` (prediction reads both).

        Models saved before categorical features existed have neither.
        """
        table = self.__dict__.get("category_coordinates_")
        mask = self.__dict__.get("is_categorical_")
        if table is None:
            if mask is not None:
                raise ValueError("is_categorical_ is set but category_coordinates_ is None.")
            return
        if not isinstance(table, CategoryCoordinates):
            raise ValueError(
                f"category_coordinates_ is a {type(table).__name__}, not CategoryCoordinates."
            )
        if table.n_features != n_features:
            raise ValueError(
                f"category_coordinates_ has {table.n_features} features, the model {n_features}."
            )
        if not (
            isinstance(mask, np.ndarray)
            and mask.dtype == bool
            and mask.shape == (n_features,)
            and np.array_equal(np.flatnonzero(mask), table.columns)
        ):
            raise ValueError("is_categorical_ disagrees with category_coordinates_.")

    def _check_warm_categories(self, old):
        """Raise unless this fit's category table is ``old``, the one the kept trees grew on."""
        new = self.__dict__.get("category_coordinates_")
        if (old is None and new is None) or (old is not None and old.same_as(new)):
            return
        raise ValueError(
            "warm_start=True needs the categorical features of the previous fit, with the "
            "same categories and coordinates (its trees split on them); these data give "
            "others: fit from scratch (warm_start=False)."
        )

    def _check_outputs(self, forest):
        """The trees' value columns against ``classes_`` / ``n_outputs_``."""
        if isinstance(self, ClassifierMixin):
            expected = self.classes_.shape[0]
        else:
            expected = getattr(self, "n_outputs_", 1)
        if forest.n_outputs != expected:
            raise ValueError(f"the trees hold {forest.n_outputs} outputs, expected {expected}.")


class BaseObliqueTree(BaseObliqueEstimator):
    """Base of single-tree estimators: the fitted tree is ``tree_``.

    The forest kernels take a packed forest: the tree is packed once, when it
    is set or unpickled, into the private ``_packed_forest`` (a zero-copy
    wrapper of ``tree_``'s arrays, which also carries the derived data built
    for prediction, such as its decision machine). Pickles hold ``tree_``
    only; the wrapper is rebuilt on load from the checked tree, so pickles
    written before it existed load too.
    """

    _not_saved = ("_packed_forest",)

    def _set_trees(self, trees):
        (tree,) = trees
        # the tree comes fresh from training (or was checked when unpickled)
        self._packed_forest = ObliqueForest.from_trees([tree], validate=False)
        self.tree_ = tree
        return self

    def _check_fitted_state(self):
        if not isinstance(self.tree_, ObliqueTree):
            raise ValueError(f"tree_ is a {type(self.tree_).__name__}, not an ObliqueTree.")
        super()._check_fitted_state()

    def _forest(self):
        return self._packed_forest

    def __setstate__(self, state):
        state = _containers_from_data(state)
        state.pop("_packed_forest", None)
        tree = state.get("tree_")
        if isinstance(tree, ObliqueTree):  # checked by its own __setstate__
            state["_packed_forest"] = ObliqueForest.from_trees([tree], validate=False)
        super().__setstate__(state)


class BaseObliqueForest(BaseObliqueEstimator):
    """Base of forests: the fitted trees are packed in ``forest_``.

    ``trees_`` lists the trees as zero-copy views of ``forest_``; pickles hold
    the packed arrays once.
    """

    #: Bytes a fit holds per tree even when every tree is a single leaf, for
    #: :meth:`_check_forest_size` (forests grown tree by tree set it).
    _min_tree_bytes = 0

    def _check_forest_size(self):
        """:func:`check_forest_size` of ``n_estimators`` trees of :attr:`_min_tree_bytes`."""
        check_forest_size(self.n_estimators, self._min_tree_bytes)

    def _set_trees(self, trees):
        # the trees come fresh from training: pack them without a second copy
        self.forest_ = ObliqueForest.from_trees(trees, consume=True)
        return self

    def _remember_constraints(self, cst):
        """Store the checked ``monotonic_cst`` the fitted trees grew under (None: none)."""
        self._monotonic_cst = None if cst is None else cst.tolist()

    def _check_warm_constraints(self, cst):
        """Raise unless a warm start's ``cst`` is the one the kept trees grew under.

        ``cst`` is this fit's checked ``monotonic_cst`` (None: unconstrained);
        a model pickled before :meth:`_remember_constraints` stored them was
        fitted without constraints.
        """
        if not same_constraints(cst, self.__dict__.get("_monotonic_cst")):
            raise ValueError(
                "warm_start=True needs the monotonic_cst of the previous fit (its trees "
                "keep those constraints, not others)."
            )

    def _forest(self):
        return self.forest_

    @property
    def trees_(self):
        """list of ObliqueTree: the fitted trees."""
        if "forest_" not in self.__dict__:
            raise AttributeError("trees_ exists only after fit.")
        return self.forest_.trees


class ObliqueClassifierMixin(ClassifierMixin):
    """``predict_proba``/``predict`` for classifiers (``classes_`` order)."""

    @fill_doc
    def predict_proba(self, X):
        """Class probabilities of the input samples.

        %(predict_parameters)s

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        return self._predict_output(self._validate_X_predict(X))

    @fill_doc
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (``-inf`` where it is 0).

        %(predict_parameters)s

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @fill_doc
    def predict(self, X):
        """Predicted class of each sample (the most probable one).

        %(predict_parameters)s

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        scores = self._class_scores(self._validate_X_predict(X))  # checks fitting first
        return self.classes_[np.argmax(scores, axis=1)]

    def _class_scores(self, X):
        # whose row-wise argmax is the predicted class: the probabilities by default
        return self._predict_output(X)

    def _training_weight(self, y, sample_weight):
        """The weights training sees: ``sample_weight`` times each sample's class weight."""
        return class_weighted_sample_weight(
            self._whole_set_class_weight(), self.classes_, y, sample_weight
        )

    def _whole_set_class_weight(self):
        """The ``class_weight`` applied to the whole training set (None: none).

        A forest that weighs classes per bootstrap (``"balanced_subsample"``)
        applies none here.
        """
        return getattr(self, "class_weight", None)


class ObliqueRegressorMixin(RegressorMixin):
    """``predict`` and ``predict_quantiles`` for regressors.

    Quantiles (:meth:`predict_quantiles`) weigh the training targets that
    share a leaf with each sample (:mod:`obliquetrees._core.quantiles`). A fit
    of an estimator whose ``store_leaf_targets`` is True records them (each
    tree's rows, weighted by its bootstrap counts: :meth:`_tree_row_counts`);
    :meth:`record_leaf_targets` records them from given data on any
    hard-routed regressor. Every fit drops the targets of the previous one.
    """

    def _training_weight(self, y, sample_weight):
        """The weights training sees: ``sample_weight``."""
        return sample_weight

    def _fit(self, X, y, sample_weight):
        """The method's fit, then the leaf targets of its training rows (``store_leaf_targets``)."""
        super()._fit(X, y, sample_weight)
        self.__dict__.pop("_leaf_targets", None)  # the rows of an earlier fit
        if getattr(self, "store_leaf_targets", False):
            rows = self._validated_rows(X, y, sample_weight)
            self._leaf_targets = self._leaf_targets_from(*rows, self._tree_row_counts)
        return self

    def _tree_row_counts(self, n_samples):
        """How many times each tree drew each training row (None: once each), tree by tree.

        Forests with a bootstrap override it with their draws.
        """
        return [None] * self._forest().n_trees

    def _validated_rows(self, X, y, sample_weight):
        """``X`` as ``predict`` takes it, ``y`` as (n_samples, n_outputs) and the row weights."""
        X = self._validate_X_predict(X)
        return X, *validate_leaf_rows(X, y, sample_weight, self._forest().n_outputs)

    def _leaf_targets_from(self, X, y, sample_weight, tree_row_counts=None, forest=None):
        """The :class:`LeafTargets` of the rows ``(X, y)``, weighted ``sample_weight`` times counts.

        ``X``, ``y`` and ``sample_weight`` are validated (:meth:`_validated_rows`).

        ``tree_row_counts(n_samples)`` gives, per tree, its count of each row
        (None: every row once); None: every tree every row once. ``forest``
        routes the rows: the model's own (None), or a sibling sharing its
        arrays, whose derived data (routing layout) is not kept.
        """
        from obliquetrees._core.leaf_targets import LeafTargets
        from obliquetrees._core.quantiles import reached_leaves  # numba: on first use

        forest = self._forest() if forest is None else forest
        # local leaf ids fit int32 (the routing layout's global ids do): 4 bytes per row
        # and tree, less than half of what the targets of the in-bag rows take
        leaves = np.empty((X.shape[0], forest.n_trees), dtype=np.int32)
        for rows, part in reached_leaves(forest, X, self._n_threads()):
            leaves[rows] = part
        counts = [None] * forest.n_trees if tree_row_counts is None else tree_row_counts(len(y))
        weights = (sample_weight if c is None else sample_weight * c for c in counts)
        tree_leaves = (leaves[:, t] for t in range(forest.n_trees))
        return LeafTargets.from_rows(tree_leaves, forest.node_offset, y, weights)

    @fill_doc
    def record_leaf_targets(self, X, y, sample_weight=None):
        """Record the targets of ``(X, y)`` in the leaves the rows reach, for quantiles.

        Replaces the leaf targets the fit stored (if any): afterwards
        :meth:`predict_quantiles` weighs these rows, every one in every tree
        (no bootstrap counts). The way to give quantiles to a model that has
        no training rows (``obliquetrees.convert.from_sklearn``, a fit with
        ``store_leaf_targets=False``, a hard-routed soft tree), or to weigh
        held-out rows instead of the training ones (their quantiles are then
        not fitted on the rows the trees were grown on). The trees are not
        changed.

        %(fit_parameters_multioutput)s
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the rows (None: all 1).

        Returns
        -------
        self : object
            The model, with the leaf targets of ``(X, y)``.

        Raises
        ------
        TypeError
            For a model whose prediction is not an average of leaf values
            (hinge forests).
        """
        check_is_fitted(self)
        self._refuse_quantiles()
        self._leaf_targets = self._leaf_targets_from(*self._validated_rows(X, y, sample_weight))
        return self

    def _check_fitted_state(self):
        """The estimator's checks, and the leaf targets (if any) against its trees."""
        from obliquetrees._core.leaf_targets import LeafTargets

        super()._check_fitted_state()
        store = self.__dict__.get("_leaf_targets")
        if store is not None:
            if not isinstance(store, LeafTargets):
                raise ValueError(f"the leaf targets are a {type(store).__name__}.")
            store.check_forest(self._forest())

    def _refuse_quantiles(self):
        """Raise if leaf co-membership does not describe this model's prediction."""
        if not self._predicts_leaf_values:
            raise TypeError(
                f"{type(self).__name__} has no quantiles: its output is not an average of "
                "its leaves' values (a hinge tree's output scales with its smallest margin), "
                "so the training targets sharing its leaves describe another model."
            )

    def _leaf_target_store(self):
        """The recorded :class:`LeafTargets`, or a clear error saying how to get them."""
        self._refuse_quantiles()
        if getattr(self, "routing", "hard") not in self._quantile_routings:
            raise ValueError(
                f"predict_quantiles weighs the training targets of the leaves each sample "
                f"reaches by hard routing; this {type(self).__name__} predicts with "
                f"routing={self.routing!r}. Use set_params(routing='hard') (no refit needed)."
            )
        store = self.__dict__.get("_leaf_targets")
        if store is not None:
            return store
        if getattr(self, "store_leaf_targets", None) is False:
            how = "it was fitted with store_leaf_targets=False: refit with store_leaf_targets=True"
        else:
            how = "it has no training rows (converted, created before quantiles, or not stored)"
        raise NotFittedError(
            f"{type(self).__name__} holds no leaf targets for predict_quantiles: {how}, or "
            "call record_leaf_targets(X_train, y_train)."
        )

    @fill_doc
    def predict_quantiles(self, X, quantiles=(0.05, 0.5, 0.95)):
        """Quantiles of the target given ``X``: a quantile regression forest (Meinshausen, 2006).

        Each tree gives weight ``1 / n_trees`` to the leaf a sample reaches
        (hard routing; soft routing spreads it over the leaves by path
        probability), shared among the training rows of
        that leaf in proportion to their weights (``sample_weight`` times the
        tree's bootstrap count: the in-bag rows, which also set the leaf's
        value); the quantiles are those of the training targets under these
        weights. Interpolation: the averaged inverse of the weighted
        empirical distribution function (numpy's
        ``method="averaged_inverted_cdf"`` for unit weights): the first
        target whose cumulative weight reaches ``q``, or the midpoint of two
        targets where the cumulative weight equals ``q`` exactly, so the
        0.5-quantile of one tree is its leaf's median. Details:
        :mod:`obliquetrees._core.quantiles`. A sample whose leaves hold no
        weighted row gets NaN. The result does not depend on ``n_jobs``.

        %(predict_parameters)s
        quantiles : float or array-like of shape (n_quantiles,), default=(0.05, 0.5, 0.95)
            Levels in [0, 1].

        Returns
        -------
        y : ndarray
            Shape (n_samples, n_quantiles), or (n_samples, n_outputs,
            n_quantiles) for several outputs; without the quantile axis for
            a scalar ``quantiles``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the model holds no leaf targets (``store_leaf_targets=False``,
            a converted model): :meth:`record_leaf_targets` gives them.
        ValueError
            For quantiles that are not finite levels in [0, 1], and for a
            soft tree with ``routing="soft"`` (its leaf values are not the
            means of the rows its leaves hold).
        TypeError
            For hinge forests.
        """
        X = self._validate_X_predict(X)
        levels = _check_quantiles(quantiles)
        out = self._quantiles(self._leaf_target_store(), X, levels.ravel())
        if levels.ndim == 0:
            out = out[:, :, 0]
        return out[:, 0] if out.shape[1] == 1 else out

    def _quantiles(self, store, X, levels):
        """``(n_samples, n_outputs, n_quantiles)`` quantiles of validated ``X`` (hard routing)."""
        from obliquetrees._core.quantiles import forest_quantiles  # numba: on first use

        return forest_quantiles(self._forest(), store, X, levels, self._n_threads())

    @fill_doc
    def predict(self, X):
        """Predicted target of each sample.

        %(predict_parameters)s

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        output = self._predict_output(self._validate_X_predict(X))
        return output[:, 0] if output.shape[1] == 1 else output


def _check_quantiles(quantiles):
    """``quantiles`` as a float64 array of levels in [0, 1] (0-D for a scalar), or ValueError."""
    try:
        levels = np.asarray(quantiles, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"quantiles must be a number or a 1-D sequence of numbers; got {quantiles!r}."
        ) from None
    if np.asarray(quantiles).dtype.kind not in "iuf" or levels.ndim > 1 or levels.size == 0:
        raise ValueError(
            f"quantiles must be a number or a non-empty 1-D sequence of numbers in [0, 1]; "
            f"got {quantiles!r}."
        )
    if not np.all((levels >= 0) & (levels <= 1)):  # NaN fails both
        raise ValueError(f"quantiles must lie in [0, 1] (NaN is not a level); got {quantiles!r}.")
    return levels


class CreatedFittedMixin:
    """``__init__(n_jobs)`` and a refusing ``fit`` for models created already fitted.

    Subclasses name the function that creates them (``_created_by``) and say
    how to get a new model instead (``_refit_advice``).
    """

    _created_by = ""
    _refit_advice = ""

    def __init__(self, n_jobs=None):
        self.n_jobs = n_jobs

    def fit(self, X, y, sample_weight=None):
        """Not available: this model is created fitted (see the class docstring).

        Raises
        ------
        TypeError
            Always.
        """
        raise TypeError(
            f"{type(self).__name__} is created fitted by {self._created_by}; {self._refit_advice}"
        )
