"""benchmarks/bench_monotonic.py: the cost column and its standard error, both tasks."""

import numpy as np

from benchmarks.bench_monotonic import summarise, synthetic, synthetic_classes


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
