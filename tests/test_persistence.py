"""Deployment: pickles and joblib files predict identically in a fresh process.

Also: an unknown container format is a clear error, and a read-only
installation (numba cannot write its cache beside the package) still imports,
loads and predicts.
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
    assert not list(site.rglob("*.nbi")), "numba wrote its cache into the read-only package"
