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
  machine, as in the wheel's tag) and a
  SHA-256 of every ``.py`` file of the installed package (a stronger freshness
  check than numba's own, which only stamps the kernel's own file). Anything
  else, or no shipped directory at all (an editable install, a source
  checkout), and the kernel falls back to numba's cache, that is to compiling
  once on first use, as before. That cache, too, is stamped with the same
  hash besides numba's own stamp (``_SourceStampedCache``), so a kernel
  never runs code compiled from other sources of the package.
- Every file is checked against the SHA-256 that the manifest records for
  it before numba unpickles it: a corrupted or truncated file (a bad disk, a
  bad copy) is ignored with a warning and its kernel is compiled again,
  never executed. So is a file that verifies but fails to load.
- The shipped directory is only read, so a read-only install works; new
  signatures are compiled and saved to numba's usual cache location.

Where the shipped kernels are looked for, first match wins: the package's own
``_kernel_cache``; the installed distribution's, when this process runs a
source checkout of the same sources (``pytest`` in a clone after ``pip
install .``); and the kernel store of wheel builds (:func:`build_reuse_dirs`,
newest first), where each build keeps what it compiled so that the next build
of the same sources and build scripts (``pip install ".[test]"`` after ``pip
install .``) copies instead of compiling again.
"""

import functools
import hashlib
import io
import json
import os
import pickle
import platform
import sys
import warnings
from importlib import metadata
from pathlib import Path

from numba.core.caching import (
    FunctionCache,
    IndexDataCacheFile,
    NullCache,
    _Cache,
    _CacheLocator,
)

#: Directory of the shipped kernels, inside the installed package.
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "_kernel_cache"
#: File in SHIPPED_DIR describing what the shipped kernels were built from.
MANIFEST_NAME = "manifest.json"
#: Set by the build script: kernels compile for the generic CPU and are saved
#: to SHIPPED_DIR (and only loaded from there).
BUILD_ENV = "OBLIQUETREES_BUILD_KERNEL_CACHE"
#: Set by the build script in each of its compiling processes: the directory
#: that process writes instead of SHIPPED_DIR (the script merges them).
BUILD_PART_ENV = "OBLIQUETREES_BUILD_KERNEL_PART"
#: A directory where wheel builds keep their kernels by source hash, for reuse
#: (default: ``obliquetrees/kernels`` in the user's cache directory).
BUILD_REUSE_ENV = "OBLIQUETREES_KERNEL_BUILD_CACHE"
#: The manifest's entry holding each shipped file's SHA-256, by path relative to the directory.
CHECKSUMS = "sha256"


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


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_manifest():
    """Record :func:`build_description` and every file's SHA-256 in SHIPPED_DIR.

    The build script's last step, once every kernel is compiled.
    """
    import numba

    if not building() or numba.config.CPU_NAME != "generic" or numba.config.CPU_FEATURES != "":
        raise RuntimeError("shipped kernels must be built for the generic CPU, by the build script")
    SHIPPED_DIR.mkdir(parents=True, exist_ok=True)
    checksums = {
        path.relative_to(SHIPPED_DIR).as_posix(): _sha256(path.read_bytes())
        for path in sorted(SHIPPED_DIR.rglob("*"))
        if path.is_file() and path.name != MANIFEST_NAME
    }
    manifest = json.dumps({**build_description(), CHECKSUMS: checksums}, indent=1, sort_keys=True)
    (SHIPPED_DIR / MANIFEST_NAME).write_text(manifest + "\n")


def building():
    """True in the build script's process, which writes the shipped kernels."""
    return os.environ.get(BUILD_ENV) == "1"


def build_reuse_dir(build_hash):
    """Where wheel builds of these sources keep their kernels for reuse.

    ``<root>/<first 16 hex digits of the source hash>-<build_hash>``, with
    ``<root>`` the directory named by ``$OBLIQUETREES_KERNEL_BUILD_CACHE``,
    else ``obliquetrees/kernels`` in the user's cache directory
    (``$XDG_CACHE_HOME``, else ``~/.cache``). ``build_hash`` names what else
    decides the kernels a build compiles (the build's workload, outside the
    package): a changed workload must not reuse the old one's kernels.
    """
    return build_reuse_root() / f"{package_source_hash()[:16]}-{build_hash}"


def build_reuse_dirs():
    """The store's folders of builds of these sources (any build scripts), newest first.

    Where a source checkout with no installed distribution of the same
    sources finds kernels (:func:`shipped_dir`): any build of the same
    sources compiled valid kernels (the manifest decides), whichever
    workload chose them.
    """
    name = package_source_hash()[:16]
    found = []
    try:
        for folder in build_reuse_root().iterdir():
            # the bare name: a folder kept by a build from before the build scripts' hash
            if folder.name == name or folder.name.startswith(name + "-"):
                found.append((folder.stat().st_mtime, folder))
    except OSError:  # no store, or a folder removed meanwhile by another build
        return []
    return [folder for _, folder in sorted(found, key=lambda item: item[0], reverse=True)]


def build_reuse_root():
    """The directory holding :func:`build_reuse_dir` for every build."""
    root = os.environ.get(BUILD_REUSE_ENV)
    if root:
        return Path(root)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "obliquetrees" / "kernels"


def installed_kernel_dirs():
    """The kernel directories of every installed ``obliquetrees`` distribution found.

    When this process runs a source checkout (``pytest`` in a clone), one of
    them is where ``pip install .`` put the kernels it compiled from the same
    files. (The checkout's own build metadata, ``obliquetrees.egg-info``, is
    found too, and holds no kernels.)
    """
    return [
        Path(dist.locate_file("obliquetrees/_kernel_cache"))
        for dist in metadata.distributions(name="obliquetrees")
    ]


def read_manifest(directory):
    """The manifest of ``directory`` as a dict, or None if it is missing or unreadable."""
    try:
        manifest = json.loads((directory / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def manifest_matches(directory):
    """True if ``directory`` holds kernels built for this exact package and runtime."""
    manifest = read_manifest(directory)
    if manifest is None or not isinstance(manifest.get(CHECKSUMS), dict):
        return False
    return {k: v for k, v in manifest.items() if k != CHECKSUMS} == build_description()


@functools.cache
def shipped_dir():
    """The directory of shipped kernels built for this exact package and runtime, or None.

    SHIPPED_DIR, else the installed distribution's kernels (a source
    checkout of the same sources), else those a wheel build of the same
    sources left for reuse (:func:`build_reuse_dirs`).
    """
    if building():
        return Path(os.environ.get(BUILD_PART_ENV) or SHIPPED_DIR)
    for directory in (SHIPPED_DIR, *installed_kernel_dirs(), *build_reuse_dirs()):
        if manifest_matches(directory):
            return directory
    return None


@functools.cache
def shipped_checksums():
    """``{relative path: SHA-256}`` of the files of :func:`shipped_dir`."""
    return read_manifest(shipped_dir())[CHECKSUMS]


def shipped_kernels_usable():
    """True if shipped kernels built for this exact package and runtime are found."""
    return shipped_dir() is not None


class CorruptKernelFile(Exception):
    """A shipped kernel file whose bytes do not match the manifest's SHA-256."""


class _VerifiedCacheFile(IndexDataCacheFile):
    """numba's index and data files of one kernel, each verified before it is unpickled.

    numba unpickles a cache file and hands its machine code to LLVM as it is:
    a flipped bit can crash the process. Each file's bytes are checked
    against the manifest first; a mismatch raises :class:`CorruptKernelFile`.
    """

    def _verified_bytes(self, path):
        data = Path(path).read_bytes()
        name = Path(path).relative_to(shipped_dir()).as_posix()
        if shipped_checksums().get(name) != _sha256(data):
            raise CorruptKernelFile(path)
        return data

    def _load_index(self):
        try:
            stream = io.BytesIO(self._verified_bytes(self._index_path))
        except FileNotFoundError:
            return {}
        if pickle.load(stream) != self._version:
            return {}
        stamp, overloads = pickle.loads(stream.read())
        return overloads if stamp == self._source_stamp else {}

    def _load_data(self, name):
        return pickle.loads(self._verified_bytes(self._data_path(name)))


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

    def __init__(self, py_func):
        super().__init__(py_func)
        if not building():  # files being written by the build have no checksum yet
            self._cache_file = _VerifiedCacheFile(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base,
                source_stamp=self._impl.locator.get_source_stamp(),
            )

    def _index_key(self, sig, codegen):
        sig_key, _host_cpu, code_hashes = super()._index_key(sig, codegen)
        # The manifest check stands for the CPU part of numba's key: the code
        # was compiled for the generic CPU of this platform, valid on any host.
        return sig_key, "generic", code_hashes


class _SourceStampedCache(FunctionCache):
    """numba's own function cache, stale once any source file of the package changes.

    numba stamps a kernel's cache with the kernel's own file (its time and
    size) only, while a kernel's machine code holds every kernel it calls,
    compiled from their files as they were. A checkout whose other files
    change (a ``git pull`` that edits ``co2/_kernels.py`` but not
    ``co2/_node.py``) then keeps running the callers' old code: a benchmark
    of this package's own source tree measured the CCCP it had replaced.
    The stamp here adds :func:`package_source_hash`, so an index written from
    other sources is empty to this process and its kernels compile again (the
    data files are then overwritten in order, as numba does for its own stale
    index).
    """

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = IndexDataCacheFile(
            cache_path=self._cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=(self._impl.locator.get_source_stamp(), package_source_hash()),
        )


def _unloadable(kernel, where, error):
    warnings.warn(
        f"obliquetrees: ignoring the {where} compiled code of {kernel} ({error!r}); "
        "compiling it again",
        RuntimeWarning,
        stacklevel=3,
    )


class KernelCache(_Cache):
    """A kernel's cache: the shipped kernels first, then numba's usual cache.

    Installed on every dispatcher by the presets of ``_jit``. Loads try the
    shipped directory (when :func:`shipped_kernels_usable`) and then numba's
    cache (:class:`_SourceStampedCache`: stale when any source file changed);
    saves go to numba's cache, or to the shipped directory while the build
    script runs. A file of either that fails to verify or to load is ignored
    with a ``RuntimeWarning`` and the kernel is compiled.
    """

    def __init__(self, py_func):
        self._name = f"{py_func.__module__}.{py_func.__qualname__}"
        self._shipped = _ShippedCache(py_func) if shipped_kernels_usable() else None
        self._local = NullCache()
        if not building():
            try:
                self._local = _SourceStampedCache(py_func)
            except RuntimeError:
                pass  # no writable cache location: compile in every process, as numba does

    @property
    def cache_path(self):
        return self._local.cache_path

    def load_overload(self, sig, target_context):
        if self._shipped is not None:
            try:
                result = self._shipped.load_overload(sig, target_context)
            except Exception as error:  # noqa: BLE001 (whatever the file held, compile instead)
                _unloadable(self._name, "shipped", error)
                self._shipped = None
            else:
                if result is not None:
                    return result
        try:
            return self._local.load_overload(sig, target_context)
        except Exception as error:  # noqa: BLE001
            _unloadable(self._name, "cached", error)
            return None

    def save_overload(self, sig, data):
        (self._shipped if building() else self._local).save_overload(sig, data)

    def enable(self):
        self._local.enable()

    def disable(self):
        self._local.disable()

    def flush(self):
        self._local.flush()
