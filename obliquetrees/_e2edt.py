"""End-to-end learned deterministic oblique decision trees and forests (E2EDT)."""

import numpy as np
from scipy import sparse

from obliquetrees._core.missing import MissingValues
from obliquetrees.base import BaseObliqueForest, ObliqueClassifierMixin, resolve_max_features
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
    routing : {"hard", "soft"}, default="hard"
        ``"hard"``: the deterministic tree (route by the sign of each split,
        output the reached leaf's distribution), the paper's inference model.
        ``"soft"``: the probabilistic training model with the final
        steepness (eq. 2). ``apply`` and ``decision_path`` are always hard.
    n_jobs : int or None, default=None
        Trees trained in parallel (joblib threads) and prediction threads.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial splits, feature subsets and minibatch order; the
        same value gives the same model for any ``n_jobs``.
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
        used by ``routing="soft"``.

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
    - Forests: every tree on all data (no bootstrap, as in the paper);
      patches are placed anywhere in the image (the authors' code only
      samples patches on the diagonal), and the finetune keeps annealing the
      steepness (the authors' code stops annealing in forest refinement);
      each tree is finetuned on its own (the authors' code refines all trees
      over shared minibatches, which is the same objective).
    - Training data are held in float32 for the BLAS products (activations
      and weight gradients); everything else is float64.

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
        "routing": [StrOptions({"hard", "soft"})],
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
        routing="hard",
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
        )

    @_fit_context(prefer_skip_nested_validation=True)
    @fill_doc
    def fit(self, X, y, sample_weight=None):
        """Grow and finetune the tree(s) on ``(X, y)``.

        %(fit_parameters_classifier)s
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples in the likelihood (E-step statistics,
            leaf updates and minibatch gradients). None means equal weights.

        %(fit_returns)s
        """
        from threadpoolctl import threadpool_limits

        from obliquetrees._training.e2edt import fit_forest  # numba is imported on first use

        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
        # NaN: trees train on indicator-augmented inputs and are folded back
        # (image patches need the pixel layout: there a NaN takes the pixel's mean)
        missing = MissingValues.from_data(X, sample_weight, y, indicators=self.image_shape is None)
        inputs = missing.augment(X)
        params = self._resolve_params(inputs.shape[1])
        if not self.standardize:
            _check_float32_range(inputs)
        seeds = draw_seeds(self.random_state, self.n_estimators)
        # BLAS inside training runs single-threaded whatever n_jobs is, so the
        # model does not depend on the thread count.
        with threadpool_limits(limits=1, user_api="blas"):
            trees, steepness = fit_forest(
                inputs,
                y,
                self.n_classes_,
                seeds,
                params,
                sample_weight=sample_weight,
                n_jobs=self.n_jobs,
                verbose=self.verbose,
            )
        self._set_trees([missing.fold(tree) for tree in trees])
        self.steepness_ = steepness
        if self.n_estimators == 1:
            self.tree_ = self.trees_[0]
        elif "tree_" in self.__dict__:
            del self.tree_
        return self

    def _check_fitted_state(self):
        from obliquetrees._core.validation import (
            VALUE_DTYPE,
            check_array,
            check_finite,
            check_parents_first,
        )

        super()._check_fitted_state()
        forest = self._forest()
        check_parents_first(forest)  # for routing="soft"
        if len(self.steepness_) != forest.n_trees:
            raise ValueError(
                f"steepness_ has {len(self.steepness_)} arrays for {forest.n_trees} trees."
            )
        for steep, n_nodes in zip(self.steepness_, np.diff(forest.node_offset), strict=True):
            check_array(steep, "steepness_", VALUE_DTYPE, 1, (n_nodes,))
            check_finite(steep, "steepness_")

    # -------------------------------------------------------------- predict
    def _predict_output(self, X):
        if self.routing == "hard":
            return super()._predict_output(X)
        from obliquetrees._core.soft import soft_predict  # numba is imported on first use

        total = None
        for tree, steep in zip(self.trees_, self.steepness_, strict=True):
            proba = soft_predict(tree, X, tree.value, steepness=steep)
            total = proba if total is None else total + proba
        return total / len(self.steepness_)
