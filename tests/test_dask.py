"""obliquetrees.dask: CO2 and E2EDT forests fitted on dask collections, on a small LocalCluster.

With ``bootstrap=False`` and ``rows_per_tree=None`` every tree gathers all
rows, and the model must be the in-memory fit bit for bit (the dask fit runs
the same training step on the same rows with the same seeds); with a
bootstrap of fewer rows, the same ``random_state`` and partitioning must give
the same model.
"""

import pickle

import numpy as np
import pytest

distributed = pytest.importorskip(
    "distributed", reason="the dask estimators fit on dask.distributed (the test extra has it)"
)
da = pytest.importorskip("dask.array", reason="dask collections come from dask.array")

from sklearn.base import clone, is_classifier  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

import obliquetrees  # noqa: E402
from obliquetrees import (  # noqa: E402
    CO2ForestClassifier,
    CO2ForestRegressor,
    E2EDTClassifier,
    E2EDTRegressor,
    HingeForestClassifier,
)
from obliquetrees.dask import (  # noqa: E402
    DaskCO2ForestClassifier,
    DaskCO2ForestRegressor,
    DaskE2EDTClassifier,
    DaskE2EDTRegressor,
)
from obliquetrees.utils.estimator_checks import expected_failed_checks  # noqa: E402

FAST = {
    DaskCO2ForestClassifier: dict(n_estimators=3, max_cccp_iter=5),
    DaskCO2ForestRegressor: dict(n_estimators=3, max_cccp_iter=5),
    DaskE2EDTClassifier: dict(n_estimators=2, bootstrap=True, max_depth=3, max_epochs=3),
    DaskE2EDTRegressor: dict(n_estimators=2, bootstrap=True, max_depth=3, max_epochs=3),
}
LOCAL = {
    DaskCO2ForestClassifier: CO2ForestClassifier,
    DaskCO2ForestRegressor: CO2ForestRegressor,
    DaskE2EDTClassifier: E2EDTClassifier,
    DaskE2EDTRegressor: E2EDTRegressor,
}


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


def _data(cls, n=400, nan=False):
    if is_classifier(cls()):
        X, y = make_classification(n, 6, n_informative=4, n_classes=3, random_state=0)
    else:
        X, y = make_regression(n, 6, noise=1.0, random_state=0)
    if nan:
        X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    return X, y


def _output(model, X):
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


#: Rows of every block of X computed (in-process workers: the module is shared).
_COMPUTED = []


def _record_block(block):
    if block.size:  # not dask's meta probe
        _COMPUTED.append(block.shape[0])
    return block


@pytest.mark.parametrize("cls", list(FAST))
def test_every_row_without_bootstrap_is_the_in_memory_fit(cls, client):
    X, y = _data(cls, nan=True)
    weight = np.random.default_rng(1).uniform(0.5, 2.0, X.shape[0])
    chunks = 130  # uneven partitions, and X split over its columns too
    Xd, yd = da.from_array(X, chunks=(chunks, 4)), da.from_array(y, chunks=chunks)
    wd = da.from_array(weight, chunks=chunks)
    params = dict(FAST[cls], random_state=0, bootstrap=False)
    model = cls(rows_per_tree=None, **params).fit(Xd, yd, sample_weight=wd)
    local = LOCAL[cls](**params).fit(X, y, sample_weight=weight)
    np.testing.assert_array_equal(_output(model, X), _output(local, X))
    assert type(model.to_local()) is LOCAL[cls]
    assert model.to_local().get_params() == local.get_params()


def test_same_random_state_and_partitioning_give_the_same_model(client):
    X, y = _data(DaskCO2ForestClassifier)
    Xd, yd = da.from_array(X, chunks=(100, 6)), da.from_array(y, chunks=100)
    params = dict(FAST[DaskCO2ForestClassifier], rows_per_tree=150)
    first = DaskCO2ForestClassifier(random_state=3, **params).fit(Xd, yd)
    second = DaskCO2ForestClassifier(random_state=3, **params).fit(Xd, yd)
    other = DaskCO2ForestClassifier(random_state=4, **params).fit(Xd, yd)
    np.testing.assert_array_equal(first.predict_proba(X), second.predict_proba(X))
    assert not np.array_equal(first.predict_proba(X), other.predict_proba(X))
    assert first.score(X, y) > 0.6
    # every class known to every tree, whichever rows it drew
    assert first.forest_.n_outputs == 3
    # each tree's root weighs its 150 draws with replacement (a bootstrap of all rows)
    roots = first.forest_.n_node_samples[first.forest_.node_offset[:-1]]
    np.testing.assert_array_equal(roots, 150.0)


@pytest.mark.parametrize("cls", [DaskCO2ForestClassifier, DaskCO2ForestRegressor])
def test_auto_margin_is_margin_zero_on_dask(cls, client):
    # no tree receives out-of-bag rows, so no pilot can choose the margin
    X, y = _data(cls)
    Xd, yd = da.from_array(X, chunks=(100, 6)), da.from_array(y, chunks=100)
    params = dict(FAST[cls], rows_per_tree=150, random_state=3)
    auto = cls(oblique_penalty="auto", **params).fit(Xd, yd)
    zero = cls(oblique_penalty=0.0, **params).fit(Xd, yd)
    np.testing.assert_array_equal(_output(auto, X), _output(zero, X))
    assert auto.oblique_penalty_ == zero.oblique_penalty_ == 0.0


def test_predictions_are_lazy_blockwise_and_equal_numpy(client):
    X, y = _data(DaskCO2ForestClassifier)
    model = DaskCO2ForestClassifier(random_state=0, **FAST[DaskCO2ForestClassifier])
    model.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100))
    computed = _COMPUTED
    computed.clear()
    Xd = da.from_array(X, chunks=(100, 6)).map_blocks(_record_block, dtype=X.dtype)
    local = model.to_local()
    lazy = {
        "predict": model.predict(Xd),
        "predict_proba": model.predict_proba(Xd),
        "apply": model.apply(Xd),
    }
    assert not computed  # nothing ran: the results are graphs
    for method, result in lazy.items():
        assert isinstance(result, da.Array), method
        np.testing.assert_array_equal(result.compute(), getattr(local, method)(X))
    assert computed and max(computed) == 100  # block by block
    # in-memory input: numpy out, as the ordinary class
    np.testing.assert_array_equal(model.predict(X), local.predict(X))


def test_dataframe_input_keeps_feature_names(client, monkeypatch):
    import obliquetrees.dask as dask_module

    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe", reason="dask.dataframe needs pyarrow")
    X, y = _data(DaskCO2ForestRegressor)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    Xd = dd.from_pandas(frame, npartitions=3)
    yd = dd.from_pandas(pd.Series(y), npartitions=3)
    params = dict(FAST[DaskCO2ForestRegressor], random_state=0, bootstrap=False)
    model = DaskCO2ForestRegressor(rows_per_tree=None, **params).fit(Xd, yd)
    local = CO2ForestRegressor(**params).fit(frame, y)
    assert list(model.feature_names_in_) == list(frame.columns)
    np.testing.assert_array_equal(model.predict(frame), local.predict(frame))
    lazy = model.predict(Xd)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), local.predict(frame))
    # streamed group of trees by group of trees (a frame's partitions are read once, kept)
    largest = max(dask_module._tree_bytes(tree) for tree in model._forest().trees)
    monkeypatch.setattr(dask_module, "_least_free_memory", lambda client: 5 * largest)
    np.testing.assert_array_equal(model.predict(Xd).compute(), local.predict(frame))


def test_pickle_and_numpy_fit(client):
    X, y = _data(DaskE2EDTClassifier)
    model = DaskE2EDTClassifier(random_state=0, client=client, **FAST[DaskE2EDTClassifier])
    model.fit(da.from_array(X, chunks=150), da.from_array(y, chunks=150))
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.client is None and model.client is client
    assert clone(model).client is client  # shared, not copied
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    local = pickle.loads(pickle.dumps(model.to_local()))
    np.testing.assert_array_equal(local.predict_proba(X), model.predict_proba(X))
    # numpy input: the ordinary in-memory fit
    params = dict(FAST[DaskE2EDTClassifier], random_state=0)
    in_memory = DaskE2EDTClassifier(**params).fit(X, y)
    ordinary = E2EDTClassifier(**params).fit(X, y)
    np.testing.assert_array_equal(in_memory.predict_proba(X), ordinary.predict_proba(X))


def test_clear_errors_leave_the_estimator_unchanged(client):
    X, y = _data(DaskCO2ForestRegressor)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    model = DaskCO2ForestRegressor(random_state=0, **FAST[DaskCO2ForestRegressor]).fit(Xd, yd)
    before = model.predict(X)
    bad_y = y.copy()
    bad_y[350] = np.nan  # in the last partition only: found by the worker that reads it
    with pytest.raises(ValueError, match="y contains NaN"):
        model.fit(Xd, da.from_array(bad_y, chunks=100))
    bad_X = X.copy()
    bad_X[5, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        model.fit(da.from_array(bad_X, chunks=100), yd)
    with pytest.raises(ValueError, match="partitioned alike"):
        model.fit(Xd, da.from_array(y, chunks=150))
    with pytest.raises(TypeError, match="all as dask collections"):
        model.fit(Xd, y)
    with pytest.raises(TypeError, match="sample_weight not"):
        model.fit(Xd, yd, sample_weight=np.ones(len(y)))
    with pytest.raises(ValueError, match="needs bootstrap=True"):
        DaskCO2ForestRegressor(bootstrap=False, max_samples=10).fit(Xd, yd)
    with pytest.raises(ValueError, match="rows_per_tree gives"):
        DaskCO2ForestRegressor(max_samples=10).fit(Xd, yd)
    with pytest.raises(ValueError, match="none out of bag"):
        DaskCO2ForestRegressor(oblique_penalty=1.0, oblique_test="out_of_bag").fit(Xd, yd)
    with pytest.raises(ValueError, match="oob_score=True"):
        DaskCO2ForestRegressor(oob_score=True).fit(Xd, yd)
    np.testing.assert_array_equal(model.predict(X), before)


def test_routes_that_have_no_dask_fit_say_so(client):
    X, y = _data(DaskCO2ForestClassifier, n=60)
    Xd, yd = da.from_array(X, chunks=30), da.from_array(y, chunks=30)
    with pytest.raises(AttributeError, match="in memory on X.compute"):
        obliquetrees.dask.DaskHingeForestClassifier  # noqa: B018
    with pytest.raises(TypeError, match="no dask route"):
        HingeForestClassifier().fit(Xd, yd)
    with pytest.raises(TypeError, match="obliquetrees.dask.DaskCO2ForestClassifier"):
        CO2ForestClassifier().fit(Xd, yd)


def test_sklearn_checks_on_in_memory_input():
    estimator = DaskCO2ForestClassifier(n_estimators=2, max_cccp_iter=2, max_depth=4)
    check_estimator(estimator, expected_failed_checks=expected_failed_checks(estimator))


def test_several_outputs(client):
    X, y = make_regression(300, 5, n_targets=2, random_state=0)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=(100, 1))
    params = dict(FAST[DaskCO2ForestRegressor], random_state=0, bootstrap=False)
    model = DaskCO2ForestRegressor(rows_per_tree=None, **params).fit(Xd, yd)
    local = CO2ForestRegressor(**params).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), local.predict(X))
    lazy = model.predict(Xd)
    assert lazy.shape == (300, 2)
    np.testing.assert_array_equal(lazy.compute(), local.predict(X))


def test_partitions_of_unknown_size(client):
    # a boolean mask leaves dask without the partitions' row counts
    X, y = _data(DaskCO2ForestClassifier, n=300)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    keep = Xd[:, 0] > -np.inf
    params = dict(FAST[DaskCO2ForestClassifier], random_state=0, bootstrap=False)
    model = DaskCO2ForestClassifier(rows_per_tree=None, **params).fit(Xd[keep], yd[keep])
    local = CO2ForestClassifier(**params).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), local.predict_proba(X))
    np.testing.assert_array_equal(model.predict(Xd[keep]).compute(), local.predict(X))


@pytest.mark.parametrize("cls", [DaskCO2ForestRegressor, DaskE2EDTRegressor])
def test_monotonic_constraints_hold_on_the_dask_route(client, cls):
    from tests._helpers import monotone_violations

    X, y = make_regression(400, 6, noise=1.0, random_state=0)
    cst = [1, 0, -1, 0, 0, 0]
    model = cls(monotonic_cst=cst, random_state=0, **FAST[cls])
    model.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100))
    assert monotone_violations(model.to_local().predict, X, cst, n_lines=200) <= 1e-12
    # the trees keep their constraints: a warm start of the local model may not drop them
    local = model.to_local().set_params(warm_start=True, monotonic_cst=None)
    with pytest.raises(ValueError, match="needs the monotonic_cst of the previous fit"):
        local.set_params(n_estimators=local.n_estimators + 1).fit(X, y)
    if cls is DaskCO2ForestRegressor:  # grown node by node: the joined tree is ordered
        model.set_params(rows_per_task=60).fit(
            da.from_array(X, chunks=100), da.from_array(y, chunks=100)
        )
        assert model.trees_[0].max_depth > 3
        assert monotone_violations(model.to_local().predict, X, cst, n_lines=200) <= 1e-12
    with pytest.raises(ValueError, match="monotonic_cst has shape"):
        clone(model).set_params(monotonic_cst=[1, 0]).fit(
            da.from_array(X, chunks=100), da.from_array(y, chunks=100)
        )


def _bootstrap_times(model, lengths):
    """Each tree's draws of every row, recomputed from its seed and the partitions' lengths."""
    from obliquetrees._training.partitions import drawn_rows
    from obliquetrees.dask import _partition_draws
    from obliquetrees.utils.seeds import draw_seeds

    lengths = np.asarray(lengths)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    for seed in draw_seeds(model.random_state, model.n_estimators):
        counts = _partition_draws(seed, lengths, int(lengths.sum()), True)
        times = np.zeros(lengths.sum())
        for p, (start, length) in enumerate(zip(starts, lengths, strict=True)):
            rows, drawn = drawn_rows(seed, p, int(counts[p]), True, int(length))
            times[start + rows] = drawn
        yield times


@pytest.mark.parametrize("cls", [DaskCO2ForestClassifier, DaskCO2ForestRegressor])
@pytest.mark.parametrize("weighted", [False, True])
def test_node_growth_stores_what_its_rows_hold(client, cls, weighted):
    # trees of 1,200 draws, tasks of at most 150 rows: every tree is grown node by node,
    # and every node (above the gathered subtrees and within them) holds the weight and
    # the value of the drawn rows that the fitted model routes to it
    X, y = _data(cls, n=1200, nan=True)
    chunks = (300, 250, 350, 300)
    Xd, yd = da.from_array(X, chunks=(chunks, 6)), da.from_array(y, chunks=(chunks,))
    params = dict(FAST[cls], rows_per_task=150, random_state=0)
    sample_weight, row_weight = None, np.ones(X.shape[0])  # what a row weighs in its nodes
    if weighted:  # sample weights, class weights and a depth limit
        row_weight = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0])
        sample_weight = da.from_array(row_weight, chunks=(chunks,))
        params["max_depth"] = 6
        if is_classifier(cls()):
            params["class_weight"] = {0: 1.0, 1: 2.0, 2: 0.5}
            row_weight = row_weight * np.array([1.0, 2.0, 0.5])[y]
    model = cls(**params).fit(Xd, yd, sample_weight=sample_weight)
    again = cls(**params).fit(Xd, yd, sample_weight=sample_weight)
    np.testing.assert_array_equal(_output(model, X), _output(again, X))
    indicator, offsets = model.to_local().decision_path(X)
    outputs = np.eye(3)[y] if is_classifier(model) else y[:, None]
    for t, times in enumerate(_bootstrap_times(model, chunks)):
        tree = model.trees_[t]
        assert tree.max_depth > 2 and tree.node_count > 20
        assert tree.max_depth <= params.get("max_depth", np.inf)
        paths = indicator[:, offsets[t] : offsets[t + 1]].T.tocsr()
        weight = paths @ (times * row_weight)
        np.testing.assert_allclose(tree.n_node_samples, weight, rtol=1e-12)
        value = paths @ ((times * row_weight)[:, None] * outputs)
        value = value / np.maximum(weight, 1e-300)[:, None]
        np.testing.assert_allclose(tree.value, value, rtol=1e-9, atol=1e-9)


def test_node_growth_is_as_accurate_as_the_in_memory_forest(client):
    X, y = _data(DaskCO2ForestClassifier, n=2400)
    test, train = slice(0, 800), slice(800, None)
    Xd, yd = da.from_array(X[train], chunks=400), da.from_array(y[train], chunks=400)
    params = dict(n_estimators=8, max_cccp_iter=5, random_state=0)
    nodes = DaskCO2ForestClassifier(rows_per_task=400, **params).fit(Xd, yd)
    local = CO2ForestClassifier(**params).fit(X[train], y[train])
    # the trees are not the in-memory ones (standardisation, missing values and the
    # large nodes' splits come from samples), but they learn as much
    assert abs(nodes.score(X[test], y[test]) - local.score(X[test], y[test])) < 0.03
    # no NaN: every part's missing-value terms are the compact form, joined as the
    # training mean (what the in-memory forest stores), so the model is no larger
    assert nodes.forest_.missing_fill is not None
    np.testing.assert_allclose(nodes.forest_.missing_fill, X[train].mean(axis=0), rtol=1e-12)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(max_leaf_nodes=20), "max_leaf_nodes=20 needs each tree's rows in one task"),
        (dict(class_weight="balanced_subsample"), "class_weight='balanced_subsample' needs"),
    ],
)
def test_what_node_growth_cannot_do_is_refused(client, params, match):
    X, y = _data(DaskCO2ForestClassifier)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    model = DaskCO2ForestClassifier(rows_per_task=100, **FAST[DaskCO2ForestClassifier], **params)
    with pytest.raises(ValueError, match=match):
        model.fit(Xd, yd)
    assert not hasattr(model, "classes_")
    model.set_params(rows_per_task=1000).fit(Xd, yd)  # one task per tree: allowed


def test_balanced_class_weight_counts_every_row(client):
    X, y = _data(DaskCO2ForestClassifier)
    y[:300] = 0  # unbalanced
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    params = dict(FAST[DaskCO2ForestClassifier], random_state=0, bootstrap=False)
    model = DaskCO2ForestClassifier(class_weight="balanced", rows_per_tree=None, **params)
    local = CO2ForestClassifier(class_weight="balanced", **params).fit(X, y)
    np.testing.assert_array_equal(model.fit(Xd, yd).predict_proba(X), local.predict_proba(X))


def test_lazy_prediction_refuses_a_model_no_worker_can_hold(client):
    X, y = _data(DaskCO2ForestClassifier)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    model = DaskCO2ForestClassifier(**FAST[DaskCO2ForestClassifier]).fit(Xd, yd)
    # an in-process worker reports this whole process's memory, far above 1 MB
    with (
        distributed.LocalCluster(
            n_workers=1, processes=False, memory_limit="1MB", dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as small,
    ):
        model.set_params(client=small)
        with pytest.raises(ValueError, match="largest tree .* cannot be held by the fullest"):
            model.predict(Xd)
    model.set_params(client=client)
    np.testing.assert_array_equal(model.predict(Xd).compute(), model.predict(X))


@pytest.mark.parametrize(
    "cls, params",
    [
        (DaskCO2ForestClassifier, {}),
        (DaskCO2ForestRegressor, {}),
        (DaskE2EDTClassifier, {"routing": "hard"}),
        (DaskE2EDTRegressor, {"routing": "hard"}),
    ],
)
def test_a_model_larger_than_a_worker_predicts_tree_group_by_group(
    client, monkeypatch, cls, params
):
    import obliquetrees.dask as dask_module

    X, y = _data(cls)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    model = cls(**dict(FAST[cls], n_estimators=5, random_state=0), **params).fit(Xd, yd)
    forest = model._forest()
    largest = max(dask_module._tree_bytes(tree) for tree in forest.trees)
    # the fullest worker can take about 1.5 trees at a time (GROUP_SHARE of them)
    free = int(1.5 * largest * dask_module.GROUP_SHARE)
    monkeypatch.setattr(dask_module, "_least_free_memory", lambda client: free)
    groups = dask_module._tree_groups(forest, free, "predict")
    assert len(groups) >= 3 and groups[0][0] == 0 and groups[-1][1] == forest.n_trees
    assert all(a[1] == b[0] for a, b in zip(groups[:-1], groups[1:], strict=True))  # consecutive
    methods = ["predict", "apply"] + (["predict_proba"] if is_classifier(model) else [])
    read = Xd.map_blocks(_count_block, dtype=Xd.dtype)
    for method in methods:
        lazy = getattr(model, method)(read)
        assert isinstance(lazy, da.Array)
        _BLOCKS_READ.clear()
        # the sum over the trees continues from group to group: the same bits as numpy
        np.testing.assert_array_equal(lazy.compute(), getattr(model.to_local(), method)(X))
        # each group reads X anew, after the group before it: no partition is held throughout
        assert len(_BLOCKS_READ) == len(groups) * Xd.numblocks[0]


#: Blocks of X computed (in-process workers: the module is shared).
_BLOCKS_READ = []


def _count_block(block):
    _BLOCKS_READ.append(block.shape[0])
    return block


def test_tree_groups_refuse_what_cannot_be_streamed(client, monkeypatch):
    import obliquetrees.dask as dask_module

    X, y = _data(DaskE2EDTClassifier)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    params = dict(FAST[DaskE2EDTClassifier], n_estimators=4, random_state=0)
    model = DaskE2EDTClassifier(routing="hybrid", **params).fit(Xd, yd)
    largest = max(dask_module._tree_bytes(tree) for tree in model._forest().trees)
    monkeypatch.setattr(dask_module, "_least_free_memory", lambda client: 3 * largest)
    # hybrid routing's probabilities are soft (path probabilities, not a sum of leaf values)
    with pytest.raises(ValueError, match="the model .* cannot be held .* predict_proba"):
        model.predict_proba(Xd)
    np.testing.assert_array_equal(model.predict(Xd).compute(), model.predict(X))  # hard
    monkeypatch.setattr(dask_module, "_least_free_memory", lambda client: largest)
    with pytest.raises(ValueError, match="largest tree .* cannot be held"):
        model.predict(Xd)


#: Rows gathered by every node task (in-process workers: the module is shared).
_GATHERED = []


def _spy_grow_node(*args):
    from obliquetrees.co2 import _dask_tasks

    pieces = args[6:]
    _GATHERED.append(sum(p[1][0].shape[0] for p in pieces if p[1] is not None))
    return _dask_tasks._GROW_NODE(*args)


def test_node_growth_keeps_tasks_small_and_honours_the_limits(client, monkeypatch):
    from obliquetrees.co2 import _dask_tasks

    X, y = _data(DaskCO2ForestClassifier, n=2000)
    Xd, yd = da.from_array(X, chunks=250), da.from_array(y, chunks=250)
    gathered = _GATHERED
    monkeypatch.setattr(_dask_tasks, "_GROW_NODE", _dask_tasks.grow_node, raising=False)
    monkeypatch.setattr(_dask_tasks, "grow_node", _spy_grow_node)
    params = dict(n_estimators=2, max_cccp_iter=5, random_state=0)
    for extra in ({}, {"min_samples_leaf": 20}, {"min_impurity_decrease": 0.01}):
        gathered.clear()
        nodes = DaskCO2ForestClassifier(rows_per_task=100, **params, **extra).fit(Xd, yd)
        assert 0 < max(gathered) <= 100  # no task of node growth gathered more
        whole = DaskCO2ForestClassifier(rows_per_task=10_000, **params, **extra).fit(Xd, yd)
        # the limits act on the tree as in memory, not on each node's share of it (unscaled,
        # min_samples_leaf=20 left one leaf, min_impurity_decrease=0.01 about 160 against
        # 18); splits chosen on samples of 25 rows take some more leaves
        leaves = [t.n_leaves for t in nodes.trees_]
        expected = [t.n_leaves for t in whole.trees_]
        assert 0.5 * min(expected) <= min(leaves) and max(leaves) <= 2 * max(expected)
        assert abs(nodes.score(X, y) - whole.score(X, y)) < 0.06


def test_node_growth_with_many_draws_per_row(client):
    # 20 draws per row: most rows are drawn many times, and the samples are of rows
    X, y = _data(DaskCO2ForestClassifier, n=300)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    params = dict(FAST[DaskCO2ForestClassifier], rows_per_task=100, random_state=0)
    model = DaskCO2ForestClassifier(rows_per_tree=6000, **params).fit(Xd, yd)
    assert min(t.node_count for t in model.trees_) > 20
    assert model.score(X, y) > 0.9


def test_a_cluster_paused_for_good_fails_the_fit_clearly(client, monkeypatch):
    import obliquetrees.dask as dask_module

    # as if a worker stayed at its memory pause threshold: the fit would wait forever
    monkeypatch.setattr(dask_module, "_stalled_by_a_pause", lambda client: True)
    monkeypatch.setattr(dask_module, "PAUSED_PATIENCE", 1.0)
    X, y = _data(DaskCO2ForestClassifier)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    Xd = Xd.map_blocks(_slow_block, dtype=Xd.dtype)
    model = DaskCO2ForestClassifier(**FAST[DaskCO2ForestClassifier])
    with pytest.raises(MemoryError, match="a worker of the cluster has been paused .* no task"):
        model.fit(Xd, yd)
    assert not hasattr(model, "classes_")


def _slow_block(block):
    import time

    time.sleep(0.0 if block.size == 0 else 5.0)  # still running when the patience ends
    return block
