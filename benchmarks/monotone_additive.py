"""Whether a constrained single tree plus a tree on the free features removes the constraint cost.

A study for issue 41, run before either single tree added the free tree
itself: ``E2EDTRegressor``'s constrained model since stop 65
(:func:`obliquetrees.e2edt.training._with_free_tree`, its depth chosen in
``results/monotonic_defaults_e2edt-free-depth.md``), the soft trees' since
stop 67 (:func:`obliquetrees.soft.training._with_free_tree`, chosen in
``results/monotonic_defaults_soft-free-tree.md``). A rerun now measures
sums whose ``T`` is already such a sum; the results files record the
revision they measured. ``results/monotonic.md`` showed constrained single trees
(``E2EDTRegressor``, ``SoftTreeRegressor``) losing more than the 1-point
bar where the forests lose nothing, and stop
61 traced it to the ordering itself: at an ordered split every leaf on one
side must stay below every leaf on the other, so the part of the target
that varies with the free features alone (the synthetic set's ``x1 x3``)
can only be modelled inside each ordered subtree's interval. A sum

    f(x) = T(x) + T_free(x_free)

of a constrained tree ``T`` and a tree ``T_free`` that sees only the
unconstrained features is monotone whenever ``T`` is (``T_free`` does not
move along a constrained feature), and leaves the free part to a tree that
needs no ordering. For hard and soft routing alike it is one tree: put a
copy of ``T_free`` under every leaf ``l`` of ``T``, its leaf values shifted
by ``v_l``; a row's path probabilities multiply, and since each tree's sum
to 1 the grafted prediction is ``sum_l p_l v_l + sum_k q_k u_k`` exactly. So
a package model of this form would keep the stored tree, its predict paths,
ONNX export and pickles; its cost is size (leaves multiply).

Fitted here by backfitting, ``--rounds`` rounds: ``T`` on ``y``, ``T_free``
on ``y - T(x)``, then ``T`` again on ``y - T_free(x_free)`` and so on, each
tree the estimator at its defaults (``T_free`` unconstrained, on the free
columns; ``--free-depth`` caps its depth). The same sum with ``T``
unconstrained (``T_free`` on the same columns) is the like-for-like
comparison: the sum adds capacity, so a cost against the single
unconstrained tree alone would flatter it. Data sets, splits, seeds and
constraints: ``benchmarks/bench_monotonic.py``'s; every constrained sum is
checked along random lines (``max_violation``, <= 0 up to rounding: monotone).

    python -m benchmarks monotone-additive                  # both single trees, 10 seeds
    python -m benchmarks monotone-additive --free-depth 3   # monotone_additive_free_depth_3.md
    python -m benchmarks monotone-additive --estimators E2EDTRegressor --seeds 3
"""

import time

import numpy as np
from sklearn.metrics import r2_score
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.bench_monotonic import (
    DATASETS,
    _paired_cost,
    describe_constraints,
    load_split,
    max_violation,
)
from benchmarks.common import cpu_model, load_average, write_results

ESTIMATORS = ("E2EDTRegressor", "SoftTreeRegressor")


class AdditiveTrees:
    """``T(x) + T_free(x[:, free])``, backfitted (the module docstring).

    ``make(monotonic_cst, seed, free_tree)`` returns an unfitted regressor:
    ``T`` with ``free_tree=False`` (``monotonic_cst`` None: unconstrained),
    ``T_free`` with ``free_tree=True`` (always unconstrained).
    """

    def __init__(self, make, monotonic_cst, free, seed, rounds=2):
        self.make, self.monotonic_cst, self.free = make, monotonic_cst, free
        self.seed, self.rounds = seed, rounds

    def fit(self, X, y):
        X_free = X[:, self.free]
        self.tree_ = self.make(self.monotonic_cst, self.seed, False).fit(X, y)
        for r in range(self.rounds):
            residual = y - self.tree_.predict(X)
            self.free_tree_ = self.make(None, self.seed + 1000 + r, True).fit(X_free, residual)
            if r + 1 < self.rounds:
                target = y - self.free_tree_.predict(X_free)
                self.tree_ = self.make(self.monotonic_cst, self.seed + 2000 + r, False).fit(
                    X, target
                )
        return self

    def predict(self, X):
        return self.tree_.predict(X) + self.free_tree_.predict(X[:, self.free])


def factory(name, free_depth=None):
    """``make(monotonic_cst, seed, free_tree)`` of estimator ``name`` at its defaults."""
    cls = getattr(obliquetrees, name)

    def make(monotonic_cst, seed, free_tree):
        depth = {"max_depth": free_depth} if free_tree and free_depth is not None else {}
        return cls(monotonic_cst=monotonic_cst, random_state=seed, **depth)

    return make


def run(names, datasets, seeds, rounds, free_depth, max_train):
    """One row per (estimator, data set, seed): R^2 of the four models, violation, fit time."""
    rows = []
    for name in names:
        make = factory(name, free_depth)
        for data in datasets:
            for seed in seeds:
                (X, y, X_test, y_test), cst = load_split(data, seed, max_train)
                free = np.flatnonzero(cst == 0)
                row = {"estimator": name, "data set": data, "seed": seed}
                models = {
                    "tree, constrained": make(cst, seed, False),
                    "tree": make(None, seed, False),
                    "sum, constrained": AdditiveTrees(make, cst, free, seed, rounds),
                    "sum": AdditiveTrees(make, None, free, seed, rounds),
                }
                for label, model in models.items():
                    start = time.perf_counter()
                    model.fit(X, y)
                    row[f"{label} fit s"] = time.perf_counter() - start
                    row[label] = float(r2_score(y_test, model.predict(X_test)))
                row["violation"] = max_violation(models["sum, constrained"], X_test, cst, seed)
                rows.append(row)
                print(row, flush=True)
    return rows


def summarise(rows):
    """Per (estimator, data set): mean R^2 of each model and the paired costs."""
    table = []
    for name, data in dict.fromkeys((r["estimator"], r["data set"]) for r in rows):
        cell = [r for r in rows if r["estimator"] == name and r["data set"] == data]

        def column(label, cell=cell):
            return np.array([r[label] for r in cell])

        table.append(
            {
                "estimator": name,
                "data set": data,
                "tree, constrained": f"{column('tree, constrained').mean():.4f}",
                "tree": f"{column('tree').mean():.4f}",
                "sum, constrained": f"{column('sum, constrained').mean():.4f}",
                "sum": f"{column('sum').mean():.4f}",
                "cost, single trees": _paired_cost(column("tree"), column("tree, constrained")),
                "cost, like for like (sum against sum)": _paired_cost(
                    column("sum"), column("sum, constrained")
                ),
                "cost, sum against the single tree": _paired_cost(
                    column("tree"), column("sum, constrained")
                ),
                "sum, constrained fit s": f"{np.mean(column('sum, constrained fit s')):.2f}",
                "max violation": f"{max(r['violation'] for r in cell):.2g}",
            }
        )
    return table


def add_arguments(parser):
    parser.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=ESTIMATORS)
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    # 10: a single tree's paired cost has an sd of 1-3 points, against a 1-point bar
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="backfitting rounds (default 2)")
    parser.add_argument("--free-depth", type=int, default=None, help="T_free's max_depth")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")


def main(args):
    with threadpool_limits(1):
        rows = run(
            args.estimators, args.datasets, range(args.seeds), args.rounds, args.free_depth,
            args.max_train,
        )  # fmt: skip
    depth = "the estimator's default" if args.free_depth is None else args.free_depth
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"Constraints (feature index: sign): {describe_constraints()}. "
        f"{args.seeds} seeds, {args.rounds} backfitting rounds, T_free's max_depth: {depth}. "
        "Test R^2 means over the seeds. Costs in points of R^2, mean ± standard error of the "
        "paired per-seed differences (first model minus second, same split and seed): "
        "'single trees' is results/monotonic.md's cost (the unconstrained tree minus the "
        "constrained one); 'like for like' the unconstrained sum minus the constrained sum; "
        "'sum against the single tree' the unconstrained tree minus the constrained sum. "
        "Max violation: the constrained sum along random lines (<= 0: monotone). "
        "Method: the module docstring of benchmarks/monotone_additive.py."
    )
    stem = "monotone_additive" + ("" if args.free_depth is None else f"_free_depth_{depth}")
    write_results(
        f"{stem}.md",
        title="Constrained single trees plus a free-feature tree: the constraint cost",
        tables=[("Test R^2 and costs", summarise(rows))],
        notes=notes,
    )
    write_results(f"{stem}.json", data={"rows": rows})
