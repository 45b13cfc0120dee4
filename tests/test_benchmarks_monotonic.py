"""benchmarks/bench_monotonic.py: the cost column, its standard error (both tasks), the warm-up."""

import numpy as np

from benchmarks.bench_monotonic import summarise, synthetic, synthetic_classes, warm_up


def _rows(free, constrained):
    return [
        {
            "dataset": "d",
            "estimator": "e",
            "seed": seed,
            "r2": c,
            "r2_free": f,
            "fit_s": 0.1,
            "violation": 0.0,
        }
        for seed, (f, c) in enumerate(zip(free, constrained, strict=True))
    ]


def test_the_cost_is_the_paired_mean_with_its_standard_error():
    free = np.array([0.80, 0.85, 0.90, 0.70])
    constrained = np.array([0.79, 0.80, 0.88, 0.70])
    (row,), _ = summarise(_rows(free, constrained))
    # per-seed costs 1, 5, 2, 0 points: mean 2, sd (ddof=1) sqrt(14/3), se sd/2
    assert row["cost (points)"] == f"+2.00 ± {np.sqrt(14 / 3) / 2:.2f}"


def test_a_constant_shift_has_no_spread_whatever_the_seeds_spread():
    # the seeds' R^2 vary a lot, the paired difference not at all: se 0
    free = np.array([0.5, 0.9, 0.7])
    (row,), _ = summarise(_rows(free, free - 0.01))
    assert row["cost (points)"] == "+1.00 ± 0.00"


def test_one_seed_has_no_standard_error():
    (row,), _ = summarise(_rows([0.8], [0.9]))
    assert row["cost (points)"] == "-10.00"


def test_classification_rows_are_summarised_by_accuracy():
    rows = [
        {
            "dataset": "d",
            "estimator": "e",
            "seed": seed,
            "accuracy": c,
            "accuracy_free": f,
            "fit_s": 0.1,
            "violation": 0.0,
        }
        for seed, (f, c) in enumerate([(0.90, 0.88), (0.80, 0.80)])
    ]
    (row,), ranks = summarise(rows, task="classification")
    assert row["accuracy constrained"] == "0.8400 ± 0.0400"
    # per-seed costs 2 and 0 points: mean 1, sd (ddof=1) sqrt(2), se sqrt(2) / sqrt(2)
    assert row["cost (points)"] == "+1.00 ± 1.00"
    assert ranks == [{"estimator": "e", "average rank": "1.00"}]


def test_the_synthetic_classes_label_the_regression_sets_rows():
    X, y, X_test, y_test = synthetic(2)
    Xc, yc, Xc_test, yc_test = synthetic_classes(2)
    assert np.array_equal(X, Xc) and np.array_equal(X_test, Xc_test)
    # the regression target is the raw one standardised by the training part, and a
    # label is the raw one's sign: one threshold on the regression target splits both parts
    target, labels = np.concatenate([y, y_test]), np.concatenate([yc, yc_test])
    assert set(np.unique(labels)) == {0, 1}
    assert target[labels == 0].max() < target[labels == 1].min()


def test_the_warm_up_fits_every_estimator_with_and_without_the_constraints_on_few_rows():
    fits = []

    class Recorder:
        def __init__(self, label, monotonic_cst):
            self.label, self.monotonic_cst = label, monotonic_cst

        def fit(self, X, y):
            fits.append((self.label, self.monotonic_cst, X.shape, y.shape))
            return self

    estimators = [(label, lambda cst, seed, label=label: Recorder(label, cst)) for label in "ab"]
    for task in ("regression", "classification"):
        fits.clear()
        warm_up(estimators, "synthetic", task, n_rows=50)
        # synthetic: 4 features, constraints [+1, 0, -1, 0] in both tasks
        assert [(label, None if cst is None else list(cst)) for label, cst, _, _ in fits] == [
            ("a", [1, 0, -1, 0]),
            ("a", None),
            ("b", [1, 0, -1, 0]),
            ("b", None),
        ]
        assert all(X == (50, 4) and y == (50,) for _, _, X, y in fits)
