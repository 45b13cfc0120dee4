"""The shipped kernel cache: used only when it matches, never written outside its build.

A copy of the package gets a one-kernel shipped cache built the way
``build_tools/build_kernel_cache.py`` builds the real one (its own child
environment: generic CPU, build mode); fresh interpreters with an empty numba
cache then call the kernel and report whether it was loaded or compiled.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "build_tools" / "build_kernel_cache.py"

#: Calls one small kernel and prints its result and numba's cache counters.
CALL = """
import json
import numpy as np
from obliquetrees._training.grower import grow_capacity
out = grow_capacity(np.arange(3, dtype=np.int64), 5, -1)
stats = grow_capacity.stats
print(json.dumps({"out": out.tolist(), "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values())}))
"""


def _build_script(path=SCRIPT):
    spec = importlib.util.spec_from_file_location("build_kernel_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _call(package_root, numba_cache, expect_warning=None, **extra_env):
    env = dict(os.environ, PYTHONPATH=str(package_root), NUMBA_CACHE_DIR=str(numba_cache))
    env.pop("NUMBA_CPU_NAME", None)
    env.pop("OBLIQUETREES_KERNEL_BUILD_CACHE", None)
    env.update(extra_env)
    done = subprocess.run(
        [sys.executable, "-c", CALL],
        env=env,
        cwd=package_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    if expect_warning is None:
        assert "RuntimeWarning" not in done.stderr, done.stderr
    else:
        assert expect_warning in done.stderr, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _package_copy(root):
    """A copy of the package under ``root``, without caches, with sources of its own.

    A comment naming ``root`` is appended to ``_version.py``, so that no kernels
    built from the checkout's sources (the installed distribution's, or a wheel
    build's left for reuse) match this copy. Returns ``root``.
    """
    shutil.copytree(
        ROOT / "obliquetrees",
        root / "obliquetrees",
        ignore=shutil.ignore_patterns("__pycache__", "_kernel_cache"),
    )
    with open(root / "obliquetrees/_version.py", "a") as f:
        f.write(f"\n# test copy {root.name}\n")
    return root


@pytest.fixture(scope="module")
def shipped_package(tmp_path_factory):
    """A copy of the package whose shipped cache holds ``grow_capacity`` for one signature."""
    root = _package_copy(tmp_path_factory.mktemp("shipped"))
    build = _build_script()
    build.run_child(
        root,
        CALL + "\nfrom obliquetrees._core import _kernel_cache\n_kernel_cache.write_manifest()\n",
    )
    return root


def test_a_matching_shipped_cache_is_loaded_and_nothing_is_compiled(shipped_package, tmp_path):
    manifest = json.loads(
        (shipped_package / "obliquetrees/_kernel_cache/manifest.json").read_text()
    )
    assert manifest["cpu_name"] == "generic"
    result = _call(shipped_package, tmp_path / "numba")
    assert result == {"out": [0, 1, 2, -1, -1], "hits": 1, "misses": 0}
    # loaded from the package: nothing was written to numba's own cache
    assert not any(p.is_file() for p in (tmp_path / "numba").rglob("*"))


def test_kernels_a_wheel_build_left_for_reuse_are_loaded(shipped_package, tmp_path):
    """CI's test run from the source tree loads what its wheel build compiled."""
    root = tmp_path / "pkg"
    shutil.copytree(shipped_package, root, ignore=shutil.ignore_patterns("__pycache__"))
    shipped = root / "obliquetrees/_kernel_cache"
    digest = json.loads((shipped / "manifest.json").read_text())["source_sha256"]
    # named as a build names it: the source hash, then the build scripts' hash
    shutil.move(shipped, tmp_path / "reuse" / f"{digest[:16]}-0123456789abcdef")
    result = _call(
        root, tmp_path / "numba", OBLIQUETREES_KERNEL_BUILD_CACHE=str(tmp_path / "reuse")
    )
    assert result["hits"] == 1 and result["misses"] == 0
    assert _call(root, tmp_path / "numba2")["misses"] == 1  # not without the variable


def test_a_build_keeps_its_kernels_under_the_sources_and_the_build_scripts_hashes(tmp_path):
    """A changed workload compiles other kernels: its build must not reuse the old ones."""
    from obliquetrees._core._kernel_cache import build_reuse_dir, package_source_hash

    copy = tmp_path / "build_tools"
    shutil.copytree(SCRIPT.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = _build_script(copy / SCRIPT.name).build_hash()
    assert before == _build_script().build_hash()
    with open(copy / "kernel_cache_workload.py", "a") as f:
        f.write("\n# one more path to compile\n")
    after = _build_script(copy / SCRIPT.name).build_hash()
    assert len(before) == len(after) == 16 and before != after
    assert build_reuse_dir(before).name == f"{package_source_hash()[:16]}-{before}"


@pytest.mark.parametrize("change", ["numba", "source"])
def test_a_shipped_cache_that_does_not_match_is_ignored(shipped_package, tmp_path, change):
    root = tmp_path / "pkg"
    shutil.copytree(shipped_package, root, ignore=shutil.ignore_patterns("__pycache__"))
    if change == "numba":  # built by another numba: its machine code may not fit this one
        path = root / "obliquetrees/_kernel_cache/manifest.json"
        manifest = json.loads(path.read_text())
        manifest["numba"] = "0.0.0"
        path.write_text(json.dumps(manifest))
    else:  # an edited installation: the shipped code may be stale
        with open(root / "obliquetrees/_training/grower.py", "a") as f:
            f.write("\n# edited\n")
    result = _call(root, tmp_path / "numba")
    assert result == {"out": [0, 1, 2, -1, -1], "hits": 0, "misses": 1}


def test_the_shipped_cache_is_read_only_outside_its_build(monkeypatch):
    from obliquetrees._core import _kernel_cache

    monkeypatch.delenv(_kernel_cache.BUILD_ENV, raising=False)
    locator = _kernel_cache._ShippedLocator(
        test_the_shipped_cache_is_read_only_outside_its_build, ""
    )
    with pytest.raises(OSError, match="read-only"):
        locator.ensure_cache_path()
    with pytest.raises(RuntimeError, match="generic CPU"):
        _kernel_cache.write_manifest()


def test_kernels_without_a_shipped_cache_use_numbas_cache():
    from obliquetrees._core._kernel_cache import KernelCache
    from obliquetrees._training.grower import grow_capacity

    assert isinstance(grow_capacity._cache, KernelCache)
    np.testing.assert_array_equal(grow_capacity(np.zeros(2), 3, 1.0), [0.0, 0.0, 1.0])


def _shipped_file(root, suffix):
    (path,) = (root / "obliquetrees/_kernel_cache").rglob(f"*{suffix}")
    return path


@pytest.mark.parametrize(
    "damage",
    ["flipped bit in the machine code", "truncated machine code", "truncated index", "swapped"],
)
def test_a_damaged_shipped_file_is_never_executed_but_compiled_again(
    shipped_package, tmp_path, damage
):
    """A file that does not match the manifest's checksum is ignored with a warning."""
    root = tmp_path / "pkg"
    shutil.copytree(shipped_package, root, ignore=shutil.ignore_patterns("__pycache__"))
    code, index = _shipped_file(root, ".nbc"), _shipped_file(root, ".nbi")
    data = bytearray(code.read_bytes())
    if damage == "flipped bit in the machine code":
        data[len(data) // 2] ^= 0x10
        code.write_bytes(bytes(data))
    elif damage == "truncated machine code":
        code.write_bytes(bytes(data[: len(data) // 3]))
    elif damage == "truncated index":
        index.write_bytes(index.read_bytes()[:10])
    else:
        code.write_bytes(index.read_bytes())
    result = _call(root, tmp_path / "numba", expect_warning="ignoring the shipped compiled code")
    assert result == {"out": [0, 1, 2, -1, -1], "hits": 0, "misses": 1}


def test_a_source_checkout_loads_the_installed_distributions_kernels(shipped_package, tmp_path):
    """``pytest`` in a clone after ``pip install .`` compiles nothing the install built."""
    checkout = tmp_path / "checkout"
    shutil.copytree(shipped_package, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    shutil.move(checkout / "obliquetrees/_kernel_cache", site / "obliquetrees/_kernel_cache")
    dist_info = site / "obliquetrees-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: obliquetrees\nVersion: 0.1\n")
    path = os.pathsep.join([str(checkout), str(site)])
    result = _call(checkout, tmp_path / "numba", PYTHONPATH=path)
    assert result["hits"] == 1 and result["misses"] == 0


#: Fits a small CO2 forest (its growth loop is a numba overload) with no cache location at all.
NO_CACHE_LOCATION = """
import numba.core.caching as caching
caching.FunctionCache._impl_class._locator_classes = []  # as on a read-only install
import numpy as np
from obliquetrees import CO2ForestClassifier
from obliquetrees._core._kernel_cache import shipped_kernels_usable
assert not shipped_kernels_usable()
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
y = X[:, 0] > 0
print(CO2ForestClassifier(n_estimators=1, max_depth=2, random_state=0).fit(X, y).score(X, y))
"""


@pytest.mark.slow
def test_kernels_compile_where_numba_has_no_cache_location(tmp_path):
    """No writable cache and no matching shipped kernels: every kernel compiles in memory."""
    _package_copy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", NO_CACHE_LOCATION],
        env=dict(os.environ, PYTHONPATH=str(tmp_path)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) > 0.5


def test_numbas_cache_is_stale_once_any_source_file_of_the_package_changes(tmp_path):
    """A kernel's cached code is not loaded after another file of the package changed.

    numba stamps a kernel's cache with its own file only, yet its machine code
    holds the kernels it calls from other files: here ``grow_capacity``'s file
    is left alone and another source file changes.
    """
    root = _package_copy(tmp_path / "pkg")
    numba_cache = tmp_path / "numba"
    assert _call(root, numba_cache)["misses"] == 1
    assert _call(root, numba_cache) == {"out": [0, 1, 2, -1, -1], "hits": 1, "misses": 0}
    with open(root / "obliquetrees/_core/_math.py", "a") as f:
        f.write("\n# another file changed\n")
    assert _call(root, numba_cache) == {"out": [0, 1, 2, -1, -1], "hits": 0, "misses": 1}
    assert _call(root, numba_cache)["hits"] == 1
