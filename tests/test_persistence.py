"""Deployment: pickles and joblib files predict identically in a fresh process.

Also: an unknown container format is a clear error, and a read-only
installation (numba cannot write its cache beside the package) still imports,
loads and predicts; skops files need to trust only the public model classes
and refuse edited arrays; predicting in a multiprocessing pool worker keeps
the model's n_jobs.
"""

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression

import obliquetrees
from obliquetrees._registry import MOVED_MODULES
from tests.test_common import FAST_PARAMS, discover_estimators

ESTIMATORS = discover_estimators()
REPO = Path(__file__).resolve().parents[1]

LOAD_AND_PREDICT = """
import sys
import joblib, numpy as np
for job in sys.argv[1:]:
    path, mode, X_path, out_path = job.split("|")
    model = joblib.load(path, mmap_mode=None if mode == "none" else mode)
    X = np.load(X_path)
    outputs = {"predict": model.predict(X)}
    if hasattr(model, "predict_proba"):
        outputs["predict_proba"] = model.predict_proba(X)
    np.savez(out_path, **outputs)
"""


def _fitted(cls):
    params = {**FAST_PARAMS.get(cls.__name__, {}), "random_state": 0}
    if is_classifier(cls()):
        X, y = make_classification(150, 6, n_informative=4, n_classes=3, random_state=0)
    else:
        X, y = make_regression(150, 6, noise=0.1, random_state=0)
    return cls(**params).fit(X, y), X


def _outputs(model, X):
    out = {"predict": model.predict(X)}
    if hasattr(model, "predict_proba"):
        out["predict_proba"] = model.predict_proba(X)
    return out


def _run_python(args, env=None, **kwargs):
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, **kwargs
    )


def test_round_trips_in_fresh_process_are_bit_identical(tmp_path):
    """pickle, joblib and joblib with mmap_mode="r", for every estimator."""
    expected, jobs = {}, []
    for cls in ESTIMATORS:
        model, X = _fitted(cls)
        np.save(tmp_path / f"{cls.__name__}-X.npy", X)
        for how in ("pickle", "joblib", "joblib-mmap"):
            path = tmp_path / f"{cls.__name__}-{how}.bin"
            if how == "pickle":
                path.write_bytes(pickle.dumps(model))
            else:
                joblib.dump(model, path)
            mode = "r" if how == "joblib-mmap" else "none"
            jobs.append(f"{path}|{mode}|{tmp_path / (cls.__name__ + '-X.npy')}|{path}.npz")
            expected[f"{path}.npz"] = _outputs(model, X)
    script = tmp_path / "load.py"
    script.write_text(LOAD_AND_PREDICT)
    result = _run_python([str(script), *jobs])  # one process loads every model
    assert result.returncode == 0, result.stderr
    for out_path, outputs in expected.items():
        with np.load(out_path, allow_pickle=True) as loaded:
            for name, value in outputs.items():
                assert loaded[name].tobytes() == value.tobytes(), (out_path, name)


SMALL_BATCH_WITHOUT_NUMBA = """
import pickle, sys
import numpy as np
model = pickle.loads(open(sys.argv[1], "rb").read())
np.save(sys.argv[3], model.predict_proba(np.load(sys.argv[2])))
print("numba" in sys.modules)
"""


@pytest.mark.parametrize("name", ["CO2ForestClassifier", "E2EDTClassifier"])
def test_fresh_process_predicts_a_small_batch_without_loading_numba(tmp_path, name):
    """Unpickle and predict 100 rows: the numpy walk answers, bit-identical to
    the kernels of this process, and numba is never imported."""
    model, X = _fitted(getattr(obliquetrees, name))
    if name == "E2EDTClassifier":  # its default predict_proba is the soft model's kernel
        model.set_params(routing="hard")
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X[:100])
    script = tmp_path / "predict.py"
    script.write_text(SMALL_BATCH_WITHOUT_NUMBA)
    result = _run_python(
        [
            str(script),
            str(tmp_path / "model.pkl"),
            str(tmp_path / "X.npy"),
            str(tmp_path / "out.npy"),
        ]
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert np.load(tmp_path / "out.npy").tobytes() == model.predict_proba(X[:100]).tobytes()


@pytest.mark.parametrize("name", ["SoftTreeClassifier", "SoftTreeRegressor"])
def test_single_tree_keeps_its_packed_forest_which_pickles_hold_once(name):
    """The packed forest is built once, wraps tree_'s arrays, stays out of pickles
    (and out of joblib files, which would store the arrays twice) and is rebuilt
    on load, so pickles written before it existed load too."""
    model, X = _fitted(getattr(obliquetrees, name))
    forest = model._forest()
    assert model._forest() is forest and forest.children_left is model.tree_.children_left
    model.predict(X)  # builds derived data on the forest: never pickled either
    state = model.__getstate__()
    assert "_packed_forest" not in state and model._forest() is forest
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded._forest().children_left is loaded.tree_.children_left
    assert loaded.predict(X).tobytes() == model.predict(X).tobytes()
    old = type(model).__new__(type(model))  # a pickle from before: tree_ only
    old.__setstate__(state)
    assert old.predict(X).tobytes() == model.predict(X).tobytes()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_unknown_container_version_is_a_clear_error(cls):
    model, _ = _fitted(cls)
    containers = [model.forest_] if hasattr(model, "forest_") else [model.tree_]
    # hinge forests save no trees (built from the model at load) unless pickled
    # before that (no leaf counts): such a file carries its forest's version
    model.__dict__.pop("_leaf_counts", None)
    for container in containers:
        container.format_version = 999
    with pytest.raises(ValueError, match="container format version 999"):
        pickle.loads(pickle.dumps(model))


def _read_only_command(site):
    """Prefix that runs a command with ``site`` not writable, or None if impossible."""
    if os.geteuid() != 0:
        for path in [site, *site.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return []
    # root ignores permission bits: bind-mount the copy read-only in a private
    # mount namespace instead
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(site)]


def test_read_only_installation_imports_loads_and_predicts(tmp_path):
    model, X = _fitted(ESTIMATORS[0])
    site = tmp_path / "site"
    shutil.copytree(
        Path(obliquetrees.__file__).parent,
        site / "obliquetrees",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X[:20])
    files = sorted(site.rglob("*"))  # an installed wheel's shipped kernels included
    prefix = _read_only_command(site)
    if prefix is None:
        pytest.skip("cannot make a read-only package copy here (root without unshare)")
    code = (
        "import os, pickle, sys, numpy as np, obliquetrees\n"
        "package = os.path.dirname(obliquetrees.__file__)\n"
        f"assert package == {str(site / 'obliquetrees')!r}, package\n"
        "assert not os.access(package, os.W_OK)\n"
        "model = pickle.load(open(sys.argv[1], 'rb'))\n"
        "np.save(sys.argv[2], model.predict(np.load(sys.argv[3])))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    # numba falls back to a per-user cache directory when the package is read-only
    env.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    result = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-c",
            code,
            str(tmp_path / "model.pkl"),
            str(tmp_path / "pred.npy"),
            str(tmp_path / "X.npy"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "pred.npy"), model.predict(X[:20]))
    assert sorted(site.rglob("*")) == files, "numba wrote its cache into the read-only package"


# ---------------------------------------------------------------- skops
def _all_models():
    """Every kind of fitted model a user saves, with the rows to predict on.

    The public estimators, converted scikit-learn models (a forest and a
    single tree), fine-tuned models and a refit_leaves model.
    """
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeRegressor

    from obliquetrees.convert import from_sklearn
    from obliquetrees.machine import finetune, refit_leaves

    models = {cls.__name__: _fitted(cls) for cls in ESTIMATORS}
    Xc, yc = make_classification(150, 6, n_informative=4, n_classes=3, random_state=0)
    Xr, yr = make_regression(150, 6, noise=0.1, random_state=0)
    rf = from_sklearn(RandomForestClassifier(4, max_depth=4, random_state=0).fit(Xc, yc))
    dt = from_sklearn(DecisionTreeRegressor(max_depth=4, random_state=0).fit(Xr, yr))
    models["converted_classifier"] = (rf, Xc)
    models["converted_regressor"] = (dt, Xr)
    models["finetuned_classifier"] = (finetune(rf, Xc, yc, epochs=2), Xc)
    models["finetuned_regressor"] = (finetune(dt, Xr, yr, epochs=2), Xr)
    models["refit_leaves_classifier"] = (refit_leaves(rf, Xc, yc, n_iter=2), Xc)
    return models


def _outputs_of(model, X):
    out = _outputs(model, X)
    out["apply"] = model.apply(X)
    return out


def test_skops_round_trip_needs_only_the_public_trusted_types(tmp_path):
    """Every model saves to a skops file that names only public types, loads
    with TRUSTED_TYPES and predicts bit for bit what the original did."""
    sio = pytest.importorskip("skops.io", reason="skops is a test extra (pip install skops)")
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    for name, (model, X) in _all_models().items():
        path = tmp_path / f"{name}.skops"
        getattr(model, "forest_", None)  # hinge forests: their trees, built at load too
        sio.dump(model, path)
        untrusted = sio.get_untrusted_types(file=path)
        assert untrusted == [f"{type(model).__module__}.{type(model).__qualname__}"], name
        assert set(untrusted) <= set(TRUSTED_TYPES)
        loaded = sio.load(path, trusted=TRUSTED_TYPES)
        assert type(loaded) is type(model) and loaded.__dict__.keys() == model.__dict__.keys()
        got = _outputs_of(loaded, X)
        for key, value in _outputs_of(model, X).items():
            assert got[key].tobytes() == value.tobytes(), (name, key)


def test_trusted_types_are_exactly_the_model_classes():
    from obliquetrees.convert import ConvertedForestClassifier, ConvertedForestRegressor
    from obliquetrees.machine import FinetunedForestClassifier, FinetunedForestRegressor
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    classes = ESTIMATORS + [
        ConvertedForestClassifier,
        ConvertedForestRegressor,
        FinetunedForestClassifier,
        FinetunedForestRegressor,
    ]
    current = [f"{c.__module__}.{c.__qualname__}" for c in classes]
    # files saved before each method had its folder name the estimators by their old modules
    earlier = [
        f"{old}.{c.__qualname__}"
        for c in classes
        for old, new in MOVED_MODULES.items()
        if new == c.__module__ and hasattr(obliquetrees, c.__qualname__)
    ]
    assert len(earlier) == 8
    assert sorted(TRUSTED_TYPES) == sorted(current + earlier)


#: Module paths of the layout before each method had a folder (as files saved then name them).
_OLD_MODULE_OF = {
    "CO2ForestClassifier": "obliquetrees._co2",
    "CO2ForestRegressor": "obliquetrees._co2_regressor",
    "E2EDTClassifier": "obliquetrees._e2edt",
    "E2EDTRegressor": "obliquetrees._e2edt",
    "HingeForestClassifier": "obliquetrees._hinge",
    "HingeForestRegressor": "obliquetrees._hinge",
    "SoftTreeClassifier": "obliquetrees._soft",
    "SoftTreeRegressor": "obliquetrees._soft",
}


def _as_saved_before_the_move(blob, cls):
    """A protocol-2 pickle as the old layout wrote it: the same bytes with the old module
    paths (protocol 2 names classes in text lines, so the paths can be swapped)."""
    blob = blob.replace(
        f"c{cls.__module__}\n".encode(), f"c{_OLD_MODULE_OF[cls.__name__]}\n".encode()
    )
    return blob.replace(b"cobliquetrees.hinge.training\n", b"cobliquetrees._training.hinge\n")


@pytest.mark.parametrize(
    "cls", [c for c in ESTIMATORS if c.__name__ in _OLD_MODULE_OF], ids=lambda c: c.__name__
)
def test_pickles_of_the_layout_before_method_folders_load(cls):
    model, X = _fitted(cls)
    blob = _as_saved_before_the_move(pickle.dumps(model, protocol=2), cls)
    assert f"c{_OLD_MODULE_OF[cls.__name__]}\n".encode() in blob
    assert f"c{cls.__module__}\n".encode() not in blob
    loaded = pickle.loads(blob)
    assert type(loaded) is cls
    for key, value in _outputs(model, X).items():
        assert _outputs(loaded, X)[key].tobytes() == value.tobytes(), key


def _skops_entry(schema, path):
    """The node of a skops schema reached by ``path``: keys of the saved
    attribute dicts, from the estimator down."""
    node = schema
    for key in path:
        if node["__loader__"] == "ObjectNode":
            node = node["content"]  # the dict of the object's attributes
        node = node["content"][key]
    return node


def _tamper(path, out, array_path, edit):
    """Copy the skops file ``path`` to ``out`` with one saved array edited in place."""
    import io
    import json
    import zipfile

    with zipfile.ZipFile(path) as source:
        schema = json.loads(source.read("schema.json"))
        entry = _skops_entry(schema, array_path)
        assert entry["__loader__"] == "NdArrayNode", entry
        array = np.load(io.BytesIO(source.read(entry["file"])))
        array = edit(array)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        with zipfile.ZipFile(out, "w") as target:
            for item in source.infolist():
                data = source.read(item)
                target.writestr(item, buffer.getvalue() if item.filename == entry["file"] else data)


def _set_first(value, index=0):
    def edit(array):
        array = array.copy()
        array.flat[index] = value
        return array

    return edit


def _saved(attribute, array):
    return ("_obliquetrees_containers", attribute, "state", array)


@pytest.mark.parametrize(
    ("name", "array_path", "edit", "message"),
    [
        pytest.param(
            "CO2ForestClassifier",
            _saved("forest_", "children_left"),
            _set_first(10**9),
            "unpickled ObliqueForest",
            id="CO2 child id 1e9",
        ),
        pytest.param(
            "SoftTreeRegressor",
            # its splits are dense: it stores no feature ids (format 4), so one more is refused
            _saved("tree_", "weight_index"),
            lambda a: np.append(a, np.int32(10**8)),
            "unpickled ObliqueTree",
            id="soft tree feature index 1e8",
        ),
        pytest.param(
            "E2EDTClassifier",
            _saved("forest_", "value"),
            lambda a: a[:-1],
            "unpickled ObliqueForest",
            id="E2EDT truncated leaf values",
        ),
        pytest.param(
            "HingeForestClassifier",
            _saved("_model", "feat"),
            _set_first(10**8),
            "Invalid HingeModel",
            id="hinge feature index 1e8",
        ),
        pytest.param(
            "HingeForestRegressor",
            _saved("_missing", "columns"),
            lambda a: np.array([5, 2], dtype=np.int64),
            "missing-value columns",
            id="hinge missing-value columns out of order",
        ),
    ],
)
def test_tampered_skops_file_is_refused_before_any_kernel_runs(
    tmp_path, name, array_path, edit, message
):
    """skops rebuilds the estimator through its __setstate__, so an edited
    array meets the same checks as in an edited pickle: ValueError at load."""
    sio = pytest.importorskip("skops.io", reason="skops is a test extra (pip install skops)")
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    model, _ = _fitted(getattr(obliquetrees, name))
    sio.dump(model, tmp_path / "model.skops")
    sio.load(tmp_path / "model.skops", trusted=TRUSTED_TYPES)  # the unedited file loads
    _tamper(tmp_path / "model.skops", tmp_path / "tampered.skops", array_path, edit)
    with pytest.raises(ValueError, match=message):
        sio.load(tmp_path / "tampered.skops", trusted=TRUSTED_TYPES)


def test_skops_file_with_a_container_swapped_for_plain_data_is_refused(tmp_path):
    """A file that sets ``forest_`` to a dict of arrays directly (not through
    the saved containers) is refused too: the estimator checks its attributes."""
    sio = pytest.importorskip("skops.io", reason="skops is a test extra (pip install skops)")
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    model, _ = _fitted(obliquetrees.CO2ForestClassifier)
    forged = type(model).__new__(type(model))
    state = model.__getstate__()
    state["forest_"] = state.pop("_obliquetrees_containers")["forest_"]["state"]
    forged.__dict__.update(state)  # what a forged file would describe
    sio.dump(forged, tmp_path / "forged.skops")
    with pytest.raises(ValueError, match="not an ObliqueForest"):
        sio.load(tmp_path / "forged.skops", trusted=TRUSTED_TYPES)


def test_saved_state_is_plain_data_and_pickles_from_before_still_load():
    """__getstate__ holds arrays, builtins and dicts of them only; a state in
    the former layout (container objects as attributes) still loads."""
    for cls in ESTIMATORS:
        model, X = _fitted(cls)
        _assert_plain(model.__getstate__(), cls.__name__)
        old = cls.__new__(cls)
        old.__setstate__(dict(vars(model)))  # the containers themselves, as pickled before
        for key, value in _outputs_of(model, X).items():
            assert _outputs_of(old, X)[key].tobytes() == value.tobytes(), (cls.__name__, key)


def test_pickles_from_before_a_parameter_existed_get_its_default():
    """A saved state without one of today's parameters (a model saved before
    it was added) loads with the parameter's default: same predictions, and
    get_params, clone and refit work."""
    from sklearn.base import clone

    for cls in ESTIMATORS:
        model, X = _fitted(cls)
        name, default = sorted(cls._get_param_defaults().items())[-1]
        state = model.__getstate__()
        del state[name]
        old = cls.__new__(cls)
        old.__setstate__(state)
        assert old.get_params()[name] == default or old.get_params()[name] is default
        for key, value in _outputs_of(model, X).items():
            assert _outputs_of(old, X)[key].tobytes() == value.tobytes(), (cls.__name__, key)
        clone(old)


def _assert_plain(value, where):
    if isinstance(value, dict):
        for key, item in value.items():
            _assert_plain(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _assert_plain(item, f"{where}[{i}]")
    else:
        plain = (np.ndarray, np.generic, int, float, str, bool, type(None))
        assert isinstance(value, plain), f"{where} is a {type(value).__name__}"


def test_malformed_saved_containers_are_a_clear_error():
    model, _ = _fitted(obliquetrees.SoftTreeClassifier)
    for entry, match in [
        ({"tree_": {"type": "Popen", "state": {}}}, "is not a"),
        ({"tree_": {"type": "ObliqueTree", "state": {}, "extra": 1}}, "is not a"),
        ({"tree_": {"type": "ObliqueTree", "state": {"format_version": 2}}}, "ObliqueTree"),
        (["tree_"], "not a dict"),
    ]:
        state = model.__getstate__()
        state["_obliquetrees_containers"] = entry
        with pytest.raises(ValueError, match=match):
            type(model).__new__(type(model)).__setstate__(state)


# ------------------------------------------------------- multiprocessing
def _predict_in_worker(blob, X):
    """Unpickle and predict in a pool worker; what it predicted, its thread
    count and the warnings raised."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = pickle.loads(blob)
        predicted = model.predict(X)
        threads = model._n_threads()
    return predicted, threads, [str(w.message) for w in caught]


def test_predict_in_multiprocessing_pool_worker_keeps_n_jobs_without_warning():
    """A Pool worker is a daemonic process, where joblib's default backend
    would set n_jobs=1 and warn about loky: prediction threads are not a
    process pool, so n_jobs=2 means two threads there too, silently."""
    import multiprocessing

    jobs, expected = [], []
    for cls in ESTIMATORS:
        model, X = _fitted(cls)
        model.set_params(n_jobs=2)
        jobs.append((pickle.dumps(model), X))
        expected.append(model.predict(X))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        results = pool.starmap(_predict_in_worker, jobs)
    for cls, want, (got, threads, messages) in zip(ESTIMATORS, expected, results, strict=True):
        assert got.tobytes() == want.tobytes(), cls.__name__
        assert threads == 2, cls.__name__
        assert not [m for m in messages if "n_jobs" in m], (cls.__name__, messages)


def test_thread_count_keeps_joblib_meaning_of_n_jobs():
    from joblib import cpu_count, parallel_config

    from obliquetrees._training._parallel import n_threads_from_jobs

    assert n_threads_from_jobs(None) == 1 and n_threads_from_jobs(3) == 3
    assert n_threads_from_jobs(-1) == cpu_count()
    assert n_threads_from_jobs(-2) == max(cpu_count() - 1, 1)
    with parallel_config(n_jobs=3):  # None follows an active configuration
        assert n_threads_from_jobs(None) == 3
    with parallel_config(backend="loky"):
        assert n_threads_from_jobs(2) == 2
    with pytest.raises(ValueError, match="n_jobs == 0"):
        n_threads_from_jobs(0)
