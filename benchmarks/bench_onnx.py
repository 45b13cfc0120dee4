"""ONNX export: onnxruntime vs our predict vs scikit-learn, cold start, file sizes.

Three measurements of ``obliquetrees.onnx.to_onnx`` (issue 21):

1. Throughput. Each model predicts the same ``--rows`` rows (100000: test
   rows of its data set drawn with replacement, seed 0) with (a)
   scikit-learn's own model where there is one (the random forest), (b) our
   ``predict_proba`` (``predict`` for regressors) with ``n_jobs=1``, (c)
   onnxruntime with ``intra_op_num_threads=1`` on the float32 and the
   float64 export, fed in batches of ``--onnx-batch`` rows (10000). BLAS and numba are
   limited to one thread for all of them, so every column is one core; the
   cpu/wall columns check that. Median of ``--repeat`` runs, the methods interleaved,
   after one warm-up call each (kernel loading, onnxruntime's first run).
   The outputs of the timed runs are compared with ``predict``: share of
   identical labels, largest absolute probability difference (regressors:
   largest difference relative to the largest prediction).
2. Cold start. Fresh Python processes that each predict ``X[:100]`` of letter
   with the same 100-tree forest: (a) import onnxruntime, load the float32
   ONNX file of the converted forest, run it; (b) unpickle scikit-learn's own
   RandomForestClassifier and call ``predict``; (c) for information, unpickle
   our converted forest and call ``predict``. The processes run in turn, a b
   c a b c ..., after ``--cold-warmup`` uncounted rounds; wall time is read
   around each process, cpu time from the operating system's accounting of
   the reaped child (``os.wait4``), and each process reports its own peak
   memory (``VmHWM``) and import / load / predict phases. Ratios to (b) are
   taken round by round and their median quoted. Acceptance (issue 21): (a)
   faster than (b).
3. File sizes: the ONNX files (float32 and float64 exports) and the pickles.
4. Routing choice: hard-routed oblique forests on letter exported both ways
   (every oblique margin by one product then a tree ensemble, or a walk
   level by level), timed on ``ROUTING_ROWS`` rows: the measurements behind
   ``obliquetrees.onnx._parts.WALK_RATIO``.

Models (``random_state=0``; the oblique ones fitted with ``n_jobs=2``):
scikit-learn's fully grown RandomForestClassifier(100) on letter converted
by ``from_sklearn``, CO2ForestClassifier(n_estimators=30),
E2EDTClassifier(max_depth=6), HingeForestClassifier() and
SoftTreeClassifier() on letter, SoftTreeRegressor() on fried_delve and
HingeForestRegressor() on california_housing (target in dollars).

    python -m benchmarks onnx               # full run -> results/onnx.md (about 30 min, 2 cores)
    python -m benchmarks onnx --quick       # smoke run: small models, 10000 rows (temp dir)
    python -m benchmarks onnx --models rf co2 --repeat 3
"""

import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from sklearn.base import is_classifier
from sklearn.ensemble import RandomForestClassifier
from threadpoolctl import threadpool_limits

from benchmarks.common import write_results
from benchmarks.datasets import train_test

#: Rows of one onnxruntime call (``--onnx-batch``).
DEFAULT_BATCH = 10_000
COLD_ROWS = 100
#: Rows of the routing-choice timings (the margin product of a fully grown
#: CO2(30) holds 40k float64 per row).
ROUTING_ROWS = 2000
#: Extra hard-routed forests of the routing-choice table (letter).
ROUTING_MODELS = {
    "CO2ForestClassifier": dict(n_estimators=30, max_depth=6),
    "E2EDTClassifier": dict(max_depth=6, routing="hard"),
}
#: Columns of the agreement table (probabilities for classifiers, values for regressors).
NO_AGREEMENT = {
    "labels identical %": "-",
    "labels differing": "-",
    "max abs diff": "-",
    "max abs diff / max abs prediction": "-",
}

#: key -> (data set, estimator name, full parameters, quick parameters, quick train rows)
MODELS = {
    "rf": (
        "letter",
        "RandomForestClassifier",
        dict(n_estimators=100),
        dict(n_estimators=10),
        None,
    ),
    "co2": (
        "letter",
        "CO2ForestClassifier",
        dict(n_estimators=30),
        dict(n_estimators=3),
        None,
    ),
    "e2edt": (
        "letter",
        "E2EDTClassifier",
        dict(max_depth=6),
        dict(max_depth=6, max_epochs=2, finetune_epochs=2),
        3000,
    ),
    "hinge": (
        "letter",
        "HingeForestClassifier",
        {},
        dict(n_estimators=10, max_epochs=2),
        3000,
    ),
    "soft": (
        "letter",
        "SoftTreeClassifier",
        {},
        dict(max_depth=3, n_restarts=2, max_epochs=3),
        2000,
    ),
    "soft-reg": (
        "fried_delve",
        "SoftTreeRegressor",
        {},
        dict(max_depth=3, n_restarts=2, max_epochs=3),
        2000,
    ),
    "hinge-reg": (
        "california_housing",
        "HingeForestRegressor",
        {},
        dict(n_estimators=10, max_epochs=2),
        3000,
    ),
}

#: The fresh process of the cold-start comparison (argv: kind, model file, rows file).
COLD_SCRIPT = """
import json, sys, time
start = time.perf_counter()
kind, model_path, rows_path = sys.argv[1:4]
import numpy as np
if kind == "onnx":
    import onnxruntime as ort
    imported = time.perf_counter()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    loaded = time.perf_counter()
    label = session.run(None, {"X": np.load(rows_path)})[0]
else:
    import pickle
    if kind == "sklearn":
        import sklearn.ensemble
    else:
        import obliquetrees.convert
    imported = time.perf_counter()
    with open(model_path, "rb") as f:
        model = pickle.load(f)
    loaded = time.perf_counter()
    label = model.predict(np.load(rows_path))
done = time.perf_counter()
with open("/proc/self/status") as status:  # this program's own peak, from its exec on
    peak = next((int(l.split()[1]) for l in status if l.startswith("VmHWM:")), 0)
print(json.dumps({"import s": imported - start, "load s": loaded - imported,
                  "predict s": done - loaded, "peak MB": peak / 1024,
                  "labels": np.asarray(label).tolist(), "numba": "numba" in sys.modules}))
"""


# --------------------------------------------------------------------- models
def fit_model(key, quick, log):
    """``(row, sklearn model or None, our model, X_test)`` of one ``MODELS`` entry."""
    import obliquetrees
    from obliquetrees.convert import from_sklearn

    dataset, name, full, quick_params, quick_rows = MODELS[key]
    X_train, y_train, X_test, _ = train_test(dataset)
    if quick and quick_rows:
        X_train, y_train = X_train[:quick_rows], y_train[:quick_rows]
    params = dict(quick_params if quick else full, random_state=0, n_jobs=2)
    start = time.perf_counter()
    if name == "RandomForestClassifier":
        sk = RandomForestClassifier(**params).fit(X_train, y_train)
        ours = from_sklearn(sk)
        sk.set_params(n_jobs=None)  # as deployed: what the pickle of the cold start holds
    else:
        sk, ours = None, getattr(obliquetrees, name)(**params).fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    ours.set_params(n_jobs=1)
    shown = ", ".join(f"{k}={v}" for k, v in (quick_params if quick else full).items())
    label = f"{name}({shown})" + (", converted" if sk is not None else "")
    row = {"model": label, "data set": dataset, "fit s": fit_s, "train rows": len(X_train)}
    log(f"fitted {label} on {dataset} in {fit_s:.1f} s")
    return row, sk, ours, X_test


def _trees(model):
    return list(getattr(model, "trees_", None) or [model.tree_])


def oblique_splits(model):
    """Splits routed on a margin column (not one weight of +-1), and all internal nodes."""
    oblique = internal = 0
    for tree in _trees(model):
        nodes = np.flatnonzero(tree.children_left >= 0)
        indptr = tree.weight_indptr
        count = indptr[nodes + 1] - indptr[nodes]
        single = count == 1
        unit = np.zeros(nodes.shape[0], dtype=bool)
        unit[single] = np.abs(tree.weight_value[indptr[nodes[single]]]) == 1.0
        oblique += int((~unit).sum())
        internal += nodes.shape[0]
    return oblique, internal


def routing(model):
    """How the exported graph routes ``model`` (see obliquetrees.onnx._parts)."""
    from obliquetrees.onnx import _parts

    if hasattr(model, "n_hinge_features"):
        return "hinge forward pass"
    rules = {getattr(model, "routing", "hard")}
    if hasattr(model, "_rules"):  # E2EDT: predict and predict_proba may differ
        rules = set(model._rules())
    if rules == {"soft"}:
        return "soft, level by level"
    if "soft" in rules:  # the hard part reuses the soft part's margins
        return "soft, level by level; hard: margins + tree ensemble"
    oblique, _ = oblique_splits(model)
    if not oblique:
        return "tree ensemble on raw features"
    return "walk" if _parts._walk_is_cheaper(model._forest()) else "margins + tree ensemble"


# ----------------------------------------------------------------- throughput
def _session(onx_bytes):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(onx_bytes, options, providers=["CPUExecutionProvider"])


def _run_onnx(session, X, batch):
    parts = [session.run(None, {"X": X[i : i + batch]}) for i in range(0, len(X), batch)]
    return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]


@contextmanager
def one_thread():
    """BLAS and numba limited to one thread, for every method alike."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        numba.set_num_threads(previous)


def _clock(func):
    """``(result, wall s, cpu s)`` of one call (cpu: this process, all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = func()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def throughput(row, sk, ours, X_test, n_rows, repeat, batch_setting, log):
    """Time every method on ``n_rows`` rows; fill ``row``; return (agreement rows, size row)."""
    from obliquetrees.onnx import to_onnx

    classifier = is_classifier(ours)
    rng = np.random.default_rng(0)
    X = X_test[rng.integers(0, len(X_test), n_rows)]
    X64 = X.astype(np.float64)
    oblique, internal = oblique_splits(ours)
    batch = min(n_rows, batch_setting)
    sizes = {"model": row["model"]}
    sessions = {}
    for dtype in (np.float32, np.float64):
        onx, export_s, _ = _clock(lambda dtype=dtype: to_onnx(ours, dtype=dtype))
        data = onx.SerializeToString()
        sizes[f"ONNX {np.dtype(dtype).name} MB"] = len(data) / 1e6
        sessions[np.dtype(dtype).name] = _session(data)
        row[f"to_onnx {np.dtype(dtype).name} s"] = export_s
    sizes["obliquetrees pickle MB"] = len(pickle.dumps(ours, protocol=5)) / 1e6
    sizes["scikit-learn pickle MB"] = len(pickle.dumps(sk, protocol=5)) / 1e6 if sk else "-"

    ours_call = ours.predict_proba if classifier else ours.predict
    methods = {"ours": lambda: ours_call(X)}
    if sk is not None:
        sk.set_params(n_jobs=1)
        methods = {"scikit-learn": lambda: sk.predict_proba(X), **methods}
    methods["ONNX float32"] = lambda: _run_onnx(sessions["float32"], X, batch)
    methods["ONNX float64"] = lambda: _run_onnx(sessions["float64"], X64, batch)
    walls = {name: [] for name in methods}
    cpus = {name: [] for name in methods}
    outputs = {}
    with one_thread():
        for call in methods.values():  # warm-up: kernel loading, first runs
            call()
        for _ in range(repeat):  # interleaved, so load changes hit every method alike
            for name, call in methods.items():
                outputs[name], wall, cpu = _clock(call)
                walls[name].append(wall)
                cpus[name].append(cpu)
    median = {name: statistics.median(w) for name, w in walls.items()}
    row.update(
        {
            "rows": n_rows,
            "trees": len(_trees(ours)),
            "internal nodes": internal,
            "oblique splits": oblique,
            "ONNX routing": routing(ours),
            "ONNX batch": batch,
            "scikit-learn s": median.get("scikit-learn", "-"),
            "ours s": median["ours"],
            "ONNX float32 s": median["ONNX float32"],
            "ONNX float64 s": median["ONNX float64"],
            "ONNX float32 / ours": median["ONNX float32"] / median["ours"],
            "ONNX float32 / scikit-learn": (
                median["ONNX float32"] / median["scikit-learn"] if sk is not None else "-"
            ),
            "cpu/wall ours": sum(cpus["ours"]) / sum(walls["ours"]),
            "cpu/wall ONNX": sum(cpus["ONNX float32"]) / sum(walls["ONNX float32"]),
        }
    )
    log({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})

    agreement = []
    reference = outputs["ours"]
    labels = ours.predict(X) if classifier else None
    for dtype in ("float32", "float64"):
        out = outputs[f"ONNX {dtype}"]
        entry = {"model": row["model"], "input": dtype, **NO_AGREEMENT}
        if classifier:
            entry["labels identical %"] = 100.0 * float(np.mean(out[0] == labels))
            entry["labels differing"] = int(np.sum(out[0] != labels))
            entry["max abs diff"] = float(np.abs(out[1] - reference).max())
        else:
            pred = reference.reshape(len(X), -1)
            diff = float(np.abs(out[0] - pred).max())
            entry["max abs diff"] = diff
            entry["max abs diff / max abs prediction"] = diff / float(np.abs(pred).max())
        agreement.append(entry)
        log(entry)
    if sk is not None:
        agreement.append(
            {
                "model": row["model"],
                "input": "scikit-learn vs ours (no ONNX)",
                **NO_AGREEMENT,
                "labels identical %": 100.0 * float(np.mean(sk.predict(X) == labels)),
                "labels differing": int(np.sum(sk.predict(X) != labels)),
                "max abs diff": float(np.abs(outputs["scikit-learn"] - reference).max()),
            }
        )
    return agreement, sizes


# ------------------------------------------------------------- routing choice
def routing_choice(co2, co2_label, X_test, repeat, quick, log):
    """Rows of the routing-choice table: each hard forest exported both ways and timed."""
    import obliquetrees
    from obliquetrees.onnx import _parts, to_onnx

    X_train, y_train, _, _ = train_test("letter")
    models = {f"{co2_label}, fully grown": co2}
    for name, params in ROUTING_MODELS.items():
        if quick and "n_estimators" in params:
            params = dict(params, n_estimators=3)
        est = getattr(obliquetrees, name)(**params, random_state=0, n_jobs=2).fit(X_train, y_train)
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        models[f"{name}({shown})"] = est.set_params(n_jobs=1)
    X = X_test[np.random.default_rng(1).integers(0, len(X_test), ROUTING_ROWS)]
    X = X.astype(np.float32)
    rule = _parts._walk_is_cheaper
    table = []
    for label, model in models.items():
        forest = model._forest()
        oblique, _ = oblique_splits(model)
        visits = forest.n_trees * int(forest.depth.max())
        row = {
            "forest": label,
            "oblique splits": oblique,
            "trees x depth": visits,
            "splits per visit": oblique / visits,
            "rule chooses": "walk" if rule(forest) else "margins + tree ensemble",
        }
        expected = model.predict(X)
        for walk in (False, True):
            _parts._walk_is_cheaper = lambda forest, walk=walk: walk
            try:
                session = _session(to_onnx(model).SerializeToString())
            finally:
                _parts._walk_is_cheaper = rule
            run = lambda session=session: session.run(None, {"X": X})  # noqa: E731
            labels = run()[0]  # warm-up
            assert (labels == expected).all(), f"{label}: ONNX labels differ from predict"
            times = [_clock(run)[1] for _ in range(repeat)]
            row["walk s" if walk else "margins + tree ensemble s"] = statistics.median(times)
        row["walk / margins"] = row["walk s"] / row["margins + tree ensemble s"]
        table.append(row)
        log(row)
    return table


# ----------------------------------------------------------------- cold start
def _process(argv, out_path):
    """Run one process; ``(wall s, cpu s, its json line)`` (cpu: wait4's accounting)."""
    with open(out_path, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = Path(out_path).read_text()
    if proc.returncode:
        raise RuntimeError(f"{argv} exited with {proc.returncode}:\n{text[-3000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    # not usage.ru_maxrss: Linux carries the parent's peak over fork and exec into it
    return wall, cpu, json.loads(text.strip().splitlines()[-1])


def cold_start(sk, ours, X_test, directory, runs, warmup, log):
    """Rows of the cold-start table and the acceptance line."""
    from obliquetrees.onnx import to_onnx

    files = {
        "onnx": directory / "cold_forest.float32.onnx",
        "sklearn": directory / "cold_sklearn.pkl",
        "ours": directory / "cold_ours.pkl",
    }
    files["onnx"].write_bytes(to_onnx(ours, dtype=np.float32).SerializeToString())
    sk.set_params(n_jobs=None)
    ours.set_params(n_jobs=None)
    for kind, model in (("sklearn", sk), ("ours", ours)):
        with open(files[kind], "wb") as f:
            pickle.dump(model, f, protocol=5)
    rows_path = directory / "cold_rows.npy"
    X = np.ascontiguousarray(X_test[:COLD_ROWS], dtype=np.float32)
    np.save(rows_path, X)
    script = directory / "cold_start.py"
    script.write_text(COLD_SCRIPT)
    labels = {
        "onnx": "onnxruntime: import, load the ONNX file (float32), run",
        "sklearn": "scikit-learn: unpickle its own RandomForestClassifier, predict",
        "ours": "obliquetrees: unpickle the converted forest, predict",
    }
    expected = sk.predict(X).tolist()
    runs_of = {kind: [] for kind in labels}
    for r in range(warmup + runs):
        for kind in labels:
            argv = [sys.executable, str(script), kind, str(files[kind]), str(rows_path)]
            result = _process(argv, directory / f"cold_{kind}.out")
            if result[2]["labels"] != expected:
                raise AssertionError(f"{kind} cold start predicted other labels than sklearn")
            if r >= warmup:
                runs_of[kind].append(result)
        log(f"cold start round {r + 1}/{warmup + runs}" + (" (warm-up)" if r < warmup else ""))

    def spread(values, digits=3):
        return (
            f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})"
        )

    base = [r[0] for r in runs_of["sklearn"]]
    table = []
    for kind, label in labels.items():
        rs = runs_of[kind]
        ratios = [r[0] / b for r, b in zip(rs, base, strict=True)]
        table.append(
            {
                "process": label,
                "file MB": files[kind].stat().st_size / 1e6,
                "wall s, median (min-max)": spread([r[0] for r in rs]),
                "cpu s": statistics.median(r[1] for r in rs),
                "peak MB": statistics.median(r[2]["peak MB"] for r in rs),
                "import s": statistics.median(r[2]["import s"] for r in rs),
                "load s": statistics.median(r[2]["load s"] for r in rs),
                "predict s": statistics.median(r[2]["predict s"] for r in rs),
                "wall / scikit-learn's, round by round": spread(ratios, 2),
                "numba imported": rs[0][2]["numba"],
            }
        )
        log(table[-1])
    ratios = [r[0] / b for r, b in zip(runs_of["onnx"], base, strict=True)]
    ratio = statistics.median(ratios)
    verdict = "meets" if ratio < 1 else "MISSES"
    acceptance = (
        f"Cold start (issue 21): onnxruntime process / scikit-learn process, wall time, median "
        f"of {runs} rounds = {ratio:.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}; "
        f"onnxruntime faster in {sum(x < 1 for x in ratios)} of {runs} rounds): {verdict} "
        "'faster than scikit-learn'."
    )
    return table, acceptance


# ----------------------------------------------------------------------- main
def add_arguments(parser):
    """The arguments of ``python -m benchmarks onnx``."""
    parser.add_argument(
        "--models",
        nargs="*",
        choices=list(MODELS),
        default=list(MODELS),
        help="models to measure (default: all; the cold start needs rf)",
    )
    parser.add_argument("--rows", type=int, default=None, help="rows predicted (100000)")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per method (5)")
    parser.add_argument(
        "--onnx-batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"rows per onnxruntime call (default {DEFAULT_BATCH})",
    )
    parser.add_argument("--cold-runs", type=int, default=None, help="counted rounds (21)")
    parser.add_argument("--cold-warmup", type=int, default=None, help="uncounted rounds first (2)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: small models, 10000 rows, 2 repeats, 1 + 3 cold rounds (temp directory)",
    )
    parser.add_argument("--out", default=None, help="markdown file (default results/onnx.md)")


def main(args):
    import onnxruntime

    n_rows = args.rows or (10_000 if args.quick else 100_000)
    repeat = args.repeat or (2 if args.quick else 5)
    cold_runs = args.cold_runs or (3 if args.quick else 21)
    cold_warmup = args.cold_warmup if args.cold_warmup is not None else (1 if args.quick else 2)
    if args.out:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.gettempdir(), "obliquetrees-bench", "onnx.md")
    else:
        out = Path("onnx.md")
    started = time.perf_counter()

    def log(item):
        print(item, flush=True)

    rows, agreement, sizes, cold_rows, acceptance, choice = [], [], [], [], "", []
    with tempfile.TemporaryDirectory(prefix="bench-onnx-") as tmp:
        directory = Path(tmp)
        for key in args.models:
            row, sk, ours, X_test = fit_model(key, args.quick, log)
            agree, size = throughput(row, sk, ours, X_test, n_rows, repeat, args.onnx_batch, log)
            rows.append(row)
            agreement += agree
            sizes.append(size)
            if key == "rf":
                cold_rows, acceptance = cold_start(
                    sk, ours, X_test, directory, cold_runs, cold_warmup, log
                )
            if key == "co2":
                choice = routing_choice(ours, row["model"], X_test, repeat, args.quick, log)
            del sk, ours
    minutes = (time.perf_counter() - started) / 60
    quick = args.quick
    rf_trees = (MODELS["rf"][3] if quick else MODELS["rf"][2])["n_estimators"]
    quick_note = (
        "**QUICK smoke run** (`--quick`): small models, fewer rows and repeats; it shows that the "
        "benchmark runs, its figures are not the results of issue 21 (the full run: "
        "`python -m benchmarks onnx`)."
        if quick
        else ""
    )
    notes = f"""
{quick_note}

onnxruntime {onnxruntime.__version__}. Every time is wall-clock on one core: scikit-learn and our
predict with n_jobs=1, onnxruntime with intra_op_num_threads=1 and inter_op_num_threads=1, BLAS
(threadpoolctl) and numba limited to 1 thread; "cpu/wall" is the process time over the wall time of
the timed calls (1 = one busy core). Throughput: {n_rows} rows drawn with replacement from the test
part of the data set (seed 0), median of {repeat} interleaved runs per method after one warm-up
call each; onnxruntime runs the rows in calls of "ONNX batch" rows. "ONNX routing": how the graph
routes the model: converted scikit-learn trees with a tree ensemble on the raw features; oblique
forests either with every oblique split's margin computed by one matrix product and a tree ensemble
on those margins, or, for deep forests with far more splits than a row visits, by a walk level by
level that gathers each visited split's weights (the rule: obliquetrees.onnx._parts.WALK_RATIO and
MAX_MARGINS; the "Routing choice" table measures both ways); soft routing level by level; hinge
forests their forward pass. "to_onnx s": the export itself. Agreement: the outputs of the timed
onnxruntime runs against our predict_proba (probabilities; "max abs diff") and predict (labels) on
the same rows; regressors: against predict, the largest difference also relative to the largest
prediction. The last row of the forest compares scikit-learn with our conversion. Cold start: a
fresh Python process predicting the first {COLD_ROWS} test rows of letter with the {rf_trees}-tree
forest, {cold_runs} counted rounds after {cold_warmup} uncounted warm-up round(s), the three
processes in turn; "wall" is measured around the process by the parent, "cpu" (user + system) is
the operating system's accounting of the reaped child, "peak" the child's own peak resident memory
(VmHWM, read by the child at its end); "import", "load" and "predict" are timed inside the child
(import: numpy and the runtime or scikit-learn/obliquetrees; load: the session or the unpickling).
scikit-learn's model is pickled with n_jobs=None (one thread, as deployed), pickle protocol 5. Run
time {minutes:.1f} min.

{acceptance}
"""
    notes = "\n\n".join(
        textwrap.fill(" ".join(part.split()), 100, break_on_hyphens=False)
        for part in notes.split("\n\n")
    )
    tables = [
        ("Predict throughput (one core)", rows),
        ("Agreement of onnxruntime with predict", agreement),
        ("Model file sizes", sizes),
    ]
    if choice:
        tables.append(
            (f"Routing choice: hard forests exported both ways, {ROUTING_ROWS} rows", choice)
        )
    if cold_rows:
        tables.append((f"Cold start: a fresh process predicting {COLD_ROWS} rows", cold_rows))
    path = write_results(
        out,
        "ONNX export: onnxruntime vs predict vs scikit-learn"
        + (" (QUICK smoke run)" if quick else ""),
        tables,
        notes,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("onnx")
