"""The one place where numba compilation presets are chosen.

Every kernel of the package is compiled with one of these presets:

- ``nogil=True`` so joblib threads run kernels in parallel;
- cached on disk, so a new process loads machine code instead of compiling
  (numba 0.68 caches ``parallel=True`` kernels too): first from the machine
  code shipped in the wheel, then from numba's own cache (``_kernel_cache``);
- no ``fastmath``: NaN/inf semantics and IEEE rounding are kept, which routing
  ties and bit-identical results across thread counts rely on;
- no eager signatures, so importing a kernel module compiles nothing; each
  kernel compiles on first call for the types it receives.

Importing this module imports numba: keep it out of the import path of
``import obliquetrees`` (estimators import kernel modules inside methods).
"""

import functools
import os
from contextlib import contextmanager

import numba
import numba.extending
from numba.core.caching import FunctionCache

from obliquetrees._core._kernel_cache import KernelCache


def _load_pip_tbb():
    """Load the ``libtbb`` that the ``tbb`` wheel installed, if any.

    The wheel puts ``libtbb.so.12`` in ``<prefix>/lib`` (a venv's ``lib/``),
    which is not on the dynamic loader's search path, so numba's ``tbbpool``
    extension fails to load it and numba silently falls back to OpenMP.
    Loading the file by its full path first (``RTLD_GLOBAL``) lets the loader
    resolve ``tbbpool``'s dependency by its soname. Returns True on success.
    """
    import ctypes
    from importlib import metadata

    try:
        files = metadata.files("tbb") or ()
    except metadata.PackageNotFoundError:
        return False
    for name in ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll"):
        for file in files:
            if file.name == name:
                try:
                    ctypes.CDLL(str(file.locate()), mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    continue
                return True
    return False


def _prefer_fork_safe_threading_layer():
    """Use numba's TBB threading layer when it can be loaded.

    numba's default layer on Linux is GNU OpenMP, which is not fork-safe: a
    process that forks after running a ``parallel=True`` kernel (joblib's
    "multiprocessing" backend, ``multiprocessing.Pool`` with fork) has its
    child killed or hung. TBB is both thread- and fork-safe. A layer chosen by
    the user (``NUMBA_THREADING_LAYER`` or ``numba.config.THREADING_LAYER``)
    wins; this only runs before the process's first parallel kernel. Where TBB
    cannot be loaded (no ``tbb`` wheel for the platform), numba's own choice
    stands and the README's caveat on forking applies.
    """
    if "NUMBA_THREADING_LAYER" in os.environ or numba.config.THREADING_LAYER != "default":
        return
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401  (loads libtbb or fails)
    except ImportError:
        if not _load_pip_tbb():
            return
        try:
            from numba.np.ufunc import tbbpool  # noqa: F401, F811
        except ImportError:
            return
    numba.config.THREADING_LAYER = "tbb"


#: Layer choices under which numba may pick GNU OpenMP (see numba's threading-layer docs).
_MAY_USE_OMP = ("default", "omp", "threadsafe", "forksafe")


def _load_omp_passive():
    """Load numba's OpenMP pool with ``OMP_WAIT_POLICY=PASSIVE`` unless the user set a policy.

    Only where numba may pick OpenMP (TBB not loaded, or OpenMP chosen).
    GNU OpenMP's idle workers spin between parallel regions by default; the
    hinge forests launch two small regions per 50-row minibatch, and on a
    loaded machine the spinning workers took ~7x the CPU of an idle run
    (``benchmarks/results/hinge.md``, section scale). libgomp reads the
    policy once, when it is loaded, so the variable is set only around that
    load and then restored: child processes and other libraries see the
    user's environment unchanged. If libgomp is already loaded, this changes
    nothing.
    """
    if numba.config.THREADING_LAYER not in _MAY_USE_OMP or "OMP_WAIT_POLICY" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        from numba.np.ufunc import omppool  # noqa: F401  (loads libgomp, which reads the policy)
    except ImportError:
        pass
    finally:
        del os.environ["OMP_WAIT_POLICY"]


_prefer_fork_safe_threading_layer()
if numba.config.THREADING_LAYER != "tbb":
    _load_omp_passive()


def _preset(**options):
    """A decorator compiling with ``nogil=True`` and ``options``, cached by :class:`KernelCache`."""
    compile_lazily = numba.njit(nogil=True, **options)

    def decorate(function):
        dispatcher = compile_lazily(function)
        dispatcher._cache = KernelCache(dispatcher.py_func)  # what cache=True would install, tiered
        return dispatcher

    return decorate


jit = _preset()
jit_parallel = _preset(parallel=True)
#: ``jit`` with numpy's error model: a float division by zero gives inf/nan
#: instead of raising, so LLVM can vectorise loops that divide. Only for
#: kernels whose denominators cannot be zero.
jit_numpy_errors = _preset(error_model="numpy")
#: ``jit`` inlined at numba-IR level into its callers: for small per-sample
#: helpers taking arrays, whose calls otherwise cost reference counting
#: (about 3x in the soft-tree SGD inner loop, measured).
jit_inline = _preset(inline="always")
prange = numba.prange


@functools.cache
def _numba_can_cache():
    """True if numba finds a writable cache location for this package's files.

    numba's own ``cache=True`` raises ``RuntimeError: cannot cache function``
    when it finds none (a read-only install whose shipped kernels do not
    match); :class:`KernelCache` falls back to compiling in every process,
    and so must the overloads, which numba caches itself.
    """
    try:
        FunctionCache(_numba_can_cache.__wrapped__)
    except RuntimeError:
        return False
    return True


def jit_overload(stub, **options):
    """``@jit_overload(stub)``: a numba implementation of the Python stub ``stub``.

    The implementation is chosen from the argument types at compile time (one
    growth loop, one kernel per input kind) and compiled with ``jit``'s
    presets; ``options`` go to ``numba.extending.overload`` (``inline=...``).
    """
    jit_options = {"cache": _numba_can_cache(), "nogil": True}
    return numba.extending.overload(stub, jit_options=jit_options, **options)


def is_none_type(numba_type):
    """Whether an argument's numba type is None or an omitted default of None.

    The overloads of :func:`jit_overload` pick their no-op implementation with
    it (an unconstrained fit, a growth without presorted rows, ...).
    """
    return isinstance(numba_type, (numba.types.NoneType, numba.types.Omitted))


def max_threads():
    """Largest number of threads numba can use in this process."""
    return int(numba.config.NUMBA_NUM_THREADS)


@contextmanager
def numba_threads(n_threads):
    """Run ``parallel=True`` kernels of this thread with ``n_threads`` threads.

    The setting is thread-local in numba and restored on exit. Kernels are
    written with fixed-size work chunks, so results do not depend on it.
    """
    n_threads = max(1, min(int(n_threads), max_threads()))
    previous = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    try:
        yield
    finally:
        numba.set_num_threads(previous)
