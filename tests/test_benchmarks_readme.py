"""benchmarks/README.md's table of subcommands agrees with the runner and with results/.

The table must list exactly the runner's subcommands, each with its module,
and name every file in ``benchmarks/results/``: a result file no subcommand
writes any more (a stale snapshot) fails here. Reads files only; runs no
benchmark.
"""

import re
from pathlib import Path

from benchmarks.__main__ import SUBCOMMANDS

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ROW = re.compile(r"^\| `([\w-]+)` \| `([\w.]+\.py)` \| (.+) \|$")
RESULT_FILE = re.compile(r"`([\w.-]+\.(?:md|json|png))`")


def readme_table():
    """subcommand -> (module file, the table's ``writes`` cell), in the README's order."""
    rows = {}
    for line in (BENCHMARKS / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            name, module, writes = match.groups()
            assert name not in rows, f"{name!r} has two rows in benchmarks/README.md"
            rows[name] = (module, writes)
    return rows


def test_table_lists_every_subcommand_and_its_module():
    rows = readme_table()
    assert sorted(rows) == sorted(SUBCOMMANDS)
    for name, (module, _) in rows.items():
        assert SUBCOMMANDS[name] == "benchmarks." + module.removesuffix(".py"), name


def test_every_subcommand_names_a_result_file():
    for name, (_, writes) in readme_table().items():
        assert RESULT_FILE.search(writes), f"the row of {name!r} names no result file"


def test_every_result_file_is_named_in_the_table():
    named = {f for _, writes in readme_table().values() for f in RESULT_FILE.findall(writes)}
    present = {p.name for p in (BENCHMARKS / "results").iterdir()}
    assert present, "benchmarks/results/ is empty"
    assert sorted(present - named) == [], "result files no subcommand in the README writes"
