"""E2EDTRegressor(max_depth=6) variants on validation folds of the regression training parts.

Choosing a default on the test parts of ``bench_regression.py`` would make its
figures optimistic, so the choices behind E2EDTRegressor's greedy stumps and
stored leaf values were made here, on the training parts only: for each of
the nine data sets and seeds 0..4 (``--seeds``), the training part of the
regression benchmark's split for that seed (``bench_regression.split``: the
same 75/25 split, abalone's fixed UCI split, the target standardised by the
training part) is cut into ``--folds`` shuffled folds (default 4, generator
seeded by ``[seed, 7]``); every variant and ``DecisionTreeRegressor(max_depth=6)``
is fitted on all folds but one (``random_state=seed``) and scored (R²) on the
held-out fold. The test part is never loaded into a model or scored. A data
set's figure is the mean over seeds of the mean over folds.

Variants (the package's code, with other behaviours installed as drop-ins
in :mod:`obliquetrees._training.leaf_models` and
:mod:`obliquetrees.e2edt._greedy` for the duration of a fit, as
``co2_grower_ab.py`` does for its growth loop):

- ``before``: the regressor as it was at 1ef6d09, bit for bit: greedy stumps
  are the paper's alone (EM from a random direction) and every leaf stores
  its EM mean (:func:`em_leaf_means`).
- ``hard-leaves``: leaves store the mean target of the training rows that
  hard routing sends there; greedy stumps still the paper's alone.
- ``defaults``: the package as it is: hard-routed leaf means, and each greedy
  split the paper's stump or the node's best axis-aligned split, whichever
  reduces the squared error more.
- The alternatives considered for the greedy split, with hard-routed leaf
  means (:func:`keep_candidates`): ``axis-start`` (the stump EM trains from
  the node's best axis-aligned split, alone: the paper's stump with another
  initial split), ``axis-only`` (the axis-aligned split as it is: CART's
  greedy tree, then the paper's finetune), ``best-of-three`` (the best of
  the paper's stump, the axis-aligned split and the stump trained from it:
  the default of 9827c35, on whose run the default was chosen).

Each fitted variant is scored with ``routing="hard"`` (its default, the
deterministic tree) and ``routing="soft"`` (the probabilistic model, same
fit). Results: ``results/e2edt_regression_validation.md`` and ``.json``
(per-seed figures), with the CPU model and the load during the run.

    python -m benchmarks e2edt-regression-validation                  # ~10 min on 2 cores
    python -m benchmarks e2edt-regression-validation --quick          # smoke run, temp dir
    python -m benchmarks e2edt-regression-validation --datasets boston --variants defaults
"""

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from sklearn.metrics import r2_score
from sklearn.tree import DecisionTreeRegressor

from benchmarks.bench_regression import DATASETS, split
from benchmarks.common import write_results
from obliquetrees import E2EDTRegressor
from obliquetrees._training import leaf_models
from obliquetrees.e2edt import _greedy

MAX_DEPTH = 6
QUICK_MAX_TRAIN = 1000
WARMUP_ROWS = 200
FOLD_STREAM = 7  # second word of the folds' generator seed


def em_leaf_means(self, pi, weight, sums):
    """Drop-in for ``Gaussian.leaf_values`` as it was at 1ef6d09: the EM means, raw units."""
    return pi[:, : self.n_outputs] * self.scale + self.mean


CANDIDATES = ("paper", "axis-start", "axis")


def keep_candidates(*kinds):
    """Drop-in for ``_StumpSplitter._with_axis_candidate``: the best by gain of ``kinds``.

    ``kinds`` among :data:`CANDIDATES`: the paper's stump, the stump EM
    trains from the node's best axis-aligned split (as the paper's stump,
    with that split as its initial split), that split as it is. The stump
    from the axis-aligned split is trained whether it competes or not, as at
    9827c35 (whose default was all three), so the generator's stream, and
    every variant's trees, are those of that revision's selection run.
    """

    def with_axis_candidate(self, node, stump, Xs, ys, sws, features):
        axis = self._axis_candidate(node, Xs, ys, sws, features)
        start = None
        if axis is not None:
            w, b = axis.w.copy(), np.array([axis.b])
            start = self._train(node, Xs, ys, sws, features, w, b)
        every = dict(zip(CANDIDATES, (stump, start, axis), strict=True))
        found = [every[k] for k in CANDIDATES if k in kinds and every[k] is not None]
        return max(found, key=lambda c: c.gain) if found else None

    return with_axis_candidate


GAUSSIAN = leaf_models.Gaussian
SPLITTER = _greedy._StumpSplitter
CHOOSE = "_with_axis_candidate"
#: variant -> {(class, attribute): replacement} installed during its fits
VARIANTS = {
    "before": {(GAUSSIAN, "leaf_values"): em_leaf_means, (GAUSSIAN, "axis_candidate"): False},
    "hard-leaves": {(GAUSSIAN, "axis_candidate"): False},
    "axis-start": {(SPLITTER, CHOOSE): keep_candidates("axis-start")},
    "axis-only": {(SPLITTER, CHOOSE): keep_candidates("axis")},
    "best-of-three": {(SPLITTER, CHOOSE): keep_candidates(*CANDIDATES)},
    "defaults": {},
}


@contextmanager
def installed(variant):
    """The drop-ins of ``variant`` in place of the package's code (restored on exit)."""
    patch = VARIANTS[variant]
    saved = {(cls, name): cls.__dict__[name] for cls, name in patch}
    try:
        for (cls, name), value in patch.items():
            setattr(cls, name, value)
        yield
    finally:
        for (cls, name), value in saved.items():
            setattr(cls, name, value)


def folds(name, seed, n_folds, max_train):
    """``(X_fit, y_fit, X_val, y_val)`` per fold of the seed's training part (test part dropped)."""
    X, y, _, _ = split(name, seed, max_train)
    perm = np.random.default_rng([seed, FOLD_STREAM]).permutation(len(X))
    for held_out in np.array_split(perm, n_folds):
        fit = np.setdiff1d(perm, held_out)
        yield X[fit], y[fit], X[held_out], y[held_out]


def run_seed(name, seed, variants, n_folds, max_train):
    """Mean validation R² over the folds of one seed: ``{column: value}`` and fit seconds."""
    scores, seconds = {}, {v: 0.0 for v in variants}
    for X_fit, y_fit, X_val, y_val in folds(name, seed, n_folds, max_train):
        dt = DecisionTreeRegressor(max_depth=MAX_DEPTH, random_state=seed).fit(X_fit, y_fit)
        scores.setdefault("dt6", []).append(r2_score(y_val, dt.predict(X_val)))
        for v in variants:
            with installed(v):
                start = time.perf_counter()
                est = E2EDTRegressor(max_depth=MAX_DEPTH, random_state=seed).fit(X_fit, y_fit)
                seconds[v] += time.perf_counter() - start
            scores.setdefault(v, []).append(r2_score(y_val, est.predict(X_val)))
            est.set_params(routing="soft")
            scores.setdefault(f"{v} soft", []).append(r2_score(y_val, est.predict(X_val)))
    return {k: float(np.mean(s)) for k, s in scores.items()}, seconds


def summary_table(per_seed, columns):
    """Rows per data set (mean over seeds), their mean, and how many sets beat ``dt6``."""
    mean = {
        name: {c: float(np.mean([r[c] for r in rows])) for c in columns}
        for name, rows in per_seed.items()
    }
    table = [{"data set": n, **{c: f"{m[c]:.4f}" for c in columns}} for n, m in mean.items()]
    overall = {c: f"{np.mean([m[c] for m in mean.values()]):.4f}" for c in columns}
    wins = {c: str(sum(m[c] > m["dt6"] for m in mean.values())) for c in columns[1:]}
    return [*table, {"data set": "mean", **overall}, {"data set": "sets above dt6", **wins}]


def add_arguments(parser):
    parser.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--folds", type=int, default=4, help="folds of each training part")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: <= {QUICK_MAX_TRAIN} training rows, 1 seed, 2 folds, temp dir",
    )
    parser.add_argument("--out", default=None, help="markdown file, the json beside it")


def main(args):
    seeds = list(range(1 if args.quick else args.seeds))
    n_folds = 2 if args.quick else args.folds
    max_train = QUICK_MAX_TRAIN if args.quick else None
    if args.out:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.gettempdir(), "obliquetrees-bench", "e2edt_regression_validation.md")
    else:
        out = Path("e2edt_regression_validation.md")
    variants = list(dict.fromkeys(args.variants))
    X_warm, y_warm, _, _ = next(folds(args.datasets[0], 0, 2, WARMUP_ROWS))
    for v in variants:  # numba compilation or cache loading, outside the timed fits
        with installed(v):
            E2EDTRegressor(max_depth=MAX_DEPTH, random_state=0).fit(X_warm, y_warm)
    per_seed, fit_s = {}, {}
    for name in args.datasets:
        rows = []
        fit_s[name] = dict.fromkeys(variants, 0.0)
        for seed in seeds:
            scores, seconds = run_seed(name, seed, variants, n_folds, max_train)
            rows.append({"seed": seed, **scores})
            for v in variants:
                fit_s[name][v] += seconds[v]
        per_seed[name] = rows
        means = {k: np.mean([r[k] for r in rows]) for k in rows[0] if k != "seed"}
        print(f"{name:18s} " + "  ".join(f"{k} {v:.4f}" for k, v in means.items()), flush=True)

    hard = ["dt6", *variants]
    soft = ["dt6", *(f"{v} soft" for v in variants)]
    tables = [
        ("Validation R², routing='hard' (the default)", summary_table(per_seed, hard)),
        ("Validation R², routing='soft' (the same fits)", summary_table(per_seed, soft)),
    ]
    times = [
        {"data set": n, **{v: f"{fit_s[n][v] / (len(seeds) * n_folds):.3g}" for v in variants}}
        for n in per_seed
    ]
    notes = f"""
Validation folds of the regression benchmark's training parts only (test parts never scored):
seeds {seeds[0]}..{seeds[-1]}, {n_folds} shuffled folds per training part
{f"(subsampled to <= {max_train} rows: a smoke run)" if max_train else ""}; R² on the held-out
fold, mean over folds then over seeds. `dt6` = `DecisionTreeRegressor(max_depth=6,
random_state=seed)`; the variants are `E2EDTRegressor(max_depth=6, random_state=seed)` with the
drop-ins described in `benchmarks/e2edt_regression_validation.py` (`before`: the regressor of
1ef6d09; `hard-leaves`: hard-routed leaf means only; `defaults`: the package as it is;
`axis-start`, `axis-only`, `best-of-three`: hard-routed leaf means and other candidates for the
greedy split). Columns
`... soft` score the same fits with `routing="soft"`. Per-seed figures:
`{out.with_suffix(".json").name}`.
"""
    tables.append(("E2EDT fit time, s (mean per fit)", times))
    path = write_results(
        out, "E2EDTRegressor(max_depth=6): validation of its variants", tables, notes
    )
    write_results(
        out.with_suffix(".json"),
        data={"seeds": seeds, "folds": n_folds, "max_train": max_train, "per_seed": per_seed},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("e2edt-regression-validation")
