"""Same ``random_state`` => the same model, whatever ``n_jobs`` and joblib backend.

Also: forests build unchanged on a dask.distributed cluster through joblib's
dask backend (the scale-out path), with predictions identical to n_jobs=1.
"""

import joblib
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression

from tests._helpers import TREE_MODEL_ARRAYS
from tests.test_common import FAST_PARAMS, discover_estimators

PARALLEL = [cls for cls in discover_estimators() if "n_jobs" in cls().get_params()]
# n_estimators=1 is a single tree
FOREST_PARAMS = {"E2EDTClassifier": dict(n_estimators=3), "E2EDTRegressor": dict(n_estimators=3)}


def _make(cls, **params):
    return cls(
        **{
            **FAST_PARAMS.get(cls.__name__, {}),
            **FOREST_PARAMS.get(cls.__name__, {}),
            "random_state": 7,
            **params,
        }
    )


def _data(cls):
    if is_classifier(cls()):
        return make_classification(200, 6, n_informative=4, n_classes=3, random_state=1)
    return make_regression(200, 6, noise=0.5, random_state=1)


def _state(model, X):
    """Every fitted array and the predictions, as bytes."""
    trees = model.trees_ if hasattr(model, "trees_") else [model.tree_]
    arrays = [getattr(t, name).tobytes() for t in trees for name in TREE_MODEL_ARRAYS]
    output = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    return arrays, output.tobytes()


@pytest.mark.parametrize("cls", PARALLEL, ids=lambda c: c.__name__)
def test_same_model_for_any_n_jobs_and_backend(cls):
    X, y = _data(cls)
    reference = _state(_make(cls, n_jobs=1).fit(X, y), X)
    assert _state(_make(cls, n_jobs=2).fit(X, y), X) == reference
    for backend in ("threading", "loky", "multiprocessing"):
        with joblib.parallel_backend(backend, n_jobs=2):
            assert _state(_make(cls, n_jobs=2).fit(X, y), X) == reference, backend


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow
@pytest.mark.parametrize("cls", PARALLEL, ids=lambda c: c.__name__)
def test_dask_backend_builds_the_same_forest(cls, dask_client):
    X, y = _data(cls)
    reference = _state(_make(cls, n_jobs=1).fit(X, y), X)
    with joblib.parallel_backend("dask"):
        distributed_model = _make(cls, n_jobs=-1).fit(X, y)
    assert _state(distributed_model, X) == reference


#: Forests whose trees are built independently by joblib tasks (hinge forests
#: train all trees jointly in one process, so dask has nothing to ship).
JOBLIB_FORESTS = [
    cls
    for cls in PARALLEL
    if cls.__name__ in ("CO2ForestClassifier", "E2EDTClassifier", "E2EDTRegressor")
]


@pytest.mark.slow
@pytest.mark.parametrize("cls", JOBLIB_FORESTS, ids=lambda c: c.__name__)
def test_dask_backend_ships_the_training_data_once(cls, dask_client, monkeypatch):
    # joblib's dask backend scatters each large argument object once per
    # Parallel call and hands the workers a future; this holds only if every
    # tree's task receives the *same* X object (no per-tree copies or slices).
    # A fit of several Parallel calls (CO2's pilot trees at each margin, then
    # the rest: 6 trees > AUTO_PILOT_TREES) broadcasts its arrays once up front
    import distributed

    scattered = []
    original = distributed.Client.scatter

    def recording_scatter(self, data, *args, **kwargs):
        # one object per call, or a list of them (the up-front broadcast)
        scattered.extend(data if isinstance(data, list) else [data])
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "scatter", recording_scatter)
    X, y = _data(cls)
    n_trees = 6
    with joblib.parallel_backend("dask"):
        _make(cls, n_jobs=-1, n_estimators=n_trees).fit(X, y)
    arrays = [d for d in scattered if hasattr(d, "nbytes")]
    assert any(a.shape == X.shape for a in arrays), "X was not scattered to the workers"
    assert len({id(a) for a in arrays}) == len(arrays), "an argument was scattered twice"
    # X in the user's dtype and at most one internal (standardised) copy of it
    assert sum(a.nbytes for a in arrays) <= 2.5 * X.nbytes, [a.shape for a in arrays]
    assert sum(a.nbytes >= X.nbytes / 2 and a.ndim == 2 for a in arrays) <= 2


@pytest.mark.slow
def test_dask_backend_fits_the_same_data_again_after_the_first_model_is_gone(dask_client):
    # the training arrays are broadcast once per fit under keys of their own: keyed by a hash
    # of their contents, the first fit's futures, released when its backend is collected,
    # would cancel the second fit's tasks ("lost dependencies")
    import gc

    cls = JOBLIB_FORESTS[0]
    X, y = _data(cls)
    reference = _state(_make(cls, n_jobs=1).fit(X, y), X)
    with joblib.parallel_backend("dask"):
        for _ in range(3):
            model = _make(cls, n_jobs=-1).fit(X, y)
            assert _state(model, X) == reference
            del model
            gc.collect()
