"""Docstring sections shared by several public classes and methods, written once.

A docstring line that holds only ``%(name)s`` is replaced by the section
``name`` below, indented like the line (the pattern of pandas' ``@doc`` and
MNE's ``fill_doc``). :func:`fill_doc` runs at import, so ``help()``, Sphinx
and numpydoc see the finished text.
"""

import re

_X_FIT = """\
Parameters
----------
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    Training input. A sparse matrix (any format) is converted to CSR and
    trained on without densifying it (README, "Sparse input"). NaN marks a
    missing value and takes the feature's mean; a feature whose missingness
    depends on ``y`` also gets a missing indicator input, so each split
    learns its own term for its missing value (stored as
    ``ObliqueTree.weight_missing``). Infinity is refused."""

_FOREST = """\
trees_ : list of ObliqueTree
    The trees.
forest_ : ObliqueForest
    The trees packed for prediction."""

_SOURCE = """\
n_features_in_ : int
    Number of features seen by the source model.
feature_names_in_ : ndarray of str
    Only when the source model has it.
feature_importances_ : ndarray of shape (n_features_in_,)
    Impurity-based importances summing to 1 (definition: :mod:`obliquetrees.inspection`)."""

#: Parameters and Attributes of the models created fitted (converted and
#: fine-tuned forests): what a task adds to the attributes.
_CREATED = """\
Parameters
----------
n_jobs : int, default=None
    Threads used by ``predict``, ``predict_proba`` (classifiers) and ``apply``
    (None means 1, -1 all cores).

Attributes
----------
{forest}
{task}
{source}"""


def _co2_split_support(penalty, test, why):
    """The CO2 estimators' split-support parameters, with one class's defaults and reason."""
    return f"""\
max_split_features : {{"sqrt", "log2"}}, int, float or None, default=None
    Most features an oblique split weighs (ours; the paper's splits weigh
    every feature). The split's support is chosen at each node: the
    axis-aligned start's feature and the candidates (of the
    ``max_features`` scanned for the start) whose own best axis-aligned
    splits are next best; the CCCP then runs on those columns only, and
    the stored weights, and so the prediction cost, follow the support.
    ``"sqrt"``, ``"log2"``, an int, a fraction of ``n_features`` or every
    feature (None: the paper's stump). One feature keeps the axis-aligned
    start (no CCCP).
min_samples_oblique : int, default=1
    Fewest distinct training rows a node needs to fit an oblique split
    (ours): a smaller node keeps its axis-aligned start, without CCCP
    (rows drawn more than once by the bootstrap count once). Small nodes
    are most of a tree's nodes, and an oblique split fit on a few rows the
    likeliest to overfit: a larger value helps where few features matter
    and costs accuracy where many combine (CO2ForestClassifier's Notes).
    1: every node (the paper).
oblique_penalty : float, "auto" or None, default={penalty}
    The axis-or-oblique choice (ours): a node keeps its oblique split only
    when it beats the axis-aligned start by this many nats of
    log-likelihood, judged on the rows ``oblique_test`` names (classes: the
    drop of the weighted entropy of the two sides; targets:
    ``N / 2 log(SSE_axis / SSE_oblique)``, Gaussian sides). None always
    keeps the oblique split (the paper). ``"auto"`` chooses 0 or 2 for the
    whole forest: two pilot trees grow at each (the same bootstraps), and
    2 is chosen only when its pilot forest's loss on the training rows they
    left out (classes: log-loss, each row's probability floored at 1e-3;
    targets: squared error) is lower by more than one standard error of the
    paired differences; the chosen pilot trees are kept, at the cost of
    two trees more. The margin grown with is ``oblique_penalty_``.
    Without bootstrap (no row out of bag) and on dask input ``"auto"`` takes
    0; a warm start grows its new trees at the margin of the kept ones.
oblique_test : {{"fit", "out_of_bag"}}, default={test}
    The rows ``oblique_penalty`` judges a node's oblique split on (ours).
    ``"fit"``: the node's training rows, the penalty a price per weight
    beyond the first (0 keeps the better fit, 1 is AIC's price).
    ``"out_of_bag"``: the node's out-of-bag rows, those of the tree's
    bootstrap left out (positive ``sample_weight``, drawn no time) routed
    down the tree's splits; the penalty is a margin the oblique split's
    gain over the start must reach (no price per weight: the rows are held
    out); a tie keeps the oblique split, as does a node without out-of-bag
    rows at margin 0, so without bootstrap margin 0 is the paper's stump
    (a positive margin then raises a ``ValueError``). No effect when
    ``oblique_penalty`` is None. {why}"""


_SECTIONS = {
    "predict_parameters": """\
Parameters
----------
X : {array-like, sparse matrix} of shape (n_samples, n_features)
    The input samples: dense float32/float64 (kept as given) or sparse CSR.
    NaN (also an explicit NaN entry of a CSR matrix) marks a missing value.""",
    "fit_parameters_classifier": _X_FIT
    + "\ny : array-like of shape (n_samples,)\n    Class labels.",
    "fit_parameters_multioutput": _X_FIT
    + "\ny : array-like of shape (n_samples,) or (n_samples, n_outputs)"
    + "\n    Class labels (classifier) or target values (regressor).",
    "fit_parameters": _X_FIT
    + "\ny : array-like of shape (n_samples,)"
    + "\n    Class labels (classifier) or target values (regressor).",
    "fit_returns": "Returns\n-------\nself : object\n    The fitted estimator.",
    "feature_importances": """\
feature_importances_ : ndarray of shape (n_features_in_,)
    Impurity-based importances of the oblique splits, summing to 1 (all
    zeros when every tree is a single leaf); each split's impurity
    decrease is shared among its features in proportion to
    ``|w_j| * std(x_j)``. Computed on access.""",
    "created_classifier_sections": _CREATED.format(
        forest=_FOREST,
        task="classes_ : ndarray of shape (n_classes,)\nn_classes_ : int",
        source=_SOURCE,
    ),
    "created_regressor_sections": _CREATED.format(
        forest=_FOREST, task="n_outputs_ : int", source=_SOURCE
    ),
    "co2_split_support_classifier": _co2_split_support(
        penalty='"auto"',
        test='"out_of_bag"',
        why="The classifier's defaults, the out-of-bag test at the margin its "
        "pilot trees choose, were chosen on validation splits across the "
        "suite's classification sets (class Notes).",
    ),
    "co2_split_support_regressor": _co2_split_support(
        penalty="0.0",
        test='"out_of_bag"',
        why="The regressor's defaults, the classifier's, were chosen on "
        "validation splits across the suite's regression sets (class Notes).",
    ),
    "categorical_features": """\
categorical_features : "from_dtype", array-like of bool, int or str, or None, \
default="from_dtype"
    The categorical features: a boolean mask, indices or feature names, as
    in scikit-learn's ``HistGradientBoostingClassifier``; ``"from_dtype"``:
    the DataFrame columns of ``category``, ``object`` or string dtype (none
    for an array); None: none. Labels are ``str`` or numbers (at most
    1000 categories per feature). Each category enters the splits as one
    coordinate, not as one-hot inputs: its effect on the training target
    given the other features (a linear mixed model; shrunk, tested against
    chance and cross-fitted against target leakage;
    :mod:`obliquetrees._training.categories`); a missing or unseen category
    is a missing value. See ``category_coordinates_``.""",
    "categorical_attributes": """\
is_categorical_ : ndarray of bool of shape (n_features_in_,) or None
    Which features were fitted as categorical (None: none).
category_coordinates_ : CategoryCoordinates or None
    The coordinate of each category of the categorical features: for
    ``j = columns[i]``, ``categories[i][k]`` takes ``values[i][k]``
    (:class:`~obliquetrees._core.categories.CategoryCoordinates`); None
    without categorical features.""",
    "monotonic_cst": """\
monotonic_cst : array-like of int of shape (n_features,), dict or None, default=None
    Monotonicity constraint per feature: 1 the prediction may only rise with
    the feature, -1 only fall, 0 (or None for all) unconstrained; a dict
    maps feature names to constraints, as in scikit-learn. The prediction
    is a regressor's output or a binary classifier's probability of
    ``classes_[1]``; multiclass and multi-output fits raise a
    ``ValueError``, as in scikit-learn. Holds for every input, NaN in any
    feature included (class Notes: how the method enforces it).""",
    "relaxed_parameters": """\
temperature, eps, sigma
    As in :meth:`DecisionMachine.relaxed_weights`.
sample_weight : ndarray (n,), default=None
W, b, V : arrays, default=None
    Split weights (dense), offsets and leaf values to evaluate instead of
    the machine's own.""",
}

_PLACEHOLDER = re.compile(r"^(\s*)%\((\w+)\)s$")


def fill_doc(obj):
    """Fill the ``%(name)s`` lines of ``obj.__doc__`` in place; return ``obj``."""
    lines = []
    for line in obj.__doc__.split("\n"):
        match = _PLACEHOLDER.match(line)
        if match is None:
            lines.append(line)
            continue
        indent, name = match.groups()
        lines.extend(indent + part if part else "" for part in _SECTIONS[name].split("\n"))
    obj.__doc__ = "\n".join(lines)
    return obj
