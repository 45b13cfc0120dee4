"""``import obliquetrees`` stays light: no numba, nothing compiled."""

import subprocess
import sys


def test_import_does_not_load_numba():
    code = (
        "import sys, obliquetrees\n"
        "heavy = [m for m in ('numba', 'llvmlite', 'sklearn.ensemble') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print(sorted(obliquetrees.__all__))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
