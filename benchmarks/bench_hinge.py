"""Random hinge forests and ferns (Lay et al.) on the paper's data sets.

Sections, all written to ``benchmarks/results/hinge.md``:

speed
    One epoch over letter_uci (16000 rows, batch 50 = 320 steps) of the
    paper's Table 3 model: 100 depth-10 trees, 100 inner-product features,
    26 outputs per leaf summed over trees (2.9 M parameters). Ours with lazy
    Adam, dense Adam and AdaGrad, trees and ferns, 1 and 2 numba threads;
    the straightforward vectorised numpy forward/backward of
    ``tests/reference.py`` (``hinge_train_step``, timed on a few batches and
    scaled to 320); and the kernels alone (forward, backward + step) to show
    what dominates. The authors' C++/PyTorch code measured on this machine is
    quoted from ../shared/ANCHORS.md section 5b (6.7 s per epoch).

table3
    letter_uci (16000/4000) and usps (7291/2007): 100 trees/ferns of depth
    10, 100 inner-product features, summed head, Adam at the paper's
    learning rate 0.005, the paper's batch sizes (letter 53, usps 29),
    ``early_stopping`` on a 10 % validation split of the training data (the
    paper kept the best *test* epoch; we never look at the test set while
    training), up to ``max_epochs``. Lazy Adam (our default) and dense Adam
    (the paper's) side by side for trees. scikit-learn RandomForestClassifier
    (100 trees, depth 10 as in the paper's Table 2, and unlimited depth) in
    the same process on the same split.

table2
    The paper's UCI protocol: configurations trees {1, 10, 50, 100} x depth
    {1, 3, 5, 7, 10} (madelon, poker: reduced grids, see the notes), chosen per run
    by the validation loss of the estimator's own validation split (the same
    split for every configuration: same random_state); AdaGrad with one
    learning rate (0.05; poker: chosen from {0.05, 0.5} on validation), 100
    inner-product features, the
    reference code's linear head over scalar tree outputs. iris: 5 shuffles x
    3 folds (test fold; the other two folds are train + validation, as in the
    paper) = 15 runs, batch 10 for up to 1000 epochs with patience 100
    (chosen on validation loss over alternatives, see the notes); abalone:
    the UCI split (3133/1044), a third of the training part for validation,
    3 classes rings < 9 / 9-10 / > 10 as the reference code; abalone
    regression: squared loss, R^2; madelon: official train/valid sets as
    train/test, a quarter of train for validation;
    poker: only the 25010-row training file exists: a seeded 20 % test split,
    a quarter of the rest for validation. RandomForest (100 trees, depth 10,
    as in the paper) on the same train + validation rows. Beside the
    validation-chosen result, the column "best config by mean test score"
    gives the configuration whose mean *test* score over the runs is best:
    optimistic, but the rule behind the paper's Table 2 ("the best performing
    models"; checked on the authors' iris logs, see the notes); it is not our
    result, only a like-for-like view.

memory
    Peak RSS of a default fit above the RSS before it, on 10k, 30k and 100k
    rows of the scale benchmark's synthetic data: cold (as the scale
    benchmark) and after a warm-up fit, with the sizes of the fitted forest
    and of the training state (:data:`MEMORY_NOTES`).

    python -m benchmarks hinge            # all sections (about 1 h on a quiet machine)
    python -m benchmarks hinge --quick    # smoke test (minutes)
    python -m benchmarks hinge --sections table2_iris,table2_poker   # a subset
    python -m benchmarks hinge --assemble-only   # rebuild hinge.md, no measuring

Every section stores its tables in ``benchmarks/results/hinge.json`` (replacing
its previous measurement; with its command, revision, versions, CPU, threads
and the load sampled during the section) and ``hinge.md`` is rebuilt from all
stored sections, so sections can be re-measured separately.
"""

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import r2_score

from benchmarks.common import (
    RESULTS_DIR,
    LoadSampler,
    locked,
    provenance,
    write_results,
)
from benchmarks.datasets import load
from obliquetrees import HingeForestClassifier, HingeForestRegressor

PAPER_T3 = {  # data set -> (hinge forest, hinge ferns, ADF, NDF) test error %
    "letter_uci": (2.56, 2.78, 3.42, 2.92),
    "usps": (5.53, 5.64, 5.59, 5.01),
}
PAPER_T2 = {  # data set -> (forest, config, ferns, config, RF)
    "iris": ("2.13 (2.66)", "10/5", "2.27 (2.25)", "10/5", "4.13 (2.33)"),
    "abalone3": ("34.4 (0.56)", "50/1", "34.4 (0.56)", "50/1", "34.8 (0.40)"),
    "abalone_reg": ("R2 0.57 (0.07)", "100/1", "R2 0.57 (0.07)", "100/1", "R2 0.54 (0.01)"),
    "madelon": ("40.8 (1.60)", "10/3", "40.8 (1.41)", "50/7", "29.3 (1.13)"),
    "poker": ("32.6 (4.80)", "50/3", "33.9 (4.70)", "100/3", "40.4 (0.18)"),
}
AUTHORS_EPOCH_S = 6.7  # ../shared/ANCHORS.md section 5b


# ------------------------------------------------------------------ speed
def _letter_arrays():
    d = load("letter_uci")
    return (
        d["X_train"].astype(np.float64),
        d["y_train"].astype(np.int64),
        d["X_test"],
        d["y_test"],
    )


def bench_speed(quick):
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads
    from obliquetrees.hinge import _forward as HF
    from obliquetrees.hinge import _kernels as K
    from obliquetrees.hinge import training as H
    from tests import reference as R

    X, y, _, _ = _letter_arrays()
    n = X.shape[0]
    M = 30 if quick else 100
    mean, scale = X.mean(0), X.std(0)
    Z = np.ascontiguousarray((X - mean) / scale)
    Yi, Yf = H._targets(y, "classification")
    w = np.ones(n)
    rows = []
    reps = 1 if quick else 3

    def params(tree_type="tree", opt="lazy_adam"):
        return H.HingeParams(
            task="classification",
            n_estimators=M,
            max_depth=10,
            tree_type=tree_type,
            n_hinge_features=100,
            head="sum",
            optimizer=opt,
            learning_rate=0.005,
            batch_size=50,
            max_epochs=1,
            n_iter_no_change=20,
            verbose=0,
            monotonic_cst=None,
        )

    def new_model(tree_type):
        return H.init_model(16, 26, params(tree_type), mean, scale, 0)

    ours = {}
    configs = [
        ("tree", "lazy_adam"),
        ("tree", "adam"),
        ("tree", "adagrad"),
        ("fern", "lazy_adam"),
        ("fern", "adam"),
    ]
    for tree_type, opt in configs:
        for n_threads in (1, 2):
            model = new_model(tree_type)
            rng = np.random.default_rng(0)
            walls, cpus = [], []
            with threadpool_limits(1, "blas"), numba_threads(n_threads):
                H.run_epoch(
                    model, Z, Yi, Yf, w, rng.permutation(n)[:500], params(tree_type, opt)
                )  # compile / warm-up
                for _ in range(reps):
                    order = rng.permutation(n)
                    t0, c0 = time.perf_counter(), time.process_time()
                    H.run_epoch(model, Z, Yi, Yf, w, order, params(tree_type, opt))
                    walls.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
            ours[(tree_type, opt, n_threads)] = float(np.median(walls))
            rows.append(
                {
                    "implementation": f"ours, {tree_type}s, {opt}",
                    "numba threads": n_threads,
                    "s/epoch (wall, median)": round(float(np.median(walls)), 3),
                    "CPU s/epoch": round(float(np.median(cpus)), 3),
                    "epochs timed": reps,
                }
            )
    # numpy reference (tests/reference.py), a few batches scaled to 320
    n_batches = 3 if quick else 8
    for opt in ("adam", "lazy_adam"):
        model = new_model("tree")
        ref = {
            "A": model.A.copy(),
            "bn_mean": np.zeros(100),
            "bn_var": np.ones(100),
            "thr": model.thr.copy(),
            "feat": model.feat,
            "W": model.W.copy(),
            "depth": 10,
            "is_fern": False,
            "t": 0,
        }
        Hf = Z[:50] @ ref["A"].T
        ref["bn_mean"], ref["bn_var"] = Hf.mean(0), Hf.var(0, ddof=1)
        for name in ("A", "thr", "W"):
            ref[name + "_1"] = np.zeros_like(ref[name])
            ref[name + "_2"] = np.zeros_like(ref[name])
        with threadpool_limits(1, "blas"):
            R.hinge_train_step(ref, Z[:50], y[:50], 0.005, opt)
            t0, c0 = time.perf_counter(), time.process_time()
            for b in range(1, n_batches + 1):
                sl = slice(50 * b, 50 * b + 50)
                R.hinge_train_step(ref, Z[sl], y[sl], 0.005, opt)
            wall = (time.perf_counter() - t0) * (n // 50) / n_batches
            cpu = (time.process_time() - c0) * (n // 50) / n_batches
        ours[("numpy", opt)] = wall
        rows.append(
            {
                "implementation": f"numpy reference (tests/reference.py), trees, {opt}",
                "numba threads": "-",
                "s/epoch (wall, median)": round(wall, 2),
                "CPU s/epoch": round(cpu, 2),
                "epochs timed": f"{n_batches} batches x {n // 50 / n_batches:.0f}",
            }
        )
    rows.append(
        {
            "implementation": "authors' HingeTreeForTorch (C++/PyTorch), ANCHORS.md 5b",
            "numba threads": "2 (torch)",
            "s/epoch (wall, median)": AUTHORS_EPOCH_S,
            "CPU s/epoch": "-",
            "epochs timed": 5,
        }
    )
    # kernels alone, one thread: what dominates an epoch
    prof = []
    model = new_model("tree")
    B = 50
    out = np.empty((B, 26))
    leaf = np.empty((B, M), np.int64)
    rstar = np.empty((B, M))
    vstar = np.empty((B, M), np.int64)
    walk = (leaf, rstar, vstar)
    grads = (
        np.empty((M, B, 26)),
        np.empty((M, B)),
        np.empty((M, B + 1), np.int64),
        np.empty((M, B + 1), np.int64),
        np.empty((B, M)),
        np.empty((B, M), np.int64),
    )
    slots = (np.full((1, 2**10), -1, np.int32), np.full((1, 2**10 - 1), -1, np.int32))
    G = np.random.default_rng(0).normal(size=(B, 26)) / B
    hp = np.array([0.005, 0.9, 0.999, 1e-8, 0.005, 1.0])
    Hf = Z[:B] @ model.A.T
    model.bn_mean, model.bn_var = Hf.mean(0), Hf.var(0)
    nb = n // B
    with threadpool_limits(1, "blas"), numba_threads(1):
        for opt_name, opt in (("lazy_adam", 1), ("adam", 0)):
            st = H._init_opt_state(model, opt_name)
            tf = tb = 0.0
            for b in range(nb):
                U = np.ascontiguousarray(HF.hinge_features(model, Z[b * B : (b + 1) * B]))
                c0 = time.process_time()
                K.forward(U, model.thr, model.feat, model.W, 10, False, 0, out, walk, True)
                c1 = time.process_time()
                moments = (st["W_1"], st["W_2"], st["thr_1"], st["thr_2"])
                optim = (opt, moments, hp)
                K.backward_update(
                    G, walk, model.feat, model.thr, model.W, 0, slots, grads, True, optim
                )
                c2 = time.process_time()
                tf += c1 - c0
                tb += c2 - c1
            prof.append(
                {
                    "kernel (1 thread, 320 batches, CPU s)": "forward (traversal + leaf gather)",
                    "optimizer": opt_name,
                    "CPU s/epoch": round(tf, 3),
                }
            )
            prof.append(
                {
                    "kernel (1 thread, 320 batches, CPU s)": "backward + tree optimiser step",
                    "optimizer": opt_name,
                    "CPU s/epoch": round(tb, 3),
                }
            )
    return rows, prof, ours


# ----------------------------------------------------------------- table 3
def _rf_error(Xtr, ytr, Xte, yte, depth):
    t0 = time.perf_counter()
    rf = RandomForestClassifier(100, max_depth=depth, n_jobs=2, random_state=0).fit(Xtr, ytr)
    return 100 * (1 - rf.score(Xte, yte)), time.perf_counter() - t0


def bench_table3(name, quick):
    rows = []
    batch = {"letter_uci": 53, "usps": 29}
    d = load(name)
    Xtr, ytr, Xte, yte = d["X_train"], d["y_train"], d["X_test"], d["y_test"]
    variants = [("tree", "lazy_adam"), ("fern", "lazy_adam")]
    if name == "letter_uci":
        variants.append(("tree", "adam"))
    for tree_type, opt in variants:
        est = HingeForestClassifier(
            30 if quick else 100,
            max_depth=10,
            tree_type=tree_type,
            n_hinge_features=100,
            feature_screening=False,  # the paper's layer reads every input
            optimizer=opt,
            learning_rate=0.005,
            batch_size=batch[name],
            max_epochs=4 if quick else (60 if opt == "adam" else 100),
            n_iter_no_change=20,
            early_stopping=True,
            validation_fraction=0.1,
            random_state=0,
            n_jobs=1,
        )
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        total = time.perf_counter() - t0
        err = 100 * (1 - est.score(Xte, yte))
        paper = PAPER_T3[name][0 if tree_type == "tree" else 1]
        rows.append(
            {
                "data set": name,
                "model": f"hinge {tree_type}s, {opt}",
                "test error %": round(err, 2),
                "paper %": paper,
                "epochs run": est.n_iter_,
                "best epoch (val loss)": est.best_epoch_,
                "s/epoch (median)": round(float(np.median(est.epoch_times_)), 2),
                "total fit s": round(total, 1),
            }
        )
        print(rows[-1], flush=True)
    for depth in (10, None):
        err, sec = _rf_error(Xtr, ytr, Xte, yte, depth)
        rows.append(
            {
                "data set": name,
                "model": f"sklearn RandomForest, 100 trees, max_depth={depth}",
                "test error %": round(err, 2),
                "paper %": "-",
                "epochs run": "-",
                "best epoch (val loss)": "-",
                "s/epoch (median)": "-",
                "total fit s": round(sec, 1),
            }
        )
    rows.append(
        {
            "data set": name,
            "model": "paper: alternating decision forest / neural decision forest",
            "test error %": "-",
            "paper %": f"{PAPER_T3[name][2]} / {PAPER_T3[name][3]}",
            "epochs run": "-",
            "best epoch (val loss)": "-",
            "s/epoch (median)": "-",
            "total fit s": "-",
        }
    )
    return rows


# ------------------------------------------------------------------ scale
#: The child of the scale sections: one fit on synthetic data in a fresh process
#: (the threading layer and OpenMP's wait policy are fixed when a process loads them).
SCALE_CHILD = """
import json, resource, sys, time
import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from obliquetrees import HingeForestClassifier

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

n, n_jobs, kw, rf = json.loads(sys.argv[1])
X, y = make_classification(n_samples=int(n / 0.8), n_features=40, n_informative=20,
                           n_classes=5, random_state=0)
Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
# compile (or load the kernels) outside the timing
HingeForestClassifier(3, max_depth=2, max_epochs=1, n_jobs=n_jobs).fit(Xtr[:300], ytr[:300])
c0, t0 = cpu(), time.perf_counter()
est = HingeForestClassifier(random_state=0, n_jobs=n_jobs, **kw).fit(Xtr, ytr)
out = {"cpu": cpu() - c0, "wall": time.perf_counter() - t0, "acc": est.score(Xte, yte),
       "epochs": est.n_iter_, "best": est.best_epoch_}
import numba
out["layer"] = numba.threading_layer()
if rf:
    c0, t0 = cpu(), time.perf_counter()
    forest = RandomForestClassifier(30, random_state=0, n_jobs=n_jobs).fit(Xtr, ytr)
    out.update(rf_cpu=cpu() - c0, rf_wall=time.perf_counter() - t0, rf_acc=forest.score(Xte, yte))
print(json.dumps(out))
"""
#: Busy processes that load the machine in the "loaded" runs (pure-Python spin loops).
N_BUSY = 2


def _scale_child(n, n_jobs, kw, rf=False, env=None, loaded=False):
    """Run :data:`SCALE_CHILD` (with ``N_BUSY`` spinning processes beside it if ``loaded``)."""
    import subprocess
    import sys

    from benchmarks.common import ROOT

    # the OpenMP policy is only what ``env`` asks for, never the caller's
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env = dict(base, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    busy = []
    if loaded:  # same niceness as this process, so they compete as equals
        busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(N_BUSY)]
    try:
        load0 = os.getloadavg()[0]
        done = subprocess.run(
            [sys.executable, "-c", SCALE_CHILD, json.dumps([n, n_jobs, kw, rf])],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        load1 = os.getloadavg()[0]
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    if done.returncode != 0:
        raise RuntimeError(f"scale child failed:\n{done.stderr}")
    return {**json.loads(done.stdout.splitlines()[-1]), "load": f"{load0:.1f}-{load1:.1f}"}


#: The OpenMP wait policies compared: unset (the package's passive default) and ACTIVE.
#: An empty value makes libgomp warn and keep its own default (spin ~300000 rounds, then
#: sleep), and makes the package leave the policy alone: the behaviour before it chose one.
OMP_POLICIES = {
    "package default (passive)": {},
    "libgomp default (spin, then sleep)": {"OMP_WAIT_POLICY": ""},
    "OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
}


def bench_scale_threads(quick):
    """Process CPU of a fixed number of epochs on an idle vs a loaded machine, per layer."""
    n = 2000 if quick else 10000
    epochs = 2 if quick else 8
    kw = {"max_epochs": epochs, "early_stopping": False}
    # (wait policy, n_jobs, environment of the child): the package's layer at 1 and 2
    # threads, then OpenMP forced, under each wait policy
    configs = [("-", 1, {}), ("-", 2, {})]
    configs += [
        (policy, 2, {"NUMBA_THREADING_LAYER": "omp", **env}) for policy, env in OMP_POLICIES.items()
    ]
    rows = []
    for policy, jobs, env in configs:
        idle = _scale_child(n, jobs, kw, env=env)
        loaded = _scale_child(n, jobs, kw, env=env, loaded=True)
        rows.append(
            {
                "threading layer": idle["layer"],
                "wait policy": policy,
                "n_jobs": jobs,
                "CPU s idle": round(idle["cpu"], 2),
                "CPU s loaded": round(loaded["cpu"], 2),
                "loaded / idle": round(loaded["cpu"] / idle["cpu"], 2),
                "wall s idle": round(idle["wall"], 2),
                "wall s loaded": round(loaded["wall"], 2),
                "load idle": idle["load"],
                "load loaded": loaded["load"],
            }
        )
        print(rows[-1], flush=True)
    return rows, n, epochs


def _scale_threads_notes(rows, n, epochs):
    """The notes of the scale_threads section, computed from its rows."""
    spinning = [k for k in OMP_POLICIES if k != "package default (passive)"]
    worst = max(r["loaded / idle"] for r in rows if r["wait policy"] not in spinning)
    omp = {r["wait policy"]: r for r in rows if r["wait policy"] in OMP_POLICIES}
    passive = omp["package default (passive)"]
    spin = omp["libgomp default (spin, then sleep)"]
    saving = (spin["CPU s idle"] + spin["CPU s loaded"]) / (
        passive["CPU s idle"] + passive["CPU s loaded"]
    )
    notes = (
        f"\nThreads on a loaded machine: {epochs} epochs of HingeForestClassifier() "
        f"(early_stopping=False) on {n} synthetic rows (40 features, 5 classes), process "
        f"CPU s, each run in a fresh process; 'loaded' runs {N_BUSY} spinning Python "
        "processes beside it (on top of whatever else the machine runs: see the load "
        "columns; 'idle' is only as idle as the shared machine was). Training launches "
        "two parallel regions per 50-row minibatch (forward over samples, backward over "
        "trees). GNU OpenMP's workers spin between regions by default and, descheduled "
        "by the competing processes, burn their time slices waiting: the 'libgomp "
        "default' row (the package's behaviour before) and, forced, the ACTIVE row. "
        "The package now loads OpenMP with the passive "
        "policy (`obliquetrees/_core/_jit.py`; TBB, the layer it prefers, parks its "
        f"workers itself). Worst loaded / idle CPU ratio of the package's defaults: {worst}. "
        "Where the machine was already busy without the extra processes (see 'load "
        "idle'), the spinning policies spin in the 'idle' run too, so compare the rows: "
        f"OpenMP's own default took {saving:.1f}x the CPU of the passive policy (idle and "
        "loaded runs summed).\n"
    )
    return notes


def bench_scale_synthetic(quick):
    """HingeForestClassifier() defaults beside RandomForestClassifier(30), same process."""
    runs = [(2000, 1), (2000, 2)] if quick else [(10000, 1), (10000, 2), (30000, 1), (30000, 2)]
    runs += [] if quick else [(100000, 1)]  # one thread only: the largest fit is long
    rows = []
    for n, jobs in runs:
        r = _scale_child(n, jobs, {"max_epochs": 3} if quick else {}, rf=True)
        rows.append(
            {
                "rows": n,
                "n_jobs": jobs,
                "hinge CPU s": round(r["cpu"], 1),
                "hinge wall s": round(r["wall"], 1),
                "epochs run": r["epochs"],
                "best epoch": r["best"],
                "hinge acc": round(r["acc"], 4),
                "RF(30) CPU s": round(r["rf_cpu"], 1),
                "RF(30) wall s": round(r["rf_wall"], 1),
                "RF(30) acc": round(r["rf_acc"], 4),
                "CPU ratio hinge / RF": round(r["cpu"] / r["rf_cpu"], 2),
                "load": r["load"],
            }
        )
        print(rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------- memory
#: The child of the memory section: one fit in a fresh process, as ``python -m benchmarks
#: scale`` (numba and the estimator imported, data loaded, peak reset just before the fit).
MEMORY_CHILD = """
import ctypes, gc, json, sys, time
import numpy as np
import numba
from benchmarks.bench_scale import load_data, rss_mb
from obliquetrees import HingeForestClassifier
from obliquetrees._core.tree import ARRAY_NAMES

data, warm_up, kw = sys.argv[1], sys.argv[2] == "1", json.loads(sys.argv[3])
X, y, X_test, y_test = load_data(data)

def trim():  # freed heap pages back to the OS, so the baseline holds only live memory
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)

out, start = {}, rss_mb()
if warm_up:
    # the forward kernel on a one-node tree: numba's runtime and thread pool start
    from obliquetrees.hinge import _kernels as K
    i64 = np.zeros((1, 1), np.int64)
    K.forward(np.zeros((1, 1)), np.zeros((1, 1)), i64, np.zeros((1, 2, 1)), 1, False, 0,
              np.zeros((1, 1)), (i64, np.zeros((1, 1)), i64.copy()), False)
    trim()
    out["numba runtime + forward kernel MB"] = rss_mb() - start
    HingeForestClassifier(n_jobs=2, random_state=0, **kw).fit(X[:500], y[:500])
    trim()
    out["warm-up MB"] = rss_mb() - start
before = rss_mb()
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
cpu = time.process_time()
est = HingeForestClassifier(n_jobs=2, random_state=0, **kw).fit(X, y)
out["fit CPU s"] = time.process_time() - cpu
out["above data MB"] = rss_mb("VmHWM") - before
out["forest MiB"] = sum(getattr(est.forest_, n).nbytes for n in ARRAY_NAMES) / 2**20
def nbytes(v):
    if isinstance(v, dict):
        return sum(nbytes(x) for x in v.values())
    return v.nbytes if isinstance(v, np.ndarray) else 0
out["HingeModel MiB"] = nbytes(vars(est._model)) / 2**20
out["X MB"] = X.nbytes / 2**20
out["accuracy"] = float(np.mean(est.predict(X_test) == y_test))
print(json.dumps(out))
"""


def bench_memory(quick):
    """Peak RSS of a default fit above the RSS before it, cold and after a warm-up fit."""
    from benchmarks.bench_scale import write_synthetic
    from benchmarks.common import run_python

    write_synthetic()
    sizes = [10_000] if quick else [10_000, 30_000, 100_000]
    kw = {"max_epochs": 2} if quick else {}
    rows = []
    for n in sizes:
        for warm_up in (False, True):
            load0 = os.getloadavg()[0]
            done = run_python(MEMORY_CHILD, f"synthetic-{n}", str(int(warm_up)), json.dumps(kw))
            if done.returncode != 0:
                raise RuntimeError(f"memory child failed:\n{done.stderr}")
            r = json.loads(done.stdout.splitlines()[-1])
            bound = 4 * r["X MB"] + 100
            rows.append(
                {
                    "rows": n,
                    "baseline": "after a warm-up fit" if warm_up else "cold (as scale)",
                    "above data MB": round(r["above data MB"], 1),
                    "4 X + 100 MB": round(bound, 1),
                    "holds": r["above data MB"] <= bound,
                    "forest MiB": round(r["forest MiB"], 1),
                    "HingeModel MiB": round(r["HingeModel MiB"], 1),
                    **{
                        k: round(r[k], 1) if warm_up else "-"
                        for k in ("numba runtime + forward kernel MB", "warm-up MB")
                    },
                    "fit CPU s": round(r["fit CPU s"], 1),
                    "accuracy": round(r["accuracy"], 4),
                    "load": f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
                }
            )
            print(rows[-1], flush=True)
    return rows


MEMORY_NOTES = """
Memory: HingeForestClassifier(n_jobs=2) with its defaults (100 trees of depth 10, 100 hinge
features) on the scale benchmark's synthetic sets (``python -m benchmarks scale``: 40
features, 5 classes, the same rows), one fresh process per fit, which imports numba and the
estimator and loads the data before its baseline; "above data MB" is the fit's peak RSS
(``VmHWM``, reset just before the fit) minus the RSS before it, as in the scale benchmark.
"cold" is exactly the scale benchmark's measurement. "after a warm-up fit": before the
baseline the process runs the forward kernel once ("numba runtime + forward kernel MB":
numba's runtime, initialised on a process's first kernel, and its thread pool) and then
fits the first 500 rows ("warm-up MB": everything the two left resident, i.e. also the
training kernel), frees that model and returns free heap pages to the OS; the fit's peak
is then its own memory. "forest MiB" is the fitted forest's arrays (the stored trees: per
split one weight, index and missing-value term per input feature), "HingeModel MiB" the
training state kept for ``warm_start``/``partial_fit`` (parameters, Adam moments,
bookkeeping); neither depends on the number of rows. Issue 17's bound is
4 X + 100 MB.
"""


# --------------------------------------------------------- early stopping
#: Patience before (the earlier default) and now (the estimators' default).
OLD_PATIENCE = 20


def _synthetic(n):
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(
        n_samples=int(n / 0.8), n_features=40, n_informative=20, n_classes=5, random_state=0
    )
    return train_test_split(X, y, test_size=0.2, random_state=0)


def bench_early_stopping(quick):
    """The same fits with patience 20 and the default patience: epochs, best epoch, test error.

    Training is deterministic and patience only decides when to stop, so both
    fits follow the same path until the earlier one stops.
    """
    default = HingeForestClassifier().n_iter_no_change
    cases = []
    for name, batch in (("letter_uci", 53), ("usps", 29)):
        d = load(name)
        for tree_type in ("tree", "fern"):
            kw = dict(
                n_estimators=10 if quick else 100,
                max_depth=4 if quick else 10,
                tree_type=tree_type,
                batch_size=batch,
            )
            data = (d["X_train"], d["y_train"], d["X_test"], d["y_test"])
            cases.append((f"{name}, hinge {tree_type}s", data, kw))
    for n in (2000,) if quick else (10000, 30000):
        Xtr, Xte, ytr, yte = _synthetic(n)
        cases.append((f"synthetic {n} rows, defaults", (Xtr, ytr, Xte, yte), {}))
    rows = []
    for label, (Xtr, ytr, Xte, yte), kw in cases:
        row = {"data set, model": label}
        for patience in (OLD_PATIENCE, default):
            c0 = time.process_time()
            est = HingeForestClassifier(
                max_epochs=8 if quick else 100,
                n_iter_no_change=patience,
                random_state=0,
                n_jobs=1,
                **kw,
            ).fit(Xtr, ytr)
            cpu = time.process_time() - c0
            row[f"patience {patience}: epochs / best"] = f"{est.n_iter_} / {est.best_epoch_}"
            row[f"patience {patience}: test error %"] = round(100 * (1 - est.score(Xte, yte)), 2)
            row[f"patience {patience}: CPU s"] = round(cpu, 1)
        old, new = (row[f"patience {p}: test error %"] for p in (OLD_PATIENCE, default))
        row["error change (points)"] = round(new - old, 2)
        rows.append(row)
        print(rows[-1], flush=True)
    return rows, default


# ----------------------------------------------------------------- table 2
def _abalone3(r):
    return np.digitize(r, [9, 11])  # rings < 9, 9-10, > 10


def _table2_runs(name, quick):
    """List of (X_trval, y_trval, X_test, y_test, validation_fraction, task)."""
    if name == "iris":
        d = load("iris")
        X, y = d["X"], d["y"]
        runs = []
        for shuffle in range(2 if quick else 5):
            order = np.random.default_rng(shuffle).permutation(len(y))
            folds = np.array_split(order, 3)
            for f in range(1 if quick else 3):
                te = folds[f]
                tv = np.concatenate([folds[(f + 1) % 3], folds[(f + 2) % 3]])
                runs.append((X[tv], y[tv], X[te], y[te], 0.5, "classification"))
        return runs
    if name in ("abalone3", "abalone_reg"):
        d = load("abalone")
        if name == "abalone3":
            return [
                (
                    d["X_train"],
                    _abalone3(d["y_train"]),
                    d["X_test"],
                    _abalone3(d["y_test"]),
                    1 / 3,
                    "classification",
                )
            ]
        return [(d["X_train"], d["y_train"], d["X_test"], d["y_test"], 1 / 3, "regression")]
    if name == "madelon":
        d = load("madelon")
        return [(d["X_train"], d["y_train"], d["X_test"], d["y_test"], 0.25, "classification")]
    if name == "poker":
        d = load("poker_train")
        X, y = d["X"], d["y"]
        order = np.random.default_rng(0).permutation(len(y))
        n_test = len(y) // 5
        te, tv = order[:n_test], order[n_test:]
        return [(X[tv], y[tv], X[te], y[te], 0.25, "classification")]
    raise ValueError(name)


TABLE2_GRIDS = {
    "iris": [(m, d) for m in (1, 10, 50, 100) for d in (1, 3, 5, 7, 10)],
    "abalone3": [(m, d) for m in (1, 10, 50, 100) for d in (1, 3, 5, 7, 10)],
    "abalone_reg": [(m, d) for m in (1, 10, 50, 100) for d in (1, 3, 5, 7, 10)],
    "madelon": [(m, d) for m in (10, 50, 100) for d in (1, 3, 5, 7)],
    "poker": [(m, d) for m in (10, 50, 100) for d in (1, 3, 5)],
}
TABLE2_EPOCHS = {"iris": 1000, "abalone3": 60, "abalone_reg": 60, "madelon": 60, "poker": 80}
#: early-stopping patience in epochs (default 15)
TABLE2_PATIENCE = {"iris": 100}
TABLE2_BATCH = {"iris": 10}
#: learning rates tried (chosen with the configuration on validation loss)
TABLE2_LRS = {"poker": (0.05, 0.5)}


def _sd(values):
    """Sample standard deviation (ddof 1, as the paper's iris logs), 0 for one run."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def bench_table2(name, quick):
    rows = []
    grids = TABLE2_GRIDS
    epochs = TABLE2_EPOCHS
    grid = [(10, 1), (10, 5)] if quick else grids[name]
    runs = _table2_runs(name, quick)
    t_set = time.perf_counter()
    for tree_type in ("tree", "fern"):
        scores, chosen = [], []
        per_config = {}
        for Xtv, ytv, Xte, yte, vf, task in runs:
            best = None
            for m, depth, lr in [
                (m, d, lr) for m, d in grid for lr in TABLE2_LRS.get(name, (0.05,))
            ]:
                cls = HingeForestClassifier if task == "classification" else HingeForestRegressor
                label = f"{m}/{depth}" + (f" lr {lr}" if name in TABLE2_LRS else "")
                est = cls(
                    m,
                    max_depth=depth,
                    tree_type=tree_type,
                    n_hinge_features=100,
                    feature_screening=False,  # the paper's layer reads every input
                    head="linear",
                    optimizer="adagrad",
                    learning_rate=lr,
                    batch_size=TABLE2_BATCH.get(name, 50),
                    max_epochs=5 if quick else epochs[name],
                    n_iter_no_change=TABLE2_PATIENCE.get(name, 15),
                    validation_fraction=vf,
                    random_state=0,
                    n_jobs=1,
                ).fit(Xtv, ytv)
                val = min(est.validation_loss_curve_)
                if task == "classification":
                    test = 100 * (1 - est.score(Xte, yte))
                else:
                    test = r2_score(yte, est.predict(Xte))
                per_config.setdefault(label, []).append(test)
                if best is None or val < best[0]:
                    best = (val, test, label)
            scores.append(best[1])
            chosen.append(best[2])
        sign = -1 if task == "regression" else 1
        oracle = min(per_config, key=lambda c: sign * np.mean(per_config[c]))
        configs, counts = np.unique(chosen, return_counts=True)
        paper = PAPER_T2[name]
        metric = "R^2" if name == "abalone_reg" else "error %"
        rows.append(
            {
                "data set": name,
                "model": f"hinge {tree_type}s",
                "metric": metric,
                "ours mean (std)": f"{np.mean(scores):.3g} ({_sd(scores):.2g})",
                "runs": len(runs),
                "config chosen (trees/depth: runs)": ", ".join(
                    f"{c}: {k}" for c, k in zip(configs, counts, strict=True)
                ),
                "best config by mean test score (optimistic)": (
                    f"{oracle}: {np.mean(per_config[oracle]):.3g} ({_sd(per_config[oracle]):.2g})"
                ),
                "paper (std)": paper[0] if tree_type == "tree" else paper[2],
                "paper config": paper[1] if tree_type == "tree" else paper[3],
            }
        )
        print(rows[-1], f"{time.perf_counter() - t_set:.0f} s", flush=True)
    rf_scores = []
    for Xtv, ytv, Xte, yte, _, task in runs:
        if task == "classification":
            rf = RandomForestClassifier(100, max_depth=10, n_jobs=2, random_state=0)
            rf_scores.append(100 * (1 - rf.fit(Xtv, ytv).score(Xte, yte)))
        else:
            rf = RandomForestRegressor(100, max_depth=10, n_jobs=2, random_state=0)
            rf_scores.append(rf.fit(Xtv, ytv).score(Xte, yte))
    rows.append(
        {
            "data set": name,
            "model": "sklearn RandomForest (100 trees, depth 10)",
            "metric": "R^2" if name == "abalone_reg" else "error %",
            "ours mean (std)": f"{np.mean(rf_scores):.3g} ({_sd(rf_scores):.2g})",
            "runs": len(runs),
            "config chosen (trees/depth: runs)": "-",
            "best config by mean test score (optimistic)": "-",
            "paper (std)": PAPER_T2[name][4],
            "paper config": "100/10",
        }
    )
    return rows


NOTES = """
Model and protocol: see the module docstring of `benchmarks/bench_hinge.py` and the
estimators' Notes. One run per configuration unless stated (the paper averages 10 runs).
All accuracy fits use one numba thread (`n_jobs=1`; results are identical for any thread
count). Where numba uses OpenMP, the package loads it with `OMP_WAIT_POLICY=PASSIVE`
unless the variable is set (idle workers sleep instead of spinning; see the scale
section).
Timings were taken on a 2-core VM shared with other jobs: wall times are inflated
by contention; CPU times are given beside them.

Deviations from the paper (also in the estimators' docstrings):

- **Lazy Adam by default.** Dense Adam moves all 2.9 M parameters of the Table 3 model at
  every one of 320 steps per epoch (a memory stream of ~0.15 GB per step); lazy Adam moves
  only the leaf rows and thresholds that received a gradient in the batch (at most
  50 x 100 of each) with the global step's bias correction. Accuracy of both is in the
  Table 3 section.
- Validation: early stopping keeps the epoch of lowest validation loss on a held-out part
  of the training data; the paper kept the best *test* epoch of 200 (Table 3). The
  estimators' default patience is 5 epochs (it was 20, which ran 20 epochs past the best
  one on every fit: section "Early stopping"); the Table 3 and Table 2 sections keep the
  patience they were measured with (20; Table 2: 15, iris 100), passed explicitly.
- The raw input is standardised before the linear layer; batch-norm statistics start from
  the first minibatch and follow the reference code's running-average schedule
  (alpha = min(i/(i+1), 0.99)); the linear layer and the linear head use PyTorch's default
  initialisation (as the authors' PyTorch code; their bleak code behind the paper's UCI
  results draws both from N(0, 1): on iris, in the earlier 100-epoch protocol, that gave
  3.87 / 4.27 % (trees / ferns) against 3.87 / 4.13 %, a one-off comparison).
- Table 2: AdaGrad (as the paper) with one learning rate per set: 0.05 for iris, abalone
  and madelon; for poker chosen from {0.05, 0.5} with the configuration on validation loss.
  The authors' own UCI configurations (nslay/bleak @dc844fb,
  `Experiments/VaryingTrees/<set>/Training.ini` and `MakeGraphs.sh`, found after the paper's
  text, which does not give them) use AdaGrad at 0.05 (iris, abalone), 0.01 (madelon), 0.3
  (poker), batch 53 and 40000 steps with a snapshot every 500 kept by validation loss. The
  linear head over scalar tree outputs of the reference code (bleak's Figure 2(a) graph: a
  bias-free 100-feature inner product, batch norm, the forest, an inner product with bias);
  abalone as 3 classes (rings < 9, 9-10, > 10, as the reference code); poker from its
  training file only (seeded 20 % test split). Reduced grids to fit the time budget:
  poker trees {10, 50, 100} x depth {1, 3, 5} with 80 epochs at most (the paper's best
  poker models are depth 3), madelon trees {10, 50, 100} x depth {1, 3, 5, 7}; madelon is
  reported, not a target. iris: the full grid, batch 10 (5 steps per epoch over the 50
  training rows), up to 1000 epochs, patience 100. This protocol was chosen on validation
  loss among three, each run once over the full grid and all 15 runs (a one-off
  comparison, not regenerated by this script; mean over the runs of the chosen
  configuration's validation loss, trees / ferns): batch 10 with at most 100 epochs and
  patience 15 (the earlier protocol; 256 of 600 fits stopped at the epoch cap) 0.067 /
  0.063, full batch (50 rows, the authors' 53 wraps around them) with at most 2000 epochs
  and patience 200 0.063 / 0.061, this one 0.059 / 0.057. The authors trained 40000 steps
  and kept the best of 80 snapshots.
- The paper's iris figure (2.13 % trees, 2.27 % ferns) is not a held-out estimate. The
  authors' iris data script (nslay/bleak @dc844fb, `Experiments/Data/iris/MakeDB.sh`) writes
  the second fold's rows into the third fold's database, so of the three runs of every
  shuffle one validates on its training rows, one *tests on its training rows* and one
  validates on its test rows. Their logs (`Experiments/VaryingTrees/iris/ValidateAndTest.txt`,
  `Experiments/VaryingFerns/iris/ValidateAndTest.txt`) reproduce Table 2 exactly as the
  configuration of lowest mean *test* error over the 20 configurations (trees 10/5: 2.13,
  sample sd 2.67, printed 2.66; ferns 10/5: 2.27 (2.25)); the 5 test-on-training runs
  score 0 errors in almost every configuration. The same rule without those 5 runs gives
  3.20 % (trees, 10/5) and 3.20 % (ferns, 10/1); the mean over all 20 configurations of
  those 10 runs is 4.79 % (trees) and 4.31 % (ferns). Our folds are disjoint and every
  run chooses its configuration on validation loss; the column "best config by mean test
  score" applies the paper's selection rule to our runs. The acceptance row above still
  compares with the printed 2.13 %.
"""


SECTIONS = [
    "speed",
    "scale_threads",
    "scale_synthetic",
    "memory",
    "early_stopping",
    "table3_letter_uci",
    "table3_usps",
    "table2_iris",
    "table2_abalone3",
    "table2_abalone_reg",
    "table2_madelon",
    "table2_poker",
]
SECTIONS_FILE = RESULTS_DIR / "hinge.json"


def _read_sections(path):
    """section -> stored part (provenance, tables, notes, seconds)."""
    text = path.read_text() if path.exists() else ""  # empty: just created by the lock
    return json.loads(text)["sections"] if text.strip() else {}


def _store_section(path, section, part, load):
    """Store (replace) one measured section with its provenance; return all sections."""
    with locked(path):
        sections = _read_sections(path)
        sections[section] = {"provenance": provenance(load=load), **part}
        path.write_text(json.dumps({"sections": sections}, indent=1, default=str))
    return sections


def _run_section(section, quick):
    """Tables and notes of one section."""
    if section == "speed":
        rows, prof, ours = bench_speed(quick)
        tables = [
            (
                "Speed: one epoch of letter_uci (16000 rows, batch 50), 100 trees depth 10, "
                "100 features, 26 outputs",
                rows,
            ),
            ("Where the time goes (kernels alone, one thread)", prof),
        ]
        best = min(v for k, v in ours.items() if k[0] == "tree" and k[1] == "lazy_adam")
        dense = min(v for k, v in ours.items() if k[0] == "tree" and k[1] == "adam")
        notes = (
            f"Speed summary: ours, trees, lazy Adam {best:.2f} s/epoch (wall, best thread "
            f"count) vs the authors' code {AUTHORS_EPOCH_S} s ({AUTHORS_EPOCH_S / best:.1f}x) "
            f"and vs the numpy reference with the same optimiser "
            f"{ours[('numpy', 'lazy_adam')]:.1f} s ({ours[('numpy', 'lazy_adam')] / best:.0f}x); "
            f"dense Adam {dense:.2f} s vs numpy dense {ours[('numpy', 'adam')]:.1f} s "
            f"({ours[('numpy', 'adam')] / dense:.0f}x).\n"
        )
        k = {
            (r["kernel (1 thread, 320 batches, CPU s)"][:7], r["optimizer"]): r["CPU s/epoch"]
            for r in prof
        }
        one = ours[("tree", "lazy_adam", 1)]
        notes += (
            f"\nWhere the time goes (one thread, lazy Adam, epoch {one:.2f} s wall): the forward "
            f"kernel takes {k[('forward', 'lazy_adam')]:.2f} s CPU (per sample and tree a "
            "10-level walk whose loads depend on the previous comparison, latency-bound; four "
            "samples are walked at once for instruction-level parallelism; then a random "
            "26-float leaf-row gather from the 21 MB leaf table) and the backward + step "
            f"{k[('backwar', 'lazy_adam')]:.2f} s (leaf row, its two Adam moments and the "
            "threshold: random read-modify-writes in 64 MB of state); everything else "
            "(gather, the two small GEMMs, batch norm, softmax, input gradient, Adam on the "
            "1600 linear-layer weights) is a few per cent. With dense Adam the step streams "
            f"all 2.9 M parameters and their moments every batch: backward + step "
            f"{k[('backwar', 'adam')]:.2f} s, memory-bound (~0.15 GB per step).\n"
        )
        return tables, notes
    if section == "scale_threads":
        rows, n, epochs = bench_scale_threads(quick)
        notes = _scale_threads_notes(rows, n, epochs)
        return [("Scale: CPU idle vs loaded, per threading layer", rows)], notes
    if section == "memory":
        rows = bench_memory(quick)
        model = rows[0]["forest MiB"] + rows[0]["HingeModel MiB"]
        notes = MEMORY_NOTES + (
            f"The fitted model alone (forest and training state) takes {model:.0f} MiB at "
            "every size: more than the bound's 100 MB constant, so the bound can hold only "
            "where 4 X also covers numba's runtime and kernels (cold) and the fit's "
            "temporaries.\n"
        )
        return [("Memory: peak RSS above the data, defaults", rows)], notes
    if section == "early_stopping":
        rows, default = bench_early_stopping(quick)
        worst = max(r["error change (points)"] for r in rows)
        notes = (
            f"\nEarly stopping: patience {OLD_PATIENCE} (the earlier default, still used by the "
            f"Table 3 section) against the default {default}, everything else the Table 3 "
            "model with lazy Adam (letter_uci, usps: 100 trees/ferns, depth 10, 100 features, "
            "the paper's batch sizes) or the estimator's defaults (synthetic data as in the "
            "scale section); one numba thread, process CPU s of the fit. The validation loss "
            "of the paper's sets plateaus noisily, that of the synthetic set rises after its "
            f"best epoch. Largest rise of the test error: {worst} points.\n"
        )
        return [("Early stopping: patience before and now", rows)], notes
    if section == "scale_synthetic":
        rows = bench_scale_synthetic(quick)
        notes = (
            "\nScale: HingeForestClassifier() with its defaults against "
            "RandomForestClassifier(30) fitted in the same fresh process on "
            "make_classification(n / 0.8 rows, n_features=40, n_informative=20, n_classes=5, "
            "random_state=0), 20 % test split; process CPU s (all threads), wall s, test "
            "accuracy.\n"
        )
        return [("Scale: synthetic 40 features, 5 classes, defaults vs RF(30)", rows)], notes
    kind, name = section.split("_", 1)
    if kind == "table3":
        return [
            (
                f"Table 3: {name} (100 trees/ferns, depth 10, 100 features)",
                bench_table3(name, quick),
            )
        ], ""
    return [
        (f"Table 2: {name} (configuration chosen on validation data)", bench_table2(name, quick))
    ], ""


def _summary(parts):
    """Acceptance view: the better of trees and ferns against the paper's figure."""
    rows = []
    for name, paper in (("letter_uci", 2.56), ("usps", 5.53)):
        part = parts.get(f"table3_{name}")
        if part is None:
            continue
        ours = [r for r in part["tables"][0][1] if r["model"].startswith("hinge")]
        best = min(ours, key=lambda r: r["test error %"])
        rows.append(
            {
                "data set": name,
                "paper (forest) error %": paper,
                "ours, better of trees/ferns": f"{best['test error %']} ({best['model']})",
                "within 1 point": best["test error %"] <= paper + 1.0,
                "ours, best config by mean test score (optimistic)": "-",
            }
        )
    for name, paper in (
        ("iris", 2.13),
        ("abalone3", 34.4),
        ("poker", 32.6),
        ("madelon", 40.8),
        ("abalone_reg", 0.57),
    ):
        part = parts.get(f"table2_{name}")
        if part is None:
            continue
        ours = [r for r in part["tables"][0][1] if r["model"].startswith("hinge")]
        vals = [(float(r["ours mean (std)"].split()[0]), r["model"]) for r in ours]
        key = "best config by mean test score (optimistic)"
        opt = [float(r[key].split(": ")[1].split()[0]) for r in ours if key in r]
        if name == "abalone_reg":
            v, model = max(vals)
            ok = f"R^2 {v} vs 0.57 (no 1-point rule for R^2; better is fine)"
            o = max(opt) if opt else "-"
        else:
            v, model = min(vals)
            ok = v <= paper + 1.0
            o = min(opt) if opt else "-"
        rows.append(
            {
                "data set": name,
                "paper (forest) error %": paper,
                "ours, better of trees/ferns": f"{v} ({model})",
                "within 1 point": ok if name != "madelon" else f"{ok} (reported only)",
                "ours, best config by mean test score (optimistic)": o,
            }
        )
    return rows


def _assemble(parts, quick):
    tables = []
    summary = _summary(parts)
    if summary:
        tables.append(
            ("Summary against the paper (acceptance: no more than 1 point worse)", summary)
        )
    notes = NOTES
    for section in SECTIONS:
        part = parts.get(section)
        if part is None:
            continue
        prov = part["provenance"]
        stamp = (
            f"measured at revision {prov['revision']}, {prov['date']}, "
            f"load {prov['load']}, {part['seconds']:.0f} s"
        )
        for i, (heading, rows) in enumerate(part["tables"]):
            tables.append((f"{heading} ({stamp})" if i == 0 else heading, rows))
        if part["notes"]:
            notes += "\n" + part["notes"]
    target = "hinge.md" if not quick else Path(tempfile.gettempdir()) / "hinge_quick.md"
    return write_results(
        target,
        "Random hinge forest / ferns (Lay et al.)",
        tables,
        notes,
        command="python -m benchmarks hinge --assemble-only",
    )


def add_arguments(parser):
    """The arguments of ``python -m benchmarks hinge``."""
    parser.add_argument("--quick", action="store_true", help="small smoke-test version")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="comma-separated subset of: " + ", ".join(SECTIONS),
    )
    parser.add_argument(
        "--assemble-only", action="store_true", help="only rebuild hinge.md from the saved sections"
    )


def main(args):
    path = Path(tempfile.gettempdir()) / "hinge_quick.json" if args.quick else SECTIONS_FILE
    if args.assemble_only:
        print(_assemble(_read_sections(path), args.quick))
        return
    for section in args.sections.split(","):
        if section not in SECTIONS:
            raise SystemExit(f"unknown section {section!r}; choose from {SECTIONS}")
        t0 = time.perf_counter()
        with LoadSampler() as sampler:
            tables, notes = _run_section(section, args.quick)
        part = {"tables": tables, "notes": notes, "seconds": time.perf_counter() - t0}
        print(
            _assemble(_store_section(path, section, part, sampler.summary()), args.quick),
            flush=True,
        )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("hinge")
