"""Run a snippet in a fresh interpreter with a time limit.

Adversarial cases that could crash the process (a signal) or hang it (an
endless loop inside a GIL-free kernel, a dead forked child) run here, so a
defect fails one test with its output instead of killing or stalling the
whole suite.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(code, timeout=120):
    """Run ``code`` with this interpreter; return the finished process.

    Raises ``AssertionError`` naming the snippet's output when it times out.
    The repository root goes first on ``PYTHONPATH`` so the checkout under
    test is imported.
    """
    # From a file, not ``-c``: spawn and forkserver children re-import the
    # main module to find functions defined in it.
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(textwrap.dedent(code))
    try:
        return _run(script.name, timeout)
    finally:
        os.unlink(script.name)


def _run(path, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    try:
        return subprocess.run(
            [sys.executable, path],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"snippet did not finish within {timeout} s (hang); output so far:\n"
            f"{exc.stdout}\n{exc.stderr}"
        ) from None


def assert_ok(proc):
    """The snippet exited normally (no signal, no non-zero exit)."""
    assert proc.returncode == 0, (
        f"exit code {proc.returncode} (negative: killed by signal)\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
