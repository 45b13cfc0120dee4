"""Kernel machine code shipped inside the package, found before numba's own cache.

numba compiles a kernel the first time it runs and caches the result on disk,
keyed by the host CPU; every new environment (a Docker image, a CI job, a
fresh venv) pays the compilation again: about half a minute per estimator.
Wheels built from this repository therefore carry the kernels already
compiled (``build_tools/build_kernel_cache.py``, run by ``setup.py`` at
build time) in ``obliquetrees/_kernel_cache/``, and each kernel looks there
first.

Why this is safe and portable:

- The shipped code is compiled for LLVM's ``generic`` CPU of the platform
  (``x86_64``: the baseline instruction set every x86-64 CPU has), so it runs
  on any CPU of that architecture. Without ``fastmath`` LLVM does not fuse or
  reorder floating-point operations for any CPU, so results are the same as
  with code compiled for the host.
- It is used only when everything it was built from matches this process:
  the numba version, the Python version and ABI, the platform (OS and
  machine; the wheel itself is tagged for any platform) and a
  SHA-256 of every ``.py`` file of the installed package (a stronger freshness
  check than numba's own, which only stamps the kernel's own file). Anything
  else, or no shipped directory at all (an editable install, a source
  checkout), and the kernel falls back to numba's cache, that is to compiling
  once on first use, as before.
- The shipped directory is only read, so a read-only install works; new
  signatures are compiled and saved to numba's usual cache location.

A wheel build can also keep its kernels in a directory named by
``$OBLIQUETREES_KERNEL_BUILD_CACHE``, where later builds of the same sources,
and processes running those sources with the variable set (CI's test runs
from the source tree), find them under the same manifest check.
"""

import functools
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

from numba.core.caching import FunctionCache, NullCache, _Cache, _CacheLocator

#: Directory of the shipped kernels, inside the installed package.
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "_kernel_cache"
#: File in SHIPPED_DIR describing what the shipped kernels were built from.
MANIFEST_NAME = "manifest.json"
#: Set by the build script: kernels compile for the generic CPU and are saved
#: to SHIPPED_DIR (and only loaded from there).
BUILD_ENV = "OBLIQUETREES_BUILD_KERNEL_CACHE"
#: A directory where wheel builds keep their kernels by source hash, for reuse.
BUILD_REUSE_ENV = "OBLIQUETREES_KERNEL_BUILD_CACHE"


@functools.cache
def package_source_hash():
    """SHA-256 over the relative path and bytes of every ``.py`` file of the package."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def build_description():
    """What shipped kernels built in this process depend on (the manifest's content)."""
    import numba

    return {
        "numba": numba.__version__,
        "python": sys.implementation.cache_tag + getattr(sys, "abiflags", ""),
        "platform": f"{sys.platform}-{platform.machine()}",
        "cpu_name": "generic",
        "source_sha256": package_source_hash(),
    }


def write_manifest():
    """Record :func:`build_description` in SHIPPED_DIR (the build script's last step)."""
    import numba

    if not building() or numba.config.CPU_NAME != "generic" or numba.config.CPU_FEATURES != "":
        raise RuntimeError("shipped kernels must be built for the generic CPU, by the build script")
    SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
    manifest = json.dumps(build_description(), indent=1, sort_keys=True)
    (SHIPPED_DIR / MANIFEST_NAME).write_text(manifest + "\n")


def building():
    """True in the build script's process, which writes the shipped kernels."""
    return os.environ.get(BUILD_ENV) == "1"


def build_reuse_dir():
    """Where wheel builds of these sources keep their kernels for reuse, or None.

    ``$OBLIQUETREES_KERNEL_BUILD_CACHE/<first 16 hex digits of the source hash>``.
    """
    root = os.environ.get(BUILD_REUSE_ENV)
    return Path(root) / package_source_hash()[:16] if root else None


def manifest_matches(directory):
    """True if ``directory`` holds kernels built for this exact package and runtime."""
    try:
        manifest = json.loads((directory / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return manifest == build_description()


@functools.cache
def shipped_dir():
    """The directory of shipped kernels built for this exact package and runtime, or None.

    SHIPPED_DIR, else the kernels that a wheel build of the same sources left
    for reuse (:func:`build_reuse_dir`; CI sets it, so its test runs from the
    source tree load what its wheel build compiled).
    """
    if building():
        return SHIPPED_DIR
    for directory in (SHIPPED_DIR, build_reuse_dir()):
        if directory is not None and manifest_matches(directory):
            return directory
    return None


def shipped_kernels_usable():
    """True if shipped kernels built for this exact package and runtime are found."""
    return shipped_dir() is not None


class _ShippedLocator(_CacheLocator):
    """Locates a kernel's files in SHIPPED_DIR, one folder per source module."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._path = (shipped_dir() or SHIPPED_DIR) / py_func.__module__.replace(".", "_")

    def ensure_cache_path(self):
        if not building():
            raise OSError("the shipped kernel cache is read-only outside its build")
        super().ensure_cache_path()

    def get_cache_path(self):
        return str(self._path)

    def get_source_stamp(self):
        return package_source_hash()

    def get_disambiguator(self):
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        return cls(py_func, py_file)


class _ShippedCacheImpl(FunctionCache._impl_class):
    _locator_classes = [_ShippedLocator]


class _ShippedCache(FunctionCache):
    """numba's function cache, in SHIPPED_DIR, keyed independently of the host CPU."""

    _impl_class = _ShippedCacheImpl

    def _index_key(self, sig, codegen):
        sig_key, _host_cpu, code_hashes = super()._index_key(sig, codegen)
        # The manifest check stands for the CPU part of numba's key: the code
        # was compiled for the generic CPU of this platform, valid on any host.
        return sig_key, "generic", code_hashes


class KernelCache(_Cache):
    """A kernel's cache: the shipped kernels first, then numba's usual cache.

    Installed on every dispatcher by the presets of ``_jit``. Loads try the
    shipped directory (when :func:`shipped_kernels_usable`) and then numba's
    cache; saves go to numba's cache, or to the shipped directory while the
    build script runs.
    """

    def __init__(self, py_func):
        self._shipped = _ShippedCache(py_func) if shipped_kernels_usable() else None
        self._local = NullCache()
        if not building():
            try:
                self._local = FunctionCache(py_func)
            except RuntimeError:
                pass  # no writable cache location: compile in every process, as numba does

    @property
    def cache_path(self):
        return self._local.cache_path

    def load_overload(self, sig, target_context):
        if self._shipped is not None:
            result = self._shipped.load_overload(sig, target_context)
            if result is not None:
                return result
        return self._local.load_overload(sig, target_context)

    def save_overload(self, sig, data):
        (self._shipped if building() else self._local).save_overload(sig, data)

    def enable(self):
        self._local.enable()

    def disable(self):
        self._local.disable()

    def flush(self):
        self._local.flush()
