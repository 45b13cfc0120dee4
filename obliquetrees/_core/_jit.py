"""The one place where numba compilation presets are chosen.

Every kernel of the package is compiled with one of these presets:

- ``nogil=True`` so joblib threads run kernels in parallel;
- ``cache=True`` so a new process loads machine code instead of compiling
  (numba 0.68 caches ``parallel=True`` kernels too);
- no ``fastmath``: NaN/inf semantics and IEEE rounding are kept, which routing
  ties and bit-identical results across thread counts rely on;
- no eager signatures, so importing a kernel module compiles nothing; each
  kernel compiles on first call for the types it receives.

Importing this module imports numba: keep it out of the import path of
``import obliquetrees`` (estimators import kernel modules inside methods).
"""

import os
from contextlib import contextmanager

import numba


def _prefer_fork_safe_threading_layer():
    """Use numba's TBB threading layer when it is installed.

    numba's default layer on Linux is GNU OpenMP, which is not fork-safe: a
    process that forks after running a ``parallel=True`` kernel (joblib's
    "multiprocessing" backend, ``multiprocessing.Pool`` with fork) hangs in
    the child. TBB is both thread- and fork-safe. A layer chosen by the user
    (``NUMBA_THREADING_LAYER`` or ``numba.config.THREADING_LAYER``) wins; this
    only runs before the process's first parallel kernel.
    """
    if "NUMBA_THREADING_LAYER" in os.environ or numba.config.THREADING_LAYER != "default":
        return
    try:
        from numba.np.ufunc import tbbpool  # noqa: F401  (loads libtbb or fails)
    except ImportError:
        return
    numba.config.THREADING_LAYER = "tbb"


_prefer_fork_safe_threading_layer()

jit = numba.njit(cache=True, nogil=True)
jit_parallel = numba.njit(cache=True, nogil=True, parallel=True)
#: ``jit`` with numpy's error model: a float division by zero gives inf/nan
#: instead of raising, so LLVM can vectorise loops that divide. Only for
#: kernels whose denominators cannot be zero.
jit_numpy_errors = numba.njit(cache=True, nogil=True, error_model="numpy")
#: ``jit`` inlined at numba-IR level into its callers: for small per-sample
#: helpers taking arrays, whose calls otherwise cost reference counting
#: (about 3x in the soft-tree SGD inner loop, measured).
jit_inline = numba.njit(cache=True, nogil=True, inline="always")
prange = numba.prange


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
