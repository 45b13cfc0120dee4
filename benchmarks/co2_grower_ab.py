"""A/B of CO2's two growth loops (issue 15): numba loop or Python-driven grower.

The package grows each CO2 tree breadth-first inside one numba kernel
(:func:`obliquetrees.co2._kernels.grow_tree`) built on the shared
grower's mechanics (``may_split``, ``link_children``, ``grow_capacity`` of
:mod:`obliquetrees._training.grower`). This script keeps the alternative that
E2EDT and soft trees use, the Python :class:`~obliquetrees._training.grower.Grower`
with one call of the numba kernel ``split_node`` per node, as
:func:`grow_tree_python`: a drop-in for ``co2.grow_tree`` that grows the same
trees bit for bit. ``--grower python`` installs it in the training module
before the fit.

Each run fits ``CO2ForestClassifier(n_estimators=30, random_state=0)`` on the
letter training set (15000 x 16, 26 classes) and prints the fit's wall time,
the number of nodes and a checksum of the trees (equal for both variants).
Time whole processes, the variants alternating (A B A B ...), on a quiet
machine. The first run of each variant after a kernel change compiles its
kernels into numba's cache: run ``--check`` once first (it compiles both and
verifies that they grow identical trees).

    python -m benchmarks.co2_grower_ab --check            # identical trees? (no timing)
    python -m benchmarks.co2_grower_ab --grower numba     # A: the package as it is
    python -m benchmarks.co2_grower_ab --grower python    # B: the Python-driven grower
"""

import argparse
import hashlib
import sys
import time

import numpy as np

from benchmarks.datasets import load
from obliquetrees import CO2ForestClassifier
from obliquetrees._training.grower import Grower
from obliquetrees.co2 import training as co2
from obliquetrees.co2._node import dense_source, node_value, split_node


def grow_tree_python(Xs, y, row_weight, n_classes, seed, params):
    """Drop-in for :func:`co2.grow_tree`: the same tree grown by the Python ``Grower``.

    One :func:`split_node` call per node; nodes the limits keep as leaves get
    their histograms in a pass after the growth.
    """
    if not isinstance(Xs, tuple):  # a standardised array: the kernels' (X, mean, scale)
        Xs = dense_source(Xs)
    rows = np.flatnonzero(row_weight > 0)
    grower = Grower(
        rows.shape[0],
        order="breadth",
        max_depth=params.max_depth,
        max_leaf_nodes=params.max_leaf_nodes,
        payload={
            "weights": ((Xs[0].shape[1],), np.float64, 0.0),
            "bias": ((), np.float64, 0.0),
            "value": ((n_classes,), np.float64, 0.0),
            # -1: not reached by the grower (kept a leaf by the limits)
            "n_node_samples": ((), np.float64, -1.0),
        },
    )
    grower.rows[:] = rows
    tree_seed = np.uint64(seed)
    kernel_params = params.kernel_args()
    stats = [0, 0, 0]

    def split(node):
        no_oob = (np.empty(0, dtype=np.int64), np.empty(0), 0, 0)  # oblique_test="fit"
        data = (Xs, y, row_weight, grower.rows, no_oob)
        table = (grower.weights, grower.bias, grower.value, grower.n_node_samples)
        node_range = (grower.start[node], grower.end[node])
        n_left, n_iter, oblique = split_node(
            data, *node_range, node, tree_seed, table, kernel_params
        )
        if n_left >= 0:
            grower.add_children(node, n_left)
            stats[0] += n_iter
            stats[1 if oblique else 2] += 1

    grower.grow(split)
    t = grower.arrays()
    for node in np.flatnonzero(t["n_node_samples"] < 0):
        node_value(
            y,
            row_weight,
            grower.rows,
            t["start"][node],
            t["end"][node],
            node,
            t["value"],
            t["n_node_samples"],
        )
    names = (
        "children_left",
        "children_right",
        "weights",
        "bias",
        "value",
        "n_node_samples",
        "depth",
    )
    return (*(t[name].copy() for name in names), np.array(stats, dtype=np.int64))


#: The package's grower (the numba loop), kept to switch back.
PACKAGE_GROW_TREE = co2.grow_tree


def use_grower(name):
    """Make ``co2.grow_tree`` the ``"numba"`` (package) or ``"python"`` variant.

    ``co2._fit_one_tree`` looks ``grow_tree`` up at call time, so the switch
    takes effect for every fit that follows (set it before fitting).
    """
    co2.grow_tree = {"numba": PACKAGE_GROW_TREE, "python": grow_tree_python}[name]


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
