"""The fitted hinge forest is packed tree by tree (``to_forest``): same arrays, bounded peak."""

import tracemalloc

import numpy as np
import pytest

from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.missing import MissingValues
from obliquetrees._core.tree import ARRAY_NAMES
from obliquetrees.hinge import _forward as HF
from obliquetrees.hinge import training as H
from tests.hinge.test_training import _params

#: the small classifier of the training tests, with these forests' shape and patience
_SHAPE = dict(n_estimators=6, max_depth=4, n_iter_no_change=5)


def _model(rng, tree_type="tree", n_trees=6, p=6, depth=4, n_out=3):
    params = _params(
        **{**_SHAPE, "tree_type": tree_type, "n_estimators": n_trees, "max_depth": depth}
    )
    X = rng.normal(size=(50, p)) * 2 + 1
    model = H.init_model(p, n_out, params, X.mean(0), X.std(0), seed=int(rng.integers(1000)))
    model.W = rng.normal(size=model.W.shape)
    model.bn_mean = rng.normal(size=model.bn_mean.shape)
    model.bn_var = rng.uniform(0.5, 2.0, size=model.bn_var.shape)
    return model, X


def _assert_same_forest(a, b):
    for name in ARRAY_NAMES + ("node_offset", "weight_offset"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a.n_features == b.n_features


@pytest.mark.parametrize("tree_type", ["tree", "fern"])
@pytest.mark.parametrize("case", ["plain", "constant feature", "missing indicators"])
def test_to_forest_packs_exactly_the_folded_trees(rng, tree_type, case):
    model, X = _model(rng, tree_type)
    fold = None
    if case == "constant feature":  # its weights are dropped: fewer than the packing bound
        model.x_ignored[2] = True
    elif case == "missing indicators":  # inputs 4, 5 indicate NaN in features 0, 2: merged
        fold = MissingValues(rng.normal(size=4), np.array([0, 2])).fold
    counts = HF.leaf_counts(model, X, rng.uniform(0.5, 2, size=X.shape[0]))
    trees = HF.to_trees(model, counts, value_scale=1.5)
    expected = ObliqueForest.from_trees([fold(t) for t in trees] if fold else trees)
    got = HF.to_forest(model, counts, value_scale=1.5, fold=fold)
    _assert_same_forest(got, expected)
    if case != "plain":
        assert got.weight_index.shape[0] < model.n_trees * (2**model.depth - 1) * X.shape[1]


def _forest_bytes(forest):
    """Bytes of the arrays the forest stores (not the offsets)."""
    return forest.nbytes - forest.node_offset.nbytes - forest.weight_offset.nbytes


def test_to_forest_peak_is_about_the_forest(rng):
    # the unpacked trees beside their packed copy would take twice the forest; the
    # slack is one tree's temporaries and the validation's per-weight flags
    model, X = _model(rng, n_trees=40, p=30, depth=6)
    counts = HF.leaf_counts(model, X, np.ones(X.shape[0]))
    one_tree = _forest_bytes(ObliqueForest.from_trees(HF.to_trees(model, counts)[:1]))
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        forest = HF.to_forest(model, counts)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    size = _forest_bytes(forest)
    assert size > 20 * one_tree
    assert peak < 1.2 * size, (peak, size, one_tree)


def test_to_forest_result_passes_the_forest_checks(rng):
    model, X = _model(rng, "fern")
    forest = HF.to_forest(model, HF.leaf_counts(model, X, np.ones(X.shape[0])))
    forest.check_invariants()
    assert forest.n_trees == model.n_trees


def test_to_forest_checks_each_tree(rng):
    model, X = _model(rng)
    model.W[2, 3, 0] = np.nan  # a non-finite leaf value is refused, not stored
    with pytest.raises(ValueError, match="Invalid tree: value contains NaN"):
        HF.to_forest(model, HF.leaf_counts(model, X, np.ones(X.shape[0])))


@pytest.mark.parametrize("layout", ["C", "F"])
def test_fit_epochs_standardising_in_place_changes_nothing_but_x(layout):
    results = []
    for overwrite in (False, True):
        model, X = _model(np.random.default_rng(7))
        X = np.asarray(X, order=layout)
        original = X.copy()
        y = np.arange(X.shape[0]) % 3
        params = _params(**_SHAPE, max_epochs=2, batch_size=8)
        H.fit_epochs(model, X, y, np.ones(X.shape[0]), params, seed=3, overwrite_X=overwrite)
        # only a C-contiguous float64 X given to be overwritten holds the standardised input
        if overwrite and layout == "C":
            np.testing.assert_array_equal(X, (original - model.x_mean) / model.z_scale())
        else:
            np.testing.assert_array_equal(X, original)
        results.append([model.W, model.thr, model.A, model.bn_mean, model.bn_var])
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "params",
    [
        dict(),
        dict(tree_type="fern", head="linear"),
        dict(n_hinge_features=None, max_depth=5),
    ],
)
def test_projected_bytes_cover_the_fitted_model(params):
    from sklearn.datasets import make_classification

    from obliquetrees import HingeForestClassifier

    X, y = make_classification(300, 12, n_informative=6, n_classes=3, random_state=0)
    kw = dict(n_estimators=7, max_depth=4, max_epochs=1, random_state=0)
    kw.update(n_hinge_features=100, feature_screening=False)  # one forest, as projected
    est = HingeForestClassifier(**{**kw, **params}).fit(X, y)

    forest = _forest_bytes(est.forest_)
    m = est._model
    per_tree_state = [m.W, m.thr, m.feat, est._leaf_counts] + [
        m.opt_state[k] for k in ("W_1", "W_2", "thr_1", "thr_2")
    ]
    state = sum(a.nbytes for a in per_tree_state)
    projected = est._projected_bytes(X.shape[1], 3)
    dense_buffer = (2 ** (est.max_depth + 1) - 1) * X.shape[1] * 8
    # the stored trees (weights with their feature ids; no NaN in training: compact
    # missing-value terms, one fill per feature) and the per-tree training state
    # exactly, plus one tree's dense buffer (the linear layer and head are left out)
    assert projected - dense_buffer == forest + state


def _fitted_hinge(**params):
    from sklearn.datasets import make_classification

    from obliquetrees import HingeForestClassifier

    X, y = make_classification(300, 8, n_informative=5, n_classes=3, random_state=0)
    kw = dict(n_estimators=5, max_depth=3, max_epochs=2, random_state=0)
    return HingeForestClassifier(**{**kw, **params}).fit(X, y), X, y


def test_fit_keeps_leaf_counts_and_stores_the_trees_on_first_access():
    est, X, _ = _fitted_hinge()
    assert "forest_" not in est.__dict__  # fit did not store them
    est.predict(X)
    assert "forest_" not in est.__dict__  # prediction runs the hinge model
    expected = HF.to_forest(est._model, est._leaf_counts, fold=est._missing.fold)
    got = est.forest_
    assert est.__dict__["forest_"] is got and est.trees_[0].n_features == X.shape[1]
    _assert_same_forest(got, expected)
    np.testing.assert_array_equal(
        est._leaf_counts, HF.leaf_counts(est._model, X, np.ones(X.shape[0]))
    )


def test_pickles_leave_the_trees_out_and_rebuild_them(tmp_path):
    import pickle

    est, X, _ = _fitted_hinge()
    forest = est.forest_
    state = est.__getstate__()
    assert "forest_" not in state and "forest_" not in state.get("_obliquetrees_containers", {})
    loaded = pickle.loads(pickle.dumps(est))
    _assert_same_forest(loaded.forest_, forest)
    np.testing.assert_array_equal(loaded.apply(X), est.apply(X))
    # a model pickled before (its forest_, no leaf counts) keeps its trees
    old = pickle.loads(pickle.dumps(est))
    del old.__dict__["_leaf_counts"]
    assert "forest_" in old.__getstate__()["_obliquetrees_containers"]
    again = pickle.loads(pickle.dumps(old))
    _assert_same_forest(again.__dict__["forest_"], forest)
    # tampered leaf counts are refused when the trees are built (at load)
    bad = pickle.loads(pickle.dumps(est))
    bad._leaf_counts = bad._leaf_counts[:, :-1]
    with pytest.raises(ValueError, match="_leaf_counts"):
        pickle.loads(pickle.dumps(bad))


def test_refitting_drops_the_stored_trees():
    est, X, y = _fitted_hinge(warm_start=True)
    before = est.forest_
    est.set_params(max_epochs=1).fit(X, y)
    assert "forest_" not in est.__dict__
    assert not np.array_equal(est.forest_.bias, before.bias)
    est.partial_fit(X, y)
    assert "forest_" not in est.__dict__
