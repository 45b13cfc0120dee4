"""SoftTreeRegressor / SoftTreeClassifier: estimator-level behaviour."""

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris, make_friedman1

from obliquetrees.soft._estimator import SoftTreeClassifier, SoftTreeRegressor
from tests import reference as ref

FAST = dict(n_restarts=4, max_epochs=5, random_state=0)


@pytest.fixture(scope="module")
def friedman():
    return make_friedman1(n_samples=500, noise=0.3, random_state=0)


@pytest.fixture(scope="module")
def fitted_regressor(friedman):
    X, y = friedman
    return SoftTreeRegressor(**FAST).fit(X, y)


def test_regressor_fits_and_stores_a_valid_tree(friedman, fitted_regressor):
    X, y = friedman
    reg = fitted_regressor
    reg.tree_.check_invariants()
    assert reg.tree_.node_count >= 3
    assert reg.score(X, y) > 0.6
    assert len(reg.growth_log_) >= 1
    assert reg.tree_.n_node_samples[0] == pytest.approx(250)  # soft membership of the root


def test_soft_prediction_is_the_reference_soft_tree(friedman, fitted_regressor):
    X, _ = friedman
    reg = fitted_regressor
    want = ref.soft_predict_stored(reg.tree_, X[:100], reg.tree_.value)[:, 0]
    np.testing.assert_allclose(reg.predict(X[:100]), want, rtol=1e-10)
    np.testing.assert_allclose(reg.predict(X[:100].astype(np.float32)), want, rtol=1e-5)


def test_hard_routing_uses_the_reached_leaf(friedman, fitted_regressor):
    X, _ = friedman
    reg = pickle.loads(pickle.dumps(fitted_regressor)).set_params(routing="hard")
    leaves = reg.apply(X)
    np.testing.assert_array_equal(reg.predict(X), reg.tree_.value[leaves, 0])


def test_same_seed_same_tree_and_scale_invariance(friedman):
    X, y = friedman
    a = SoftTreeRegressor(**FAST).fit(X, y)
    b = SoftTreeRegressor(**FAST).fit(X, y)
    np.testing.assert_array_equal(a.tree_.weight_value, b.tree_.weight_value)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    # standardisation inside: rescaled inputs and target give the same model
    c = SoftTreeRegressor(**FAST).fit(X * 1000.0 + 5.0, y * 10.0 - 3.0)
    assert c.tree_.node_count == a.tree_.node_count
    np.testing.assert_allclose(
        c.predict(X * 1000.0 + 5.0), a.predict(X) * 10.0 - 3.0, rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("cls", [SoftTreeRegressor, SoftTreeClassifier])
def test_same_model_for_n_jobs_1_and_2(cls, friedman):
    X, y = friedman
    if cls is SoftTreeClassifier:
        y = np.digitize(y, np.quantile(y, [0.3, 0.6]))  # three classes
    kw = dict(FAST, max_leaf_nodes=4, finetune_epochs=2)
    one = cls(n_jobs=1, **kw).fit(X, y)
    two = cls(n_jobs=2, **kw).fit(X, y)
    assert pickle.dumps(one.tree_) == pickle.dumps(two.tree_)
    assert one.growth_log_ == two.growth_log_ and one.finetune_info_ == two.finetune_info_
    X_big = np.tile(X, (6, 1))  # beyond the serial cut-off of soft prediction
    predict = one.predict_proba if cls is SoftTreeClassifier else one.predict
    with_two = two.predict_proba if cls is SoftTreeClassifier else two.predict
    assert np.array_equal(predict(X_big), with_two(X_big))


def test_limits_and_finetune(friedman):
    X, y = friedman
    reg = SoftTreeRegressor(max_depth=1, **FAST).fit(X, y)
    assert reg.tree_.node_count <= 3
    reg = SoftTreeRegressor(max_leaf_nodes=2, **FAST).fit(X, y)
    assert reg.tree_.n_leaves <= 2
    ft = SoftTreeRegressor(max_leaf_nodes=3, finetune_epochs=3, **FAST).fit(X, y)
    info = ft.finetune_info_
    assert info["error_after"] <= info["error_before"]
    assert np.all(np.isfinite(ft.predict(X)))


def test_binary_classifier(rng):
    X, y = load_breast_cancer(return_X_y=True)
    clf = SoftTreeClassifier(**FAST).fit(X, y)
    clf.tree_.check_invariants()
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), 2)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert clf.score(X, y) > 0.9
    # soft output = sigmoid of the gate-weighted sum of the leaf logits
    logits = np.log(clf.tree_.value[:, 1]) - np.log(clf.tree_.value[:, 0])
    s = ref.soft_predict_stored(clf.tree_, X[:50], logits[:, None])[:, 0]
    np.testing.assert_allclose(proba[:50, 1], 1 / (1 + np.exp(-s)), rtol=1e-9)
    # labels are returned in their original type
    clf2 = SoftTreeClassifier(**FAST).fit(X, np.where(y == 1, "yes", "no"))
    assert set(clf2.predict(X[:20])) <= {"yes", "no"}


def test_multiclass_classifier():
    X, y = load_iris(return_X_y=True)
    clf = SoftTreeClassifier(**FAST).fit(X, y)
    assert clf.predict_proba(X).shape == (150, 3)
    assert clf.score(X, y) > 0.9
    hard = SoftTreeClassifier(routing="hard", **FAST).fit(X, y)
    np.testing.assert_allclose(hard.predict_proba(X), hard.tree_.value[hard.apply(X)])


def test_single_class_and_tiny_data():
    X = np.arange(12.0).reshape(6, 2)
    clf = SoftTreeClassifier(**FAST).fit(X, ["a"] * 6)
    assert clf.predict(X).tolist() == ["a"] * 6
    reg = SoftTreeRegressor(**FAST).fit(X[:1], [3.0])
    assert reg.predict(X[:2]).tolist() == [3.0, 3.0]
    reg = SoftTreeRegressor(**FAST).fit(X, np.full(6, 2.0))
    assert np.allclose(reg.predict(X), 2.0)


def test_sample_weight_and_saturating_inputs(rng):
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    X[:, 2] *= 1e8  # huge feature: saturated gates must not produce NaN
    sw = rng.random(300)
    clf = SoftTreeClassifier(**FAST).fit(X, y, sample_weight=sw)
    assert np.all(np.isfinite(clf.predict_proba(X * 1e3)))
    # zero weights: those samples must not matter for the validation split sizes etc.
    sw[:100] = 0
    clf = SoftTreeClassifier(**FAST).fit(X, y, sample_weight=sw)
    assert clf.score(X[100:], y[100:]) > 0.8


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(max_depth=0), "max_depth"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(validation_fraction=1.0), "validation_fraction"),
        (dict(routing="fuzzy"), "routing"),
        (dict(batch_size=0), "batch_size"),
        (dict(tol=-1.0), "tol"),
        (dict(restart_selection="best"), "restart_selection"),
        (dict(n_jobs=1.5), "n_jobs"),
    ],
)
def test_bad_parameters_name_the_parameter(params, match):
    with pytest.raises(ValueError, match=match):
        SoftTreeRegressor(**params).fit(np.zeros((4, 2)), np.arange(4.0))


@pytest.mark.slow
def test_concrete_beats_the_paper_protocol_threshold(shared_data):
    data = shared_data("concrete")
    X, y = data["X"].astype(float), data["y"]
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    test, rest = perm[: len(y) // 3], perm[len(y) // 3 :]
    reg = SoftTreeRegressor(random_state=0).fit(X[rest], y[rest])
    mse = np.mean((reg.predict(X[test]) - y[test]) ** 2) / y[rest].var()
    assert mse < 0.264 * 1.1  # the paper's Table 1 soft MSE (+10 %)


def test_verbose_prints_one_line_per_split_attempt(capsys):
    X, y = make_friedman1(n_samples=200, random_state=1)
    reg = SoftTreeRegressor(verbose=1, max_depth=2, **FAST).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if "[SoftTree]" in line]
    assert len(lines) == len(reg.growth_log_) >= 1


# ---------------------------------------------------------------- class_weight
def _rare_positives(n=3000, seed=0):
    """A 1 %-positive problem, split in half (stratified)."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(
        n, 8, n_informative=4, weights=[0.99], flip_y=0, class_sep=0.8, random_state=seed
    )
    return train_test_split(X, y, test_size=0.5, stratify=y, random_state=seed)


def test_class_weight_balanced_raises_minority_recall():
    from sklearn.metrics import balanced_accuracy_score, recall_score

    X_train, X_test, y_train, y_test = _rare_positives()
    plain = SoftTreeClassifier(**FAST).fit(X_train, y_train)
    balanced = SoftTreeClassifier(**FAST, class_weight="balanced").fit(X_train, y_train)
    recall = [recall_score(y_test, m.predict(X_test)) for m in (plain, balanced)]
    score = [balanced_accuracy_score(y_test, m.predict(X_test)) for m in (plain, balanced)]
    assert recall[1] >= recall[0] + 0.2  # measured: 0.0 -> 0.6 (15 test positives)
    assert score[1] >= score[0] + 0.1  # measured: 0.500 -> 0.719


def test_class_weight_is_a_sample_weight_per_class():
    X, y = load_iris(return_X_y=True)
    weights = {0: 3.0, 2: 0.5}
    by_class = SoftTreeClassifier(**FAST, class_weight=weights).fit(X, y)
    by_sample = SoftTreeClassifier(**FAST).fit(X, y, sample_weight=np.array([3.0, 1.0, 0.5])[y])
    np.testing.assert_array_equal(by_class.predict_proba(X), by_sample.predict_proba(X))
    sw = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    both = SoftTreeClassifier(**FAST, class_weight=weights).fit(X, y, sample_weight=sw)
    product = SoftTreeClassifier(**FAST).fit(X, y, sample_weight=sw * np.array([3.0, 1.0, 0.5])[y])
    np.testing.assert_array_equal(both.predict_proba(X), product.predict_proba(X))
    unit = SoftTreeClassifier(**FAST, class_weight={0: 1.0}).fit(X, y)
    plain = SoftTreeClassifier(**FAST).fit(X, y)
    np.testing.assert_array_equal(unit.predict_proba(X), plain.predict_proba(X))


@pytest.mark.parametrize(
    "class_weight, match",
    [
        ("balanced_subsample", "class_weight"),
        ({"setosa": 2.0}, "not a class"),
        ({0: -1.0}, "non-negative"),
        ({0: np.inf}, "finite"),
        ({0: 0, 1: 0, 2: 0}, "sum to zero"),
    ],
)
def test_bad_class_weight_is_a_clear_error(class_weight, match):
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match=match):
        SoftTreeClassifier(**FAST, class_weight=class_weight).fit(X, y)


def test_class_weight_with_sparse_nan_and_n_jobs():
    import scipy.sparse as sp

    X, y = load_iris(return_X_y=True)
    kw = dict(FAST, class_weight="balanced", max_leaf_nodes=4)
    y = (y == 2).astype(int)  # one third positive: "balanced" weighs 1.5 and 0.75
    one = SoftTreeClassifier(n_jobs=1, **kw).fit(X, y)
    two = SoftTreeClassifier(n_jobs=2, **kw).fit(X, y)
    assert pickle.dumps(one.tree_) == pickle.dumps(two.tree_)
    sparse = SoftTreeClassifier(**kw).fit(sp.csr_matrix(X), y)
    assert np.mean(sparse.predict(X) == one.predict(X)) > 0.9
    X_nan = X.copy()
    X_nan[::7, 2] = np.nan
    assert SoftTreeClassifier(**kw).fit(X_nan, y).score(X_nan, y) > 0.85


@pytest.mark.parametrize("cls", [SoftTreeClassifier, SoftTreeRegressor])
def test_unknown_keyword_names_the_public_class(cls):
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.__init__\(\)"):
        cls(class_wieght="balanced")
    if cls is SoftTreeRegressor:  # class weights are for classifiers
        with pytest.raises(TypeError, match="class_weight"):
            cls(class_weight="balanced")
