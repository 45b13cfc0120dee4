"""Random hinge forests and ferns (Lay et al.) as scikit-learn estimators.

Thin estimators: validate, resolve parameters, draw seeds, call
:mod:`obliquetrees.hinge.training`, store the trees. numba is imported on
first use (inside ``fit``/prediction), never at import time.
"""

import functools

import numpy as np
from sklearn.base import is_classifier
from sklearn.model_selection import train_test_split

from obliquetrees._core.missing import MissingValues
from obliquetrees._core.tree import (
    check_centred_range,
    prescale_exponents,
)
from obliquetrees.base import (
    BaseObliqueForest,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.hinge import _docs as docs
from obliquetrees.hinge._size import HingeModelSize
from obliquetrees.hinge._trees import TreesOnDemand
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import (
    RUN_CONSTRAINTS,
    _fit_context,
    integers,
    options,
    reals,
)
from obliquetrees.utils.screening import shadow_screen
from obliquetrees.utils.seeds import draw_seeds
from obliquetrees.utils.validation import check_monotonic_cst, same_constraints

#: The learnt hinge features that ``n_hinge_features="auto"`` weighs against the raw
#: inputs (the paper's 100 inner products).
AUTO_HINGE_FEATURES = 100


class _BaseHingeForest(TreesOnDemand, HingeModelSize, BaseObliqueForest):
    """Shared parameters, training and prediction of the hinge forests.

    Each public class has its own ``__init__`` (scikit-learn reads the
    parameters and their defaults from its signature, and an unknown keyword
    names the public class) storing its arguments as given
    (``_store_init_parameters``).
    """

    _predicts_leaf_values = False  # the output also scales with a margin: no finetune
    _fit_accepts_sparse = True
    _parameter_constraints = {
        "n_estimators": integers(1),
        "max_depth": integers(1, 20),
        "tree_type": options("tree", "fern"),
        "n_hinge_features": [*integers(1, none=True), *options("auto")],
        "feature_screening": ["boolean", *options("auto")],
        "head": options("sum", "linear"),
        "optimizer": options("adam", "lazy_adam", "adagrad", "sgd"),
        "learning_rate": reals(0, closed="neither"),
        "batch_size": integers(1),
        "max_epochs": integers(1),
        "early_stopping": ["boolean"],
        "validation_fraction": reals(0, 1, closed="neither", not_int=True),
        "n_iter_no_change": integers(1),
        "categorical_features": ["array-like", *options("from_dtype"), None],
        "monotonic_cst": ["array-like", dict, None],
        "warm_start": ["boolean"],
        **RUN_CONSTRAINTS,
    }

    _task = None

    def _prediction_form(self):
        from obliquetrees.hinge._kernels import BN_EPS

        data = dict(model=self._model, missing=self._missing, bn_eps=BN_EPS)
        if not is_classifier(self):
            data.update(y_mean=self._y_mean, y_scale=self._y_scale)
        return "hinge", data

    # Subclasses define _encode_targets(y, fit) (targets in the units the
    # model learns) and _n_model_outputs().

    # ------------------------------------------------------------ fitting
    def _start(self, X, y, sample_weight):
        """Seeds, missing-value inputs and epoch count of a new model, if its size is acceptable.

        NaN: the model trains on indicator-augmented inputs (:mod:`obliquetrees._core.missing`);
        later batches and predictions are augmented with the same ``_missing``.
        """
        self._seeds = draw_seeds(self.random_state, 4)  # init, split, epochs, screen
        classification = isinstance(self, ObliqueClassifierMixin)
        self._missing = MissingValues.from_data(X, sample_weight, y, classification)
        explicit = bool(self._missing.columns.size)  # indicators: one term per weight
        self._check_model_size(self._missing.n_inputs, self._n_model_outputs(), explicit)
        self.n_iter_ = 0

    def _check_warm_model(self, n_features, cst, old_classes=None):
        """Raise unless the fitted model can continue training on the new data.

        ``cst``: the checked ``monotonic_cst`` of this call (None: unconstrained);
        returns it per model input (see :meth:`_missing_free`).
        """
        model = self._model
        if self._missing.n_features != n_features:
            raise ValueError(
                f"X has {n_features} features, but the fitted model was trained on "
                f"{self._missing.n_features} (warm_start/partial_fit)."
            )
        monotonic = self._missing_free(cst)
        if not same_constraints(model.monotonic_cst, monotonic):
            raise ValueError("warm_start/partial_fit need the monotonic_cst of the fitted model.")
        structure = (
            model.n_trees == self.n_estimators
            and model.depth == self.max_depth
            and model.is_fern == (self.tree_type == "fern")
            and model.head == self.head
            and self.n_hinge_features in ("auto", _hinge_features(model))
            and self.feature_screening in ("auto", self.screened_features_ is not None)
        )
        if not structure:
            raise ValueError(
                "warm_start/partial_fit need the same n_estimators, max_depth, "
                "tree_type, head, n_hinge_features and feature_screening as the fitted model."
            )
        if old_classes is not None and not np.array_equal(old_classes, self.classes_):
            raise ValueError(
                f"warm_start=True needs the same classes as the previous fit "
                f"({old_classes.tolist()}); got {self.classes_.tolist()}."
            )
        return monotonic

    def _validation_split(self, T):
        """Sorted (train, validation) row indices, or None when too few rows to hold out."""
        n = T.shape[0]
        n_val = int(np.ceil(self.validation_fraction * n))
        if not 2 <= n_val <= n - 2:
            return None
        idx = np.arange(n)
        seed = int(self._seeds[1])
        try:
            tr, va = train_test_split(
                idx, test_size=n_val, random_state=seed, stratify=self._stratify(T)
            )
        except ValueError:
            tr, va = train_test_split(idx, test_size=n_val, random_state=seed)
        return np.sort(tr), np.sort(va)

    def _train(self, X, T, sample_weight, model, *, max_epochs, validate, monotonic):
        """Train (``model`` None: a new model) and set the fitted attributes.

        ``monotonic``: the constraints per model input (:meth:`_missing_free`).
        A new model trains once per candidate of :meth:`_candidates` and
        keeps the one of lowest validation loss at its best epoch (equal: the
        earlier candidate). The candidates hold out the same rows, which no
        fit step (the input screen's included) sees; without validation rows
        only the first candidate trains, as nothing could choose.
        """
        inputs = self._missing.augment(X)
        run = functools.partial(
            self._run, inputs, T, sample_weight, max_epochs=max_epochs, monotonic=monotonic
        )
        validation = self._validation_split(T) if validate else None
        if model is not None:
            self._keep(*run(model, _hinge_features(model), validation), self.screened_features_)
            return
        kept = None
        candidates = self._candidates(inputs, T, sample_weight, validation)
        for i, (hinge_features, keep) in enumerate(candidates):
            if len(candidates) > 1:
                self._say(f"candidate {i + 1}/{len(candidates)}: {_describe(hinge_features, keep)}")
            ignored = None if keep is None else ~keep
            trained = run(None, hinge_features, validation, ignored=ignored)
            if kept is None or _best_loss(trained) < _best_loss(kept[0]):
                kept = trained, keep, i
        (model, info), keep, i = kept
        if len(candidates) > 1:
            self._say(
                f"kept candidate {i + 1}/{len(candidates)} (lowest validation loss, "
                f"{_best_loss(kept[0]):.5f}): {_describe(*candidates[i])}"
            )
        self._keep(model, info, self._screened_features(keep))

    def _say(self, line):
        """Print a line about the fit at ``verbose >= 1``, as the epochs' progress lines are."""
        if self.verbose:
            print(f"[{type(self).__name__}] {line}", flush=True)

    def _candidates(self, inputs, T, sample_weight, validation):
        """``(n_hinge_features, kept inputs or None)`` of the forests a new fit trains, in order.

        ``n_hinge_features="auto"``: :data:`AUTO_HINGE_FEATURES` learnt inner
        products, then (for at most that many inputs) the raw (standardised)
        inputs, whose decisions are axis-aligned as a random forest's.
        ``feature_screening``: the learnt layer on every input, on the inputs
        the screen keeps
        (:func:`~obliquetrees.utils.screening.shadow_screen`, on the fit's
        training rows), or (``"auto"``) both in that order. A screen that
        keeps every input (or none) leaves one unscreened candidate.
        """
        features = [self.n_hinge_features]
        if self.n_hinge_features == "auto":
            # the raw forest's layer is an identity, one row per input: wide data
            # would hold it densely, and it never won above 100 inputs (Notes)
            raw = [None] if inputs.shape[1] <= AUTO_HINGE_FEATURES else []
            features = [AUTO_HINGE_FEATURES, *raw]
        auto_screen = self.feature_screening == "auto"
        screens = [None]
        learnt = any(f is not None for f in features)  # raw inputs are never screened
        if learnt and self.feature_screening and (validation is not None or not auto_screen):
            rows = slice(None) if validation is None else validation[0]
            keep = shadow_screen(
                inputs[rows],
                T[rows],
                sample_weight[rows],
                isinstance(self, ObliqueClassifierMixin),
                int(self._seeds[3]),
                self._n_threads(),
            )
            if keep is not None:
                screens = [None, keep] if auto_screen else [keep]
        candidates = [(f, keep) for f in features for keep in (screens if f else [None])]
        return candidates if validation is not None else candidates[:1]

    def _screened_features(self, keep):
        """``screened_features_`` of a model whose layer reads the inputs ``keep`` (None: all)."""
        if keep is None:
            return None
        n = self._missing.n_features
        used = keep[:n].copy()
        used[self._missing.columns] |= keep[n:]  # a feature read through its missing indicator
        return used

    def _run(
        self,
        inputs,
        T,
        sample_weight,
        model,
        hinge_features,
        validation,
        *,
        max_epochs,
        monotonic,
        ignored=None,
    ):
        """One training of :func:`~obliquetrees.hinge.training.fit_hinge`: ``(model, info)``."""
        from obliquetrees.hinge.training import HingeParams, fit_hinge

        params = self._training_params(
            HingeParams,
            task=self._task,
            max_epochs=max_epochs,
            monotonic_cst=monotonic,
            n_hinge_features=hinge_features,
        )
        try:
            model, info = fit_hinge(
                inputs,
                T,
                sample_weight,
                params,
                (int(self._seeds[0]), int(self._seeds[2])),
                n_outputs=self._n_model_outputs(),
                model=model,
                epochs_done=int(self.n_iter_),
                validation=validation,
                n_threads=self._n_threads(),
                ignored=ignored,
            )
        except FloatingPointError as exc:
            raise ValueError(
                f"{type(self).__name__} training diverged ({exc}); lower learning_rate."
            ) from exc
        return model, info

    def _keep(self, model, info, screened_features):
        """Set the fitted attributes of a trained ``model`` (:meth:`_run`'s result)."""
        self._model = model
        self.n_hinge_features_ = _hinge_features(model)
        self.screened_features_ = screened_features
        # the trees are derived from the model and these counts on first use (forest_)
        self._leaf_counts = info["counts"]
        self.__dict__.pop("forest_", None)
        history = info["history"]
        self.n_iter_ += len(history["loss"])
        self.best_epoch_ = history["best_epoch"]
        self.loss_curve_ = history["loss"]
        self.validation_loss_curve_ = history["val_loss"]
        self.epoch_times_ = history["epoch_time"]

    def _value_scale(self):
        return 1.0

    def _stratify(self, T):
        return None

    def _fit(self, X, y, sample_weight):
        if _screens_always(self.feature_screening) and self.n_hinge_features is None:
            raise ValueError(
                "feature_screening=True screens the inputs of the learnt linear layer, and "
                'n_hinge_features=None has none. Pass a number of learnt features or "auto".'
            )
        warm = self.warm_start and hasattr(self, "_model")
        old_classes = self.__dict__.get("classes_")
        old_categories = self.__dict__.get("category_coordinates_")
        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
        T = self._encode_targets(y, fit=True)
        train_weight = self._training_weight(y, sample_weight)
        cst = check_monotonic_cst(self, self.monotonic_cst)
        if warm:
            self._check_warm_categories(old_categories)
            monotonic = self._check_warm_model(X.shape[1], cst, old_classes)
        else:  # missing indicators are tested with sample_weight alone
            self._start(X, y, sample_weight)
            monotonic = self._missing_free(cst)
        model = self._model if warm else None
        self._train(
            X,
            T,
            train_weight,
            model,
            max_epochs=self.max_epochs,
            validate=self.early_stopping,
            monotonic=monotonic,
        )
        return self

    def _partial_fit(self, X, y, sample_weight, classes=None):
        if isinstance(getattr(self, "class_weight", None), str):
            raise ValueError(
                'class_weight="balanced" is not supported by partial_fit: one batch\'s '
                "class counts are not the data's. Pass a dict of weights, e.g. from "
                "sklearn.utils.class_weight.compute_class_weight on all the labels, or use fit."
            )
        first = not hasattr(self, "_model")
        if first and _screens_always(self.feature_screening):
            raise ValueError(
                "feature_screening=True screens the rows that fit trains on; partial_fit sees "
                'one batch at a time. Use fit, or feature_screening=False or "auto" (which '
                "holds out no rows in partial_fit, so keeps every input)."
            )
        if first:
            X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
            if classes is not None:
                self._set_classes(classes, y)
                y = np.searchsorted(self.classes_, self._raw_y)
            T = self._encode_targets(y, fit=True)
            train_weight = self._training_weight(y, sample_weight)
            cst = check_monotonic_cst(self, self.monotonic_cst)
            self._start(X, y, sample_weight)
            monotonic = self._missing_free(cst)
        else:
            X, y, sample_weight = self._validate_more_fit_data(X, y, sample_weight)
            y = self._index_y(y)
            T = self._encode_targets(y, fit=False)
            cst = check_monotonic_cst(self, self.monotonic_cst)
            monotonic = self._check_warm_model(X.shape[1], cst)
            train_weight = self._training_weight(y, sample_weight)
        model = None if first else self._model
        self._train(X, T, train_weight, model, max_epochs=1, validate=False, monotonic=monotonic)
        return self

    def _index_y(self, y):
        return y

    def _missing_free(self, cst):
        """Constraints per model input: ``cst`` and the missing indicators' zeros, or None."""
        if cst is None:
            return None
        return np.concatenate([cst, np.zeros(self._missing.n_inputs - cst.shape[0], np.int8)])

    # ------------------------------------------------------------- pickle
    def _fitted_container_names(self):
        return super()._fitted_container_names() | {"_model"}

    def __setstate__(self, state):
        model = state.get("_model")
        if model is not None and "_missing" not in state:  # pickled before missing values
            state = dict(state, _missing=MissingValues(getattr(model, "x_mean", None), []))
        if "n_features_in_" in state:  # fitted, maybe before feature_screening: not screened
            state = {"screened_features_": None, **state}
        super().__setstate__(state)

    def _check_outputs(self, forest):
        from obliquetrees.hinge.training import HingeModel

        model = self._model
        if not isinstance(model, HingeModel):  # a HingeModel checked itself when unpickled
            raise ValueError(f"_model is a {type(model).__name__}, not a HingeModel.")
        self._missing.check(self.n_features_in_)
        if model.A.shape[1] != self._missing.n_inputs:
            raise ValueError(
                f"the hinge model takes {model.A.shape[1]} inputs, expected "
                f"{self._missing.n_inputs} for {self.n_features_in_} features."
            )
        expected = self._n_model_outputs()
        if model.n_outputs != expected:
            raise ValueError(f"the hinge model has {model.n_outputs} outputs, expected {expected}.")
        if (forest.n_trees, forest.n_outputs) != (model.n_trees, model.W.shape[2]):
            raise ValueError("trees_ do not match the hinge model's trees and leaf weights.")

    # --------------------------------------------------------- prediction
    def _decision(self, X):
        from obliquetrees.hinge._forward import decision_values  # imports numba

        inputs = self._missing.augment(X)  # CSR stays CSR (blocks densified below)
        return decision_values(self._model, inputs, self._n_threads())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


def _screens_always(feature_screening):
    """Whether ``feature_screening`` is True (a bool-like True, not ``"auto"``)."""
    return not isinstance(feature_screening, str) and bool(feature_screening)


def _best_loss(trained):
    """The lowest validation loss of a :meth:`_BaseHingeForest._run` result."""
    return min(trained[1]["history"]["val_loss"])


def _describe(hinge_features, keep):
    """What a candidate of :meth:`_BaseHingeForest._candidates` trains, in words."""
    if hinge_features is None:
        return "the raw inputs (axis-aligned decisions)"
    inputs = "every input"
    if keep is not None:
        inputs = f"the {int(keep.sum())} of {keep.size} inputs the screen kept"
    return f"{hinge_features} learnt features on {inputs}"


def _hinge_features(model):
    """A trained model's ``n_hinge_features``: its learnt features, or None (the raw inputs)."""
    return model.A.shape[0] if model.learn_A else None


@fill_doc
class HingeForestClassifier(ObliqueClassifierMixin, _BaseHingeForest):
    __doc__ = (
        """Random hinge forest / ferns classifier trained end to end.

    M hinge trees (or ferns) over a learnt pool of features, their outputs
    summed (or combined by a learnt linear head) into class logits, trained
    with softmax cross-entropy by minibatch Adam/AdaGrad.
"""
        + docs.parameters('"sum"', hinge_default='"auto"', screening_default='"auto"')
        + docs.CLASS_WEIGHT
        + docs.PARAMETERS_TAIL
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    n_classes_ : int
        Number of classes."""
        + docs.ATTRIBUTES
        + """
    See Also
    --------
    HingeForestRegressor : the same model with squared loss.

    Notes
    -----"""
        + docs.NOTES
        + docs.REFERENCES
        + """
    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from obliquetrees import HingeForestClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = HingeForestClassifier(n_estimators=10, max_depth=3,
    ...                             n_hinge_features=8, learning_rate=0.05,
    ...                             max_epochs=30, random_state=0).fit(X, y)
    >>> clf.predict(X[:3])
    array([0, 0, 0])
    """
    )

    _task = "classification"
    _parameter_constraints = {
        **_BaseHingeForest._parameter_constraints,
        "class_weight": [*options("balanced"), dict, None],
    }

    def __init__(
        self,
        n_estimators=100,
        *,
        max_depth=10,
        tree_type="tree",
        n_hinge_features="auto",
        feature_screening="auto",
        head="sum",
        optimizer="lazy_adam",
        learning_rate=0.005,
        batch_size=50,
        max_epochs=100,
        early_stopping=True,
        validation_fraction=0.1,
        n_iter_no_change=5,
        class_weight=None,
        categorical_features="from_dtype",
        monotonic_cst=None,
        warm_start=False,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self._store_init_parameters(locals())

    def _validate_fit_data(self, X, y, sample_weight=None):
        X, y, sample_weight = super()._validate_fit_data(X, y, sample_weight)
        self._raw_y = self.classes_[y]
        return X, y, sample_weight

    def _set_classes(self, classes, y):
        classes = np.unique(np.asarray(classes))
        missing = np.setdiff1d(self.classes_, classes)
        if missing.size:
            raise ValueError(f"y contains labels {missing!r} not in classes.")
        self.classes_ = classes
        self.n_classes_ = len(classes)

    def _index_y(self, y):
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, len(self.classes_) - 1)
        if not np.all(self.classes_[idx] == y):
            raise ValueError("y contains labels not seen in the first partial_fit call.")
        return idx

    def _n_model_outputs(self):
        return len(self.classes_)

    def _encode_targets(self, y, fit):
        return np.asarray(y, dtype=np.int64)

    def _stratify(self, T):
        return T

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch of training on the given data (no early stopping).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One batch; later calls need the features of the first.
        y : array-like of shape (n_samples,)
            Its labels (later calls: among the classes of the first).
        classes : array-like of shape (n_classes,), default=None
            All classes, required in the first call unless ``y`` has them all.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample loss weights of this batch.

        Returns
        -------
        self : HingeForestClassifier
        """
        return self._partial_fit(X, y, sample_weight, classes)

    @fill_doc
    def decision_function(self, X):
        """Class logits (forest output before the softmax).

        %(predict_parameters)s

        Returns
        -------
        logits : ndarray of shape (n_samples, n_classes), or (n_samples,) for two classes
            For two classes, the logit difference (positive favours
            ``classes_[1]``), as scikit-learn expects.
        """
        X = self._validate_X_predict(X)
        F = self._decision(X)
        return F[:, 1] - F[:, 0] if F.shape[1] == 2 else F

    def _class_scores(self, X):
        # the largest logit: argmax of rounded probabilities could tie differently
        return self._decision(X)

    def _predict_output(self, X):
        from obliquetrees.hinge._forward import softmax

        return softmax(self._decision(X))


@fill_doc
class HingeForestRegressor(ObliqueRegressorMixin, _BaseHingeForest):
    __doc__ = (
        """Random hinge forest / ferns regressor trained end to end.

    M hinge trees (or ferns) over a learnt pool of features, their outputs
    summed (or combined by a learnt linear head), trained with squared loss
    (the paper's abalone regression) by minibatch Adam/AdaGrad. The target is
    standardised internally (mean/standard deviation of the training ``y``).
"""
        + docs.parameters(
            '"linear"',
            """        The regressor's default: on validation splits of the
        training parts of the nine regression data sets of the benchmark
        suite it beat ``"sum"`` on 7 and tied on 2, run by run
        (``benchmarks/results/defaults_validation.md``); ``"sum"`` is
        the paper's architecture.
""",
            hinge_default='"auto"',
            screening_default='"auto"',
        )
        + docs.PARAMETERS_TAIL
        + """
    Attributes
    ----------"""
        + docs.ATTRIBUTES
        + """
    See Also
    --------
    HingeForestClassifier : the same model with softmax cross-entropy.

    Notes
    -----"""
        + docs.NOTES
        + """    - the regression target is standardised for training; with
      ``head="sum"`` leaf values in ``trees_`` are in target units (``|r*|
      value`` summed over trees, plus the training mean, is the
      prediction); with the default ``head="linear"`` they are the trees'
      scalar outputs (times the target's training sd), which the learnt
      head combines;
    - the default head is the linear one (the paper's letter/USPS models,
      and the classifier, sum the trees): chosen on validation splits of
      the regression data sets (``benchmarks/results/defaults_validation.md``).
"""
        + docs.REFERENCES
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from obliquetrees import HingeForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = X[:, 0] - 2 * X[:, 1]
    >>> reg = HingeForestRegressor(n_estimators=10, max_depth=3,
    ...                            n_hinge_features=8, learning_rate=0.05,
    ...                            max_epochs=30, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.8)
    True
    """
    )

    _task = "regression"

    def __init__(
        self,
        n_estimators=100,
        *,
        max_depth=10,
        tree_type="tree",
        n_hinge_features="auto",
        feature_screening="auto",
        head="linear",
        optimizer="lazy_adam",
        learning_rate=0.005,
        batch_size=50,
        max_epochs=100,
        early_stopping=True,
        validation_fraction=0.1,
        n_iter_no_change=5,
        categorical_features="from_dtype",
        monotonic_cst=None,
        warm_start=False,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self._store_init_parameters(locals())

    def _n_model_outputs(self):
        return 1

    def _encode_targets(self, y, fit):
        y = np.asarray(y, dtype=np.float64)
        if fit and not hasattr(self, "_y_mean"):
            if np.all(y == y[0]):
                # a constant target is its own mean (the computed one may be an ulp
                # off, and its "spread" that ulp): the standardised targets are all
                # 0, which the new model fits exactly (fit_hinge)
                mean, std = float(y[0]), 0.0
            else:
                # moments of y times an exact power of two (1 for ordinary targets),
                # so targets near 1e+-300 neither overflow nor underflow
                exponent = int(prescale_exponents(y[:, None])[0])
                scaled = np.ldexp(y, -exponent)
                mean = float(np.ldexp(scaled.mean(), exponent))
                std = float(np.ldexp(scaled.std(), exponent))
                check_centred_range(y[:, None], np.array([mean]), name="y")
            self._y_mean = mean
            self._y_scale = std if std > 0 else 1.0
        return ((y - self._y_mean) / self._y_scale)[:, None]

    def _check_outputs(self, forest):
        super()._check_outputs(forest)
        for name in ("_y_mean", "_y_scale"):
            if not np.isfinite(float(getattr(self, name))):
                raise ValueError(f"{name} is not finite.")
        if self._y_scale == 0:
            raise ValueError("_y_scale is 0.")

    def _fit(self, X, y, sample_weight):
        if not (self.warm_start and hasattr(self, "_model")):
            for name in ("_y_mean", "_y_scale"):
                self.__dict__.pop(name, None)
        return super()._fit(X, y, sample_weight)

    def _value_scale(self):
        return self._y_scale

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One epoch of training on the given data (no early stopping).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One batch; later calls need the features of the first.
        y : array-like of shape (n_samples,)
            Its targets (standardised with the first call's mean and scale).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample loss weights of this batch.

        Returns
        -------
        self : HingeForestRegressor
        """
        if not hasattr(self, "_model"):
            for name in ("_y_mean", "_y_scale"):
                self.__dict__.pop(name, None)
        return self._partial_fit(X, y, sample_weight)

    def _predict_output(self, X):
        return self._y_mean + self._y_scale * self._decision(X)
