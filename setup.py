"""Build hook: compile the kernels into the wheel (metadata lives in setup.cfg).

After the package is copied to the build directory, ``build_tools/build_kernel_cache.py``
compiles its numba kernels for the generic CPU into ``obliquetrees/_kernel_cache``, so an
installed wheel fits its first model without minutes of compilation; ``pip install -v``
shows its progress, estimator by estimator. Such a wheel carries machine code for one
Python version and platform and is tagged for them (``cp311-cp311-linux_x86_64``, say).
Editable installs skip it (they compile on first use, as numba does), and so does
``OBLIQUETREES_SKIP_KERNEL_CACHE=1``, whose wheel is pure Python (``py3-none-any``).
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py


def ship_kernels():
    return os.environ.get("OBLIQUETREES_SKIP_KERNEL_CACHE") != "1"


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if self.editable_mode or not ship_kernels():
            return
        script = Path(__file__).resolve().parent / "build_tools" / "build_kernel_cache.py"
        subprocess.run([sys.executable, str(script), self.build_lib], check=True)


class WheelForThisPlatform(bdist_wheel):
    """A wheel tagged with the Python version, ABI and platform its kernels were built for."""

    def finalize_options(self):
        super().finalize_options()
        if ship_kernels():
            self.root_is_pure = False


setup(cmdclass={"build_py": BuildPyWithKernels, "bdist_wheel": WheelForThisPlatform})
