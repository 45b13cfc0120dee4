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

With ``--task classification`` (``results/monotonic_classification.md``) the
same protocol runs binary classifiers, scored by test accuracy, their
probability of ``classes_[1]`` checked along the lines, against scikit-learn's
constrained ``RandomForestClassifier`` (100 trees) and
``HistGradientBoostingClassifier``. Data sets and constraints (stated from
what each feature measures, before any run):

- ``synthetic``: the regression set's rows, labelled ``1[y > 0]`` (``y``
  with its noise): ``P(1 | x)`` is monotone in ``x0`` and ``x2`` as ``y`` is;
  constraints ``[+1, 0, -1, 0]``.
- ``breast_cancer_wisconsin``: the nine cytology scores (1-10, each higher
  for a more abnormal cell sample) all +1 for ``classes_[1]`` (4,
  malignant): the classic monotone classification benchmark.
- ``pima``: ``glucose`` +1 and ``BMI`` +1 for diabetes (the file's zeros,
  which stand for missing values, left as they are).
- ``wdbc``: ``worst radius`` -1 and ``worst concave points`` -1 for
  ``classes_[1]`` (benign).

Estimators are given to :func:`run_benchmark` as ``(name, factory)`` pairs,
``factory(monotonic_cst, seed)`` returning an unfitted estimator (``None``:
unconstrained), so other methods' estimators can be added to the same table.

    python -m benchmarks monotonic                       # every method; 5 seeds
    python -m benchmarks monotonic --datasets synthetic --seeds 3
    python -m benchmarks monotonic --task classification  # monotonic_classification.md
    python -m benchmarks monotonic --datasets concrete --seeds 20 \\
        --output monotonic_concrete_20_seeds.md  # concrete's cells with 20 seeds
"""

import time

import numpy as np
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.metrics import accuracy_score, r2_score
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.bench_regression import TEST_SIZE, split
from benchmarks.common import cpu_model, load_average, write_results
from benchmarks.datasets import train_test

#: data set -> {feature index: constraint} (see the module docstring).
CONSTRAINTS = {
    "synthetic": {0: 1, 2: -1},
    "california_housing": {7: 1},
    "concrete": {0: 1, 3: -1, 7: 1},
    "abalone": {9: 1},
}
DATASETS = list(CONSTRAINTS)
#: ``--task classification``: data set -> {feature index: constraint on P(classes_[1])}.
CLASSIFICATION_CONSTRAINTS = {
    "synthetic": {0: 1, 2: -1},
    "breast_cancer_wisconsin": {j: 1 for j in range(9)},
    "pima": {1: 1, 5: 1},
    "wdbc": {20: -1, 27: -1},
}
CLASSIFICATION_DATASETS = list(CLASSIFICATION_CONSTRAINTS)


def describe_constraints(constraints=CONSTRAINTS):
    """The constraints as the reports state them: ``name: {feature index: sign}; ...``."""
    return "; ".join(f"{name}: {signs}" for name, signs in constraints.items())


#: Lines per constrained feature of the violation check.
CHECK_LINES = 500


def _factory(cls, n_jobs, **params):
    """``make(monotonic_cst, seed)`` of ``cls`` with ``params``."""

    def make(monotonic_cst, seed):
        return cls(monotonic_cst=monotonic_cst, random_state=seed, n_jobs=n_jobs, **params)

    return make


def default_estimators(n_jobs=1):
    """This package's regressors as ``(name, factory)`` pairs.

    Their defaults, E2EDT's hard depth-10 tree (its defaults until soft routing at
    depth 6 was chosen), and the soft tree with joint finetuning.
    """
    return [
        ("CO2ForestRegressor(100)", _factory(obliquetrees.CO2ForestRegressor, n_jobs)),
        ("HingeForestRegressor", _factory(obliquetrees.HingeForestRegressor, n_jobs)),
        ("E2EDTRegressor", _factory(obliquetrees.E2EDTRegressor, n_jobs)),
        # the defaults before session 57 (soft routing at depth 6 now)
        (
            "E2EDTRegressor(routing=hard, max_depth=10)",
            _factory(obliquetrees.E2EDTRegressor, n_jobs, routing="hard", max_depth=10),
        ),
        ("SoftTreeRegressor", _factory(obliquetrees.SoftTreeRegressor, n_jobs)),
        # joint finetuning moves every leaf at once (projected): the growth freezes them
        (
            "SoftTreeRegressor(finetune_epochs=10)",
            _factory(obliquetrees.SoftTreeRegressor, n_jobs, finetune_epochs=10),
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


def classification_estimators(n_jobs=1):
    """This package's classifiers at their defaults, then scikit-learn's, as ``(name, factory)``."""
    return [
        ("CO2ForestClassifier(100)", _factory(obliquetrees.CO2ForestClassifier, n_jobs)),
        ("HingeForestClassifier", _factory(obliquetrees.HingeForestClassifier, n_jobs)),
        ("E2EDTClassifier", _factory(obliquetrees.E2EDTClassifier, n_jobs)),
        ("SoftTreeClassifier", _factory(obliquetrees.SoftTreeClassifier, n_jobs)),
        (
            "RandomForestClassifier(100)",
            lambda cst, seed: RandomForestClassifier(
                100, monotonic_cst=cst, random_state=seed, n_jobs=n_jobs
            ),
        ),
        (
            "HistGradientBoostingClassifier",
            lambda cst, seed: HistGradientBoostingClassifier(monotonic_cst=cst, random_state=seed),
        ),
    ]


def _synthetic_rows(seed, n):
    """The synthetic set's ``X`` and noisy, unstandardised target (module docstring)."""
    rng = np.random.default_rng([seed, 41])
    X = rng.normal(size=(n, 4))
    y = 2 * X[:, 0] - np.sin(2 * X[:, 0]) - X[:, 2] + X[:, 1] * X[:, 3]
    return X, y + 0.5 * rng.normal(size=n)


def synthetic(seed, n_train=2000, n_test=1000):
    """The synthetic set's split: a fresh draw per seed (module docstring)."""
    X, y = _synthetic_rows(seed, n_train + n_test)
    mean, sd = y[:n_train].mean(), y[:n_train].std()
    y = (y - mean) / sd
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def synthetic_classes(seed, n_train=2000, n_test=1000):
    """``--task classification``'s synthetic split: the same rows, labelled ``1[y > 0]``."""
    X, y = _synthetic_rows(seed, n_train + n_test)
    y = (y > 0).astype(np.int64)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def classification_split(name, seed, max_train):
    """``X_train, y_train, X_test, y_test`` of a shared classification set (the regression
    sets' seeded split and subsample; labels as stored)."""
    X_train, y_train, X_test, y_test = train_test(name, test_size=TEST_SIZE, seed=seed)
    if max_train and len(X_train) > max_train:
        keep = np.sort(np.random.default_rng([seed, 1]).choice(len(X_train), max_train, False))
        X_train, y_train = X_train[keep], y_train[keep]
    return np.asarray(X_train, dtype=np.float64), y_train, np.asarray(X_test, np.float64), y_test


def task_constraints(task):
    """The constraints of ``task``'s data sets (:data:`CONSTRAINTS` or its classification twin)."""
    return CLASSIFICATION_CONSTRAINTS if task == "classification" else CONSTRAINTS


def load_split(name, seed, max_train, task="regression"):
    """``X_train, y_train, X_test, y_test`` and the constraint vector of a data set."""
    if name == "synthetic":
        data = (synthetic_classes if task == "classification" else synthetic)(seed)
    else:
        data = (classification_split if task == "classification" else split)(name, seed, max_train)
    cst = np.zeros(data[0].shape[1], dtype=int)
    for j, c in task_constraints(task)[name].items():
        cst[j] = c
    return data, cst


def _output(model):
    """The output the constraints bind: P(classes_[1]) of a classifier, else ``predict``."""
    if hasattr(model, "predict_proba"):
        return lambda X: model.predict_proba(X)[:, 1]
    return model.predict


def max_violation(model, X, cst, seed):
    """The largest move against ``cst`` of the model's constrained output (:func:`_output`)
    along random lines (<= 0: monotone)."""
    rng = np.random.default_rng(seed)
    output = _output(model)
    worst = -np.inf
    for j in np.flatnonzero(cst):
        steps = np.linspace(X[:, j].min() - 1.0, X[:, j].max() + 1.0, 25)
        lines = np.repeat(X[rng.integers(len(X), size=CHECK_LINES)], len(steps), axis=0)
        lines[:, j] = np.tile(steps, CHECK_LINES)
        values = output(lines).reshape(CHECK_LINES, len(steps))
        worst = max(worst, float((-cst[j] * np.diff(values, axis=1)).max()))
    return worst


#: The score of each task: (row key, how it is written, score function).
METRICS = {
    "regression": ("r2", "R2", r2_score),
    "classification": ("accuracy", "accuracy", accuracy_score),
}


def warm_up(estimators, name, task="regression", max_train=5000, n_rows=200):
    """Fit each estimator once with the constraints and once without on ``n_rows`` rows of ``name``.

    On a fresh machine the first fits compile the numba kernels (or load them
    from the cache): without this, the first data set's fit times include
    that (a rerun at a9e02bd on a fresh machine was discarded for it).
    Nothing here is timed or recorded.
    """
    (X, y, _, _), cst = load_split(name, 0, max_train, task)
    rows = np.random.default_rng(0).choice(len(X), size=min(n_rows, len(X)), replace=False)
    for _, make in estimators:
        for constraint in (cst, None):
            make(constraint, 0).fit(X[rows], y[rows])


def run_benchmark(
    estimators, datasets=DATASETS, seeds=(0, 1, 2), max_train=5000, verbose=True,
    task="regression",
):  # fmt: skip
    """Fit every estimator with and without the constraints on every data set and seed.

    Parameters
    ----------
    estimators : list of (str, callable)
        ``factory(monotonic_cst, seed)`` gives an unfitted estimator of the
        task supporting ``monotonic_cst`` (None: unconstrained).
    datasets : list of str
        Keys of :data:`CONSTRAINTS` (:data:`CLASSIFICATION_CONSTRAINTS`).
    seeds : sequence of int
    max_train : int or None
        Training rows kept at most (a seeded subsample; None: all).
    task : {"regression", "classification"}

    Returns
    -------
    list of dict
        One per (data set, seed, estimator): the test score (R^2 or
        accuracy, :data:`METRICS`) with and without the constraints, the
        constrained fit's time and the largest violation.
    """
    key, shown, score = METRICS[task]
    rows = []
    for name in datasets:
        for seed in seeds:
            (X, y, Xt, yt), cst = load_split(name, seed, max_train, task)
            for label, make in estimators:
                row = dict(dataset=name, seed=seed, estimator=label)
                for column, constraint in ((key, cst), (f"{key}_free", None)):
                    model = make(constraint, seed)
                    start = time.perf_counter()
                    model.fit(X, y)
                    if constraint is not None:
                        row["fit_s"] = time.perf_counter() - start
                        row["violation"] = max_violation(model, Xt, cst, seed)
                    row[column] = float(score(yt, model.predict(Xt)))
                rows.append(row)
                if verbose:
                    print(
                        f"{name} seed {seed} {label}: {shown} {row[key]:.4f} "
                        f"(free {row[f'{key}_free']:.4f}), violation {row['violation']:.2g}",
                        flush=True,
                    )
    return rows


def summarise(rows, task="regression"):
    """Per data set and estimator: mean score constrained, free, their difference; ranks."""
    key, shown, _ = METRICS[task]
    table = []
    keys = list(dict.fromkeys((r["dataset"], r["estimator"]) for r in rows))
    for name, label in keys:
        cell = [r for r in rows if r["dataset"] == name and r["estimator"] == label]
        constrained = np.array([r[key] for r in cell])
        free = np.array([r[f"{key}_free"] for r in cell])
        table.append(
            {
                "data set": name,
                "estimator": label,
                f"{shown} constrained": f"{constrained.mean():.4f} ± {constrained.std():.4f}",
                f"{shown} unconstrained": f"{free.mean():.4f} ± {free.std():.4f}",
                "cost (points)": _paired_cost(free, constrained),
                "fit s": f"{np.mean([r['fit_s'] for r in cell]):.2f}",
                "max violation": f"{max(r['violation'] for r in cell):.2g}",
            }
        )
    return table, _ranks(rows, key)


def _paired_cost(free, constrained):
    """Mean of the per-seed cost (free minus constrained score) in points, ``± its standard
    error`` (sd of the per-seed differences over the square root of the seed count)."""
    cost = 100 * (free - constrained)
    if cost.shape[0] < 2:
        return f"{cost.mean():+.2f}"
    return f"{cost.mean():+.2f} ± {cost.std(ddof=1) / np.sqrt(cost.shape[0]):.2f}"


def _ranks(rows, key="r2"):
    """Average rank (1 = best) of each estimator's constrained score ``key`` over the data sets."""
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    labels = list(dict.fromkeys(r["estimator"] for r in rows))
    ranks = {label: [] for label in labels}
    for name in names:
        cells = [r for r in rows if r["dataset"] == name]
        means = {
            label: np.mean([r[key] for r in cells if r["estimator"] == label]) for label in labels
        }
        order = sorted(labels, key=lambda label: -means[label])
        for position, label in enumerate(order, start=1):
            ranks[label].append(position)
    return [{"estimator": k, "average rank": f"{np.mean(ranks[k]):.2f}"} for k in labels]


def write_report(rows, path="monotonic.md", task="regression"):
    """``path`` and its ``.json`` (every row) in ``benchmarks/results``."""
    table, ranks = summarise(rows, task)
    constraints = describe_constraints(task_constraints(task))
    if task == "classification":
        score = (
            "Test accuracy (the constraints bind the probability of classes_[1]), mean ± sd "
            "over the seeds; cost = unconstrained minus constrained, in points of accuracy, "
        )
    else:
        score = (
            "Test R^2 (target standardised by the training part), mean ± sd over the seeds; "
            "cost = unconstrained minus constrained, in points of R^2, "
        )
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"Constraints (feature index: sign): {constraints}. "
        f"{score}mean ± standard error of "
        "the paired per-seed differences (the same split and seed; their sd / sqrt(seeds)); "
        "fit s = the constrained fit, timed after a warm-up fit of every estimator "
        "(kernels compiled or loaded outside the timings). "
        "Method and data sets: the docstring of benchmarks/bench_monotonic.py."
    )
    shown = METRICS[task][1]
    write_results(
        path,
        "Monotonic constraints: accuracy cost"
        + (" (binary classification)" if task == "classification" else ""),
        tables=[
            (f"{'R^2' if shown == 'R2' else shown} per data set", table),
            ("Average rank of the constrained models", ranks),
        ],
        notes=notes,
    )
    write_results(str(path).replace(".md", ".json"), data={"rows": rows})


def add_arguments(parser):
    """The arguments of ``python -m benchmarks monotonic``."""
    parser.add_argument(
        "--task", choices=sorted(METRICS), default="regression",
        help="regression (monotonic.md) or binary classification (monotonic_classification.md)",
    )  # fmt: skip
    parser.add_argument(
        "--datasets", nargs="+", choices=sorted(set(DATASETS + CLASSIFICATION_DATASETS)),
        help="default: every data set of the task",
    )  # fmt: skip
    # 5: the paired cost's sd is 2-3 points for a single tree, against a 1-point bar
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--max-train", type=int, default=5000, help="training rows at most")
    parser.add_argument("--n-jobs", type=int, default=1, help="n_jobs and BLAS threads")
    parser.add_argument(
        "--output",
        help="the markdown file in benchmarks/results (its .json beside it); default: the "
        "task's (a run of some data sets or more seeds can be kept beside it)",
    )


def main(args):
    if args.task == "classification":
        estimators = classification_estimators(args.n_jobs)
        datasets, path = args.datasets or CLASSIFICATION_DATASETS, "monotonic_classification.md"
    else:
        estimators = default_estimators(args.n_jobs) + reference_estimators(args.n_jobs)
        datasets, path = args.datasets or DATASETS, "monotonic.md"
    unknown = set(datasets) - set(task_constraints(args.task))
    if unknown:
        raise SystemExit(f"not a {args.task} data set of this benchmark: {sorted(unknown)}")
    with threadpool_limits(args.n_jobs):
        warm_up(estimators, datasets[0], args.task, args.max_train)
        rows = run_benchmark(
            estimators, datasets, range(args.seeds), args.max_train, task=args.task
        )
    write_report(rows, args.output or path, args.task)
