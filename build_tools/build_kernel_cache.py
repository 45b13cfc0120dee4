"""Compile the package's kernels for the generic CPU into the wheel being built.

    python build_tools/build_kernel_cache.py BUILD_LIB

``setup.py`` runs this after copying the package to ``BUILD_LIB``: child
processes, one per core (at most one per estimator), import the package from
there with numba set to the generic CPU (``NUMBA_CPU_NAME=generic``) and the
shipped cache in write mode (``OBLIQUETREES_BUILD_KERNEL_CACHE=1``), each
running its share of ``kernel_cache_workload.py`` into a directory of its
own; a last child merges those into the package's ``_kernel_cache`` and
writes the manifest (with every file's SHA-256) that the installed package
checks before using the kernels (``obliquetrees/_core/_kernel_cache.py``).
Each process prints its parts as they finish (``pip install -v`` shows
them). Takes most of the install's time, about eight minutes on two cores
(CI's main job, install included, took 9.6 minutes at 0e654a0): the
compilation that each new environment otherwise pays on first use, spread
over the paths a user reaches.

Each build also keeps its kernels in a store (``obliquetrees/kernels`` in the
user's cache directory, or ``$OBLIQUETREES_KERNEL_BUILD_CACHE``), one folder
per source hash and build scripts' hash, and a later build of the same
sources and scripts with the same numba and Python copies them instead of
compiling: ``pip install ".[test]"`` after
``pip install .`` rebuilds the wheel (pip rebuilds a local directory on every
install) but compiles nothing. The manifest decides what matches; the store
keeps the newest few folders.
"""

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child_env(build_lib, part_dir=None):
    env = dict(os.environ)
    if part_dir is not None:
        env["OBLIQUETREES_BUILD_KERNEL_PART"] = str(part_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(build_lib), env.get("PYTHONPATH")]))
    env["NUMBA_CPU_NAME"] = "generic"
    env["NUMBA_CPU_FEATURES"] = ""
    env["OBLIQUETREES_BUILD_KERNEL_CACHE"] = "1"
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def run_child(build_lib, code, capture=True):
    """Run ``code`` in a child importing BUILD_LIB's package; its stdout if ``capture``.

    Without ``capture`` the child prints as it goes (the build's progress).
    """
    return subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(build_lib),
        cwd=build_lib,  # not the source tree, whose package would shadow BUILD_LIB's
        check=True,
        stdout=subprocess.PIPE if capture else None,
        text=True,
    ).stdout


#: Where a build of these sources keeps its kernels for reuse, and whether they are
#: there: ``.format(build_hash())``.
REUSE = (
    "import json; from obliquetrees._core._kernel_cache import build_reuse_dir, manifest_matches; "
    "d = build_reuse_dir({!r}); "
    "print(json.dumps({{'dir': str(d), 'ready': manifest_matches(d)}}))"
)
#: Folders (builds) the store keeps: the newest ones.
KEEP = 4
#: Parts of the workload that can compile in parallel (``parts()`` there: the
#: estimators and the conversions).
N_PARTS = 9
#: One compiling process's share of the workload: ``.format(part, n_parts)``.
BUILD_PART = (
    "import runpy, sys; "
    "sys.argv[1:] = ['{}', '{}']; "
    f"runpy.run_path({str(HERE / 'kernel_cache_workload.py')!r}, run_name='__main__')"
)
#: Merges the processes' directories (``.format(list of paths)``) and writes the manifest.
MERGE = (
    "import runpy; "
    f"runpy.run_path({str(HERE / 'build_kernel_cache.py')!r})['merge']({{!r}}); "
    "from obliquetrees._core._kernel_cache import write_manifest; write_manifest()"
)


def build_hash():
    """First 16 hex digits of the SHA-256 of this folder's scripts.

    The workload decides which kernels a build compiles; a store folder of
    the same package sources built by another workload must not be reused.
    """
    digest = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def merge(part_dirs):
    """Merge the kernels that several build processes wrote into the package's cache.

    Runs in a build child (numba's index keys unpickle only with numba). Each
    kernel has one index file per process that compiled it (``<base>.nbi``:
    numba's version, then the source stamp and ``{key: data file}``); the
    merged index takes every key once, its data file renumbered.
    """
    from numba.core.serialize import dumps

    from obliquetrees._core._kernel_cache import SHIPPED_DIR

    indexes = {}
    for part in map(Path, part_dirs):
        for index in sorted(part.rglob("*.nbi")):
            with open(index, "rb") as f:
                version = pickle.load(f)
                stamp, overloads = pickle.loads(f.read())
            merged = indexes.setdefault(index.relative_to(part), (version, stamp, {}))
            if (version, stamp) != merged[:2]:
                raise RuntimeError(f"build processes disagree on {index.name}")
            for key, data_name in overloads.items():
                merged[2].setdefault(key, index.parent / data_name)
    for relative, (version, stamp, sources) in indexes.items():
        target = SHIPPED_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        base = relative.name[: -len(".nbi")]
        overloads = {}
        for number, (key, source) in enumerate(sources.items(), 1):
            overloads[key] = f"{base}.{number}.nbc"
            shutil.copyfile(source, target.parent / overloads[key])
        with open(target, "wb") as f:
            pickle.dump(version, f, protocol=-1)
            f.write(dumps((stamp, overloads)))


def store(target, reuse_dir):
    """Copy the built kernels to the store and drop its oldest folders; best effort."""
    try:
        shutil.rmtree(reuse_dir, ignore_errors=True)
        shutil.copytree(target, reuse_dir)
        folders = sorted(reuse_dir.parent.iterdir(), key=lambda p: p.stat().st_mtime)
        for old in folders[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as error:  # an unwritable home directory: the next build compiles again
        print(f"obliquetrees: kernels not kept for reuse ({error})", flush=True)


def main(build_lib):
    build_lib = Path(build_lib).resolve()
    target = build_lib / "obliquetrees" / "_kernel_cache"
    shutil.rmtree(target, ignore_errors=True)
    reuse = json.loads(run_child(build_lib, REUSE.format(build_hash())))
    if reuse["ready"]:
        shutil.copytree(reuse["dir"], target)
        print(f"obliquetrees: kernels reused from {reuse['dir']}", flush=True)
        return
    n_parts = max(1, min(os.cpu_count() or 1, N_PARTS))
    print(
        f"obliquetrees: compiling the kernels for the generic CPU in {n_parts} processes "
        "(about eight minutes on two cores)",
        flush=True,
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        part_dirs = [Path(scratch) / str(part) for part in range(n_parts)]
        children = [
            subprocess.Popen(
                [sys.executable, "-c", BUILD_PART.format(part, n_parts)],
                env=child_env(build_lib, part_dirs[part]),
                cwd=build_lib,
            )
            for part in range(n_parts)
        ]
        failed = [child.args for child in children if child.wait() != 0]
        if failed:
            raise RuntimeError(f"compiling the kernels failed in {failed}")
        run_child(build_lib, MERGE.format([str(d) for d in part_dirs]))
    print(f"obliquetrees: kernels compiled in {time.perf_counter() - start:.0f} s", flush=True)
    store(target, Path(reuse["dir"]))


if __name__ == "__main__":
    main(sys.argv[1])
