"""``tests/requirements.txt`` lists exactly setup.cfg's runtime and test requirements.

The README's test command installs that file, so that it does not build the
wheel a second time; this keeps it from drifting from the package metadata.
"""

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lines(text):
    """Requirement lines of ``text``: comments and blank lines dropped, spaces removed."""
    lines = (line.split("#", 1)[0].replace(" ", "") for line in text.splitlines())
    return sorted(line for line in lines if line)


def test_the_test_requirements_are_the_packages_runtime_and_test_requirements():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    declared = _lines(setup["options"]["install_requires"]) + _lines(
        setup["options.extras_require"]["test"]
    )
    listed = _lines((ROOT / "tests" / "requirements.txt").read_text())
    assert listed == sorted(declared)
