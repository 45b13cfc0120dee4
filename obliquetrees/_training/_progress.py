"""Progress lines for long fits (``verbose >= 1``).

One line per finished unit of work (a tree of a forest, an epoch), with the
time elapsed and an estimate of the time left, so a ten-minute fit says how
far it is. The estimate assumes the remaining units cost what the finished
ones did on average; when training can stop early (``n_iter_no_change``) it
is an upper bound and the line says so. Nothing is printed at ``verbose=0``.
"""

import sys
import time


def format_seconds(seconds):
    """``"42.0 s"``, ``"3 min 05 s"`` or ``"2 h 03 min"``: short and unambiguous."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Report ``done / total`` units with elapsed time and time left.

    Parameters
    ----------
    name : str
        Prefix in brackets, e.g. the estimator's class name.
    total : int
        Number of units the fit will do at most.
    unit : str, default="tree"
        What one unit is ("tree", "epoch", ...).
    verbose : int, default=0
        Nothing is printed at 0.
    may_stop_early : bool, default=False
        The fit can end before ``total`` (early stopping): the time left is
        then an upper bound and printed as "at most".
    stream : file-like or None
        Where lines go; standard output (read at each line, so pytest's
        ``capsys`` sees them) when None.
    """

    def __init__(self, name, total, *, unit="tree", verbose=0, may_stop_early=False, stream=None):
        self.name = name
        self.total = int(total)
        self.unit = unit
        self.verbose = verbose
        self.may_stop_early = may_stop_early
        self.stream = stream
        self.done = 0
        self.start = time.perf_counter()

    def update(self, done=None, detail=""):
        """Record that ``done`` units (default: one more) are finished and print a line.

        Parameters
        ----------
        done : int or None
            Units finished so far; None adds one.
        detail : str
            Appended after the counts (e.g. a loss).
        """
        self.done = self.done + 1 if done is None else int(done)
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / self.done * max(self.total - self.done, 0) if self.done else 0.0
        if self.done >= self.total:
            eta = "done"
        else:
            eta = ("at most " if self.may_stop_early else "about ") + f"{format_seconds(left)} left"
        detail = f", {detail}" if detail else ""
        self._print(
            f"[{self.name}] {self.unit} {self.done}/{self.total}{detail}; "
            f"{format_seconds(elapsed)} elapsed, {eta}"
        )

    def stop(self, reason):
        """Print that the fit ended before ``total`` units (e.g. early stopping) and why."""
        if self.verbose:
            elapsed = time.perf_counter() - self.start
            self._print(
                f"[{self.name}] stopped after {self.unit} {self.done}/{self.total}: {reason}; "
                f"{format_seconds(elapsed)} elapsed"
            )

    def _print(self, line):
        print(line, file=sys.stdout if self.stream is None else self.stream, flush=True)
