"""benchmarks/bench_categorical.py's acceptance figures, from rows whose answer is known."""

import pytest

from benchmarks.bench_categorical import summarise


def _rows(est, name, scores, fit_s):
    """One seed's rows: ``scores`` and ``fit_s`` map each method to its figure."""
    return [
        dict(
            estimator=est,
            dataset=name,
            seed=0,
            method=method,
            score=scores[method],
            fit_s=fit_s.get(method, 1.0),
            predict_s=0.01,
            size_kb=10.0,
            error=None,
        )
        for method in scores
    ]


def test_gaps_fit_ratios_and_the_noise_column():
    rows = _rows(
        "CO2ForestClassifier",
        "a",
        {
            "native": 80.0,
            "one-hot": 81.0,
            "ordinal": 79.0,
            "native + noise": 79.5,
            "native + constant": 80.0,
        },
        {"native": 3.0, "one-hot": 2.0},
    )
    rows += _rows(
        "SoftTreeClassifier",
        "a",
        {
            "native": 70.0,
            "one-hot": 69.0,
            "ordinal": 69.8,
            "native + noise": 70.0,
            "native + constant": 70.0,
        },
        {},
    )
    rows.append(dict(rows[0], estimator="HistGradientBoosting", method="native", score=82.0))
    table, figures = summarise(rows)
    assert [r["native - better"] for r in table] == pytest.approx([-1.0, 0.2])
    assert figures["pairs"] == 2 and figures["within_margin"] == 1
    assert figures["worst"] == pytest.approx(-1.0)
    assert figures["fit_ratio_max"] == pytest.approx(1.5)  # CO2 only: soft trees are not checked
    assert figures["noise"] == [(-0.5, 0.0), (0.0, 0.0)]
    assert table[0]["HGB"] == 82.0
    assert table[0]["noise - constant"] == "-0.50 ± 0.00"


def test_leave_one_set_out_chooses_on_the_other_sets():
    from benchmarks.categorical_validation import leave_one_out

    rows = []
    for name, val, test in (
        ("a", (80, 70), (81, 79)),
        ("b", (60, 65), (60, 66)),
        ("c", (50, 49), (50, 52)),
    ):
        for way, v, t in zip(("adjusted", "raw"), val, test, strict=True):
            rows.append(dict(dataset=name, seed=0, estimator="E", way=way, validation=v, test=t))
    table = {r["held-out set"]: r for r in leave_one_out(rows)}
    # without a: raw wins on b (+5) and loses on c (-1); without b: adjusted (+10, +1)
    assert table["a"]["chosen on the other sets"] == "raw"
    assert table["a"]["test of the choice - default"] == -2
    assert table["b"]["chosen on the other sets"] == "adjusted"
    assert table["c"]["chosen on the other sets"] == "adjusted"


def test_one_set_alone_has_nothing_to_choose_on():
    from benchmarks.categorical_validation import leave_one_out

    rows = [
        dict(dataset="a", seed=0, estimator="E", way=w, validation=70.0, test=71.0)
        for w in ("adjusted", "raw")
    ]
    (row,) = leave_one_out(rows)
    assert row["chosen on the other sets"] == "(no other set)"
    assert "test of the choice - default" not in row
