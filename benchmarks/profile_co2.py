"""Where the fit time of a CO2 tree goes, by node size (letter, default parameters).

A fit grows each tree with the shared breadth-first grower, one call of the
per-node kernel (``co2._node.split_node``) per node. This script grows one
letter tree exactly so (``co2.grow_tree``) with that kernel wrapped: each call
is timed with the calling thread's CPU clock (robust to other processes on a
shared machine), and for every internal node the two parts of the node's
work are timed again separately on a copy of its (gathered, centred) samples:
the axis-aligned initial split search and the CCCP. Nodes are grouped by
their number of distinct samples.

It also times the whole forest fit against the time spent inside
``co2.grow_tree``, which bounds the per-tree Python overhead (bootstrap,
folding the standardisation into the weights, packing).

    python -m benchmarks profile-co2          # writes benchmarks/results/co2_profile.md
"""

import dataclasses
import os
import time

import numpy as np

from benchmarks import co2_grower_ab as ab
from benchmarks.bench_co2 import split
from benchmarks.common import write_results
from obliquetrees import CO2ForestClassifier
from obliquetrees._core._random import node_seed
from obliquetrees._core.tree import standardization
from obliquetrees._training import axis_split as A
from obliquetrees.co2 import _kernels as K
from obliquetrees.co2 import _node as N
from obliquetrees.co2 import training as co2

BINS = [1, 2, 10, 50, 100, 300, 1000, 3000, 10**9]


def _default_params(n_features, **changes):
    prm = CO2ForestClassifier().get_params()
    fields = {f.name: prm[f.name] for f in dataclasses.fields(co2.CO2Params)}
    return co2.CO2Params(**fields | {"max_features": int(np.sqrt(n_features))} | changes)


def _part_times(Xs, y, cw, rows, seed, params, n_classes):
    """CPU seconds of the axis-aligned search and of the CCCP on a copy of a node."""
    Xb = Xs[rows]
    wb = cw[rows]
    Xb -= (wb[:, None] * Xb).sum(axis=0) / wb.sum()
    yb = y[rows]
    m = len(rows)
    state = np.array([seed], dtype=np.uint64)
    cap = params.kernel_args().max_cccp_samples
    if 0 <= cap < m:  # a large node fits its whole stump on a sample (drawn first)
        pick = N.cccp_rows(m, cap, state)
        Xb, yb, wb = N.take_block(Xb, yb, wb, pick)
        m = pick.shape[0]
    c = time.thread_time_ns()
    f, thr, _ = A.best_axis_split(
        Xb, yb, wb, m, n_classes, params.max_features, params.min_samples_leaf, state
    )
    axis_s = (time.thread_time_ns() - c) * 1e-9
    t0, t1 = A.init_theta(Xb, yb, wb, m, f, thr, n_classes, A.THETA_PRIOR)
    w = np.zeros(Xs.shape[1])
    w[f] = 1.0
    history = np.empty(params.max_cccp_iter + 1)
    c = time.thread_time_ns()
    K.cccp(
        Xb,
        yb,
        wb,
        m,
        w,
        -thr,
        t0,
        t1,
        params.kernel_args(),
        state,
        history,
    )
    return axis_s, (time.thread_time_ns() - c) * 1e-9


def per_node_profile(tree_seed=0, boot_seed=0, data=None, **changes):
    """Time every node of one tree (default parameters with ``changes``) of letter or ``data``."""
    Xtr, ytr = split("letter")[:2] if data is None else data
    X = np.ascontiguousarray(Xtr, dtype=np.float64)
    y = np.unique(ytr, return_inverse=True)[1].astype(np.int64)
    n_classes = int(y.max()) + 1
    mean, scale = standardization(X, None)
    Xs = np.ascontiguousarray((X - mean) / scale)
    params = _default_params(X.shape[1], **changes)
    cw = co2.bootstrap_counts(len(X), boot_seed)
    # the Python-driven grower (same trees) lets each split_node call be timed
    ab.grow_tree_python(Xs[:2], y[:2], cw[:2], n_classes, 1, params)  # load the kernels
    kernel = ab.split_node
    rec = []

    def timed_split_node(data, start, end, node, seed, *rest):
        node_rows = data[3][start:end].copy()
        c = time.thread_time_ns()
        n_left, n_iter, oblique = kernel(data, start, end, node, seed, *rest)
        total = (time.thread_time_ns() - c) * 1e-9
        axis_s = cccp_s = 0.0
        if n_left >= 0:
            axis_s, cccp_s = _part_times(
                Xs, y, cw, node_rows, node_seed(seed, node), params, n_classes
            )
        rec.append((end - start, total, axis_s, cccp_s, n_iter, n_left >= 0))
        return n_left, n_iter, oblique

    ab.split_node = timed_split_node
    try:
        ab.grow_tree_python(Xs, y, cw, n_classes, tree_seed, params)
    finally:
        ab.split_node = kernel
    return np.array(rec, dtype=float)


def table(rec):
    total = rec[:, 1].sum()
    rows = []
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        sel = (rec[:, 0] >= lo) & (rec[:, 0] < hi)
        internal = sel & (rec[:, 5] > 0)
        n_int = int(internal.sum())
        rows.append(
            {
                "distinct samples m": f"[{lo}, {hi})" if hi < 10**9 else f">= {lo}",
                "nodes": int(sel.sum()),
                "internal": n_int,
                "CPU ms": 1e3 * rec[sel, 1].sum(),
                "share %": 100.0 * rec[sel, 1].sum() / total,
                "axis search ms": 1e3 * rec[internal, 2].sum(),
                "CCCP ms": 1e3 * rec[internal, 3].sum(),
                "CCCP iterations / internal node": rec[internal, 4].sum() / max(n_int, 1),
                "us per CCCP iteration": 1e6
                * rec[internal, 3].sum()
                / max(rec[internal, 4].sum(), 1),
            }
        )
    rows.append(
        {
            "distinct samples m": "all",
            "nodes": len(rec),
            "internal": int(rec[:, 5].sum()),
            "CPU ms": 1e3 * total,
            "share %": 100.0,
            "axis search ms": 1e3 * rec[:, 2].sum(),
            "CCCP ms": 1e3 * rec[:, 3].sum(),
            "CCCP iterations / internal node": rec[:, 4].sum() / max(rec[:, 5].sum(), 1),
            "us per CCCP iteration": 1e6 * rec[:, 3].sum() / max(rec[:, 4].sum(), 1),
        }
    )
    return rows


def forest_overhead(n_trees=30):
    """Whole fit against the time inside grow_tree (n_jobs=1, CPU clock)."""
    Xtr, ytr, _, _ = split("letter")
    inside = []
    grow = co2.grow_tree

    def timed_grow(*a):
        c = time.thread_time_ns()
        out = grow(*a)
        inside.append((time.thread_time_ns() - c) * 1e-9)
        return out

    co2.grow_tree = timed_grow
    try:
        clf = CO2ForestClassifier(n_trees, random_state=0, n_jobs=1)
        c = time.thread_time_ns()
        start = time.perf_counter()
        clf.fit(Xtr, ytr)
        fit_cpu = (time.thread_time_ns() - c) * 1e-9
        wall = time.perf_counter() - start
    finally:
        co2.grow_tree = grow
    return [
        {
            "trees": n_trees,
            "n_jobs": 1,
            "fit wall s": wall,
            "fit CPU s (thread)": fit_cpu,
            "CPU inside grow_tree s": sum(inside),
            "outside grow_tree %": 100.0 * (fit_cpu - sum(inside)) / fit_cpu,
            "load avg": os.getloadavg()[0],
        }
    ]


def add_arguments(parser):
    """The arguments of ``python -m benchmarks profile-co2``."""
    parser.add_argument(
        "--synthetic",
        type=int,
        help="profile one tree on this many make_classification rows (40 features, 5 classes), "
        "defaults against max_cccp_samples=None; writes co2_profile_synthetic.md",
    )


def main_synthetic(n):
    from sklearn.datasets import make_classification

    data = make_classification(n, n_features=40, n_informative=20, n_classes=5, random_state=0)
    default = per_node_profile(data=data)
    full = per_node_profile(data=data, max_cccp_samples=None)
    prm = CO2ForestClassifier().get_params()
    notes = f"""
One tree on make_classification({n}, n_features=40, n_informative=20, n_classes=5,
random_state=0) (bootstrap: {int(default[0, 0])} distinct rows), grown node by node from Python
with the per-node kernel, once with the defaults (max_cccp_samples={prm["max_cccp_samples"]})
and once with max_cccp_samples=None (every node's stump on all its rows);
CPU time of the calling thread. "CPU ms" is the whole per-node kernel (gather, centring,
axis-aligned search, CCCP, partition); "axis search ms" and "CCCP ms" time those two steps
again on a copy of the node's samples (a node above max_cccp_samples rows: on the sample that
both are fit on). The second run is the previous algorithm (every node's stump on all its rows).
Load average at the end: {os.getloadavg()[0]:.1f} (2 cores, shared).
"""
    write_results(
        "co2_profile_synthetic.md",
        f"CO2 Forest: fit-time profile by node size ({n} x 40 synthetic)",
        [
            (f"Defaults (max_cccp_samples={prm['max_cccp_samples']})", table(default)),
            ("max_cccp_samples=None (all rows)", table(full)),
        ],
        notes=notes,
    )


def main(args):
    if args.synthetic:
        return main_synthetic(args.synthetic)
    rec = per_node_profile()
    rows = table(rec)
    over = forest_overhead()
    prm = CO2ForestClassifier().get_params()
    notes = f"""
One letter tree (bootstrap of the 15000 training rows, {int(rec[0, 0])} distinct rows; default
parameters: tol={prm["tol"]}, cccp_epochs={prm["cccp_epochs"]},
max_cccp_iter={prm["max_cccp_iter"]}, batch_size={prm["batch_size"]}), grown node by node from
Python with the per-node kernel; CPU time of the calling thread. "CPU ms" is the whole
per-node kernel (gather, centring, axis-aligned search, CCCP, partition); "axis search ms" and
"CCCP ms" time those two steps again on a copy of the node's samples. The load average at the
end was {os.getloadavg()[0]:.1f} (2 cores): CPU times on a loaded machine are somewhat inflated
too (shared caches), but far less than wall times.
"""
    write_results(
        "co2_profile.md",
        "CO2 Forest: fit-time profile by node size (letter)",
        [
            ("Per node size (one tree)", rows),
            ("Whole fit against the time inside co2.grow_tree", over),
        ],
        notes=notes,
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("profile-co2")
