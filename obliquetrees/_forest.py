"""Forest scaffolding: per-tree seeds and parallel tree building.

Seeds: one integer per tree is drawn up front from ``random_state``, so tree
``t`` is the same whichever worker builds it and in whatever order; the same
``random_state`` gives the same forest for any ``n_jobs`` and any joblib
backend.

Parallelism: joblib over trees, threads by default (the training kernels
release the GIL, threads share X without copying, and numba's compiled code
is shared instead of being loaded once per process). Any joblib backend the
caller activates (``with joblib.parallel_backend("dask"): ...``) takes
precedence, so forests scale out on dask unchanged; the per-tree function
must therefore be a module-level, picklable function.
"""

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import check_random_state

MAX_SEED = np.iinfo(np.int32).max


def draw_seeds(random_state, n):
    """Draw ``n`` integer seeds in ``[0, 2**31 - 1)`` from ``random_state``.

    Parameters
    ----------
    random_state : int, RandomState instance or None
    n : int

    Returns
    -------
    seeds : ndarray of int64, shape (n,)
    """
    rng = check_random_state(random_state)
    return rng.randint(MAX_SEED, size=n).astype(np.int64)


def parallel_map(func, args_list, n_jobs=None, verbose=0, prefer="threads"):
    """``[func(*args) for args in args_list]`` run by joblib.

    Parameters
    ----------
    func : callable
        Module-level function (picklable, for process and dask backends).
    args_list : iterable of tuple
    n_jobs : int or None
        As in joblib; None means 1 unless a ``parallel_config`` says otherwise.
    verbose : int
        joblib progress messages (one per finished task at ``verbose >= 10``).
    prefer : {"threads", "processes"}
        Soft hint; an active joblib backend context wins.

    Returns
    -------
    results : list
        In the order of ``args_list``.
    """
    return Parallel(n_jobs=n_jobs, verbose=verbose, prefer=prefer)(
        delayed(func)(*args) for args in args_list
    )
