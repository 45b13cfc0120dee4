"""Category coordinates adjusted for the other features or not: chosen leaving one data set out.

Two ways to place the categories on their coordinate
(``obliquetrees/_training/categories.py``):

- adjusted (the default): each category's effect given the other features,
  from one linear mixed model of every feature;
- raw: each categorical feature alone, its categories' shrunk mean targets
  (the same code with ``MAX_JOINT = 0``, where every feature is fitted alone
  and without the numeric features).

For every set in ``../shared/data/tabular`` and seed, the training part of
``bench_categorical``'s split is split again (75 % fit, 25 % validation,
stratified for classification); every estimator at its defaults fits the
fit part both ways and is scored on the validation part, and fits the whole
training part both ways and is scored on the test part. Leave one data set
out: for each set, the way with the higher validation score averaged over
the other sets (every estimator of their task, every seed) is chosen, and
its test score on the held-out set is reported beside the default's (the
choice is made without the held-out set's validation or test parts). Scores
are accuracy in points or R^2 x 100.

    python -m benchmarks categorical-validation               # 8 sets, 2 seeds
    python -m benchmarks categorical-validation --datasets hmda --seeds 1
"""

import numpy as np
from sklearn.model_selection import train_test_split

from benchmarks.bench_categorical import (
    DATASETS,
    fit_score,
    native,
    seeded_splits,
    task_estimators,
)
from benchmarks.common import write_results
from benchmarks.estimators import public_estimators

WAYS = ("adjusted", "raw")


def _fit_way(way, model, X_fit, y_fit, X_score, y_score, classifier):
    """``fit_score`` with the categories placed ``way``."""
    from obliquetrees._training import categories

    joint = categories.MAX_JOINT
    categories.MAX_JOINT = joint if way == "adjusted" else 0
    try:
        return fit_score(model, X_fit, y_fit, X_score, y_score, classifier)
    finally:
        categories.MAX_JOINT = joint


def run_set(name, seeds, estimators, log):
    """Validation and test scores of both ways, per seed and estimator of the set's task."""
    rows = []
    for meta, seed, X_train, X_test, y_train, y_test in seeded_splits(name, seeds):
        classifier = meta["task"] == "classification"
        X_fit, X_val, y_fit, y_val = train_test_split(
            X_train,
            y_train,
            test_size=0.25,
            random_state=seed,
            stratify=y_train if classifier else None,
        )
        for est in task_estimators(estimators, meta):
            for way in WAYS:
                val = _fit_way(way, native(est, seed), X_fit, y_fit, X_val, y_val, classifier)
                test = _fit_way(
                    way, native(est, seed), X_train, y_train, X_test, y_test, classifier
                )
                rows.append(
                    dict(
                        dataset=name,
                        seed=seed,
                        estimator=est,
                        way=way,
                        validation=val.get("score"),
                        test=test.get("score"),
                        error=val["error"] or test["error"],
                    )
                )
                log(rows[-1])
    return rows


def _mean(rows, key, **match):
    values = [r[key] for r in rows if all(r[k] == v for k, v in match.items())]
    return float(np.mean(values)) if values and None not in values else None


def leave_one_out(rows):
    """Per held-out set: both ways' validation and test means, the choice and its test score."""
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    table = []
    for held in names:
        others = [r for r in rows if r["dataset"] != held]
        score = {w: _mean(others, "validation", way=w) for w in WAYS}
        row = {"held-out set": held}
        for w in WAYS:
            row[f"validation {w}"] = _mean(rows, "validation", dataset=held, way=w)
            row[f"test {w}"] = _mean(rows, "test", dataset=held, way=w)
        if None in score.values():  # one set run alone: no other set to choose on
            row["chosen on the other sets"] = "(no other set)"
        else:
            chosen = max(WAYS, key=lambda w: score[w])
            row["chosen on the other sets"] = chosen
            row["test of the choice - default"] = row[f"test {chosen}"] - row["test adjusted"]
        table.append(row)
    return table


def add_arguments(parser):
    """The arguments of ``python -m benchmarks categorical-validation``."""
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (default 2)")
    parser.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    parser.add_argument(
        "--estimators", nargs="*", default=public_estimators(), choices=public_estimators()
    )
    parser.add_argument("--out", default="categorical_validation.md")


def main(args):
    """Run both ways on validation and test parts; write the leave-one-set-out table."""
    rows = []
    for name in args.datasets:
        rows += run_set(name, range(args.seeds), args.estimators, lambda r: print(r, flush=True))
    table = leave_one_out(rows)
    per_estimator = [
        {
            "estimator": est,
            "dataset": name,
            **{
                f"validation {w}": _mean(rows, "validation", estimator=est, dataset=name, way=w)
                for w in WAYS
            },
            **{f"test {w}": _mean(rows, "test", estimator=est, dataset=name, way=w) for w in WAYS},
        }
        for est, name in dict.fromkeys((r["estimator"], r["dataset"]) for r in rows)
    ]
    notes = __doc__.split("\n\n", 1)[1].split("    python -m")[0]
    write_results(
        args.out,
        "Category coordinates: adjusted or raw, leaving one data set out",
        [("Leave one data set out", table), ("Per estimator and set", per_estimator)],
        notes,
    )
    write_results(args.out.replace(".md", ".json"), data=dict(rows=rows, lodo=table))
