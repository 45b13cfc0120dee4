"""A BLAS thread limit that several Python threads can ask for at once.

``threadpoolctl``'s limits are process-wide: each records the thread counts
it finds on entry and puts them back on exit. Entered from several threads
at once, a later entry records an earlier one's limit as "original"; and
with OpenBLAS's own threads only one Python thread may change the count, so
a restore from another thread is silently ignored. Either way the process
could keep the limit for good (measured: 8 threads predicting left OpenBLAS
at 1 thread). :func:`blas_limit` therefore lets one thread at a time hold a
limit, entered and left in that thread; other threads wait. The limited
blocks are the BLAS products of prediction, which would compete for the same
cores anyway. This module imports threadpoolctl on first use.
"""

import threading
from contextlib import contextmanager

_lock = threading.RLock()  # re-entrant: a thread may nest limits
_controller = []


def _get_controller():
    """One cached threadpoolctl controller (building one costs milliseconds)."""
    with _lock:
        if not _controller:
            from threadpoolctl import ThreadpoolController

            _controller.append(ThreadpoolController())
        return _controller[0]


@contextmanager
def blas_limit(n_threads):
    """Limit BLAS to ``n_threads`` threads inside the block (safe under concurrency).

    Parameters
    ----------
    n_threads : int
        Thread count of every BLAS library while the block runs.
    """
    with _lock, _get_controller().limit(limits=max(1, int(n_threads)), user_api="blas"):
        yield
