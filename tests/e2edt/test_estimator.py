"""E2EDTClassifier at the estimator level."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris, make_classification
from sklearn.tree import DecisionTreeClassifier

from obliquetrees.e2edt._estimator import E2EDTClassifier, E2EDTRegressor
from obliquetrees.utils.seeds import draw_seeds

FAST = dict(max_depth=3, max_epochs=5, learning_rate=0.02, random_state=0)


def test_fit_predict_single_tree(blobs):
    X, y = blobs
    clf = E2EDTClassifier(**FAST).fit(X, y)
    clf.tree_.check_invariants()
    assert clf.tree_ is clf.trees_[0] or clf.tree_.node_count == clf.trees_[0].node_count
    assert clf.tree_.max_depth <= 3
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.predict(X).shape == (len(y),)
    assert set(np.unique(clf.predict(X))) <= set(clf.classes_)
    # one tree (tree_): single-tree shapes, as scikit-learn's trees
    assert clf.apply(X).shape == (len(y),)
    assert clf.decision_path(X).shape == (len(y), clf.tree_.node_count)
    assert clf.score(X, y) > 0.6


def assert_finetune_improves_training_fit(cls, params, X, y):
    """30 finetuning epochs keep the greedy tree (same seed) and do not lower its training score."""
    greedy = cls(**{**params, "finetune_epochs": 0}).fit(X, y)
    tuned = cls(**{**params, "finetune_epochs": 30}).fit(X, y)
    # same greedy structure (same seed), finetuned parameters
    np.testing.assert_array_equal(greedy.tree_.children_left, tuned.tree_.children_left)
    assert tuned.score(X, y) >= greedy.score(X, y)


def test_finetune_improves_training_fit(blobs):
    X, y = blobs
    assert_finetune_improves_training_fit(E2EDTClassifier, FAST, X, y)


def test_beats_axis_aligned_tree_on_oblique_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 6))
    y = (X @ rng.normal(size=6) > 0).astype(int) + 2 * (X @ rng.normal(size=6) > 0.3)
    Xtr, Xte, ytr, yte = X[:1500], X[1500:], y[:1500], y[1500:]
    # small data: few Adam steps per epoch, so a larger step than the paper's 0.001
    ours = E2EDTClassifier(max_depth=3, max_epochs=20, learning_rate=0.02, random_state=0)
    ours.fit(Xtr, ytr)
    cart = DecisionTreeClassifier(max_depth=3, random_state=0).fit(Xtr, ytr)
    assert ours.score(Xte, yte) > cart.score(Xte, yte)


def test_soft_routing(blobs):
    X, y = blobs
    hard = E2EDTClassifier(**FAST, routing="hard").fit(X, y)
    soft = E2EDTClassifier(**FAST, routing="soft").fit(X, y)
    np.testing.assert_array_equal(hard.tree_.weight_value, soft.tree_.weight_value)
    p = soft.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert np.mean(soft.predict(X) == hard.predict(X)) > 0.8
    assert not np.allclose(p, hard.predict_proba(X))


def test_forest_same_model_for_any_n_jobs(blobs):
    X, y = blobs
    kw = dict(FAST, n_estimators=4, max_features=4)
    a = E2EDTClassifier(**kw, n_jobs=1).fit(X, y)
    b = E2EDTClassifier(**kw, n_jobs=2).fit(X, y)
    assert not hasattr(a, "tree_")
    assert len(a.trees_) == 4
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        ta.check_invariants()
        np.testing.assert_array_equal(ta.weight_value, tb.weight_value)
        np.testing.assert_array_equal(ta.value, tb.value)
        assert np.all(np.diff(ta.weight_indptr)[ta.children_left >= 0] <= 4)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.apply(X).shape == (len(y), 4)
    # trees differ from each other
    assert not np.array_equal(a.trees_[0].weight_value, a.trees_[1].weight_value)


def test_refit_single_after_forest_drops_tree_(blobs):
    X, y = blobs
    clf = E2EDTClassifier(**FAST, n_estimators=2).fit(X, y)
    assert not hasattr(clf, "tree_")
    clf.set_params(n_estimators=1).fit(X, y)
    assert hasattr(clf, "tree_")


def test_sample_weight_ones_equals_none(blobs):
    X, y = blobs
    a = E2EDTClassifier(**FAST).fit(X, y)
    b = E2EDTClassifier(**FAST).fit(X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(a.tree_.weight_value, b.tree_.weight_value)


def test_zero_weight_samples_do_not_break(blobs):
    X, y = blobs
    sw = np.ones(len(y))
    sw[y == 2] = 0.0
    clf = E2EDTClassifier(**FAST).fit(X, y, sample_weight=sw)
    clf.tree_.check_invariants()
    assert np.all(np.isfinite(clf.predict_proba(X)))


def test_standardisation_is_folded(blobs):
    """Weights act on raw X: affine rescaling of the features changes nothing much."""
    X, y = blobs
    a = E2EDTClassifier(**FAST).fit(X, y)
    b = E2EDTClassifier(**FAST).fit(X * 0.01 - 3.0, y)
    assert np.mean(a.predict(X) == b.predict(X * 0.01 - 3.0)) > 0.97


def test_standardize_false_refuses_inputs_beyond_float32(blobs):
    """Raw inputs whose float32 margins could overflow get a clear error, not a
    model at chance level (the float32 cast turned them into inf)."""
    X, y = blobs
    with pytest.raises(ValueError, match="standardize=False.*float32"):
        E2EDTClassifier(**FAST, standardize=False).fit(X * 1e38, y)
    # the default standardises first, so the same data trains like unscaled X
    big = E2EDTClassifier(**FAST).fit(X * 1e38, y)
    plain = E2EDTClassifier(**FAST).fit(X, y)
    assert np.mean(big.predict(X * 1e38) == plain.predict(X)) > 0.97


def test_standardize_false_trains_on_the_inputs_as_given(blobs):
    """standardize=False: the same tree as training on X directly (mean 0, scale 1)."""
    from obliquetrees.e2edt.training import _fit_one_tree
    from obliquetrees.utils.seeds import draw_seeds

    X, y = blobs
    clf = E2EDTClassifier(**FAST, standardize=False).fit(X, y)
    params = clf._resolve_params(X.shape[1])
    seed = int(draw_seeds(0, 1)[0])
    Z = np.ascontiguousarray(X, dtype=np.float32)
    tree, _ = _fit_one_tree(X, Z, y, np.ones(len(y)), 3, np.zeros(8), np.ones(8), params, seed)
    np.testing.assert_array_equal(clf.tree_.dense_weights(), tree.dense_weights())
    np.testing.assert_array_equal(clf.tree_.bias, tree.bias)
    # and it differs from the standardised fit of the same seed
    std = E2EDTClassifier(**FAST).fit(X, y)
    assert not np.allclose(std.tree_.dense_weights()[0], clf.tree_.dense_weights()[0])


def test_pickle_roundtrip(blobs):
    X, y = blobs
    clf = E2EDTClassifier(**FAST, routing="soft").fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


def test_image_patches_and_spatial_regularisation():
    rng = np.random.default_rng(0)
    n, shape = 600, (8, 8)
    base = rng.normal(size=(n, 8, 8))
    base[:, 2:6, 2:6] += np.where(rng.random(n) < 0.5, 1.0, -1.0)[:, None, None]
    y = (base[:, 2:6, 2:6].mean(axis=(1, 2)) > 0).astype(int)
    X = base.reshape(n, -1)
    kw = dict(
        max_depth=2,
        max_epochs=20,
        finetune_epochs=20,
        image_shape=shape,
        learning_rate=0.01,
        random_state=0,
    )
    plain = E2EDTClassifier(**kw).fit(X, y)
    smooth = E2EDTClassifier(**kw, spatial_reg=1.0).fit(X, y)

    def roughness(clf):
        W = clf.tree_.dense_weights()[clf.tree_.children_left >= 0].reshape(-1, 8, 8)
        d = np.diff(W, axis=1) ** 2
        return (d.sum() + (np.diff(W, axis=2) ** 2).sum()) / (W**2).sum()

    assert roughness(smooth) < 0.5 * roughness(plain)
    forest = E2EDTClassifier(**kw, n_estimators=3, patch_size=4).fit(X, y)
    for tree in forest.trees_:
        for i in np.flatnonzero(tree.children_left >= 0):
            r, c = np.nonzero(tree.dense_weights()[i].reshape(shape))
            assert np.ptp(r) < 4 and np.ptp(c) < 4


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(image_shape=(3, 3)), "image_shape"),
        (dict(image_shape=(2, 2, 2)), "image_shape"),
        (dict(patch_size=2), "patch_size needs image_shape"),
        (dict(image_shape=(2, 4), patch_size=3), "exceeds"),
        (dict(image_shape=(2, 4), patch_size=2, max_features=3), "either patch_size"),
        (dict(spatial_reg=0.1), "spatial_reg"),
        (dict(max_epochs=0), "max_epochs"),
        (dict(routing="fuzzy"), "routing"),
        (dict(max_features=1.5), "max_features"),
        (dict(steepness_increase=-0.1), "steepness_increase"),
        (dict(prune_threshold=1.0), "prune_threshold"),
        (dict(prune_threshold=-1e-3), "prune_threshold"),
        (dict(max_finetune_samples=0), "max_finetune_samples"),
        (dict(max_finetune_samples=2.5), "max_finetune_samples"),
    ],
)
def test_bad_parameters_name_the_parameter(params, match):
    X, y = load_iris(return_X_y=True)
    X = np.hstack([X, X])
    with pytest.raises(ValueError, match=match):
        E2EDTClassifier(**params).fit(X, y)


def test_pruned_and_exact_finetune_fit_equally_well():
    """The default pruned routing against the paper's pass over every node (same seed)."""
    X, y = load_digits(return_X_y=True)
    Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
    kw = dict(max_depth=6, max_epochs=20, random_state=0)
    exact = E2EDTClassifier(**kw, prune_threshold=0.0).fit(Xtr, ytr)
    pruned = E2EDTClassifier(**kw).fit(Xtr, ytr)
    assert pruned.prune_threshold == 1e-3
    explicit = E2EDTClassifier(**kw, prune_threshold="auto").fit(Xtr, ytr)  # 1e-3 at 1200 rows
    np.testing.assert_array_equal(pruned.predict_proba(Xte), explicit.predict_proba(Xte))
    # a trained model (a depth-6 CART tree scores 0.73 here) ...
    assert exact.score(Xte, yte) > 0.8
    # ... and pruning costs at most 2 points of test accuracy on 597 rows
    assert pruned.score(Xte, yte) >= exact.score(Xte, yte) - 0.02


def test_finetune_row_budget():
    """Above the budget each finetune epoch draws rows; at or below it nothing changes."""
    X, y = load_digits(return_X_y=True)
    Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
    kw = dict(max_depth=6, max_epochs=10, finetune_epochs=20, batch_size=100, random_state=0)
    every = E2EDTClassifier(**kw, max_finetune_samples=None).fit(Xtr, ytr)
    assert E2EDTClassifier().max_finetune_samples == 16384
    at_budget = E2EDTClassifier(**kw, max_finetune_samples=1200).fit(Xtr, ytr)
    np.testing.assert_array_equal(at_budget.predict_proba(Xte), every.predict_proba(Xte))
    # 600 rows an epoch: half the Adam steps and E-steps, another model ...
    budget = E2EDTClassifier(**kw, max_finetune_samples=600).fit(Xtr, ytr)
    assert not np.array_equal(budget.predict_proba(Xte), every.predict_proba(Xte))
    # ... still trained (a depth-6 CART tree scores 0.73 here), its leaves set
    # from every row: nearly every row's leaf has its mode on the class most of
    # that leaf's training rows have (soft statistics at the final steepness)
    assert budget.score(Xte, yte) > 0.8
    leaves = budget.apply(Xtr)  # a single tree: one leaf id per row
    agree = 0
    for leaf in np.unique(leaves):
        counts = np.bincount(ytr[leaves == leaf], minlength=10)
        if counts[np.argmax(budget.tree_.value[leaf])] == counts.max():
            agree += counts.sum()
    assert agree >= 0.95 * len(ytr)


def test_auto_prune_threshold_follows_the_row_budget():
    """``"auto"``: 1e-3 up to the row budget, 3e-2 above it (or 1e-3 without a budget).

    It is opt-in: the default prunes at 1e-3 at every size.
    """
    from obliquetrees.e2edt._estimator import PRUNE_THRESHOLD, PRUNE_THRESHOLD_ABOVE_BUDGET

    assert (PRUNE_THRESHOLD, PRUNE_THRESHOLD_ABOVE_BUDGET) == (1e-3, 3e-2)
    assert E2EDTClassifier(max_finetune_samples=100)._resolve_params(4, 101).prune_threshold == 1e-3
    clf = E2EDTClassifier(max_finetune_samples=100, prune_threshold="auto")
    assert clf._resolve_params(4, 100).prune_threshold == 1e-3
    assert clf._resolve_params(4, 101).prune_threshold == 3e-2
    unbounded = E2EDTClassifier(max_finetune_samples=None, prune_threshold="auto")
    assert unbounded._resolve_params(4, 10**6).prune_threshold == 1e-3
    chosen = E2EDTClassifier(max_finetune_samples=100, prune_threshold=0.0)
    assert chosen._resolve_params(4, 101).prune_threshold == 0.0
    assert E2EDTRegressor()._resolve_params(4, 10**6).prune_threshold == 0.0


def test_auto_finetune_schedule_follows_the_row_budget():
    """``finetune_epochs="auto"``: ``3 * max_epochs`` up to the row budget (the fit of None);
    above it a third of the epochs with thrice the steepness increase and Adam step."""
    kw = dict(max_depth=3, max_epochs=4, steepness_increase=0.2, learning_rate=0.002)
    clf = E2EDTClassifier(**kw, finetune_epochs="auto", max_finetune_samples=100)
    p = clf._resolve_params(4, 100)
    assert (p.finetune_epochs, p.finetune_steepness_increase, p.finetune_learning_rate) == (
        12,
        None,
        None,
    )
    p = clf._resolve_params(4, 101)
    assert (p.finetune_epochs, p.steepness_increase, p.learning_rate) == (4, 0.2, 0.002)
    assert np.allclose((p.finetune_steepness_increase, p.finetune_learning_rate), (0.6, 0.006))
    unbounded = E2EDTClassifier(finetune_epochs="auto", max_finetune_samples=None)
    assert unbounded._resolve_params(4, 10**6).finetune_epochs == 60
    chosen = E2EDTClassifier(finetune_epochs=7, max_finetune_samples=100)._resolve_params(4, 101)
    assert (chosen.finetune_epochs, chosen.finetune_learning_rate) == (7, None)
    X, y = load_digits(return_X_y=True)
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:], y[600:]
    kw = dict(max_depth=5, max_epochs=6, batch_size=100, random_state=0)
    default = E2EDTClassifier(**kw).fit(Xtr, ytr)
    at_budget = E2EDTClassifier(**kw, finetune_epochs="auto", max_finetune_samples=600)
    np.testing.assert_array_equal(
        at_budget.fit(Xtr, ytr).predict_proba(Xte), default.predict_proba(Xte)
    )
    scores = {
        epochs: E2EDTClassifier(**kw, finetune_epochs=epochs, max_finetune_samples=599)
        .fit(Xtr, ytr)
        .score(Xte, yte)
        for epochs in ("auto", None, 6)
    }
    # 6 epochs at thrice the steps are worth more than 6 plain epochs (0.735, 0.625)
    # and nearly the 18 of None (0.752)
    assert scores["auto"] > scores[6] + 0.05
    assert scores["auto"] > scores[None] - 0.03


def test_greedy_growth_rows_above_the_budget():
    """All rows up to the budget; above it a sorted draw of the budget's size, per seed."""
    from obliquetrees.e2edt.training import growth_rows

    assert growth_rows(100, 100, 0) is None
    assert growth_rows(100, None, 0) is None
    rows = growth_rows(1000, 100, 3)
    assert rows.shape == (100,) and np.all(np.diff(rows) > 0) and rows.max() < 1000
    np.testing.assert_array_equal(rows, growth_rows(1000, 100, 3))
    assert not np.array_equal(rows, growth_rows(1000, 100, 4))


def test_iris_example():
    X, y = load_iris(return_X_y=True)
    clf = E2EDTClassifier(max_depth=3, max_epochs=10, random_state=0).fit(X, y)
    assert clf.tree_.max_depth <= 3
    assert np.all(np.isfinite(clf.predict_proba(X)))


@pytest.mark.slow
@pytest.mark.parametrize("name, floor", [("letter_uci", 0.635), ("usps", 0.89)])
def test_depth6_tree_on_paper_data(shared_data, name, floor):
    """Depth-6 finetuned tree vs the authors' code (letter 63.5 %, usps 91.0 %, ANCHORS 5a)."""
    d = shared_data(name)
    clf = E2EDTClassifier(max_depth=6, max_epochs=20, random_state=0)
    clf.fit(d["X_train"], d["y_train"])
    assert clf.score(d["X_test"], d["y_test"]) > floor


@pytest.mark.parametrize("routing", ["hybrid", "hard", "soft"])
def test_predict_accepts_csr_and_float32(blobs, routing):
    import scipy.sparse as sp

    X, y = blobs
    clf = E2EDTClassifier(**FAST, routing=routing).fit(X, y)
    dense = clf.predict_proba(X)
    np.testing.assert_allclose(clf.predict_proba(sp.csr_matrix(X)), dense, atol=1e-12)
    # float32 input stays float32 in traversal: a row on a split's plane may flip
    proba32 = clf.predict_proba(X.astype(np.float32))
    assert np.mean(np.abs(proba32 - dense).max(axis=1) < 1e-4) > 0.99


@pytest.mark.parametrize("n_features", [1, 2, 3, 16, 784])
@pytest.mark.parametrize("max_features", [None, "sqrt", "log2", 1, 5, 1000, 0.01, 0.5, 1.0])
def test_max_features_resolves_as_before_the_shared_rule(n_features, max_features):
    """E2EDT uses CO2's rule (_training.features.resolve_max_features): for valid values,
    E2EDT's old rule."""
    if max_features is None:
        want = None
    elif max_features == "sqrt":
        want = max(1, int(np.sqrt(n_features)))
    elif max_features == "log2":
        want = max(1, int(np.log2(n_features)))
    elif isinstance(max_features, int):
        want = min(max_features, n_features)
    else:
        want = max(1, int(max_features * n_features))
    got = E2EDTClassifier(max_features=max_features)._resolve_params(n_features).max_features
    assert got == want


# ------------------------------------------------- routing="hybrid" (default)
def test_default_hybrid_predicts_hard_and_gives_soft_probabilities(blobs):
    """predict is the deterministic tree's, bit for bit; predict_proba the soft model's."""
    X, y = blobs
    clf = E2EDTClassifier(**FAST, n_estimators=2).fit(X, y)
    assert clf.routing == "hybrid"
    pred, proba = clf.predict(X), clf.predict_proba(X)
    np.testing.assert_array_equal(pred, clf.set_params(routing="hard").predict(X))
    hard_proba = clf.predict_proba(X)
    np.testing.assert_array_equal(proba, clf.set_params(routing="soft").predict_proba(X))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.set_params(routing="hybrid").score(X, y), np.mean(pred == y))
    # graded probabilities: a distribution per row, not one per combination of leaves
    n_leaves = [tree.n_leaves for tree in clf.trees_]
    assert len(np.unique(hard_proba, axis=0)) <= np.prod(n_leaves)
    assert len(np.unique(proba, axis=0)) > 0.9 * len(y)
    # predict and argmax predict_proba disagree on a few rows, all near a split of
    # their path: the soft model sends more than 15 % of them the other way there
    disagree = pred != clf.classes_[np.argmax(proba, axis=1)]
    assert 0 < disagree.mean() < 0.15
    margin = _smallest_steep_margin_on_path(clf, X)
    assert np.all(margin[disagree] < 1.7)  # sigmoid(1.7) = 0.85
    assert np.median(margin[disagree]) < np.median(margin[~disagree])


def _smallest_steep_margin_on_path(clf, X):
    """Per row, the smallest ``|gamma * (w . x + b)|`` over the splits on its paths."""
    indicator, ptr = clf.decision_path(X)
    on_path = indicator.toarray().astype(bool)
    out = np.full(X.shape[0], np.inf)
    for t, (tree, steep) in enumerate(zip(clf.trees_, clf.steepness_, strict=True)):
        margin = np.abs((X @ tree.dense_weights().T + tree.bias) * steep)
        split = on_path[:, ptr[t] : ptr[t + 1]] & (tree.children_left >= 0)
        out = np.minimum(out, np.where(split, margin, np.inf).min(axis=1))
    return out


def test_soft_probabilities_are_normalised_rows_within_0_and_1():
    """Path probabilities sum to 1 up to rounding; predict_proba is renormalised,
    so no entry exceeds 1 (scikit-learn's log_loss refused 1 + 2e-16)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import log_loss

    X, y = load_breast_cancer(return_X_y=True)
    for n_estimators in (1, 3):
        # depth 10: without the renormalisation one entry was 1 + 2e-16 here
        clf = E2EDTClassifier(**{**FAST, "max_depth": 10}, n_estimators=n_estimators).fit(X, y)
        proba = clf.predict_proba(X)
        assert proba.min() >= 0.0 and proba.max() <= 1.0
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-15)
        assert np.isfinite(log_loss(y, proba))


def test_default_log_loss_is_far_below_the_leaf_distributions(blobs):
    from sklearn.metrics import log_loss

    X, y = blobs
    clf = E2EDTClassifier(**FAST).fit(X[:300], y[:300])
    hybrid = log_loss(y[300:], clf.predict_proba(X[300:]))
    hard = log_loss(y[300:], clf.set_params(routing="hard").predict_proba(X[300:]))
    assert hybrid < 0.5 * hard


@pytest.mark.slow
@pytest.mark.parametrize("loader", ["load_breast_cancer", "load_digits"])
def test_default_log_loss_within_1_5_of_random_forest(loader):
    """Issue 20's acceptance: the default's log loss <= 1.5 x RandomForest(100)'s."""
    import sklearn.datasets
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    X, y = getattr(sklearn.datasets, loader)(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    ours = E2EDTClassifier(random_state=0).fit(X_train, y_train)
    rf = RandomForestClassifier(n_estimators=100, random_state=0).fit(X_train, y_train)
    rf_loss = log_loss(y_test, rf.predict_proba(X_test))
    assert log_loss(y_test, ours.predict_proba(X_test)) <= 1.5 * rf_loss


# --------------------------------------------------------------- class_weight
@pytest.mark.parametrize(
    "class_weight, match",
    [
        ({7: 1.0}, "label 7"),
        ({0: -1.0}, "non-negative"),
        ({0: np.nan}, "non-negative"),
        ({0: 0.0, 1: 0.0, 2: 0.0}, "zero for every"),
    ],
)
def test_bad_class_weight_is_a_clear_error(blobs, class_weight, match):
    X, y = blobs
    with pytest.raises(ValueError, match=match):
        E2EDTClassifier(**FAST, class_weight=class_weight).fit(X, y)


def test_class_weight_multiplies_sample_weight(blobs):
    """As in scikit-learn: class_weight is sample_weight times the class's weight."""
    from sklearn.utils.class_weight import compute_sample_weight

    X, y = blobs
    labels = np.array(["a", "b", "c"])[y]
    sw = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    for class_weight in ("balanced", {"a": 3.0, "c": 0.5}):
        ours = E2EDTClassifier(**FAST, class_weight=class_weight).fit(X, labels, sample_weight=sw)
        expanded = sw * compute_sample_weight(class_weight, labels)
        ref = E2EDTClassifier(**FAST).fit(X, labels, sample_weight=expanded)
        np.testing.assert_array_equal(ours.predict_proba(X), ref.predict_proba(X))
        np.testing.assert_array_equal(ours.tree_.weight_value, ref.tree_.weight_value)
    # without bootstrap every tree's "subsample" is the whole set: "balanced"
    sub = E2EDTClassifier(**FAST, class_weight="balanced_subsample").fit(X, labels)
    bal = E2EDTClassifier(**FAST, class_weight="balanced").fit(X, labels)
    np.testing.assert_array_equal(sub.predict_proba(X), bal.predict_proba(X))


def test_class_weight_balanced_finds_the_rare_class():
    """A 1 %-positive problem: "balanced" raises the recall of the positives."""
    from sklearn.metrics import balanced_accuracy_score, recall_score
    from sklearn.model_selection import train_test_split

    gains = []
    for seed in (0, 3):  # 50 positives in each part
        X, y = make_classification(
            n_samples=10000, n_features=20, weights=[0.99], flip_y=0, random_state=seed
        )
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.5, stratify=y, random_state=seed
        )
        scores = []
        for class_weight in (None, "balanced"):
            clf = E2EDTClassifier(max_depth=6, class_weight=class_weight, random_state=seed)
            pred = clf.fit(X_train, y_train).predict(X_test)
            scores.append([recall_score(y_test, pred), balanced_accuracy_score(y_test, pred)])
        gains.append(np.subtract(scores[1], scores[0]))
    recall_gain, balanced_accuracy_gain = np.mean(gains, axis=0)
    assert recall_gain > 0.15 and balanced_accuracy_gain > 0.05


# ------------------------------------------------------ bootstrap, OOB, warm
def _bootstrap_counts(n, seed):
    """The tree's bootstrap, drawn independently of the package's helper."""
    draws = np.random.default_rng([seed, 1]).integers(0, n, n)
    return np.bincount(draws, minlength=n)


def _reference_oob(clf, X):
    """OOB mean of predict_proba's rule and OOB argmax of predict's rule, tree by tree.

    Trees fitted without bootstrap (``_tree_bootstrap`` False) leave no row out.
    """
    from obliquetrees._core.soft import soft_predict
    from tests import reference as ref

    n, K = X.shape[0], clf.n_classes_
    proba, votes, count = np.zeros((n, K)), np.zeros((n, K)), np.zeros(n)
    trees = zip(clf.trees_, clf.steepness_, clf._tree_seeds, clf._tree_bootstrap, strict=True)
    for tree, steep, seed, boot in trees:
        oob = (_bootstrap_counts(n, seed) == 0) & boot
        hard = ref.predict_value([tree], X[oob])
        soft = soft_predict(tree, X[oob], tree.value, steepness=steep)
        proba[oob] += hard if clf.routing == "hard" else soft
        votes[oob] += soft if clf.routing == "soft" else hard
        count[oob] += 1
    with np.errstate(invalid="ignore"):
        return proba / count[:, None], np.argmax(votes, axis=1), count > 0


@pytest.mark.filterwarnings("ignore:.*drawn by every bootstrap")
@pytest.mark.parametrize("routing", ["hybrid", "hard", "soft"])
def test_oob_score_matches_reference(blobs, routing):
    from sklearn.model_selection import train_test_split

    X, y = blobs
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    clf = E2EDTClassifier(
        **FAST, n_estimators=10, bootstrap=True, oob_score=True, routing=routing
    ).fit(X_train, y_train)
    proba, votes, covered = _reference_oob(clf, X_train)
    assert covered.mean() > 0.95  # 0.63 ** 10: about 1 % of the rows in every bootstrap
    np.testing.assert_allclose(clf.oob_decision_function_, proba, rtol=1e-12)
    assert clf.oob_score_ == pytest.approx(np.mean(votes[covered] == y_train[covered]))
    assert abs(clf.oob_score_ - clf.score(X_test, y_test)) < 0.1


def test_oob_options_and_errors(blobs):
    X, y = blobs
    with pytest.raises(ValueError, match="bootstrap=True"):
        E2EDTClassifier(**FAST, oob_score=True).fit(X, y)
    kw = dict(FAST, n_estimators=3, bootstrap=True)
    with pytest.warns(UserWarning, match="drawn by every bootstrap"):
        errors = E2EDTClassifier(**kw, oob_score=lambda t, p: np.mean(t != p)).fit(X, y)
    nan_rows = np.isnan(errors.oob_decision_function_).any(axis=1)
    assert 0 < nan_rows.sum() < len(y)
    with pytest.warns(UserWarning, match="drawn by every bootstrap"):
        accuracy = E2EDTClassifier(**kw, oob_score=True).fit(X, y)
    assert errors.oob_score_ == pytest.approx(1 - accuracy.oob_score_)
    # a refit without oob_score drops the stale attributes
    assert not hasattr(accuracy.set_params(oob_score=False).fit(X, y), "oob_score_")


def test_bootstrap_trains_on_integer_weights(blobs):
    """A bootstrapped tree weighs its rows by their draw counts (out-of-bag rows: 0)."""
    X, y = blobs
    clf = E2EDTClassifier(**FAST, bootstrap=True).fit(X, y)
    counts = _bootstrap_counts(len(y), clf._tree_seeds[0])
    assert clf.tree_.n_node_samples[0] == len(y) == counts.sum()
    full = E2EDTClassifier(**FAST).fit(X, y)
    assert not np.array_equal(clf.tree_.weight_value, full.tree_.weight_value)
    assert clf.score(X, y) > 0.6


def test_bootstrap_of_zero_weight_rows_only_gives_a_prior_leaf(blobs):
    """A tree whose bootstrap draws no row of positive weight predicts the class prior."""
    X, y = blobs
    sw = np.zeros(len(y))
    sw[[0, 1]] = 1.0  # two rows of classes y[0], y[1]
    # a random_state whose first of 4 trees draws neither row (probability 0.37 ** 2 each)
    random_state = next(
        r for r in range(100) if not _bootstrap_counts(len(y), draw_seeds(r, 1)[0])[:2].any()
    )
    clf = E2EDTClassifier(**{**FAST, "random_state": random_state}, n_estimators=4, bootstrap=True)
    clf.fit(X, y, sample_weight=sw)
    prior = np.bincount(y[:2], minlength=3) / 2.0
    empty = [t for t, s in enumerate(clf._tree_seeds) if not _bootstrap_counts(len(y), s)[:2].any()]
    assert 0 in empty
    for t in empty:
        assert clf.trees_[t].node_count == 1
        np.testing.assert_allclose(clf.trees_[t].value[0], prior)
    assert np.all(np.isfinite(clf.predict_proba(X)))


def test_balanced_subsample_balances_each_bootstrap(blobs):
    from obliquetrees.e2edt.training import tree_weights
    from tests.e2edt._params import e2edt_params

    X, y = blobs
    y = np.where(np.arange(len(y)) < 40, 1, 0)  # 10 % positives
    params = e2edt_params(bootstrap=True, balanced_subsample=True)
    w = tree_weights(np.ones(len(y)), y, 2, params, 5)
    counts = _bootstrap_counts(len(y), 5)
    np.testing.assert_allclose(np.bincount(y, weights=w), counts.sum() / 2)  # balanced classes
    np.testing.assert_array_equal(w == 0, counts == 0)
    clf = E2EDTClassifier(**FAST, bootstrap=True, class_weight="balanced_subsample").fit(X, y)
    assert clf.tree_.n_node_samples[0] == pytest.approx(len(y))


def test_warm_start_equals_cold_fit(blobs):
    X, y = blobs
    kw = dict(FAST, bootstrap=True, max_features=4)
    warm = E2EDTClassifier(**kw, n_estimators=1, warm_start=True).fit(X, y)
    first = warm.tree_
    warm.set_params(n_estimators=3).fit(X, y)
    assert not hasattr(warm, "tree_")
    np.testing.assert_array_equal(warm.trees_[0].weight_value, first.weight_value)
    cold = E2EDTClassifier(**kw, n_estimators=3).fit(X, y)
    np.testing.assert_array_equal(warm.predict_proba(X), cold.predict_proba(X))
    for a, b in zip(warm.steepness_, cold.steepness_, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.warns(UserWarning, match="without increasing"):
        warm.fit(X, y)
    assert len(warm.trees_) == 3
    with pytest.raises(ValueError, match="n_estimators"):
        warm.set_params(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        warm.set_params(n_estimators=4).fit(X[:, :5], y)
    with pytest.raises(ValueError, match="same classes"):
        warm.fit(X, y % 2)
    assert len(warm.trees_) == 3 and warm.n_features_in_ == X.shape[1]


@pytest.mark.filterwarnings("ignore:.*drawn by every bootstrap")
@pytest.mark.parametrize("random_state", [0, None])
def test_oob_after_warm_start_uses_every_tree_bootstrap(blobs, random_state):
    """Old trees keep their seeds; trees fitted without bootstrap leave no row out."""
    X, y = blobs
    kw = {**FAST, "random_state": random_state, "warm_start": True}
    clf = E2EDTClassifier(**kw, n_estimators=2).fit(X, y)  # all rows
    clf.set_params(n_estimators=5, bootstrap=True, oob_score=True).fit(X, y)
    np.testing.assert_array_equal(clf._tree_bootstrap, [False, False, True, True, True])
    proba, votes, covered = _reference_oob(clf, X)
    assert 0 < covered.sum() < len(y)
    np.testing.assert_allclose(clf.oob_decision_function_, proba, rtol=1e-12)
    assert clf.oob_score_ == pytest.approx(np.mean(votes[covered] == y[covered]))
    if random_state is not None:  # the same trees as a forest grown in one fit
        cold = E2EDTClassifier(**{**kw, "warm_start": False, "n_estimators": 5}).fit(X, y)
        np.testing.assert_array_equal(cold.trees_[1].weight_value, clf.trees_[1].weight_value)


# ---------------------------------------------------- NaN, sparse and n_jobs
def test_new_options_with_nan_sparse_and_any_n_jobs(blobs):
    import scipy.sparse as sp

    X, y = blobs
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    kw = dict(
        FAST,
        n_estimators=4,
        bootstrap=True,
        oob_score=True,
        class_weight="balanced_subsample",
        max_features=4,
    )
    a = E2EDTClassifier(**kw, n_jobs=1).fit(X, y)
    b = E2EDTClassifier(**kw, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.oob_decision_function_, b.oob_decision_function_)
    assert a.oob_score_ == b.oob_score_ > 0.5
    assert np.all(np.isfinite(a.predict_proba(X)))
    # sparse input (zeros where X had NaN: sparse X has no NaN here), any n_jobs
    Xs = sp.csr_matrix(np.nan_to_num(X))
    c = E2EDTClassifier(**kw, n_jobs=1).fit(Xs, y)
    d = E2EDTClassifier(**kw, n_jobs=2).fit(Xs, y)
    np.testing.assert_array_equal(c.predict_proba(Xs), d.predict_proba(Xs))
    np.testing.assert_array_equal(c.oob_decision_function_, d.oob_decision_function_)
    dense = E2EDTClassifier(**kw).fit(np.nan_to_num(X), y)
    assert np.mean(c.predict(Xs) == dense.predict(np.nan_to_num(X))) > 0.95
    assert abs(c.oob_score_ - dense.oob_score_) < 0.05


def test_soft_probabilities_use_n_jobs_threads(blobs, monkeypatch):
    """predict_proba's soft evaluation runs on n_jobs numba threads (it ignored n_jobs)."""
    import numba

    from obliquetrees._core import soft

    X, y = blobs
    model = E2EDTClassifier(max_depth=3, max_epochs=2, random_state=0, n_jobs=1).fit(X, y)
    big = np.repeat(X, -(-3 * soft.SERIAL_PREDICT_ROWS // X.shape[0]), axis=0)
    seen = []
    parallel = soft.soft_predict_parallel

    def recording(*args):
        seen.append(numba.get_num_threads())
        return parallel(*args)

    monkeypatch.setattr(soft, "soft_predict_parallel", recording)
    one = model.predict_proba(big)
    two = model.set_params(n_jobs=2).predict_proba(big)
    assert seen == [1, min(2, numba.config.NUMBA_NUM_THREADS)]
    np.testing.assert_array_equal(one, two)
