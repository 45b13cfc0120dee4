"""Parallel tree building: joblib over trees.

Threads by default (the training kernels release the GIL, threads share X
without copying, and numba's compiled code is shared instead of being loaded
once per process). Any joblib backend the caller activates
(``with joblib.parallel_backend("dask"): ...``) takes precedence, so forests
scale out on dask unchanged; the per-tree function must therefore be a
module-level, picklable function. Seeds are drawn up front by the estimator
(:func:`obliquetrees.utils.seeds.draw_seeds`), so the result does not depend
on which worker builds which tree.
"""

from joblib import Parallel, delayed


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
