"""Build hook: compile the kernels into the wheel (metadata lives in setup.cfg).

After the package is copied to the build directory, ``build_tools/build_kernel_cache.py``
compiles its numba kernels for the generic CPU into ``obliquetrees/_kernel_cache``, so an
installed wheel fits its first model without minutes of compilation. Editable installs
skip it (they compile on first use, as numba does). ``OBLIQUETREES_SKIP_KERNEL_CACHE=1``
skips it too.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.editable_mode or os.environ.get("OBLIQUETREES_SKIP_KERNEL_CACHE") == "1":
            return
        script = Path(__file__).resolve().parent / "build_tools" / "build_kernel_cache.py"
        subprocess.run([sys.executable, str(script), self.build_lib], check=True)


setup(cmdclass={"build_py": BuildPyWithKernels})
