"""Missing values: the container's terms, every prediction path, the fold, the estimators."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from obliquetrees._core import machine, soft, traversal, traversal_numpy
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.missing import (
    INDICATOR_ALPHA,
    MissingValues,
    informative_columns,
    nan_columns,
    observed_moments,
)
from obliquetrees._core.tree import FORMAT_VERSION, ObliqueTree
from tests import reference as ref


def _with_nan(rng, X, rate=0.3):
    X = X.copy()
    X[rng.random(X.shape) < rate] = np.nan
    return X


@pytest.fixture
def trees_and_X(rng):
    trees = [ref.random_tree(rng, 7, 2, max_depth=5, missing=True) for _ in range(4)]
    X = _with_nan(rng, rng.normal(size=(300, 7)))
    return trees, X


# ------------------------------------------------------------ prediction paths
def test_traversal_uses_missing_terms_like_the_reference(trees_and_X):
    trees, X = trees_and_X
    forest = ObliqueForest.from_trees(trees)
    expected = ref.apply(trees, X)
    assert np.array_equal(traversal.apply(forest, X, 2), expected)
    assert np.array_equal(traversal_numpy.apply(forest, X), expected)
    assert np.array_equal(
        traversal.apply(forest, X.astype(np.float32), 1), ref.apply(trees, X.astype(np.float32))
    )
    # CSR: explicit NaN entries are missing, implicit zeros are zeros
    with np.errstate(invalid="ignore"):
        csr = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))  # NaN entries stay
    assert np.isnan(csr.data).any()
    assert np.array_equal(traversal.apply(forest, csr, 2), ref.apply(trees, csr.toarray()))
    np.testing.assert_array_equal(traversal.predict_value(forest, X), ref.predict_value(trees, X))


def test_missing_terms_change_routing(rng):
    # a stump on x0: NaN goes right iff its term + b > 0, whatever x0's weight
    for term, side in ((2.0, 2), (-2.0, 1)):
        dense = np.zeros((3, 2))
        dense[0, 0] = 1.0
        miss = np.zeros((3, 2))
        miss[0, 0] = term
        tree = ObliqueTree.from_dense(
            [1, -1, -1], [2, -1, -1], dense, [0.0, 0, 0], [[0], [1], [2]], [3, 1, 2], missing=miss
        )
        forest = ObliqueForest.from_trees([tree])
        X = np.array([[np.nan, 5.0], [1.0, np.nan], [-1.0, np.nan]])
        assert traversal.apply(forest, X)[:, 0].tolist() == [side, 2, 1]


def test_machine_margins_and_leaves_with_missing_values(trees_and_X):
    trees, X = trees_and_X
    forest = ObliqueForest.from_trees(trees)
    m = machine.machine_of(forest)
    for S_dense in (False, True):
        if S_dense:  # the dense form of S (and of its terms)
            m.S, m.S_missing = (
                m.dense_S(),
                m.S_missing.toarray() if sp.issparse(m.S_missing) else m.S_missing,
            )
        A = m.margins(X)
        for i, split in enumerate(m.split_node):
            k = np.searchsorted(m.split_offset, i, side="right") - 1
            want = [ref.margin(trees[k], split, x) for x in X]
            np.testing.assert_allclose(A[:, i], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(m.apply(X), ref.apply(trees, X))


def test_soft_evaluation_uses_missing_terms(rng):
    tree = ref.random_tree(rng, 5, 2, max_depth=4, missing=True)
    X = _with_nan(rng, rng.normal(size=(200, 5)))
    np.testing.assert_allclose(
        soft.soft_predict(tree, X, tree.value),
        ref.soft_predict_stored(tree, X, tree.value),
        rtol=1e-12,
    )


# --------------------------------------------------------------- the container
def _old_state(container, version):
    """``container``'s pickled state as format ``version`` (1 or 2) wrote it.

    Those versions stored int64 feature ids and explicit terms (version 1 none).
    """
    state = dict(container.__getstate__(), format_version=version)
    state["weight_missing"] = container.weight_missing.copy()
    state["weight_index"] = container.weight_index.astype(np.int64)
    del state["missing_fill"]
    if version == 1:
        del state["weight_missing"]
    return state


def test_version_1_pickles_load_with_zero_terms(rng):
    tree = ref.random_tree(rng, 4, missing=True)
    old = ObliqueTree.__new__(ObliqueTree)
    old.__setstate__(_old_state(tree, 1))
    assert old.format_version == FORMAT_VERSION and not old.weight_missing.any()
    assert old.weight_index.dtype == np.int32
    forest = ObliqueForest.from_trees([tree])
    loaded = ObliqueForest.__new__(ObliqueForest)
    loaded.__setstate__(_old_state(forest, 1))
    assert loaded.weight_missing.shape == forest.weight_value.shape


def test_version_2_pickles_load_with_the_same_terms_and_predictions(rng):
    trees = [ref.random_tree(rng, 5, 2, missing=True) for _ in range(3)]
    forest = ObliqueForest.from_trees(trees)
    loaded = ObliqueForest.__new__(ObliqueForest)
    loaded.__setstate__(_old_state(forest, 2))
    assert loaded.format_version == FORMAT_VERSION
    assert loaded.weight_index.dtype == np.int32 and loaded.missing_fill is None
    np.testing.assert_array_equal(loaded.weight_index, forest.weight_index)
    np.testing.assert_array_equal(loaded.weight_missing, forest.weight_missing)
    X = _with_nan(rng, rng.normal(size=(300, 5)))
    np.testing.assert_array_equal(
        traversal.predict_value(loaded, X), traversal.predict_value(forest, X)
    )


def test_old_pickles_with_feature_ids_beyond_int32_are_refused(rng):
    tree = ref.random_tree(rng, 4, split_prob=1.0, max_depth=2)
    state = _old_state(tree, 2)
    state["weight_index"][0] = 2**32  # would wrap to 0, a valid-looking id, if cast blindly
    with pytest.raises(ValueError, match="weight_index"):
        ObliqueTree.__new__(ObliqueTree).__setstate__(state)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: setattr(t, "weight_missing", t.weight_missing[:-1]),
        lambda t: t.weight_missing.__setitem__(0, np.nan),
        lambda t: setattr(t, "weight_missing", t.weight_missing.astype(np.float32)),
        lambda t: setattr(t, "format_version", FORMAT_VERSION + 1),
    ],
)
def test_edited_missing_terms_are_refused_on_unpickling(rng, edit):
    tree = ref.random_tree(rng, 4, missing=True, split_prob=1.0, max_depth=2)
    edit(tree)
    with pytest.raises(ValueError, match="weight_missing|format version"):
        pickle.loads(pickle.dumps(tree))


def _compact(tree, fill):
    """``tree`` with its terms in the compact form ``weight_value * fill[weight_index]``."""
    return ObliqueTree(
        tree.children_left,
        tree.children_right,
        tree.weight_indptr,
        tree.weight_index,
        tree.weight_value,
        tree.bias,
        tree.value,
        tree.n_node_samples,
        n_features=tree.n_features,
        missing_fill=fill,
    )


def test_compact_terms_equal_the_explicit_ones_everywhere(rng):
    fill = rng.normal(size=5)
    trees = [ref.random_tree(rng, 5, 2) for _ in range(3)]
    compact = [_compact(t, fill) for t in trees]
    explicit = [
        ObliqueTree(
            *(getattr(t, name) for name in ("children_left", "children_right", "weight_indptr")),
            t.weight_index,
            t.weight_value,
            t.bias,
            t.value,
            t.n_node_samples,
            n_features=5,
            weight_missing=t.weight_value * fill[t.weight_index],
        )
        for t in trees
    ]
    forest = ObliqueForest.from_trees(compact)
    assert forest.__dict__["weight_missing"] is None and forest.missing_fill is fill
    reference = ObliqueForest.from_trees(explicit)
    np.testing.assert_array_equal(forest.weight_missing, reference.weight_missing)
    X = _with_nan(rng, rng.normal(size=(500, 5)), rate=0.3)
    for op in (traversal.apply, traversal.predict_value):
        np.testing.assert_array_equal(op(forest, X), op(reference, X))
    np.testing.assert_array_equal(
        traversal_numpy.predict_value(forest, X), traversal.predict_value(reference, X)
    )
    loaded = pickle.loads(pickle.dumps(forest))
    assert loaded.__dict__["weight_missing"] is None
    np.testing.assert_array_equal(loaded.trees[1].weight_missing, explicit[1].weight_missing)
    np.testing.assert_array_equal(traversal.apply(loaded, X), traversal.apply(reference, X))
    # a forest of compact trees with different fills stores explicit terms
    mixed = ObliqueForest.from_trees([compact[0], _compact(trees[1], fill + 1.0)])
    assert mixed.missing_fill is None
    np.testing.assert_array_equal(
        mixed.weight_missing,
        np.concatenate(
            [
                explicit[0].weight_missing,
                trees[1].weight_value * (fill + 1.0)[trees[1].weight_index],
            ]
        ),
    )


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: setattr(t, "missing_fill", t.missing_fill[:-1]), "missing_fill"),
        (lambda t: t.missing_fill.__setitem__(0, np.inf), "missing_fill"),
        (lambda t: t.missing_fill.__setitem__(slice(None), 1e308), "overflows"),
        (lambda t: setattr(t, "missing_fill", t.missing_fill.astype(np.float32)), "missing_fill"),
        (
            lambda t: t.__dict__.__setitem__("weight_missing", np.zeros(len(t.weight_value))),
            "exclude",
        ),
        (lambda t: t.__dict__.__setitem__("missing_fill", None), "weight_missing"),
    ],
)
def test_edited_compact_terms_are_refused_on_unpickling(rng, edit, match):
    tree = ref.random_tree(rng, 4, split_prob=1.0, max_depth=2)
    tree = _compact(tree, rng.normal(size=4))
    tree.weight_value[:] = 10.0  # products of 1e308 overflow
    edit(tree)
    with pytest.raises(ValueError, match=match):
        pickle.loads(pickle.dumps(tree))


# ------------------------------------------------------------------- the fold
def test_fold_gives_the_augmented_trees_margins(rng):
    X = _with_nan(rng, rng.normal(size=(400, 6)), rate=0.25)
    X[:, 2] = rng.normal(size=400)  # one feature without NaN: no indicator
    missing = MissingValues.from_data(X)
    assert missing.columns.tolist() == [0, 1, 3, 4, 5]
    inputs = missing.augment(X)
    assert inputs.shape == (400, 11) and not np.isnan(inputs).any()
    np.testing.assert_array_equal(inputs[:, 6:], np.isnan(X[:, [0, 1, 3, 4, 5]]))
    trained = [ref.random_tree(rng, 11, 2, max_depth=5, density=0.6) for _ in range(3)]
    folded = [missing.fold(t) for t in trained]
    assert all(t.n_features == 6 for t in folded)
    assert np.array_equal(ref.apply(folded, X), ref.apply(trained, inputs))
    assert np.array_equal(
        traversal.apply(ObliqueForest.from_trees(folded), X),
        traversal.apply(ObliqueForest.from_trees(trained), inputs),
    )
    # unfold is the inverse: the same margins on the augmented inputs
    again = [missing.unfold(t) for t in folded]
    assert np.array_equal(ref.apply(again, inputs), ref.apply(trained, inputs))


def test_augment_sparse_keeps_implicit_zeros(rng):
    dense = np.where(rng.random((50, 8)) < 0.7, 0.0, rng.normal(size=(50, 8)))
    dense[rng.random(dense.shape) < 0.1] = np.nan
    X = sp.csr_matrix(dense)  # NaN entries are stored explicitly
    missing = MissingValues.from_data(X)
    np.testing.assert_array_equal(missing.columns, np.flatnonzero(np.isnan(dense).any(axis=0)))
    np.testing.assert_allclose(missing.fill, np.nanmean(dense, axis=0))
    out = missing.augment(X)
    assert sp.issparse(out)
    np.testing.assert_allclose(out.toarray(), MissingValues.from_data(dense).augment(dense))


def test_observed_moments_and_nan_columns(rng):
    X = _with_nan(rng, rng.normal(size=(100, 4)))
    X[:, 3] = np.nan
    w = rng.random(100)
    mean, std = observed_moments(X, w)
    for j in range(3):
        seen = ~np.isnan(X[:, j])
        m = np.average(X[seen, j], weights=w[seen])
        assert mean[j] == pytest.approx(m)
        assert std[j] == pytest.approx(np.sqrt(np.average((X[seen, j] - m) ** 2, weights=w[seen])))
    assert mean[3] == 0 and std[3] == 0
    assert nan_columns(X).tolist() == [True] * 4
    assert not nan_columns(np.ones((3, 2))).any()


def test_no_nan_means_no_copy(rng):
    X = rng.normal(size=(20, 3))
    missing = MissingValues.from_data(X)
    assert missing.augment(X) is X and missing.n_inputs == 3
    np.testing.assert_allclose(missing.fill, X.mean(axis=0))


# ------------------------------------------------------- which features get indicators
def _informative_data(rng, n=600):
    """Features 0-1 missing at random, 2-3 missing where the target is high."""
    X = rng.normal(size=(n, 5))
    t = X[:, 4] + 0.5 * rng.normal(size=n)
    X[rng.random(n) < 0.3, 0] = np.nan
    X[rng.random(n) < 0.1, 1] = np.nan
    X[(t > 0.5) & (rng.random(n) < 0.6), 2] = np.nan
    X[t > 1.2, 3] = np.nan
    return X, t


def test_informative_columns_classification_is_the_g_test(rng):
    X, t = _informative_data(rng)
    y = np.digitize(t, [-0.5, 0.5])  # 3 classes
    miss = np.isnan(X)
    p = np.array(
        [
            stats.chi2_contingency(
                [np.bincount(y[m], minlength=3), np.bincount(y[~m], minlength=3)],
                correction=False,
                lambda_="log-likelihood",
            ).pvalue
            for m in miss.T[:4]
        ]
    )
    want = np.flatnonzero(p < INDICATOR_ALPHA / 4)
    assert want.tolist() == [2, 3]  # the data make the point: only 2 and 3 depend on y
    assert informative_columns(X, y).tolist() == want.tolist()
    assert informative_columns(sp.csr_matrix(X), y).tolist() == want.tolist()
    # labels of any kind; frequency weights equal repeated rows
    assert informative_columns(X, np.array(["a", "b", "c"])[y]).tolist() == want.tolist()
    w = rng.integers(0, 3, size=X.shape[0]).astype(float)
    repeated = np.repeat(np.arange(X.shape[0]), w.astype(int))
    assert (
        informative_columns(X, y, w).tolist()
        == informative_columns(X[repeated], y[repeated]).tolist()
    )


def test_informative_columns_regression_is_the_f_test(rng):
    X, t = _informative_data(rng)
    miss = np.isnan(X)
    p = np.array([stats.f_oneway(t[m], t[~m]).pvalue for m in miss.T[:4]])
    want = np.flatnonzero(p < INDICATOR_ALPHA / 4)
    assert want.tolist() == [2, 3]
    assert informative_columns(X, t, classification=False).tolist() == want.tolist()
    assert informative_columns(sp.csr_matrix(X), t, classification=False).tolist() == [2, 3]
    # two outputs: the smaller p-value, times 2
    T = np.column_stack([t, rng.normal(size=t.shape[0])])
    got = informative_columns(X, T, classification=False)
    assert got.tolist() == np.flatnonzero(2 * p < INDICATOR_ALPHA / 4).tolist()


def test_from_data_gives_indicators_only_where_missingness_is_informative(rng):
    X, t = _informative_data(rng)
    y = (t > 0).astype(int)
    assert MissingValues.from_data(X).columns.tolist() == [0, 1, 2, 3]  # no target: all
    assert MissingValues.from_data(X, None, y).columns.tolist() == [2, 3]
    assert MissingValues.from_data(X, None, y, indicators=False).columns.size == 0
    X_mcar = _with_nan(rng, rng.normal(size=(600, 6)))
    assert MissingValues.from_data(X_mcar, None, y).columns.size == 0
