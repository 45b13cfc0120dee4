"""CO2 Forest (Norouzi et al.) against the paper's Table I and scikit-learn.

Sections, all written to ``benchmarks/results/co2.md``:

tuning
    The paper's grid nu in {0.1, 1, 4, 10, 43, 100} x eta in {0.03, 0.01,
    0.003} (18 entries), scored on a stratified 20 % validation split of the
    *training* data (seed 0); the test set is never used to choose anything.
    Forests of ``--tune-trees`` trees (the paper: 30). connect4 is too slow
    for the full grid here: a reduced grid (see ``REDUCED_GRID``) with 10
    trees.

table1
    Test error on the paper's splits (satimage, usps, pendigits, letter =
    LIBSVM letter.scale 15000/5000; connect4: a seeded 55000/12557 split, as
    the paper's sizes) with 10 and 30 trees: CO2 Forest with default and
    with tuned parameters, scikit-learn RandomForestClassifier and
    ExtraTreesClassifier (defaults, ``n_jobs=2``), in the same process on
    the same split, with fit and predict times. ``--seeds`` seeds each.

profile
    letter, 30 trees: the fit with the CCCP switched off
    (``max_cccp_iter=0``: bootstrap, axis-aligned initial split search,
    partitioning only) against the full fit, 1 and 2 jobs, and the CCCP
    kernel alone on the root node, so the share of fit time each part takes
    is visible.

seeds (``--seeds-table``, written to ``benchmarks/results/co2_seeds.md``)
    The acceptance figures as means over ``--seeds`` seeds: 30-tree CO2
    Forest with default parameters and RandomForestClassifier(30) on the
    paper's splits of satimage, usps, pendigits and letter (seed s seeds
    both forests), with fit wall and CPU time and the load average; the
    letter validation search behind the CCCP defaults (seed s draws both
    the stratified 80/20 split of the *training* part and the forest; the
    test set is never used), followed by the letter test error of the
    setting with the lowest mean validation error when it is not the
    defaults; and the letter fit time with 1 and 2 jobs.

    python -m benchmarks co2            # everything (about 15 min on 2 idle cores)
    python -m benchmarks co2 --quick    # smoke test (a few minutes)
    python -m benchmarks co2 --seeds-table --seeds 5   # co2_seeds.md
"""

import dataclasses
import os
import time

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.model_selection import train_test_split

from benchmarks.common import revision, write_results
from benchmarks.datasets import load
from obliquetrees import CO2ForestClassifier

#: Table I, test error % for 10 / 30 / 1000 trees: (random forest, CO2 forest).
PAPER = {
    "satimage": ((10.1, 9.4, 8.9), (9.6, 9.1, 8.9)),
    "usps": ((9.0, 7.2, 6.4), (5.8, 5.9, 5.5)),
    "pendigits": ((3.9, 3.3, 3.5), (1.8, 1.7, 1.7)),
    "letter": ((6.6, 4.7, 3.7), (3.2, 2.3, 1.8)),
    "connect4": ((18.9, 17.4, 16.2), (17.1, 15.7, 14.7)),
}
DATASETS = ["satimage", "usps", "pendigits", "letter", "connect4"]
NUS = (0.1, 1.0, 4.0, 10.0, 43.0, 100.0)
#: the paper's eta grid plus our default 0.1
ETAS = (0.1, 0.03, 0.01, 0.003)
REDUCED_GRID = {"connect4": [(nu, eta) for nu in (1.0, 10.0, 100.0) for eta in (0.1, 0.03)]}
#: forests in the tuning grid (the paper: 30); usps and connect4 are slow here
REDUCED_TREES = {"usps": 10, "connect4": 10}


#: Reading notes written into co2.md after the generated ones. Figures in
#: them are history (measured in earlier runs, dated), not this run's.
LATER_NOTES = """
One seed per row: letter's 5000 test rows give a standard error of about 0.23 points, and the
tuning grid's validation differences (letter: 3000 rows, about 0.33 points) are mostly noise, so
the tuned rows are partly noise too. The acceptance figures as means over 5 seeds are in
[co2_seeds.md](co2_seeds.md) (`python -m benchmarks.bench_co2 --seeds-table --seeds 5`), the
fit-time profile by node size in [co2_profile.md](co2_profile.md)
(`python -m benchmarks.profile_co2`).

Why tol=1e-3 (history, 2026-11-22). A run of this command with the previous default tol=1e-2
(revision 9df8e30, one seed) gave 2.80 % on letter with 30 trees, exactly 0.5 points above the
paper's 2.3; a 4-seed mean at tol=1e-2 was 2.88 %. The letter validation search in co2_seeds.md
(5 seeds, 30 trees, training part only) then measured, as mean validation error: tol=1e-3 3.32 %
against 3.50 % for tol=1e-2 (lower on 3 seeds of 5), tol=0 3.15 %, cccp_epochs=5 3.26 %,
learning_rate=0.03 3.62 %; of the paper's candidate feature-subset sizes q = p^0.6, p^0.7, p^0.8,
q=5 gave 3.10 % (never worse than the defaults on a seed), q=6 3.39 %, q=9 3.46 %. The paper fixes
the minibatch (100), momentum (0.9), a learning-rate cut when the objective oscillates, the nu/eta
grids and q in {p^0.5 ... p^0.9} (chosen per data set), but not tau, the number of CCCP iterations
or the convergence test; of the public ports (PEERS.md b.3) the classification one stops when the
objective changes by less than 1e-2, the regression one runs a fixed number of iterations, and
neither reports a validated choice. So tol became 1e-3 (about 10 % more CCCP iterations per letter
tree) and q stays "sqrt": the validation-best q=5, evaluated on letter's test set as a separate
row of co2_seeds.md, gave 2.74 ± 0.14 % against 2.73 ± 0.10 % for the defaults (the validation
gain did not carry over). With tol=1e-3 the 5-seed means were within 0.5 points of Table I on
satimage, usps, pendigits and letter and below RandomForestClassifier(30) on every seed; letter
stayed 0.43 points above the paper's 2.3.

Speed (history, 2026-11-22; details in co2_profile.md). About half of a letter fit's CPU goes to
nodes with fewer than 100 distinct samples, whose 18-20 CCCP iterations each are dominated by
per-step 26-class softmax work rather than by the samples; the axis-aligned initial search takes
15-20 %, Python outside the one-call-per-tree growth kernel about 1 %. Two kernel changes that grow
bit-identical trees (helpers inlined at numba-IR level, x log x cached per class in the axis
search) cut CPU per letter tree from 0.387 s to 0.314 s at tol=1e-2; at tol=1e-3 a tree took
0.434 s, so a default fit then cost about 12 % more CPU than before both changes. Oblique speed
reference (ANCHORS.md section 1, same letter split, this machine, separate venv): treeple's
ObliqueRandomForestClassifier (SPORF, defaults, 30 trees, n_jobs=2) reached 4.37 ± 0.05 % in
0.36 s wall, against CO2 Forest's 2.73 ± 0.10 % (5 seeds) for 8.6-13 CPU s per 30-tree fit:
treeple scores random sparse projections by impurity, CO2 optimises every split by CCCP.

Ablation rows no longer run (history, 2026-11-22, revision 45a5dc2, letter validation split,
30 trees): three variants needed experiment flags in the training kernels, which issue 15 removed.
Against the defaults' 2.967 % validation error (14.5 % axis-aligned fallbacks), the paper's raw
homogeneous coordinates (no per-node centring) gave 3.2 % (35.3 % fallbacks), keeping the
axis-aligned initial split when it has the lower entropy 2.867 % (31.1 % fallbacks), and a theta
pseudo-count of 0.1 3.167 %.
"""


def split(name):
    """The paper's train/test split of a data set."""
    data = load(name)
    if "X_train" in data:
        return data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    X, y = data["X"], data["y"]
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:55000], order[55000:]
    return X[train], y[train], X[test], y[test]


def error(clf, X, y):
    return 100.0 * (1.0 - np.mean(clf.predict(X) == y))


def fit_score(clf, Xtr, ytr, Xte, yte):
    start = time.perf_counter()
    clf.fit(Xtr, ytr)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    err = error(clf, Xte, yte)
    return err, fit_s, time.perf_counter() - start


def warm_up():
    """Load the numba kernels (compilation or cache) outside the timings."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    CO2ForestClassifier(n_estimators=2, random_state=0, n_jobs=2).fit(X, y).predict(X)


def tune(name, n_trees, quick, log):
    """Grid search on a validation split of the training data."""
    Xtr, ytr, _, _ = split(name)
    Xa, Xv, ya, yv = train_test_split(Xtr, ytr, test_size=0.2, random_state=0, stratify=ytr)
    grid = REDUCED_GRID.get(name, [(nu, eta) for nu in NUS for eta in ETAS])
    n_trees = REDUCED_TREES.get(name, n_trees)
    if quick:
        grid = [(nu, eta) for nu in (1.0, 10.0) for eta in (0.03,)]
        n_trees = 3
        Xa, ya = Xa[:2000], ya[:2000]
    rows = []
    for nu, eta in grid:
        clf = CO2ForestClassifier(
            n_estimators=n_trees, nu=nu, learning_rate=eta, random_state=0, n_jobs=2
        )
        err, fit_s, _ = fit_score(clf, Xa, ya, Xv, yv)
        rows.append(
            {
                "dataset": name,
                "nu": nu,
                "eta": eta,
                "trees": n_trees,
                "validation error %": err,
                "fit s": fit_s,
            }
        )
        log(f"tune {name} nu={nu} eta={eta}: {err:.2f} % ({fit_s:.1f} s)")
    best = min(rows, key=lambda r: r["validation error %"])
    return rows, {"nu": best["nu"], "learning_rate": best["eta"]}


def table1(name, tuned, seeds, quick, log):
    Xtr, ytr, Xte, yte = split(name)
    if quick:
        Xtr, ytr = Xtr[:2000], ytr[:2000]
    rf_paper, co2_paper = PAPER[name]
    models = [
        ("CO2 Forest", "defaults", lambda n, s: CO2ForestClassifier(n, random_state=s, n_jobs=2)),
        (
            "CO2 Forest",
            f"tuned nu={tuned['nu']:g}, eta={tuned['learning_rate']:g}",
            lambda n, s: CO2ForestClassifier(n, random_state=s, n_jobs=2, **tuned),
        ),
        (
            "RandomForest",
            "defaults",
            lambda n, s: RandomForestClassifier(n, random_state=s, n_jobs=2),
        ),
        ("ExtraTrees", "defaults", lambda n, s: ExtraTreesClassifier(n, random_state=s, n_jobs=2)),
    ]
    rows = []
    for trees in (3,) if quick else (10, 30):
        for method, setting, make in models:
            res = np.array([fit_score(make(trees, s), Xtr, ytr, Xte, yte) for s in seeds])
            paper = (
                rf_paper
                if method == "RandomForest"
                else co2_paper
                if method == "CO2 Forest"
                else None
            )
            col = {10: 0, 30: 1}.get(trees)
            rows.append(
                {
                    "dataset": name,
                    "method": method,
                    "setting": setting,
                    "trees": trees,
                    "test error %": f"{res[:, 0].mean():.2f} ± {res[:, 0].std():.2f}",
                    "paper %": "" if paper is None or col is None else f"{paper[col]}",
                    "fit s": res[:, 1].mean(),
                    "predict s": res[:, 2].mean(),
                }
            )
            log(
                f"{name} {method} {setting} {trees}: {rows[-1]['test error %']} "
                f"(fit {res[:, 1].mean():.1f} s)"
            )
    return rows


def ablation(quick, log):
    """Gap-filling choices measured on letter's validation split."""
    from obliquetrees._core import traversal
    from obliquetrees._core.forest import ObliqueForest
    from obliquetrees.co2 import training as co2

    Xtr, ytr, _, _ = split("letter")
    Xa, Xv, ya, yv = train_test_split(Xtr, ytr, test_size=0.2, random_state=0, stratify=ytr)
    n = 3 if quick else 30
    if quick:
        Xa, ya = Xa[:2000], ya[:2000]
    classes, ya = np.unique(ya, return_inverse=True)
    yv = np.searchsorted(classes, yv)
    d = CO2ForestClassifier().get_params()
    base = {f.name: d[f.name] for f in dataclasses.fields(co2.CO2Params)} | {"max_features": 4}
    variants = [
        ("defaults (node-centred, theta pseudo-count 1)", {}),
        ("CCCP off: axis-aligned initial splits only", {"max_cccp_iter": 0}),
        ("cccp_epochs=1", {"cccp_epochs": 1}),
    ]
    rows = []
    seeds = np.random.RandomState(0).randint(2**31 - 1, size=n)
    for label, change in variants:
        params = co2.CO2Params(**{**base, **change})
        start = time.perf_counter()
        trees, info = co2.fit_co2(
            np.ascontiguousarray(Xa, dtype=np.float64),
            ya.astype(np.int64),
            np.ones(Xa.shape[0]),
            params,
            seeds,
            n_classes=len(classes),
            n_jobs=2,
        )
        stats = info["stats"]
        fit_s = time.perf_counter() - start
        proba = traversal.predict_value(
            ObliqueForest.from_trees(trees), np.ascontiguousarray(Xv, dtype=np.float64), 1
        )
        err = 100.0 * np.mean(proba.argmax(axis=1) != yv)
        s = stats.sum(axis=0)
        rows.append(
            {
                "variant": label,
                "trees": n,
                "validation error %": err,
                "fit s": fit_s,
                "nodes/tree": np.mean([t.node_count for t in trees]),
                "axis fallback %": 100.0 * s[2] / max(1, s[1] + s[2]),
            }
        )
        log(f"ablation {label}: {err:.2f} %")
    return rows


def profile(quick, log):
    Xtr, ytr, _, _ = split("letter")
    n = 3 if quick else 30
    if quick:
        Xtr, ytr = Xtr[:3000], ytr[:3000]
    rows = []
    for label, params in [
        ("full fit (defaults)", {}),
        ("CCCP off (max_cccp_iter=0): init search + partition only", {"max_cccp_iter": 0}),
    ]:
        for jobs in (1, 2):
            clf = CO2ForestClassifier(n, random_state=0, n_jobs=jobs, **params)
            start = time.perf_counter()
            cpu = time.process_time()
            clf.fit(Xtr, ytr)
            wall = time.perf_counter() - start
            rows.append(
                {
                    "what": label,
                    "n_jobs": jobs,
                    "trees": n,
                    "fit wall s": wall,
                    "fit CPU s": time.process_time() - cpu,
                    "CCCP iterations": int(clf.n_cccp_iter_.sum()),
                    "nodes/tree": np.mean([t.node_count for t in clf.trees_]),
                }
            )
            log(f"profile {label} n_jobs={jobs}: {wall:.1f} s")
    # the kernel alone on a root-sized node
    from obliquetrees._training import axis_split as A
    from obliquetrees.co2 import _kernels as K
    from obliquetrees.co2.training import CO2Params, bootstrap_counts, standardization

    X = np.ascontiguousarray(Xtr, dtype=np.float64)
    y = np.unique(ytr, return_inverse=True)[1].astype(np.int64)
    mean, scale = standardization(X)
    rows_ = np.flatnonzero(bootstrap_counts(len(X), 0))
    Xb = np.ascontiguousarray((X[rows_] - mean) / scale)
    Xb -= Xb.mean(axis=0)
    yb = y[rows_]
    wb = np.ones(len(rows_))
    state = np.array([1], dtype=np.uint64)
    f, thr, _ = A.best_axis_split(Xb, yb, wb, len(yb), y.max() + 1, 4, 1, state)
    t0, t1 = A.init_theta(Xb, yb, wb, len(yb), f, thr, y.max() + 1, A.THETA_PRIOR)
    w = np.zeros(X.shape[1])
    w[f] = 1.0
    clf = CO2ForestClassifier()
    defaults = {f.name: getattr(clf, f.name) for f in dataclasses.fields(CO2Params)}
    params = CO2Params(**defaults | {"max_features": 4, "tol": 0.0}).kernel_args()
    history = np.empty(clf.max_cccp_iter + 1)
    start = time.process_time()
    _, n_iter, _ = K.cccp(
        Xb,
        yb,
        wb,
        len(yb),
        w,
        -thr,
        t0,
        t1,
        params,
        state,
        history,
    )
    cccp_s = time.process_time() - start
    start = time.process_time()
    for _ in range(10):
        A.best_axis_split(Xb, yb, wb, len(yb), y.max() + 1, 4, 1, state)
    axis_s = (time.process_time() - start) / 10
    epochs = n_iter * clf.cccp_epochs
    per = cccp_s / (epochs * len(yb)) * 1e9
    notes = (
        f"Root node of one letter tree ({len(yb)} distinct rows, 16 features, 26 classes): "
        f"CCCP with the default schedule ({n_iter} outer iterations x {clf.cccp_epochs} "
        f"epochs, tol=0) {1e3 * cccp_s:.1f} ms CPU = {per:.0f} ns per sample-epoch "
        f"(minibatch gradient, momentum step, projection, plus one exact surrogate pass "
        f"per outer iteration); axis-aligned initial split search over q=4 features "
        f"{1e3 * axis_s:.2f} ms."
    )
    return rows, notes


def summary(t1_rows):
    """Acceptance criteria of the issue, computed from the rows of this run."""

    def err(row):
        return float(row["test error %"].split()[0])

    rows = []
    for name in dict.fromkeys(r["dataset"] for r in t1_rows):
        mine = [r for r in t1_rows if r["dataset"] == name and r["trees"] == 30]
        if not mine:
            continue
        by = {(r["method"], r["setting"] == "defaults"): err(r) for r in mine}
        best_co2 = min(v for (m, _), v in by.items() if m == "CO2 Forest")
        paper = PAPER[name][1][1]
        rows.append(
            {
                "dataset": name,
                "CO2 defaults %": by[("CO2 Forest", True)],
                "CO2 tuned %": by[("CO2 Forest", False)],
                "paper CO2 %": paper,
                "defaults - paper (points)": round(by[("CO2 Forest", True)] - paper, 2),
                "tuned - paper (points)": round(by[("CO2 Forest", False)] - paper, 2),
                "within 0.5 of paper (defaults / tuned)": "/".join(
                    "yes" if by[("CO2 Forest", d)] - paper <= 0.5 + 1e-9 else "no"
                    for d in (True, False)
                ),
                "RF(30) %": by[("RandomForest", True)],
                "defaults beat RF(30)": "yes"
                if by[("CO2 Forest", True)] < by[("RandomForest", True)]
                else "no",
                "best CO2 vs ExtraTrees(30)": round(best_co2 - by[("ExtraTrees", True)], 2),
            }
        )
    return rows


#: Letter validation search (``--seeds-table``): CCCP stopping and schedule
#: settings, and the paper's candidate sizes q = p^0.6, p^0.7, p^0.8 of the
#: feature subset (Sec. 5; p^0.5 = 4 is "sqrt"), each against the defaults.
LETTER_SEARCH = [
    ("defaults", {}),
    ("tol=1e-2 (the previous default)", {"tol": 1e-2}),
    ("tol=0 (stop when the surrogate stops decreasing)", {"tol": 0.0}),
    ("cccp_epochs=5", {"cccp_epochs": 5}),
    ("learning_rate=0.03", {"learning_rate": 0.03}),
    ("max_features=5", {"max_features": 5}),
    ("max_features=6", {"max_features": 6}),
    ("max_features=9", {"max_features": 9}),
]
SEED_DATASETS = ["satimage", "usps", "pendigits", "letter"]


def timed_fit(clf, X, y):
    """Fit; return wall seconds, process CPU seconds (all threads), 1-min load."""
    start = time.perf_counter()
    cpu = time.process_time()
    clf.fit(X, y)
    return time.perf_counter() - start, time.process_time() - cpu, os.getloadavg()[0]


def mean_sd(values):
    values = np.asarray(values, dtype=float)
    sd = values.std(ddof=1) if values.size > 1 else 0.0
    return f"{values.mean():.2f} ± {sd:.2f}"


def letter_search(seeds, quick, log):
    """Validation error of CCCP settings on letter's training part, per seed.

    Returns the table rows and the setting (label, parameters) with the lowest
    mean validation error.
    """
    Xtr, ytr, _, _ = split("letter")
    n = 3 if quick else 30
    errs, rows = {}, []
    for label, change in LETTER_SEARCH[:2] if quick else LETTER_SEARCH:
        res = []
        for s in seeds:
            Xa, Xv, ya, yv = train_test_split(Xtr, ytr, test_size=0.2, random_state=s, stratify=ytr)
            if quick:
                Xa, ya = Xa[:2000], ya[:2000]
            clf = CO2ForestClassifier(n, random_state=s, n_jobs=2, **change)
            wall, cpu, load = timed_fit(clf, Xa, ya)
            res.append((error(clf, Xv, yv), wall, cpu, load))
            log(f"letter search {label} seed {s}: {res[-1][0]:.2f} %")
        res = np.array(res)
        errs[label] = res[:, 0]
        diff = res[:, 0] - errs["defaults"]
        rows.append(
            {
                "variant": label,
                "trees": n,
                "seeds": len(seeds),
                "validation error % (mean ± sd)": mean_sd(res[:, 0]),
                "minus defaults, paired (mean ± sd)": mean_sd(diff) if label != "defaults" else "",
                "per seed": " ".join(f"{e:.2f}" for e in res[:, 0]),
                "fit wall s": res[:, 1].mean(),
                "fit CPU s": res[:, 2].mean(),
                "load avg": res[:, 3].mean(),
            }
        )
    search = LETTER_SEARCH[:2] if quick else LETTER_SEARCH
    best = min(search, key=lambda item: errs[item[0]].mean())
    return rows, best


def chosen_on_test(best, seeds, quick, log):
    """Letter test error of the setting chosen on validation (same seeds)."""
    label, change = best
    Xtr, ytr, Xte, yte = split("letter")
    if quick:
        Xtr, ytr = Xtr[:2000], ytr[:2000]
    n = 3 if quick else 30
    out = []
    for s in seeds:
        clf = CO2ForestClassifier(n, random_state=s, n_jobs=2, **change)
        wall, cpu, load = timed_fit(clf, Xtr, ytr)
        out.append((error(clf, Xte, yte), wall, cpu, load))
        log(f"letter chosen {label} seed {s}: {out[-1][0]:.2f} %")
    out = np.array(out)
    return [
        {
            "dataset": "letter",
            "method": f"CO2 Forest ({label}, chosen on validation)",
            "trees": n,
            "seeds": len(seeds),
            "test error % (mean ± sd)": mean_sd(out[:, 0]),
            "per seed": " ".join(f"{e:.2f}" for e in out[:, 0]),
            "paper %": PAPER["letter"][1][1],
            "fit wall s": out[:, 1].mean(),
            "fit CPU s": out[:, 2].mean(),
            "load avg": out[:, 3].mean(),
        }
    ]


def seeds_table(seeds, quick, log):
    """30-tree CO2 defaults and RandomForest(30) on the paper's test splits."""
    rows, summary_rows = [], []
    n = 3 if quick else 30
    for name in SEED_DATASETS:
        Xtr, ytr, Xte, yte = split(name)
        if quick:
            Xtr, ytr = Xtr[:2000], ytr[:2000]
        res = {}
        for method, make in [
            ("CO2 Forest (defaults)", lambda s: CO2ForestClassifier(n, random_state=s, n_jobs=2)),
            (
                "RandomForest (defaults)",
                lambda s: RandomForestClassifier(n, random_state=s, n_jobs=2),
            ),
        ]:
            out = []
            for s in seeds:
                clf = make(s)
                wall, cpu, load = timed_fit(clf, Xtr, ytr)
                out.append((error(clf, Xte, yte), wall, cpu, load))
                log(
                    f"seeds {name} {method} seed {s}: {out[-1][0]:.2f} % "
                    f"(wall {wall:.1f} s, CPU {cpu:.1f} s, load {load:.1f})"
                )
            out = np.array(out)
            res[method] = out
            rf_paper, co2_paper = PAPER[name]
            paper = (co2_paper if method.startswith("CO2") else rf_paper)[1]
            rows.append(
                {
                    "dataset": name,
                    "method": method,
                    "trees": n,
                    "seeds": len(seeds),
                    "test error % (mean ± sd)": mean_sd(out[:, 0]),
                    "per seed": " ".join(f"{e:.2f}" for e in out[:, 0]),
                    "paper %": paper,
                    "fit wall s": out[:, 1].mean(),
                    "fit CPU s": out[:, 2].mean(),
                    "load avg": out[:, 3].mean(),
                }
            )
        co2_mean = res["CO2 Forest (defaults)"][:, 0].mean()
        rf_mean = res["RandomForest (defaults)"][:, 0].mean()
        paper = PAPER[name][1][1]
        summary_rows.append(
            {
                "dataset": name,
                "CO2 defaults % (mean)": co2_mean,
                "paper CO2 (30) %": paper,
                "minus paper (points)": round(co2_mean - paper, 2),
                "within 0.5 of paper": "yes" if co2_mean - paper <= 0.5 + 1e-9 else "no",
                "RF(30) % (mean)": rf_mean,
                "below RF(30) on every seed": "yes"
                if np.all(res["CO2 Forest (defaults)"][:, 0] < res["RandomForest (defaults)"][:, 0])
                else "no",
            }
        )
    return rows, summary_rows


def letter_fit_time(quick, log):
    """Fit time of 30 default trees on the full letter training set, 1 and 2 jobs."""
    Xtr, ytr, _, _ = split("letter")
    n = 3 if quick else 30
    rows = []
    for jobs in (1, 2):
        clf = CO2ForestClassifier(n, random_state=0, n_jobs=jobs)
        wall, cpu, load = timed_fit(clf, Xtr, ytr)
        rows.append(
            {
                "trees": n,
                "n_jobs": jobs,
                "fit wall s": wall,
                "fit CPU s": cpu,
                "load avg": load,
                "CCCP iterations": int(clf.n_cccp_iter_.sum()),
            }
        )
        log(f"letter fit n_jobs={jobs}: wall {wall:.1f} s, CPU {cpu:.1f} s, load {load:.1f}")
    return rows


def letter_cccp_cap(seeds, quick, log):
    """Letter, 30 trees: CO2 defaults, CO2 with every node's CCCP on all rows, RF(30)."""
    Xtr, ytr, Xte, yte = split("letter")
    n = 3 if quick else 30
    if quick:
        Xtr, ytr = Xtr[:2000], ytr[:2000]
    methods = [
        ("CO2 defaults", {}),
        ("CO2 max_cccp_samples=None (all rows, the paper)", {"max_cccp_samples": None}),
        (
            "CO2 max_cccp_iter=20, max_cccp_samples=2048 (the defaults before the fit-time change)",
            {"max_cccp_iter": 20, "max_cccp_samples": 2048},
        ),
        ("RandomForest (defaults)", None),
    ]
    rows = []
    for label, kw in methods:
        out = []
        for s in seeds:
            if kw is None:
                clf = RandomForestClassifier(n, random_state=s, n_jobs=2)
            else:
                clf = CO2ForestClassifier(n, random_state=s, n_jobs=2, **kw)
            wall, cpu, load = timed_fit(clf, Xtr, ytr)
            out.append((error(clf, Xte, yte), wall, cpu, load))
            log(f"cap {label} seed {s}: {out[-1][0]:.2f} % (CPU {cpu:.1f} s, load {load:.1f})")
        out = np.array(out)
        rows.append(
            {
                "method": label,
                "trees": n,
                "seeds": len(seeds),
                "test error % (mean ± sd)": mean_sd(out[:, 0]),
                "per seed": " ".join(f"{e:.2f}" for e in out[:, 0]),
                "fit CPU s": out[:, 2].mean(),
                "fit wall s": out[:, 1].mean(),
                "load avg": out[:, 3].mean(),
            }
        )
    return rows


def run_cccp_cap(args, log):
    seeds = list(range(args.seeds))
    rows = letter_cccp_cap(seeds, args.quick, log)
    notes = f"""
Issue 17: max_cccp_samples (a node above that many rows fits its stump, initial axis-aligned
split and CCCP, on a uniform subsample of them; until the second issue-17 change, only its
CCCP: 2048 then gave 2.74 % and 1024 2.82 %) against the paper's all-rows CCCP
(max_cccp_samples=None) and RandomForestClassifier(30), in one run. Since the fit-time
defaults (max_cccp_samples 1024, max_cccp_iter 15 and the CCCP's partition-settled stop, which
every row here uses) the all-rows fit is no longer the one from before the parameter existed,
whose mean was 2.73 % (2.90 2.64 2.76 2.70 2.66); the third row has the previous defaults'
values of the two parameters. Letter's paper split
(15000 / 5000), seeds 0..{len(seeds) - 1} (random_state), n_jobs=2; acceptance: the defaults
within 0.1 points of that 2.73 %. CPU = process CPU seconds of the fit (all threads);
load = 1-minute load average at the end of the fit (2 cores, shared).
"""
    write_results(
        "co2_scale.md",
        "CO2 Forest at scale: subsampled CCCP on letter"
        + (" (QUICK smoke run, not results)" if args.quick else ""),
        [("Letter, 30 trees", rows)],
        notes=notes,
    )


def run_seeds_table(args, log):
    seeds = list(range(args.seeds))
    defaults = CO2ForestClassifier().get_params()
    tables = {}

    def write(done):
        notes = f"""
Means over {len(seeds)} seeds (seed s = random_state s; in the letter search it also draws the
stratified 80/20 split of the training part, so that search never sees the test set). sd is the
sample standard deviation over seeds. Test errors on the paper's splits; paper figures are Table I
(30 trees). Times: fit wall time, process CPU time (all threads) and the 1-minute load average
at the end of the fit, on a 2-core machine shared with other benchmarks (wall times are inflated
whenever the load average exceeds 2). All forests use n_jobs=2.
{"" if done else "PARTIAL FILE: the run is still going (the file is rewritten after each section)."}
Defaults of CO2ForestClassifier: nu={defaults["nu"]}, learning_rate={defaults["learning_rate"]},
cccp_epochs={defaults["cccp_epochs"]}, max_cccp_iter={defaults["max_cccp_iter"]},
tol={defaults["tol"]}, batch_size={defaults["batch_size"]}, momentum={defaults["momentum"]},
max_features='{defaults["max_features"]}'.
"""
        order = [
            ("Acceptance (30 trees, means over seeds)", "summary"),
            ("30 trees on the paper's test splits", "table"),
            ("Letter: fit time of 30 default trees (15000 x 16, 26 classes)", "time"),
            ("Letter validation search (30 trees, training part only)", "search"),
        ]
        write_results(
            "co2_seeds.md",
            "CO2 Forest: acceptance figures over seeds"
            + (" (QUICK smoke run, not results)" if args.quick else ""),
            [(h, tables[k]) for h, k in order if tables.get(k)],
            notes=notes,
        )

    tables["table"], tables["summary"] = seeds_table(seeds, args.quick, log)
    write(False)
    tables["time"] = letter_fit_time(args.quick, log)
    write(False)
    tables["search"], best = letter_search(seeds, args.quick, log)
    write(False)
    if best[0] != "defaults":
        tables["table"] += chosen_on_test(best, seeds, args.quick, log)
    write(True)


def add_arguments(parser):
    """The arguments of ``python -m benchmarks co2``."""
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--datasets", nargs="*", default=DATASETS)
    parser.add_argument("--tune-trees", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--out", default="co2.md")
    parser.add_argument(
        "--cccp-cap",
        action="store_true",
        help="only letter: defaults against max_cccp_samples=None and RF (writes co2_scale.md)",
    )
    parser.add_argument(
        "--seeds-table",
        action="store_true",
        help="only the multi-seed acceptance figures and letter search (writes co2_seeds.md)",
    )


def main(args):
    log_lines, loads = [], []

    def log(msg):
        print(msg, flush=True)
        log_lines.append(msg)
        loads.append(os.getloadavg()[0])

    warm_up()
    if args.cccp_cap:
        run_cccp_cap(args, log)
        return
    if args.seeds_table:
        run_seeds_table(args, log)
        return
    seeds = list(range(args.seeds))
    tune_rows, chosen_rows, t1_rows, abl_rows, prof_rows = [], [], [], [], []
    prof_notes = "not run yet (partial file)."
    defaults = CO2ForestClassifier().get_params()
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    start_rev = revision()

    def load_summary():
        if not loads:
            return "none yet"
        return (
            f"min {min(loads):.1f}, mean {np.mean(loads):.1f}, max {max(loads):.1f} "
            f"over {len(loads)} samples"
        )

    def write(done):
        elapsed = (
            f", took {(time.perf_counter() - t0) / 60:.0f} min wall" if done else " (still going)"
        )
        notes = f"""
CO2 Forest (Norouzi et al., Table I protocol): bagged, fully grown trees; test error % on the
paper's splits (connect4: seeded 55000/12557 split, the paper's sizes, no standard split exists).
Paper columns: Table I for 10 / 30 trees (RF column for RandomForest rows, CO2 column for ours).
scikit-learn RandomForestClassifier / ExtraTreesClassifier use their defaults (max_features='sqrt')
with the same number of trees, n_jobs=2, same process, same split. {len(seeds)} seed(s) per row.
{"" if done else "PARTIAL FILE: the run is still going (the file is rewritten after each section)."}

Defaults of CO2ForestClassifier: nu={defaults["nu"]}, learning_rate={defaults["learning_rate"]},
cccp_epochs={defaults["cccp_epochs"]}, max_cccp_iter={defaults["max_cccp_iter"]},
tol={defaults["tol"]}, batch_size={defaults["batch_size"]}, momentum={defaults["momentum"]},
max_features='{defaults["max_features"]}'. They were chosen on validation splits of the
training data only (letter, usps, satimage, pendigits; see the notes in the estimator docstring
and the ablation section below); the tuned rows re-choose nu and eta per data set on a
stratified 20 % validation split of the training part: the paper's grid nu x eta (18 entries)
plus eta=0.1 (our default; outside the paper's grid), 30-tree forests except usps (10 trees) and
connect4 (10 trees, reduced grid), for time.

Fit-time profile (letter): {prof_notes}

Machine: {os.cpu_count()} cores, not reserved for this run (another engineer's tests run on it
at times), so wall times of every method are inflated whenever the load average exceeds 2. Run
started {started} at revision {start_rev}{elapsed}; 1-minute load average sampled at each logged
step: {load_summary()}.
{LATER_NOTES}"""
        tables = [
            ("Acceptance summary (30 trees, computed from the table below)", summary(t1_rows)),
            ("Table I: test error, 10 and 30 trees", t1_rows),
            ("Chosen parameters (validation split of the training data)", chosen_rows),
            ("Tuning grid (validation error)", tune_rows),
            ("Fit-time profile (letter, 15000 x 16, 26 classes)", prof_rows),
            ("Ablation of gap-filling choices (letter, validation split)", abl_rows),
        ]
        write_results(
            args.out,
            "CO2 Forest: Table I reproduction"
            + (" (QUICK smoke run, not results)" if args.quick else ""),
            [(h, r) for h, r in tables if r],
            notes=notes,
        )

    for name in args.datasets:
        rows, tuned = tune(name, args.tune_trees, args.quick, log)
        tune_rows += rows
        chosen_rows.append({"dataset": name, **tuned})
        t1_rows += table1(name, tuned, seeds, args.quick, log)
        write(False)
    if "letter" in args.datasets:
        abl_rows += ablation(args.quick, log)
        write(False)
    rows, prof_notes = profile(args.quick, log)
    prof_rows += rows
    write(True)


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("co2")
