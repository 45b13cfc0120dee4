"""Missing values: native NaN handling vs mean imputation vs HistGradientBoosting.

For each data set, seed and missingness scenario, the same training rows and
the same mask are given to three methods:

- native: the obliquetrees estimator fitted on X with NaN (and predicting on
  the test part with NaN);
- pipeline: ``make_pipeline(SimpleImputer(strategy="mean"), <same estimator>)``;
- all indicators: ``SimpleImputer(strategy="mean", add_indicator=True)`` before
  the same estimator, which is what native handling would be with an indicator
  for every feature with NaN (the first design; native handling now gives
  indicators only to features whose missingness depends on the target, see
  ``obliquetrees/_core/missing.py``): the column measures that choice;
- HGB: scikit-learn's HistGradientBoostingClassifier/Regressor (native NaN), and
  the same after the mean imputer: its gain from native handling shows how much
  label information the scenario's missingness carries for a tree method that
  learns a NaN direction at every split.

Scenarios, applied to the training AND the test part with a seeded RNG:

- ``mcar``: 20 % of the entries missing completely at random;
- ``informative``: for half of the columns (chosen by the seed) the values in
  the column's top quintile, ``x >= q80`` with ``q80`` the 80th percentile of
  the training rows, are removed (a column whose ``q80`` is its minimum, e.g. a
  border pixel that is background in most images, loses ``x > q80`` instead,
  otherwise the whole column would vanish).

Seed ``s`` draws the train/test split (data sets without a fixed split), the
stratified subsample of ``--max-train`` training rows (the same rows for every
method), the mask and the estimators' ``random_state``. Regression targets are
standardised with the training mean/sd (R^2 unchanged). Acceptance (issue 16):
native >= pipeline - 0.5 points on MCAR, native >= pipeline + 1 point on
informative missingness (points = accuracy %; for R^2, 0.005 and 0.01), on at
least 4 of the 5 classification sets for every classifier. With ``--defaults``
every estimator runs at its constructor defaults (only ``random_state`` set)
and the summary also states issue 37's criterion: native >= pipeline - 0.5
points in both scenarios, for every estimator and data set.

    python -m benchmarks missing                       # 6 data sets, 5 seeds
    python -m benchmarks missing --defaults            # the same at every estimator's defaults
    python -m benchmarks missing --quick               # smoke run (temp directory)
    python -m benchmarks missing --datasets magic --estimators SoftTreeClassifier --seeds 2
"""

import json
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.common import write_results
from benchmarks.datasets import train_test
from benchmarks.estimators import every_estimator

CLASSIFICATION = ["letter", "satimage", "usps", "magic", "pendigits"]
REGRESSION = ["california_housing"]
SCENARIOS = ["mcar", "informative"]
MCAR_RATE = 0.2
#: acceptance thresholds in points (accuracy %); R^2 uses them / 100
MARGIN = {"mcar": -0.5, "informative": 1.0}

#: Estimator settings, chosen so one fit on 4000 rows takes seconds (timings in the notes);
#: a public estimator not listed runs at its defaults.
CONFIGS = every_estimator(
    {
        "CO2ForestClassifier": dict(n_estimators=10, n_jobs=2),
        "E2EDTClassifier": dict(max_depth=6),
        "SoftTreeClassifier": dict(max_depth=5, n_restarts=3, max_epochs=10),
        "HingeForestClassifier": dict(n_estimators=20, max_depth=6, max_epochs=20, n_jobs=2),
        "SoftTreeRegressor": dict(max_depth=5, n_restarts=3, max_epochs=10),
        "HingeForestRegressor": dict(n_estimators=20, max_depth=6, max_epochs=20, n_jobs=2),
        "CO2ForestRegressor": dict(n_estimators=10, n_jobs=2),
        "E2EDTRegressor": dict(max_depth=6),
    }
)
#: --quick: tiny models, only for checking the plumbing (a public estimator not listed: defaults)
QUICK_CONFIGS = every_estimator(
    {
        "CO2ForestClassifier": dict(n_estimators=2, max_depth=4, n_jobs=2),
        "E2EDTClassifier": dict(max_depth=3, max_epochs=2),
        "SoftTreeClassifier": dict(max_depth=2, n_restarts=1, max_epochs=2),
        "HingeForestClassifier": dict(n_estimators=2, max_depth=3, max_epochs=2, n_jobs=2),
        "SoftTreeRegressor": dict(max_depth=2, n_restarts=1, max_epochs=2),
        "HingeForestRegressor": dict(n_estimators=2, max_depth=3, max_epochs=2, n_jobs=2),
        "CO2ForestRegressor": dict(n_estimators=2, max_depth=4, n_jobs=2),
        "E2EDTRegressor": dict(max_depth=3, max_epochs=2),
    }
)
#: --defaults: each estimator as a user gets it (random_state is set per seed)
DEFAULT_CONFIGS = {name: {} for name in CONFIGS}
#: issue 37: native handling at defaults at least as good as mean imputation within noise
DEFAULTS_MARGIN = -0.5
CLASSIFIERS = [n for n in CONFIGS if n.endswith("Classifier")]
REGRESSORS = [n for n in CONFIGS if n.endswith("Regressor")]


def load_split(name, seed, max_train):
    """Training (at most ``max_train`` rows, stratified for classification) and test parts."""
    X_train, y_train, X_test, y_test = train_test(name, seed=seed)
    classifier = name not in REGRESSION
    if max_train and len(X_train) > max_train:
        X_train, _, y_train, _ = train_test_split(
            X_train,
            y_train,
            train_size=max_train,
            stratify=y_train if classifier else None,
            random_state=seed,
        )
    X_train, X_test = (np.asarray(a, dtype=np.float64) for a in (X_train, X_test))
    if not classifier:  # standardised target: SGD step sizes do not see dollars
        mean, sd = y_train.mean(), y_train.std()
        y_train, y_test = (y_train - mean) / sd, (y_test - mean) / sd
    return X_train, y_train, X_test, y_test


def add_missing(X_train, X_test, scenario, seed):
    """Copies of both parts with NaN where the scenario removes entries."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    X_train, X_test = X_train.copy(), X_test.copy()
    if scenario == "mcar":
        for X in (X_train, X_test):
            X[rng.random(X.shape) < MCAR_RATE] = np.nan
        return X_train, X_test
    n_features = X_train.shape[1]
    columns = np.sort(rng.choice(n_features, size=n_features // 2, replace=False))
    q80 = np.percentile(X_train[:, columns], 80, axis=0)
    # ">=" removes the top quintile; where q80 is the minimum it would remove everything
    strict = q80 <= X_train[:, columns].min(axis=0)
    for X in (X_train, X_test):
        part = X[:, columns]
        part[np.where(strict, part > q80, part >= q80)] = np.nan
        X[:, columns] = part
    return X_train, X_test


def _fit_score(model, X_train, y_train, X_test, y_test, classifier):
    """(score, fit seconds, error message); score in points (accuracy %) or R^2."""
    try:
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_s = time.perf_counter() - start
        pred = model.predict(X_test)
    except Exception as exc:  # noqa: BLE001 - the table says which method failed and why
        return None, None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    if classifier:
        return 100.0 * accuracy_score(y_test, pred), fit_s, None
    return float(r2_score(y_test, pred)), fit_s, None


def run_cell(name, scenario, seed, estimators, configs, max_train, log):
    """Raw rows (one per method) of one data set, scenario and seed."""
    classifier = name not in REGRESSION
    X_train, y_train, X_test, y_test = load_split(name, seed, max_train)
    X_train, X_test = add_missing(X_train, X_test, scenario, seed)
    base = dict(
        dataset=name,
        scenario=scenario,
        seed=seed,
        n_train=len(X_train),
        n_test=len(X_test),
        missing_train=float(np.isnan(X_train).mean()),
        missing_test=float(np.isnan(X_test).mean()),
    )
    rows = []
    hgb = (HistGradientBoostingClassifier if classifier else HistGradientBoostingRegressor)(
        random_state=seed
    )
    # HGB native and after the same imputer: how much a tree method that learns
    # its own NaN directions gains from missingness in this scenario (a yardstick)
    for method, model in (
        ("HGB", hgb),
        ("HGB pipeline", make_pipeline(SimpleImputer(strategy="mean"), clone(hgb))),
    ):
        # one OpenMP thread: HGB's 2 spinning threads crawl (50x) beside numba's on 2 busy cores
        with threadpool_limits(1, user_api="openmp"):
            score, fit_s, error = _fit_score(model, X_train, y_train, X_test, y_test, classifier)
        rows.append(
            dict(
                base,
                estimator="HistGradientBoosting",
                method=method,
                score=score,
                fit_s=fit_s,
                error=error,
            )
        )
        log(rows[-1])
    for est_name in estimators:
        est = getattr(obliquetrees, est_name)(random_state=seed, **configs[est_name])
        methods = {
            "native": clone(est),
            "pipeline": make_pipeline(SimpleImputer(strategy="mean"), clone(est)),
            "all indicators": make_pipeline(
                SimpleImputer(strategy="mean", add_indicator=True), clone(est)
            ),
        }
        for method, model in methods.items():
            score, fit_s, error = _fit_score(model, X_train, y_train, X_test, y_test, classifier)
            rows.append(
                dict(base, estimator=est_name, method=method, score=score, fit_s=fit_s, error=error)
            )
            log(rows[-1])
    return rows


def _scores(rows, **match):
    """Scores of the matching rows, in seed order (None where a fit failed)."""
    sel = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return [r["score"] for r in sorted(sel, key=lambda r: r["seed"])]


def _pm(values, scale):
    if not values or any(v is None for v in values):
        return "failed" if values else ""
    sd = np.std(values, ddof=1) if len(values) > 1 else 0.0
    return f"{np.mean(values) * scale:.2f} ± {sd * scale:.2f}"


def _failure(rows, **match):
    errors = [r["error"] for r in rows if r["error"] and all(r[k] == v for k, v in match.items())]
    return errors[0] if errors else ""


def summarise(rows, scenario):
    """Table rows (one per estimator and data set) and the acceptance counts."""
    table, counts = [], {}
    estimators = [
        e for e in dict.fromkeys(r["estimator"] for r in rows) if e != "HistGradientBoosting"
    ]
    for est in estimators:
        for name in dict.fromkeys(r["dataset"] for r in rows if r["estimator"] == est):
            classifier = name not in REGRESSION
            scale = 1.0 if classifier else 100.0  # R^2 shown x 100 = points
            match = dict(dataset=name, scenario=scenario)
            native = _scores(rows, estimator=est, method="native", **match)
            pipe = _scores(rows, estimator=est, method="pipeline", **match)
            every = _scores(rows, estimator=est, method="all indicators", **match)
            ref = dict(estimator="HistGradientBoosting", **match)
            hgb = _scores(rows, method="HGB", **ref)
            hgb_pipe = _scores(rows, method="HGB pipeline", **ref)
            hgb_gain = (
                _pm(list(np.subtract(hgb, hgb_pipe) * scale), 1.0)
                if hgb and hgb_pipe and None not in hgb + hgb_pipe
                else ""
            )
            ok = None
            diff = ""
            if native and pipe and None not in native and None not in pipe:
                d = np.subtract(native, pipe) * scale
                diff = _pm(list(d), 1.0)
                ok = bool(np.mean(d) >= MARGIN[scenario] - 1e-9)
                counts.setdefault(est, []).append((name, ok, classifier))
            missing = [
                r["missing_train"]
                for r in rows
                if r["dataset"] == name and r["scenario"] == scenario and r["method"] == "HGB"
            ]
            fit = {
                m: [
                    r["fit_s"]
                    for r in rows
                    if r["estimator"] == est
                    and r["method"] == m
                    and r["dataset"] == name
                    and r["scenario"] == scenario
                    and r["fit_s"]
                ]
                for m in ("native", "pipeline")
            }
            table.append(
                {
                    "estimator": est,
                    "data set": name,
                    "metric": "accuracy %" if classifier else "R² x 100",
                    "missing (train)": f"{100 * np.mean(missing):.1f} %" if missing else "",
                    "native": _pm(native, scale),
                    "pipeline (mean imputer)": _pm(pipe, scale),
                    "all indicators": _pm(every, scale),
                    "HGB": _pm(hgb, scale),
                    "HGB - HGB pipeline": hgb_gain,
                    "native - pipeline": diff,
                    "acceptance": {True: "yes", False: "no", None: "—"}[ok],
                    "fit s native / pipeline": " / ".join(
                        f"{np.mean(fit[m]):.2f}" if fit[m] else "—" for m in fit
                    ),
                    "failure": _failure(rows, estimator=est, **match),
                }
            )
    summary = []
    for est, results in counts.items():
        cls = [ok for _, ok, c in results if c]
        reg = [(n, ok) for n, ok, c in results if not c]
        if cls:
            met = sum(cls)
            summary.append(
                f"- {est}: {met}/{len(cls)} classification sets meet it"
                + (
                    f" ({'meets' if met >= 4 else 'misses'} the issue's 4 of 5)"
                    if len(cls) == 5
                    else ""
                )
            )
        for n, ok in reg:
            summary.append(f"- {est} on {n}: {'meets' if ok else 'misses'} it")
    return table, summary


def defaults_summary(rows, scenarios):
    """Issue 37's check: native - pipeline >= DEFAULTS_MARGIN points in every scenario."""
    misses, n_pairs = [], 0
    estimators = [
        e for e in dict.fromkeys(r["estimator"] for r in rows) if e != "HistGradientBoosting"
    ]
    for est in estimators:
        for name in dict.fromkeys(r["dataset"] for r in rows if r["estimator"] == est):
            scale = 1.0 if name not in REGRESSION else 100.0
            for scenario in scenarios:
                match = dict(estimator=est, dataset=name, scenario=scenario)
                native = _scores(rows, method="native", **match)
                pipe = _scores(rows, method="pipeline", **match)
                n_pairs += 1
                if not native or None in native + pipe:
                    misses.append(f"{est} on {name} ({scenario}): a fit failed")
                    continue
                d = float(np.mean(np.subtract(native, pipe)) * scale)
                if d < DEFAULTS_MARGIN - 1e-9:
                    misses.append(f"{est} on {name} ({scenario}): {d:+.2f} points")
    head = (
        f"**At defaults** (issue 37: native - pipeline >= {DEFAULTS_MARGIN:+g} points, mean of "
        f"the paired per-seed differences, in every scenario): met in {n_pairs - len(misses)} "
        f"of {n_pairs} (estimator, data set, scenario) cells"
    )
    return head + (".\n" + "\n".join(f"- misses: {m}" for m in misses) if misses else ".")


def add_arguments(parser):
    """The arguments of ``python -m benchmarks missing``."""
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument(
        "--datasets", nargs="*", default=CLASSIFICATION + REGRESSION, help="default: all six"
    )
    parser.add_argument(
        "--estimators",
        nargs="*",
        default=None,
        choices=list(CONFIGS),
        help="default: every classifier and regressor obliquetrees has",
    )
    parser.add_argument(
        "--max-train", type=int, default=4000, help="training rows per data set (default 4000)"
    )
    parser.add_argument(
        "--scenarios", nargs="*", default=SCENARIOS, choices=SCENARIOS, help="default: both"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny models, 300 training rows, 2 seeds; written to the temp directory",
    )
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="every estimator at its defaults (random_state only); written to missing_defaults.md",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="markdown file (default results/missing.md, or missing_defaults.md with --defaults)",
    )


def main(args):
    if args.quick and args.defaults:
        raise SystemExit("--quick and --defaults exclude each other")
    configs = QUICK_CONFIGS if args.quick else DEFAULT_CONFIGS if args.defaults else CONFIGS
    max_train = 300 if args.quick else args.max_train
    seeds = list(range(2 if args.quick else args.seeds))
    out = Path(args.out) if args.out else None
    if out is None:
        out = (
            Path(tempfile.gettempdir(), "obliquetrees-bench", "missing.md")
            if args.quick
            else Path("missing_defaults.md" if args.defaults else "missing.md")
        )
    available = args.estimators or list(CONFIGS)
    rows, started = [], time.perf_counter()

    def log(row):
        score = "failed" if row["score"] is None else f"{row['score']:.4g}"
        fit = "" if row["fit_s"] is None else f" fit {row['fit_s']:.2f}s"
        print(
            f"{row['dataset']} {row['scenario']} seed {row['seed']} {row['estimator']} "
            f"{row['method']}: {score}{fit} {row['error'] or ''}",
            flush=True,
        )

    for name in args.datasets:
        wanted = CLASSIFIERS if name not in REGRESSION else REGRESSORS
        estimators = [n for n in available if n in wanted]
        for scenario in args.scenarios:
            for seed in seeds:
                rows += run_cell(name, scenario, seed, estimators, configs, max_train, log)
    minutes = (time.perf_counter() - started) / 60
    tables, summaries = [], []
    for scenario in args.scenarios:
        table, summary = summarise(rows, scenario)
        tables.append((f"Scenario {scenario}", table))
        margin = MARGIN[scenario]
        summaries.append(
            f"**{scenario}** (accepted: native - pipeline >= {margin:+g} points):\n"
            + "\n".join(summary)
        )
    notes = f"""
Values: mean ± sd over {len(seeds)} seeds (0..{len(seeds) - 1}) of test accuracy in % or
R² x 100 (california_housing); "native - pipeline" is the mean ± sd of the paired per-seed
difference in points. Acceptance uses its mean. Training rows: at most {max_train} (stratified
subsample drawn by the seed, the same rows for every method); test part: the data set's fixed
test split, else a seeded third of the rows. MCAR rate {MCAR_RATE:.0%}; informative: top quintile
(x >= training 80th percentile) of half of the columns removed (see the module docstring).
"all indicators" = mean imputer with an indicator for every feature with NaN (the first design of
native handling); "HGB - HGB pipeline" = what HistGradientBoosting gains from its own native NaN
over the same imputer (the label information the missingness carries, for a reference method).
"missing (train)" is the realised fraction of missing training entries. HGB runs with its
defaults and one OpenMP thread. Run time {minutes:.1f} min.
{"QUICK smoke run: tiny models, not results." if args.quick else ""}
Estimator settings (random_state = seed): {json.dumps({n: configs[n] for n in available})}.

Raw per-seed rows: {out.with_suffix(".json").name}.

Acceptance summary:

""" + "\n\n".join(summaries)
    if args.defaults:
        notes += "\n\n" + defaults_summary(rows, args.scenarios)
    write_results(out.with_suffix(".json"), data={"settings": configs, "rows": rows})
    path = write_results(
        out,
        "Missing values: native NaN vs mean imputation vs HistGradientBoosting"
        + (" (QUICK smoke run)" if args.quick else "")
        + (" at every estimator's defaults" if args.defaults else ""),
        tables,
        notes,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("missing")
