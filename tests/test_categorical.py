"""Categorical features (``categorical_features``) for every estimator.

- the coordinates (:mod:`obliquetrees._training.categories`) against a plain
  reference written from the derivation, loop by loop, on random inputs;
- which columns are categorical, as scikit-learn's histogram gradient
  boosting says (and its errors);
- every estimator fits and predicts a DataFrame of category, string, numeric
  and missing columns with no preprocessing; an unseen category predicts as
  a missing one; pickles keep the model and refuse a damaged table;
- clear errors: too many categories, mixed label types, sparse input,
  monotonic constraints on a categorical feature; a failed fit changes nothing.
"""

import pickle

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone, is_classifier

from obliquetrees._core.categories import MAX_CATEGORIES, CategoryCoordinates
from obliquetrees._training.categories import ALPHA, FOLD_STREAM, N_FOLDS, learn_coordinates
from obliquetrees.utils.categorical import categorical_mask
from tests.test_common import FAST_PARAMS, discover_estimators

pd = pytest.importorskip("pandas")


# ------------------------------------------------------------------ reference
def _reference_penalty(codes, K, T, w, classification, level):
    """sigma^2 / tau^2 of one feature, or None: one category and one row at a time."""
    rows = [i for i in range(len(codes)) if codes[i] >= 0]
    N = sum(w[i] for i in rows)
    d = T.shape[1]
    n, s = np.zeros(K), np.zeros((K, d))
    for i in rows:
        n[codes[i]] += w[i]
        s[codes[i]] += w[i] * T[i]
    present = [k for k in range(K) if n[k] > 0]
    if len(present) < 2:
        return None
    mu = s.sum(0) / N
    mean = {k: s[k] / n[k] for k in present}
    within = sum(w[i] * np.sum((T[i] - mean[codes[i]]) ** 2) for i in rows)
    between = sum(n[k] * np.sum((mean[k] - mu) ** 2) for k in present)
    k_obs = len(present)
    if N <= k_obs:
        return None
    sigma2 = within / (N - k_obs)
    spread = N - sum(n[k] ** 2 for k in present) / N
    tau2 = max((between - (k_obs - 1) * sigma2) / spread, 0.0)
    if tau2 == 0:
        return None
    if classification:  # the test of step 3, from its textbook formulas
        table = np.array(
            [
                [sum(w[i] * T[i, c] for i in rows if codes[i] == k) for c in range(d)]
                for k in present
            ]
        )
        table = table[:, table.sum(0) > 0]
        p = stats.chi2_contingency(table, correction=False).pvalue if table.shape[1] > 1 else 1
    else:
        f = (between / (k_obs - 1)) / (within / (N - k_obs))
        p = stats.f.sf(f, d * (k_obs - 1), d * (N - k_obs))
    return max(sigma2 / tau2, 1e-6 * N) if p < level else None


def _reference_effects(Z, T, w, pen):
    """Ridge solution as weighted least squares with penalty rows (no normal equations)."""
    A = np.vstack([np.sqrt(w)[:, None] * Z, np.diag(np.sqrt(pen))])
    B = np.vstack([np.sqrt(w)[:, None] * T, np.zeros((Z.shape[1], T.shape[1]))])
    return np.linalg.lstsq(A, B, rcond=None)[0]


def _reference(codes, sizes, numeric, y, w, n_classes, seed, use_numeric=True, level=None):
    n = y.shape[0]
    w = w * n / w.sum()
    if n_classes is None:
        t = y.reshape(n, -1)
        mean = w @ t / w.sum()
        T = (t - mean) / np.sqrt(w @ (t - mean) ** 2 / w.sum())
    else:
        T = np.eye(n_classes)[y]
    level = ALPHA / len(codes) if level is None else level
    classification = n_classes is not None
    pens = [
        _reference_penalty(c, k, T, w, classification, level)
        for c, k in zip(codes, sizes, strict=True)
    ]
    active = [i for i, p in enumerate(pens) if p is not None]
    cols = [np.ones(n)]
    for j in range(numeric.shape[1] if use_numeric else 0):
        x, obs = numeric[:, j], ~np.isnan(numeric[:, j])
        m = w[obs] @ x[obs] / w[obs].sum()
        sd = np.sqrt(w[obs] @ (x[obs] - m) ** 2 / w[obs].sum())
        cols.append(np.where(obs, (np.nan_to_num(x) - m) / sd, 0.0))
    q = len(cols)
    for i in active:
        cols += [(codes[i] == k).astype(float) for k in range(sizes[i])]
    Z = np.column_stack(cols)
    pen = np.concatenate(
        [[0.0], np.full(q - 1, 1e-6 * n)] + [np.full(sizes[i], pens[i]) for i in active]
    )
    ends = np.cumsum([q] + [sizes[i] for i in active])

    def centred(theta, rows):
        out = []
        for a in range(len(active)):
            u = theta[ends[a] : ends[a + 1]]
            counts = Z[rows, ends[a] : ends[a + 1]].T @ w[rows]
            out.append((u - counts @ u / counts.sum(), counts))
        return out

    every = np.arange(n)
    full = centred(_reference_effects(Z, T, w, pen), every)
    axes = []
    for u, counts in full:
        scatter = sum(counts[k] * np.outer(u[k], u[k]) for k in range(len(counts)))
        if T.shape[1] == 1 or not np.any(scatter):
            axes.append(np.eye(T.shape[1])[0])
            continue
        axis = np.linalg.eigh(scatter)[1][:, -1]
        big = np.flatnonzero(np.abs(axis) >= np.abs(axis).max() * (1 - 1e-12))[-1]
        axes.append(axis if axis[big] > 0 else -axis)
    tables = [np.zeros(k) for k in sizes]
    train = np.zeros((n, len(codes)))
    fold = np.random.default_rng([seed, FOLD_STREAM]).permutation(n) % N_FOLDS
    for a, i in enumerate(active):
        tables[i] = full[a][0] @ axes[a]
    for f in range(N_FOLDS):
        rows = np.flatnonzero(fold != f)
        theta = _reference_effects(Z[rows], T[rows], w[rows], pen)
        for a, (u, _) in enumerate(centred(theta, rows)):
            mine = fold == f
            train[mine, active[a]] = (u @ axes[a])[np.maximum(codes[active[a]][mine], 0)]
    for i, c in enumerate(codes):
        train[c < 0, i] = np.nan
    return tables, train


def _random_task(task, seed):
    rng = np.random.default_rng(seed)
    n, sizes = int(rng.integers(60, 200)), [int(rng.integers(2, 7)), int(rng.integers(2, 5))]
    codes = [rng.integers(0, k, n) for k in sizes]
    for c in codes:
        c[rng.random(n) < 0.1] = -1
    numeric = rng.normal(size=(n, int(rng.integers(0, 3))))
    numeric[rng.random(numeric.shape) < 0.1] = np.nan
    effect = sum(
        rng.normal(size=k)[np.maximum(c, 0)] * rng.uniform(0, 2)
        for c, k in zip(codes, sizes, strict=True)
    )
    effect = effect + np.nan_to_num(numeric).sum(1)
    w = rng.uniform(0.2, 3.0, n)
    if task == "regression":
        return codes, sizes, numeric, effect + rng.normal(size=n), w, None
    if task == "two_outputs":
        y = np.c_[effect + rng.normal(size=n), -effect + rng.normal(size=n)]
        return codes, sizes, numeric, y, w, None
    n_classes = 2 if task == "binary" else 4
    score = effect + rng.normal(size=n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return codes, sizes, numeric, y, w, n_classes


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression", "two_outputs"])
@pytest.mark.parametrize("seed", range(6))
def test_coordinates_match_the_plain_reference(task, seed):
    codes, sizes, numeric, y, w, n_classes = _random_task(task, seed)
    tables, train = learn_coordinates(codes, sizes, numeric, y, w, n_classes, seed)
    ref_tables, ref_train = _reference(codes, sizes, numeric, y, w, n_classes, seed)
    for table, ref in zip(tables, ref_tables, strict=True):
        np.testing.assert_allclose(table, ref, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(train, ref_train, rtol=1e-7, atol=1e-10)


def test_large_systems_leave_the_numeric_features_then_fit_each_feature_alone(monkeypatch):
    from obliquetrees._training import categories

    codes, sizes, numeric, y, w, n_classes = _random_task("regression", 5)
    assert numeric.shape[1] > 0  # and both features carry something (checked below)
    monkeypatch.setattr(categories, "MAX_JOINT", 1 + sum(sizes))  # no room for numeric ones
    tables, train = learn_coordinates(codes, sizes, numeric, y, w, n_classes, 5)
    ref_tables, ref_train = _reference(codes, sizes, numeric, y, w, n_classes, 5, use_numeric=False)
    np.testing.assert_allclose(train, ref_train, rtol=1e-7, atol=1e-10)
    assert all(np.any(t != 0) for t in tables)
    monkeypatch.setattr(categories, "MAX_JOINT", max(sizes))  # each feature on its own
    tables, train = learn_coordinates(codes, sizes, numeric, y, w, n_classes, 5)
    for i in range(2):
        alone = _reference([codes[i]], [sizes[i]], numeric[:, :0], y, w, None, 5, level=ALPHA / 2)
        alone = alone[1][:, 0]
        np.testing.assert_allclose(train[:, i], alone, rtol=1e-7, atol=1e-10)


def test_binary_coordinates_rise_with_the_second_class_rate():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, 3000)
    y = (rng.random(3000) < np.array([0.1, 0.3, 0.5, 0.7, 0.9])[codes]).astype(np.int64)
    (table,), _ = learn_coordinates([codes], [5], np.zeros((3000, 0)), y, np.ones(3000), 2, 0)
    assert np.all(np.diff(table) > 0)


def test_noise_levels_get_no_coordinate():
    """Levels that differ no more than chance are shrunk to 0: nothing to split on."""
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 300, 3000)
    y = rng.integers(0, 2, 3000)
    (table,), train = learn_coordinates([codes], [300], np.zeros((3000, 0)), y, np.ones(3000), 2, 0)
    assert np.abs(table).max() < 0.05
    assert np.nanstd(train) < 0.05


# ------------------------------------------------------------------ which columns
def _frame(n=240, seed=0, noise_levels=0):
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue", "black"], n)
    size = pd.Categorical(rng.choice(["S", "M", "L"], n))
    x = rng.normal(size=n)
    z = rng.normal(size=n)
    z[rng.random(n) < 0.1] = np.nan
    colour = np.where(rng.random(n) < 0.05, None, colour).astype(object)
    frame = pd.DataFrame({"colour": colour, "x": x, "size": size, "z": z})
    signal = (
        np.select([colour == "red", colour == "blue"], [2.0, -2.0], 0.0)
        + np.where(size == "L", 1.5, 0.0)
        + x
    )
    if noise_levels:
        frame["noise"] = pd.Categorical(rng.integers(0, noise_levels, n).astype(str))
    return frame, signal + 0.3 * rng.normal(size=n)


def test_which_columns_are_categorical():
    frame, _ = _frame()
    assert categorical_mask(frame, "from_dtype").tolist() == [True, False, True, False]
    assert categorical_mask(frame, None) is None
    assert categorical_mask(frame.to_numpy(), "from_dtype") is None
    assert categorical_mask(frame, ["x"]).tolist() == [False, True, False, False]
    assert categorical_mask(frame, [0, 2]).tolist() == [True, False, True, False]
    mask = [False, False, False, True]
    assert categorical_mask(frame, mask).tolist() == mask
    assert categorical_mask(frame, [False] * 4) is None
    with pytest.raises(ValueError, match="not a valid feature name"):
        categorical_mask(frame, ["nope"])
    with pytest.raises(ValueError, match=r"in \[0, n_features - 1\]"):
        categorical_mask(frame, [4])
    with pytest.raises(ValueError, match="must have shape"):
        categorical_mask(frame, [True, False])
    with pytest.raises(ValueError, match="array of integers or as a boolean mask"):
        categorical_mask(frame.to_numpy(), ["x"])
    with pytest.raises(ValueError, match="bool, int or str"):
        categorical_mask(frame, [0.5])


# ------------------------------------------------------------------ estimators
ESTIMATORS = discover_estimators()


def _fit(cls, X, y, **params):
    est = cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0, **params})
    if is_classifier(est):
        y = np.where(y > np.median(y), "high", "low")
    return est.fit(X, y), y


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_fits_and_predicts_a_mixed_frame(cls):
    frame, y = _frame()
    est, y = _fit(cls, frame, y)
    assert est.is_categorical_.tolist() == [True, False, True, False]
    table = est.category_coordinates_
    assert table.columns.tolist() == [0, 2]
    assert table.categories[0].tolist() == ["black", "blue", "green", "red"]
    assert table.categories[1].tolist() == ["L", "M", "S"]
    out = est.predict_proba(frame) if is_classifier(est) else est.predict(frame)
    assert np.all(np.isfinite(out))
    assert est.apply(frame).shape[0] == frame.shape[0]
    # a category never seen in training predicts as a missing one
    unseen, missing = frame.head(20).copy(), frame.head(20).copy()
    unseen["colour"] = "purple"
    missing["colour"] = None
    np.testing.assert_array_equal(est.predict(unseen), est.predict(missing))
    # the same labels given as strings instead of pandas categories
    as_str = frame.astype({"size": object})
    np.testing.assert_array_equal(est.predict(as_str), est.predict(frame))


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_categories_carry_their_signal_to_unseen_rows(cls):
    """Held out, the model with the categorical columns beats the one without them."""
    frame, target = _frame(n=600, seed=3)
    est = cls(**{**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0})
    if is_classifier(est):
        target = np.where(target > np.median(target[:400]), "high", "low")
    train, test, numeric = slice(0, 400), slice(400, None), ["x", "z"]
    with_categories = clone(est).fit(frame[train], target[train]).score(frame[test], target[test])
    without = clone(est).fit(frame[train][numeric], target[train])
    assert with_categories > without.score(frame[test][numeric], target[test]) + 0.05


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_pickle_keeps_the_categories_and_refuses_a_damaged_table(cls):
    frame, y = _frame()
    est, _ = _fit(cls, frame, y)
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(frame), est.predict(frame))
    sio = pytest.importorskip("skops.io")
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    loaded = sio.loads(sio.dumps(est), trusted=TRUSTED_TYPES)
    np.testing.assert_array_equal(loaded.predict(frame), est.predict(frame))
    state = est.__getstate__()
    entry = state["_obliquetrees_containers"]["category_coordinates_"]["state"]
    for damage in (
        {"columns": np.array([0, 9])},
        {"values": [np.array([np.nan, 0, 0, 0]), entry["values"][1]]},
        {"categories": [entry["categories"][0][::-1], entry["categories"][1]]},
        {"values": [np.zeros(2), entry["values"][1]]},
    ):
        bad = {**state, "_obliquetrees_containers": {**state["_obliquetrees_containers"]}}
        bad["_obliquetrees_containers"]["category_coordinates_"] = {
            "type": "CategoryCoordinates",
            "state": {**entry, **damage},
        }
        with pytest.raises(ValueError):
            type(est).__new__(type(est)).__setstate__(bad)
    # a table saved before it carried a version is version 1; a newer version is refused
    for version, error in ((None, None), (2, "newer than this obliquetrees reads"), (0, "is 0")):
        table = {k: v for k, v in entry.items() if k != "format_version"}
        if version is not None:
            table["format_version"] = version
        bad = {**state, "_obliquetrees_containers": {**state["_obliquetrees_containers"]}}
        bad["_obliquetrees_containers"]["category_coordinates_"] = {
            "type": "CategoryCoordinates",
            "state": table,
        }
        old = type(est).__new__(type(est))
        if error is None:
            old.__setstate__(bad)
            np.testing.assert_array_equal(old.predict(frame), est.predict(frame))
        else:
            with pytest.raises(ValueError, match=error):
                old.__setstate__(bad)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_models_saved_before_categories_existed_load_and_refit(cls):
    """A state without ``categorical_features``, ``is_categorical_`` and
    ``category_coordinates_`` (saved before categories) predicts as before."""
    frame, y = _frame()
    X = frame[["x", "z"]].to_numpy()
    est, y = _fit(cls, X, y)
    state = est.__getstate__()
    for key in ("categorical_features", "is_categorical_", "category_coordinates_"):
        del state[key]
    old = cls.__new__(cls)
    old.__setstate__(state)
    assert old.get_params()["categorical_features"] == "from_dtype"
    assert old.predict(X).tobytes() == est.predict(X).tobytes()
    assert clone(old).fit(X, y).predict(X).tobytes() == est.predict(X).tobytes()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_numpy_codes_with_indices(cls):
    """Category labels in a numeric array, named by index."""
    frame, y = _frame()
    X = np.c_[frame["size"].cat.codes.to_numpy() * 10.0, frame["x"].to_numpy()]
    est, _ = _fit(cls, X, y, categorical_features=[0])
    assert est.category_coordinates_.categories[0].tolist() == [0.0, 10.0, 20.0]
    assert np.all(np.isfinite(est.predict(X[:5]) if not is_classifier(est) else 1))
    np.testing.assert_array_equal(
        est.predict(np.c_[[5.0], [0.1]]), est.predict(np.c_[[np.nan], [0.1]])
    )


def test_partial_fit_batches_read_the_first_batch_table():
    from obliquetrees import HingeForestRegressor

    frame, y = _frame(n=400)
    est = HingeForestRegressor(**FAST_PARAMS["HingeForestRegressor"])
    est.partial_fit(frame[:200], y[:200])
    table = est.category_coordinates_
    est.partial_fit(frame[200:], y[200:])  # a later batch is read through the same table
    assert est.category_coordinates_ is table
    assert np.all(np.isfinite(est.predict(frame)))


def test_lists_of_rows_with_labels():
    from obliquetrees import CO2ForestRegressor

    rows = [["red", 1.0], ["blue", 2.0], ["red", 3.0], ["green", 4.0]] * 20
    y = [1.0, -1.0, 1.5, 0.0] * 20
    est = CO2ForestRegressor(n_estimators=2, random_state=0, categorical_features=[0])
    est.fit(rows, y)
    assert est.category_coordinates_.categories[0].tolist() == ["blue", "green", "red"]
    np.testing.assert_array_equal(est.predict(rows[:4]), est.predict(np.array(rows[:4], object)))


def test_clear_errors_and_a_failed_fit_changes_nothing():
    cls = ESTIMATORS[0]
    frame, y = _frame()
    est, _ = _fit(cls, frame, y)
    before = dict(est.__dict__)
    many = frame.copy()
    many["colour"] = [f"id{i}" for i in range(len(frame) - 1)] + ["id0"]
    many = pd.concat([many] * 5, ignore_index=True)
    many["colour"] = [f"id{i}" for i in range(len(many))]
    assert len(many) > MAX_CATEGORIES
    with pytest.raises(ValueError, match="'colour' has .* categories, more than"):
        est.fit(many, np.resize(est.classes_, len(many)))
    assert est.__dict__.keys() == before.keys()
    assert all(est.__dict__[k] is before[k] for k in before)
    mixed = frame.copy()
    mixed["colour"] = mixed["colour"].astype(object)
    mixed.loc[0, "colour"] = 3
    with pytest.raises(ValueError, match="mixes"):
        clone(est).fit(mixed, np.resize(est.classes_, len(mixed)))
    from scipy import sparse

    with pytest.raises(TypeError, match="dense input"):
        clone(est).set_params(categorical_features=[0]).fit(
            sparse.csr_matrix(np.ones((10, 2))), np.resize(est.classes_, 10)
        )
    binary = np.where(y > 0, "a", "b")
    with pytest.raises(ValueError, match="Categorical features cannot have monotonic"):
        clone(est).set_params(monotonic_cst=[1, 0, 0, 0]).fit(frame, binary)


def test_warm_start_needs_the_same_categories():
    from obliquetrees import CO2ForestRegressor

    frame, y = _frame()
    est = CO2ForestRegressor(n_estimators=2, random_state=0, warm_start=True).fit(frame, y)
    est.set_params(n_estimators=4).fit(frame, y)  # the same data: the same table
    assert est.forest_.n_trees == 4
    before = est.forest_
    with pytest.raises(ValueError, match="categorical features of the previous fit"):
        est.set_params(n_estimators=6).fit(frame, -y)
    assert est.forest_ is before


@pytest.mark.parametrize("tune", ["finetune", "refit_leaves"])
def test_finetuned_models_keep_the_categories(tune):
    from obliquetrees import CO2ForestClassifier, machine

    frame, y = _frame()
    labels = np.where(y > 0, "up", "down")
    est = CO2ForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(frame, labels)
    kwargs = {"epochs": 2} if tune == "finetune" else {}
    tuned = getattr(machine, tune)(est, frame, labels, **kwargs)
    assert tuned.category_coordinates_.same_as(est.category_coordinates_)
    assert tuned.score(frame, labels) > 0.8
    loaded = pickle.loads(pickle.dumps(tuned))
    np.testing.assert_array_equal(loaded.predict_proba(frame), tuned.predict_proba(frame))


def test_dask_input_with_categories_is_refused_clearly():
    dd = pytest.importorskip("dask.dataframe")
    from obliquetrees.dask import DaskCO2ForestRegressor

    frame, y = _frame()
    X, y = dd.from_pandas(frame, npartitions=2), dd.from_pandas(pd.Series(y), npartitions=2)
    with pytest.raises(NotImplementedError, match="categorical features on dask input"):
        DaskCO2ForestRegressor(n_estimators=2).fit(X, y)


def test_category_table_checks_its_arrays():
    with pytest.raises(ValueError, match="sorted, distinct"):
        CategoryCoordinates(2, [0], [np.array(["b", "a"], dtype=object)], [np.zeros(2)])
    with pytest.raises(ValueError, match="indices of 2 features"):
        CategoryCoordinates(2, [2], [np.array([1.0])], [np.zeros(1)])
    table = CategoryCoordinates(2, [1], [np.array(["a", "b"], dtype=object)], [np.array([1.0, 2])])
    labels = np.array(["b", None, "z", 3, np.nan, "a"], dtype=object)
    np.testing.assert_array_equal(table.codes(0, labels), [1, -1, -1, -1, -1, 0])


# ------------------------------------------------------------------ reports and ONNX
def test_export_text_names_the_categories_each_side_takes():
    from obliquetrees import CO2ForestClassifier, export_text

    frame, y = _frame(n=400)
    X = frame[["colour"]]
    est = CO2ForestClassifier(n_estimators=1, max_depth=1, random_state=0).fit(X, y > 0)
    lines = export_text(est).splitlines()
    left = lines[0].split("colour in {")[1].split("}")[0].split(", ")
    missing_left = "or missing" in lines[0].split("n=")[0]
    tree = est.trees_[0]
    for label in ["black", "blue", "green", "red", None, "unseen"]:
        leaf = est.apply(pd.DataFrame({"colour": [label]}))[0, 0]
        goes_left = leaf == tree.children_left[0]
        expected = missing_left if label in (None, "unseen") else label in left
        assert goes_left == expected, (label, lines)
    assert lines[-1].startswith("c(colour): black=")


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_onnx_maps_the_labels_as_predict_does(cls):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from obliquetrees.onnx import to_onnx

    frame, y = _frame()
    frame["size"] = frame["size"].cat.codes.astype(np.float64) * 10  # number labels
    est, _ = _fit(cls, frame, y, categorical_features=["colour", "size"])
    test = frame.copy()
    test.loc[:4, "colour"] = "purple"  # unseen
    test.loc[5:9, "size"] = np.nan
    session = ort.InferenceSession(
        to_onnx(est, dtype=np.float64).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    assert [i.name for i in session.get_inputs()] == ["X", "colour", "size"]
    colour = test[["colour"]].to_numpy(dtype=object).copy()
    colour[pd.isna(colour)] = ""  # ONNX strings have no missing value: "" is unseen
    out = session.run(
        None,
        {"X": test[["x", "z"]].to_numpy(), "colour": colour, "size": test[["size"]].to_numpy()},
    )[-1]
    expected = est.predict_proba(test) if is_classifier(est) else est.predict(test)
    np.testing.assert_allclose(out.reshape(expected.shape), expected, rtol=1e-10, atol=1e-12)
