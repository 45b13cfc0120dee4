"""The price of a constrained E2EDT regressor's tree of the free inputs: size and time.

Under ``monotonic_cst`` with free inputs ``E2EDTRegressor`` stores ``T(x) +
F(x_free)`` as one grafted tree (:func:`obliquetrees._core.graft.graft_sum`):
a copy of ``F`` under every leaf of ``T``. This measures what that costs
against the unconstrained single tree at the defaults, on
``benchmarks/bench_monotonic.py``'s california_housing split (its
constraint, at most ``--max-train`` training rows): nodes, pickle size, fit
time, and the prediction time of all the set's rows (training and test
parts) under soft routing (the default: the two parts each evaluated once,
:func:`~obliquetrees._core.graft.split_graft`), under soft routing of the
whole grafted tree node by node (what soft prediction cost before the parts
were recognised), and under hard routing. Prediction through
:func:`obliquetrees.e2edt.training.tree_output` on one thread; times are
medians of ``--repeat`` runs in this process (fits: of 3).

    python -m benchmarks free-tree-price
"""

import pickle
from functools import partial

import numpy as np

import obliquetrees
from benchmarks.bench_monotonic import load_split
from benchmarks.common import cpu_model, load_average, timed, write_results


def measure(seed=0, max_train=5000, repeat=15):
    """One row per model (constrained, unconstrained): sizes and median seconds."""
    from obliquetrees._core._jit import numba_threads
    from obliquetrees._core.soft import soft_predict
    from obliquetrees.e2edt.training import tree_output

    def whole_tree(tree, steep, X):
        with numba_threads(1):  # as tree_output runs
            return soft_predict(tree, X, tree.value, steepness=steep)

    (X, y, X_test, _), cst = load_split("california_housing", seed, max_train)
    rows_all = np.vstack([X, X_test])
    out = []
    for label, constraint in (("constrained", cst), ("unconstrained", None)):
        model, fit_s = timed(
            lambda c=constraint: obliquetrees.E2EDTRegressor(
                monotonic_cst=c, random_state=seed
            ).fit(X, y),
            repeat=3,
        )
        tree, steep = model.trees_[0], model.steepness_[0]
        predict = {
            "soft predict s": partial(tree_output, tree, steep, rows_all, "soft"),
            "soft predict, whole tree s": partial(whole_tree, tree, steep, rows_all),
            "hard predict s": partial(tree_output, tree, steep, rows_all, "hard"),
        }
        row = {
            "model": f"E2EDTRegressor() {label}",
            "nodes": tree.node_count,
            "pickle KB": round(len(pickle.dumps(model)) / 1024, 1),
            "fit s": round(float(np.median(fit_s)), 3),
        }
        for name, call in predict.items():
            call()  # compiled and warm
            row[name] = round(float(np.median(timed(call, repeat=repeat)[1])), 4)
        out.append(row)
    return out, rows_all.shape[0]


def add_arguments(parser):
    parser.add_argument("--seed", type=int, default=0, help="split and model seed (default 0)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")
    parser.add_argument("--repeat", type=int, default=15, help="prediction runs (default 15)")


def main(args):
    rows, n_rows = measure(args.seed, args.max_train, args.repeat)
    constrained, free = rows
    ratios = {
        key: round(constrained[key] / free[key], 2)
        for key in ("nodes", "pickle KB", "fit s", "soft predict s", "hard predict s")
    }
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"california_housing, seed {args.seed}, at most {args.max_train} training rows; "
        f"predictions of {n_rows} rows on one thread, medians of {args.repeat} runs. "
        f"Constrained over unconstrained: {ratios}. "
        "'soft predict, whole tree' evaluates the grafted tree node by node (the "
        "unconstrained tree has no graft: the same as 'soft predict'). "
        "Method: the module docstring of benchmarks/free_tree_price.py."
    )
    write_results(
        "free_tree_price.md",
        title="The price of E2EDTRegressor's tree of the free inputs",
        tables=[("Size and time", rows)],
        notes=notes,
    )
