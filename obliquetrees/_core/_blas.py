"""A BLAS thread limit that several Python threads can hold at once.

``threadpoolctl``'s limits are process-wide: each one records the thread
counts it finds on entry and puts them back on exit. Entered from several
threads at once, a later entry records the earlier one's limit as
"original" and restores it last, so the process keeps the limit forever.
:func:`blas_limit` instead counts its holders: the first sets the limit, the
last restores what was there before, and a thread asking for a different
limit waits until the current holders are done (a thread already holding
the limit joins it, so nested use never deadlocks). This module imports
threadpoolctl on first use.
"""

import threading
from contextlib import contextmanager

_cond = threading.Condition()
_held = threading.local()  # per thread: how many blas_limit blocks it is inside
_state = {"limit": None, "holders": 0, "limiter": None}
_controller = []


def _get_controller():
    """One cached threadpoolctl controller (building one costs milliseconds)."""
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
    limit = max(1, int(n_threads))
    nested = getattr(_held, "depth", 0) > 0
    with _cond:
        if not nested:
            while _state["holders"] and _state["limit"] != limit:
                _cond.wait()
        if not _state["holders"]:
            _state["limiter"] = _get_controller().limit(limits=limit, user_api="blas")
            _state["limit"] = limit
        _state["holders"] += 1
    _held.depth = getattr(_held, "depth", 0) + 1
    try:
        yield
    finally:
        _held.depth -= 1
        with _cond:
            _state["holders"] -= 1
            if not _state["holders"]:
                _state["limiter"].restore_original_limits()
                _state["limiter"] = _state["limit"] = None
                _cond.notify_all()
