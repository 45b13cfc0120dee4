"""The suite's warm-up (what it fits before the timed runs, and that it never loses a pair)
and its report's cost table.

Runs no benchmark and needs no data (synthetic arrays, scikit-learn's tree).
"""

import numpy as np
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from benchmarks.bench_suite import (
    N_RUNS,
    WARM_UP_ROWS,
    _cost_ratios,
    summarize,
    warm_up,
    warm_up_rows,
)


def test_the_warm_up_rows_hold_every_class_even_a_rare_one():
    y = np.zeros(5000, dtype=int)
    y[[17, 4321]] = 1  # a class of two rows that a random draw of 200 would likely miss
    y[1000:1100] = 2
    rows = warm_up_rows(y)
    assert len(rows) == WARM_UP_ROWS
    assert len(np.unique(rows)) == len(rows)
    assert np.all(np.diff(rows) > 0)
    assert set(y[rows]) == {0, 1, 2}


def test_the_warm_up_rows_of_a_continuous_target_are_random_not_its_smallest_values():
    y = np.random.default_rng(0).normal(size=5000)
    rows = warm_up_rows(y)
    assert len(rows) == WARM_UP_ROWS
    # the rows with the 200 smallest targets would all lie below the 5 % quantile
    assert np.mean(y[rows] > np.quantile(y, 0.05)) > 0.8


def test_the_warm_up_rows_of_a_small_set_are_all_its_rows():
    y = np.array([0, 1, 1, 0, 2])
    assert warm_up_rows(y).tolist() == [0, 1, 2, 3, 4]


def test_the_warm_up_fits_and_scores_and_reports_seconds_or_the_error():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 3, size=300)
    seconds = warm_up(DecisionTreeClassifier, {"max_depth": 2}, X, y, X[:60], y[:60])
    assert isinstance(seconds, float) and seconds >= 0.0

    # a warm-up that fails reports why instead of raising: the timed runs go on
    error = warm_up(DecisionTreeRegressor, {"max_depth": -1}, X, y.astype(float), X, y)
    assert isinstance(error, str) and "max_depth" in error


def _cells(run_keys):
    return [
        {"data": "d", "estimator": "e", "run": r, "score": 0.5 + r / 100, "fit s": 1.0 + r,
         "predict s": 0.1, "size MB": 1.0, **keys}
        for r, keys in enumerate(run_keys)
    ]  # fmt: skip


def test_the_summary_has_the_median_fit_cpu_only_when_every_run_timed_it():
    timed = summarize(_cells([{"fit CPU s": 2.0 * (r + 1)} for r in range(N_RUNS)]))
    assert timed[("d", "e")]["fit CPU s"] == 6.0  # median of 2, 4, 6, 8, 10
    old = summarize(_cells([{"fit CPU s": 1.0}] + [{}] * (N_RUNS - 1)))
    assert old[("d", "e")]["fit CPU s"] == ""
    assert old[("d", "e")]["fit s"] == 3.0


def test_the_cost_table_summarises_the_per_set_ratios_of_medians():
    def ok(fit_cpu, predict):
        return {"status": "ok", "fit CPU s": fit_cpu, "predict s": predict}

    summary = {
        ("a", "CO2(30)"): ok(2.0, 1.0),
        ("a", "ET(100)"): ok(1.0, 9.0),
        ("a", "RF(30)"): ok(9.0, 0.5),
        ("b", "CO2(30)"): ok(3.0, 3.0),
        ("b", "ET(100)"): ok(1.0, 9.0),
        ("b", "RF(30)"): ok(9.0, 1.0),
        ("c", "CO2(30)"): ok(8.0, 1.0),  # no ET(100) cell: left out of the fit column
        ("c", "RF(30)"): ok(9.0, 4.0),
        ("d", "CO2(30)"): {"status": "timeout"},
        ("d", "ET(100)"): ok(1.0, 9.0),
        ("d", "RF(30)"): ok(9.0, 1.0),
    }
    (row,) = _cost_ratios(summary, ["a", "b", "c", "d"], ["CO2(30)", "RF(30)"])
    assert row["estimator"] == "CO2(30)"
    # fit CPU: 2 and 3 -> median 2.5; predict: 2, 3 and 0.25 -> median 2
    assert row["fit CPU / ET(100)"] == "2.50 (2.00-3.00; 2 sets)"
    assert row["predict / RF(30)"] == "2.00 (0.25-3.00; 3 sets)"
