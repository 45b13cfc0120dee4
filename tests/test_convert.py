"""from_sklearn: converted scikit-learn models predict exactly like the originals."""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from obliquetrees.convert import from_sklearn

CLASSIFIERS = [
    DecisionTreeClassifier(random_state=0),
    RandomForestClassifier(n_estimators=15, random_state=0),
    ExtraTreesClassifier(n_estimators=15, random_state=0),
]
REGRESSORS = [
    DecisionTreeRegressor(max_depth=8, random_state=0),
    RandomForestRegressor(n_estimators=10, random_state=0),
    ExtraTreesRegressor(n_estimators=10, max_depth=10, random_state=0),
]


def _check_same_predictions(model, converted, X):
    np.testing.assert_array_equal(converted.predict(X), model.predict(X))
    sk_apply = model.apply(X)
    ours = converted.apply(X)
    np.testing.assert_array_equal(ours, sk_apply.reshape(ours.shape))
    sk_path = model.decision_path(X)
    sk_path = sk_path[0] if isinstance(sk_path, tuple) else sk_path
    assert (converted.decision_path(X)[0] != sk_path).nnz == 0
    for tree in converted.trees_:
        tree.check_invariants()


@pytest.mark.parametrize("model", CLASSIFIERS, ids=lambda m: type(m).__name__)
def test_classifiers_on_letter(model, shared_data):
    data = shared_data("letter")
    model = model.fit(data["X_train"][:6000], data["y_train"][:6000])
    converted = from_sklearn(model, n_jobs=2)
    X = data["X_test"]
    _check_same_predictions(model, converted, X)
    np.testing.assert_allclose(converted.predict_proba(X), model.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(converted.classes_, model.classes_)


@pytest.mark.parametrize("model", REGRESSORS, ids=lambda m: type(m).__name__)
def test_regressors_on_cpu_act(model, shared_data):
    data = shared_data("cpu_act")
    X, y = data["X"], data["y"]
    model = model.fit(X[:5000], y[:5000])
    converted = from_sklearn(model)
    _check_same_predictions(model, converted, X[5000:])


def test_bundled_data_float64_input_is_cast_like_sklearn():
    X, y = load_iris(return_X_y=True)
    # thresholds lie between float32 values: float64 input must be cast first
    X = X + 1e-9
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    _check_same_predictions(model, from_sklearn(model), X)
    Xd, yd = load_diabetes(return_X_y=True)
    reg = DecisionTreeRegressor(random_state=0).fit(Xd, yd)
    np.testing.assert_array_equal(from_sklearn(reg).predict(Xd), reg.predict(Xd))


def test_multi_output_regressor():
    X, y = load_diabetes(return_X_y=True)
    Y = np.column_stack([y, -y])
    model = RandomForestRegressor(n_estimators=4, random_state=0).fit(X, Y)
    converted = from_sklearn(model)
    np.testing.assert_allclose(converted.predict(X), model.predict(X), rtol=1e-12)


def test_rejects_unsupported_models():
    X, y = load_iris(return_X_y=True)
    with pytest.raises(TypeError, match="from_sklearn supports"):
        from_sklearn(KNeighborsClassifier().fit(X, y))
    with pytest.raises(ValueError, match="Multi-output classifiers"):
        from_sklearn(DecisionTreeClassifier().fit(X, np.column_stack([y, y])))
    with pytest.raises(Exception, match="not fitted"):
        from_sklearn(RandomForestClassifier())
