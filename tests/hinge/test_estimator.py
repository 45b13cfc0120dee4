"""HingeForestClassifier / HingeForestRegressor at estimator level."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_iris, make_classification, make_regression
from sklearn.model_selection import train_test_split

from obliquetrees.hinge._estimator import HingeForestClassifier, HingeForestRegressor

SMALL = dict(
    n_estimators=8,
    max_depth=3,
    n_hinge_features=8,
    learning_rate=0.05,
    max_epochs=30,
    random_state=0,
)


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


@pytest.mark.parametrize("tree_type", ["tree", "fern"])
@pytest.mark.parametrize("head", ["sum", "linear"])
def test_classifier_learns_iris(iris, tree_type, head):
    X, y = iris
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    clf = HingeForestClassifier(tree_type=tree_type, head=head, **SMALL).fit(Xtr, ytr)
    assert clf.score(Xte, yte) >= 0.9
    proba = clf.predict_proba(Xte)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.all(np.isfinite(clf.decision_function(Xte)))
    assert 1 <= clf.best_epoch_ <= clf.n_iter_ <= SMALL["max_epochs"]
    assert len(clf.validation_loss_curve_) == clf.n_iter_
    for tree in clf.trees_:
        tree.check_invariants()


@pytest.mark.parametrize("optimizer", ["adam", "lazy_adam", "adagrad", "sgd"])
def test_optimizers_train(optimizer):
    X, y = make_classification(300, 6, n_informative=4, random_state=0)
    lr = {"sgd": 0.5, "adagrad": 0.2}.get(optimizer, 0.05)
    clf = HingeForestClassifier(optimizer=optimizer, **{**SMALL, "learning_rate": lr})
    clf.fit(X, y)
    assert clf.score(X, y) > 0.85
    assert clf.loss_curve_[-1] < clf.loss_curve_[0]


def test_labels_strings_and_predict_consistency(iris):
    X, y = iris
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = HingeForestClassifier(**SMALL).fit(X, names)
    np.testing.assert_array_equal(clf.classes_, np.unique(names))
    batch = clf.predict_proba(X)
    single = np.vstack([clf.predict_proba(X[i : i + 1]) for i in range(0, 150, 17)])
    np.testing.assert_allclose(batch[::17], single, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(clf.predict_proba(X.astype(np.float32)), batch, rtol=1e-5)


def test_regressor(rng):
    X, y = make_regression(400, 5, noise=1.0, random_state=0)
    y = y + 50.0
    for head in ("sum", "linear"):
        reg = HingeForestRegressor(head=head, **SMALL).fit(X, y)
        assert reg.score(X, y) > 0.8
        assert reg.predict(X).shape == (400,)
        for tree in reg.trees_:
            tree.check_invariants()


def test_same_seed_same_model_any_n_jobs(iris):
    X, y = iris
    a = HingeForestClassifier(n_jobs=1, **SMALL).fit(X, y)
    b = HingeForestClassifier(n_jobs=2, **SMALL).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.forest_.weight_value, b.forest_.weight_value)
    c = HingeForestClassifier(**{**SMALL, "random_state": 1}).fit(X, y)
    assert not np.array_equal(a.forest_.bias, c.forest_.bias)


def test_apply_and_decision_path_follow_hinge_routing(iris):
    from obliquetrees.hinge import _forward as HF

    X, y = iris
    clf = HingeForestClassifier(**SMALL).fit(X, y)
    leaves = clf.apply(X)
    assert leaves.shape == (150, SMALL["n_estimators"])
    model = clf._model
    leaf = np.empty((150, model.n_trees), np.int64)
    U = np.ascontiguousarray(HF.hinge_features(model, HF.standardise(model, X)))
    HF.tree_outputs(model, U, (leaf, np.empty(leaf.shape), np.empty(leaf.shape, np.int64)))
    np.testing.assert_array_equal(leaves, leaf + 2 ** SMALL["max_depth"] - 1)
    indicator, ptr = clf.decision_path(X)
    assert indicator.shape == (150, ptr[-1])
    np.testing.assert_array_equal(indicator.sum(axis=1).A1, SMALL["n_estimators"] * 4)
    # leaf counts are the training samples reaching each leaf
    tree = clf.trees_[0]
    assert tree.n_node_samples[0] == 150


def test_warm_start_and_partial_fit(iris):
    X, y = iris
    clf = HingeForestClassifier(**{**SMALL, "max_epochs": 3, "early_stopping": False})
    clf.fit(X, y)
    assert clf.n_iter_ == 3
    clf.set_params(warm_start=True)
    clf.fit(X, y)
    assert clf.n_iter_ == 6
    with pytest.raises(ValueError, match="same n_estimators"):
        clf.set_params(n_estimators=3).fit(X, y)

    pf = HingeForestClassifier(**SMALL)
    pf.partial_fit(X[y < 2], y[y < 2], classes=[0, 1, 2])
    np.testing.assert_array_equal(pf.classes_, [0, 1, 2])
    for _ in range(10):
        pf.partial_fit(X, y)
    assert pf.n_iter_ == 11
    assert pf.score(X, y) > 0.8
    with pytest.raises(ValueError, match="not seen"):
        pf.partial_fit(X[:5], np.full(5, 7))
    reg = HingeForestRegressor(**SMALL)
    for _ in range(3):
        reg.partial_fit(X[:, :3], X[:, 3])
    assert reg.n_iter_ == 3


def test_later_partial_fit_batches_are_validated_like_the_first(iris):
    X, y = iris
    clf = HingeForestClassifier(**SMALL).partial_fit(X, y)
    reg = HingeForestRegressor(**SMALL).partial_fit(X[:, :3], X[:, 3])
    bad_weights = [
        (-np.ones(150), "Negative"),
        (np.ones(3), "shape"),
        (np.full(150, np.nan), "NaN"),
        (np.zeros(150), "non-zero|all zero"),
    ]
    for weights, message in bad_weights:
        with pytest.raises(ValueError, match=message):
            clf.partial_fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="features"):
        clf.partial_fit(X[:, :2], y)
    X_inf = X.copy()
    X_inf[0, 0] = np.inf  # (NaN is a missing value, accepted)
    with pytest.raises(ValueError, match="infinity"):
        clf.partial_fit(X_inf, y)
    y_nan = X[:, 3].copy()
    y_nan[0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        reg.partial_fit(X[:, :3], y_nan)
    assert clf.n_iter_ == 1 and reg.n_iter_ == 1  # no rejected batch was trained on


def test_sample_weight_ones_equal_none(iris):
    X, y = iris
    a = HingeForestClassifier(**SMALL).fit(X, y)
    b = HingeForestClassifier(**SMALL).fit(X, y, sample_weight=np.ones(150))
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    w = np.where(y == 0, 5.0, 1.0)
    c = HingeForestClassifier(**SMALL).fit(X, y, sample_weight=w)
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))


def test_pickle_roundtrip(iris):
    X, y = iris
    clf = HingeForestClassifier(**SMALL).fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


def test_pickle_with_old_step_marks_loads_and_trains_on(iris):
    # models pickled before the backward pass's slot maps became per-batch
    # scratch keep per-leaf/decision step marks in opt_state: dropped on load
    X, y = iris
    params = {**SMALL, "warm_start": True}
    clf = HingeForestClassifier(**params).fit(X, y)
    model = clf._model
    M, L = model.W.shape[:2]
    NT = model.thr.shape[1]
    old = {"wmark": (M, L), "wslot": (M, L), "tmark": (M, NT), "tslot": (M, NT)}
    for name, shape in old.items():
        model.opt_state[name] = np.zeros(shape, dtype=np.int64)
    clone = pickle.loads(pickle.dumps(clf))
    assert not set(old) & set(clone._model.opt_state)
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))
    for name in old:
        del model.opt_state[name]
    clf.fit(X, y)  # warm start: both continue from the same state
    clone.fit(X, y)
    np.testing.assert_array_equal(clone.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_estimators": 0}, "n_estimators"),
        ({"max_depth": 0}, "max_depth"),
        ({"tree_type": "bush"}, "tree_type"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"head": "mean"}, "head"),
        ({"n_hinge_features": 0}, "n_hinge_features"),
        ({"n_hinge_features": "sqrt"}, "n_hinge_features"),
    ],
)
def test_bad_parameters(iris, params, match):
    X, y = iris
    with pytest.raises(ValueError, match=match):
        HingeForestClassifier(**params).fit(X, y)


def test_divergence_is_an_error_not_nan(iris):
    X, y = iris
    clf = HingeForestClassifier(**{**SMALL, "learning_rate": 1e200, "optimizer": "sgd"})
    with pytest.raises(ValueError, match="learning_rate"):
        clf.fit(X * 1e100, y)
    assert not hasattr(clf, "forest_")


def test_no_linear_layer(iris):
    X, y = iris
    clf = HingeForestClassifier(**{**SMALL, "n_hinge_features": None}).fit(X, y)
    assert clf.score(X, y) > 0.9
    assert clf._model.A.shape == (4, 4)
    np.testing.assert_array_equal(clf._model.A, np.eye(4))  # fixed identity


@pytest.mark.slow
def test_letter_uci_subset(shared_data):
    d = shared_data("letter_uci")
    X, y = d["X_train"][:4000], d["y_train"][:4000]
    clf = HingeForestClassifier(
        n_estimators=30, max_depth=6, max_epochs=8, early_stopping=False, random_state=0, n_jobs=2
    )
    clf.fit(X, y)
    err = 1 - clf.score(d["X_test"], d["y_test"])
    assert err < 0.25


def test_sparse_predict_input_and_importances(iris):
    import scipy.sparse as sp

    X, y = iris
    clf = HingeForestClassifier(**SMALL).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(sp.csr_matrix(X)), clf.predict_proba(X))
    imp = clf.feature_importances_
    assert imp.shape == (4,) and np.all(imp >= 0) and imp.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------- class_weight
def _rare_positives(n=3000, seed=0):
    """A 1 %-positive problem, split in half (stratified)."""
    X, y = make_classification(
        n, 8, n_informative=4, weights=[0.99], flip_y=0, class_sep=0.8, random_state=seed
    )
    return train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)


def test_class_weight_balanced_raises_minority_recall():
    """Means over five draws of the problem (each has only 20 test positives)."""
    from sklearn.metrics import balanced_accuracy_score, recall_score

    kw = dict(n_estimators=20, max_depth=4, n_hinge_features=16, learning_rate=0.02)
    recall, score = np.zeros(2), np.zeros(2)
    for seed in range(5):
        X_train, X_test, y_train, y_test = _rare_positives(4000, seed)
        for i, class_weight in enumerate([None, "balanced"]):
            clf = HingeForestClassifier(**kw, class_weight=class_weight, random_state=0)
            y_pred = clf.fit(X_train, y_train).predict(X_test)
            recall[i] += recall_score(y_test, y_pred) / 5
            score[i] += balanced_accuracy_score(y_test, y_pred) / 5
    assert recall[1] >= recall[0] + 0.2  # measured: 0.30 -> 0.68
    assert score[1] >= score[0] + 0.05  # measured: 0.650 -> 0.776


def test_class_weight_is_a_sample_weight_per_class(iris):
    X, y = iris
    weights = {0: 3.0, 2: 0.5}
    per_sample = np.array([3.0, 1.0, 0.5])[y]
    by_class = HingeForestClassifier(**SMALL, class_weight=weights).fit(X, y)
    by_sample = HingeForestClassifier(**SMALL).fit(X, y, sample_weight=per_sample)
    np.testing.assert_array_equal(by_class.predict_proba(X), by_sample.predict_proba(X))
    unit = HingeForestClassifier(**SMALL, class_weight={1: 1.0}).fit(X, y)
    plain = HingeForestClassifier(**SMALL).fit(X, y)
    np.testing.assert_array_equal(unit.predict_proba(X), plain.predict_proba(X))
    # partial_fit: the same weights batch by batch
    a = HingeForestClassifier(**SMALL, class_weight=weights)
    b = HingeForestClassifier(**SMALL)
    for _ in range(2):
        a.partial_fit(X, y, classes=[0, 1, 2])
        b.partial_fit(X, y, classes=[0, 1, 2], sample_weight=per_sample)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


@pytest.mark.parametrize(
    "class_weight, match",
    [
        ("balanced_subsample", "class_weight"),
        ({"setosa": 2.0}, "not a class"),
        ({0: -1.0}, "non-negative"),
        ({0: np.nan}, "finite"),
        ({0: 0, 1: 0, 2: 0}, "sum to zero"),
    ],
)
def test_bad_class_weight_is_a_clear_error(iris, class_weight, match):
    X, y = iris
    with pytest.raises(ValueError, match=match):
        HingeForestClassifier(**SMALL, class_weight=class_weight).fit(X, y)


def test_partial_fit_refuses_balanced_class_weight(iris):
    X, y = iris
    clf = HingeForestClassifier(**SMALL, class_weight="balanced")
    with pytest.raises(ValueError, match="not supported by partial_fit"):
        clf.partial_fit(X, y)
    assert not hasattr(clf, "forest_")
    clf.set_params(class_weight={0: 2.0}).partial_fit(X, y)
    with pytest.raises(ValueError, match="not supported by partial_fit"):
        clf.set_params(class_weight="balanced").partial_fit(X, y)
    assert clf.n_iter_ == 1


def test_class_weight_with_sparse_nan_and_n_jobs(iris):
    import scipy.sparse as sp

    X, y = iris
    kw = dict(SMALL, class_weight="balanced")
    y = (y == 2).astype(int)
    one = HingeForestClassifier(n_jobs=1, **kw).fit(X, y)
    two = HingeForestClassifier(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(one.predict_proba(X), two.predict_proba(X))
    sparse = HingeForestClassifier(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.predict_proba(X), one.predict_proba(X), atol=1e-6)
    X_nan = X.copy()
    X_nan[::7, 2] = np.nan
    assert HingeForestClassifier(**kw).fit(X_nan, y).score(X_nan, y) > 0.85


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_unknown_keyword_names_the_public_class(cls):
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.__init__\(\)"):
        cls(n_trees=3)
    if cls is HingeForestRegressor:  # class weights are for classifiers
        with pytest.raises(TypeError, match="class_weight"):
            cls(class_weight="balanced")


def test_no_oob_score_and_warm_start_adds_epochs_not_trees(iris):
    """The forest does not bag (no out-of-bag rows); warm_start trains the same trees longer."""
    X, y = iris
    assert "oob_score" not in HingeForestClassifier().get_params()
    clf = HingeForestClassifier(**{**SMALL, "max_epochs": 2, "early_stopping": False})
    clf.fit(X, y)
    clf.set_params(warm_start=True).fit(X, y)
    assert clf.n_iter_ == 4 and len(clf.trees_) == SMALL["n_estimators"]
    with pytest.raises(ValueError, match="same n_estimators"):
        clf.set_params(n_estimators=SMALL["n_estimators"] + 2).fit(X, y)


@pytest.mark.parametrize("patience", [1, 3])
def test_early_stopping_stops_patience_epochs_after_the_best_and_keeps_it(patience):
    """Stops ``n_iter_no_change`` epochs after the lowest validation loss, whose model it keeps.

    A small, noisy training set overfits within a few epochs (best epoch 2
    here); the fit must neither run on to ``max_epochs`` nor stop before the
    patience is used up, and a longer patience follows the same path (training
    does not depend on the patience) and, having the same best epoch, restores
    the same model.
    """
    X, y = make_classification(300, 10, n_informative=3, n_classes=3, flip_y=0.3, random_state=0)
    params = {**SMALL, "n_estimators": 20, "max_depth": 5, "max_epochs": 60}
    clf = HingeForestClassifier(n_iter_no_change=patience, **params).fit(X, y)
    val = np.asarray(clf.validation_loss_curve_)
    best = clf.best_epoch_
    assert clf.n_iter_ < params["max_epochs"]  # stopped early
    assert clf.n_iter_ == best + patience
    assert val[best - 1] == val.min() and np.all(val[: best - 1] > val.min())
    assert np.all(val[best:] >= val[best - 1])
    # same path, longer patience: the same best epoch, the same restored model
    longer = HingeForestClassifier(n_iter_no_change=patience + 2, **params).fit(X, y)
    np.testing.assert_array_equal(
        longer.validation_loss_curve_[: clf.n_iter_], clf.validation_loss_curve_
    )
    assert longer.best_epoch_ == best and longer.n_iter_ == best + patience + 2
    np.testing.assert_array_equal(longer.predict_proba(X), clf.predict_proba(X))


def test_default_patience_is_short():
    """The default patience (5) stops near the best epoch (issue 17)."""
    for cls in (HingeForestClassifier, HingeForestRegressor):
        assert cls().n_iter_no_change == 5


# -------------------------------------------------------- n_hinge_features="auto"
AUTO = {k: v for k, v in SMALL.items() if k != "n_hinge_features"}


def _diagonal_classes():
    """Labels of a hyperplane across all 10 inputs: learnt inner products find it."""
    X = np.random.default_rng(0).normal(size=(400, 10))
    return X, (X.sum(axis=1) > 0).astype(int)


def _fitted_fields(model):
    return (
        model.n_hinge_features_,
        model.n_iter_,
        model.best_epoch_,
        model.loss_curve_,
        model.validation_loss_curve_,
    )


@pytest.mark.parametrize("data", ["iris", "diagonal"])
@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_auto_keeps_the_forest_of_lower_validation_loss(iris, data, cls):
    X, y = iris if data == "iris" else _diagonal_classes()
    auto = cls(n_hinge_features="auto", **AUTO).fit(X, y)
    learnt = cls(n_hinge_features=100, **AUTO).fit(X, y)
    raw = cls(n_hinge_features=None, **AUTO).fit(X, y)
    losses = [min(m.validation_loss_curve_) for m in (learnt, raw)]
    kept = raw if losses[1] < losses[0] else learnt
    assert auto.n_hinge_features_ == (None if kept is raw else 100)
    assert _fitted_fields(auto) == _fitted_fields(kept)
    np.testing.assert_array_equal(auto.predict(X), kept.predict(X))
    if cls is HingeForestClassifier:
        np.testing.assert_array_equal(auto.predict_proba(X), kept.predict_proba(X))


def test_auto_chooses_both_ways():
    """The two data sets of the test above exercise both branches."""
    X, y = load_iris(return_X_y=True)
    assert (
        HingeForestClassifier(n_hinge_features="auto", **AUTO).fit(X, y).n_hinge_features_ is None
    )
    X, y = _diagonal_classes()
    assert HingeForestClassifier(n_hinge_features="auto", **AUTO).fit(X, y).n_hinge_features_ == 100


def test_auto_without_validation_rows_keeps_the_learnt_features(iris):
    X, y = iris
    params = {**AUTO, "early_stopping": False, "max_epochs": 3}
    auto = HingeForestClassifier(n_hinge_features="auto", **params).fit(X, y)
    learnt = HingeForestClassifier(n_hinge_features=100, **params).fit(X, y)
    assert auto.n_hinge_features_ == 100
    np.testing.assert_array_equal(auto.predict_proba(X), learnt.predict_proba(X))


def test_auto_warm_start_continues_the_kept_forest(iris):
    X, y = iris
    auto = HingeForestClassifier(n_hinge_features="auto", **AUTO).fit(X, y)
    kept = HingeForestClassifier(n_hinge_features=auto.n_hinge_features_, **AUTO).fit(X, y)
    for model in (auto, kept):
        model.set_params(warm_start=True, max_epochs=2).fit(X, y)
    assert _fitted_fields(auto) == _fitted_fields(kept)
    np.testing.assert_array_equal(auto.predict_proba(X), kept.predict_proba(X))
    other = 100 if auto.n_hinge_features_ is None else None
    with pytest.raises(ValueError, match="n_hinge_features"):
        auto.set_params(n_hinge_features=other).fit(X, y)


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_auto_partial_fit_trains_the_learnt_features(iris, cls):
    """partial_fit holds out no rows to choose on: as fit without them, the learnt features."""
    X, y = iris
    auto = cls(n_hinge_features="auto", **AUTO).partial_fit(X, y)
    learnt = cls(n_hinge_features=100, **AUTO).partial_fit(X, y)
    assert auto.n_hinge_features_ == 100
    np.testing.assert_array_equal(auto.predict(X), learnt.predict(X))


def test_auto_size_check_counts_both_forests(iris, monkeypatch):
    """The learnt forest is held while the raw one trains: twice one forest is projected."""
    import obliquetrees.hinge._size as size_module

    X, y = iris
    model = HingeForestClassifier(n_hinge_features="auto", **AUTO)
    one = model._projected_bytes(X.shape[1], 3) + model._scratch_bytes(3)
    monkeypatch.setattr(size_module, "MAX_MODEL_BYTES", 2 * one - 1)
    with pytest.raises(ValueError, match=f"{2 * one} bytes"):
        model.fit(X, y)
    assert not hasattr(model, "n_features_in_")
    # one forest is under the limit
    model.set_params(n_hinge_features=100, feature_screening=False).fit(X, y)


def test_auto_trains_no_raw_forest_above_100_inputs(monkeypatch):
    """The raw forest's layer is an identity of one row per input: wide data train learnt only."""
    import obliquetrees.hinge._estimator as estimator

    trained = []
    run = estimator._BaseHingeForest._run
    monkeypatch.setattr(
        estimator._BaseHingeForest,
        "_run",
        lambda self, *args, **kw: trained.append(args[4]) or run(self, *args, **kw),
    )
    rng = np.random.default_rng(0)
    for p, expected in [(100, [100, None]), (101, [100])]:
        trained.clear()
        X = rng.normal(size=(120, p))
        model = HingeForestClassifier(n_hinge_features="auto", feature_screening=False, **AUTO)
        model.fit(X, (X[:, 0] > 0).astype(int))
        assert trained == expected
