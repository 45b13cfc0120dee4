"""Every estimator in the scikit-learn workflows users build around it.

Pipelines, grid search with parallel workers, pandas input, metadata routing
of ``sample_weight``, ``clone``, the HTML repr, and the shapes of ``apply``
and ``decision_path``.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn
from scipy import sparse
from sklearn.base import clone, is_classifier
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()
pytestmark = pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)


def _make(cls, **params):
    return cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0, **params})


def _data(cls, n_samples=120):
    if is_classifier(cls()):
        return make_classification(n_samples, 5, n_informative=3, n_redundant=0, random_state=0)
    return make_regression(n_samples, 5, noise=0.1, random_state=0)


def _two_grid_params(cls):
    """Two integer-valued hyper-parameters of ``cls`` with two values each."""
    params = cls().get_params()
    chosen = {}
    for name in ("max_depth", "n_estimators", "max_epochs", "n_restarts", "max_cccp_iter"):
        if name in params and len(chosen) < 2:
            base = FAST_PARAMS.get(cls.__name__, {}).get(name, params[name]) or 3
            chosen[name] = [max(1, int(base) // 2), int(base)]
    assert len(chosen) == 2, f"no two integer parameters to tune on {cls.__name__}"
    return chosen


def test_pipeline_with_scaler(cls):
    X, y = _data(cls)
    pipe = make_pipeline(StandardScaler(), _make(cls)).fit(X, y)
    X_scaled = StandardScaler().fit_transform(X)
    direct = _make(cls).fit(X_scaled, y)
    np.testing.assert_array_equal(pipe.predict(X), direct.predict(X_scaled))


def test_grid_search_parallel(cls):
    X, y = _data(cls)
    grid = GridSearchCV(_make(cls), _two_grid_params(cls), cv=2, n_jobs=2).fit(X, y)
    assert set(grid.best_params_) == set(_two_grid_params(cls))
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))


def test_pandas_dataframe_input_and_column_checks(cls):
    X, y = _data(cls)
    columns = [f"feature_{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=columns)
    model = _make(cls).fit(df, pd.Series(y))
    np.testing.assert_array_equal(model.feature_names_in_, columns)
    np.testing.assert_array_equal(model.predict(df), _make(cls).fit(X, y).predict(X))
    with pytest.warns(UserWarning, match="feature names"):
        model.predict(X)  # fitted with names, given none
    with pytest.raises(ValueError, match="feature names"):
        model.predict(df[columns[::-1]])


def test_sample_weight_through_metadata_routing(cls):
    X, y = _data(cls)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    with sklearn.config_context(enable_metadata_routing=True):
        est = _make(cls).set_fit_request(sample_weight=True)
        pipe = Pipeline(
            [("scale", StandardScaler().set_fit_request(sample_weight=False)), ("model", est)]
        )
        pipe.fit(X, y, sample_weight=weights)
        routed = pipe.predict(X)
    Xs = StandardScaler().fit_transform(X)
    direct = _make(cls).fit(Xs, y, sample_weight=weights).predict(Xs)
    np.testing.assert_array_equal(routed, direct)


def test_clone_keeps_parameters_and_drops_fit(cls):
    X, y = _data(cls)
    model = _make(cls).fit(X, y)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(copy))


def test_html_repr_renders_fitted_and_unfitted(cls):
    X, y = _data(cls)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # evaluating properties must not warn
        assert cls.__name__ in _make(cls)._repr_html_()
        assert cls.__name__ in _make(cls).fit(X, y)._repr_html_()


def test_apply_and_decision_path_shapes_follow_scikit_learn(cls):
    """A single tree (``tree_``: soft trees, E2EDT with one tree) gives
    ``apply`` of shape (n,) and the bare indicator, like DecisionTree*; a
    forest (n, n_trees) and ``(indicator, n_nodes_ptr)``, like RandomForest*,
    also with one tree."""
    X, y = _data(cls, n_samples=60)
    sizes = [None, 1, 2] if "n_estimators" in cls().get_params() else [None]
    for n_estimators in sizes:
        params = {} if n_estimators is None else {"n_estimators": n_estimators}
        est = _make(cls, **params).fit(X, y)
        single = cls.__name__.startswith("SoftTree") or (
            cls.__name__.startswith("E2EDT") and est.n_estimators == 1
        )
        assert ("tree_" in vars(est)) == single, (cls.__name__, n_estimators)
        leaves, path = est.apply(X), est.decision_path(X)
        if single:
            assert leaves.shape == (len(X),) and sparse.issparse(path)
            assert path.shape == (len(X), est.tree_.node_count)
            assert np.all(est.tree_.children_left[leaves] == -1)  # leaves indeed
            assert np.all(path[np.arange(len(X)), leaves] == 1)  # the path ends there
            continue
        indicator, ptr = path
        n_trees = len(est.trees_)
        assert n_trees == est.n_estimators and leaves.shape == (len(X), n_trees)
        assert indicator.shape == (len(X), ptr[-1]) and ptr.shape == (n_trees + 1,)
        for t, tree in enumerate(est.trees_):
            assert np.all(tree.children_left[leaves[:, t]] == -1)
            assert np.all(indicator[np.arange(len(X)), ptr[t] + leaves[:, t]] == 1)
