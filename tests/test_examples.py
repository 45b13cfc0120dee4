"""Run every gallery script of examples/ and check the PNGs it promises.

Each gallery script declares ``OUTPUTS`` (PNG file names) and, when it
downloads a data set with ``sklearn.datasets.fetch_openml``, ``OPENML``
(name -> version); both are read from its source without importing it.
Scripts without ``OUTPUTS`` do not follow the gallery contract (``--out``)
and are not run here.

The tests run offline: a downloading script runs with ``fetch_openml``
replaced by a stand-in that serves the same data set from the shared
offline copies (``../shared/data``; train and test parts joined, labels as
strings as OpenML gives them), and its message for a failed download is
tested with the network made unreachable.
"""

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

import joblib
import pytest

from tests.conftest import DATA_DIR

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GALLERY = [
    "plot_oblique_vs_axis_aligned.py",
    "plot_e2edt_annealing.py",
    "plot_soft_vs_hard_tree.py",
    "plot_e2edt_digits_weights.py",
    "plot_co2_vs_random_forest.py",
    "plot_hinge_training_curves.py",
    "plot_missing_values.py",
]
#: scripts that take a minute or more
SLOW = {
    "plot_missing_values.py",
}
#: OpenML name -> (shared offline copy of the same data set, how OpenML writes its labels)
STAND_INS = {
    "satimage": ("satimage", "str"),  # labels "1".."7"
    "letter": ("letter_uci", "letters"),  # labels "A".."Z" (the copy has 0..25)
}
#: Runs a script with fetch_openml served from the shared data (argv: data dir, script, args).
WITH_STAND_IN = """
import runpy, string, sys
import numpy as np
import sklearn.datasets

STAND_INS = %r
DATA_DIR = sys.argv[1]

def fetch_openml(name, *, version, return_X_y, as_frame, parser):
    assert return_X_y and not as_frame, "the gallery asks for (X, y) as numpy arrays"
    copy, labels = STAND_INS[name]
    with np.load(f"{DATA_DIR}/{copy}.npz") as data:
        X = np.concatenate([data["X_train"], data["X_test"]]).astype(np.float64)
        y = np.concatenate([data["y_train"], data["y_test"]])
    if labels == "letters":
        y = np.array(list(string.ascii_uppercase))[y]
    return X, y.astype(str).astype(object)

sklearn.datasets.fetch_openml = fetch_openml
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _declared(path, name, default):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return default


SCRIPTS = [
    path
    for path in sorted(EXAMPLES.glob("plot_*.py"))
    if path.name in GALLERY or _declared(path, "OUTPUTS", None)
]


def test_gallery_scripts_are_listed_and_declare_outputs():
    readme = (EXAMPLES / "README.txt").read_text()
    for name in GALLERY:
        assert (EXAMPLES / name).exists(), name
        assert name in readme
        assert _declared(EXAMPLES / name, "OUTPUTS", None), name


def _openmp_share():
    """``OMP_NUM_THREADS`` for a script run beside the other pytest-xdist workers: its
    share of the cores (nothing when the variable is set or the suite runs in one process).

    OpenMP threads that wait for a busy core spin: plot_missing_values.py's
    HistGradientBoosting fits took the script 184 s with two OpenMP threads beside a
    two-thread load on 2 cores, 75 s with one (46 and 45 s alone).
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1 or "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, joblib.cpu_count() // workers))}


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.slow) if s.name in SLOW else s for s in SCRIPTS],
    ids=lambda s: s.name,
)
def test_example_writes_its_pngs(script, tmp_path):
    pytest.importorskip("matplotlib", reason="the gallery needs matplotlib (test extra)")
    from matplotlib.image import imread

    command = [sys.executable, str(script), "--out", str(tmp_path)]
    downloads = _declared(script, "OPENML", {})
    if downloads:
        for name in downloads:
            copy = DATA_DIR / f"{STAND_INS[name][0]}.npz"
            if not copy.exists():
                pytest.skip(f"{script.name} downloads {name!r}; its offline copy {copy} is absent")
        command = [sys.executable, "-c", WITH_STAND_IN % (STAND_INS,), str(DATA_DIR), *command[1:]]
    env = dict(os.environ, MPLBACKEND="Agg", **_openmp_share())
    result = subprocess.run(
        command, cwd=EXAMPLES.parent, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = _declared(script, "OUTPUTS", [])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(outputs)
    for name in outputs:
        image = imread(tmp_path / name)
        assert image.shape[0] >= 200 and image.shape[1] >= 200, (name, image.shape)
        assert image.std() > 0.01, f"{name} is (nearly) blank"
        assert str(tmp_path / name) in result.stdout


def _unreachable_proxy():
    """``http://127.0.0.1:<port>`` with nothing listening on the port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


DOWNLOADING = [s for s in SCRIPTS if _declared(s, "OPENML", {})]


def test_scripts_on_real_data_download_them_or_use_bundled_data():
    """No gallery script reads files a newcomer does not have; the README
    marks exactly the downloading ones."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    for script in SCRIPTS:
        source = script.read_text()
        assert "OBLIQUETREES_DATA" not in source and "shared" not in source, script.name
        row = next(line for line in readme.splitlines() if f"`{script.name}`" in line)
        assert ("download" in row) == (script in DOWNLOADING), row
    assert DOWNLOADING, "no downloading script: drop the stand-in machinery"


@pytest.mark.parametrize("script", DOWNLOADING, ids=lambda s: s.name)
def test_failed_download_is_a_clear_message(script, tmp_path):
    """Offline (every connection refused, empty data home): exit status 1, a
    last line naming the data set, the cache and what to do, no traceback."""
    proxy = _unreachable_proxy()
    env = dict(
        os.environ,
        MPLBACKEND="Agg",
        SCIKIT_LEARN_DATA=str(tmp_path / "scikit_learn_data"),
        http_proxy=proxy,
        https_proxy=proxy,
        HTTP_PROXY=proxy,
        HTTPS_PROXY=proxy,
        no_proxy="",
        NO_PROXY="",
    )
    result = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    (name,) = _declared(script, "OPENML", {})
    # scikit-learn warns at each retry before giving up; the script's message comes last
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith(f"{script.name} needs the OpenML data set {name!r}"), message
    assert str(tmp_path / "scikit_learn_data") in message and "internet connection" in message
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.slow
def test_quickstart_prints_compile_time_apart_from_fit_times():
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    compiling = [
        i for i, line in enumerate(lines) if line.startswith("Loading or compiling the numba")
    ]
    assert len(compiling) == 2  # classification, then regression
    for start in compiling:
        total = next(i for i in range(start, len(lines)) if "kernel time" in lines[i])
        # one timed line per obliquetrees estimator, then the total, then the fit table
        assert all(lines[i].startswith("  obliquetrees ") for i in range(start + 1, total))
        assert total - start - 1 == 4 and lines[total].rstrip().endswith(
            "(not included in the fit times below)"
        )
        assert lines[total + 2].startswith("model") and "fit s" in lines[total + 2]
