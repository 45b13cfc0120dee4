"""A CO2 forest fitted on a dask array larger than any worker's memory limit.

A ``distributed.LocalCluster`` of 2 worker processes (1 thread each) with a
memory limit each below the size of ``X``; ``X`` (``--rows`` x
``--features`` float64) is generated on the workers by ``dask.array``'s
seeded random generator and ``y`` computed from it blockwise, so no process
holds all of ``X`` during the dask fit. Reported: wall time, bytes moved
between workers (the workers' transfer counters), the peak memory of each
worker (the scheduler's worker-memory reports, polled during the fit, and
the workers' own monitors), and the test accuracy against the in-memory fit
of the same forest on the same rows (computed afterwards in this process,
the cluster closed).

    python -m benchmarks dask
"""

import contextlib
import threading
import time

import numpy as np
from distributed import KilledWorker, WorkerPlugin

from benchmarks.common import write_results

# No estimator is imported at the top: the workers import this module for the functions
# they run (the labels, the memory probes), and a worker that imports scikit-learn holds
# about 160 MB more (obliquetrees.dask: what a worker imports).

#: The label rule's two hyperplanes (3 classes: oblique boundaries).
_W1 = np.linspace(-1.0, 1.0, 400)
_W2 = np.cos(np.arange(400.0))


def _labels(block):
    """Class of each row: which sides of two oblique hyperplanes it lies on."""
    p = block.shape[1]
    return (block @ _W1[:p] > 0).astype(np.int64) + (block @ _W2[:p] > 0.5)


def add_arguments(parser):
    """The arguments of ``python -m benchmarks dask``."""
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--rows-per-task", type=int, default=50_000)
    parser.add_argument("--memory-limit", default="500MB")
    parser.add_argument(
        "--pause", type=float, default=0.8, help="dask's worker pause threshold (its default)"
    )
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument(
        "--predict-memory-limit",
        default="2GB",
        help="workers of a second cluster that predict when the fit's workers cannot hold a "
        "tree next to what they hold ('' to skip)",
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="random_state 0, 1, ... of the accuracy figures"
    )
    parser.add_argument("--out", default="dask")


def _data(args, seed, rows):
    import dask.array as da

    X = da.random.default_rng(seed).standard_normal(
        (rows, args.features), chunks=(args.chunk_rows, args.features)
    )
    return X, X.map_blocks(_labels, drop_axis=1, dtype=np.int64)


class _MemoryPoll:
    """Peak memory of every worker, from the scheduler's reports, polled in a thread.

    A worker that its nanny restarts (past 95 % of its limit) comes back at
    another address: ``restarts`` counts the addresses beyond the first ones.
    """

    def __init__(self, client, every=0.2):
        self.client, self.every, self.peak = client, every, {}
        self.first = set(client.scheduler_info()["workers"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def restarts(self):
        return len(set(self.peak) - self.first)

    def _run(self):
        while not self._stop.is_set():
            for address, info in self.client.scheduler_info()["workers"].items():
                memory = info["metrics"]["memory"]
                self.peak[address] = max(self.peak.get(address, 0), memory)
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def __exit__(self, *exc):
        self.stop()


class _TaskMemory(WorkerPlugin):
    """A worker plugin: the largest process memory while each kind of task ran.

    A thread samples the worker's resident size every 10 ms; each task's
    peak is kept per task name (the key's prefix: ``node_pass`` runs in
    ``on_block``, ``grow_node``, the blocks of X...), with how much it rose
    above the memory at the task's start.
    """

    name = "bench-task-memory"
    idempotent = True

    def setup(self, worker):
        import psutil

        self.process, self.kinds, self.current = psutil.Process(), {}, None
        self.peak = 0
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while True:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.01)

    def transition(self, key, start, finish, **kwargs):
        rss = self.process.memory_info().rss
        if finish == "executing":
            self.current, self.peak = rss, rss
        elif start == "executing" and self.current is not None:
            kind = key[0] if isinstance(key, tuple) else str(key)
            kind = kind.rsplit("-", 1)[0]
            count, rise, peak = self.kinds.get(kind, (0, 0, 0))
            peak_now = max(self.peak, rss)
            self.kinds[kind] = (count + 1, max(rise, peak_now - self.current), max(peak, peak_now))
            self.current = None


def _task_memory(dask_worker):
    plugin = dask_worker.plugins.get(_TaskMemory.name)
    return {} if plugin is None else dict(plugin.kinds)


def _idle_memory():
    """A worker's resident size, and which of scikit-learn, pandas and pyarrow it imported."""
    import psutil

    return psutil.Process().memory_info().rss, _heavy_modules()


def _heavy_modules():
    import sys

    return [name for name in ("sklearn", "pandas", "pyarrow") if name in sys.modules]


def _transfers(dask_worker):
    incoming = sum(entry["total"] for entry in dask_worker.transfer_incoming_log)
    return {"incoming": incoming, "outgoing": dask_worker.transfer_outgoing_bytes_total}


def _monitor_peak(since, dask_worker=None):
    times = list(dask_worker.monitor.quantities["time"])
    memory = list(dask_worker.monitor.quantities["memory"])
    return max((m for t, m in zip(times, memory, strict=True) if t >= since), default=0)


def _warm_up():
    """Compile the kernels in this process (numba caches them on disk for the workers)."""
    from sklearn.datasets import make_classification

    from obliquetrees import CO2ForestClassifier

    X, y = make_classification(300, 6, n_classes=3, n_informative=4, random_state=0)
    CO2ForestClassifier(n_estimators=1, random_state=0).fit(X, y).apply(X)


def _warm_up_workers(args):
    """A small dask fit and lazy prediction: the workers load the kernels from the cache."""
    import dask.array as da

    from obliquetrees.dask import DaskCO2ForestClassifier

    X = da.random.default_rng(3).standard_normal((20_000, args.features), chunks=5_000)
    y = X.map_blocks(_labels, drop_axis=1, dtype=np.int64)
    # rows_per_task=5,000: node growth, its passes and its gathered subtrees
    model = DaskCO2ForestClassifier(n_estimators=2, rows_per_task=5_000, random_state=0)
    model.fit(X, y).predict(X).compute()


def _dask_fit(args, X, y):
    import dask

    from obliquetrees.dask import DaskCO2ForestClassifier, _tree_bytes

    config = {"distributed.worker.memory.pause": args.pause}
    # compile (and cache on disk) the kernels here first: compiling them takes a worker
    # of 500 MB past its limit, loading them from the cache does not
    _warm_up()
    with dask.config.set(config), _cluster(args.memory_limit) as client:
        _warm_up_workers(args)
        client.register_plugin(_TaskMemory())
        idle = client.run(_idle_memory)
        limit = next(iter(client.scheduler_info()["workers"].values()))["memory_limit"]
        before = client.run(_transfers)
        started = time.time()
        model = DaskCO2ForestClassifier(
            n_estimators=args.trees, rows_per_task=args.rows_per_task, random_state=0
        )
        with _MemoryPoll(client) as poll, _MemoryPoll(client) as poll_all:
            model.fit(X, y)
            seconds = time.time() - started
            poll.stop()
            after = client.run(_transfers)
            monitor = client.run(_monitor_peak, started)
            others = [
                model.__class__(**model.get_params()).set_params(random_state=seed).fit(X, y)
                for seed in range(1, args.seeds)
            ]
            fits_restarts = poll_all.restarts
            before_predict = client.run(_idle_memory)
            print("worker memory before predicting:", before_predict, flush=True)
            prediction = _lazy_predict(args, model)
        monitor_all = client.run(_monitor_peak, started)
        tasks = client.run(_task_memory)
        heavy = client.run(_heavy_modules)
    refused, predicted_on = prediction["refused"], "the fit's workers"
    if refused is not None and args.predict_memory_limit:
        # a model no worker of the fit's cluster can hold: the laziness and the equality
        # with numpy are shown on workers with more memory
        with dask.config.set(config), _cluster(args.predict_memory_limit) as client:
            prediction = _lazy_predict(args, model)
            predicted_on = f"2 workers of {args.predict_memory_limit}"
    # a worker restarted by its nanny starts its counters at 0, and those of the one it
    # replaced are lost: the figures then count less than what moved
    zero = {"incoming": 0, "outgoing": 0}
    moved = {
        k: sum(after[w][k] - before.get(w, zero)[k] for w in after)
        for k in ("incoming", "outgoing")
    }
    return {
        "models": [m.to_local() for m in [model, *others]],
        "fit s": seconds,
        "memory limit MB": limit / 1e6,
        "idle": idle,
        "before predict": before_predict,
        "peak worker memory MB (scheduler)": {w: m / 1e6 for w, m in poll.peak.items()},
        "peak worker memory MB (worker monitor)": {w: m / 1e6 for w, m in monitor.items()},
        _ALL: {
            w: max(monitor_all.get(w, 0), poll_all.peak.get(w, 0)) / 1e6
            for w in set(monitor_all) | set(poll_all.peak)
        },
        "restarts": (poll.restarts, fits_restarts, poll_all.restarts),
        "task memory": tasks,
        "heavy modules": heavy,
        "bytes between workers": moved,
        "lazy predict build s": prediction["built"],
        "lazy predict s": prediction["seconds"],
        "lazy prediction": prediction["prediction"],
        "lazy predict refused": refused,
        "lazy predict ran on": None if prediction["refused"] else predicted_on,
        "model MB": model.forest_.nbytes / 1e6,
        # the size by which lazy prediction groups trees
        "largest tree MB": max(_tree_bytes(t) for t in model.forest_.trees) / 1e6,
    }


def _lazy_predict(args, model):
    """The lazy prediction of the test set on the current cluster, timed; or why it failed."""
    result = {"refused": None, "built": None, "seconds": None, "prediction": None}
    started = time.time()
    try:
        lazy = model.predict(_data(args, 2, args.test_rows)[0])
        result["built"] = time.time() - started
        result["prediction"] = lazy.compute()
        result["seconds"] = time.time() - started
    except (ValueError, KilledWorker) as error:
        # a tree no worker of this cluster can hold next to what it holds (refused), or
        # workers killed by their nannies over and over while predicting
        result["refused"] = f"{type(error).__name__}: {error}"
    return result


@contextlib.contextmanager
def _cluster(memory_limit):
    """A client of a LocalCluster of 2 worker processes of 1 thread and ``memory_limit`` each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, memory_limit=memory_limit, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def main(args):
    X, y = _data(args, 0, args.rows)
    X_test, y_test = (a.compute() for a in _data(args, 2, args.test_rows))
    x_bytes = args.rows * args.features * 8
    result = _dask_fit(args, X, y)
    dask_models = result.pop("models")
    dask_model = dask_models[0]
    dask_accuracy = [float(np.mean(m.predict(X_test) == y_test)) for m in dask_models]
    lazy = result.pop("lazy prediction")
    lazy_equal = None if lazy is None else bool(np.array_equal(lazy, dask_model.predict(X_test)))
    print(result, dask_accuracy, flush=True)
    from obliquetrees import CO2ForestClassifier

    X_mem, y_mem = X.compute(), y.compute()  # the in-memory comparison, in this process
    rows = [_row(f"dask, rows_per_task={args.rows_per_task}", result["fit s"], dask_accuracy)]
    accuracy, times = [], []
    for seed in range(args.seeds):
        started = time.time()
        local = CO2ForestClassifier(n_estimators=args.trees, random_state=seed, n_jobs=2)
        local.fit(X_mem, y_mem)
        times.append(time.time() - started)
        accuracy.append(float(np.mean(local.predict(X_test) == y_test)))
    rows.append(_row("in memory, the same forest (n_jobs=2)", times[0], accuracy))
    print(rows[-1], flush=True)
    moved = result["bytes between workers"]
    facts = [
        ("X", f"{args.rows} x {args.features} float64, {x_bytes / 1e6:.0f} MB"),
        ("partitions", f"{-(-args.rows // args.chunk_rows)} of {args.chunk_rows} rows"),
        ("worker memory limit", f"{result['memory limit MB']:.0f} MB (x2 workers)"),
        (
            "worker memory before the fit, kernels loaded (scikit-learn, pandas, pyarrow imported)",
            ", ".join(f"{m / 1e6:.0f} MB ({_names(h)})" for m, h in result["idle"].values()),
        ),
        (
            "scikit-learn, pandas, pyarrow imported by the workers after every fit and prediction",
            ", ".join(_names(h) for h in result["heavy modules"].values()),
        ),
        (
            "worker memory after the fits, before the prediction",
            ", ".join(f"{m / 1e6:.0f} MB" for m, _ in result["before predict"].values()),
        ),
        ("peak worker memory (scheduler)", _mb(result["peak worker memory MB (scheduler)"])),
        ("peak worker memory (monitor)", _mb(result["peak worker memory MB (worker monitor)"])),
        ("peak over all fits and the prediction", _mb(result[_ALL])),
        ("bytes received from other workers", f"{moved['incoming'] / 1e6:.1f} MB"),
        ("bytes sent by workers (to workers, client)", f"{moved['outgoing'] / 1e6:.1f} MB"),
        ("model (forest arrays)", f"{result['model MB']:.0f} MB"),
        ("largest tree", f"{result['largest tree MB']:.0f} MB"),
        (
            "workers restarted by their nanny (first fit; all fits; fits and prediction)",
            ", ".join(str(n) for n in result["restarts"]),
        ),
        ("lazy predict on the fit's workers", result["lazy predict refused"] or "ran"),
        ("lazy predict ran on", result["lazy predict ran on"] or "-"),
        ("lazy predict: graph built in", _seconds(result["lazy predict build s"])),
        (
            f"lazy predict of {args.test_rows} rows: built and computed in",
            _seconds(result["lazy predict s"]),
        ),
        ("lazy predict equals numpy predict", str(lazy_equal)),
    ]
    facts = [{"quantity": name, "value": value} for name, value in facts]
    write_results(
        f"{args.out}.md",
        f"CO2 forest of {args.trees} trees on a dask array of {x_bytes / 1e6:.0f} MB",
        [
            ("The dask fit", facts),
            ("Accuracy and fit time", rows),
            ("Memory by kind of task (every fit and the prediction)", _task_rows(result)),
        ],
        _NOTES.format(
            trees=args.trees,
            rows_per_task=args.rows_per_task,
            pause=args.pause,
            test=args.test_rows,
            moved_mb=moved["incoming"] / 1e6,
            idle_mb=" and ".join(f"{m / 1e6:.0f} MB" for m, _ in result["idle"].values()),
        ),
    )
    write_results(f"{args.out}.json", data={"facts": facts, "rows": rows})


_ALL = "peak over every fit and the prediction MB"


def _row(label, seconds, accuracy):
    return {
        "fit": label,
        "fit s (random_state=0)": round(seconds, 1),
        "test accuracy (mean)": round(float(np.mean(accuracy)), 4),
        "per random_state": ", ".join(f"{a:.4f}" for a in accuracy),
    }


def _seconds(value):
    return "-" if value is None else f"{value:.3f} s"


def _task_rows(result):
    """Per kind of task, over both workers: tasks run, largest rise during one, largest peak."""
    kinds = {}
    for per_worker in result["task memory"].values():
        for kind, (count, rise, peak) in per_worker.items():
            n, r, p = kinds.get(kind, (0, 0, 0))
            kinds[kind] = (n + count, max(r, rise), max(p, peak))
    return [
        {
            "task": kind,
            "tasks run": n,
            "largest rise during one task MB": round(r / 1e6),
            "largest worker memory while one ran MB": round(p / 1e6),
        }
        for kind, (n, r, p) in sorted(kinds.items(), key=lambda item: -item[1][2])
    ]


def _names(modules):
    return ", ".join(modules) or "none"


def _mb(peaks):
    return ", ".join(f"{m:.0f} MB" for m in sorted(peaks.values()))


_NOTES = """\
LocalCluster(n_workers=2, threads_per_worker=1, memory_limit per worker below the size
of X), dask's worker pause threshold at {pause:.0%} of the limit. The workers run the
training layer's tasks (`obliquetrees.co2._dask_tasks`), which import numpy, numba and
the kernels but not scikit-learn, pandas or pyarrow; the table below lists what they had
imported at the end. (Until 2026-11-29 they ran the estimators' own code: with
scikit-learn, pandas and pyarrow an idle worker held 364 MB, and 500 MB workers paused
for good or were restarted by their nannies; the runs are listed in the closing notes of
that day.) A fit whose workers stay paused fails with a clear error instead of waiting
(`obliquetrees.dask`).
X is `da.random.default_rng(0).standard_normal`, generated chunk by chunk on the
workers and never persisted, y = `X.map_blocks(labels)` (3 classes from two oblique
hyperplanes); test set: {test} rows of another seed. `DaskCO2ForestClassifier(
n_estimators={trees}, rows_per_task={rows_per_task}, random_state=0)`, the other
parameters CO2ForestClassifier's defaults: every tree draws a bootstrap of len(X) rows,
as in memory, and is grown node by node (`obliquetrees.dask`): a node of more than
rows_per_task draws is split on a sample of rows_per_task // 4 of its rows gathered from
the partitions, a smaller one gathered whole on one worker, which grows the ordinary tree
below it. The workers load the kernels before the timed fit (a dask fit of 20,000 rows
and its lazy prediction, on the same cluster); the fit time
includes the validation pass and every pass over the partitions (X regenerated each
pass). Each pass reads a block of X and its y in one task (one blockwise graph), so
blocks of X never move: what moves is the rows kept for the nodes served, from the
partitions on the other worker (about half of them here). Peak memory: the largest
process memory the scheduler reported for each worker while the fit ran (polled every
0.2 s; it refreshes on the workers' heartbeats) and the largest of each worker's own
monitor (every 0.5 s). Bytes: the workers' transfer counters (`transfer_incoming_log`,
`transfer_outgoing_bytes_total`) over the fit; outgoing includes the fitted trees sent
to the client. "Peak over all fits and the prediction": the same two sources over the
fits of every random_state and the lazy prediction of the test set. Restarts: a worker
its nanny restarts (past 95 % of its limit) comes back at a new address; the poll counts
the addresses it did not see at the start. Memory by kind of task: a worker plugin
samples each worker's resident size every 10 ms and keeps, per task name, the largest
rise above the memory at the task's start and the largest memory while one ran
(`on_block` is a pass over one partition, `grow_node` a node's task). The lazy
prediction runs on the fit's workers: a model that would not fit a worker next to
what it holds is predicted group of trees by group of trees (`obliquetrees.dask`), each
group at most a quarter of what the fullest worker can take before dask pauses it, the
next group sent once every partition has the sum over the trees before it (the same bits
as numpy); a tree larger than half of that is refused with a clear error, and the
prediction then runs on a second cluster of 2 workers of --predict-memory-limit. The
in-memory fits run afterwards in the client process (the cluster closed) on all of X,
n_jobs=2: the same forest (CO2ForestClassifier(n_estimators={trees}), each tree drawing
len(X) rows). Accuracy: mean over random_state 0 .. --seeds - 1 (memory, bytes and
times: random_state=0).

Projection, 100 workers x 1e9 rows x 40 features (320 GB), at the default rows_per_task
= 50,000: a tree's bootstrap hits about 63 % of the rows, and each of them moves once, to
the task that grows its node's subtree (99 % of them from another worker); the nodes
above those subtrees, about 2 x 0.63e9 / 50,000 = 25,000 of them, move a sample of
12,500 distinct rows each. Per tree that is about (0.63e9 + 25,000 x 12,500) = 0.94e9
rows x (40 x 8 + 24) bytes, about 320 GB, 3.2 GB into each worker: O(rows) per tree, not
O(rows_per_tree) as when each tree trained on a sample of its own (the version this
replaced, 34 MB per tree at 100,000 rows, whose trees lost 2.4 points here). Each pass
serves about rows_per_task rows per worker thread, so a tree takes about 0.94e9 /
(50,000 x 100) = 190 passes, each reading X once: persist X across the cluster (3.2 GB
per worker) rather than re-read it from storage per pass. Measured here over the fit
of 10 trees: {moved_mb:.0f} MB came from the other worker (about half of the rows the
node tasks gathered). Memory per worker: its runtime with the kernels loaded ({idle_mb}
here, measured after the warm-up fit), its share of the partitions being read, plus
the rows of the node it is deciding (twice: the pieces and their concatenation) and
their training temporaries (the tables below), whatever the number of rows.
"""


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("dask")
