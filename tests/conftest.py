"""Shared fixtures: the benchmark data sets, a badly scaled classification problem and
random-number generators; the number of pytest-xdist workers."""

import os
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.datasets import make_classification

#: ../shared/data beside the repository, as on the developers' machines and CI;
#: OBLIQUETREES_DATA overrides it.
DATA_DIR = Path(
    os.environ.get("OBLIQUETREES_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


#: Peak resident memory of one worker, with margin (.ci/run's "tests" line: the suite in
#: one process peaked at 2.9-3.4 GB, each of two workers at 2.0 GB).
WORKER_BYTES = 4 * 2**30


def _available_memory():
    """Bytes of memory available to new processes (Linux's MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject.toml's addopts): one worker per usable core
    (``joblib.cpu_count()``: CPU affinity and container quotas), but no more than the
    available memory holds at :data:`WORKER_BYTES` each (at least one)."""
    workers = joblib.cpu_count()
    memory = _available_memory()
    if memory is not None:
        workers = min(workers, memory // WORKER_BYTES)
    return max(1, workers)


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


@pytest.fixture(scope="module")
def blobs():
    """Three classes in eight badly scaled features (400 rows): ``X, y``."""
    X, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    return X * np.arange(1, 9) * 10 + 5, y  # badly scaled on purpose


@pytest.fixture
def rng():
    """A seeded generator, fresh for every test (no global seeding)."""
    return np.random.default_rng(0)
