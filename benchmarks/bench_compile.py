"""Where compilation time goes: each kernel's compile time and specialisations, per estimator.

Each public estimator fits with its defaults on load_digits (classifiers) or
load_diabetes (regressors) and predicts, in a fresh process importing the
repository's package (no shipped kernels) with an empty numba cache, so every
kernel it reaches compiles. numba's ``numba:compile`` events give each
dispatcher's compile time; nested compilations (a kernel's callees) are
subtracted, so a kernel's time is its own (typing, lowering, LLVM). Kernels of
numba itself (array constructors, string formatting of error messages, ...)
appear under their numba names.

Tables: per estimator, the total and the share of the package's own kernels;
the 40 most expensive kernels over all estimators with their specialisations
(distinct argument types), ``parallel=True`` and ``inline="always"``.

    python -m benchmarks compile
"""

import tempfile
from collections import defaultdict

from benchmarks.bench_first_fit import ESTIMATORS, run_child
from benchmarks.common import write_results

CHILD = """
import importlib, json, sys, time
from numba.core import event
module, name = sys.argv[1].rsplit(".", 1)
cls = getattr(importlib.import_module(module), name)
from sklearn.datasets import load_diabetes, load_digits
X, y = (load_diabetes if "Regressor" in name else load_digits)(return_X_y=True)
events = []

class Recorder(event.Listener):
    def on_start(self, ev):
        events.append((time.perf_counter(), True, ev.data))

    def on_end(self, ev):
        events.append((time.perf_counter(), False, ev.data))

event.register("numba:compile", Recorder())
start = time.perf_counter()
cls(random_state=0).fit(X, y).predict(X)
wall = time.perf_counter() - start
stack, kernels = [], {}
for t, is_start, data in events:
    if is_start:
        stack.append([t, 0.0])
        continue
    began, children = stack.pop()
    if stack:
        stack[-1][1] += t - began
    disp = data["dispatcher"]
    key = disp.py_func.__module__ + "." + disp.py_func.__qualname__
    k = kernels.setdefault(key, {"seconds": 0.0, "signatures": [],
        "parallel": bool(disp.targetoptions.get("parallel")),
        "inline": disp.targetoptions.get("inline") == "always"})
    k["seconds"] += t - began - children
    k["signatures"].append(str(data["args"]))
print(json.dumps({"fit and predict s": wall, "kernels": kernels}))
"""


def compile_profile(estimator):
    """Per-kernel compile times of one estimator's first fit and predict, from source."""
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        return run_child(CHILD, estimator, cache, source=True)[0]


def add_arguments(parser):
    """The arguments of ``python -m benchmarks compile``."""
    parser.add_argument("--top", type=int, default=40)


def main(args):
    per_estimator, overall = [], defaultdict(lambda: {"seconds": 0.0, "signatures": set()})
    for estimator in [e for e in ESTIMATORS if e.startswith("obliquetrees")]:
        profile = compile_profile(estimator)
        kernels = profile["kernels"]
        ours = sum(k["seconds"] for n, k in kernels.items() if n.startswith("obliquetrees"))
        total = sum(k["seconds"] for k in kernels.values())
        per_estimator.append(
            {
                "estimator": estimator.rsplit(".", 1)[1],
                "first fit + predict s": profile["fit and predict s"],
                "compile s": total,
                "package kernels s": ours,
                "numba library s": total - ours,
                "kernels": len(kernels),
                "specialisations": sum(len(k["signatures"]) for k in kernels.values()),
            }
        )
        print(per_estimator[-1], flush=True)
        for name, k in kernels.items():
            entry = overall[name]
            entry["seconds"] += k["seconds"]
            entry["signatures"].update(k["signatures"])
            entry["parallel"], entry["inline"] = k["parallel"], k["inline"]
            entry.setdefault("estimators", set()).add(estimator.rsplit(".", 1)[1])
    top = sorted(overall.items(), key=lambda kv: -kv[1]["seconds"])[: args.top]
    rows = [
        {
            "kernel": name,
            "compile s (all estimators)": k["seconds"],
            "specialisations": len(k["signatures"]),
            "parallel": "yes" if k["parallel"] else "",
            "inline": "yes" if k["inline"] else "",
            "estimators": len(k["estimators"]),
        }
        for name, k in top
    ]
    notes = (
        "Each estimator in its own process with an empty cache, so kernels shared by "
        "estimators compile once per estimator and their seconds add up in the second "
        "table. A kernel's seconds exclude its callees' own compilation."
    )
    write_results(
        "compile.md",
        "Compilation time per kernel",
        [("Per estimator", per_estimator), (f"The {args.top} most expensive kernels", rows)],
        notes,
    )
