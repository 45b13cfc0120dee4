"""Record the golden outputs of this checkout for this set of library versions.

    python -m tests.golden.record

Adds (or replaces) this environment's entry in ``tests/golden/outputs.json``.
The cases run in a child process under :func:`tests.golden.cases.canonical_environment`,
as the test runs them. Record on the revision *before* a behaviour-preserving
refactor, then run ``pytest tests/test_golden.py`` after it.
"""

import json
import subprocess
from pathlib import Path

from tests.golden.cases import run_all_canonical

PATH = Path(__file__).with_name("outputs.json")


def main():
    records = json.loads(PATH.read_text()) if PATH.exists() else {}
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PATH.parent
    ).stdout.strip()
    result = run_all_canonical()
    records[result["key"]] = {"revision": revision, "runs": result["runs"]}
    PATH.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(result['runs'])} runs for {result['key']} at {revision} in {PATH}")


if __name__ == "__main__":
    main()
