"""Monotonic constraints: the accuracy they cost, against scikit-learn's constrained models.

For each data set (constraints stated below), seed and estimator, the same
split is fitted with ``monotonic_cst`` and without, and scored by test R^2;
scikit-learn's ``RandomForestRegressor`` (100 trees) and
``HistGradientBoostingRegressor`` (defaults) are run the same way on the
same splits. Every constrained model's predictions are also checked along
random lines (500 per constrained feature, NaN-free) for a move against the
constraints (``max violation``: at most 0 up to rounding when it holds).

Data sets and constraints (the target is standardised by the training part,
``bench_regression.split``):

- ``synthetic``: ``y = 2 x0 - sin(2 x0) - x2 + x1 x3 + N(0, 0.5^2)``, ``x ~
  N(0, I_4)``, 3000 rows (2000 train, 1000 test, a new draw per seed);
  constraints ``[+1, 0, -1, 0]``: the truth is monotone in ``x0``
  (``d/dx0 = 2 - 2 cos(2 x0) >= 0``, flat at ``x0 = k pi``) and in ``x2``,
  and varies freely in ``x1``, ``x3``. (``2 x0 - sin(3 x0)`` is not monotone:
  its slope ``2 - 3 cos(3 x0)`` reaches -1.)
- ``california_housing``: ``median_income`` +1 (the textbook monotone
  relation, scikit-learn's own example of constraints); at most
  ``--max-train`` training rows (default 5000, a seeded subsample).
- ``concrete``: ``cement`` +1, ``water`` -1 (Abrams' law: strength falls with
  the water-cement ratio), ``age`` +1 (strength rises with curing time).
- ``abalone``: ``shell_weight`` +1 (rings, the age, rise with the shell's
  weight, which only grows); its fixed UCI split, so seeds only reseed the
  models.

Estimators are given to :func:`run_benchmark` as ``(name, factory)`` pairs,
``factory(monotonic_cst, seed)`` returning an unfitted estimator (``None``:
unconstrained), so other methods' estimators can be added to the same table.

    python -m benchmarks monotonic                       # every method; 5 seeds
    python -m benchmarks monotonic --datasets synthetic --seeds 3
"""

import time

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.metrics import r2_score
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.bench_regression import split
from benchmarks.common import cpu_model, load_average, write_results

#: data set -> {feature index: constraint} (see the module docstring).
CONSTRAINTS = {
    "synthetic": {0: 1, 2: -1},
    "california_housing": {7: 1},
    "concrete": {0: 1, 3: -1, 7: 1},
    "abalone": {9: 1},
}
DATASETS = list(CONSTRAINTS)


def describe_constraints():
    """The constraints as the reports state them: ``name: {feature index: sign}; ...``."""
    return "; ".join(f"{name}: {signs}" for name, signs in CONSTRAINTS.items())


#: Lines per constrained feature of the violation check.
CHECK_LINES = 500


def default_estimators(n_jobs=1):
    """This package's estimators as ``(name, factory)`` pairs.

    Their defaults, E2EDT's hard depth-10 tree (its defaults until soft routing at
    depth 6 was chosen), and the soft tree with joint finetuning.
    """

    def factory(cls, **params):
        def make(monotonic_cst, seed):
            return cls(monotonic_cst=monotonic_cst, random_state=seed, n_jobs=n_jobs, **params)

        return make

    return [
        ("CO2ForestRegressor(100)", factory(obliquetrees.CO2ForestRegressor)),
        ("HingeForestRegressor", factory(obliquetrees.HingeForestRegressor)),
        ("E2EDTRegressor", factory(obliquetrees.E2EDTRegressor)),
        # the defaults before session 57 (soft routing at depth 6 now)
        (
            "E2EDTRegressor(routing=hard, max_depth=10)",
            factory(obliquetrees.E2EDTRegressor, routing="hard", max_depth=10),
        ),
        ("SoftTreeRegressor", factory(obliquetrees.SoftTreeRegressor)),
        # joint finetuning moves every leaf at once (projected): the growth freezes them
        (
            "SoftTreeRegressor(finetune_epochs=10)",
            factory(obliquetrees.SoftTreeRegressor, finetune_epochs=10),
        ),
    ]


def reference_estimators(n_jobs=1):
    """scikit-learn's constrained tree ensembles, as ``(name, factory)`` pairs."""
    return [
        (
            "RandomForestRegressor(100)",
            lambda cst, seed: RandomForestRegressor(
                100, monotonic_cst=cst, random_state=seed, n_jobs=n_jobs
            ),
        ),
        (
            "HistGradientBoostingRegressor",
            lambda cst, seed: HistGradientBoostingRegressor(monotonic_cst=cst, random_state=seed),
        ),
    ]


def synthetic(seed, n_train=2000, n_test=1000):
    """The synthetic set's split: a fresh draw per seed (module docstring)."""
    rng = np.random.default_rng([seed, 41])
    X = rng.normal(size=(n_train + n_test, 4))
    y = 2 * X[:, 0] - np.sin(2 * X[:, 0]) - X[:, 2] + X[:, 1] * X[:, 3]
    y = y + 0.5 * rng.normal(size=len(y))
    mean, sd = y[:n_train].mean(), y[:n_train].std()
    y = (y - mean) / sd
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def load_split(name, seed, max_train):
    """``X_train, y_train, X_test, y_test`` and the constraint vector of a data set."""
    data = synthetic(seed) if name == "synthetic" else split(name, seed, max_train)
    cst = np.zeros(data[0].shape[1], dtype=int)
    for j, c in CONSTRAINTS[name].items():
        cst[j] = c
    return data, cst


def max_violation(model, X, cst, seed):
    """The largest move against ``cst`` of ``model.predict`` along random lines (<= 0: monotone)."""
    rng = np.random.default_rng(seed)
    worst = -np.inf
    for j in np.flatnonzero(cst):
        steps = np.linspace(X[:, j].min() - 1.0, X[:, j].max() + 1.0, 25)
        lines = np.repeat(X[rng.integers(len(X), size=CHECK_LINES)], len(steps), axis=0)
        lines[:, j] = np.tile(steps, CHECK_LINES)
        values = model.predict(lines).reshape(CHECK_LINES, len(steps))
        worst = max(worst, float((-cst[j] * np.diff(values, axis=1)).max()))
    return worst


def run_benchmark(estimators, datasets=DATASETS, seeds=(0, 1, 2), max_train=5000, verbose=True):
    """Fit every estimator with and without the constraints on every data set and seed.

    Parameters
    ----------
    estimators : list of (str, callable)
        ``factory(monotonic_cst, seed)`` gives an unfitted regressor
        supporting ``monotonic_cst`` (None: unconstrained).
    datasets : list of str
        Keys of :data:`CONSTRAINTS`.
    seeds : sequence of int
    max_train : int or None
        Training rows kept at most (a seeded subsample; None: all).

    Returns
    -------
    list of dict
        One per (data set, seed, estimator): R^2 with and without the
        constraints, the constrained fit's time and the largest violation.
    """
    rows = []
    for name in datasets:
        for seed in seeds:
            (X, y, Xt, yt), cst = load_split(name, seed, max_train)
            for label, make in estimators:
                row = dict(dataset=name, seed=seed, estimator=label)
                for key, constraint in (("r2", cst), ("r2_free", None)):
                    model = make(constraint, seed)
                    start = time.perf_counter()
                    model.fit(X, y)
                    if constraint is not None:
                        row["fit_s"] = time.perf_counter() - start
                        row["violation"] = max_violation(model, Xt, cst, seed)
                    row[key] = float(r2_score(yt, model.predict(Xt)))
                rows.append(row)
                if verbose:
                    print(
                        f"{name} seed {seed} {label}: R2 {row['r2']:.4f} "
                        f"(free {row['r2_free']:.4f}), violation {row['violation']:.2g}",
                        flush=True,
                    )
    return rows


def summarise(rows):
    """Per data set and estimator: mean R^2 constrained, free, their difference; ranks."""
    table = []
    keys = list(dict.fromkeys((r["dataset"], r["estimator"]) for r in rows))
    for name, label in keys:
        cell = [r for r in rows if r["dataset"] == name and r["estimator"] == label]
        r2 = np.array([r["r2"] for r in cell])
        free = np.array([r["r2_free"] for r in cell])
        table.append(
            {
                "data set": name,
                "estimator": label,
                "R2 constrained": f"{r2.mean():.4f} ± {r2.std():.4f}",
                "R2 unconstrained": f"{free.mean():.4f} ± {free.std():.4f}",
                "cost (points)": _paired_cost(free, r2),
                "fit s": f"{np.mean([r['fit_s'] for r in cell]):.2f}",
                "max violation": f"{max(r['violation'] for r in cell):.2g}",
            }
        )
    return table, _ranks(rows)


def _paired_cost(free, constrained):
    """Mean of the per-seed cost (free minus constrained R^2) in points, ``± its standard
    error`` (sd of the per-seed differences over the square root of the seed count)."""
    cost = 100 * (free - constrained)
    if cost.shape[0] < 2:
        return f"{cost.mean():+.2f}"
    return f"{cost.mean():+.2f} ± {cost.std(ddof=1) / np.sqrt(cost.shape[0]):.2f}"


def _ranks(rows):
    """Average rank (1 = best) of each estimator's constrained R^2 over the data sets."""
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    labels = list(dict.fromkeys(r["estimator"] for r in rows))
    ranks = {label: [] for label in labels}
    for name in names:
        cells = [r for r in rows if r["dataset"] == name]
        means = {
            label: np.mean([r["r2"] for r in cells if r["estimator"] == label]) for label in labels
        }
        order = sorted(labels, key=lambda label: -means[label])
        for position, label in enumerate(order, start=1):
            ranks[label].append(position)
    return [{"estimator": k, "average rank": f"{np.mean(ranks[k]):.2f}"} for k in labels]


def write_report(rows, path="monotonic.md"):
    """``monotonic.md`` and ``monotonic.json`` (every row) in ``benchmarks/results``."""
    table, ranks = summarise(rows)
    constraints = describe_constraints()
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"Constraints (feature index: sign): {constraints}. "
        "Test R^2 (target standardised by the training part), mean ± sd over the seeds; "
        "cost = unconstrained minus constrained, in points of R^2, mean ± standard error of "
        "the paired per-seed differences (the same split and seed; their sd / sqrt(seeds)); "
        "fit s = the constrained fit. "
        "Method and data sets: the docstring of benchmarks/bench_monotonic.py."
    )
    write_results(
        path,
        "Monotonic constraints: accuracy cost",
        tables=[("R^2 per data set", table), ("Average rank of the constrained models", ranks)],
        notes=notes,
    )
    write_results(str(path).replace(".md", ".json"), data={"rows": rows})


def add_arguments(parser):
    """The arguments of ``python -m benchmarks monotonic``."""
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    # 5: the paired cost's sd is 2-3 points for a single tree, against a 1-point bar
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")
    parser.add_argument("--n-jobs", type=int, default=1, help="n_jobs and BLAS threads")


def main(args):
    estimators = default_estimators(args.n_jobs) + reference_estimators(args.n_jobs)
    with threadpool_limits(args.n_jobs):
        rows = run_benchmark(estimators, args.datasets, range(args.seeds), args.max_train)
    write_report(rows)
