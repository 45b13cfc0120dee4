"""Parameters of the public functions are validated like the estimators' parameters.

Out-of-range values (NaN, inf, negative counts, wrong types or options)
raise scikit-learn's ``InvalidParameterError`` (a ``ValueError``) naming the
parameter, and fine-tuning never returns a model with non-finite parameters.
"""

import matplotlib
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.utils._param_validation import InvalidParameterError

from obliquetrees import CO2ForestClassifier, export_text, plot_tree
from obliquetrees.convert import from_sklearn
from obliquetrees.machine import (
    finetune,
    refit_leaves,
    relaxed_nll,
    relaxed_squared_error,
    to_machine,
)

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def model(data):
    X, y = data
    return CO2ForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, y)


@pytest.mark.parametrize(
    "name, value",
    [
        ("learning_rate", np.nan),
        ("learning_rate", -0.1),
        ("learning_rate", np.inf),
        ("temperature", (0.1, np.inf)),
        ("temperature", (0.1, 0.01, 0.001)),
        ("eps", np.inf),
        ("epochs", 2.5),
        ("refit_iter", -1),
        ("random_state", -1),
        ("n_jobs", "all"),
    ],
)
def test_finetune_rejects(model, data, name, value):
    X, y = data
    with pytest.raises(ValueError, match=name):
        finetune(model, X, y, **{"epochs": 1, name: value})


@pytest.mark.parametrize(
    "name, value",
    [
        ("temperature", np.nan),
        ("eps", np.nan),
        ("epochs", -1),
        ("batch_size", 0),
        ("support", -2),
        ("support", 1.5),
    ],
)
def test_finetune_still_rejects(model, data, name, value):
    """Rejected before by hand-written checks, which the constraints replaced."""
    X, y = data
    with pytest.raises(ValueError, match=name):
        finetune(model, X, y, **{"epochs": 1, name: value})


@pytest.mark.parametrize("n_iter", [-3, 2.5, None])
def test_refit_leaves_rejects_n_iter(model, data, n_iter):
    X, y = data
    with pytest.raises(InvalidParameterError, match="n_iter"):
        refit_leaves(model, X, y, n_iter=n_iter)


def test_finetune_never_returns_non_finite_parameters(model, data, monkeypatch):
    """A diverging optimisation raises instead of returning an all-NaN model."""
    from obliquetrees._training import _optim

    X, y = data
    original = _optim.adam_update

    def overflowing(param, *args):
        original(param, *args)
        param[:] = np.nan  # what an overflowing step leaves

    monkeypatch.setattr(_optim, "adam_update", overflowing)
    with pytest.raises(ValueError, match="diverged"):
        finetune(model, X, y, epochs=2)


def test_to_machine_rejects_cache(model):
    with pytest.raises(InvalidParameterError, match="cache"):
        to_machine(model, cache="yes")


def test_from_sklearn_rejects_n_jobs(data):
    X, y = data
    rf = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="n_jobs"):
        from_sklearn(rf, n_jobs="all")


@pytest.mark.parametrize(
    "name, value",
    [
        ("decimals", -1),
        ("decimals", 2.5),
        ("max_depth", 1.5),
        ("top_k", 1.5),
        ("show_samples", "no"),
        ("tree_index", 0.0),
        ("class_names", 3),
    ],
)
@pytest.mark.parametrize("function", [export_text, plot_tree], ids=["export_text", "plot_tree"])
def test_report_functions_reject(model, function, name, value):
    import matplotlib.pyplot as plt

    try:
        with pytest.raises(InvalidParameterError, match=name):
            function(model, **{name: value})
    finally:
        plt.close("all")


@pytest.mark.parametrize("name, value", [("fontsize", -1.0), ("image_weights", "signed")])
def test_plot_tree_rejects(model, name, value):
    with pytest.raises(InvalidParameterError, match=name):
        plot_tree(model, **{name: value})


@pytest.mark.parametrize("name, value", [("temperature", np.nan), ("eps", 0.0), ("sigma", "relu")])
def test_relaxed_objectives_reject(model, data, name, value):
    X, y = data
    machine = to_machine(model)
    with pytest.raises(InvalidParameterError, match=name):
        relaxed_nll(machine, X, y, **{"temperature": 0.1, name: value})
    with pytest.raises(InvalidParameterError, match=name):
        relaxed_squared_error(
            machine, X, machine.V[:1].repeat(len(y), axis=0), **{"temperature": 0.1, name: value}
        )
