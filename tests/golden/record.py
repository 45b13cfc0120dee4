"""Record the golden outputs of this checkout for this environment.

    python -m tests.golden.record

Adds (or replaces) this environment's entry in ``tests/golden/outputs.json``.
Record on the revision *before* a behaviour-preserving refactor, then run
``pytest tests/test_golden.py`` after it.
"""

import json
import subprocess
from pathlib import Path

from tests.golden.cases import all_runs, environment_key, run_case

PATH = Path(__file__).with_name("outputs.json")


def main():
    records = json.loads(PATH.read_text()) if PATH.exists() else {}
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PATH.parent
    ).stdout.strip()
    runs = {f"{name}/{data}": run_case(name, data) for name, data in all_runs()}
    key = environment_key()
    records[key] = {"revision": revision, "runs": runs}
    PATH.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(runs)} runs for {key} at {revision} in {PATH}")


if __name__ == "__main__":
    main()
