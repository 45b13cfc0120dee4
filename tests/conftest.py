"""Shared fixtures: the benchmark data sets and random-number generators."""

import os
from pathlib import Path

import numpy as np
import pytest

#: ../shared/data beside the repository, as on the developers' machines and CI;
#: OBLIQUETREES_DATA overrides it.
DATA_DIR = Path(
    os.environ.get("OBLIQUETREES_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def load_shared(name):
    """Arrays of ``<DATA_DIR>/<name>.npz``; skips the test when the file is absent."""
    path = DATA_DIR / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"data set {name!r} not found at {path} (set OBLIQUETREES_DATA)")
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


@pytest.fixture
def shared_data():
    """``shared_data(name)`` loads ``../shared/data/<name>.npz`` or skips."""
    return load_shared


@pytest.fixture
def rng():
    """A seeded generator, fresh for every test (no global seeding)."""
    return np.random.default_rng(0)
