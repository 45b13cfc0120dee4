"""Run every gallery script of examples/ and check the PNGs it promises.

Each gallery script declares ``OUTPUTS`` (PNG file names) and, when it needs
the shared data, ``DATASETS``; both are read from its source without importing
it. Scripts without ``OUTPUTS`` do not follow the gallery contract (``--out``)
and are not run here.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GALLERY = [
    "plot_oblique_vs_axis_aligned.py",
    "plot_e2edt_annealing.py",
    "plot_soft_vs_hard_tree.py",
    "plot_e2edt_usps_weights.py",
    "plot_co2_vs_random_forest.py",
    "plot_hinge_training_curves.py",
    "plot_missing_values.py",
]
#: scripts on real data sets (larger fits, several numba kernels to load)
SLOW = {
    "plot_co2_vs_random_forest.py",
    "plot_e2edt_usps_weights.py",
    "plot_hinge_training_curves.py",
    "plot_missing_values.py",
}


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


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.slow) if s.name in SLOW else s for s in SCRIPTS],
    ids=lambda s: s.name,
)
def test_example_writes_its_pngs(script, tmp_path):
    pytest.importorskip("matplotlib", reason="the gallery needs matplotlib (test extra)")
    from matplotlib.image import imread

    for name in _declared(script, "DATASETS", []):
        if not (DATA_DIR / f"{name}.npz").exists():
            pytest.skip(f"{script.name} needs {name}.npz, not found in {DATA_DIR}")
    env = dict(os.environ, MPLBACKEND="Agg", OBLIQUETREES_DATA=str(DATA_DIR))
    result = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = _declared(script, "OUTPUTS", [])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(outputs)
    for name in outputs:
        image = imread(tmp_path / name)
        assert image.shape[0] >= 200 and image.shape[1] >= 200, (name, image.shape)
        assert image.std() > 0.01, f"{name} is (nearly) blank"
        assert str(tmp_path / name) in result.stdout
