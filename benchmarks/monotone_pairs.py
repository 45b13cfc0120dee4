"""How many of a constrained CO2 tree's ordered leaf pairs a move along one input connects.

CO2 makes a constrained tree monotone by ordering, at every split that weighs
a constrained input, *every* leaf under its left child below *every* leaf
under its right child (``obliquetrees.co2._monotone``). Monotonicity needs
less: only the pairs ``(A, C)`` for which some input ``x`` in leaf ``A``
reaches leaf ``C`` when one constrained input ``j`` of that split moves the
way its constraint says (``x + t c_j e_j``, ``t >= 0``). If most pairs were
not connected, ordering only the connected ones would free most leaves from
the clamp that costs the constrained forests accuracy.

This measures the connected share. For each data set of
``benchmarks/bench_monotonic.py`` (its constraints, seed 0's training part),
a ``CO2ForestRegressor(n_estimators=4, monotonic_cst=...)`` is fitted; from
every tree up to ``--pairs`` (left leaf, right leaf) pairs of its constrained
splits are drawn (seeded) and tested two ways:

- ``exact``: a linear program (scipy's HiGHS) over ``(x, t)``, ``t >= 0``:
  ``x`` meets every split on ``A``'s path, ``x + t c_j e_j`` every split on
  ``C``'s, with each strict inequality closed (the test can only call more
  pairs connected, never fewer: it stays safe; two leaves whose closures
  merely touch count as connected). No bound on ``x``: the guarantee is for
  every input.
- ``axis``: only the paths' axis-aligned splits, as intervals per input (a
  cheap test a kernel could run; oblique splits are ignored, so it calls
  connected every pair ``exact`` does, and more).

A pair counts as connected when one of the split's constrained inputs
connects it.

    python -m benchmarks monotone-pairs
"""

import time

import numpy as np
from scipy.optimize import linprog

import obliquetrees
from benchmarks.bench_monotonic import DATASETS, load_split
from benchmarks.common import cpu_model, load_average, write_results


def _dense_splits(tree):
    """``(W, b, parent)``: each node's weights as a dense row, its bias and its parent."""
    parent = np.full(tree.node_count, -1)
    internal = np.flatnonzero(tree.children_left >= 0)
    parent[tree.children_left[internal]] = internal
    parent[tree.children_right[internal]] = internal
    return tree.dense_weights(), tree.bias, parent


def _path(tree, parent, leaf):
    """``[(node, goes_right), ...]`` from ``leaf`` up to the root."""
    steps = []
    node = leaf
    while parent[node] >= 0:
        up = parent[node]
        steps.append((up, bool(tree.children_right[up] == node)))
        node = up
    return steps


def _leaves(tree, node):
    leaves, stack = [], [node]
    while stack:
        t = stack.pop()
        if tree.children_left[t] < 0:
            leaves.append(t)
        else:
            stack += [tree.children_right[t], tree.children_left[t]]
    return leaves


def connected_exact(W, b, path_a, path_c, j, c_j):
    """Whether some ``x`` in leaf A (its closure) has ``x + t c_j e_j`` in leaf C, ``t >= 0``."""
    d = W.shape[1]
    rows, bounds = [], []
    for path, moved in ((path_a, 0.0), (path_c, 1.0)):
        for node, right in path:
            row = np.append(W[node], moved * c_j * W[node, j])
            # right: w.x + b > 0, closed to -w.x <= b; left: w.x + b <= 0
            rows.append(-row if right else row)
            bounds.append(b[node] if right else -b[node])
    result = linprog(
        np.zeros(d + 1),
        A_ub=np.array(rows),
        b_ub=np.array(bounds),
        bounds=[(None, None)] * d + [(0.0, None)],
        method="highs",
    )
    return bool(result.status != 2)  # 2: infeasible


def connected_axis(W, b, path_a, path_c, j, c_j):
    """The same question from the paths' axis-aligned splits only (intervals per input)."""
    d = W.shape[1]
    low = np.full((2, d), -np.inf)
    high = np.full((2, d), np.inf)
    for side, path in enumerate((path_a, path_c)):
        for node, right in path:
            (features,) = np.nonzero(W[node])
            if features.shape[0] != 1:
                continue
            f = features[0]
            threshold = -b[node] / W[node, f]
            if right == (W[node, f] > 0.0):
                low[side, f] = max(low[side, f], threshold)
            else:
                high[side, f] = min(high[side, f], threshold)
    others = np.arange(d) != j
    if np.any(np.maximum(low[0], low[1])[others] > np.minimum(high[0], high[1])[others]):
        return False
    # along j: x_j in A's interval, x_j + t c_j in C's
    return bool(high[1, j] >= low[0, j] if c_j > 0 else low[1, j] <= high[0, j])


def measure(name, n_pairs, seed=0, n_trees=4):
    """One data set's row: pairs drawn, and the share each test calls connected."""
    (X, y, _, _), cst = load_split(name, seed, 5000)
    model = obliquetrees.CO2ForestRegressor(
        n_estimators=n_trees, monotonic_cst=cst, random_state=seed
    ).fit(X, y)
    rng = np.random.default_rng([seed, 7])
    counts = {"pairs": 0, "drawn": 0, "exact": 0, "axis": 0}
    start = time.perf_counter()
    for tree in model.forest_.trees:
        W, b, parent = _dense_splits(tree)
        pairs = []
        for node in np.flatnonzero(tree.children_left >= 0):
            inputs = np.flatnonzero((cst != 0) & (W[node] != 0.0))
            if inputs.shape[0] == 0:
                continue
            for a in _leaves(tree, tree.children_left[node]):
                for c in _leaves(tree, tree.children_right[node]):
                    pairs.append((a, c, inputs))
        counts["pairs"] += len(pairs)
        for q in rng.choice(len(pairs), min(n_pairs, len(pairs)), replace=False):
            a, c, inputs = pairs[q]
            path_a, path_c = _path(tree, parent, a), _path(tree, parent, c)
            counts["drawn"] += 1
            for test, connect in (("exact", connected_exact), ("axis", connected_axis)):
                counts[test] += any(connect(W, b, path_a, path_c, j, cst[j]) for j in inputs)
    return {
        "data set": name,
        "constraints": ", ".join(f"{j}: {cst[j]:+d}" for j in np.flatnonzero(cst)),
        "ordered pairs (4 trees)": counts["pairs"],
        "drawn": counts["drawn"],
        "connected, exact": f"{counts['exact'] / counts['drawn']:.3f}",
        "connected, axis-aligned splits only": f"{counts['axis'] / counts['drawn']:.3f}",
        "s": f"{time.perf_counter() - start:.1f}",
    }


def add_arguments(parser):
    parser.add_argument("--pairs", type=int, default=500, help="pairs drawn per tree")
    parser.add_argument("--datasets", nargs="+", default=DATASETS)


def main(args):
    rows = []
    for name in args.datasets:
        rows.append(measure(name, args.pairs))
        print(rows[-1], flush=True)
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        "Method: the module docstring of benchmarks/monotone_pairs.py. "
        "A share near 1 says the order CO2 imposes is close to what monotonicity needs "
        "for every input (the cells of oblique splits are unbounded, so leaves far apart "
        "in the training data still meet along a line); a share near 0 would say most "
        "of the clamp is avoidable."
    )
    write_results(
        "monotone_pairs.md",
        title="Constrained CO2 trees: which ordered leaf pairs one input's move connects",
        tables=[("Share of drawn pairs connected", rows)],
        notes=notes,
    )
