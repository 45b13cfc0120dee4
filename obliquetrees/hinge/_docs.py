"""Docstring sections shared by the hinge forest estimators (:mod:`obliquetrees.hinge._estimator`).

The classifier and the regressor have the same parameters, attributes and
notes except for what each adds (the classifier's ``class_weight``); their
class docstrings are assembled from these sections.
"""

REFERENCES = """
    References
    ----------
    .. [1] N. Lay, A. P. Harrison, S. Schreiber, G. Dawer, A. Barbu, "Random
       Hinge Forest for Differentiable Learning", arXiv:1802.03882, 2018.
"""

_PARAMETERS = """
    Parameters
    ----------
    n_estimators : int, default=100
        Number of hinge trees (or ferns) M.
    max_depth : int, default=10
        Depth D of every tree/fern: ``2**D`` leaves; a tree has ``2**D - 1``
        decisions, a fern ``D`` (one per level, shared by all its nodes).
        The model doubles in size with every level: fitting warns when it is
        projected above 1 GiB and refuses (``ValueError``) above 16 GiB.
    tree_type : {"tree", "fern"}, default="tree"
        Random hinge trees or random hinge ferns.
    n_hinge_features : int, None or "auto", default=%(hinge_default)s
        Size of the learnable bias-free linear layer in front of the forest
        (the paper's "100 inner product" features). None feeds the
        standardised raw features instead (no linear layer). Each decision
        tests one of these features, drawn at random once (not learnt).
        ``"auto"`` (ours) trains both, 100 learnt features and the raw
        inputs, from the same seeds and keeps the forest with the lower
        validation loss (the rows ``early_stopping`` holds out; without
        them, the learnt one): about twice the fit time; see Notes. Above
        100 inputs (missing-value indicators included) only the learnt
        features train: the raw forest's layer is an identity matrix with
        a row per input.
        ``partial_fit`` holds out no rows, so under ``"auto"`` it trains
        the learnt features.
    feature_screening : bool or "auto", default=%(screening_default)s
        Ours. True: the learnt linear layer reads only the inputs that an
        extremely randomised forest (100 trees, fitted on the training rows,
        at most 10 000 of them) ranks above every shadow input, a copy of
        the inputs with the rows permuted; the others are ignored as
        constant features are. A screen that keeps every input (or none)
        leaves the layer as it is. ``"auto"`` trains the screened and the
        unscreened layer from the same seeds and keeps the forest with the
        lower validation loss (without validation rows: the unscreened
        one). For data with many irrelevant inputs (madelon: 20 relevant of
        500); see Notes. It needs learnt hinge features (with
        ``n_hinge_features="auto"`` the raw-input forest is not screened).
        ``partial_fit`` refuses True; under ``"auto"`` it holds out no rows
        to choose on, so its layer reads every input.
    head : {"sum", "linear"}, default=%(head_default)s
        How tree outputs are combined: ``"sum"`` gives every leaf a
        ``n_outputs``-vector and sums over trees (the paper's letter/USPS
        architecture); ``"linear"`` gives every leaf a scalar and learns a
        linear layer (with bias) from the M tree outputs (the reference
        code's UCI architecture).
%(head_why)s    optimizer : {"adam", "lazy_adam", "adagrad", "sgd"}, default="lazy_adam"
        ``"adam"``: Adam on every parameter every step (the paper).
        ``"lazy_adam"``: Adam whose moments and values move only for the leaf
        rows and thresholds that received a gradient in the batch (the
        linear layer and head stay dense); this is the one deviation in the
        default, chosen for speed (an epoch of 100 depth-10 trees updates
        2.9 M leaf weights per batch with dense Adam); see Notes.
        ``"adagrad"``: AdaGrad (the paper's UCI experiments; exact on sparse
        gradients). ``"sgd"``: plain gradient steps (Algorithm 2).
    learning_rate : float, default=0.005
        Step size (the paper's Adam learning rate).
    batch_size : int, default=50
        Minibatch size (the paper: 53 for letter, 29 for USPS; the reference
        code: 50).
    max_epochs : int, default=100
        Maximum number of passes over the training data.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the training data, evaluate the
        validation loss after every epoch, keep the parameters of the best
        epoch and stop after ``n_iter_no_change`` epochs without improvement.
        (The paper picked the best *test* epoch; we never look at test data.)
    validation_fraction : float, default=0.1
        Fraction of the training data held out (stratified for classifiers
        when possible) when ``early_stopping`` is True.
    n_iter_no_change : int, default=5
        Patience of early stopping, in epochs: training stops after this
        many epochs without a lower validation loss (and keeps the best
        epoch's parameters), so it runs ``best_epoch_ + n_iter_no_change``
        epochs unless ``max_epochs`` comes first. Each epoch costs a pass over
        the data; 5 stops near the best epoch (see Notes).
"""


def parameters(head_default, head_why="", hinge_default="100", screening_default="False"):
    """The parameters section with the estimator's defaults.

    ``head_default``, ``hinge_default``, ``screening_default``: the defaults
    of ``head``, ``n_hinge_features`` and ``feature_screening``, as written
    in the signature.

    ``head_why``: lines (indented 8 spaces, each ending in a newline) saying
    why that default, placed at the end of the ``head`` entry.
    """
    return _PARAMETERS % {
        "head_default": head_default,
        "head_why": head_why,
        "hinge_default": hinge_default,
        "screening_default": screening_default,
    }


#: The classifier's ``class_weight``, between :func:`parameters` and :data:`PARAMETERS_TAIL`.
CLASS_WEIGHT = """    class_weight : "balanced", dict or None, default=None
        Weights of the classes, multiplied with ``sample_weight``: they scale
        each sample's loss in training and in the early-stopping validation
        loss. A dict maps class labels of ``y`` to finite non-negative
        weights (classes it does not name weigh 1); ``"balanced"`` weighs
        class ``c`` ``n_samples / (n_classes * count_c)`` on the data of
        each ``fit``. ``partial_fit`` takes a dict but refuses
        ``"balanced"`` (one batch's class counts are not the data's, as for
        scikit-learn's ``SGDClassifier``). Other labels or values raise a
        ``ValueError``, as do weights (times ``sample_weight``) that are
        zero for every sample. ``"balanced_subsample"`` is not offered: the
        forest does not bag (see Notes).
"""

PARAMETERS_TAIL = """    %(categorical_features)s
    %(monotonic_cst)s
    warm_start : bool, default=False
        Reuse the fitted forest, its batch-norm statistics and optimiser
        state, and train ``max_epochs`` more epochs (on a copy: a failed
        fit keeps the fitted model). Unlike scikit-learn's forests, it does
        not add trees: all trees are trained jointly, so ``n_estimators``
        (like ``max_depth``, ``tree_type``, ``head`` and
        ``n_hinge_features``) must stay the same, and continuing means more
        epochs for every tree. The data must have the same features, the
        same ``monotonic_cst`` and, for classifiers, the same classes.
    n_jobs : int or None, default=None
        Threads of the numba kernels in training (the forward pass runs
        over a minibatch's samples, the backward pass over the trees) and in
        prediction. None means 1 unless in a
        :func:`joblib.parallel_backend` context; -1 means all cores. The
        fitted model does not depend on it.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the validation split and the minibatch
        order.
    verbose : int, default=0
        0 is quiet; at 1 and above one line per epoch with the training
        and validation loss, the time elapsed and an estimate of the time
        left (at most: early stopping may end the fit sooner), and a line
        when early stopping ends it. When ``"auto"`` trains several forests
        (``n_hinge_features``, ``feature_screening``), a line names each
        before its epochs, and one the forest kept.
"""

ATTRIBUTES = """
    trees_ : list of ObliqueTree
        The hinge trees as oblique trees on the raw input: node ``v`` of tree
        ``m`` splits on ``w . x + b > 0`` with the linear layer, the batch
        normalisation and the input standardisation folded into ``w, b``,
        so :meth:`apply` and :meth:`decision_path` use the shared traversal.
        Leaves store the leaf weight vectors (``value``); the tree output is
        ``|r*| value`` with ``r*`` the decision margin of smallest magnitude on
        the path, which needs the hinge kernel (used by ``predict``).
    forest_ : ObliqueForest
        The same trees, packed. Stored on first access (of ``forest_``,
        ``trees_``, :meth:`apply`, :meth:`decision_path`, inspection or
        export) from the trained model and its training samples per leaf, not
        by ``fit``: prediction does not need them, and with a dense weight
        row per split they outweigh the training state (100 trees of depth
        10 on 40 features: 64 MiB). Pickles leave them out.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit (only when X has string names).
    %(feature_importances)s
    %(categorical_attributes)s
    n_hinge_features_ : int or None
        The fitted model's hinge features: how many are learnt, or None (the
        raw inputs); ``n_hinge_features="auto"``'s choice.
    screened_features_ : ndarray of bool of shape (n_features_in_,) or None
        The features the learnt layer reads (True), itself or through its
        missing-value indicator, when the fitted model is screened
        (``feature_screening``); None when it reads every input.
    n_iter_ : int
        Number of epochs run (over all ``fit``/``partial_fit`` calls of a
        warm-started model; with ``n_hinge_features="auto"``, of the forest
        kept).
    best_epoch_ : int
        Epoch (1-based, within the last ``fit``) whose parameters were kept.
    loss_curve_ : list of float
        Mean training loss of every epoch.
    validation_loss_curve_ : list of float
        Validation loss of every epoch (empty without early stopping).
    epoch_times_ : list of float
        Wall-clock seconds of every epoch of the last ``fit``/``partial_fit``.
"""

NOTES = """
    The model (Lay et al., 2018): a bias-free linear layer, batch
    normalisation without scale/shift whose running mean/variance are used in
    both training and prediction (constants in the backward pass), then M
    hinge trees. Each decision compares one normalised feature ``u_f`` with a
    learnt threshold ``t``; the traversal (Algorithm 3) tracks the margin
    ``r* = u_f - t`` of smallest magnitude on the path and the tree outputs
    ``|r*| w_leaf``. Gradients are exact and sparse (eqs. 11-12): per sample
    and tree only the leaf reached and the decision of smallest margin (and
    through it one hinge feature) receive a gradient. Initialisation follows
    Algorithm 1: thresholds ``U(-3, 3)``, leaf weights ``N(0, 0.01)``,
    random feature indices.

    Gaps filled and deviations (also in ``benchmarks/results/hinge.md``):

    - the raw input is standardised before the linear layer (the statistics
      are folded back into the stored trees); features constant in training
      (or varying only below about 1e-301, where no finite weight in raw
      units could use them) are standardised to 0 and get no weight, so
      their value at predict time does not matter;
    - the batch-norm statistics are initialised from the first minibatch and
      then updated after every step with the reference code's schedule
      ``alpha = min(i / (i + 1), 0.99)`` (unbiased batch variance);
    - the linear layer (and linear head) use PyTorch's default uniform
      initialisation, as the authors' later PyTorch code (their earlier C++
      code, which produced the paper's UCI results, draws both from
      ``N(0, 1)``; on iris that was not better);
    - early stopping on a held-out validation fraction instead of the
      paper's best-test-epoch selection (the paper trained a fixed number of
      epochs), with a patience of 5 epochs: with 20 (the earlier default)
      fits ran 20 epochs past their best one, which on data that overfit
      early (40 synthetic features, 10 000 rows: best epoch 10) doubled the
      training time for nothing; on the paper's letter and USPS models the
      validation loss plateaus noisily, and patience 5 kept the same epoch
      except for two models, whose test error rose by 0.10 (letter ferns)
      and 0.25 points (USPS trees) (``benchmarks/results/hinge.md``, section
      early stopping);
    - the default optimiser is lazy Adam (``optimizer="adam"`` is the
      paper's dense Adam);
    - sample weights multiply the per-sample loss (normalised to mean 1);
    - ``n_hinge_features="auto"`` (ours, issue 39) keeps whichever of the
      learnt features and the raw inputs fits the held-out rows better.
      Raw inputs make every decision axis-aligned, as a random forest's:
      on the suite's validation parts they won 3 classification sets
      (poker 0.556 against 0.528) and lost 7 (pixels and measurements:
      connect4, fashion_mnist, usps, letter, madelon), so neither suits
      every data set. ``"auto"`` won poker, tied the other 18 sets and
      took about twice the fit time
      (``benchmarks/results/defaults_validation.md``, families
      ``hinge-classifier-capacity`` and ``hinge-classifier-auto``); on the
      test parts 2 sets won (poker 0.569 against 0.528, magic), 17 tied
      (``defaults_lodo.md``). Left out, poker chooses the learnt features,
      so alone the choice rests on one data set; with ``feature_screening``
      below it is the classifier's default. Above 100 inputs only the
      learnt features train (the raw forest's layer is an identity with a
      row per input; on the validation parts it was never kept above 100).
    - ``feature_screening`` (ours, issue 39): a learnt hinge feature is an
      inner product of every input, so on madelon (20 relevant features of
      500, the others noise) each one is mostly noise, and the paper's
      forest scores 0.59 there (the paper: 40.8 % error). The screen keeps
      the inputs whose impurity importance in an extremely randomised
      forest (``max_features="sqrt"``) exceeds that of every shadow input,
      the rule of Boruta (Kursa & Rudnicki, 2010) in one round, with one
      row permutation for all the shadows (which keeps sparse input
      sparse). It is fitted on the rows the forest trains on (the
      early-stopping rows excluded) and seeded from ``random_state``; the
      screened-out inputs get an infinite scale, so the layer never weighs
      them and prediction, pickles and ONNX are as for any model. On two
      validation parts of madelon a screened layer (15-20 inputs kept)
      scored 0.87-0.89.
    - ``HingeForestClassifier``'s defaults ``n_hinge_features="auto"`` and
      ``feature_screening="auto"`` (ours; the paper: 100 learnt features)
      were chosen on the suite's validation parts
      (``benchmarks/results/defaults_validation.md``, family
      ``hinge-classifier-screening``): up to three forests train (learnt
      features unscreened and screened, raw inputs) and the lowest
      validation loss is kept. Against the paper's layer they won 2 sets
      (madelon 0.887 against 0.569; poker 0.635 against 0.528), tied 17
      and lost none, at 4.1 times the fit time (median over the sets);
      screening alone (``n_hinge_features=100``) also won those two at 2.4
      times but ranked below. Left out one set at a time, every fold
      chose the same; on the test parts it won 3 sets (madelon 0.910
      against 0.591, poker 0.695 against 0.528, magic), tied 16 and lost
      none (``benchmarks/results/defaults_lodo.md``).
    - ``HingeForestRegressor``'s defaults are the same two ``"auto"``
      (ours), chosen on the validation parts of the suite's nine
      regression sets (family ``hinge-regressor-screening``): against the
      paper's layer they won 4 sets (concrete 0.895 against 0.871, puma8nh
      0.685 against 0.672, puma8nm, fried_delve), tied 5 and lost none, at
      3.4 times the fit time. ``feature_screening=True`` ranked a little
      better (2.06 against 2.11; 3 wins, 6 ties) but cannot be a default,
      as ``partial_fit`` refuses it. Left out one set at a time, every fold
      chose the two ``"auto"``; on the test parts they won 4 sets (abalone
      0.564 against 0.550, puma8nh 0.676 against 0.666, puma8nm,
      fried_delve), tied 5 (concrete 0.898 against 0.883) and lost none.

    There is no ``oob_score``: the hinge forest does not bag. Its trees are
    trained jointly on one loss, and every minibatch reaches every tree, so
    each tree sees all training rows (all but the ``validation_fraction``
    held out for early stopping, which no tree sees) and no row is out of
    any tree's bag. The held-out validation loss
    (``validation_loss_curve_``) plays the part of an out-of-bag estimate.

    Sparse input (any format; CSR inside) is never densified as a whole: the
    moments come from the stored entries and each minibatch's linear layer
    and its gradient read the rows' stored entries with the centring applied
    algebraically; prediction densifies blocks of at most 2**21 values. Dense
    and sparse fits agree to rounding, not bit for bit (sums over stored
    entries only; ``tests/hinge/test_sparse.py``). The input screen
    (``feature_screening``) reads a sparse input as dense when the rows it
    reads and their shadows take at most 64 MiB as dense float64, so that
    dense and sparse fits screen alike; a larger one stays sparse, and
    scikit-learn's sparse splitter, which draws other thresholds, may then
    screen a borderline input otherwise.

    Monotonic constraints (``monotonic_cst``). Exact: a hinge tree is
    continuous (its output is 0 on every decision boundary) and inside a
    leaf's cell it is ``w_leaf`` times the smallest of the path's margins
    ``|r_d|``; each hinge feature moves linearly along a constrained input.
    So the forest is monotone as asked if, for every leaf and every decision
    on its path whose hinge feature moves with a constrained input, the leaf
    weight has the sign of the direction in which that decision's ``|r_d|``
    moves, and the linear head (``head="linear"``) weighs every tree
    non-negatively (for two classes: the difference of the classes'
    weights). The prediction (regression output, probability of
    ``classes_[1]``) is then monotone for every input, NaN in any other
    feature included (a NaN input takes a fixed value). Ours: that condition
    zeroes every leaf whose path turns both ways at such decisions, so the
    hinge features are split in two. 90 % of the learnt features
    (``int(0.9 * n_hinge_features)``, at least one) form a monotone pool,
    each kept non-decreasing in every constrained input (the sign of its
    weight on a constrained input is fixed, ``c_j A_hj >= 0``); the others
    have no weight on constrained inputs. (The fraction was 0.5 until it
    was chosen on validation parts across four data sets,
    ``benchmarks/results/monotonic_defaults_hinge-pool.md``: 0.9 won on mean
    rank by a narrow margin, 1.75 against 2.0, under the regressor's old
    defaults; chosen again at its ``"auto"`` defaults, 1.25 against 1.75,
    and on ten seeds, 1.25 against 2.25, every leave-one-set-out fold
    choosing 0.9 both times.) In a regressor, the first
    decision of every tree (fern) tests a pool feature and the others a free
    feature, so the leaves under the first decision's right child are kept
    ``>= 0`` and those under its left child ``<= 0``: constrained inputs act
    through the trees' first margins, free inputs everywhere. A classifier's
    trees test pool features in their first 3 levels (ours, chosen on
    validation parts over ten seeds,
    ``benchmarks/results/monotonic_defaults_hinge-pool-levels-classifier.md``:
    mean rank 1.75 against 2.5 for 4 levels, the choice on three seeds;
    the regressors' runs kept 1, also at their ``"auto"`` defaults and on
    ten seeds, where 1, 2 and 3 tied at mean rank 2.0): only
    the leaves below the all-right and the all-left paths through those
    levels can be non-zero, so constrained
    inputs act through an intersection of oblique half-spaces; the others
    stay 0. Without the linear layer (``n_hinge_features=None``) the pool is
    the constrained inputs themselves. Every optimiser step (Adam, lazy
    Adam, AdaGrad, SGD) is followed by the Euclidean projection
    of the parameters it moved onto these sign constraints (two classes:
    leaf and head weight pairs move to their mean when their difference has
    the wrong sign). Multiclass and multi-output fits raise a
    ``ValueError``; without constraints training is unchanged.
"""
