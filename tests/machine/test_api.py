"""obliquetrees.machine: matrix form vs traversal, the relaxation's limit, fine-tuning."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier

from obliquetrees import HingeForestClassifier
from obliquetrees._core import traversal
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.tree import ObliqueTree
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import (
    DecisionMachine,
    FinetunedForestClassifier,
    FinetunedForestRegressor,
    choose_inference_path,
    finetune,
    predict_value,
    refit_leaves,
    to_machine,
)
from tests.reference import random_tree


def _rounding_safe_rows(dm, X, rel=1e-9):
    """Rows none of whose split margins is within rounding of 0."""
    X = np.asarray(X, dtype=np.float64)
    A = dm.margins(X)
    absS = abs(dm.S) if sp.issparse(dm.S) else np.abs(dm.S)
    scale = np.asarray(np.abs(X) @ absS.T) + np.abs(dm.bias)
    return np.all(np.abs(A) > rel * (scale + 1e-300), axis=1)


def _classification(n=400, p=6, k=3, seed=0):
    X, y = make_classification(n, p, n_informative=4, n_redundant=0, n_classes=k, random_state=seed)
    return X, y


# ------------------------------------------------------------ hard form
@pytest.mark.parametrize("seed", range(6))
def test_matrix_form_reaches_traversal_leaf_on_random_oblique_forests(seed):
    rng = np.random.default_rng(seed)
    depth = [2, 4, 6, 8, 10, 12][seed]
    trees = [random_tree(rng, 7, 2, max_depth=depth, split_prob=0.9) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    for t in trees:
        t.check_invariants()
    X = rng.normal(size=(500, 7))
    dm = to_machine(forest, cache=False)
    safe = _rounding_safe_rows(dm, X)
    assert safe.mean() > 0.99
    leaves = dm.apply(X)
    np.testing.assert_array_equal(leaves[safe], traversal.apply(forest, X)[safe])
    # the paper's logical similarity: exactly 1 at the reached leaf, < 1 elsewhere
    scores = dm.leaf_scores(X[:50])
    for k in range(dm.n_trees):
        block = scores[:, dm.leaf_offset[k] : dm.leaf_offset[k + 1]]
        if block.shape[1] == 1:  # a lone leaf has no template entries (score 0)
            continue
        # (1/d) summed d times is 1 up to rounding; the kernels compare integers instead
        np.testing.assert_allclose(block.max(axis=1), 1.0, rtol=1e-12)
        assert np.all((block > 1.0 - 1e-9).sum(axis=1) == 1)
        chosen = dm.leaf_node[dm.leaf_offset[k] + block.argmax(axis=1)]
        np.testing.assert_array_equal(chosen[safe[:50]], leaves[:50, k][safe[:50]])
    np.testing.assert_allclose(
        dm.predict_value(X)[safe], traversal.predict_value(forest, X)[safe], rtol=1e-12
    )


def test_ties_go_left_like_traversal():
    """Integer data and weights: margins are exact (often exactly 0) in any summation order."""
    rng = np.random.default_rng(1)
    trees = []
    for _ in range(3):
        t = random_tree(rng, 5, 1, max_depth=5, split_prob=0.9)
        t.weight_value = np.round(t.weight_value * 2)
        t.weight_value[t.weight_value == 0] = 1.0
        t.bias = np.where(t.is_leaf, 0.0, np.round(t.bias * 2))
        trees.append(t)
    forest = ObliqueForest.from_trees(trees)
    X = rng.integers(-2, 3, size=(400, 5)).astype(np.float64)
    dm = to_machine(forest, cache=False)
    assert np.any(dm.margins(X) == 0)  # the test exercises ties
    np.testing.assert_array_equal(dm.apply(X), traversal.apply(forest, X))


@pytest.mark.parametrize(
    "Model", [RandomForestClassifier, ExtraTreesClassifier, DecisionTreeClassifier]
)
def test_converted_sklearn_models_route_bit_for_bit(Model):
    X, y = _classification(600, 8, 3)
    kw = {"n_estimators": 7} if Model is not DecisionTreeClassifier else {}
    model = Model(max_depth=7, random_state=0, **kw).fit(X, y)
    conv = from_sklearn(model)
    X32 = X.astype(np.float32)
    for source in (model, conv):
        dm = to_machine(source)
        expected = model.apply(X32)
        expected = expected[:, None] if expected.ndim == 1 else expected
        np.testing.assert_array_equal(dm.apply(X32), expected)
        np.testing.assert_allclose(
            dm.predict_value(X32) / dm.n_trees, model.predict_proba(X32), atol=1e-12
        )
    assert sp.issparse(to_machine(conv).S)  # one weight per split: CSR is smaller
    # CSR rows against the CSR S: the sparse-sparse product gives the same leaves
    np.testing.assert_array_equal(to_machine(conv).apply(sp.csr_matrix(X32)), expected)


def test_single_tree_estimators_reuse_their_machine():
    from obliquetrees import SoftTreeClassifier

    X, y = _classification(200, 5, 2)
    est = SoftTreeClassifier(max_depth=3, max_epochs=2, n_restarts=1, random_state=0).fit(X, y)
    assert to_machine(est) is to_machine(est)  # kept on the estimator's packed forest


def test_package_estimators_route_like_traversal(rng):
    from obliquetrees import E2EDTClassifier

    X, y = _classification(300, 5, 3)
    # routing="hard": predict_proba is then the reached leaves' mean, as the machine's
    est = E2EDTClassifier(
        max_depth=3, max_epochs=2, finetune_epochs=1, routing="hard", random_state=0
    ).fit(X, y)
    dm = to_machine(est)
    safe = _rounding_safe_rows(dm, X)
    np.testing.assert_array_equal(dm.apply(X)[safe], traversal.apply(est._forest(), X)[safe])
    proba = dm.predict_value(X) / dm.n_trees
    np.testing.assert_allclose(proba[safe], est.predict_proba(X)[safe], atol=1e-12)


def test_inputs_threads_csr_and_single_leaf_trees(rng):
    leaf = ObliqueTree([-1], [-1], [0, 0], [], [], [0.0], [[0.25, 0.75]], [5.0], n_features=4)
    trees = [random_tree(rng, 4, 2, max_depth=4) for _ in range(2)] + [leaf]
    forest = ObliqueForest.from_trees(trees)
    X = rng.normal(size=(1000, 4))
    dm = to_machine(forest)
    assert to_machine(forest) is dm  # cached per forest object
    assert forest.__getstate__()["_derived"] == {}  # and never pickled
    assert to_machine(trees).n_trees == 3 and to_machine(trees[0]).n_trees == 1
    ref = dm.apply(X, n_threads=1)
    np.testing.assert_array_equal(dm.apply(X, n_threads=2), ref)
    np.testing.assert_array_equal(dm.apply(sp.csr_matrix(X)), ref)
    np.testing.assert_array_equal(dm.apply(X.astype(np.float32)), dm.apply(X.astype(np.float32)))
    assert np.all(ref[:, 2] == 0)
    np.testing.assert_array_equal(predict_value(forest, X, 2), dm.predict_value(X, 1))
    # a single-leaf tree contributes its value in the relaxation too
    W = dm.relaxed_weights(X[:5], temperature=0.5, eps=1.0)
    np.testing.assert_allclose(W[:, -1], 1.0)
    assert dm.nbytes() > 0 and "DecisionMachine" in repr(dm)
    with pytest.raises(TypeError, match="Expected a fitted"):
        to_machine("not a model")


def test_block_boundaries_do_not_change_results(rng, monkeypatch):
    import obliquetrees._core.machine as M

    forest = ObliqueForest.from_trees([random_tree(rng, 3, 1, max_depth=5) for _ in range(2)])
    X = rng.normal(size=(700, 3))
    dm = to_machine(forest, cache=False)
    ref = dm.predict_value(X)
    monkeypatch.setattr(M, "BLOCK_ELEMENTS", 100)
    np.testing.assert_array_equal(dm.predict_value(X), ref)


# ------------------------------------------------------------ relaxation
@pytest.mark.parametrize("seed", range(4))
def test_relaxation_selects_hard_leaf_when_margins_exceed_eps(seed):
    rng = np.random.default_rng(seed)
    forest = ObliqueForest.from_trees(
        [random_tree(rng, 5, 3, max_depth=[3, 4, 6, 7][seed]) for _ in range(3)]
    )
    dm = to_machine(forest, cache=False)
    X = rng.normal(size=(2000, 5))
    eps = 0.003
    ok = np.all(np.abs(dm.margins(X)) >= eps, axis=1)
    assert ok.sum() > 30
    hard = dm.apply(X)
    for temperature in (1.0, 0.1, 0.01):
        W = dm.relaxed_weights(X, temperature=temperature, eps=eps, sigma="saturated")
        for k in range(dm.n_trees):
            block = W[:, dm.leaf_offset[k] : dm.leaf_offset[k + 1]]
            chosen = dm.leaf_node[dm.leaf_offset[k] + block.argmax(axis=1)]
            np.testing.assert_array_equal(chosen[ok], hard[ok, k])
    # temperature -> 0: the relaxed output becomes the hard output
    soft = dm.relaxed_value(X, temperature=1e-3, eps=eps, sigma="saturated")
    np.testing.assert_allclose(soft[ok], dm.predict_value(X)[ok], atol=1e-12)
    # tanh(z / eps') with eps' << margins: same limit
    soft = dm.relaxed_value(X, temperature=1e-3, eps=1e-4, sigma="tanh")
    np.testing.assert_allclose(soft[ok], dm.predict_value(X)[ok], atol=1e-9)
    with pytest.raises(ValueError, match="sigma"):
        dm.relaxed_weights(X, sigma="relu")


# ------------------------------------------------------------ inference path
def test_choose_inference_path_rule(rng):
    X, y = _classification(300, 6, 3)
    conv = from_sklearn(
        RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0).fit(X, y)
    )
    forest = conv._forest()
    assert choose_inference_path(forest, 10) == "traversal"
    assert choose_inference_path(forest, 10_000, sparse_input=True) == "traversal"
    assert choose_inference_path(forest, 10_000) in ("blas", "traversal")
    # axis-aligned deep forests: traversal; shallow dense oblique trees on many features: BLAS
    deep = ObliqueForest.from_trees(
        [random_tree(rng, 10, 2, max_depth=12, density=0.1, split_prob=1.0) for _ in range(2)]
    )
    assert choose_inference_path(deep, 10_000) == "traversal"
    wide = ObliqueForest.from_trees(
        [random_tree(rng, 400, 2, max_depth=3, density=1.0, split_prob=1.0) for _ in range(20)]
    )
    assert choose_inference_path(wide, 10_000) == "blas"


# ------------------------------------------------------------ finetune
@pytest.fixture(scope="module")
def rf_problem():
    X, y = make_classification(
        900, 8, n_informative=6, n_redundant=0, n_classes=3, class_sep=0.8, random_state=1
    )
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:], y[600:]
    rf = RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(Xtr, ytr)
    return rf, Xtr, ytr, Xte, yte


def _same_structure(a, b):
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_array_equal(ta.children_left, tb.children_left)
        np.testing.assert_array_equal(ta.children_right, tb.children_right)


def test_finetune_keeps_structure_is_deterministic_and_improves_training_fit(rf_problem):
    rf, Xtr, ytr, Xte, yte = rf_problem
    conv = from_sklearn(rf)
    ft = finetune(conv, Xtr, ytr, epochs=8, random_state=0)
    assert isinstance(ft, FinetunedForestClassifier)
    _same_structure(ft, conv)
    for t in ft.trees_:
        t.check_invariants()
    loss = ft.history_["loss"]
    assert loss[-1] < loss[0]

    # the hard model's training log-loss drops below the source's and the leaf-only refit's
    def nll(model):
        proba = model.predict_proba(Xtr)[np.arange(len(ytr)), np.searchsorted(model.classes_, ytr)]
        return -np.mean(np.log(np.maximum(proba, 1e-6)))

    assert nll(ft) < nll(refit_leaves(conv, Xtr, ytr)) < nll(conv)
    # support="original": axis-aligned splits stay axis-aligned (one weight each)
    assert ft.history_["weight_density"] == 1.0
    for ta, tb in zip(ft.trees_, conv.trees_, strict=True):
        np.testing.assert_array_equal(ta.weight_index, tb.weight_index)
    again = finetune(rf, Xtr, ytr, epochs=8, random_state=0, n_jobs=2)  # sklearn input, 2 threads
    for ta, tb in zip(ft.trees_, again.trees_, strict=True):
        np.testing.assert_array_equal(ta.weight_value, tb.weight_value)
        np.testing.assert_array_equal(ta.bias, tb.bias)
        np.testing.assert_array_equal(ta.value, tb.value)
    np.testing.assert_array_equal(ft.predict(Xte), again.predict(Xte))
    assert set(np.unique(ft.predict(Xte))) <= set(rf.classes_)
    proba = ft.predict_proba(Xte)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_finetune_dense_and_k_support(rf_problem):
    rf, Xtr, ytr, _, _ = rf_problem
    dense = finetune(rf, Xtr, ytr, epochs=2, support="dense", sigma="saturated", eps=0.5)
    assert dense.history_["weight_density"] > 1.0
    k2 = finetune(rf, Xtr, ytr, epochs=2, support=2)
    assert 1.0 < k2.history_["weight_density"] <= 3.0
    _same_structure(dense, from_sklearn(rf))


def test_refit_leaves_baseline_and_errors(rf_problem):
    rf, Xtr, ytr, Xte, _ = rf_problem
    conv = from_sklearn(rf)
    base = refit_leaves(conv, Xtr, ytr, n_iter=0)
    em = refit_leaves(conv, Xtr, ytr, n_iter=5)
    for model in (base, em):
        _same_structure(model, conv)
        for ta, tb in zip(model.trees_, conv.trees_, strict=True):
            np.testing.assert_array_equal(ta.weight_value, tb.weight_value)
            np.testing.assert_array_equal(ta.bias, tb.bias)
        assert model.predict(Xte).shape == (Xte.shape[0],)
    with pytest.raises(TypeError, match="created fitted"):
        base.fit(Xtr, ytr)
    hinge = HingeForestClassifier(2, max_depth=2, n_hinge_features=4, max_epochs=1).fit(Xtr, ytr)
    with pytest.raises(TypeError, match="margin"):
        finetune(hinge, Xtr, ytr)
    with pytest.raises(TypeError, match="classifier or regressor"):
        finetune(object(), Xtr, ytr)
    with pytest.raises(ValueError, match="for regressors"):
        finetune(rf, Xtr, ytr, objective="trees")
    with pytest.raises(ValueError, match="not among"):
        finetune(rf, Xtr, ytr + 10)
    with pytest.raises(ValueError, match="temperature"):
        finetune(rf, Xtr, ytr, temperature=0.0)
    with pytest.raises(ValueError, match="support"):
        finetune(rf, Xtr, ytr, support="some")
    with pytest.raises(ValueError, match="features"):
        finetune(rf, Xtr[:, :3], ytr)


# ------------------------------------------------------------ finetune, regression
@pytest.fixture(scope="module")
def rf_regression():
    # an oblique target: axis-aligned trees approximate it by staircases
    X, _ = make_regression(900, 6, random_state=2)
    y = np.tanh(X[:, 0] + X[:, 1] - 0.5 * X[:, 2]) * 3 + 0.1 * X[:, 3]
    Xtr, ytr, Xte, yte = X[:600], y[:600], X[600:], y[600:]
    rf = RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(Xtr, ytr)
    return rf, Xtr, ytr, Xte, yte


def test_refit_leaves_regression_gives_each_leaf_its_mean_target(rf_regression):
    _, Xtr, ytr, _, _ = rf_regression
    # without bootstrap every leaf of a random forest is the mean of its samples
    plain = RandomForestRegressor(
        n_estimators=4, max_depth=3, bootstrap=False, max_features=2, random_state=0
    ).fit(Xtr, ytr)
    means = refit_leaves(plain, Xtr, ytr, n_iter=0)
    assert isinstance(means, FinetunedForestRegressor)
    _same_structure(means, from_sklearn(plain))
    np.testing.assert_allclose(means.predict(Xtr), plain.predict(Xtr), rtol=1e-10, atol=1e-12)


def test_backfitting_refit_lowers_the_forest_training_error(rf_regression):
    rf, Xtr, ytr, _, _ = rf_regression
    conv = from_sklearn(rf)

    def mse(model):
        return np.mean((model.predict(Xtr) - ytr) ** 2)

    backfit = refit_leaves(conv, Xtr, ytr, n_iter=10)
    _same_structure(backfit, conv)
    assert mse(backfit) < mse(refit_leaves(conv, Xtr, ytr, n_iter=0))


def _mse(model, X, y):
    return np.mean((model.predict(X) - y) ** 2)


@pytest.mark.parametrize("objective", ["trees", "forest"])
def test_finetune_regressor_keeps_structure_is_deterministic_and_fits_better(
    rf_regression, objective
):
    rf, Xtr, ytr, Xte, yte = rf_regression
    conv = from_sklearn(rf)
    ft = finetune(conv, Xtr, ytr, epochs=10, objective=objective, random_state=0)
    assert isinstance(ft, FinetunedForestRegressor)
    _same_structure(ft, conv)
    for t in ft.trees_:
        t.check_invariants()
    assert ft.history_["loss"][-1] < ft.history_["loss"][0]
    assert ft.history_["weight_density"] == 1.0
    # the same structure with only its leaves refitted the way this objective ends
    refit = refit_leaves(conv, Xtr, ytr, n_iter=0 if objective == "trees" else 10)
    assert _mse(ft, Xtr, ytr) < min(_mse(refit, Xtr, ytr), _mse(conv, Xtr, ytr))
    assert _mse(ft, Xte, yte) < _mse(refit, Xte, yte)
    if objective == "forest":  # the additive fit of an oblique target, on held-out data
        assert _mse(ft, Xte, yte) < 0.9 * _mse(conv, Xte, yte)
    again = finetune(rf, Xtr, ytr, epochs=10, objective=objective, random_state=0, n_jobs=2)
    np.testing.assert_array_equal(ft.predict(Xte), again.predict(Xte))


def test_finetune_regressor_multi_output_and_errors(rf_regression):
    rf, Xtr, ytr, Xte, _ = rf_regression
    # two outputs: each column fine-tuned through the same splits
    Y = np.column_stack([ytr, -2.0 * ytr + 1.0])
    rf2 = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(Xtr, Y)
    ft2 = finetune(rf2, Xtr, Y, epochs=3)
    assert ft2.predict(Xte).shape == (Xte.shape[0], 2) and ft2.n_outputs_ == 2
    with pytest.raises(ValueError, match="outputs"):
        finetune(rf2, Xtr, ytr)
    with pytest.raises(ValueError, match="objective"):
        finetune(rf, Xtr, ytr, objective="leaves")


def test_finetune_sample_weight_zero_rows_are_ignored(rf_problem):
    rf, Xtr, ytr, _, _ = rf_problem
    sw = np.ones(Xtr.shape[0])
    sw[::2] = 0
    a = finetune(rf, Xtr, ytr, sample_weight=sw, epochs=2, batch_size=10_000)
    b = finetune(rf, Xtr[1::2], ytr[1::2], epochs=2, batch_size=10_000)
    for ta, tb in zip(a.trees_, b.trees_, strict=True):
        np.testing.assert_allclose(ta.value[ta.is_leaf], tb.value[tb.is_leaf], atol=1e-8)


def test_machine_class_is_public():
    assert DecisionMachine.__doc__


def test_finetune_package_oblique_classifier():
    from obliquetrees import E2EDTClassifier

    X, y = _classification(300, 5, 3)
    est = E2EDTClassifier(max_depth=3, max_epochs=2, finetune_epochs=1, random_state=0).fit(X, y)
    ft = finetune(est, X, y, epochs=2)
    _same_structure(ft, est)
    for ta, tb in zip(ft.trees_, est.trees_, strict=True):
        ta.check_invariants()
        # support="original": the stored weight pattern is kept (non-zeros may only vanish)
        kept = set(zip(*np.nonzero(tb.dense_weights()), strict=True))
        assert set(zip(*np.nonzero(ta.dense_weights()), strict=True)) <= kept
    assert ft.predict(X).shape == y.shape


@pytest.mark.slow
def test_finetune_beats_forest_and_leaf_refit_on_satimage(shared_data):
    data = shared_data("satimage")
    Xtr, ytr, Xte, yte = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    rf = RandomForestClassifier(n_estimators=30, max_depth=4, random_state=0).fit(Xtr, ytr)
    conv = from_sklearn(rf)
    ft = finetune(conv, Xtr, ytr, epochs=20)
    baselines = [
        rf.score(Xte, yte),
        refit_leaves(conv, Xtr, ytr, n_iter=0).score(Xte, yte),
        refit_leaves(conv, Xtr, ytr).score(Xte, yte),
    ]
    assert ft.score(Xte, yte) > max(baselines)
    assert ft.history_["weight_density"] == 1.0


def test_estimators_pick_the_blas_path_where_it_is_faster_and_agree_with_traversal(rng):
    from obliquetrees import E2EDTClassifier
    from obliquetrees.machine import choose_inference_path

    X = rng.normal(size=(600, 256))
    y = (X[:, :8].sum(axis=1) > 0).astype(int)
    # routing="hard": predict_proba is then the reached leaves' mean, which the paths compute
    model = E2EDTClassifier(
        n_estimators=3, max_depth=3, max_epochs=2, finetune_epochs=2, routing="hard", random_state=0
    ).fit(X, y)
    forest = model._forest()
    assert choose_inference_path(forest, len(X)) == "blas"  # dense splits on 256 features
    expected = traversal.predict_value(forest, X) / forest.n_trees
    np.testing.assert_allclose(model.predict_proba(X), expected, rtol=0, atol=1e-12)
