"""CO2's chosen split support and its oblique-or-axis test (``max_split_features``,
``oblique_penalty``): obliquetrees/co2/_node.py, co2/_sparse_kernels.py and
obliquetrees/_training/axis_split.py against plain-numpy references."""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

from obliquetrees import CO2ForestClassifier, CO2ForestRegressor
from tests import reference as ref
from tests._helpers import kernel_state as _state

A = pytest.importorskip("obliquetrees._training.axis_split")
N = pytest.importorskip("obliquetrees.co2._node")
co2 = pytest.importorskip("obliquetrees.co2.training")


def _problem(seed, m=80, p=7, n_classes=3, targets=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, p))
    X[:, 1] = 0.25  # constant: never a candidate
    X[:, 4] = np.round(X[:, 4])  # ties
    w = rng.integers(1, 4, size=m).astype(np.float64)
    if targets:
        y = np.ascontiguousarray((X @ rng.normal(size=(p, 2)) + rng.normal(size=(m, 2))) * 10)
    else:
        y = np.argmax(X @ rng.normal(size=(p, n_classes)), axis=1).astype(np.int64)
    return np.ascontiguousarray(X), y, w


def _own_best(col, y, w, n_classes, min_samples_leaf):
    """A feature's best impurity by exhaustive search (the reference's rules), inf if none."""
    X1 = col[:, None]
    _, _, imp = ref.co2_best_axis_split(X1, y, w, n_classes, 1, min_samples_leaf, ref.Co2Rng(0))
    return imp


@functools.cache
def _split_gain_kernel():
    from numba import njit

    return njit(lambda y, w, m, a, b, n: A.split_gain(y, w, m, a, b, n))


def _split_gain(*args):
    """:func:`~obliquetrees._training.axis_split.split_gain` (numba only) called from Python."""
    return _split_gain_kernel()(*args)


def _kernel_params(**kw):
    defaults = CO2ForestClassifier().get_params()
    fields = {f: defaults[f] for f in co2.CO2Params.__dataclass_fields__ if f in defaults}
    # the estimator resolves oblique_penalty="auto" to a margin before the kernels
    fields |= {
        "max_features": 3,
        "max_samples": None,
        "max_split_features": None,
        "oblique_penalty": 0.0,
    }
    return co2.CO2Params(**(fields | kw)).kernel_args()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("targets", [False, True])
def test_ranked_axis_split_scores_every_candidate(seed, targets):
    X, y, w = _problem(seed, targets=targets)
    m, p = X.shape
    n_classes = y.shape[1] if targets else 3  # targets: the kernels' n_classes is n_outputs
    scores = np.full(p, np.inf)
    f, thr, imp = A.ranked_axis_split(X, y, w, m, n_classes, p, 2, _state(seed), scores)
    # the same split, and the same draws, as without scores
    assert (f, thr, imp) == A.best_axis_split(X, y, w, m, n_classes, p, 2, _state(seed))
    state_a, state_b = _state(seed), _state(seed)
    A.ranked_axis_split(X, y, w, m, n_classes, 3, 2, state_a, np.full(p, np.inf))
    A.best_axis_split(X, y, w, m, n_classes, 3, 2, state_b)
    assert state_a[0] == state_b[0]
    # every feature drawn (all of them here) scores its own best split
    total = np.sum(w[:, None] * y**2) if targets else 0.0  # targets: SSE minus a constant
    for j in range(p):
        expected = _own_best(X[:, j], y, w, n_classes, 2)
        if np.isinf(expected):
            assert np.isinf(scores[j])
        else:
            np.testing.assert_allclose(scores[j] + total, expected, rtol=1e-9)
    assert np.isinf(scores[1])  # the constant feature
    assert scores[f] == imp == np.min(scores)


def test_ranked_axis_split_leaves_features_not_drawn():
    X, y, w = _problem(0)
    scores = np.full(X.shape[1], np.inf)
    A.ranked_axis_split(X, y, w, X.shape[0], 3, 2, 1, _state(3), scores)
    assert np.isfinite(scores).sum() == 2  # two non-constant candidates were scanned


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("targets", [False, True])
def test_split_gain_matches_numpy(seed, targets):
    X, y, w = _problem(seed, targets=targets)
    m = X.shape[0]
    rng = np.random.default_rng(seed + 10)
    a = rng.random(m) < 0.4
    b = X[:, 0] + X[:, 2] > 0
    gain = _split_gain(y, w, m, a, b, 3)  # (n_classes unused for targets)
    if targets:
        sse_a = ref.co2_weighted_squared_error(y, w, a)
        sse_b = ref.co2_weighted_squared_error(y, w, b)
        expected = 0.5 * w.sum() * np.log(sse_a / sse_b)
    else:
        expected = ref.co2_weighted_entropy(y, w, a, 3) - ref.co2_weighted_entropy(y, w, b, 3)
    np.testing.assert_allclose(gain, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(_split_gain(y, w, m, b, a, 3), -expected, rtol=1e-9, atol=1e-9)


def test_split_gain_of_targets_far_from_zero_has_no_cancellation():
    # a target mean of 1e9 with unit spread: E[y^2] - mean^2 would lose every digit
    X, y, w = _problem(0, targets=True)
    shifted = np.ascontiguousarray(y / 10 + 1e9)
    a = X[:, 0] > 0
    b = X[:, 2] > 0
    sse_a = ref.co2_weighted_squared_error(y / 10, w, a)
    sse_b = ref.co2_weighted_squared_error(y / 10, w, b)
    np.testing.assert_allclose(
        _split_gain(shifted, w, X.shape[0], a, b, 1),
        0.5 * w.sum() * np.log(sse_a / sse_b),
        rtol=1e-5,
    )


def test_split_gain_of_exact_fits():
    y = np.array([[1.0], [1.0], [2.0], [2.0]])
    w = np.ones(4)
    exact = np.array([False, False, True, True])
    mixed = np.array([False, True, False, True])
    assert _split_gain(y, w, 4, mixed, exact, 1) == np.inf
    assert _split_gain(y, w, 4, exact, exact, 1) == 0.0
    assert _split_gain(y, w, 4, exact, mixed, 1) == -np.inf


def test_split_support_is_the_start_and_the_next_best_candidates():
    scores = np.array([3.0, np.inf, 1.0, 2.0, 2.0, 0.5, np.inf])
    params = _kernel_params(max_split_features=3)
    # the start first even when another candidate scores as well; ties in feature order
    np.testing.assert_array_equal(N.split_support(scores, 2, 7, 100, params), [2, 5, 3])
    np.testing.assert_array_equal(N.split_support(scores, 5, 7, 100, params), [5, 2, 3])
    wide = _kernel_params(max_split_features=6)  # no more than the finite candidates
    np.testing.assert_array_equal(N.split_support(scores, 5, 7, 100, wide), [5, 2, 3, 4, 0])
    everything = _kernel_params(max_split_features=None)
    assert N.candidate_scores(7, everything).shape == (0,)
    np.testing.assert_array_equal(N.split_support(np.empty(0), 4, 7, 100, everything), np.arange(7))
    # a node below min_samples_oblique: no support, it keeps its start
    few = _kernel_params(max_split_features=3, min_samples_oblique=20)
    assert N.split_support(scores, 2, 7, 19, few).shape == (0,)
    np.testing.assert_array_equal(N.split_support(scores, 2, 7, 20, few), [2, 5, 3])
    assert N.candidate_scores(7, params).shape == (7,)


@pytest.mark.parametrize("penalty", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("k_used", [1, 3])
def test_oblique_pays_compares_the_gain_with_the_penalty(penalty, k_used):
    X, y, w = _problem(1)
    m = X.shape[0]
    axis = X[:, 0] > 0
    oblique = X[:, 0] + 0.8 * X[:, 2] - 0.5 * X[:, 3] > 0
    gain = ref.co2_weighted_entropy(y, w, axis, 3) - ref.co2_weighted_entropy(y, w, oblique, 3)
    threshold = penalty * (k_used - 1)
    params = _kernel_params(oblique_penalty=penalty)
    assert N.oblique_pays(y, w, m, axis, oblique, k_used, 3, params) == (gain > threshold)
    assert N.oblique_pays(y, w, m, oblique, axis, k_used, 3, params) == (-gain > threshold)
    # None: the paper's rule, the oblique split is always taken
    always = _kernel_params(oblique_penalty=None)
    assert N.oblique_pays(y, w, m, oblique, axis, k_used, 3, always)


def _n_weights(model):
    """Stored weights of every split node of every tree."""
    return np.concatenate([np.diff(t.weight_indptr)[t.children_left != -1] for t in model.trees_])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_every_split_weighs_at_most_max_split_features(sparse, Estimator):
    X, y = make_classification(300, 20, n_informative=8, random_state=0)
    X = sp.csr_matrix(np.where(np.abs(X) > 0.7, X, 0.0)) if sparse else X
    kw = dict(n_estimators=3, max_depth=6, random_state=0, max_features=8)
    wide = Estimator(**kw).fit(X, y)
    narrow = Estimator(max_split_features=3, **kw).fit(X, y)
    assert _n_weights(wide).max() > 3
    assert 1 <= _n_weights(narrow).min() and _n_weights(narrow).max() <= 3
    assert narrow.max_split_features_ == 3
    # the support is the axis-aligned start's feature and two more: splits do weigh several
    assert (_n_weights(narrow) > 1).mean() > 0.5


# the fit test: a price per weight; the out-of-bag test's gain is unbounded for targets
# (infinite where the oblique split fits the out-of-bag rows exactly and the start does not)
NEVER_OBLIQUE = [dict(oblique_penalty=1e12, oblique_test="fit"), dict(min_samples_oblique=301)]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
@pytest.mark.parametrize("never_kw", NEVER_OBLIQUE)
def test_an_unpayable_penalty_keeps_every_axis_aligned_start(sparse, Estimator, never_kw):
    X, y = make_classification(300, 12, n_informative=6, random_state=1)
    X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if sparse else X
    kw = dict(n_estimators=3, max_depth=6, random_state=0)
    never = Estimator(**never_kw, **kw).fit(X, y)
    starts = Estimator(max_split_features=1, **kw).fit(X, y)
    assert _n_weights(never).max() == 1
    n_splits = sum(int((t.children_left != -1).sum()) for t in never.trees_)
    assert never.n_axis_fallback_.sum() == n_splits
    # each node's own random stream: the CCCP run and rejected leaves the tree as no CCCP does
    for a, b in zip(never.trees_, starts.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_array_equal(a.weight_index, b.weight_index)
        np.testing.assert_array_equal(a.bias, b.bias)
    np.testing.assert_array_equal(never.predict(X), starts.predict(X))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_nodes_below_min_samples_oblique_keep_their_axis_aligned_start(sparse, Estimator):
    X, y = make_classification(400, 12, n_informative=6, random_state=3)
    X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0)) if sparse else X
    # no bootstrap: a node's sample count is its number of distinct rows
    kw = dict(n_estimators=2, max_depth=8, bootstrap=False, random_state=0)
    model = Estimator(min_samples_oblique=60, **kw).fit(X, y)
    paper = Estimator(**kw).fit(X, y)
    for tree in model.trees_:
        split = tree.children_left != -1
        n_weights = np.diff(tree.weight_indptr)
        small = split & (tree.n_node_samples < 60)
        assert small.any() and (n_weights[small] == 1).all()
        assert (n_weights[split & ~small] > 1).mean() > 0.5
    # the first splits, on every row, are the paper's
    for a, b in zip(model.trees_, paper.trees_, strict=True):
        np.testing.assert_array_equal(
            a.weight_value[: a.weight_indptr[1]], b.weight_value[: b.weight_indptr[1]]
        )


@pytest.mark.parametrize(
    "kw", [dict(max_split_features=4), dict(oblique_penalty=0.0), dict(min_samples_oblique=40)]
)
def test_sparse_matches_dense_with_a_support_or_a_test(kw):
    rng = np.random.RandomState(0)
    X = sp.random(250, 25, density=0.3, format="csr", random_state=0)
    y = (X @ rng.randn(25) > 0).astype(np.int64)
    fit = dict(n_estimators=2, random_state=0, max_depth=5, **kw)
    dense = CO2ForestClassifier(**fit).fit(X.toarray(), y)
    sparse = CO2ForestClassifier(**fit).fit(X, y)
    for a, b in zip(dense.trees_, sparse.trees_, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)
        np.testing.assert_allclose(a.bias, b.bias, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(dense.predict(X.toarray()), sparse.predict(X))


@pytest.mark.parametrize("Estimator", [CO2ForestClassifier, CO2ForestRegressor])
def test_a_support_of_every_feature_is_the_papers_stump(Estimator):
    X, y = make_classification(200, 10, random_state=2)
    kw = dict(n_estimators=2, random_state=0, oblique_penalty=None)
    default = Estimator(**kw).fit(X, y)
    explicit = Estimator(max_split_features=None, min_samples_oblique=1, **kw).fit(X, y)
    everything = Estimator(max_split_features=10, **kw).fit(X, y)
    for a, b, c in zip(default.trees_, explicit.trees_, everything.trees_, strict=True):
        for other in (b, c):
            np.testing.assert_array_equal(a.weight_value, other.weight_value)
            np.testing.assert_array_equal(a.bias, other.bias)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(oblique_penalty="bic"), "oblique_penalty"),
        (dict(oblique_penalty=-1.0), "oblique_penalty"),
        (dict(max_split_features=0), "max_split_features"),
        (dict(max_split_features="all"), "max_split_features"),
        (dict(min_samples_oblique=0), "min_samples_oblique"),
        (dict(min_samples_oblique=2.5), "min_samples_oblique"),
    ],
)
def test_bad_support_parameters_are_named(kw, match):
    X, y = make_classification(50, 5, random_state=0)
    with pytest.raises(ValueError, match=match):
        CO2ForestClassifier(n_estimators=2, **kw).fit(X, y)
