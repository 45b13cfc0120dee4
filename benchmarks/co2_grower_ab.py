"""A/B of CO2's two growth loops (issue 15): Python-driven grower or numba loop.

The package grows each CO2 tree with the shared breadth-first
:class:`obliquetrees._training.grower.Grower`: a Python loop over the nodes
with one call of the numba kernel ``split_node`` per node
(:func:`obliquetrees._training.co2.grow_tree`). Before, the whole growth
loop ran inside one numba call per tree. This script keeps that variant,
rewritten on the grower's shared parts (``may_split`` for the limits,
``grow_capacity`` for the doubling, the grower's node-table columns), as
:func:`grow_tree_numba`: a drop-in for ``co2.grow_tree`` that grows the same
trees bit for bit. ``--grower numba`` installs it in the training module
before the fit; the package itself carries only the Python-driven grower.

Each run fits ``CO2ForestClassifier(n_estimators=30, random_state=0)`` on the
letter training set (15000 x 16, 26 classes) and prints the fit's wall time,
the number of nodes and a checksum of the trees (equal for both variants).
Time whole processes, the variants alternating (A B A B ...), on a quiet
machine. The first run of each variant after a kernel change compiles its
kernels into numba's cache: run ``--check`` once first (it compiles both and
verifies that they grow identical trees).

    python -m benchmarks.co2_grower_ab --check            # identical trees? (no timing)
    python -m benchmarks.co2_grower_ab --grower python    # A: the package as it is
    python -m benchmarks.co2_grower_ab --grower numba     # B: the in-kernel growth loop
"""

import argparse
import hashlib
import sys
import time

import numpy as np

from benchmarks.datasets import load
from obliquetrees import CO2ForestClassifier
from obliquetrees._core._jit import jit
from obliquetrees._training import co2
from obliquetrees._training._co2_kernels import node_value, split_node
from obliquetrees._training.grower import INITIAL_CAPACITY, grow_capacity, may_split


@jit
def _grow_loop(
    X,
    y,
    row_weight,
    rows,
    tree_seed,
    n_classes,
    params,
):
    """The breadth-first growth of :func:`co2.grow_tree` as one numba loop."""
    cap = INITIAL_CAPACITY
    children_left = np.full(cap, -1, dtype=np.int64)
    children_right = np.full(cap, -1, dtype=np.int64)
    depth = np.zeros(cap, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    weights = np.zeros((cap, X.shape[1]))
    bias = np.zeros(cap)
    value = np.zeros((cap, n_classes))
    n_node_samples = np.zeros(cap)
    stats = np.zeros(3, dtype=np.int64)
    end[0] = rows.shape[0]
    n_nodes = 1
    n_leaves = 1
    node = 0
    while node < n_nodes:  # node ids in creation order: breadth first
        if not may_split(depth[node], n_leaves, params.max_depth, params.max_leaf_nodes):
            node_value(y, row_weight, rows, start[node], end[node], node, value, n_node_samples)
            node += 1
            continue
        n_left, n_iter, oblique = split_node(
            X,
            y,
            row_weight,
            rows,
            start[node],
            end[node],
            node,
            tree_seed,
            weights,
            bias,
            value,
            n_node_samples,
            params,
        )
        if n_left >= 0:
            stats[0] += n_iter
            stats[1 if oblique else 2] += 1
            if n_nodes + 2 > cap:
                cap *= 2
                children_left = grow_capacity(children_left, cap, -1)
                children_right = grow_capacity(children_right, cap, -1)
                depth = grow_capacity(depth, cap, 0)
                start = grow_capacity(start, cap, 0)
                end = grow_capacity(end, cap, 0)
                weights = grow_capacity(weights, cap, 0.0)
                bias = grow_capacity(bias, cap, 0.0)
                value = grow_capacity(value, cap, 0.0)
                n_node_samples = grow_capacity(n_node_samples, cap, 0.0)
            left = n_nodes
            right = n_nodes + 1
            children_left[node] = left
            children_right[node] = right
            depth[left] = depth[node] + 1
            depth[right] = depth[node] + 1
            start[left] = start[node]
            end[left] = start[node] + n_left
            start[right] = start[node] + n_left
            end[right] = end[node]
            n_nodes += 2
            n_leaves += 1
        node += 1
    return (
        children_left[:n_nodes].copy(),
        children_right[:n_nodes].copy(),
        weights[:n_nodes].copy(),
        bias[:n_nodes].copy(),
        value[:n_nodes].copy(),
        n_node_samples[:n_nodes].copy(),
        depth[:n_nodes].copy(),
        stats,
    )


def grow_tree_numba(Xs, y, row_weight, n_classes, seed, params):
    """Drop-in for :func:`co2.grow_tree`: the same tree, grown in one numba call."""
    rows = np.flatnonzero(row_weight > 0)
    return _grow_loop(Xs, y, row_weight, rows, np.uint64(seed), n_classes, params.kernel_args())


#: The package's grower (the Python-driven loop), kept to switch back.
PACKAGE_GROW_TREE = co2.grow_tree


def use_grower(name):
    """Make ``co2.grow_tree`` the ``"python"`` (package) or ``"numba"`` variant.

    ``co2._fit_one_tree`` looks ``grow_tree`` up at call time, so the switch
    takes effect for every fit that follows (set it before fitting).
    """
    co2.grow_tree = {"python": PACKAGE_GROW_TREE, "numba": grow_tree_numba}[name]


def checksum(clf):
    """A hash of every fitted array of every tree."""
    digest = hashlib.sha256()
    for tree in clf.trees_:
        for name, arr in sorted(vars(tree).items()):
            if isinstance(arr, np.ndarray):
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()[:16]


def check():
    """Both variants grow identical trees (limits, sample weights included)."""
    data = load("letter")
    X, y = data["X_train"][:3000], data["y_train"][:3000]
    sample_weight = np.random.default_rng(0).uniform(0.1, 3.0, size=len(y))
    cases = [
        ({}, None),
        ({"max_depth": 4}, sample_weight),
        ({"max_leaf_nodes": 40, "min_samples_leaf": 3}, sample_weight),
        ({"max_leaf_nodes": 12, "max_depth": 5, "bootstrap": False}, None),
    ]
    ok = True
    for params, sw in cases:
        sums = []
        for name in ("python", "numba"):
            use_grower(name)
            clf = CO2ForestClassifier(n_estimators=3, random_state=0, **params)
            sums.append(checksum(clf.fit(X, y, sample_weight=sw)))
        same = sums[0] == sums[1]
        ok &= same
        print(params, "sample_weight" if sw is not None else "", sums, "same" if same else "DIFFER")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grower", choices=("python", "numba"), default="python")
    parser.add_argument("--n-jobs", type=int, default=None, help="the estimator's n_jobs")
    parser.add_argument("--check", action="store_true", help="compare the variants, no timing")
    args = parser.parse_args()
    if args.check:
        sys.exit(0 if check() else 1)
    data = load("letter")
    use_grower(args.grower)
    clf = CO2ForestClassifier(n_estimators=30, random_state=0, n_jobs=args.n_jobs)
    start = time.perf_counter()
    clf.fit(data["X_train"], data["y_train"])
    fit_s = time.perf_counter() - start
    n_nodes = sum(tree.node_count for tree in clf.trees_)
    print(f"grower={args.grower} fit {fit_s:.3f} s, {n_nodes} nodes, trees {checksum(clf)}")


if __name__ == "__main__":
    main()
