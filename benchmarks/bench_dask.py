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

import threading
import time

import numpy as np

from benchmarks.common import write_results
from obliquetrees import CO2ForestClassifier

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
    parser.add_argument("--rows-per-tree", type=int, default=100_000)
    parser.add_argument("--memory-limit", default="500MB")
    parser.add_argument(
        "--pause", type=float, default=0.9, help="dask's worker pause threshold (default 0.8)"
    )
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument(
        "--seeds", type=int, default=1, help="random_state 0, 1, ... of the accuracy figures"
    )
    parser.add_argument(
        "--every-row-in-memory",
        action="store_true",
        help="also fit the in-memory forest whose trees draw as many rows as X has (slow)",
    )
    parser.add_argument("--out", default="dask")


def _data(args, seed, rows):
    import dask.array as da

    X = da.random.default_rng(seed).standard_normal(
        (rows, args.features), chunks=(args.chunk_rows, args.features)
    )
    return X, X.map_blocks(_labels, drop_axis=1, dtype=np.int64)


class _MemoryPoll:
    """Peak memory of every worker, from the scheduler's reports, polled in a thread."""

    def __init__(self, client, every=0.2):
        self.client, self.every, self.peak = client, every, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

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


def _transfers(dask_worker):
    incoming = sum(entry["total"] for entry in dask_worker.transfer_incoming_log)
    return {"incoming": incoming, "outgoing": dask_worker.transfer_outgoing_bytes_total}


def _monitor_peak(since, dask_worker=None):
    times = list(dask_worker.monitor.quantities["time"])
    memory = list(dask_worker.monitor.quantities["memory"])
    return max((m for t, m in zip(times, memory, strict=True) if t >= since), default=0)


def _warm_up():
    from sklearn.datasets import make_classification

    X, y = make_classification(300, 6, n_classes=3, n_informative=4, random_state=0)
    CO2ForestClassifier(n_estimators=1, random_state=0).fit(X, y)  # load the kernels
    return True


def _dask_fit(args, X, y, X_test):
    import dask
    from distributed import Client, LocalCluster

    from obliquetrees.dask import DaskCO2ForestClassifier

    # the runtime (numpy, scikit-learn, numba's kernels, dask) takes about 300 MB of a
    # worker: dask's default pause at 80 % of 500 MB left a worker paused for good
    config = {"distributed.worker.memory.pause": args.pause}
    with (
        dask.config.set(config),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            memory_limit=args.memory_limit,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(_warm_up)
        limit = next(iter(client.scheduler_info()["workers"].values()))["memory_limit"]
        before = client.run(_transfers)
        started = time.time()
        model = DaskCO2ForestClassifier(
            n_estimators=args.trees, rows_per_tree=args.rows_per_tree, random_state=0
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
            predicted = time.time()
            lazy = model.predict(_data(args, 2, args.test_rows)[0])
            built = time.time() - predicted
            lazy_prediction = lazy.compute()
        monitor_all = client.run(_monitor_peak, started)
    moved = {k: sum(after[w][k] - before[w][k] for w in after) for k in ("incoming", "outgoing")}
    return {
        "models": [m.to_local() for m in [model, *others]],
        "fit s": seconds,
        "memory limit MB": limit / 1e6,
        "peak worker memory MB (scheduler)": {w: m / 1e6 for w, m in poll.peak.items()},
        "peak worker memory MB (worker monitor)": {w: m / 1e6 for w, m in monitor.items()},
        "peak over every fit and the prediction MB": {
            w: max(m, poll_all.peak.get(w, 0)) / 1e6 for w, m in monitor_all.items()
        },
        "bytes between workers": moved,
        "lazy predict build s": built,
        "lazy prediction": lazy_prediction,
    }


def main(args):
    X, y = _data(args, 0, args.rows)
    X_test, y_test = (a.compute() for a in _data(args, 2, args.test_rows))
    x_bytes = args.rows * args.features * 8
    result = _dask_fit(args, X, y, X_test)
    dask_models = result.pop("models")
    dask_model = dask_models[0]
    dask_accuracy = [float(np.mean(m.predict(X_test) == y_test)) for m in dask_models]
    lazy_equal = bool(np.array_equal(result.pop("lazy prediction"), dask_model.predict(X_test)))
    print(result, dask_accuracy, flush=True)
    X_mem, y_mem = X.compute(), y.compute()  # the in-memory comparison, in this process
    rows = [_row(f"dask, rows_per_tree={args.rows_per_tree}", result["fit s"], dask_accuracy)]
    in_memory = [(f"in memory, max_samples={args.rows_per_tree}", args.rows_per_tree)]
    if args.every_row_in_memory:
        in_memory.append(("in memory, max_samples=None (each tree draws len(X) rows)", None))
    for label, max_samples in in_memory:
        accuracy, times = [], []
        for seed in range(args.seeds if max_samples is not None else 1):
            started = time.time()
            local = CO2ForestClassifier(
                n_estimators=args.trees, max_samples=max_samples, random_state=seed, n_jobs=2
            ).fit(X_mem, y_mem)
            times.append(time.time() - started)
            accuracy.append(float(np.mean(local.predict(X_test) == y_test)))
        rows.append(_row(label, times[0], accuracy))
        print(rows[-1], flush=True)
    moved = result["bytes between workers"]
    drawn = args.trees * args.rows_per_tree * (args.features + 1) * 8  # X and y rows
    facts = [
        ("X", f"{args.rows} x {args.features} float64, {x_bytes / 1e6:.0f} MB"),
        ("partitions", f"{-(-args.rows // args.chunk_rows)} of {args.chunk_rows} rows"),
        ("worker memory limit", f"{result['memory limit MB']:.0f} MB (x2 workers)"),
        ("peak worker memory (scheduler)", _mb(result["peak worker memory MB (scheduler)"])),
        ("peak worker memory (monitor)", _mb(result["peak worker memory MB (worker monitor)"])),
        ("peak over all fits and the prediction", _mb(result[_ALL])),
        ("rows drawn for the trees (all of them)", f"{drawn / 1e6:.1f} MB"),
        ("bytes received from other workers", f"{moved['incoming'] / 1e6:.1f} MB"),
        ("bytes sent by workers (to workers, client)", f"{moved['outgoing'] / 1e6:.1f} MB"),
        ("lazy predict: graph built in", f"{result['lazy predict build s']:.3f} s"),
        ("lazy predict equals numpy predict", str(lazy_equal)),
    ]
    facts = [{"quantity": name, "value": value} for name, value in facts]
    write_results(
        f"{args.out}.md",
        f"CO2 forest of {args.trees} trees on a dask array of {x_bytes / 1e6:.0f} MB",
        [("The dask fit", facts), ("Accuracy and fit time", rows)],
        _NOTES.format(
            trees=args.trees,
            rows_per_tree=args.rows_per_tree,
            test=args.test_rows,
            drawn_mb=drawn / 1e6,
            moved_mb=moved["incoming"] / 1e6,
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


def _mb(peaks):
    return ", ".join(f"{m:.0f} MB" for m in sorted(peaks.values()))


_NOTES = """\
LocalCluster(n_workers=2, threads_per_worker=1, memory_limit per worker below the size
of X), with dask's worker pause threshold at 90 % of the limit instead of 80 %: the
runtime alone (numpy, scikit-learn, numba's kernels, dask) holds about 300 MB of a
worker, a tree of 100,000 rows about 100 MB more while it trains, and at 80 % a worker
that settled just above 400 MB after a tree paused for good (seen twice), leaving the fit
waiting; dask's memory limit itself (terminate at 95 %) is unchanged.
X is `da.random.default_rng(0).standard_normal`, generated chunk by chunk on the
workers and never persisted, y = `X.map_blocks(labels)` (3 classes from two oblique
hyperplanes); test set: {test} rows of another seed. `DaskCO2ForestClassifier(
n_estimators={trees}, rows_per_tree={rows_per_tree}, random_state=0)`, the other
parameters CO2ForestClassifier's defaults. The workers load the kernels before the
timed fit (`client.run`); the fit time includes the validation pass and one pass over
the partitions per wave of 2 trees (X regenerated each pass). Each pass reads a block of
X and its y in one task (one blockwise graph), so blocks of X never move: what moves is
the drawn rows of each tree from the partitions on the other worker (about half of them
here; "rows drawn" counts all). Peak memory: the largest
process memory the scheduler reported for each worker while the fit ran (polled every
0.2 s; it refreshes on the workers' heartbeats) and the largest of each worker's own
monitor (every 0.5 s). Bytes: the workers' transfer counters (`transfer_incoming_log`,
`transfer_outgoing_bytes_total`) over the fit; outgoing includes the fitted trees sent
to the client. "Peak over all fits and the prediction": the same two sources over the
fits of every random_state and the lazy prediction of the test set (the model, about
80 MB, goes to every worker). The in-memory fits run afterwards in the client process (the cluster
closed) on all of X, n_jobs=2: the same forest with max_samples=rows_per_tree (each tree
draws as many rows as a dask tree is given, from all of X; its out-of-bag rows are the
rest of X), and with `--every-row-in-memory` the default max_samples=None (one
random_state). Accuracy: mean over random_state 0 .. --seeds - 1 (memory, bytes and
times: random_state=0).

Projection, 100 workers x 1e9 rows x 40 features (320 GB): what moves per tree is its
rows, rows_per_tree x (40 x 8 + 16) bytes (34 MB at 100,000 rows), from every partition
to the tree's worker, whatever the number of rows; a wave of 100 trees (one per worker
thread) moves 3.4 GB in all, 34 MB into each worker, and the trees (a few MB each) to the
client (measured here: {drawn_mb:.0f} MB of drawn rows, of which {moved_mb:.0f} MB came from
the other worker; no block of X moved). Nothing else of X moves. The other cost is reading: each
wave reads every partition once (the validation pass once more), so a forest of T trees
reads X 1 + T / 100 times: persist X across the cluster (3.2 GB per worker) or accept a
re-read from storage per wave. Memory per worker: about 300 MB of runtime, its share of
the partitions being read, plus one tree's rows and training temporaries (about 100 MB
at 100,000 x 40, measured above), whatever the number of rows.
"""


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("dask")
