"""Soft decision trees on the paper's data sets and protocol (Irsoy et al., 2012).

Protocol (the paper's, with 5 seeds instead of its 5x2 folds): for each data
set and seed, one third of the rows (seeded permutation) is the test set;
the remaining two thirds are given to ``SoftTree*`` with
``validation_fraction=0.5``, which trains on one half and decides on splits
with the other, as in the paper. Regression errors are MSEs of the target
standardised with the mean/sd of those two thirds.

scikit-learn's DecisionTreeRegressor/Classifier runs in the same process on
the same split: ``max_depth`` is chosen from {1..20, None} on the very same
train/validation halves our estimator uses (reproduced from its seed), then
the tree is refitted on both halves (as in ../shared/ANCHORS.md section 3).

Variants of ours: "ours" (defaults: the paper's growth, soft routing; the
regressor's tol=1e-2 reproduces the paper's tree sizes), the same tree with
hard routing, "finetune" (same growth, then ``finetune_epochs`` of joint SGD
on all parameters, beyond the paper) and, for regression, tol=1e-3 (the
authors' code's threshold).

    python -m benchmarks soft            # 8 regression + 8 binary sets, 5 seeds
    python -m benchmarks soft --quick    # 2 + 2 small sets, 2 seeds (smoke test)
"""

import time

import numpy as np
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from benchmarks.common import write_results
from benchmarks.datasets import load
from obliquetrees import SoftTreeClassifier, SoftTreeRegressor
from obliquetrees.soft.training import validation_split
from obliquetrees.utils.seeds import draw_seeds

#: name -> (paper label, soft MSE, soft size, hard MSE, hard size) (Table 1)
PAPER_REGRESSION = {
    "abalone": ("ABA", 0.439, 7, 0.557, 32),
    "boston": ("BOS", 0.271, 11, 0.344, 18),
    "california_housing": ("CAL", 0.312, 3, 0.326, 201),
    "cpu_act": ("COM", 0.037, 5, 0.046, 30),
    "concrete": ("CON", 0.264, 13, 0.286, 69),
    "puma8nh": ("8NH", 0.388, 9, 0.416, 52),
    "puma8nm": ("8NM", 0.054, 13, 0.084, 144),
    "fried_delve": (
        "ADD (stand-in: fried_delve, another sample of the add10 function)",
        0.094,
        15,
        0.267,
        202,
    ),
}
#: name -> (paper label, soft acc, soft size, hard acc, hard size) (Table 2)
PAPER_CLASSIFICATION = {
    "breast_cancer_wisconsin": ("BRE", 95.34, 17, 93.80, 47),
    "german": ("GER", 75.74, 16, 69.07, 142),
    "magic": ("MAG", 81.27, 17, 84.09, 1072),
    "musk2": ("MUS", 92.25, 22, 94.62, 202),
    "pima": ("PIM", 70.85, 26, 69.41, 111),
    "ringnorm": ("RIN", 88.94, 368, 87.54, 354),
    "spambase": ("SPA", 78.38, 22, 90.14, 155),
    "twonorm": ("TWO", 97.92, 41, 87.59, 429),
}
DEPTHS = list(range(1, 21)) + [None]


def _arrays(name):
    data = load(name)
    if "X" in data:
        return data["X"].astype(np.float64), data["y"]
    # fixed train/test files (abalone): pooled and re-split like every other set
    X = np.vstack([data["X_train"], data["X_test"]]).astype(np.float64)
    return X, np.concatenate([data["y_train"], data["y_test"]])


def _sklearn_tree(classifier, X_rest, y_rest, train, val, seed):
    """Depth chosen on our validation half, then refitted on both halves."""
    cls = DecisionTreeClassifier if classifier else DecisionTreeRegressor
    best, best_depth = np.inf, None
    for depth in DEPTHS:
        tree = cls(max_depth=depth, random_state=seed).fit(X_rest[train], y_rest[train])
        pred = tree.predict(X_rest[val])
        err = np.mean(pred != y_rest[val]) if classifier else np.mean((pred - y_rest[val]) ** 2)
        if err < best - 1e-12:
            best, best_depth = err, depth
    start = time.perf_counter()
    tree = cls(max_depth=best_depth, random_state=seed).fit(X_rest, y_rest)
    return tree, time.perf_counter() - start, best_depth


def run_one(name, seed, classifier, finetune_epochs):
    X, y = _arrays(name)
    if classifier:
        y = np.unique(y, return_inverse=True)[1]
    perm = np.random.default_rng(seed).permutation(len(y))
    n_test = len(y) // 3
    test, rest = perm[:n_test], perm[n_test:]
    X_rest, y_rest, X_test, y_test = X[rest], y[rest], X[test], y[test]
    if classifier:

        def score(pred):
            return 100.0 * np.mean(pred == y_test)
    else:
        sd = y_rest.std()  # MSE of the target standardised with the 2/3's statistics

        def score(pred):
            return float(np.mean(((pred - y_test) / sd) ** 2))

    est_cls = SoftTreeClassifier if classifier else SoftTreeRegressor
    variants = [
        ("faithful", {}),
        ("finetune", {"finetune_epochs": finetune_epochs}),
        ("train-selected", {"restart_selection": "train"}),
    ]
    if not classifier:
        variants.append(("tol=1e-3", {"tol": 1e-3}))
    out = {}
    for label, params in variants:
        est = est_cls(random_state=seed, **params)
        start = time.perf_counter()
        est.fit(X_rest, y_rest)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = est.predict(X_test)
        pred_s = time.perf_counter() - start
        out[label] = dict(err=score(pred), nodes=est.tree_.node_count, fit=fit_s, pred=pred_s)
        if label == "faithful":
            est.set_params(routing="hard")
            start = time.perf_counter()
            pred = est.predict(X_test)
            out["hard"] = dict(
                err=score(pred), nodes=est.tree_.node_count, pred=time.perf_counter() - start
            )
        elif label == "finetune":
            info = est.finetune_info_
            out[label]["improved"] = info is not None and info["epoch"] > 0
    # the same train/validation halves as the estimator (same seed draw)
    train, val = validation_split(y_rest, 0.5, draw_seeds(seed, 3)[0], stratify=classifier)
    tree, fit_s, depth = _sklearn_tree(classifier, X_rest, y_rest, train, val, seed)
    start = time.perf_counter()
    pred = tree.predict(X_test)
    out["sklearn"] = dict(
        err=score(pred),
        nodes=tree.tree_.node_count,
        fit=fit_s,
        pred=time.perf_counter() - start,
        depth=depth,
    )
    return out


DEVIATIONS = """Deviations and filled gaps (see the estimators' docstrings): initial gate P(left) =
sigmoid(-0.5 (x_j - threshold)) on the standardised feature of the best hard split of the
membership-weighted data, U(-0.005, 0.005) on the other weights, children at the hard
split's side means (classifiers: their clipped logits), as in the authors' code (the
paper's literal w_0 = 1 cannot encode a threshold); online SGD with momentum 0.1 and a
per-sample step decay of 0.9999 (authors' code), 10 restarts with step 5 / 2^t, 25 epochs,
a restart stopped, mid-epoch if need be, once its step decayed below 1e-6 of its start
(ours; only on large sets); the restart is chosen on the validation error (authors' code;
the paper's text says training error, which overfits small sets); samples with path
probability < 1e-7 to the node being split are left out of its SGD (ours); the regressor
keeps a split if the validation MSE (of the standardised target) drops by more than 1e-2
(the paper gives no threshold; 1e-2 reproduces its Table 1 sizes, the authors' 1e-3 is the
'tol=1e-3' column), the classifier if the validation misclassification rate drops by more
than 1e-3 (authors' code)."""


def _summary(rows, classifier):
    """Criteria of the issue, counted over the rows."""
    n = len(rows)
    if classifier:
        return [
            f"classification: within 2 points of the paper's soft-tree accuracy on "
            f"{sum(r['within 2 pts of paper'] for r in rows)}/{n} sets "
            f"(with finetune: "
            f"{sum(r['ours+finetune acc %'] >= _paper_acc(r) - 2 for r in rows)}"
            f"/{n}); above scikit-learn's depth-tuned tree on "
            f"{sum(r['beats sklearn'] for r in rows)}/{n} "
            f"(with finetune: {sum(r['finetune beats sklearn'] for r in rows)}/{n})",
        ]
    return [
        f"regression: MSE <= 1.1 x the paper's and nodes <= 2 x the paper's on "
        f"{sum(r['<= 1.1 x paper MSE and <= 2 x size'] for r in rows)}/{n} sets (defaults)",
        f"regression: MSE below scikit-learn's depth-tuned tree on "
        f"{sum(r['beats sklearn'] for r in rows)}/{n} (defaults), "
        f"{sum(r['finetune beats sklearn'] for r in rows)}/{n} (finetune, same sizes), "
        f"{sum(r['tol=1e-3 beats sklearn'] for r in rows)}/{n} (tol=1e-3)",
    ]


def _paper_acc(row):
    return float(row["paper soft acc % / size"].split(" / ")[0])


def _mean(runs, key, field):
    return float(np.mean([r[key][field] for r in runs]))


def add_arguments(parser):
    """The arguments of ``python -m benchmarks soft``."""
    parser.add_argument("--quick", action="store_true", help="2 + 2 small sets, 2 seeds")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--finetune-epochs", type=int, default=20)
    parser.add_argument("--dataset", action="append", help="restrict to these sets")
    parser.add_argument("--out", default="soft_tree.md")


def main(args):
    seeds = 2 if args.quick else args.seeds
    reg_sets = ["boston", "concrete"] if args.quick else list(PAPER_REGRESSION)
    cls_sets = ["breast_cancer_wisconsin", "pima"] if args.quick else list(PAPER_CLASSIFICATION)
    if args.dataset:
        reg_sets = [d for d in reg_sets if d in args.dataset]
        cls_sets = [d for d in cls_sets if d in args.dataset]
    # warm-up: numba cache load / compilation outside the timings
    rng = np.random.default_rng(0)
    Xw = rng.normal(size=(60, 3))
    SoftTreeRegressor(n_restarts=1, max_epochs=1, finetune_epochs=1).fit(Xw, Xw[:, 0]).predict(Xw)
    warm = SoftTreeClassifier(n_restarts=1, max_epochs=1, finetune_epochs=1)
    warm.fit(Xw, Xw[:, 0] > 0).predict(Xw)

    tables = []
    summary = []
    for classifier, sets, paper in (
        (False, reg_sets, PAPER_REGRESSION),
        (True, cls_sets, PAPER_CLASSIFICATION),
    ):
        rows, time_rows = [], []
        for name in sets:
            runs = [run_one(name, s, classifier, args.finetune_epochs) for s in range(seeds)]
            label, p_soft, p_size, p_hard, p_hsize = paper[name]
            unit = "acc %" if classifier else "MSE"
            row = {
                "dataset": f"{name} ({label})",
                f"ours {unit}": _mean(runs, "faithful", "err"),
                "ours nodes": _mean(runs, "faithful", "nodes"),
                f"ours hard-routing {unit}": _mean(runs, "hard", "err"),
                f"ours+finetune {unit}": _mean(runs, "finetune", "err"),
                "finetune improved val (runs)": sum(r["finetune"]["improved"] for r in runs),
                f"ours restart on train loss {unit}": _mean(runs, "train-selected", "err"),
                "ours restart on train loss nodes": _mean(runs, "train-selected", "nodes"),
            }
            if not classifier:
                row["ours tol=1e-3 MSE"] = _mean(runs, "tol=1e-3", "err")
                row["ours tol=1e-3 nodes"] = _mean(runs, "tol=1e-3", "nodes")
            row.update(
                {
                    f"sklearn {unit}": _mean(runs, "sklearn", "err"),
                    "sklearn nodes": _mean(runs, "sklearn", "nodes"),
                    "sklearn depths": str([r["sklearn"]["depth"] for r in runs]),
                    f"paper soft {unit} / size": f"{p_soft} / {p_size}",
                    f"paper hard {unit} / size": f"{p_hard} / {p_hsize}",
                }
            )
            if classifier:
                row["within 2 pts of paper"] = row[f"ours {unit}"] >= p_soft - 2.0
                row["beats sklearn"] = row[f"ours {unit}"] > row[f"sklearn {unit}"]
                row["finetune beats sklearn"] = (
                    row[f"ours+finetune {unit}"] > row[f"sklearn {unit}"]
                )
            else:
                row["<= 1.1 x paper MSE and <= 2 x size"] = bool(
                    row[f"ours {unit}"] <= 1.1 * p_soft and row["ours nodes"] <= 2 * p_size
                )
                row["beats sklearn"] = row[f"ours {unit}"] < row[f"sklearn {unit}"]
                row["finetune beats sklearn"] = (
                    row[f"ours+finetune {unit}"] < row[f"sklearn {unit}"]
                )
                row["tol=1e-3 beats sklearn"] = row["ours tol=1e-3 MSE"] < row[f"sklearn {unit}"]
            rows.append(row)
            time_rows.append(
                {
                    "dataset": name,
                    "ours fit s": _mean(runs, "faithful", "fit"),
                    "ours predict s (soft)": _mean(runs, "faithful", "pred"),
                    "ours predict s (hard)": _mean(runs, "hard", "pred"),
                    "ours+finetune fit s": _mean(runs, "finetune", "fit"),
                    **(
                        {}
                        if classifier
                        else {"ours tol=1e-3 fit s": _mean(runs, "tol=1e-3", "fit")}
                    ),
                    "sklearn fit s (chosen depth)": _mean(runs, "sklearn", "fit"),
                    "sklearn predict s": _mean(runs, "sklearn", "pred"),
                }
            )
            print(rows[-1], time_rows[-1], flush=True)
        if rows:
            kind = "binary classification (Table 2)" if classifier else "regression (Table 1)"
            tables.append((f"{kind}: means over {seeds} seeds", rows))
            summary += _summary(rows, classifier)
            tables.append((f"{kind}: times (s, means over {seeds} seeds)", time_rows))
    notes = (
        "Protocol: per seed, 1/3 test; the other 2/3 go to our estimator with "
        "validation_fraction=0.5 (train half / validation half, the paper's 5x2 CV "
        "replaced by 5 seeds). MSE on the target standardised with the 2/3's mean/sd; "
        "accuracy in %. scikit-learn: max_depth from {1..20, None} chosen on the same "
        "validation half, refitted on both halves. Node counts are tree_.node_count "
        "(internal + leaves). Variants: 'ours' = defaults (faithful growth, soft "
        "routing; regressor tol=1e-2, classifier tol=1e-3); 'hard-routing' = the same "
        "tree predicting with the shared hard "
        f"traversal; 'finetune' = the same growth then finetune_epochs={args.finetune_epochs} "
        "of joint SGD keeping the best validation state (beyond the paper); "
        "'tol=1e-3' (regression) = the split threshold of the authors' code; "
        "'restart on train loss' = restart_selection='train' (the paper's text). "
        "fried_delve is a different (larger) sample of the add10 (Friedman #1) function.\n\n"
        + DEVIATIONS
        + "\n\nSummary (computed from the tables below):\n\n"
        + "\n".join(f"- {line}" for line in summary)
    )
    title = "Soft decision trees (Irsoy et al. 2012): Tables 1 and 2"
    write_results(args.out, title, tables, notes)


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("soft")
