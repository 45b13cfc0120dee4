"""README.md's tables of measured figures agree with the result files they quote.

The monotonic section's two tables copy, per estimator, the cost column and
the average rank of ``benchmarks/results/monotonic.md`` (regression) and
``monotonic_classification.md``. Rerunning a benchmark without updating the
README fails here, instead of leaving the README quoting an older run. Reads
files only; runs no benchmark.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _estimator(label):
    """A table's estimator label as the result files write it (no backticks, no ``()``)."""
    return label.replace("scikit-learn", "").replace("`", "").strip().removesuffix("()")


def result_file_table(name):
    """``{(estimator, data set): cost}`` and ``{estimator: average rank}`` of a result file."""
    costs, ranks = {}, {}
    for line in (RESULTS / name).read_text(encoding="utf-8").splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if len(cells) == 7 and cells[0] != "data set":
            costs[cells[1], cells[0]] = cells[4].split(" ± ")[0]
        elif len(cells) == 2 and re.fullmatch(r"\d+\.\d\d", cells[1]):
            ranks[cells[0]] = cells[1]
    return costs, ranks


def readme_table(datasets):
    """``(columns, {estimator: [cost per column..., average rank]})`` of the README table
    whose columns are ``estimator``, the data sets ``datasets`` (in any order) and the rank;
    ``columns`` are the data sets in the table's order."""
    lines = [line.strip() for line in README.splitlines()]
    for i, line in enumerate(lines):
        cells = _cells(line) if line.startswith("| estimator |") else []
        if cells and set(cells[1:-1]) == set(datasets):
            columns, rows = cells[1:-1], {}
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    return columns, rows
                cells = _cells(row)
                rows[_estimator(cells[0])] = cells[1:]
    raise AssertionError(f"README.md has no table of the data sets {sorted(datasets)}")


@pytest.mark.parametrize("result_file", ["monotonic.md", "monotonic_classification.md"])
def test_monotonic_tables_quote_the_result_files(result_file):
    costs, ranks = result_file_table(result_file)
    columns, rows = readme_table({dataset for _, dataset in costs})
    assert rows, f"README.md's table of {result_file} is empty"
    for estimator, cells in rows.items():
        for dataset, cost in zip(columns, cells[:-1], strict=True):
            assert cost == costs[estimator, dataset], (result_file, estimator, dataset)
        assert cells[-1] == ranks[estimator], (result_file, estimator, "average rank")
