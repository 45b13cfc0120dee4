"""Where the fit time of a CO2 tree goes, by node size (letter, default parameters).

A real fit grows each tree in one numba call (``_co2_kernels.grow_tree``), so
there is no Python work per node to profile from outside. This script grows
one letter tree node by node instead, calling the same per-node kernel
(``split_node``) from Python in the same breadth-first order with the same
node seeds (so the tree is the one ``grow_tree`` builds), and times each call
with the calling thread's CPU clock (robust to other processes on a shared
machine). For every internal node it also times the two parts of the node's
work separately on a copy of its (gathered, centred) samples: the
axis-aligned initial split search and the CCCP. Nodes are grouped by their
number of distinct samples.

It also times the whole forest fit against the time spent inside
``grow_tree``, which bounds the per-tree Python overhead (bootstrap, folding
the standardisation into the weights, packing).

    python -m benchmarks profile-co2          # writes benchmarks/results/co2_profile.md
"""

import os
import time

import numpy as np

from benchmarks.bench_co2 import split
from benchmarks.common import write_results
from obliquetrees import CO2ForestClassifier
from obliquetrees._core.tree import standardization
from obliquetrees._training import _co2_kernels as K
from obliquetrees._training import co2

BINS = [1, 2, 10, 50, 100, 300, 1000, 3000, 10**9]


def per_node_profile(tree_seed=0, boot_seed=0):
    """Time every node of one letter tree (default parameters)."""
    Xtr, ytr, _, _ = split("letter")
    X = np.ascontiguousarray(Xtr, dtype=np.float64)
    y = np.unique(ytr, return_inverse=True)[1].astype(np.int64)
    n_classes = int(y.max()) + 1
    mean, scale = standardization(X, None)
    Xs = np.ascontiguousarray((X - mean) / scale)
    prm = CO2ForestClassifier().get_params()
    q = int(np.sqrt(X.shape[1]))
    cw = co2.bootstrap_counts(len(X), boot_seed)
    idx = np.flatnonzero(cw > 0).astype(np.int64)
    w_buf = np.empty(X.shape[1])
    hist = np.empty(n_classes)
    args = (
        n_classes,
        True,
        q,
        prm["min_samples_split"],
        prm["min_samples_leaf"],
        prm["nu"],
        prm["learning_rate"],
        prm["batch_size"],
        prm["momentum"],
        prm["cccp_epochs"],
        prm["max_cccp_iter"],
        prm["tol"],
    )

    def node(start, end, seed):
        return K.split_node(
            Xs, y, cw, idx, start, end, *args, np.uint64(seed), w_buf, hist, 1, K.THETA_PRIOR
        )

    node(0, 1, 1)  # load the kernels
    nodes = [(0, len(idx))]
    rec = []
    i = 0
    while i < len(nodes):
        start, end = nodes[i]
        seed = int(K.node_seed(np.uint64(tree_seed), i))
        rows = idx[start:end].copy()
        c = time.thread_time_ns()
        n_left, _, n_iter, _ = node(start, end, seed)
        total = (time.thread_time_ns() - c) * 1e-9
        axis_s = cccp_s = 0.0
        if n_left >= 0:
            # the same two steps on a copy of the node's data, timed on their own
            Xb = Xs[rows]
            wb = cw[rows]
            Xb -= (wb[:, None] * Xb).sum(axis=0) / wb.sum()
            yb = y[rows]
            m = len(rows)
            state = np.array([seed], dtype=np.uint64)
            c = time.thread_time_ns()
            f, thr, _ = K.best_axis_split(
                Xb, yb, wb, m, n_classes, q, prm["min_samples_leaf"], state
            )
            axis_s = (time.thread_time_ns() - c) * 1e-9
            t0, t1 = K.init_theta(Xb, yb, wb, m, f, thr, n_classes, K.THETA_PRIOR)
            w = np.zeros(X.shape[1])
            w[f] = 1.0
            history = np.empty(prm["max_cccp_iter"] + 1)
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
                prm["nu"],
                prm["learning_rate"],
                prm["batch_size"],
                prm["momentum"],
                prm["cccp_epochs"],
                prm["max_cccp_iter"],
                prm["tol"],
                state,
                history,
            )
            cccp_s = (time.thread_time_ns() - c) * 1e-9
            nodes.append((start, start + n_left))
            nodes.append((start + n_left, end))
        rec.append((end - start, total, axis_s, cccp_s, n_iter, n_left >= 0))
        i += 1
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
    grow = K.grow_tree

    def timed_grow(*a):
        c = time.thread_time_ns()
        out = grow(*a)
        inside.append((time.thread_time_ns() - c) * 1e-9)
        return out

    K.grow_tree = timed_grow
    try:
        clf = CO2ForestClassifier(n_trees, random_state=0, n_jobs=1)
        c = time.thread_time_ns()
        start = time.perf_counter()
        clf.fit(Xtr, ytr)
        fit_cpu = (time.thread_time_ns() - c) * 1e-9
        wall = time.perf_counter() - start
    finally:
        K.grow_tree = grow
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
    """``python -m benchmarks profile-co2`` takes no arguments."""


def main(args):
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
            ("Whole fit against the time inside the growth kernel", over),
        ],
        notes=notes,
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("profile-co2")
