"""``feature_screening``: the learnt layer reads only the inputs that beat their shadows."""

import pickle

import numpy as np
import pytest
from scipy import sparse
from sklearn.model_selection import train_test_split

from obliquetrees.hinge._estimator import HingeForestClassifier, HingeForestRegressor
from obliquetrees.utils.screening import shadow_screen
from obliquetrees.utils.seeds import draw_seeds

N_INFORMATIVE = 4
FAST = dict(
    n_estimators=16,
    max_depth=4,
    n_hinge_features=16,
    learning_rate=0.02,
    max_epochs=40,
    random_state=0,
)


def _few_relevant(n=600, p=60, seed=0):
    """Labels of a hyperplane in the first ``N_INFORMATIVE`` inputs; the others are noise."""
    X = np.random.default_rng(seed).normal(size=(n, p))
    return X, (X[:, :N_INFORMATIVE] @ np.array([1.0, 1.0, -1.0, 1.0]) > 0).astype(int)


def _fitted_fields(model):
    return (model.n_iter_, model.best_epoch_, model.loss_curve_, model.validation_loss_curve_)


# ------------------------------------------------------------------ the screen
@pytest.mark.parametrize("to_input", [np.asarray, sparse.csr_matrix])
def test_screen_keeps_the_informative_inputs_and_few_others(to_input):
    X, y = _few_relevant()
    keep = shadow_screen(to_input(X), y, np.ones(len(y)), True, seed=0)
    assert keep.shape == (X.shape[1],) and keep.dtype == bool
    assert keep[:N_INFORMATIVE].all()
    assert keep[N_INFORMATIVE:].sum() <= 3  # noise beats every shadow only by chance


@pytest.mark.parametrize("classification", [True, False])
def test_small_sparse_input_screens_as_its_dense_twin(classification, monkeypatch):
    import obliquetrees.utils.screening as screening

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 40)) * (rng.uniform(size=(500, 40)) < 0.3)  # mostly zeros
    score = X[:, :N_INFORMATIVE] @ np.array([1.0, 1.0, -1.0, 1.0])
    y = (score > 0).astype(int) if classification else score
    w = rng.uniform(0.5, 2.0, len(y))
    read = []

    class Spy(screening.ExtraTreesClassifier if classification else screening.ExtraTreesRegressor):
        def fit(self, X, y, sample_weight=None):
            read.append(sparse.issparse(X))
            return super().fit(X, y, sample_weight=sample_weight)

    monkeypatch.setattr(
        screening, "ExtraTreesClassifier" if classification else "ExtraTreesRegressor", Spy
    )
    for seed in range(4):
        dense = shadow_screen(X, y, w, classification, seed)
        np.testing.assert_array_equal(
            shadow_screen(sparse.csr_matrix(X), y, w, classification, seed), dense
        )
    assert read == [False] * 8
    # above the budget the forest reads the sparse matrix (scikit-learn's sparse splitter)
    monkeypatch.setattr(screening, "SCREEN_DENSE_BYTES", 2 * X.size * 8 - 1)
    keep = shadow_screen(sparse.csr_matrix(X), y, w, classification, 0)
    assert read[-1] is True
    assert keep[:N_INFORMATIVE].all() and keep[N_INFORMATIVE:].sum() <= 3


def test_screen_says_nothing_when_every_input_or_none_passes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X.sum(axis=1) > 0).astype(int)  # every input matters
    assert shadow_screen(X, y, np.ones(400), True, seed=0) is None
    # a constant target: no input (and no shadow) has any importance
    assert shadow_screen(X, np.zeros(400), np.ones(400), False, seed=0) is None


def test_screen_does_not_depend_on_n_jobs_and_reads_at_most_its_rows(monkeypatch):
    import obliquetrees.utils.screening as screening

    X, y = _few_relevant(n=900)
    w = np.ones(len(y))
    keep = shadow_screen(X, y, w, True, seed=3, n_jobs=1)
    np.testing.assert_array_equal(keep, shadow_screen(X, y, w, True, seed=3, n_jobs=2))
    monkeypatch.setattr(screening, "SCREEN_MAX_ROWS", 300)
    seen = []
    fit = screening.ExtraTreesClassifier.fit
    monkeypatch.setattr(
        screening.ExtraTreesClassifier,
        "fit",
        lambda self, X, y, sample_weight: seen.append(X.shape) or fit(self, X, y, sample_weight),
    )
    shadow_screen(X, y, w, True, seed=3)
    assert seen == [(300, 2 * X.shape[1])]


def test_screen_takes_zero_weights_and_a_column_target():
    X, y = _few_relevant()
    w = np.ones(len(y))
    w[::2] = 0.0
    assert shadow_screen(X, y, w, True, seed=0)[:N_INFORMATIVE].all()
    target = X[:, :1] + X[:, 1:2]  # (n, 1), as the regressor's targets
    keep = shadow_screen(X, target, np.ones(len(y)), False, seed=0)
    assert keep[:2].all()


# ------------------------------------------------------------------ the estimators
def test_screened_layer_ignores_the_screened_out_features_and_generalises_better():
    X, y = _few_relevant(n=1200, p=100)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.5, random_state=0)
    plain = HingeForestClassifier(feature_screening=False, **FAST).fit(Xa, ya)
    screened = HingeForestClassifier(feature_screening=True, **FAST).fit(Xa, ya)
    assert plain.screened_features_ is None
    used = screened.screened_features_
    assert used[:N_INFORMATIVE].all() and used.sum() < 10
    np.testing.assert_array_equal(screened._model.x_ignored, ~used)
    # the screened-out features do not reach the prediction, whatever their values
    noisy = Xb.copy()
    noisy[:, ~used] = np.random.default_rng(1).normal(scale=1e3, size=(len(Xb), (~used).sum()))
    np.testing.assert_array_equal(screened.predict_proba(noisy), screened.predict_proba(Xb))
    assert screened.score(Xb, yb) > plain.score(Xb, yb) + 0.05


def test_the_screen_reads_the_fit_rows_only():
    """The early-stopping rows are held out from the screen too."""
    X, y = _few_relevant()
    model = HingeForestClassifier(feature_screening=True, **FAST).fit(X, y)
    train, _ = model._validation_split(y)
    seed = int(draw_seeds(FAST["random_state"], 4)[3])
    keep = shadow_screen(X[train], y[train], np.ones(len(train)), True, seed)
    np.testing.assert_array_equal(model.screened_features_, keep)


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_auto_keeps_the_candidate_of_lower_validation_loss(cls):
    X, y = _few_relevant()
    if cls is HingeForestRegressor:
        y = X[:, 0] * X[:, 1] + X[:, 2]
    auto = cls(feature_screening="auto", **FAST).fit(X, y)
    plain = cls(feature_screening=False, **FAST).fit(X, y)
    screened = cls(feature_screening=True, **FAST).fit(X, y)
    losses = [min(m.validation_loss_curve_) for m in (plain, screened)]
    kept = screened if losses[1] < losses[0] else plain
    assert kept is screened  # few relevant inputs: the screened layer wins here
    np.testing.assert_array_equal(auto.screened_features_, kept.screened_features_)
    assert _fitted_fields(auto) == _fitted_fields(kept)
    np.testing.assert_array_equal(auto.predict(X), kept.predict(X))


def test_auto_keeps_the_unscreened_layer_where_it_fits_better():
    """Every input carries a little: screening some out loses, and "auto" sees it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 40))
    y = (X @ np.linspace(0.2, 1.0, 40) > 0).astype(int)
    auto = HingeForestClassifier(feature_screening="auto", **FAST).fit(X, y)
    screened = HingeForestClassifier(feature_screening=True, **FAST).fit(X, y)
    plain = HingeForestClassifier(feature_screening=False, **FAST).fit(X, y)
    assert screened.screened_features_ is not None
    assert min(plain.validation_loss_curve_) < min(screened.validation_loss_curve_)
    assert auto.screened_features_ is None
    np.testing.assert_array_equal(auto.predict_proba(X), plain.predict_proba(X))


def test_auto_without_validation_rows_keeps_the_unscreened_layer():
    X, y = _few_relevant()
    params = {**FAST, "early_stopping": False, "max_epochs": 3}
    auto = HingeForestClassifier(feature_screening="auto", **params).fit(X, y)
    plain = HingeForestClassifier(feature_screening=False, **params).fit(X, y)
    assert auto.screened_features_ is None
    np.testing.assert_array_equal(auto.predict_proba(X), plain.predict_proba(X))
    # True screens all the rows when none are held out
    screened = HingeForestClassifier(feature_screening=True, **params).fit(X, y)
    seed = int(draw_seeds(FAST["random_state"], 4)[3])
    keep = shadow_screen(X, y, np.ones(len(y)), True, seed)
    np.testing.assert_array_equal(screened.screened_features_, keep)


def test_with_both_autos_the_raw_forest_is_a_third_candidate():
    X, y = _few_relevant()
    params = {k: v for k, v in FAST.items() if k != "n_hinge_features"}
    both = HingeForestClassifier(n_hinge_features="auto", feature_screening="auto", **params)
    both.fit(X, y)
    fits = [
        HingeForestClassifier(n_hinge_features=100, feature_screening=False, **params).fit(X, y),
        HingeForestClassifier(n_hinge_features=100, feature_screening=True, **params).fit(X, y),
        HingeForestClassifier(n_hinge_features=None, **params).fit(X, y),
    ]
    kept = min(fits, key=lambda m: min(m.validation_loss_curve_))
    assert (both.n_hinge_features_, both.screened_features_ is None) == (
        kept.n_hinge_features_,
        kept.screened_features_ is None,
    )
    np.testing.assert_array_equal(both.predict_proba(X), kept.predict_proba(X))


def test_a_feature_read_through_its_missing_indicator_counts_as_read():
    X, y = _few_relevant()
    X = X.copy()
    # feature 10 is noise, but whether it is missing gives the class away
    X[y == 1, 10] = np.nan
    model = HingeForestClassifier(feature_screening=True, **FAST).fit(X, y)
    assert model.screened_features_[10]
    assert model.screened_features_.shape == (X.shape[1],)
    assert np.isfinite(model.predict_proba(X)).all()


def test_sparse_input_is_screened():
    X, y = _few_relevant()
    model = HingeForestClassifier(feature_screening=True, **FAST).fit(sparse.csr_matrix(X), y)
    assert model.screened_features_[:N_INFORMATIVE].all()
    dense = HingeForestClassifier(feature_screening=True, **FAST).fit(X, y)
    assert model.score(sparse.csr_matrix(X), y) == pytest.approx(dense.score(X, y), abs=0.02)


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_partial_fit_refuses_true_and_keeps_every_input_under_auto(cls):
    X, y = _few_relevant(n=200)
    model = cls(feature_screening=True, **FAST)
    with pytest.raises(ValueError, match="feature_screening=True.*partial_fit"):
        model.partial_fit(X, y)
    assert not hasattr(model, "_model") and not hasattr(model, "n_features_in_")
    auto = cls(feature_screening="auto", **FAST).partial_fit(X, y)
    plain = cls(feature_screening=False, **FAST).partial_fit(X, y)
    assert auto.screened_features_ is None
    np.testing.assert_array_equal(auto.predict(X), plain.predict(X))


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_refusals_leave_no_state(cls):
    X, y = _few_relevant(n=200)
    model = cls(feature_screening=True, **{**FAST, "n_hinge_features": None})
    with pytest.raises(ValueError, match="feature_screening=True.*n_hinge_features=None"):
        model.fit(X, y)
    assert not hasattr(model, "_model") and not hasattr(model, "n_features_in_")
    with pytest.raises(ValueError, match="feature_screening"):
        cls(feature_screening="sometimes").fit(X, y)


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_auto_screening_of_raw_inputs_screens_nothing(cls):
    """``"auto"`` (the classifier's default) with no learnt layer: nothing to screen."""
    X, y = _few_relevant(n=200)
    params = {**FAST, "n_hinge_features": None}
    auto = cls(feature_screening="auto", **params).fit(X, y)
    plain = cls(feature_screening=False, **params).fit(X, y)
    assert auto.screened_features_ is None
    np.testing.assert_array_equal(auto.predict(X), plain.predict(X))


def test_screen_takes_inputs_beyond_float32():
    """The screen standardises first: its forest reads float32."""
    X, y = _few_relevant()
    big = X * 1e300
    shifted = X + 1e8  # large mean, unit spread: float32 would round away most of it
    keep = shadow_screen(X, y, np.ones(len(y)), True, seed=0)
    for Z in (big, shifted, sparse.csr_matrix(big)):
        np.testing.assert_array_equal(shadow_screen(Z, y, np.ones(len(y)), True, seed=0), keep)


def test_warm_start_continues_the_screen_and_refuses_another():
    X, y = _few_relevant()
    model = HingeForestClassifier(feature_screening=True, warm_start=True, **FAST).fit(X, y)
    used = model.screened_features_.copy()
    model.set_params(max_epochs=2).fit(X, y)
    np.testing.assert_array_equal(model.screened_features_, used)
    np.testing.assert_array_equal(model._model.x_ignored, ~used)
    model.set_params(feature_screening="auto").fit(X, y)  # "auto" continues either kind
    with pytest.raises(ValueError, match="feature_screening"):
        model.set_params(feature_screening=False).fit(X, y)
    model.set_params(feature_screening=True).partial_fit(X, y)  # a batch more, screened
    np.testing.assert_array_equal(model._model.x_ignored, ~used)


def test_pickles_keep_the_screen_and_old_pickles_load_unscreened():
    X, y = _few_relevant()
    model = HingeForestClassifier(feature_screening=True, **FAST).fit(X, y)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.screened_features_, model.screened_features_)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    plain = HingeForestClassifier(feature_screening=False, **FAST).fit(X, y)
    state = plain.__getstate__()
    del state["screened_features_"]  # as saved before feature_screening
    old = HingeForestClassifier.__new__(HingeForestClassifier)
    old.__setstate__(state)
    assert old.screened_features_ is None
    np.testing.assert_array_equal(old.predict_proba(X), plain.predict_proba(X))


def test_raw_inputs_alone_fit_no_screen(monkeypatch):
    import obliquetrees.hinge._estimator as estimator

    calls = []
    monkeypatch.setattr(estimator, "shadow_screen", lambda *a, **k: calls.append(1))
    X, y = _few_relevant(n=200)
    params = {**FAST, "n_hinge_features": None}
    HingeForestClassifier(feature_screening="auto", **params).fit(X, y)
    assert calls == []
