"""End-to-end learned deterministic oblique decision trees and forests (E2EDT)."""

import copy
import warnings

import numpy as np
from scipy import sparse

from obliquetrees._core.missing import MissingValues
from obliquetrees.base import (
    BaseObliqueForest,
    ObliqueClassifierMixin,
    class_weighted_sample_weight,
    resolve_max_features,
)
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import (
    Integral,
    Interval,
    Real,
    RealNotInt,
    StrOptions,
    _fit_context,
)
from obliquetrees.utils.seeds import draw_seeds


def _check_float32_range(X):
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
            "E2EDTClassifier trains in float32 on the inputs as given, which needs "
            f"magnitudes below {limit:.3g} for {X.shape[1]} features. Use "
            "standardize=True (the default) or rescale X."
        )


class E2EDTClassifier(ObliqueClassifierMixin, BaseObliqueForest):
    """End-to-end learned deterministic oblique decision tree (or forest).

    A probabilistic oblique tree (split ``i`` sends ``x`` right with
    probability ``sigmoid(gamma_i * (w_i . x + b_i))``, leaves hold class
    distributions) is grown greedily, one stump per leaf trained on the
    samples the tree routes there deterministically, then all splits and
    leaves are finetuned jointly with probabilistic routing. Training is EM:
    closed-form leaf updates and Adam on the split objective, while the
    steepness ``gamma_i`` of every split is raised after each epoch so that the
    probabilistic training model approaches the deterministic tree used for
    prediction. ``n_estimators > 1`` trains a forest of such trees (each on
    all data, every split on its own random feature subset or image patch).

    ``fit`` accepts sparse ``X`` (CSR, CSC, COO, ...) and trains on its
    stored entries without densifying it: memory grows with the number of
    non-zeros plus the model (see Notes).

    Parameters
    ----------
    n_estimators : int, default=1
        Number of trees. 1 is the single E2EDT tree; more make the E2EDF
        forest, whose prediction is the mean of the trees' class
        distributions (eq. 20).
    max_depth : int or None, default=10
        Maximum depth of a tree (None: unlimited).
    max_leaf_nodes : int or None, default=None
        If set, grow best first by information gain (the paper's sect. 3.4)
        until this many leaves; otherwise grow level by level.
    min_samples_split : int, default=2
        A node with fewer training samples stays a leaf.
    max_epochs : int, default=20
        Epochs of EM for each greedy stump (the paper's "epochs").
    finetune_epochs : int or None, default=None
        Epochs of the joint finetune of all splits; None means
        ``3 * max_epochs`` (the paper's forests); 0 keeps the greedy tree.
    initial_steepness : float, default=1.0
        Steepness ``gamma`` of a new split.
    steepness_increase : float, default=0.1
        Added to the steepness of a split after each of its epochs, in
        greedy growth and in finetune alike (``Delta gamma``).
    learning_rate : float, default=0.001
        Adam step size (the other Adam parameters are beta1=0.9,
        beta2=0.999, eps=1e-8, as in the paper).
    batch_size : int, default=1000
        Minibatch size of the Adam updates (shuffled every epoch).
    max_attempts : int, default=5
        A stump that sends all its samples to one side is retrained with a
        fresh initialisation this many times at most; then the node stays a
        leaf.
    max_features : int, float, {"sqrt", "log2"} or None, default=None
        Size of the random feature subset each split is trained on (forests
        use it to decorrelate the trees): an int is a count, a float a
        fraction of ``n_features``; None uses all features.
    image_shape : tuple of int (height, width) or None, default=None
        Shape of the image when each sample is a row-major flattened image;
        needed by ``patch_size`` and ``spatial_reg``.
    patch_size : int or None, default=None
        If set, each split is trained on a random ``patch_size x patch_size``
        square patch of the image, placed anywhere (instead of
        ``max_features``).
    spatial_reg : float, default=0.0
        Strength ``lambda`` of the spatial regulariser
        ``-lambda * sum_i w_i^T M w_i`` (eq. 15), ``M`` the Laplacian of the
        4-neighbour pixel grid (needs ``image_shape``).
    standardize : bool, default=True
        Train on inputs standardised to zero mean and unit variance per
        feature (the paper; the fitted trees still act on raw ``X``). False
        trains on the inputs as given, as the authors' code does for images
        (USPS, MNIST): per-pixel standardisation blows up near-constant
        border pixels. Training runs in float32, so False refuses inputs
        whose margins could overflow it (``|x| > 3.4e38 / n_features``).
    routing : {"hybrid", "hard", "soft"}, default="hybrid"
        How a fitted tree is evaluated. ``"hybrid"``: ``predict`` (and
        ``score``) follows the deterministic tree, the paper's inference
        model (route by the sign of each split, take the reached leaf's
        distribution), while ``predict_proba`` is the probabilistic training
        model with the final steepness (eq. 2), the model whose likelihood
        training maximises: its probabilities fall off smoothly near the
        splits. ``"hard"``: ``predict_proba`` too is the reached leaf's
        distribution (mostly 0 or 1 in deep trees: a poor probability, see
        Notes). ``"soft"``: both from the probabilistic model. With
        ``"hybrid"``, ``predict`` can differ from the argmax of
        ``predict_proba`` for rows near a split (see Notes for how often).
        ``apply`` and ``decision_path`` are always hard. Switching needs no
        refit.
    class_weight : {"balanced", "balanced_subsample"}, dict or None, default=None
        Weights of the classes, multiplied into ``sample_weight`` as in
        scikit-learn's forests. A dict maps class labels of ``y`` to finite
        non-negative weights (classes it does not name weigh 1); other
        labels or values raise a ``ValueError``, as do weights (times
        ``sample_weight``) that are zero for every sample. ``"balanced"``
        weighs class ``c`` by ``n_samples / (n_classes * count_c)``;
        ``"balanced_subsample"`` does so over each tree's bootstrap (with
        ``bootstrap=False``, where every tree sees all rows, it is
        ``"balanced"``).
    bootstrap : bool, default=False
        Train each tree on a bootstrap sample of the rows (an extension: the
        paper trains every tree on all data). The sample is drawn as integer
        weights from the tree's seed; ``X`` is never copied per tree, and the
        training passes still visit the out-of-bag rows (with weight 0).
    oob_score : bool or callable, default=False
        Score the forest on the out-of-bag rows after fitting (needs
        ``bootstrap=True``): every training row is predicted by the trees
        whose bootstrap left it out. True uses accuracy; a callable is
        called as ``score(y_true, y_pred)`` with class labels.
    warm_start : bool, default=False
        Keep the trees of the previous fit and add new ones up to
        ``n_estimators``; with the same ``random_state`` and data the result
        equals a fit of all trees at once.
    n_jobs : int or None, default=None
        Trees trained in parallel (joblib threads) and prediction threads.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial splits, feature subsets, minibatch order and
        bootstraps; the same value gives the same model for any ``n_jobs``.
    verbose : int, default=0
        joblib progress messages while training forests.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string feature names.
    forest_ : ObliqueForest
        The fitted trees packed for prediction.
    trees_ : list of ObliqueTree
        The fitted trees (weights in the units of the input ``X``).
    tree_ : ObliqueTree
        The fitted tree (only when ``n_estimators == 1``).
    feature_importances_ : ndarray of shape (n_features_in_,)
        Impurity-based importances of the oblique splits, summing to 1 (all
        zeros when every tree is a single leaf); each split's impurity
        decrease is shared among its features in proportion to
        ``|w_j| * std(x_j)``. Computed on access.
    steepness_ : list of ndarray of shape (n_nodes,)
        Final steepness ``gamma`` of every split of every tree (0 at leaves),
        used by the probabilistic model (``routing="hybrid"`` and ``"soft"``).
    oob_score_ : float
        Score of ``predict``'s rule on the out-of-bag rows (``oob_score``
        only), over the rows that at least one tree left out.
    oob_decision_function_ : ndarray of shape (n_samples, n_classes)
        Mean ``predict_proba`` of each training row under the trees that
        left it out (``oob_score`` only); NaN rows for rows that every
        bootstrap drew (a warning says how many).

    Notes
    -----
    Faithful to the paper (Hehn, Kooij & Hamprecht 2019, sect. 2) and, where
    it is silent, to the authors' code, except where noted:

    - Inputs are standardised with the (weighted) training mean and standard
      deviation, as in the paper; the scaling is folded into the stored
      weights, so ``trees_`` act on raw ``X``. ``standardize=False`` skips
      it, as the authors' code does for image data (its USPS loader feeds
      the raw pixels). Either way, features constant in training (or varying
      only below about 1e-301, where no finite weight in raw units could use
      them) get no weight, so their value at predict time does not matter.
    - Every EM run (each stump, and the finetune) first updates only the
      leaves for one epoch, as the authors' code does. A stump epoch is then
      E-step on all its samples, one Adam pass on eq. 14, closed-form leaves
      (as in the authors' code). A finetune epoch computes the
      responsibilities per minibatch at the parameters its Adam step starts
      from (the authors' code: once per epoch for all samples), which saves
      one activation product per minibatch and never stores an
      ``n_samples x n_leaves`` matrix; the leaves are updated at the end of
      the epoch from the statistics of all minibatches. The Adam objective is
      the mean over the minibatch (weighted by ``sample_weight``) plus the
      regulariser.
    - Path probabilities are products of exact sigmoids computed in a way
      that never divides by zero (log space when a product underflows); the
      authors' code clamps each sigmoid to [1e-5, 1 - 1e-5] instead.
      Leaves that receive no responsibility keep their distribution (the
      authors' code produces NaN).
    - Initial split: direction uniform on the unit sphere (paper), offset
      drawn as in the authors' code (about ``U(-sqrt(3/k), sqrt(3/k))`` for
      ``k`` features, i.e. near the origin of the standardised data).
    - A root that is never split predicts the training class frequencies
      (the authors' code: uniform).
    - Forests: every tree on all data (as in the paper; ``bootstrap=True``
      is an extension, with scikit-learn's out-of-bag estimates);
      patches are placed anywhere in the image (the authors' code only
      samples patches on the diagonal), and the finetune keeps annealing the
      steepness (the authors' code stops annealing in forest refinement);
      each tree is finetuned on its own (the authors' code refines all trees
      over shared minibatches, which is the same objective).
    - Training data are held in float32 for the BLAS products (activations
      and weight gradients); everything else is float64.
    - ``class_weight`` multiplies ``sample_weight`` before anything else, so
      it also weighs the standardisation statistics and the test that gives
      features missing-value indicators; bootstrap counts (and
      ``"balanced_subsample"``) weigh only their tree's training. Leaves are
      EM's weighted class distributions, so class weights move them even in
      deep trees: on a 1 %-positive problem (``benchmarks/results/proba.md``)
      ``"balanced"`` raised the recall of the positives from 17 % to 38 %
      and the balanced accuracy from 58 % to 68 % (a RandomForestClassifier,
      whose fully grown trees end in pure leaves, gained nothing).

    Probabilities (``routing``): the leaves of a deep deterministic tree are
    nearly pure, so ``routing="hard"`` gives mostly 0/1 probabilities and a
    confident mistake costs a log loss of about 36 (scikit-learn clips at
    machine epsilon). Measured with the defaults (``benchmarks/results/
    proba.md``, 5 seeds of stratified 75/25 splits), its log loss is 1.76 on
    breast_cancer and 3.25 on digits, 7 and 11 times that of
    ``RandomForestClassifier(n_estimators=100)`` on the same splits. The
    probabilistic model with the final steepness, the model whose likelihood
    EM maximised, gives 0.136 and 0.280 with the same trees (0.53 and 0.91
    times the forest's); one pseudo-count per class in the leaves instead
    gave 0.159 and 0.80. Hence the default ``"hybrid"``: ``predict_proba``
    from the probabilistic model, ``predict`` (and ``score``) from the
    deterministic tree, the paper's inference model, which evaluates one
    split per level where the probabilistic model evaluates every node;
    predictions are those of ``"hard"`` bit for bit. The price is that
    ``predict`` is not always the argmax of ``predict_proba``: they differed
    on 1.7 % of the test rows of breast_cancer and 2.4 % of digits (0.3 % to
    6 % on the E2EDT table's data sets with ``max_depth=6``), rows near a
    split of their path, where the probabilistic model sends a sizeable
    share of them the other way; so scikit-learn's check that the two agree
    (``check_classifiers_train``) fails for the default. ``routing="soft"``
    makes ``predict`` the argmax of the same probabilities; it was also the
    more accurate rule on every data set measured (by 0.1 to 2.3 points),
    at the cost of evaluating every node of every tree at predict time.
    That evaluation also makes the default ``predict_proba`` slower than the
    deterministic tree's, 3 to 22 times in the same measurements (digits:
    33 ms against 1.5 ms for 450 rows; connect4 with ``max_depth=6``: 179 ms
    against 12 ms for 13,511 rows), and in a process that has not loaded
    the numba kernels yet it loads them, where the deterministic tree
    answers a small batch in numpy.

    Sparse input: ``X`` is converted to canonical CSR and never densified
    (nor is the standardised ``(X - mean) / scale``, which is dense). The
    mean and scale come from the stored entries; every product with the
    split weights is a CSR x dense product on the raw entries with the
    standardisation applied algebraically, ``Z @ w = X @ (w / scale) -
    mean . (w / scale)``, and the weight gradient ``G @ Z`` gets the same
    rank-one correction. These products run in float64 on the stored entries,
    whereas dense training rounds ``Z`` to float32 and sums in BLAS order, so
    dense and sparse input of the same data give the same model only up to
    rounding: the same ``random_state`` draws the same initial splits, feature
    subsets and minibatches, and the trees agree closely (on small test
    problems, predictions agree on at least 99 % of rows and probabilities to
    about 1e-6; a sample lying almost on a split's plane in training can go the
    other way and change the tree below). Dense input is trained exactly as
    before.

    References
    ----------
    T. M. Hehn, J. F. P. Kooij and F. A. Hamprecht, "End-to-End Learning of
    Decision Trees and Forests", International Journal of Computer Vision
    128, 997-1011 (2020).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from obliquetrees import E2EDTClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> # 150 samples give one Adam step per epoch: a larger step than the paper's
    >>> clf = E2EDTClassifier(max_depth=3, max_epochs=10, learning_rate=0.05,
    ...                       random_state=0).fit(X, y)
    >>> clf.tree_.max_depth <= 3
    True
    >>> clf.score(X, y) > 0.9
    True
    """

    _fit_accepts_sparse = True

    _parameter_constraints = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "min_samples_split": [Interval(Integral, 2, None, closed="left")],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "finetune_epochs": [Interval(Integral, 0, None, closed="left"), None],
        "initial_steepness": [Interval(Real, 0, None, closed="neither")],
        "steepness_increase": [Interval(Real, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "max_attempts": [Interval(Integral, 1, None, closed="left")],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
            StrOptions({"sqrt", "log2"}),
            None,
        ],
        "image_shape": [tuple, list, None],
        "patch_size": [Interval(Integral, 1, None, closed="left"), None],
        "spatial_reg": [Interval(Real, 0, None, closed="left")],
        "standardize": ["boolean"],
        "routing": [StrOptions({"hybrid", "hard", "soft"})],
        "class_weight": [StrOptions({"balanced", "balanced_subsample"}), dict, None],
        "bootstrap": ["boolean"],
        "oob_score": ["boolean", callable],
        "warm_start": ["boolean"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_estimators=1,
        *,
        max_depth=10,
        max_leaf_nodes=None,
        min_samples_split=2,
        max_epochs=20,
        finetune_epochs=None,
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
        routing="hybrid",
        class_weight=None,
        bootstrap=False,
        oob_score=False,
        warm_start=False,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_split = min_samples_split
        self.max_epochs = max_epochs
        self.finetune_epochs = finetune_epochs
        self.initial_steepness = initial_steepness
        self.steepness_increase = steepness_increase
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.max_features = max_features
        self.image_shape = image_shape
        self.patch_size = patch_size
        self.spatial_reg = spatial_reg
        self.standardize = standardize
        self.routing = routing
        self.class_weight = class_weight
        self.bootstrap = bootstrap
        self.oob_score = oob_score
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def _resolve_params(self, n_features):
        from obliquetrees._training.e2edt import E2EDTParams  # numba is imported on first use

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
        finetune = 3 * self.max_epochs if self.finetune_epochs is None else self.finetune_epochs
        return E2EDTParams(
            max_depth=self.max_depth,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_split=self.min_samples_split,
            max_epochs=self.max_epochs,
            finetune_epochs=finetune,
            initial_steepness=float(self.initial_steepness),
            steepness_increase=float(self.steepness_increase),
            learning_rate=float(self.learning_rate),
            batch_size=self.batch_size,
            max_attempts=self.max_attempts,
            max_features=n_sub,
            image_shape=image_shape,
            patch_size=self.patch_size,
            spatial_reg=float(self.spatial_reg),
            standardize=bool(self.standardize),
            bootstrap=bool(self.bootstrap),
            balanced_subsample=bool(self.bootstrap) and self.class_weight == "balanced_subsample",
        )

    @_fit_context(prefer_skip_nested_validation=True)
    @fill_doc
    def fit(self, X, y, sample_weight=None):
        """Grow and finetune the tree(s) on ``(X, y)``.

        %(fit_parameters_classifier)s
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the likelihood (E-step statistics,
            leaf updates and minibatch gradients), multiplied with
            ``class_weight`` and the bootstrap counts. None means equal
            weights.

        %(fit_returns)s
        """
        from threadpoolctl import threadpool_limits

        from obliquetrees._training.e2edt import fit_forest  # numba is imported on first use

        if self.oob_score and not self.bootstrap:
            raise ValueError("Out-of-bag estimation needs bootstrap=True.")
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
        if old["trees"] and not np.array_equal(old["classes"], self.classes_):
            raise ValueError(
                f"warm_start=True needs the same classes as the previous fit "
                f"({old['classes'].tolist()}); got {self.classes_.tolist()}."
            )
        class_weight = self.class_weight
        if class_weight == "balanced_subsample" and not self.bootstrap:
            class_weight = "balanced"  # every tree's sample is the whole set
        if class_weight != "balanced_subsample":  # that one is applied per tree
            sample_weight = class_weighted_sample_weight(
                class_weight, self.classes_, y, sample_weight
            )
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
        # NaN: trees train on indicator-augmented inputs and are folded back
        # (image patches need the pixel layout: there a NaN takes the pixel's mean)
        missing = MissingValues.from_data(X, sample_weight, y, indicators=self.image_shape is None)
        inputs = missing.augment(X)
        params = self._resolve_params(inputs.shape[1])
        if not self.standardize:
            _check_float32_range(inputs)
        # BLAS inside training runs single-threaded whatever n_jobs is, so the
        # model does not depend on the thread count.
        with threadpool_limits(limits=1, user_api="blas"):
            trees, steepness = fit_forest(
                inputs,
                y,
                self.n_classes_,
                seeds[n_old:],
                params,
                sample_weight=sample_weight,
                n_jobs=self.n_jobs,
                verbose=self.verbose,
            )
        self._set_trees(old["trees"] + [missing.fold(tree) for tree in trees])
        self.steepness_ = old["steepness"] + steepness
        self._tree_seeds = seeds
        self._tree_bootstrap = np.concatenate(
            [np.asarray(old["bootstrap"], dtype=bool), np.full(len(trees), params.bootstrap)]
        )
        if self.n_estimators == 1:
            self.tree_ = self.trees_[0]
        elif "tree_" in self.__dict__:
            del self.tree_
        if self.oob_score:
            self._set_oob_score(X, y)
        elif "oob_score_" in self.__dict__:  # from an earlier fit
            del self.oob_score_, self.oob_decision_function_
        return self

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
            "classes": self.classes_,
            "n_features": self.forest_.n_features,
        }

    def _tree_outputs(self, tree, steepness, X, rule):
        """One tree's class distributions of ``X`` under ``rule`` ("hard" or "soft")."""
        if rule == "hard":
            from obliquetrees._core import traversal
            from obliquetrees._core.forest import ObliqueForest

            one_tree = ObliqueForest.from_trees([tree], validate=False)
            return traversal.predict_value(one_tree, X, self._prediction_threads())
        # numba is imported on first use
        from obliquetrees._core._jit import numba_threads
        from obliquetrees._core.soft import soft_predict

        with numba_threads(self._prediction_threads()):  # results do not depend on it
            return soft_predict(tree, X, tree.value, steepness=steepness)

    def _set_oob_score(self, X, y):
        """``oob_decision_function_`` and ``oob_score_`` from each tree's bootstrap.

        The decision function averages ``predict_proba``'s rule over the
        trees that left a row out, the score classifies by ``predict``'s
        rule (they differ under ``routing="hybrid"``). Trees fitted without
        bootstrap (an earlier warm-start fit) leave no row out.
        """
        from sklearn.metrics import accuracy_score

        from obliquetrees._training.e2edt import bootstrap_counts

        proba_rule, predict_rule = self._rules()
        n = X.shape[0]
        proba = np.zeros((n, self.n_classes_))
        votes = np.zeros((n, self.n_classes_))
        n_oob_trees = np.zeros(n, dtype=np.int64)
        for tree, steep, seed, boot in zip(
            self.trees_, self.steepness_, self._tree_seeds, self._tree_bootstrap, strict=True
        ):
            oob = np.flatnonzero(bootstrap_counts(n, seed) == 0) if boot else []
            if len(oob):
                Xo = X[oob]
                out = self._tree_outputs(tree, steep, Xo, proba_rule)
                proba[oob] += out
                votes[oob] += (
                    out
                    if predict_rule == proba_rule
                    else self._tree_outputs(tree, steep, Xo, predict_rule)
                )
                n_oob_trees[oob] += 1
        covered = n_oob_trees > 0
        if not covered.all():
            warnings.warn(
                f"{np.count_nonzero(~covered)} of {n} samples were drawn by every "
                "bootstrap, so they have no out-of-bag prediction (NaN rows of "
                "oob_decision_function_; oob_score_ leaves them out). Use more trees.",
                UserWarning,
                stacklevel=4,
            )
        decision = np.full((n, self.n_classes_), np.nan)
        # rows of soft outputs sum to 1 only up to rounding (see _forest_output)
        decision[covered] = proba[covered] / proba[covered].sum(axis=1, keepdims=True)
        self.oob_decision_function_ = decision
        score = self.oob_score if callable(self.oob_score) else accuracy_score
        if covered.any():
            y_pred = self.classes_[np.argmax(votes[covered], axis=1)]
            self.oob_score_ = float(score(self.classes_[y[covered]], y_pred))
        else:
            self.oob_score_ = np.nan

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
        """How ``predict_proba`` and ``predict`` evaluate the trees under ``routing``."""
        if self.routing == "hybrid":
            return "soft", "hard"
        return self.routing, self.routing

    def _forest_output(self, X, rule):
        """Mean over the trees of their class distributions of ``X`` under ``rule``."""
        if rule == "hard":
            return super()._predict_output(X)
        total = None
        for tree, steep in zip(self.trees_, self.steepness_, strict=True):
            proba = self._tree_outputs(tree, steep, X, rule)
            total = proba if total is None else total + proba
        # the path probabilities sum to 1 only up to rounding: without this, an
        # entry can exceed 1 (1 + 2e-16), which scikit-learn's log_loss refuses
        return total / total.sum(axis=1, keepdims=True)

    def _predict_output(self, X):
        return self._forest_output(X, self._rules()[0])

    def _class_scores(self, X):
        return self._forest_output(X, self._rules()[1])
