"""Categorical columns: native ``categorical_features`` vs one-hot and ordinal pipelines vs HGB.

For every mixed-type set in ``../shared/data/tabular`` (categorical and
numeric columns, some missing; see its MANIFEST) and seed ``s``, one seeded
split (75 % training, stratified for classification; regression targets
standardised on the training part, R^2 unchanged) is given to:

- native: the obliquetrees estimator at its defaults on the DataFrame
  (categorical columns as pandas ``category``; ``categorical_features``
  at its default ``"from_dtype"``);
- one-hot: ``OneHotEncoder(handle_unknown="ignore")`` on the categorical
  columns (a missing value is a category of its own), the numeric ones
  passed through, then the same estimator;
- ordinal: ``OrdinalEncoder`` codes (unknown and missing categories NaN,
  which every estimator handles natively), then the same estimator;
- HGB: scikit-learn's HistGradientBoosting with ``categorical_features=
  "from_dtype"`` (its defaults), the yardstick.

Every estimator runs at its defaults (``random_state`` = the seed, ``n_jobs=2``
where it has one). Scores are accuracy in points (%) or R^2 x 100. Fit and
predict seconds are wall clock of this process; model size is the pickle's.

Leakage guard (issue 40): each set again with one more categorical column
of ``NOISE_LEVELS`` random levels (within the cardinality limit), native
only ("noise column": its score minus native's); and, as its control, with
one more constant numeric column instead ("noise - constant": what the noise
column costs beyond one more column, which alone moves a method that draws
random numbers per feature); a column unique to every row must be refused
with a clear error.

Acceptance (issue 40): native >= the better pipeline - 0.5 points on at
least 80 % of (estimator, set) pairs and never below it by more than 2; the
noise column costs no more than noise; CO2 and hinge native fit time <= 1.5x
the one-hot pipeline's.

    python -m benchmarks categorical                  # 8 sets, 3 seeds, every estimator
    python -m benchmarks categorical --datasets hmda chile --seeds 2
    python -m benchmarks categorical --report         # the markdown again from the json
"""

import json
import pickle
import time
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder
from threadpoolctl import threadpool_limits

import obliquetrees
from benchmarks.common import results_path, write_results
from benchmarks.datasets import DATA_DIR
from benchmarks.estimators import accepts, public_estimators

TABULAR = DATA_DIR / "tabular"
DATASETS = [
    "hmda",
    "males",
    "wife_insurance",
    "chile",
    "diamonds",
    "cps1988",
    "islr_wage",
    "ames",
]
METHODS = ["native", "one-hot", "ordinal"]
#: Random levels of the leakage guard's noise column (the cardinality limit is 1000).
NOISE_LEVELS = 300
#: Points native may lose against the better pipeline (and at most, anywhere).
MARGIN, WORST = 0.5, 2.0


def load(name):
    """The set's DataFrame (categorical columns as pandas categories), target and metadata."""
    import pandas as pd

    meta = json.loads((TABULAR / f"{name}.json").read_text())
    frame = pd.read_csv(
        TABULAR / f"{name}.csv.gz", dtype={c: "category" for c in meta["categorical"]}
    )
    return frame.drop(columns="target"), frame["target"].to_numpy(), meta


def split(X, y, meta, seed):
    """75/25 split (stratified for classification; regression targets standardised)."""
    classifier = meta["task"] == "classification"
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=seed, stratify=y if classifier else None
    )
    if not classifier:
        mean, sd = y_train.mean(), y_train.std()
        y_train, y_test = (y_train - mean) / sd, (y_test - mean) / sd
    return X_train, X_test, y_train, y_test


def seeded_splits(name, seeds):
    """``(meta, seed, X_train, X_test, y_train, y_test)`` of one set, seed by seed."""
    X, y, meta = load(name)
    for seed in seeds:
        yield (meta, seed, *split(X, y, meta, seed))


def task_estimators(estimators, meta):
    """The names in ``estimators`` of the set's task (classifiers or regressors)."""
    kind = "Classifier" if meta["task"] == "classification" else "Regressor"
    return [e for e in estimators if e.endswith(kind)]


def native(name, seed):
    """The obliquetrees estimator ``name`` at its defaults, fed the DataFrame as it is."""
    params = {"random_state": seed, **({"n_jobs": 2} if accepts(name, "n_jobs") else {})}
    return getattr(obliquetrees, name)(**params)


def models(name, meta, seed):
    """Method -> unfitted model for one obliquetrees estimator ``name``."""
    est = native(name, seed)
    categorical = meta["categorical"]
    one_hot = ColumnTransformer(
        [("categories", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical)],
        remainder="passthrough",
    )
    ordinal = ColumnTransformer(
        [
            (
                "categories",
                OrdinalEncoder(
                    handle_unknown="use_encoded_value",
                    unknown_value=np.nan,
                    encoded_missing_value=np.nan,
                ),
                categorical,
            )
        ],
        remainder="passthrough",
    )
    return {
        "native": clone(est),
        "one-hot": make_pipeline(one_hot, clone(est)),
        "ordinal": make_pipeline(ordinal, clone(est)),
    }


def fit_score(model, X_train, y_train, X_test, y_test, classifier):
    """Score (points), fit and predict seconds, pickle bytes; or the error's first line."""
    try:
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = model.predict(X_test)
        predict_s = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - the table says which method failed and why
        return dict(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    score = accuracy_score(y_test, pred) if classifier else r2_score(y_test, pred)
    return dict(
        score=100.0 * float(score),
        fit_s=fit_s,
        predict_s=predict_s,
        size_kb=len(pickle.dumps(model)) / 1024,
        error=None,
    )


def with_noise(X, seed, unique=False):
    """``X`` with one more categorical column: NOISE_LEVELS random levels, or one per row."""
    import pandas as pd

    rng = np.random.default_rng([seed, 40])
    codes = np.arange(len(X)) if unique else rng.integers(0, NOISE_LEVELS, len(X))
    return X.assign(noise=pd.Categorical([f"level{c}" for c in codes]))


def with_constant(X, seed):
    """``X`` with one more numeric column, constant: the control of the noise column."""
    return X.assign(constant=0.0)


def run_set(name, seeds, estimators, log):
    """Raw rows of one data set: every seed, estimator and method, HGB and the noise column."""
    rows = []
    for meta, seed, X_train, X_test, y_train, y_test in seeded_splits(name, seeds):
        classifier = meta["task"] == "classification"
        base = dict(dataset=name, seed=seed, n_train=len(X_train))
        hgb_class = HistGradientBoostingClassifier if classifier else HistGradientBoostingRegressor
        hgb = hgb_class(categorical_features="from_dtype", random_state=seed)
        with threadpool_limits(1, user_api="openmp"):  # HGB's threads beside numba's crawl
            result = fit_score(hgb, X_train, y_train, X_test, y_test, classifier)
        rows.append(dict(base, estimator="HistGradientBoosting", method="native", **result))
        log(rows[-1])
        for est_name in task_estimators(estimators, meta):
            for method, model in models(est_name, meta, seed).items():
                result = fit_score(model, X_train, y_train, X_test, y_test, classifier)
                rows.append(dict(base, estimator=est_name, method=method, **result))
                log(rows[-1])
            for method, extra in (
                ("native + noise", with_noise),
                ("native + constant", with_constant),
            ):
                train_x, test_x = (extra(part, seed) for part in (X_train, X_test))
                result = fit_score(
                    native(est_name, seed), train_x, y_train, test_x, y_test, classifier
                )
                rows.append(dict(base, estimator=est_name, method=method, **result))
                log(rows[-1])
    meta, _, X_train, X_test, y_train, y_test = next(seeded_splits(name, [0]))
    est_name = task_estimators(estimators, meta)[0]
    train_id = with_noise(X_train, 0, True)
    classifier = meta["task"] == "classification"
    result = fit_score(native(est_name, 0), train_id, y_train, X_test, y_test, classifier)
    rows.append(dict(dataset=name, seed=0, estimator=est_name, method="native + id", **result))
    log(rows[-1])
    return rows


def _values(rows, key="score", **match):
    sel = sorted(
        (r for r in rows if all(r.get(k) == v for k, v in match.items())), key=lambda r: r["seed"]
    )
    return [r.get(key) for r in sel]


def _mean(values):
    return None if not values or None in values else float(np.mean(values))


def summarise(rows):
    """One table row per (estimator, set), and the acceptance figures."""
    table, gaps, fit_ratio, noise = [], [], {}, []
    pairs = dict.fromkeys(
        (r["estimator"], r["dataset"]) for r in rows if r["estimator"] != "HistGradientBoosting"
    )
    for est, name in pairs:
        score = {m: _mean(_values(rows, estimator=est, dataset=name, method=m)) for m in METHODS}
        fit = {
            m: _mean(_values(rows, "fit_s", estimator=est, dataset=name, method=m)) for m in METHODS
        }
        predict = {
            m: _mean(_values(rows, "predict_s", estimator=est, dataset=name, method=m))
            for m in METHODS
        }
        native = _values(rows, estimator=est, dataset=name, method="native")
        noisy = _values(rows, estimator=est, dataset=name, method="native + noise")
        control = _values(rows, estimator=est, dataset=name, method="native + constant")
        hgb = _mean(_values(rows, estimator="HistGradientBoosting", dataset=name))
        row = dict(estimator=est, dataset=name, HGB=hgb, **score)
        if None not in score.values():
            row["native - better"] = score["native"] - max(score["one-hot"], score["ordinal"])
            gaps.append(row["native - better"])
        if None not in fit.values():
            row["fit s native / one-hot / ordinal"] = " / ".join(f"{fit[m]:.2f}" for m in METHODS)
            if est.startswith(("CO2", "Hinge")):
                fit_ratio[(est, name)] = fit["native"] / fit["one-hot"]
        if None not in predict.values():
            row["predict s native / one-hot / ordinal"] = " / ".join(
                f"{predict[m]:.3f}" for m in METHODS
            )
        if native and noisy and None not in native + noisy:
            d = np.subtract(noisy, native)
            sd = np.std(d, ddof=1) if len(d) > 1 else 0.0
            row["noise column"] = f"{np.mean(d):+.2f} ± {sd:.2f}"
            noise.append((float(np.mean(d)), float(sd)))
        if noisy and control and None not in noisy + control:
            d = np.subtract(noisy, control)
            sd = np.std(d, ddof=1) if len(d) > 1 else 0.0
            row["noise - constant"] = f"{np.mean(d):+.2f} ± {sd:.2f}"
        size = _mean(_values(rows, "size_kb", estimator=est, dataset=name, method="native"))
        size_hot = _mean(_values(rows, "size_kb", estimator=est, dataset=name, method="one-hot"))
        if size and size_hot:
            row["size KB native / one-hot"] = f"{size:.0f} / {size_hot:.0f}"
        table.append(row)
    figures = dict(
        pairs=len(gaps),
        within_margin=sum(g >= -MARGIN - 1e-9 for g in gaps),
        worst=min(gaps) if gaps else None,
        fit_ratio_max=max(fit_ratio.values()) if fit_ratio else None,
        fit_ratio_median=float(np.median(list(fit_ratio.values()))) if fit_ratio else None,
        noise=noise,
    )
    return table, figures


def add_arguments(parser):
    """The arguments of ``python -m benchmarks categorical``."""
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    parser.add_argument(
        "--estimators",
        nargs="*",
        default=public_estimators(),
        choices=public_estimators(),
        help="default: every obliquetrees estimator",
    )
    parser.add_argument("--out", default="categorical.md")
    parser.add_argument(
        "--report", action="store_true", help="rewrite the markdown from the json of the last run"
    )


def main(args):
    """Run the comparison and write ``results/categorical.md`` (and its json)."""
    run = None
    if args.report:  # the tables again from the rows of the last run
        saved = json.loads(results_path(args.out.replace(".md", ".json")).read_text())
        rows, run = saved["rows"], saved.get("provenance", {})
    else:
        rows = []
        for name in args.datasets:
            rows += run_set(
                name, range(args.seeds), args.estimators, lambda r: print(r, flush=True)
            )
    table, figures = summarise(rows)
    ids = [r for r in rows if r["method"] == "native + id"]
    notes = __doc__.split("\n\n", 1)[1].split("    python -m")[0] + _reading(figures, ids)
    if run is not None:
        notes = (
            f"Tables rewritten by `--report` from `{Path(args.out).stem}.json`; the rows are "
            f"those of the run at revision {run.get('revision', '?')} "
            f"({run.get('date', '?')}), whose package code is what they measure.\n\n" + notes
        )
    columns = [
        "estimator",
        "dataset",
        *METHODS,
        "HGB",
        "native - better",
        "noise column",
        "noise - constant",
        "fit s native / one-hot / ordinal",
        "predict s native / one-hot / ordinal",
        "size KB native / one-hot",
    ]
    table = [{c: r.get(c, "") for c in columns} for r in table]
    write_results(args.out, "Categorical columns: native vs pipelines", [("Scores", table)], notes)
    if not args.report:
        write_results(args.out.replace(".md", ".json"), data=dict(rows=rows, figures=figures))


def _reading(figures, ids):
    pairs, within = figures["pairs"], figures["within_margin"]
    lines = [
        "",
        "## Acceptance figures",
        "",
        f"- native >= better pipeline - {MARGIN} points: {within} of {pairs} pairs "
        f"({100 * within / max(pairs, 1):.0f} %; needs 80 %); worst {figures['worst']:+.2f} "
        f"points (needs >= -{WORST}).",
        f"- CO2 and hinge native fit time / one-hot pipeline's: median "
        f"{figures['fit_ratio_median']:.2f}, max {figures['fit_ratio_max']:.2f} (needs <= 1.5).",
        "- noise column (native with it - native without, mean ± sd over seeds): "
        + ", ".join(f"{m:+.2f} ± {s:.2f}" for m, s in figures["noise"]),
        "- a column unique to every row: "
        + "; ".join(f"{r['dataset']}: {r['error'] or 'accepted'}" for r in ids),
        "",
    ]
    return "\n".join(lines)
