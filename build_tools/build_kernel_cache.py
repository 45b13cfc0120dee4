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


#: Where a build of these sources keeps its kernels for reuse, and whether they are there.
REUSE = (
    "import json; from obliquetrees._core._kernel_cache import build_reuse_dir, manifest_matches; "
    "d = build_reuse_dir(); "
    "print(json.dumps({'dir': d and str(d), 'ready': bool(d) and manifest_matches(d)}))"
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
    reuse = json.loads(run_child(build_lib, REUSE))
    if reuse["ready"]:
        shutil.copytree(reuse["dir"], target)
        print(f"obliquetrees: kernels reused from {reuse['dir']}", flush=True)
        return
    print("obliquetrees: compiling the kernels for the generic CPU (a few minutes)", flush=True)
    print(run_child(build_lib, BUILD), end="", flush=True)
    if reuse["dir"] is not None:
        shutil.rmtree(reuse["dir"], ignore_errors=True)
        shutil.copytree(target, reuse["dir"])


if __name__ == "__main__":
    main(sys.argv[1])
