"""Helpers shared by every benchmark: provenance, load sampling, timing, result files.

Every result file names the command that regenerates it, the git revision,
the library versions, the CPU model, the thread counts and the machine load,
so figures can be traced and re-measured. Times compared with each other are
measured in the same run. Result files are written by :func:`write_results`
(markdown or json, one header) and :func:`record_run` (one json file per
benchmark holding the list of its runs).
"""

import fcntl
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"

#: Set by the runner (``python -m benchmarks``) to the command line it was given.
COMMAND = None
#: The runner's :class:`LoadSampler`, running for the whole subcommand.
SAMPLER = None


def timed(func, *args, repeat=1, **kwargs):
    """Run ``func`` ``repeat`` times; return (last result, list of seconds)."""
    seconds = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
    return result, seconds


# ------------------------------------------------------------------ provenance
def _git(*args):
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def revision(paths=None):
    """Short git revision of the repository, with ``+dirty`` for uncommitted changes.

    Parameters
    ----------
    paths : list of str, optional
        Only changes to these paths (relative to the repository root) make the
        revision dirty; by default any tracked file outside ``benchmarks/results``
        does. A benchmark of one method may restrict it to that method's sources
        when other files of a shared working tree are being edited while it runs.
    """
    try:
        rev = _git("rev-parse", "--short", "HEAD")
        # result files being rewritten do not change what is measured
        paths = paths or [".", f":(exclude){RESULTS_DIR.relative_to(ROOT)}"]
        dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git checkout)"
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


def versions():
    """Versions of Python and of the libraries the figures depend on."""
    import joblib
    import scipy
    import sklearn

    import obliquetrees

    info = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "joblib": joblib.__version__,
        "obliquetrees": getattr(obliquetrees, "__version__", "unknown"),
    }
    package = Path(obliquetrees.__file__).resolve().parent
    if not package.is_relative_to(ROOT):  # the revision would not describe the code measured
        info["obliquetrees"] += f" imported from {package}, not from this checkout"
    try:
        import numba

        info["numba"] = numba.__version__
    except ImportError:  # pragma: no cover - numba is a dependency
        pass
    return info


def threads():
    """Cores, numba threads and BLAS libraries with their thread counts."""
    info = {"cpu count": os.cpu_count()}
    try:
        import numba

        info["numba threads"] = numba.config.NUMBA_NUM_THREADS
    except ImportError:  # pragma: no cover
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


def load_average():
    """The 1-, 5- and 15-minute load averages as one string."""
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class LoadSampler:
    """1-minute load average sampled every ``period`` seconds in a daemon thread.

    Use as a context manager around the measured work; :attr:`samples` holds
    the load at entry, every ``period`` seconds, and at exit.
    """

    def __init__(self, period=10.0):
        self.period = period
        self.samples = []
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        self.samples.append(os.getloadavg()[0])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.period):
            self.samples.append(os.getloadavg()[0])

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return False

    def summary(self):
        """``"mean (min-max)"`` of the samples and the load now, one decimal."""
        s = [*self.samples, os.getloadavg()[0]]
        return f"{np.mean(s):.1f} ({np.min(s):.1f}-{np.max(s):.1f})"


def command_line():
    """The command that reran this process, as ``python -m ...`` from the repository root."""
    if COMMAND is not None:
        return COMMAND
    argv = sys.argv
    if argv and argv[0].endswith(".py"):
        path = Path(argv[0]).resolve()
        try:
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        except ValueError:
            return "python " + shlex.join(argv)
        module = module.removesuffix(".__main__")
        return "python -m " + shlex.join([module, *argv[1:]])
    return "python " + shlex.join(argv)


def provenance(command=None, load=None, revision_paths=None):
    """Everything a result file states about how and where it was measured.

    Parameters
    ----------
    command : str, optional
        The command that regenerates the file (default: :func:`command_line`).
    load : str, optional
        The machine load during the run (e.g. :meth:`LoadSampler.summary`);
        default: the runner's sampler (whole run so far), else the load averages now.
    revision_paths : list of str, optional
        Passed to :func:`revision`.
    """
    return {
        "command": command or command_line(),
        "revision": revision(revision_paths),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(),
        "CPU": cpu_model(),
        "threads": threads(),
        "load": load or _run_load(),
    }


def _run_load():
    if SAMPLER is not None:
        return f"{SAMPLER.summary()} (1-minute load average, mean (min-max) since the run began)"
    return f"average {load_average()} (1, 5, 15 minutes, at writing)"


def _header(prov):
    """Markdown lines stating a provenance dict."""
    vers = ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
    thr = ", ".join(f"{k} {v}" for k, v in prov["threads"].items())
    return [
        f"Regenerate: `{prov['command']}` (from the repository root)",
        "",
        f"Revision {prov['revision']}, {prov['date']}; {vers}; CPU {prov['CPU']}; {thr}; "
        f"load {prov['load']}.",
        "",
    ]


# ------------------------------------------------------------------ children
def run_python(code, *args, timeout=None, cwd=ROOT):
    """Run ``python -c code args...`` from the repository root on its own package.

    For benchmarks that measure each fit in a fresh process (its peak memory,
    no state from earlier fits). Returns the :class:`subprocess.CompletedProcess`
    (text output captured, exit status not checked); raises
    :class:`subprocess.TimeoutExpired` after ``timeout`` seconds. Another
    ``cwd`` comes first on the child's ``sys.path``: a package there (a
    patched copy of ``obliquetrees``) is imported instead of the repository's.
    """
    path = [str(ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_child_row(key, code, *args):
    """``key`` with the JSON row a fresh child process (:func:`run_python`) prints last.

    The row is stamped with the 1-minute load before and after the child, the
    CPU model and the revision. Raises a ``RuntimeError`` with the child's
    error output if it failed.
    """
    load_before = os.getloadavg()[0]
    done = run_python(code, *args)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    row = {**key, **json.loads(done.stdout.splitlines()[-1])}
    row.update(
        {
            "load before": load_before,
            "load after": os.getloadavg()[0],
            "CPU": cpu_model(),
            "revision": revision(),
        }
    )
    return row


# ---------------------------------------------------------------- result files
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


def results_path(path):
    """``path`` itself if absolute, else inside ``benchmarks/results``."""
    path = Path(path)
    return path if path.is_absolute() else RESULTS_DIR / path


def write_results(
    path,
    title=None,
    tables=(),
    notes="",
    command=None,
    *,
    data=None,
    figure=None,
    load=None,
    revision_paths=None,
):
    """Write a result file, markdown, json or png (by the suffix), with its provenance.

    Parameters
    ----------
    path : str or Path
        Relative paths are taken inside ``benchmarks/results``. A ``.json``
        path gets ``{"provenance": {...}, **data}``, a ``.png`` path ``figure``
        with the provenance (json) in its ``Description`` metadata; any other
        a markdown file.
    title : str
        Markdown title.
    tables : list of (heading, rows)
        Markdown tables; ``rows`` is a list of dicts (one per table row).
    notes : str
        Free text placed after the markdown header (method, deviations, reading).
    command : str, optional
        The command that regenerates the file (default: this process's command).
    data : dict, optional
        The content of a json file.
    figure : matplotlib.figure.Figure, optional
        The content of a png file.
    load : str, optional
        Machine load during the run; default: the load averages at writing.
    revision_paths : list of str, optional
        Restrict the dirty check of the revision, see :func:`revision`.

    Returns
    -------
    Path
    """
    path = results_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prov = provenance(command, load, revision_paths)
    if path.suffix == ".json":
        path.write_text(json.dumps({"provenance": prov, **(data or {})}, indent=1, default=float))
        return path
    if path.suffix == ".png":
        figure.savefig(path, dpi=120, metadata={"Description": json.dumps(prov)})
        return path
    lines = [f"# {title}", "", *_header(prov)]
    if notes:
        lines += [notes.strip(), ""]
    for heading, rows in tables:
        lines += [f"## {heading}", "", markdown_table(rows), ""]
    path.write_text("\n".join(lines))
    return path


@contextmanager
def locked(path):
    """Exclusive lock on ``path`` itself, so concurrent runs can append to one file."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_runs(path):
    """The runs stored in a benchmark's runs file (a json list), oldest first."""
    path = results_path(path)
    text = path.read_text() if path.exists() else ""
    return json.loads(text) if text.strip() else []


def record_run(path, run, command=None, load=None, revision_paths=None):
    """Append one run, with its provenance, to a benchmark's runs file.

    The file is a json list of runs, oldest first; each run is the
    provenance of :func:`provenance` updated with ``run`` (e.g. ``{"tag": ...,
    "rows": [...]}``). The read-append-write holds a file lock, so runs of
    the same benchmark may run concurrently.

    Returns
    -------
    list of dict
        All stored runs, this one last.
    """
    path = results_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {**provenance(command, load, revision_paths), **run}
    with locked(path):
        runs = read_runs(path) + [entry]
        path.write_text(json.dumps(runs, indent=1, default=float))
    return runs
