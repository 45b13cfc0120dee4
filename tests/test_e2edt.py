"""E2EDTClassifier at the estimator level."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification
from sklearn.tree import DecisionTreeClassifier

from obliquetrees._e2edt import E2EDTClassifier

FAST = dict(max_depth=3, max_epochs=5, learning_rate=0.02, random_state=0)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    return X * np.arange(1, 9) * 10 + 5, y  # badly scaled on purpose


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


def test_finetune_improves_training_fit(blobs):
    X, y = blobs
    greedy = E2EDTClassifier(**{**FAST, "finetune_epochs": 0}).fit(X, y)
    tuned = E2EDTClassifier(**{**FAST, "finetune_epochs": 30}).fit(X, y)
    # same greedy structure (same seed), finetuned parameters
    np.testing.assert_array_equal(greedy.tree_.children_left, tuned.tree_.children_left)
    assert tuned.score(X, y) >= greedy.score(X, y)


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
    hard = E2EDTClassifier(**FAST).fit(X, y)
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
    from obliquetrees._training.e2edt import _fit_one_tree
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
    ],
)
def test_bad_parameters_name_the_parameter(params, match):
    X, y = load_iris(return_X_y=True)
    X = np.hstack([X, X])
    with pytest.raises(ValueError, match=match):
        E2EDTClassifier(**params).fit(X, y)


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


@pytest.mark.parametrize("routing", ["hard", "soft"])
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
    """E2EDT uses base.resolve_max_features (CO2's rule): for valid values, E2EDT's old rule."""
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
