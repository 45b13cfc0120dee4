"""export_text, plot_tree and feature_importances_ (obliquetrees.inspection)."""

import re

import numpy as np
import pytest
from sklearn.base import is_regressor
from sklearn.datasets import load_iris, make_regression
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.tree import DecisionTreeClassifier

import obliquetrees
from obliquetrees import (
    CO2ForestClassifier,
    E2EDTClassifier,
    SoftTreeRegressor,
    export_text,
    plot_tree,
)
from obliquetrees._core.importances import feature_importances
from obliquetrees._core.tree import ObliqueTree
from obliquetrees.convert import from_sklearn
from tests.test_common import FAST_PARAMS, discover_estimators

# small, fast settings for every estimator of the package (the registry's: one without
# settings here gets test_common's)
_SMALL = {
    "CO2ForestClassifier": dict(n_estimators=3, max_depth=3, max_cccp_iter=3),
    "E2EDTClassifier": dict(max_depth=2, max_epochs=3, finetune_epochs=2),
    "E2EDTRegressor": dict(max_depth=2, max_epochs=3, finetune_epochs=2),
    "SoftTreeClassifier": dict(max_depth=2),
    "SoftTreeRegressor": dict(max_depth=2),
    "HingeForestClassifier": dict(n_estimators=4, max_depth=2, max_epochs=3),
    "HingeForestRegressor": dict(n_estimators=4, max_depth=2, max_epochs=3),
}
FAST = {
    cls: _SMALL.get(cls.__name__, FAST_PARAMS.get(cls.__name__, {}))
    for cls in discover_estimators()
}


def _fit(cls, X, y_cls, y_reg, **extra):
    est = cls(**{**FAST[cls], "random_state": 0, **extra})
    return est.fit(X, y_reg if is_regressor(est) else y_cls)


@pytest.fixture(scope="module")
def iris_noise():
    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    X = np.column_stack([X, rng.normal(size=X.shape[0])])
    return X, y, X[:, 2] + 0.1 * rng.normal(size=X.shape[0])


@pytest.fixture(scope="module")
def fitted(iris_noise):
    X, y, yr = iris_noise
    return {cls: _fit(cls, X, y, yr) for cls in FAST}


def _stump(weights, bias=0.0, value=((0.5, 0.5), (1.0, 0.0), (0.0, 1.0)), n=(10, 5, 5)):
    """A root split with the given dense weights and two leaves."""
    weights = np.asarray(weights, dtype=float)
    dense = np.zeros((3, weights.shape[0]))
    dense[0] = weights
    return ObliqueTree.from_dense([1, -1, -1], [2, -1, -1], dense, [bias, 0, 0], value, n)


# ------------------------------------------------------------ importances
def test_exported():
    assert {"export_text", "plot_tree"} <= set(obliquetrees.__all__)


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_importances_every_estimator(fitted, cls):
    est = fitted[cls]
    imp = est.feature_importances_
    assert imp.shape == (est.n_features_in_,)
    assert np.all(imp >= 0) and np.all(np.isfinite(imp))
    trees = est.trees_ if hasattr(est, "forest_") else [est.tree_]
    assert max(t.node_count for t in trees) > 1  # the settings grow a split
    assert imp.sum() == pytest.approx(1.0)
    # computed from the container, cheap to access again
    np.testing.assert_array_equal(imp, est.feature_importances_)


def test_importances_match_sklearn_gini_for_converted_forest():
    X, y = load_iris(return_X_y=True)
    sw = np.arange(X.shape[0]) % 3 + 1.0
    rf = RandomForestClassifier(n_estimators=15, random_state=0).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(
        from_sklearn(rf).feature_importances_, rf.feature_importances_, atol=1e-12
    )


def test_importances_match_sklearn_squared_error_for_converted_forest():
    X, y = make_regression(300, 5, random_state=0)
    rf = RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(X, y)
    np.testing.assert_allclose(
        from_sklearn(rf).feature_importances_, rf.feature_importances_, atol=1e-12
    )


def test_oblique_split_shared_by_weight_times_std():
    # one perfect split: its whole decrease goes to the features by |w_j| std_j
    tree = _stump([1.0, -3.0, 0.0])
    std = np.array([2.0, 1.0, 5.0])
    np.testing.assert_allclose(feature_importances([tree], std), [0.4, 0.6, 0.0])
    np.testing.assert_allclose(feature_importances([tree]), [0.25, 0.75, 0.0])


def test_gini_decrease_and_forest_average():
    # root: 10 samples [0.5, 0.5]; children pure -> Gini decrease 10*0.5 = 5
    tree_a = _stump([1.0, 0.0])
    # a useless split (children have the parent's distribution) -> decrease 0
    tree_b = _stump([0.0, 1.0], value=((0.5, 0.5),) * 3)
    single = ObliqueTree([-1], [-1], [0, 0], [], [], [0.0], [[0.5, 0.5]], [10], n_features=2)
    np.testing.assert_allclose(feature_importances([tree_a]), [1.0, 0.0])
    # tree_b has a split but zero decrease: it counts in the average with zeros,
    # the single leaf does not count; the result is renormalised
    np.testing.assert_allclose(feature_importances([tree_a, tree_b, single]), [1.0, 0.0])
    np.testing.assert_array_equal(feature_importances([single]), [0.0, 0.0])
    np.testing.assert_array_equal(feature_importances([tree_b]), [0.0, 0.0])


def test_internal_values_are_rebuilt_from_leaves():
    # hinge trees store zeros at inner nodes; the decrease uses leaf statistics
    zeros_inside = _stump([0.0, 2.0], value=((0.0,), (-1.0,), (3.0,)))
    # N_l N_r / N (m_l - m_r)^2 = 5*5/10 * 16 = 40 > 0, all on feature 1
    np.testing.assert_allclose(feature_importances([zeros_inside]), [0.0, 1.0])


def test_single_leaf_model_has_zero_importances():
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.arange(40) % 2
    clf = E2EDTClassifier(min_samples_split=1000, max_epochs=1, random_state=0).fit(X, y)
    assert clf.tree_.node_count == 1
    np.testing.assert_array_equal(clf.feature_importances_, np.zeros(3))


def test_unfitted_raises_not_fitted():
    with pytest.raises(NotFittedError):
        CO2ForestClassifier().feature_importances_  # noqa: B018
    assert not hasattr(SoftTreeRegressor(), "feature_importances_")


def test_feature_std_is_weighted():
    X = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    sw = np.array([1.0, 0.0, 1.0])
    est = SoftTreeRegressor(max_depth=1, n_restarts=1, max_epochs=1, random_state=0)
    est.fit(X, [0.0, 1.0, 2.0], sample_weight=sw)
    np.testing.assert_allclose(est._feature_std, [2.0, 0.0])
    est.fit(X, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(est._feature_std, [X[:, 0].std(), 0.0])


@pytest.fixture(scope="module")
def signal_and_noise():
    """Feature 0 decides the class with a margin; feature 1 is pure noise."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    X = X[np.abs(X[:, 0]) > 0.3]
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize(
    "fit",
    [
        lambda X, y: CO2ForestClassifier(
            n_estimators=3, max_depth=1, max_features=None, random_state=0
        ).fit(X, y),
        lambda X, y: E2EDTClassifier(
            max_depth=1, max_epochs=20, learning_rate=0.05, random_state=0
        ).fit(X, y),
        lambda X, y: SoftTreeRegressor(max_depth=1, random_state=0).fit(X, 2.0 * y - 1.0),
        lambda X, y: from_sklearn(DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y)),
    ],
    ids=["co2", "e2edt", "soft_regressor", "converted_sklearn"],
)
def test_pure_noise_feature_gets_almost_nothing(signal_and_noise, fit, request):
    imp = fit(*signal_and_noise).feature_importances_
    # CO2's CCCP stops once a node's partition has settled (its Notes), which
    # leaves the stumps' orientation less converged: 1.08 % here, 0.77 % when
    # it ran until the surrogate stopped improving
    bound = 0.015 if request.node.callspec.id == "co2" else 0.01
    assert imp[1] < bound, imp
    assert imp.sum() == pytest.approx(1.0)


# ------------------------------------------------------------ export_text
def _n_lines_expected(tree):
    internal = int(np.count_nonzero(~tree.is_leaf))
    return 2 * internal + tree.n_leaves


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_export_text_every_estimator(fitted, cls):
    est = fitted[cls]
    tree = est.trees_[0] if hasattr(est, "forest_") else est.tree_
    text = export_text(est)
    lines = text.splitlines()
    assert text.endswith("\n")
    assert len(lines) == _n_lines_expected(tree)
    assert all(re.fullmatch(r"(\|   )*\|--- .+", line) for line in lines)
    if tree.node_count > 1:
        assert sum(" <= " in line for line in lines) == sum(" > " in line for line in lines)


def test_export_text_terms_threshold_and_names():
    tree = _stump([0.5, -2.0, 0.0, 1.0, 0.25], bias=-1.5)
    text = export_text(tree, feature_names=list("abcde"), top_k=2, decimals=2)
    lines = text.splitlines()
    # a bare container without missing-value terms: a NaN counts as 0
    assert lines[0] == "|--- -2.00*b + d + [2 more terms] <= 1.50  n=5  [NaN: b=0.00, d=0.00]"
    assert lines[2] == "|--- -2.00*b + d + [2 more terms] > 1.50  n=5  [NaN: b=0.00, d=0.00]"
    assert lines[1] == "|   |--- value: [1.00, 0.00]  n=5"  # a bare tree: no classes_
    # all terms, ordered by |w_j| (no training std for a bare tree); a unit
    # coefficient is written as the bare name, as for axis-aligned splits
    full = export_text(tree, feature_names=list("abcde"), top_k=10).splitlines()[0]
    assert full.startswith("|--- -2.000*b + d + 0.500*a + 0.250*e <=")
    assert "more term" not in full


def test_export_text_shows_missing_value_terms():
    # b counts as 3 when missing; e enters only when missing, adding -0.5
    dense = np.zeros((3, 5))
    dense[0] = [0.0, -2.0, 0.0, 1.0, 0.0]
    missing = np.zeros((3, 5))
    missing[0] = [0.0, -6.0, 0.0, 0.0, -0.5]
    value = ((0.5, 0.5), (1.0, 0.0), (0.0, 1.0))
    tree = ObliqueTree.from_dense(
        [1, -1, -1], [2, -1, -1], dense, [1.0, 0, 0], value, (10, 5, 5), missing=missing
    )
    names = list("abcde")
    line = export_text(tree, feature_names=names, decimals=1).splitlines()[0]
    assert line == "|--- -2.0*b + d - 0.5*missing(e) <= -1.0  n=5  [NaN: b=3.0, d=0.0]"
    plain = export_text(tree, feature_names=names, decimals=1, show_missing=False)
    assert "NaN" not in plain and "missing(e)" in plain


def test_export_text_ranks_terms_by_weight_times_std(iris_noise):
    X, y, _ = iris_noise
    clf = CO2ForestClassifier(n_estimators=1, max_depth=1, max_features=None, random_state=0)
    clf.fit(X, y)
    tree = clf.tree_ if "tree_" in clf.__dict__ else clf.trees_[0]
    first = export_text(clf, top_k=1).splitlines()[0]
    lo, hi = tree.weight_indptr[0], tree.weight_indptr[1]
    score = np.abs(tree.weight_value[lo:hi]) * clf._feature_std[tree.weight_index[lo:hi]]
    best = tree.weight_index[lo:hi][np.argmax(score)]
    assert re.match(rf"\|--- -?[0-9.e+-]+\*x{best} \+ \[\d+ more terms?\] <= ", first), first


def test_export_text_options(fitted):
    clf = fitted[CO2ForestClassifier]
    # tree_index picks a tree of the forest
    for t, tree in enumerate(clf.trees_):
        assert len(export_text(clf, tree_index=t).splitlines()) == _n_lines_expected(tree)
    with pytest.raises(ValueError, match="tree_index"):
        export_text(clf, tree_index=len(clf.trees_))
    with pytest.raises(ValueError, match="feature_names"):
        export_text(clf, feature_names=["a"])
    with pytest.raises(ValueError, match="top_k"):
        export_text(clf, top_k=-1)
    text = export_text(clf, max_depth=0, class_names=["setosa", "versicolor", "virginica"])
    assert "truncated branch of depth" in text or "class: " in text
    assert all(line.startswith("|") for line in text.splitlines())
    assert "n=" not in export_text(clf, show_samples=False)
    with pytest.raises(NotFittedError):
        export_text(CO2ForestClassifier())
    with pytest.raises(TypeError):
        export_text("not a model")


def test_export_text_uses_dataframe_names(iris_noise):
    pd = pytest.importorskip("pandas")
    X, y, _ = iris_noise
    df = pd.DataFrame(X, columns=["sl", "sw", "pl", "pw", "noise"])
    clf = CO2ForestClassifier(n_estimators=1, max_depth=2, random_state=0).fit(df, y)
    text = export_text(clf, top_k=5)
    assert re.search(r"\*(sl|sw|pl|pw|noise)", text)
    assert "x0" not in text


def test_export_text_single_leaf_and_regressor():
    leaf = ObliqueTree([-1], [-1], [0, 0], [], [], [0.0], [[2.5]], [7], n_features=2)
    assert export_text(leaf) == "value: 2.500  n=7\n"


# ------------------------------------------------------------ plot_tree
@pytest.fixture
def plt():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_plot_tree_every_estimator(fitted, cls, plt):
    ax = plot_tree(fitted[cls], feature_names=["sl", "sw", "pl", "pw", "noise"])
    assert ax.texts
    ax.figure.canvas.draw()


def test_plot_tree_draws_leaf_bars_and_edge_widths(fitted, plt):
    clf = fitted[CO2ForestClassifier]
    tree = clf.trees_[1]
    ax = plot_tree(clf, tree_index=1)
    assert len(ax.child_axes) == tree.n_leaves  # one bar chart per leaf
    widths = [line.get_linewidth() for line in ax.lines]
    assert len(widths) == 2 * (tree.node_count - tree.n_leaves)
    children = np.flatnonzero(np.arange(tree.node_count) > 0)
    widest = 0.4 + 9.0 * tree.n_node_samples[children].max() / tree.n_node_samples[0]
    assert max(widths) == pytest.approx(widest)


def test_plot_tree_images_and_truncation(plt):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12))
    y = (X[:, 0] + X[:, 5] > 0).astype(int)
    clf = E2EDTClassifier(
        max_depth=2, max_epochs=2, finetune_epochs=0, image_shape=(3, 4), random_state=0
    ).fit(X, y)
    tree = clf.tree_
    ax = plot_tree(clf)  # image_shape taken from the estimator
    n_internal = tree.node_count - tree.n_leaves
    images = [a for a in ax.child_axes if a.images]
    assert len(images) == n_internal
    assert images[0].images[0].get_array().shape == (3, 4)
    ax = plot_tree(clf, image_shape=(4, 3))
    assert [a for a in ax.child_axes if a.images][0].images[0].get_array().shape == (4, 3)
    with pytest.raises(ValueError, match="image_shape"):
        plot_tree(clf, image_shape=(5, 5))
    # default images show w_j * std(x_j); "raw" the stored weights
    lo, hi = tree.weight_indptr[0], tree.weight_indptr[1]
    raw = np.zeros(12)
    raw[tree.weight_index[lo:hi]] = tree.weight_value[lo:hi]
    for mode, expected in (("std", raw * clf._feature_std), ("raw", raw)):
        ax = plot_tree(clf, image_weights=mode)
        drawn = [np.asarray(a.images[0].get_array()).ravel() for a in ax.child_axes if a.images]
        assert any(np.allclose(image, expected) for image in drawn)  # the root's image
    with pytest.raises(ValueError, match="image_weights"):
        plot_tree(clf, image_weights="scaled")
    ax = plot_tree(clf, max_depth=0, image_shape=None)
    if tree.node_count > 1:
        assert any(t.get_text().startswith("(...)") for t in ax.texts)
    fig, own = plt.subplots()
    assert plot_tree(clf, ax=own) is own
