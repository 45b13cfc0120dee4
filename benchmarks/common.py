"""Timing and result-file helpers shared by every benchmark.

Every result file names the command that regenerates it, the git revision,
the library versions and the thread count, so figures can be traced and
re-measured. Times compared with each other are measured in the same run.
"""

import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def timed(func, *args, repeat=1, **kwargs):
    """Run ``func`` ``repeat`` times; return (last result, list of seconds)."""
    seconds = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
    return result, seconds


def revision():
    """Short git revision of the repository, with ``+dirty`` for local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def cpu_model():
    """The CPU's model name (benchmark machines differ: Intel and AMD both occur)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment():
    """Versions and thread counts that matter for the figures."""
    import joblib
    import scipy
    import sklearn

    info = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "joblib": joblib.__version__,
        "CPU": cpu_model(),
        "cpu count": os.cpu_count(),
        "load average": "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
    }
    try:
        import numba

        info["numba"] = numba.__version__
        info["numba threads"] = numba.config.NUMBA_NUM_THREADS
    except ImportError:  # pragma: no cover - numba is a dependency
        pass
    try:
        from threadpoolctl import threadpool_info

        blas = [
            f"{p['internal_api']} {p['version']} ({p['num_threads']} threads)"
            for p in threadpool_info()
            if p["user_api"] == "blas"
        ]
        info["BLAS"] = ", ".join(blas) or "none loaded"
    except ImportError:  # pragma: no cover
        pass
    return info


def markdown_table(rows, columns=None):
    """Rows (dicts) as a markdown table; floats get 4 significant digits."""
    columns = columns or list(rows[0])

    def fmt(value):
        if isinstance(value, float | np.floating):
            return f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_results(path, title, tables, notes="", command=None):
    """Write a markdown result file with its provenance header.

    Parameters
    ----------
    path : str or Path
        Relative paths are taken inside ``benchmarks/results``.
    title : str
    tables : list of (heading, rows)
        ``rows`` is a list of dicts (one per table row).
    notes : str
        Free text placed after the header (method, deviations, reading).
    command : str, optional
        The command that regenerates the file (default: this process's argv).
    """
    path = Path(path)
    if not path.is_absolute():
        path = RESULTS_DIR / path
    path.parent.mkdir(parents=True, exist_ok=True)
    if command is None:  # this process's own command line, as ``python -m module``
        command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
        if sys.argv and sys.argv[0].endswith(".py"):
            module = Path(sys.argv[0]).resolve().relative_to(Path(__file__).resolve().parents[1])
            module = ".".join(module.with_suffix("").parts)
            command = "python -m " + " ".join([module] + [shlex.quote(a) for a in sys.argv[1:]])
    lines = [f"# {title}", "", f"Regenerate: `{command}` (from the repository root)", ""]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    env = ", ".join(f"{k} {v}" for k, v in environment().items())
    lines += [f"Revision {revision()}, {stamp}; {env}.", ""]
    if notes:
        lines += [notes.strip(), ""]
    for heading, rows in tables:
        lines += [f"## {heading}", "", markdown_table(rows), ""]
    path.write_text("\n".join(lines))
    return path
