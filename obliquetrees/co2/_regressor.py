"""CO2 Forest for regression: CCCP-optimised oblique splits under squared loss."""

from obliquetrees.base import ObliqueRegressorMixin
from obliquetrees.co2._estimator import _BaseCO2Forest
from obliquetrees.utils._docstrings import fill_doc


@fill_doc
class CO2ForestRegressor(ObliqueRegressorMixin, _BaseCO2Forest):
    """CO2 Forest regressor: bagged trees whose oblique splits are optimised by CCCP.

    The regression twin of :class:`CO2ForestClassifier`. Each tree is grown
    breadth-first on a bootstrap sample. At every internal node a decision
    stump (an oblique hyperplane and two leaf values) is fitted by minimising
    the convex-concave upper bound of Norouzi et al. (Eq. 10) on its squared
    loss under ``||(w, b)||^2 <= nu``, by the convex-concave procedure with
    minibatch subgradient descent, as in the classifier. The stump starts from
    the best axis-aligned split (by squared error) among ``max_features``
    random features. Leaves store the weighted mean target of their training
    samples; ``predict`` averages the trees. Several outputs (a 2-D ``y``)
    share the splits, as in scikit-learn's forests.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    nu : float, default=10.0
        Bound on the squared norm of each split's weight vector (bias
        included), in standardised feature units.
    learning_rate : float, default=0.1
        Initial step size of the stochastic subgradient descent.
    max_features : {"sqrt", "log2"}, int, float or None, default=None
        Number ``q`` of random candidate features for the axis-aligned split
        that initialises each node: ``"sqrt"``, ``"log2"``, an int, a
        fraction of ``n_features`` or all features (None). All features by
        default, as scikit-learn's forest regressors (the classifier's
        ``"sqrt"`` scored lower on validation splits of 5 of the 9
        regression data sets and higher on none; all features cost 1.1-1.6x
        its fit time, median 1.4x: ``benchmarks/results/defaults_validation.md``).
    max_depth : int, default=None
        Maximum depth; None grows until leaves hold one target value.
    min_samples_split : int, default=2
        Minimum number of (distinct bootstrap) samples to split a node.
    min_samples_leaf : int, default=1
        Minimum number of samples in each child; an optimised split that
        violates it is replaced by the initial axis-aligned split.
    max_leaf_nodes : int, default=None
        Maximum number of leaves per tree; nodes are split breadth-first
        until it is reached. None means unlimited.
    min_impurity_decrease : float, default=0.0
        A node's split is kept only if it decreases the weighted impurity by
        at least this value, in scikit-learn's definition::

            N_t / N * (impurity - N_t_R / N_t * right_impurity
                                - N_t_L / N_t * left_impurity)

        where ``N`` is the total weight of the tree's training sample
        (bootstrap counts times ``sample_weight``), ``N_t``, ``N_t_L``,
        ``N_t_R`` the weights of the node and its children, and the impurity
        is the weighted variance of ``y`` averaged over the outputs, in the
        units of ``y`` squared (scikit-learn's ``criterion="squared_error"``).
    batch_size : int, default=100
        Minibatch size of the subgradient descent.
    momentum : float, default=0.9
        Momentum of the subgradient descent.
    cccp_epochs : int, default=3
        Epochs over the node's samples per CCCP iteration.
    max_cccp_iter : int, default=20
        Maximum number of CCCP (outer) iterations per node.
    tol : float, default=1e-3
        CCCP stops when an outer iteration improves the surrogate by less
        than ``tol`` times its value, or, on a node of at least
        ``batch_size`` samples, when at most ``tol`` times its samples
        changed side in the iteration (see :class:`CO2ForestClassifier`'s
        Notes); an iteration that does not improve the surrogate is undone
        and ends the loop.
    max_cccp_samples : int or None, default=2048
        A node with more (distinct) samples fits its stump (initial split
        and CCCP) on this many of them, drawn uniformly without replacement
        (the partition uses all of them); None fits every node on all its
        samples.
    %(co2_split_support_regressor)s
    bootstrap : bool, default=True
        Grow each tree on a bootstrap sample (drawn as integer weights; X is
        never copied per tree). If False every tree sees all samples.
    max_samples : int, float or None, default=None
        Rows drawn (uniformly, with replacement) for each tree's bootstrap
        sample: None draws ``n_samples``, an int that many, a float
        ``max(int(max_samples * n_samples), 1)``. Needs ``bootstrap=True``.
    oob_score : bool or callable, default=False
        Score the forest on the out-of-bag samples after fitting (needs
        ``bootstrap=True``). True uses R^2 (averaged over outputs); a
        callable is called as ``score(y_true, y_pred)``.
    %(categorical_features)s
    %(monotonic_cst)s
    n_jobs : int or None, default=None
        Trees grown in parallel (joblib threads; the kernels release the GIL)
        and threads of prediction. None means 1 unless in a
        :func:`joblib.parallel_backend` context; -1 means all cores. The
        fitted model does not depend on it.
    random_state : int, RandomState instance or None, default=None
        Seeds the bootstraps, feature draws and minibatch orders; one integer
        seed per tree is drawn up front.
    verbose : int, default=0
        0 is quiet; at 1 and above one line per finished tree, with the
        time elapsed and an estimate of the time left (``"auto"``'s pilot
        trees count: the lines number the trees grown).
    warm_start : bool, default=False
        Reuse the trees of the previous fit and add new ones up to
        ``n_estimators``; the result equals a cold fit with the same
        ``random_state`` and data. The features, number of outputs and
        bootstrap size must be those of the previous fit.
    store_leaf_targets : bool, default=True
        Keep each tree's in-bag training targets and weights, grouped by
        leaf, for :meth:`predict_quantiles` (a quantile regression forest).
        They take 16 bytes per output and distinct in-bag row of each tree
        (about ``0.63 * n_samples`` of them with the default bootstrap), and
        no copy of ``X``; False keeps none (``predict_quantiles`` then
        raises, :meth:`record_leaf_targets` can add them later).

    Attributes
    ----------
    n_outputs_ : int
        Number of outputs (columns of ``y``).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names, when X has string column names.
    forest_ : ObliqueForest
        The packed trees.
    trees_ : list of ObliqueTree
        The fitted trees; split weights act on the raw input and every node's
        value is its weighted mean target in the units of ``y``.
    feature_importances_ : ndarray of shape (n_features_in_,)
        Impurity-based (squared error) importances of the oblique splits,
        summing to 1 (all zeros when every tree is a single leaf); each
        split's decrease is shared among its features in proportion to
        ``|w_j| * std(x_j)``. Computed on access.
    %(categorical_attributes)s
    max_features_ : int
        The resolved ``q``.
    max_split_features_ : int
        The resolved ``max_split_features`` (``n_features`` when None).
    oblique_penalty_ : float or None
        The margin the trees grew with: ``oblique_penalty``, or the one
        ``"auto"`` chose.
    n_cccp_iter_ : ndarray of int64, shape (n_estimators,)
        Total CCCP outer iterations run in each tree.
    n_axis_fallback_ : ndarray of int64, shape (n_estimators,)
        Splits per tree that kept the initial axis-aligned split: the
        optimised hyperplane was degenerate (empty or too small side), did
        not pay its ``oblique_penalty``, had one feature to weigh
        (``max_split_features=1``) or fewer rows than ``min_samples_oblique``.
    oob_score_ : float
        Score on the out-of-bag samples (``oob_score`` only), over the
        samples that at least one tree left out.
    oob_prediction_ : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        Mean prediction of each training sample by the trees that left it out
        (``oob_score`` only); NaN for samples that every bootstrap drew.
        After a constrained fit's refinement (Notes) the trees correct each
        other, so this average over a subset of them is pessimistic.
    n_refine_passes_ : int
        With ``monotonic_cst`` only: the passes of the joint refinement of
        the leaf values (Notes), chosen on held-out training rows; 0 when
        they did not pay.

    See Also
    --------
    CO2ForestClassifier : The paper's method, for classes.

    Notes
    -----
    **What is the paper's.** Norouzi et al. (Sec. 3-4) bound the loss of a
    stump with hyperplane ``z = w.x + b`` and leaf parameters ``theta0``
    (``z <= 0``) and ``theta1`` (``z > 0``) by::

        l(theta_{1[z > 0]}, y) <= max(-z + l(theta0, y), z + l(theta1, y)) - |z|

    (Eq. 10): for ``z > 0`` the maximum is at least ``z + l(theta1, y)``
    and subtracting ``|z| = z`` leaves at least ``l(theta1, y)``; ``z <= 0``
    is symmetric. The bound uses nothing of the loss but its value, so it
    holds for any loss of leaf parameters. When ``l`` is convex in
    ``theta``, the first term is convex in ``(w, b, theta0, theta1)`` and
    ``-|z|`` concave, which is what the CCCP (Alg. 1) needs: it fixes
    ``s = sgn(z)`` at the current iterate, replaces ``-|z|`` by ``-s z`` and
    minimises the convex result (Eq. 11) by projected stochastic
    subgradient descent. The paper uses the softmax log loss.

    **What is ours.** The loss is ``l(theta, y) = ||theta - y||^2 / 2`` on
    standardised targets (convex in ``theta``), so the subgradient of the
    active leaf's parameters is ``theta - y`` and that of ``(w, b)`` is the
    paper's. The leaf parameters start at the weighted mean target of each
    side of the initial axis-aligned split, chosen by squared error (the
    classifier starts from log class frequencies and information gain);
    stored leaves hold the weighted mean target of their training samples
    (the minimiser of the squared loss). Targets are centred per output and
    scaled by one common ``s``, the root of their mean weighted variance,
    before training and scaled back in the stored leaves: the bound then
    compares margins with losses of the same size as the classifier's
    (about 0.5 at the root for one output, against ``log(n_classes)``),
    so ``nu`` and ``learning_rate`` keep their meaning on any target scale,
    and one common scale keeps the outputs' relative weights those of the
    squared error in the units of ``y``. A node whose targets are all
    equal is not split (the regression counterpart of a pure node). The
    other choices (feature standardisation, node centring, learning-rate
    decay, minibatches, sparse and NaN input, fallback to the axis-aligned
    split) are the classifier's; see :class:`CO2ForestClassifier`. The
    defaults are the classifier's: every feature scanned for the start
    (``max_features=None``) and the out-of-bag test at margin 0, each chosen
    on validation splits of the suite's ten regression sets
    (``benchmarks/results/defaults_validation.md``). The test against the
    paper's stump there: 2 wins, 8 ties, no loss, average rank 1.4 against
    1.6, fit time 1.04x; chosen leaving each set out in turn, on every set,
    and scored on that set's test part: 1/9/0 against the paper's stump,
    6/3/0 against RandomForestRegressor(30) and 0/2/7 against
    HistGradientBoostingRegressor (``results/defaults_lodo.md``).
    ``benchmarks/results/regression.md`` compares this estimator with
    scikit-learn's forests on nine regression data sets.

    ``monotonic_cst`` constrains ``predict`` (the trees' mean targets) as in
    :class:`CO2ForestClassifier` (its Notes give the derivation), for one
    output; :meth:`predict_quantiles` reads the leaves' training targets,
    which the constraints do not order, so its quantiles are not monotone.
    Ours, regression only: once a constrained forest is grown, its leaf
    values are refined jointly (:mod:`obliquetrees.co2._refine` derives it).
    Each tree ordered on its own clamps leaves that hold one or two
    bootstrap rows, and the average of such trees paid for every clamp (on
    ``concrete``, 2.0 of the 2.8 points of R^2 x 100 the constraints took).
    A pass moves every leaf of one tree after another by its in-bag rows'
    mean residual against the whole forest, then orders that tree
    again, so every tree stays monotone and the others make up for its
    clamp (backfitting, as in Ren et al.'s global refinement of random
    forests, each tree projected on its order). The number of passes
    (``n_refine_passes_``) is chosen on 20 % of the training rows held out
    from a second forest of the same parameters and seeds grown on the
    other 80 %: on one thread of an Intel Xeon a constrained fit took 3.2 s
    against 1.1 s unrefined on ``concrete`` (36 passes, most of it the
    passes' re-ordering) and 17.4 s against 9.3 s on 5000 rows of
    ``california_housing`` (1 pass). The refinement and its step were
    chosen on validation parts, leaving one data set out
    (``benchmarks/results/monotonic_defaults_co2-refine.md``); against
    unconstrained fits (``benchmarks/results/monotonic.md``) the constrained
    forest went from 2.8 points of R^2 x 100 below to 0.5 above on
    ``concrete``, and scores above on the other three sets. A warm
    start refines the enlarged forest again from the values its kept trees
    had (not the same model as a cold fit of as many trees), and a fit on
    dask collections (:mod:`obliquetrees.dask`) does not refine: its rows
    are spread over the workers.

    References
    ----------
    M. Norouzi, M. D. Collins, D. J. Fleet and P. Kohli, "CO2 Forest:
    Improved Random Forest by Continuous Optimization of Oblique Splits",
    arXiv:1506.06155, 2015.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from obliquetrees import CO2ForestRegressor
    >>> X, y = make_friedman1(n_samples=300, random_state=0)
    >>> reg = CO2ForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> reg.predict(X[:2]).shape
    (2,)
    """

    _fit_multi_output = True
    _oob_output_name = "oob_prediction_"
    _refines_leaves = True

    def __init__(
        self,
        n_estimators=100,
        *,
        nu=10.0,
        learning_rate=0.1,
        max_features=None,
        max_depth=None,
        min_samples_split=2,
        min_samples_leaf=1,
        max_leaf_nodes=None,
        min_impurity_decrease=0.0,
        batch_size=100,
        momentum=0.9,
        cccp_epochs=3,
        max_cccp_iter=20,
        tol=1e-3,
        max_cccp_samples=2048,
        max_split_features=None,
        min_samples_oblique=1,
        oblique_penalty=0.0,
        oblique_test="out_of_bag",
        bootstrap=True,
        max_samples=None,
        oob_score=False,
        categorical_features="from_dtype",
        monotonic_cst=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
        warm_start=False,
        store_leaf_targets=True,
    ):
        self._store_init_parameters(locals())

    _parameter_constraints = {
        **_BaseCO2Forest._parameter_constraints,
        "store_leaf_targets": ["boolean"],
    }

    def _tree_row_counts(self, n_samples):
        """Each tree's bootstrap counts of the training rows (None: no bootstrap)."""
        if not self.bootstrap:
            return super()._tree_row_counts(n_samples)
        from obliquetrees.co2.training import tree_bootstrap_counts

        return (tree_bootstrap_counts(n_samples, seed, self._n_draws) for seed in self._tree_seeds)

    def _class_weight_vector(self, y):
        return None

    _target_kind = "number of outputs"

    def _target_description(self):
        return self.n_outputs_

    @staticmethod
    def _default_oob_score(y_true, y_pred):
        from sklearn.metrics import r2_score

        return r2_score(y_true, y_pred)

    def _oob_targets(self, y, output):
        return y, self._oob_output(output)

    @staticmethod
    def _pilot_loss(y, output):
        """Squared error of each row's targets ``y`` against ``output``, summed over outputs."""
        return ((y.reshape(y.shape[0], -1) - output) ** 2).sum(axis=1)

    @staticmethod
    def _oob_output(output):
        return output[:, 0] if output.shape[1] == 1 else output
