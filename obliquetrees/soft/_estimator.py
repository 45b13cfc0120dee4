"""Soft decision trees (Irsoy, Yildiz & Alpaydin, 2012): regressor and classifier.

The estimators are thin: validate, draw seeds, call
:func:`obliquetrees.soft.training.fit_soft_tree` with a
:class:`~obliquetrees.soft.training.SoftTreeParams` of their parameters, store the returned
:class:`~obliquetrees._core.tree.ObliqueTree` as ``tree_``. Prediction is soft
by default (every leaf contributes, weighted by the product of the gates on
its path) through a kernel beside the shared traversal, or hard
(``routing="hard"``: each sample follows the more probable child) through the
shared traversal.
"""

import numpy as np

from obliquetrees._core.missing import MissingValues
from obliquetrees.base import (
    BaseObliqueTree,
    ObliqueClassifierMixin,
    ObliqueRegressorMixin,
)
from obliquetrees.utils._docstrings import fill_doc
from obliquetrees.utils._param_validation import RUN_CONSTRAINTS, integers, options, reals
from obliquetrees.utils.validation import check_monotonic_cst

_COMMON_DOC = """
    Parameters
    ----------
    max_depth : int or None, default=None
        Maximum depth of the tree (the root has depth 0). None: no limit; the
        growth stops where no split improves the validation error by more
        than ``tol`` (the paper's pre-pruning).
    max_leaf_nodes : int or None, default=None
        Stop growing once the tree has this many leaves (checked before each
        split attempt, in the depth-first order of the paper). None: no limit.
    validation_fraction : float in [0, 1), default=0.5
        Fraction of the training data held out to decide whether a split is
        kept (and, with ``finetune_epochs``, when to stop finetuning). 0.5
        reproduces the paper's protocol (half training, half validation of
        the non-test data). 0 uses the training data itself.
    learning_rate : float, default=5.0
        Step size of the first SGD restart; restart ``t`` uses
        ``learning_rate / 2**t`` (the paper's halving step sizes; 5.0 =
        10 / 2 as in the authors' code).
    n_restarts : int, default=10
        Number of step sizes tried per split (all from the same initial
        point); see ``restart_selection`` for which one is kept.
    max_epochs : int, default=25
        Passes over the training data per restart. The step size also decays
        by 0.9999 per sample, and a restart stops early, within an epoch if
        need be, once it has decayed below 1e-6 of its initial value.
    batch_size : int, default=1
        Samples per gradient step: 1 is the paper's online gradient descent.
    restart_selection : {{"validation", "train"}}, default="validation"
        Which restart of a split is kept: the one with the lowest validation
        error (the authors' code) or the lowest training loss (the paper's
        text). Picking on training loss keeps the most overfitted restart, which
        hurts on small data sets (german; see
        ``benchmarks/results/soft_tree.md``).
    tol : float, default={tol_default}
        A split is kept only if it lowers the validation error by more than
        ``tol`` (absolute).{tol_text}
    routing : {{"soft", "hard"}}, default="soft"
        How :meth:`predict` combines the leaves: ``"soft"`` is the model that
        was trained (gate-weighted average of all leaves); ``"hard"`` sends
        each sample to the more probable child at every node (the shared
        traversal; :meth:`apply` and :meth:`decision_path` always do this).
    finetune_epochs : int, default=0
        Beyond the paper: after growth, epochs of joint SGD on every gate and
        leaf, keeping the parameters with the lowest validation error (three
        step sizes ``learning_rate / 2**t``, t = 4, 6, 8, are tried).
        0 disables it.{class_weight}
    %(categorical_features)s
    %(monotonic_cst)s
    n_jobs : int or None, default=None
        Threads of the numba kernels in training (the SGD restarts of a
        split run in parallel) and in prediction. None means 1 unless in a
        :func:`joblib.parallel_backend` context; -1 means all cores. The
        fitted model does not depend on it.
    random_state : int, RandomState instance or None, default=None
        Seeds the validation split, the SGD shuffling and the small random
        initial weights. An int gives the same tree in every run.
    verbose : int, default=0
        Print one line per split attempt."""

_COMMON_ATTRIBUTES = """    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X has string column names.
    %(feature_importances)s
    %(categorical_attributes)s
"""

#: References, then the heading of the examples.
_REFERENCES = """
    References
    ----------
    .. [1] O. Irsoy, O. T. Yildiz and E. Alpaydin, "Soft decision trees",
       Proceedings of the 21st International Conference on Pattern
       Recognition (ICPR), 2012.

    Examples
    --------
"""

_COMMON_NOTES = """
    The model is the soft tree of the paper: every internal node ``m`` has a
    gate ``g_m(x) = sigmoid(w_m . x + w_m0)``, the probability of the **left**
    child, and the response of a node is ``g_m F_left + (1 - g_m) F_right``
    (eqs. 2-3); leaves hold constants. Growth is the paper's Fig. 2,
    depth-first: a leaf is replaced by a gate and two leaves initialised from
    the best hard axis-aligned split of the leaf's data weighted by its soft
    membership (gate ``P(left) = sigmoid(-0.5 (x_j - threshold))`` on the
    standardised feature ``x_j`` plus U(-0.005, 0.005) on the other weights,
    children = the weighted side means); only these three nodes are trained
    while the whole tree is evaluated (back-propagated error discounted by the
    gates on the path); the split is kept if the validation error drops by
    more than ``tol``, then the left and right children are tried in turn.

    Filled gaps and deviations (from the paper; details from the authors' code
    are marked as such):

    - initial gate slope 0.5 around the hard threshold and the noise on the
      other weights follow the authors' code; the paper's literal
      ``w_j = -1, w_0 = 1`` cannot place the gate at the threshold;
    - SGD with momentum 0.1 and a per-sample step decay of 0.9999 (authors'
      code); a restart stops as soon as the step has decayed below 1e-6 of
      its start, within an epoch if need be (ours: the steps left would sum
      to under 1 % of one initial step; on large sets it bounds a split's SGD
      to about 138,000 samples' steps per restart, whatever the number of
      rows);
    - the restart of a split is chosen on the validation error by default
      (the authors' code; the paper's text says the training set:
      ``restart_selection="train"``);
    - samples whose path probability to the node being split is below 1e-7
      are left out of that split's SGD (ours: their gradient is scaled by that
      probability), with the step decay rescaled per epoch;
    - inputs (and regression targets) are standardised with the (weighted)
      statistics of the training part; the stored tree has the
      standardisation folded into its weights (raw input units), and its
      orientation converted to the package's convention (right iff
      ``w . x + b > 0``: the stored ``(w, b)`` is minus the gate's);
      features constant in training (or varying only below about 1e-301,
      where no finite weight in raw units could use them) are standardised to
      0 and get no weight, so their value at predict time does not matter;
    - sample weights multiply each sample's gradient and its error (they are
      rescaled to mean 1 on the training part first); they also weigh the
      standardisation statistics and the hard split that initialises a node;
    - ``n_node_samples`` holds the soft membership (sum over training samples
      of sample weight x path probability);
    - with ``validation_fraction`` such that a part would be empty, the
      training data also serves as validation data;
    - the validation part of a classifier is drawn class by class
      (stratified; ours);
    - sparse ``X`` (any format, CSR inside; ours) is never densified: the
      moments come from the stored entries, and the gate logits and SGD
      updates read each row's stored entries with the standardisation applied
      algebraically. Dense and sparse fits agree to rounding, not bit for
      bit; with the default online SGD a one-ulp change of an input can
      already change the grown tree, so they can differ as much as two dense
      fits of slightly perturbed data (``tests/soft/test_sparse.py``).

    ``monotonic_cst`` (ours; :mod:`obliquetrees._training.monotonic`) is
    enforced inside the SGD, by projection after every step (projected SGD),
    so the stored tree satisfies it exactly, for soft and hard routing alike
    (the model's output, a regressor's prediction or the positive class's
    logit, is a convex combination of leaves passed through increasing maps):

    - the hard split that initialises a new split skips candidates whose
      sides contradict their feature's constraint (scikit-learn's rule);
      the new split is oriented so that its children are the constrained
      way round (the same gate with its children swapped); it is *ordered*
      when its largest initial weight (the hard split's feature) is on a
      constrained feature, *free* otherwise. Where constrained and free
      features mix, each split is also trained in the other version, from
      the best hard split on the other features, and the one of lower
      validation error is kept (ours; 1.8-3.2x the fit time: the first
      version alone orders subtrees that differ mostly in free features. On
      ``benchmarks/results/monotonic.md``'s sets, 5 seeds, it lifts the
      constrained regressor's R^2 by 1.2 points on the synthetic set and
      2.0 on abalone, 0.1 on concrete, none on california_housing);
    - after every step its weights are projected onto ``c_j w_j >= 0`` for
      constrained features ``j`` in the stored orientation (free splits:
      ``w_j = 0``), and its two leaves onto ``left <= right`` (ordered) and
      into the interval the rest of the tree leaves them (every leaf under an
      ordered node's left child at most every leaf under its right child):
      exact Euclidean projections, the rest of the tree being frozen;
    - finetuning projects every weight the same way and the leaves by bound
      propagation whose thresholds move the leaves least (ours: it keeps a
      feasible tree unchanged but is not the Euclidean projection), or by
      the exact projection, isotonic regression of the leaves in in-order,
      when every split is ordered;
    - growth freezes the other leaves, so the first subtree grown can use
      the interval up to its sibling's value and leave the sibling's subtree
      little room, and constrained trees grow smaller. The regressor
      therefore refits every leaf at once after training each new split
      (ours; :func:`~obliquetrees.soft.training.joint_leaves`): the weighted
      least-squares fit of the tree's output under the ordering, from the
      frozen leaves, every leaf within the training targets' range widened
      by half its width each side (a leaf few rows reach could otherwise
      take any value; the margin chosen on validation parts,
      ``monotonic_defaults_soft-leaf-margin.md``); the split is then judged
      on the lower of the two validation errors. On ``benchmarks/results/monotonic.md``'s sets (10
      seeds) this took the cost of the constraints from 2.1 to 1.0 points
      of R^2 on the synthetic set and from 4.9 to 2.9 on concrete. The
      classifier (no closed-form leaves) keeps the frozen ones; joint
      finetuning (``finetune_epochs``) moves every parameter of either;
    - with constrained and free inputs both, the model is
      ``T(x) + F(x_free)`` (ours, as ``E2EDTRegressor``'s): ``T`` the
      constrained tree grown as above, ``F`` an unconstrained soft tree of
      the free inputs alone. An ordered split keeps every leaf of one side
      below every leaf of the other, so what varies with the free inputs
      alone could only be modelled inside each ordered subtree's interval;
      ``F`` models it once. For the classifier the sum is the positive
      class's logit: a soft tree's log-odds average its leaves' logits, so
      the sum of two trees is again one tree's. The two are backfitted for
      two rounds (``F`` on what ``T`` leaves, ``T`` again on what ``F``
      leaves, ``F`` again; the regressor fits the standardised residual,
      the classifier the labels beside the other tree's logits), each grown
      (and finetuned) with these parameters. ``F`` does not move along a
      constrained input, so the sum is monotone whenever ``T`` is. It is
      stored as one tree, ``F`` grafted under every leaf of ``T``
      (:func:`~obliquetrees._core.graft.graft_sum`), which predicts the sum
      exactly under soft and hard routing (soft prediction evaluates ``T``
      and ``F`` once each). The price: a fit is four fits (2.2 to 3.2
      times the single constrained tree's fit time on the benchmark's
      sets, ``F`` seeing fewer inputs), and the stored tree has up to
      ``n_leaves(T) * n_leaves(F)`` leaves. It was chosen on validation parts
      (``benchmarks/results/monotonic_defaults_soft-free-tree.md``,
      ``monotonic_defaults_soft-free-tree-classifier.md``);
    - a NaN adds a constant to a gate's input and the missing-value
      indicators are free, so NaN in other features keeps the guarantee."""


def _base_constraints():
    return {
        "max_depth": integers(1, none=True),
        "max_leaf_nodes": integers(2, none=True),
        "validation_fraction": reals(0.0, 1.0),
        "learning_rate": reals(0.0, closed="neither"),
        "n_restarts": integers(1),
        "max_epochs": integers(1),
        "batch_size": integers(1),
        "restart_selection": options("validation", "train"),
        "tol": reals(0.0),
        "routing": options("soft", "hard"),
        "finetune_epochs": integers(0),
        "categorical_features": ["array-like", *options("from_dtype"), None],
        "monotonic_cst": ["array-like", dict, None],
        **RUN_CONSTRAINTS,
    }


class _BaseSoftTree(BaseObliqueTree):
    """Shared parameters and fit logic of the soft tree estimators.

    Each public class has its own ``__init__`` (scikit-learn reads the
    parameters and their defaults from its signature, and an unknown keyword
    names the public class) storing its arguments as given
    (``_store_init_parameters``).
    """

    _fit_accepts_sparse = True

    def _prediction_form(self):
        return ("hard", {}) if self.routing == "hard" else ("soft_tree", {})

    def _fit(self, X, y, sample_weight):
        """Grow the soft tree (:meth:`fit`, its parameters validated)."""
        # numba is imported on first use
        from obliquetrees.soft.training import SoftTreeParams, fit_soft_tree
        from obliquetrees.utils.seeds import draw_seeds

        X, y, sample_weight = self._validate_fit_data(X, y, sample_weight)
        monotonic_cst = check_monotonic_cst(self, self.monotonic_cst)
        n_classes = self.n_classes_ if isinstance(self, ObliqueClassifierMixin) else None
        train_weight = self._training_weight(y, sample_weight)
        # the training parameters carry the estimator's names
        params = self._training_params(SoftTreeParams)
        seeds = draw_seeds(self.random_state, 3)
        # NaN: the tree trains on indicator-augmented inputs and is folded back
        # (whether a feature gets an indicator is tested with sample_weight alone)
        missing = MissingValues.from_data(X, sample_weight, y, n_classes is not None)
        inputs = missing.augment(X)
        tree, info = fit_soft_tree(
            inputs,
            y,
            train_weight,
            params,
            seeds,
            n_classes=n_classes,
            n_threads=self._n_threads(),
            monotonic_cst=monotonic_cst,
        )
        tree = missing.fold(tree)
        self.growth_log_ = info["growth_log"]
        self.finetune_info_ = info["finetune"]
        return self._set_trees([tree])

    def _check_fitted_state(self):
        from obliquetrees._core.validation import check_parents_first

        super()._check_fitted_state()
        check_parents_first(self._forest())

    def _soft_output(self, X, leaf_value):
        # numba is imported on first use
        from obliquetrees._core._jit import numba_threads
        from obliquetrees._core.graft import graft_soft_predict, split_graft
        from obliquetrees._core.soft import soft_predict

        tree = self.tree_
        # a constrained tree plus its free tree: each part evaluated once
        graft = split_graft(tree, np.ones(tree.node_count))
        with numba_threads(self._n_threads()):
            if graft is not None:
                return graft_soft_predict(graft, X, leaf_value)
            return soft_predict(tree, X, leaf_value)


@fill_doc
class SoftTreeRegressor(ObliqueRegressorMixin, _BaseSoftTree):
    __doc__ = (
        """Soft decision tree regressor, grown incrementally (Irsoy et al., 2012).

    Every internal node routes a sample to both children with probabilities
    given by a sigmoid gate on a linear function of the input; the prediction
    is the gate-weighted average of all leaf values. The tree is grown one
    split at a time by gradient descent and kept only where a split improves
    the error on a held-out validation part.
"""
        + _COMMON_DOC.format(
            tol_default="1e-2",
            tol_text="""
        The error is the MSE of the standardised target. 1e-2 reproduces the
        tree sizes of the paper's Table 1 (the paper states no threshold; the
        authors' code uses 1e-3, which grows 2-10 times larger trees with a
        lower error on all eight of the paper's regression sets here: see
        ``benchmarks/results/soft_tree.md``).""",
            class_weight="",
        )
        + """

    Attributes
    ----------
    tree_ : ObliqueTree
        The grown tree in the package's container (raw input units, right iff
        ``w . x + b > 0``); ``tree_.value`` holds the leaf values in target
        units (internal nodes: their value before they were split).
"""
        + _COMMON_ATTRIBUTES
        + """    growth_log_ : list of dict
        One entry per split attempt, in order: node id, depth, validation
        error before/after, winning restart, samples used, accepted. With a
        tree of the free inputs (``monotonic_cst``, Notes): the last fit of
        each tree, its entries' ``part`` ("constrained" or "free") naming
        the tree whose node ids they give.
    finetune_info_ : dict or None
        Validation error before/after finetuning, the winning step size and
        epoch (None without finetuning; with a tree of the free inputs, the
        constrained tree's last).

    Notes
    -----"""
        + _COMMON_NOTES
        + "\n"
        + _REFERENCES
        + """    >>> from sklearn.datasets import make_friedman1
    >>> from obliquetrees import SoftTreeRegressor
    >>> X, y = make_friedman1(n_samples=600, random_state=0)
    >>> reg = SoftTreeRegressor(random_state=0).fit(X, y)
    >>> reg.tree_.node_count <= 63
    True
    >>> reg.predict(X[:2]).shape
    (2,)
    """
    )

    _parameter_constraints = _base_constraints()

    def __init__(
        self,
        *,
        max_depth=None,
        max_leaf_nodes=None,
        validation_fraction=0.5,
        learning_rate=5.0,
        n_restarts=10,
        max_epochs=25,
        batch_size=1,
        restart_selection="validation",
        tol=1e-2,
        routing="soft",
        finetune_epochs=0,
        categorical_features="from_dtype",
        monotonic_cst=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self._store_init_parameters(locals())

    def _predict_output(self, X):
        if self.routing == "hard":
            return super()._predict_output(X)
        return self._soft_output(X, self.tree_.value)


@fill_doc
class SoftTreeClassifier(ObliqueClassifierMixin, _BaseSoftTree):
    __doc__ = (
        """Soft decision tree classifier, grown incrementally (Irsoy et al., 2012).

    Two classes: the soft tree's output passes through a sigmoid at the root
    and is trained with the cross-entropy, as in the paper. More classes
    (our extension): leaves hold one logit per class and the tree's output
    passes through a softmax.
"""
        + _COMMON_DOC.format(
            tol_default="1e-3",
            tol_text="""
        The error is the misclassification rate (as in the authors' code).""",
            class_weight="""
    class_weight : "balanced", dict or None, default=None
        Weights of the classes, multiplied with ``sample_weight``, so they
        enter everything the sample weights do (see Notes), the validation
        error that decides on splits included (``"balanced"`` makes it the
        balanced error rate). A dict maps class labels of ``y`` to finite
        non-negative weights (classes it does not name weigh 1);
        ``"balanced"`` weighs class ``c`` ``n_samples / (n_classes *
        count_c)``. Other labels or values raise a ``ValueError``, as do
        weights (times ``sample_weight``) that are zero for every sample.
        ``"balanced_subsample"`` is not offered: it is meant for bagged
        forests, and the tree is grown on all its training rows.""",
        )
        + """

    Attributes
    ----------
    tree_ : ObliqueTree
        The grown tree in the package's container (raw input units, right iff
        ``w . x + b > 0``); ``tree_.value`` holds each node's class
        probabilities ``softmax(z)`` of its logits ``z`` (binary: ``[1 -
        sigmoid(z), sigmoid(z)]``). Soft prediction adds the leaves' log
        probabilities weighted by their path probabilities, then applies a
        softmax: this equals ``sigmoid``/``softmax`` of the gate-weighted sum
        of leaf logits.
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_classes_ : int
        Number of classes.
"""
        + _COMMON_ATTRIBUTES
        + """    growth_log_ : list of dict
        One entry per split attempt (see :class:`SoftTreeRegressor`).
    finetune_info_ : dict or None
        See :class:`SoftTreeRegressor`.

    Notes
    -----"""
        + _COMMON_NOTES
        + """
    - the validation error deciding on splits is the misclassification rate
      (authors' code; the paper only says "error"); the training loss is the
      cross-entropy;
    - leaves created by a split start at the logits of the (clipped to
      [1e-4, 1 - 1e-4]) class frequencies of the hard split's sides;
    - multi-class (softmax over K-vector leaves) is our extension.
"""
        + _REFERENCES
        + """    >>> from sklearn.datasets import load_breast_cancer
    >>> from obliquetrees import SoftTreeClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = SoftTreeClassifier(random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 2)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """
    )

    _parameter_constraints = {
        **_base_constraints(),
        "class_weight": [*options("balanced"), dict, None],
    }

    def __init__(
        self,
        *,
        max_depth=None,
        max_leaf_nodes=None,
        validation_fraction=0.5,
        learning_rate=5.0,
        n_restarts=10,
        max_epochs=25,
        batch_size=1,
        restart_selection="validation",
        tol=1e-3,
        routing="soft",
        finetune_epochs=0,
        class_weight=None,
        categorical_features="from_dtype",
        monotonic_cst=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self._store_init_parameters(locals())

    def _predict_output(self, X):
        if self.routing == "hard":
            return super()._predict_output(X)
        # log probabilities of the leaves (logits up to a per-leaf constant,
        # which the softmax ignores); clipped so a saturated leaf stays finite
        leaf_logp = np.log(np.maximum(self.tree_.value, 1e-300))
        scores = self._soft_output(X, leaf_logp)
        scores -= scores.max(axis=1, keepdims=True)
        proba = np.exp(scores)
        proba /= proba.sum(axis=1, keepdims=True)
        return proba
