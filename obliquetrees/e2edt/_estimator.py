"""End-to-end learned deterministic oblique decision trees and forests (E2EDT).

:class:`E2EDTClassifier` (the paper) and :class:`E2EDTRegressor` (its
regression twin, Gaussian leaves) share everything in :class:`_BaseE2EDT`:
parameters, the fit (validation, missing values, sparse input, warm start,
seeds, one call into :func:`obliquetrees.e2edt.training.fit_e2edt`), the
out-of-bag pass and the soft evaluation; each adds what its targets need.
"""

import copy
import warnings

import numpy as np
from scipy import sparse

from obliquetrees._core.missing import MissingValues
from obliquetrees._training.features import resolve_max_features
from obliquetrees.base import (
    BaseObliqueForest,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.e2edt import _docs as docs
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import (
    MAX_FEATURES,
    RUN_CONSTRAINTS,
    integers,
    options,
    reals,
)
from obliquetrees.utils.seeds import draw_seeds
from obliquetrees.utils.validation import check_monotonic_cst

#: E2EDTClassifier's default path-probability threshold of pruned finetune routing, which
#: ``prune_threshold="auto"`` also takes on at most ``max_finetune_samples`` rows (Notes) ...
PRUNE_THRESHOLD = 1e-3
#: ... and ``"auto"`` above them (opt-in: it costs accuracy, see Notes): chosen on validation
#: splits of the scale benchmark's training rows (``benchmarks/results/e2edt_finetune_budget.md``:
#: 2e-2 cost 30 % more CPU for 0.6 points of accuracy).
PRUNE_THRESHOLD_ABOVE_BUDGET = 3e-2
#: ``finetune_epochs="auto"`` (E2EDTClassifier's default) above the row budget compresses the
#: annealing schedule this many times: a third of the epochs, each with thrice the steepness
#: increase and Adam step (chosen on the scale benchmark: ``benchmarks/results/e2edt_anneal.md``,
#: Notes).
FINETUNE_COMPRESSION_ABOVE_BUDGET = 3
#: E2EDTClassifier's default cap on the rows of one finetune epoch (Notes): above every
#: data set of the paper's tables, so their runs are unchanged.
MAX_FINETUNE_SAMPLES = 16384
#: E2EDTRegressor's default Adam step and minibatch size (chosen on validation
#: splits of training data only: see its Notes).
REGRESSOR_LEARNING_RATE = 0.01
REGRESSOR_BATCH_SIZE = 256
#: Bytes a fit holds per tree even when every tree is a single leaf (its task, label,
#: result and unpacked tree): 2.8 KB measured on forests of 20,000 stumps (x86-64,
#: CPython 3.11).
MIN_TREE_BYTES = 2048


def _check_float32_range(X, name):
    """Refuse raw inputs whose float32 split margins could overflow.

    Training runs its products in float32; a margin ``w . x`` with unit-norm
    ``w`` is bounded by ``n_features * max|x|``, which must stay finite.
    """
    limit = float(np.finfo(np.float32).max) / X.shape[1]
    values = X.data if sparse.issparse(X) else X  # the implicit zeros are harmless
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    if peak > limit:
        raise ValueError(
            f"X has values of magnitude up to {peak:.3g}; with standardize=False "
            f"{name} trains in float32 on the inputs as given, which needs "
            f"magnitudes below {limit:.3g} for {X.shape[1]} features. Use "
            "standardize=True (the default) or rescale X."
        )


def _constraints(routings):
    """Parameter constraints shared by the E2EDT estimators, with their ``routing`` options."""
    return {
        "n_estimators": integers(1),
        "max_depth": integers(1, none=True),
        "max_leaf_nodes": integers(2, none=True),
        "min_samples_split": integers(2),
        "max_epochs": integers(1),
        "finetune_epochs": [*integers(0), *options("auto"), None],
        "initial_steepness": reals(0, closed="neither"),
        "steepness_increase": reals(0),
        "learning_rate": reals(0, closed="neither"),
        "batch_size": integers(1),
        "max_attempts": integers(1),
        "max_features": MAX_FEATURES,
        "image_shape": [tuple, list, None],
        "patch_size": integers(1, none=True),
        "spatial_reg": reals(0),
        "standardize": ["boolean"],
        "prune_threshold": [*reals(0, 1), *options("auto")],
        "max_finetune_samples": integers(1, none=True),
        "routing": options(*routings),
        "bootstrap": ["boolean"],
        "oob_score": ["boolean", callable],
        "warm_start": ["boolean"],
        "categorical_features": ["array-like", *options("from_dtype"), None],
        "monotonic_cst": ["array-like", dict, None],
        **RUN_CONSTRAINTS,
    }


class _BaseE2EDT(BaseObliqueForest):
    """What the E2EDT classifier and regressor share: parameters, fit, OOB, soft evaluation.

    Each public class has its own ``__init__``, which stores its arguments as
    given (``_store_init_parameters``), and supplies the target-specific hooks:
    :meth:`_training_targets`, :meth:`_check_same_targets`,
    :meth:`_oob_accumulators`, :meth:`_finish_oob` and :meth:`_mean_of_soft`.
    """

    _fit_accepts_sparse = True
    _min_tree_bytes = MIN_TREE_BYTES
    #: Name of the per-row out-of-bag attribute (NaN rows where no tree left the row out).
    _oob_attribute = ""

    # ------------------------------------------------------------------ fit
    def _prediction_form(self):
        proba_rule, predict_rule = self._rules()
        return "routed", dict(
            proba_rule=proba_rule, predict_rule=predict_rule, steepness=self.steepness_
        )

    def _resolve_params(self, n_features, n_samples=0):
        """The :class:`E2EDTParams` of a fit on ``n_samples`` rows of ``n_features`` features."""
        from obliquetrees.e2edt.training import E2EDTParams  # numba is imported on first use

        image_shape = None
        if self.image_shape is not None:
            shape = tuple(self.image_shape)
            if len(shape) != 2 or not all(
                isinstance(v, (int, np.integer)) and v > 0 for v in shape
            ):
                raise ValueError(
                    f"image_shape must be a pair of positive ints (height, width); "
                    f"got {self.image_shape!r}."
                )
            if shape[0] * shape[1] != n_features:
                raise ValueError(
                    f"image_shape={shape} has {shape[0] * shape[1]} pixels but X has "
                    f"{n_features} features."
                )
            image_shape = (int(shape[0]), int(shape[1]))
        if self.patch_size is not None:
            if image_shape is None:
                raise ValueError("patch_size needs image_shape (height, width).")
            if self.patch_size > min(image_shape):
                raise ValueError(
                    f"patch_size={self.patch_size} exceeds the image size {image_shape}."
                )
            if self.max_features is not None:
                raise ValueError("Set either patch_size or max_features, not both.")
        if self.spatial_reg > 0 and image_shape is None:
            raise ValueError("spatial_reg > 0 needs image_shape (height, width).")
        # None: every split sees all features (and draws no subset)
        n_sub = (
            None
            if self.max_features is None
            else resolve_max_features(self.max_features, n_features)
        )
        finetune, finetune_increase, finetune_rate = self._finetune_schedule(n_samples)
        return self._training_params(
            E2EDTParams,
            finetune_epochs=finetune,
            # floats and bools, as the kernels were compiled for (an int would compile anew)
            initial_steepness=float(self.initial_steepness),
            steepness_increase=float(self.steepness_increase),
            learning_rate=float(self.learning_rate),
            spatial_reg=float(self.spatial_reg),
            standardize=bool(self.standardize),
            bootstrap=bool(self.bootstrap),
            max_features=n_sub,
            image_shape=image_shape,
            prune_threshold=self._prune_threshold(n_samples),
            finetune_steepness_increase=finetune_increase,
            finetune_learning_rate=finetune_rate,
            # hybrid: its probabilities, the training model, route softly
            soft_routing=self.routing != "hard",
            balanced_subsample=bool(self.bootstrap) and self._balanced_subsample(),
        )

    def _above_budget(self, n_samples):
        """Whether a fit on ``n_samples`` rows exceeds the row budget ``max_finetune_samples``."""
        return self.max_finetune_samples is not None and n_samples > self.max_finetune_samples

    def _prune_threshold(self, n_samples):
        """``prune_threshold`` resolved: ``"auto"`` depends on the row budget (Notes)."""
        if self.prune_threshold != "auto":
            return float(self.prune_threshold)
        return PRUNE_THRESHOLD_ABOVE_BUDGET if self._above_budget(n_samples) else PRUNE_THRESHOLD

    def _finetune_schedule(self, n_samples):
        """Finetune epochs and the finetune's own steepness increase and Adam step (or None).

        ``finetune_epochs="auto"`` above the row budget compresses the
        annealing schedule of ``3 * max_epochs`` epochs
        :data:`FINETUNE_COMPRESSION_ABOVE_BUDGET` times (Notes); otherwise the
        finetune uses ``steepness_increase`` and ``learning_rate`` (None, None).
        """
        full = 3 * self.max_epochs
        if self.finetune_epochs == "auto" and self._above_budget(n_samples):
            times = FINETUNE_COMPRESSION_ABOVE_BUDGET
            epochs = max(1, round(full / times))
            return (
                epochs,
                float(self.steepness_increase) * full / epochs,
                float(self.learning_rate) * full / epochs,
            )
        if self.finetune_epochs is None or self.finetune_epochs == "auto":
            return full, None, None
        return self.finetune_epochs, None, None

    def _balanced_subsample(self):
        """Whether each bootstrap gets balanced class weights (classifier only)."""
        return False

    def _fit(self, X, y, sample_weight):
        """Grow and finetune the tree(s) on ``(X, y)`` (:meth:`fit`, its parameters validated)."""
        if self.oob_score and not self.bootstrap:
            raise ValueError("Out-of-bag estimation needs bootstrap=True.")
        self._check_forest_size()
        old = self._warm_start_state()
        if len(old["trees"]) > self.n_estimators:
            raise ValueError(
                f"n_estimators={self.n_estimators} must be at least the number of "
                f"trees already fitted ({len(old['trees'])}) when warm_start=True."
            )
        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
        if old["trees"] and X.shape[1] != old["n_features"]:
            raise ValueError(
                f"warm_start=True needs the {old['n_features']} features of the previous "
                f"fit; X has {X.shape[1]}."
            )
        targets, n_classes, sample_weight = self._training_targets(y, sample_weight, old)
        monotonic_cst = check_monotonic_cst(self, self.monotonic_cst)
        if old["trees"]:
            self._check_warm_constraints(monotonic_cst)
            self._check_warm_categories(old["categories"])
        seeds = draw_seeds(self.random_state, self.n_estimators)
        n_old = len(old["trees"])
        if old["seeds"] is not None:  # random_state=None draws new seeds each fit
            seeds[:n_old] = old["seeds"]
        if n_old == self.n_estimators:
            warnings.warn(
                "Warm-start fitting without increasing n_estimators does not fit new trees.",
                UserWarning,
                stacklevel=2,
            )
            return self
        trees, info = self._grow_trees(
            X, y, targets, sample_weight, n_classes, seeds[n_old:], monotonic_cst
        )
        self._store_trees(old, trees, info, seeds)
        self._remember_constraints(monotonic_cst)
        if self.oob_score:
            self._set_oob_score(X, y)
        elif "oob_score_" in self.__dict__:  # from an earlier fit
            del self.oob_score_
            self.__dict__.pop(self._oob_attribute)
        return self

    def _store_trees(self, old, trees, info, seeds):
        """Set the fitted forest: the trees of ``old`` (:meth:`_warm_start_state`), then ``trees``.

        ``info`` is :meth:`_grow_trees`'s; ``seeds`` those of every tree
        (None: not recorded, for trees whose rows the model does not know).
        """
        self._set_trees(old["trees"] + trees)
        self.steepness_ = old["steepness"] + info["steepness"]
        if seeds is None:
            self.__dict__.pop("_tree_seeds", None)
            self.__dict__.pop("_tree_bootstrap", None)
        else:
            self._tree_seeds = seeds
            self._tree_bootstrap = np.concatenate(
                [np.asarray(old["bootstrap"], dtype=bool), np.full(len(trees), info["bootstrap"])]
            )
        if self.n_estimators == 1:
            self.tree_ = self.trees_[0]
        elif "tree_" in self.__dict__:
            del self.tree_

    def _grow_trees(self, X, y, targets, sample_weight, n_classes, seeds, monotonic_cst):
        """One tree per seed on validated data, folded back to the raw features.

        The training step of :meth:`_fit`, also run by
        :mod:`obliquetrees.dask` on each tree's rows. ``targets``,
        ``n_classes`` and ``sample_weight`` come from
        :meth:`_training_targets`; ``monotonic_cst`` is the checked
        constraint (:func:`check_monotonic_cst`; None: unconstrained).

        Returns
        -------
        trees : list of ObliqueTree
        info : dict
            ``steepness`` (one array per tree) and ``bootstrap`` (whether the
            trees trained on bootstrap samples).
        """
        from threadpoolctl import threadpool_limits

        from obliquetrees.e2edt.training import fit_e2edt  # numba is imported on first use

        # NaN: trees train on indicator-augmented inputs and are folded back
        # (image patches need the pixel layout: there a NaN takes the pixel's mean)
        missing = MissingValues.from_data(
            X, sample_weight, y, n_classes is not None, indicators=self.image_shape is None
        )
        inputs = missing.augment(X)
        params = self._resolve_params(inputs.shape[1], inputs.shape[0])
        if not self.standardize:
            _check_float32_range(inputs, type(self).__name__)
        # BLAS inside training runs single-threaded whatever n_jobs is, so the
        # model does not depend on the thread count.
        with threadpool_limits(limits=1, user_api="blas"):
            trees, info = fit_e2edt(
                inputs,
                targets,
                sample_weight,
                params,
                seeds,
                n_classes=n_classes,
                n_jobs=self.n_jobs,
                verbose=self.verbose,
                name=type(self).__name__,
                monotonic_cst=monotonic_cst,
            )
        trees = [missing.fold(tree) for tree in trees]
        return trees, {"steepness": info["steepness"], "bootstrap": params.bootstrap}

    def _warm_start_state(self):
        """What a warm start keeps of the fitted model (nothing when cold)."""
        if not (self.warm_start and "forest_" in self.__dict__):
            return {"trees": [], "steepness": [], "seeds": None, "bootstrap": []}
        n_trees = self.forest_.n_trees
        return {
            # shallow copies: packing consumes the tree objects, not the user's views
            "trees": [copy.copy(tree) for tree in self.trees_],
            "steepness": list(self.steepness_),
            "seeds": self.__dict__.get("_tree_seeds"),  # absent in older pickles
            # older pickles: their trees saw all rows (no bootstrap then)
            "bootstrap": self.__dict__.get("_tree_bootstrap", np.zeros(n_trees, dtype=bool)),
            "n_features": self.forest_.n_features,
            "categories": self.__dict__.get("category_coordinates_"),
            "n_outputs": self.forest_.n_outputs,
        }

    def _tree_outputs(self, tree, steepness, X, rule):
        """One tree's leaf values (class distributions, targets) of ``X`` under ``rule``.

        ``rule`` is "hard" (the deterministic tree) or "soft" (the
        probabilistic model with the final steepness).
        """
        from obliquetrees.e2edt.training import tree_output  # numba is imported on first use

        return tree_output(tree, steepness, X, rule, self._n_threads())

    def _set_oob_score(self, X, y):
        """The out-of-bag attributes from each tree's bootstrap.

        Every row's outputs are summed over the trees that left it out
        (:meth:`_oob_accumulators`: one sum per rule the subclass needs),
        then turned into the attributes by :meth:`_finish_oob`. Trees
        fitted without bootstrap (an earlier warm-start fit) leave no row out.
        """
        from obliquetrees.e2edt.training import bootstrap_counts

        rules = self._oob_rules()
        n = X.shape[0]
        sums = [np.zeros((n, self.forest_.n_outputs)) for _ in rules]
        n_oob_trees = np.zeros(n, dtype=np.int64)
        for tree, steep, seed, boot in zip(
            self.trees_, self.steepness_, self._tree_seeds, self._tree_bootstrap, strict=True
        ):
            oob = np.flatnonzero(bootstrap_counts(n, seed) == 0) if boot else []
            if len(oob):
                Xo = X[oob]
                out = self._tree_outputs(tree, steep, Xo, rules[0])
                sums[0][oob] += out
                if len(rules) > 1:
                    sums[1][oob] += (
                        out
                        if rules[1] == rules[0]
                        else self._tree_outputs(tree, steep, Xo, rules[1])
                    )
                n_oob_trees[oob] += 1
        covered = n_oob_trees > 0
        if not covered.all():
            warnings.warn(
                f"{np.count_nonzero(~covered)} of {n} samples were drawn by every "
                f"bootstrap, so they have no out-of-bag prediction (NaN rows of "
                f"{self._oob_attribute}; oob_score_ leaves them out). Use more trees.",
                UserWarning,
                stacklevel=4,
            )
        self._finish_oob(sums, n_oob_trees, covered, y)

    def _check_fitted_state(self):
        from obliquetrees._core.validation import (
            VALUE_DTYPE,
            check_array,
            check_finite,
            check_parents_first,
        )

        super()._check_fitted_state()
        forest = self._forest()
        check_parents_first(forest)  # for the probabilistic model (soft evaluation)
        if len(self.steepness_) != forest.n_trees:
            raise ValueError(
                f"steepness_ has {len(self.steepness_)} arrays for {forest.n_trees} trees."
            )
        for steep, n_nodes in zip(self.steepness_, np.diff(forest.node_offset), strict=True):
            check_array(steep, "steepness_", VALUE_DTYPE, 1, (n_nodes,))
            check_finite(steep, "steepness_")
        for name in ("_tree_seeds", "_tree_bootstrap"):  # read by warm starts and OOB
            if name in self.__dict__ and len(self.__dict__[name]) != forest.n_trees:
                raise ValueError(
                    f"{name} has {len(self.__dict__[name])} entries for {forest.n_trees} trees."
                )

    # -------------------------------------------------------------- predict
    def _rules(self):
        """How the probabilistic output and ``predict`` evaluate the trees under ``routing``."""
        return self.routing, self.routing

    def _forest_output(self, X, rule):
        """Mean over the trees of their outputs of ``X`` under ``rule``."""
        if rule == "hard":
            return self._hard_output(X)
        total = None
        for tree, steep in zip(self.trees_, self.steepness_, strict=True):
            out = self._tree_outputs(tree, steep, X, rule)
            total = out if total is None else total + out
        return self._mean_of_soft(total)


@fill_doc
class E2EDTClassifier(ObliqueClassifierMixin, _BaseE2EDT):
    __doc__ = docs.CLASSIFIER

    _parameter_constraints = {
        **_constraints({"hybrid", "hard", "soft"}),
        "class_weight": [*options("balanced", "balanced_subsample"), dict, None],
    }
    _oob_attribute = "oob_decision_function_"

    def __init__(
        self,
        n_estimators=1,
        *,
        max_depth=10,
        max_leaf_nodes=None,
        min_samples_split=2,
        max_epochs=20,
        finetune_epochs="auto",
        initial_steepness=1.0,
        steepness_increase=0.1,
        learning_rate=0.001,
        batch_size=1000,
        max_attempts=5,
        max_features=None,
        image_shape=None,
        patch_size=None,
        spatial_reg=0.0,
        standardize=True,
        prune_threshold=PRUNE_THRESHOLD,
        max_finetune_samples=MAX_FINETUNE_SAMPLES,
        routing="hybrid",
        class_weight=None,
        bootstrap=False,
        oob_score=False,
        warm_start=False,
        categorical_features="from_dtype",
        monotonic_cst=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self._store_init_parameters(locals())

    def _balanced_subsample(self):
        return self.class_weight == "balanced_subsample"

    def _training_targets(self, y, sample_weight, old):
        """Class indices, ``n_classes_`` and ``sample_weight`` times the class weights."""
        if old["trees"] and not np.array_equal(old["classes"], self.classes_):
            raise ValueError(
                f"warm_start=True needs the same classes as the previous fit "
                f"({old['classes'].tolist()}); got {self.classes_.tolist()}."
            )
        return y, self.n_classes_, self._training_weight(y, sample_weight)

    def _whole_set_class_weight(self):
        if self.class_weight != "balanced_subsample":
            return self.class_weight
        # applied per bootstrap (tree_weights), or balanced where each tree sees the whole set
        return None if self.bootstrap else "balanced"

    def _warm_start_state(self):
        state = super()._warm_start_state()
        if state["trees"]:
            state["classes"] = self.classes_
        return state

    def _oob_rules(self):
        """``predict_proba``'s rule (the decision function), then ``predict``'s (the votes)."""
        return self._rules()

    def _finish_oob(self, sums, n_oob_trees, covered, y):
        """``oob_decision_function_`` (mean ``predict_proba``) and ``oob_score_``."""
        from sklearn.metrics import accuracy_score

        proba, votes = sums
        decision = np.full(proba.shape, np.nan)
        # rows of soft outputs sum to 1 only up to rounding (see _forest_output)
        decision[covered] = proba[covered] / proba[covered].sum(axis=1, keepdims=True)
        self.oob_decision_function_ = decision
        score = self.oob_score if callable(self.oob_score) else accuracy_score
        if covered.any():
            y_pred = self.classes_[np.argmax(votes[covered], axis=1)]
            self.oob_score_ = float(score(self.classes_[y[covered]], y_pred))
        else:
            self.oob_score_ = np.nan

    def _rules(self):
        """How ``predict_proba`` and ``predict`` evaluate the trees under ``routing``."""
        if self.routing == "hybrid":
            return "soft", "hard"
        return self.routing, self.routing

    def _mean_of_soft(self, total):
        # the path probabilities sum to 1 only up to rounding: without this, an
        # entry can exceed 1 (1 + 2e-16), which scikit-learn's log_loss refuses
        return total / total.sum(axis=1, keepdims=True)

    def _predict_output(self, X):
        return self._forest_output(X, self._rules()[0])

    def _class_scores(self, X):
        return self._forest_output(X, self._rules()[1])


@fill_doc
class E2EDTRegressor(ObliqueRegressorMixin, _BaseE2EDT):
    __doc__ = docs.regressor(
        str(REGRESSOR_LEARNING_RATE),
        str(REGRESSOR_BATCH_SIZE),
        """
      with the paper's batch of 1000, 0.01 had the highest validation R^2
      of 0.001, 0.003, 0.01 and 0.03 on seven of the nine and was within
      0.03 of the best on the other two, where 0.001 (the paper's step for
      its large classification sets) was the worst or second worst on
      eight. A node with fewer rows than a batch takes one Adam step per
      epoch, so deep stumps barely move from their random start; batches
      of 32 to 1000 rows (with 0.01 or 0.003) gave mean validation R^2
      between 0.731 and 0.766 over the nine sets, 256 the highest.""",
    )

    _parameter_constraints = {
        **_constraints({"hard", "soft"}),
        "store_leaf_targets": ["boolean"],
    }
    _fit_multi_output = True
    _oob_attribute = "oob_prediction_"
    _quantile_routings = ("hard", "soft")

    def __init__(
        self,
        n_estimators=1,
        *,
        max_depth=6,
        max_leaf_nodes=None,
        min_samples_split=2,
        max_epochs=20,
        finetune_epochs=None,
        initial_steepness=1.0,
        steepness_increase=0.1,
        learning_rate=REGRESSOR_LEARNING_RATE,
        batch_size=REGRESSOR_BATCH_SIZE,
        max_attempts=5,
        max_features=None,
        image_shape=None,
        patch_size=None,
        spatial_reg=0.0,
        standardize=True,
        prune_threshold=0.0,
        max_finetune_samples=None,
        routing="soft",
        bootstrap=False,
        oob_score=False,
        warm_start=False,
        categorical_features="from_dtype",
        monotonic_cst=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
        store_leaf_targets=True,
    ):
        self._store_init_parameters(locals())

    def _tree_row_counts(self, n_samples):
        """Each tree's bootstrap counts of the training rows (None: the tree saw every row)."""
        from obliquetrees.e2edt.training import bootstrap_counts

        return (
            bootstrap_counts(n_samples, seed) if boot else None
            for seed, boot in zip(self._tree_seeds, self._tree_bootstrap, strict=True)
        )

    def _training_targets(self, y, sample_weight, old):
        """Targets as (n_samples, n_outputs), no classes (Gaussian leaves); sets ``n_outputs_``."""
        targets = y.reshape(y.shape[0], -1)
        if old["trees"] and targets.shape[1] != old["n_outputs"]:
            raise ValueError(
                f"warm_start=True needs the {old['n_outputs']} outputs of the previous "
                f"fit; y has {targets.shape[1]}."
            )
        self.n_outputs_ = targets.shape[1]
        return targets, None, sample_weight

    def _oob_rules(self):
        """``predict``'s rule only."""
        return (self.routing,)

    def _finish_oob(self, sums, n_oob_trees, covered, y):
        """``oob_prediction_`` (mean over the trees that left a row out) and ``oob_score_``."""
        from sklearn.metrics import r2_score

        (total,) = sums
        prediction = np.full(total.shape, np.nan)
        prediction[covered] = total[covered] / n_oob_trees[covered, None]
        self.oob_prediction_ = prediction[:, 0] if y.ndim == 1 else prediction
        score = self.oob_score if callable(self.oob_score) else r2_score
        if covered.any():
            self.oob_score_ = float(score(y[covered], self.oob_prediction_[covered]))
        else:
            self.oob_score_ = np.nan

    def _mean_of_soft(self, total):
        return total / self.forest_.n_trees

    def _predict_output(self, X):
        return self._forest_output(X, self.routing)

    def _quantiles(self, store, X, levels):
        """Soft routing weighs every leaf by its path probability (``_core.quantiles``)."""
        if self.routing == "hard":
            return super()._quantiles(store, X, levels)
        from obliquetrees._core.quantiles import soft_forest_quantiles

        return soft_forest_quantiles(
            self.trees_, self.steepness_, store, X, levels, self._n_threads()
        )
