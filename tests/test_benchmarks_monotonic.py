"""benchmarks/bench_monotonic.py's summary: the cost column and its standard error."""

import numpy as np

from benchmarks.bench_monotonic import summarise


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
