"""Compile the package's kernels for the generic CPU into the wheel being built.

    python build_tools/build_kernel_cache.py BUILD_LIB

``setup.py`` runs this after copying the package to ``BUILD_LIB``: a child
process imports the package from there with numba set to the generic CPU
(``NUMBA_CPU_NAME=generic``) and the shipped cache in write mode
(``OBLIQUETREES_BUILD_KERNEL_CACHE=1``), runs ``kernel_cache_workload.py``,
and writes the manifest that the installed package checks before using the
kernels (``obliquetrees/_core/_kernel_cache.py``). Takes a few minutes: the
compilation that each new environment otherwise pays on first use.

Set ``OBLIQUETREES_KERNEL_BUILD_CACHE`` to a directory to reuse kernels built
earlier from the same sources with the same numba and Python (CI builds the
wheel twice); the manifest decides what matches.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child_env(build_lib):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(build_lib), env.get("PYTHONPATH")]))
    env["NUMBA_CPU_NAME"] = "generic"
    env["NUMBA_CPU_FEATURES"] = ""
    env["OBLIQUETREES_BUILD_KERNEL_CACHE"] = "1"
    env.pop("NUMBA_CACHE_DIR", None)
    return env


def run_child(build_lib, code):
    return subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(build_lib),
        cwd=build_lib,  # not the source tree, whose package would shadow BUILD_LIB's
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout


DESCRIBE = (
    "import json; from obliquetrees._core._kernel_cache import build_description; "
    "print(json.dumps(build_description()))"
)
BUILD = (
    "import runpy; "
    f"runpy.run_path({str(HERE / 'kernel_cache_workload.py')!r}, run_name='__main__'); "
    "from obliquetrees._core._kernel_cache import write_manifest; write_manifest()"
)


def main(build_lib):
    build_lib = Path(build_lib).resolve()
    target = build_lib / "obliquetrees" / "_kernel_cache"
    shutil.rmtree(target, ignore_errors=True)
    description = json.loads(run_child(build_lib, DESCRIBE))
    reuse_root = os.environ.get("OBLIQUETREES_KERNEL_BUILD_CACHE")
    reuse = None
    if reuse_root:
        reuse = Path(reuse_root) / description["source_sha256"][:16]
        try:
            if json.loads((reuse / "manifest.json").read_text()) == description:
                shutil.copytree(reuse, target)
                print(f"obliquetrees: kernels reused from {reuse}", flush=True)
                return
        except (OSError, ValueError):
            pass
    print("obliquetrees: compiling the kernels for the generic CPU (a few minutes)", flush=True)
    print(run_child(build_lib, BUILD), end="", flush=True)
    if reuse is not None:
        shutil.rmtree(reuse, ignore_errors=True)
        shutil.copytree(target, reuse)


if __name__ == "__main__":
    main(sys.argv[1])
