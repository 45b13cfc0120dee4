"""``n_jobs`` resolved, once per use: numba threads, or joblib workers over trees.

:func:`n_threads_from_jobs` gives the threads of this process (prediction,
and the training of the thread-parallel methods: soft trees, hinge forests);
:func:`resolve_n_jobs` the workers of :func:`parallel_map`, which grows the
trees of CO2 and E2EDT forests in parallel. Each estimator documents which
meaning its ``n_jobs`` has.

Tree building runs on threads by default (the training kernels release the GIL, threads share X
without copying, and numba's compiled code is shared instead of being loaded
once per process). Any joblib backend the caller activates
(``with joblib.parallel_backend("dask"): ...``) takes precedence, so forests
scale out on dask unchanged; the per-tree function must therefore be a
module-level, picklable function. Seeds are drawn up front by the estimator
(:func:`obliquetrees.utils.seeds.draw_seeds`), so the result does not depend
on which worker builds which tree.
"""

from contextlib import contextmanager

from joblib import Parallel, cpu_count, delayed, effective_n_jobs, parallel_config
from joblib.parallel import BACKENDS, get_active_backend

from obliquetrees._training._progress import Progress


def n_threads_from_jobs(n_jobs):
    """Number of numba threads in this process from an ``n_jobs`` value.

    joblib's meaning of ``n_jobs``: None is the ``n_jobs`` of an active
    ``joblib.parallel_config`` (1 without one), -1 all CPUs
    (``joblib.cpu_count()``, which respects CPU affinity and container
    quotas), -2 all but one, and so on; 0 is an error.

    These are threads of this process, not joblib workers, so the count is
    taken as joblib's threading backend takes it: joblib's default (loky)
    backend would fall back to 1 and warn "Loky-backed parallel loops cannot
    be called in a multiprocessing" in every ``multiprocessing`` worker,
    where no process pool is involved.
    """
    with parallel_config(backend="threading"):  # keeps an outer config's n_jobs
        return max(1, effective_n_jobs(n_jobs))


def resolve_n_jobs(n_jobs, n_tasks, prefer="threads"):
    """The workers :func:`parallel_map` runs ``n_tasks`` tasks with, from ``n_jobs``.

    Resolved once, as joblib's ``Parallel(n_jobs, prefer)`` would (an active
    ``parallel_config`` decides for None; -1 all CPUs, ...), then capped as
    scikit-learn's forests do: no more workers than tasks, and no more
    threads of this process than CPUs (more only oversubscribe them; trees
    do not depend on the count). A huge ``n_jobs`` thus runs instead of
    failing in joblib (``n_jobs=10**6``: "Numeric literal 2000000 is too
    large") or exhausting the threads; another backend's workers (dask) are
    capped by the tasks only.

    Raises
    ------
    ValueError
        For ``n_jobs=0``, naming ``n_jobs``.
    """
    if n_jobs == 0:
        raise ValueError("n_jobs=0 has no meaning: use a positive count, or -1 for all CPUs.")
    backend, context_n_jobs = get_active_backend(prefer=prefer)
    requested = context_n_jobs if n_jobs is None else n_jobs
    workers = 1 if requested is None else backend.effective_n_jobs(requested)
    if isinstance(backend, BACKENDS["threading"]):
        workers = min(workers, cpu_count())
    return max(1, min(workers, n_tasks))


def parallel_map(
    func, args_list, n_jobs=None, verbose=0, prefer="threads", name="forest", progress=None
):
    """``[func(*args) for args in args_list]`` run by joblib.

    Parameters
    ----------
    func : callable
        Module-level function (picklable, for process and dask backends).
    args_list : sequence of tuple
    n_jobs : int or None
        As in joblib; None means 1 unless a ``parallel_config`` says otherwise.
        Capped at the tasks and, for threads, the CPUs (:func:`resolve_n_jobs`).
    verbose : int
        At 1 and above, one line per finished task ("tree k/n") with the
        time elapsed and an estimate of the time left (:class:`Progress`).
    prefer : {"threads", "processes"}
        Soft hint; an active joblib backend context wins.
    name : str
        The prefix of the progress lines (the estimator's name).
    progress : Progress or None
        Reports the tasks instead of one made from ``verbose`` and ``name``
        (a fit of several calls counts its units in one).

    Returns
    -------
    results : list
        In the order of ``args_list``.
    """
    args_list = list(args_list)
    n_jobs = resolve_n_jobs(n_jobs, len(args_list), prefer)
    if progress is None:
        progress = Progress(name, len(args_list), unit="tree", verbose=verbose)
    tasks = (delayed(func)(*args) for args in args_list)
    try:
        # an ordered generator: tree k is reported once trees 1..k are done
        parallel = Parallel(n_jobs=n_jobs, prefer=prefer, return_as="generator")
    except ValueError:  # a backend without generators (multiprocessing): one line at the end
        results = Parallel(n_jobs=n_jobs, prefer=prefer)(tasks)
        progress.update(done=progress.done + len(results))
        return results
    results = []
    for result in parallel(tasks):
        results.append(result)
        progress.update()
    return results


@contextmanager
def shared_arguments(*arrays):
    """A context in which every :func:`parallel_map` call reuses ``arrays`` on dask.

    joblib's dask backend scatters each large argument to the cluster once
    per ``Parallel`` call, so a fit that grows its trees in several calls
    would ship its training data once per call. Under that backend the block
    runs on a new backend of the same client whose scattered data (joblib's
    ``data_futures``) are ``arrays``, broadcast once up front; under any
    other backend, or a joblib without that attribute, the block runs
    unchanged.
    """
    backend, n_jobs = get_active_backend()
    dask_backend = BACKENDS.get("dask")  # registered once a dask backend was asked for
    if dask_backend is None or not isinstance(backend, dask_backend):
        yield
        return
    shipping = dask_backend(
        client=backend.client,
        wait_for_workers_timeout=backend.wait_for_workers_timeout,
        **backend.submit_kwargs,
    )
    if not isinstance(getattr(shipping, "data_futures", None), dict):
        yield
        return
    # not joblib's scatter=: it keys the data by a hash of its contents, so two fits on equal
    # arrays share keys, and the first's futures, released when its backend is collected,
    # cancel the second's tasks ("lost dependencies"); joblib's own per-call scatter does
    # not hash either
    futures = backend.client.scatter(list(arrays), broadcast=True, hash=False)
    shipping.data_futures = {id(a): f for a, f in zip(arrays, futures, strict=True)}
    try:
        with parallel_config(backend=shipping, n_jobs=n_jobs):
            yield
    finally:
        shipping.data_futures = {}
