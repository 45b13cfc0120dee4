"""benchmarks/defaults_validation.py's revision rule and its stored baseline."""

import json

from benchmarks import defaults_validation as dv
from benchmarks.bench_suite import summarize

FAMILY = "co2-classifier-present-classes"
BEFORE, AFTER = list(dv.FAMILIES[FAMILY].candidates)


def _cell(data, label, run, score, family):
    return {
        "data": data,
        "estimator": label,
        "run": run,
        "score": score,
        "fit s": 1.0,
        "predict s": 0.1,
        "size MB": 1.0,
        "family": family,
        "revision": "before",
    }


def test_the_baseline_cells_stand_for_the_first_label_once(tmp_path):
    source, label = dv.FAMILIES[FAMILY].baseline
    cells = [_cell("a", label, r, 0.5, source) for r in range(3)]
    cells.append(_cell("a", "other", 0, 0.1, source))
    path = tmp_path / "cells.json"
    cells = dv.copy_baseline(cells, path, FAMILY)
    copies = [c for c in cells if c["family"] == FAMILY]
    assert [(c["estimator"], c["run"], c["revision"]) for c in copies] == [
        (BEFORE, r, "before") for r in range(3)
    ]
    assert json.loads(path.read_text()) == cells
    assert dv.copy_baseline(cells, path, FAMILY) == cells  # not copied twice


def test_the_revision_rule_keeps_a_change_that_loses_no_more_than_it_wins():
    def decision(after_scores):
        cells = []
        for data, (before, after) in after_scores.items():
            for r in range(5):
                noise = 0.001 * r
                cells.append(_cell(data, BEFORE, r, before + noise, FAMILY))
                cells.append(_cell(data, AFTER, r, after + noise, FAMILY))
        summary = summarize(cells)
        rows, chosen = dv.decide(summary, list(after_scores), [BEFORE, AFTER], "revision")
        return rows[0]["counts"], chosen

    # one set won, one lost, one tied: kept (the cost rule's accuracy half, no time bound)
    assert decision({"a": (0.5, 0.6), "b": (0.5, 0.4), "c": (0.5, 0.5)}) == ([1, 1, 1], AFTER)
    assert decision({"a": (0.5, 0.5), "b": (0.5, 0.4)}) == ([0, 1, 1], BEFORE)


def test_the_lodo_report_leaves_out_a_revision_family(monkeypatch):
    # a revision family's two labels never ran together: there is no choice to score
    written = {}
    monkeypatch.setattr(
        dv, "write_results", lambda name, title, tables, notes, **_: written.update(tables)
    )
    accuracy = "co2-classifier-auto"
    labels = list(dv.FAMILIES[accuracy].candidates)
    cells, test_cells = [], []
    for data in ("a", "b"):
        for r in range(5):
            cells.append(_cell(data, BEFORE, r, 0.5, FAMILY))
            cells.append(_cell(data, AFTER, r, 0.5, FAMILY))
            for label in labels:
                for into in (cells, test_cells):
                    into.append(
                        {
                            **_cell(data, label, r, 0.5 + 0.001 * r, accuracy),
                            "load": [0.1],
                            "CPU": "x",
                        }
                    )
    dv.lodo_report(cells, test_cells)
    assert any(accuracy in title for title in written)
    assert not any(FAMILY in title for title in written)
