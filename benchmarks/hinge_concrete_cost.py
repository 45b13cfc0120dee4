"""Where the constrained hinge regressor's cost on concrete comes from: a cross-validated study.

A study for issue 41. ``results/monotonic_concrete_20_seeds.md`` puts the
cost of ``HingeForestRegressor(monotonic_cst=...)`` on concrete at 1.17 ±
0.29 points of R^2 (test parts, 20 seeds), above the issue's 1-point bar,
where scikit-learn's ``HistGradientBoostingRegressor`` loses 0.2. This
study takes the cost apart without reading a test part: 10-fold
``KFold(shuffle=True, random_state=seed)`` of each seed's training part
(``bench_monotonic.load_split("concrete", seed, 5000)``, its constraints:
cement rising, water falling, age rising), every model fitted on the same
nine folds with ``random_state=100 * seed + fold`` and scored on the tenth.
Costs are the unconstrained model's R^2 minus the constrained one's, in
points, mean ± standard error over the paired folds.

Variants (hinge forests at their defaults unless said):

- ``auto``: the package's constrained fit (``n_hinge_features="auto"``
  trains the learnt layer and the raw inputs and keeps the lower validation
  loss); ``raw``: ``n_hinge_features=None``; ``learnt``:
  ``n_hinge_features=100``. Each against the unconstrained default.
- ``raw, <input> only``: one constraint at a time (the others 0).
- ``raw, POOL_LEVELS 2``: the pool decisions in each tree's first two levels
  (:data:`obliquetrees.hinge._monotonic.POOL_LEVELS`, 1 by default), set as
  ``monotonic_defaults``' family ``hinge-pool-levels`` sets its candidate 2.
- ``leaf offsets``: a class the package does not have, fitted after the
  fact: each tree gets an offset per leaf, ``f(x) + sum_m b[m, leaf_m(x)]``,
  fitted to the training residuals by backfitting (:class:`LeafOffsets`,
  :data:`OFFSET_PASSES` passes over the trees, ridge :data:`OFFSET_RIDGE`).
  In a constrained raw-input fit every tree's first decision tests a
  constrained input and every other decision a free one, so along a
  constrained direction a tree's leaf changes only where its first decision
  flips; the offsets keep it monotone if every leaf on the first decision's
  rising side holds at least every leaf on the other side (the projection
  :func:`order_halves`, exact per tree). Offsets add capacity, so they are
  fitted to the unconstrained default fit too: the like-for-like cost is
  the one that says whether they repair the constraint.
- ``HGB``: ``HistGradientBoostingRegressor`` with the fold's
  ``random_state``, all three constraints and water only, against its
  unconstrained fit.

Every constrained model with offsets is checked along random lines
(``max violation``, <= 0 up to rounding: monotone).

    python -m benchmarks hinge-concrete-cost            # 5 seeds x 10 folds
    python -m benchmarks hinge-concrete-cost --seeds 2 --folds 5
"""

import time

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

from benchmarks.bench_monotonic import (
    CONSTRAINTS,
    _paired_cost,
    describe_constraints,
    load_split,
    max_violation,
)
from benchmarks.common import cpu_model, load_average, write_results
from benchmarks.monotonic_defaults import candidate_settings

#: concrete's constraints (feature index: sign) and its constrained inputs by name.
CONCRETE = CONSTRAINTS["concrete"]
INPUTS = {"cement": 0, "water": 3, "age": 7}
#: Ridge of every leaf offset (a leaf of ``n`` training rows takes ``sum / (n + ridge)``).
OFFSET_RIDGE = 5.0
#: Backfitting passes over the trees.
OFFSET_PASSES = 2


def tree_leaves(estimator, X):
    """The leaf of every row in every tree of a fitted hinge forest, shape (n, M)."""
    from obliquetrees.hinge._forward import hinge_features, standardise, tree_outputs

    model = estimator._model
    U = np.ascontiguousarray(hinge_features(model, standardise(model, X)))
    n, M = X.shape[0], model.n_trees
    walk = (np.empty((n, M), dtype=np.int64), np.empty((n, M)), np.empty((n, M), dtype=np.int64))
    tree_outputs(model, U, walk)
    return walk[0]


def order_halves(values, weights, rising):
    """Weighted least-squares projection of one tree's offsets onto
    ``min(values[rising]) >= max(values[~rising])``.

    The minimiser raises the rising side's values below a level ``t`` to
    ``t`` and lowers the other side's above it to ``t``; ``t`` is the
    weighted mean of the values it moves, found among the sorted values'
    intervals (the objective is convex in ``t``).
    """
    if not rising.any() or rising.all() or values[rising].min() >= values[~rising].max():
        return values.copy()
    order = np.argsort(values, kind="stable")
    v, w, up = values[order], weights[order], rising[order]
    w_up, w_down = np.where(up, w, 0.0), np.where(up, 0.0, w)
    # at a level between v[k] and v[k + 1]: rising values <= v[k] and other values >= v[k + 1] move
    below_w, below_s = np.cumsum(w_up), np.cumsum(w_up * v)
    above_w = np.cumsum(w_down[::-1])[::-1]
    above_s = np.cumsum((w_down * v)[::-1])[::-1]
    total_w = below_w[:-1] + above_w[1:]
    total_s = below_s[:-1] + above_s[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        level = total_s / total_w
    inside = (total_w > 0) & (level >= v[:-1]) & (level <= v[1:])
    t = level[np.flatnonzero(inside)[0]]
    out = values.copy()
    out[rising] = np.maximum(values[rising], t)
    out[~rising] = np.minimum(values[~rising], t)
    return out


def rising_halves(estimator):
    """None for an unconstrained fit, else ``(rising, ordered)``: per tree the leaves on its
    first decision's rising side, shape (M, L) bool, and whether that decision tests a
    constrained input (its offsets are ordered), shape (M,)."""
    model = estimator._model
    if model.monotonic_cst is None:
        return None
    n_leaves = 2**model.depth
    right = np.arange(n_leaves) >= n_leaves // 2  # the first decision's right subtree
    direction = model.monotone_dir[model.feat[:, 0]]
    later = model.monotone_dir[model.feat[:, 1:]] != 0
    if later.any():  # the projection's reasoning needs every later decision free
        raise ValueError("a tree tests a constrained input below its first decision")
    return np.where(direction[:, None] > 0, right[None, :], ~right[None, :]), direction != 0


class LeafOffsets:
    """A fitted hinge regressor plus per-leaf offsets fitted to its training residuals."""

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y):
        est = self.estimator
        leaves = tree_leaves(est, X)
        M, L = leaves.shape[1], 2**est._model.depth
        halves = rising_halves(est)
        residual = (y - est._y_mean) / est._y_scale - est._decision(X)[:, 0]
        self.offsets_ = np.zeros((M, L))
        for _ in range(OFFSET_PASSES):
            for m in range(M):
                residual += self.offsets_[m, leaves[:, m]]
                count = np.bincount(leaves[:, m], minlength=L).astype(float)
                total = np.bincount(leaves[:, m], weights=residual, minlength=L)
                # minimises sum over the leaf's rows of (residual - b)^2 + ridge b^2
                offsets = total / (count + OFFSET_RIDGE)
                if halves is not None and halves[1][m]:
                    offsets = order_halves(offsets, count + OFFSET_RIDGE, halves[0][m])
                self.offsets_[m] = offsets
                residual -= offsets[leaves[:, m]]
        return self

    def predict(self, X):
        est = self.estimator
        leaves = tree_leaves(est, X)
        added = self.offsets_[np.arange(leaves.shape[1])[None, :], leaves].sum(axis=1)
        return est._y_mean + est._y_scale * (est._decision(X)[:, 0] + added)


def only(cst, names):
    """``cst`` with every constraint but those of ``names`` set to 0."""
    kept = np.zeros_like(cst)
    for name in names:
        kept[INPUTS[name]] = cst[INPUTS[name]]
    return kept


def fold_scores(X, y, train, test, cst, state, n_jobs):
    """R^2 of every model of the study on one fold, and the offsets model's violation."""
    from obliquetrees import HingeForestRegressor

    def hinge(monotonic_cst=None, **params):
        model = HingeForestRegressor(monotonic_cst=monotonic_cst, random_state=state, n_jobs=n_jobs)
        return model.set_params(**params).fit(X[train], y[train])

    def score(model):
        return float(r2_score(y[test], model.predict(X[test])))

    free = hinge()
    raw = hinge(cst, n_hinge_features=None)
    row = {
        "free": score(free),
        "auto": score(hinge(cst)),
        "raw": score(raw),
        "learnt": score(hinge(cst, n_hinge_features=100)),
    }
    for name in INPUTS:
        row[f"raw, {name} only"] = score(hinge(only(cst, [name]), n_hinge_features=None))
    with candidate_settings("hinge-pool-levels", "2"):
        row["raw, POOL_LEVELS 2"] = score(hinge(cst, n_hinge_features=None))
    free_offsets = LeafOffsets(free).fit(X[train], y[train])
    raw_offsets = LeafOffsets(raw).fit(X[train], y[train])
    row["free, leaf offsets"] = score(free_offsets)
    row["raw, leaf offsets"] = score(raw_offsets)
    row["violation"] = max_violation(raw_offsets, X[test], cst, state)
    for label, c in (("HGB free", None), ("HGB", cst), ("HGB, water only", only(cst, ["water"]))):
        hgb = HistGradientBoostingRegressor(monotonic_cst=c, random_state=state)
        row[label] = score(hgb.fit(X[train], y[train]))
    return row


def run(seeds, folds, n_jobs):
    """One row per (seed, fold)."""
    rows = []
    for seed in seeds:
        (X, y, _, _), cst = load_split("concrete", seed, 5000)  # the test part is never read
        splits = KFold(folds, shuffle=True, random_state=seed).split(X)
        for fold, (train, test) in enumerate(splits):
            start = time.perf_counter()
            row = {"seed": seed, "fold": fold}
            row.update(fold_scores(X, y, train, test, cst, 100 * seed + fold, n_jobs))
            row["seconds"] = time.perf_counter() - start
            rows.append(row)
            print(row, flush=True)
    return rows


#: (variant, its R^2 column, the reference column its cost is taken against).
COSTS = [
    ("auto (the package's constrained fit)", "auto", "free"),
    ("raw inputs", "raw", "free"),
    ("learnt layer", "learnt", "free"),
    *[(f"raw, {name} only", f"raw, {name} only", "free") for name in INPUTS],
    ("raw, POOL_LEVELS 2", "raw, POOL_LEVELS 2", "free"),
    ("raw, leaf offsets: against the unconstrained default", "raw, leaf offsets", "free"),
    ("raw, leaf offsets: like for like", "raw, leaf offsets", "free, leaf offsets"),
    ("unconstrained, leaf offsets (a gain is negative)", "free, leaf offsets", "free"),
    ("HGB, all three", "HGB", "HGB free"),
    ("HGB, water only", "HGB, water only", "HGB free"),
]


def summarise(rows):
    """The cost table: each variant's mean R^2, its reference's and the paired cost."""

    def column(label):
        return np.array([r[label] for r in rows])

    return [
        {
            "variant": variant,
            "R2": f"{column(label).mean():.4f}",
            "reference R2": f"{column(reference).mean():.4f}",
            "cost (points)": _paired_cost(column(reference), column(label)),
        }
        for variant, label, reference in COSTS
    ]


def add_arguments(parser):
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--folds", type=int, default=10, help="folds per seed (default 10)")
    parser.add_argument("--n-jobs", type=int, default=2, help="n_jobs of the hinge forests")


def main(args):
    rows = run(range(args.seeds), args.folds, args.n_jobs)
    worst = max(r["violation"] for r in rows)
    notes = (
        f"CPU: {cpu_model()}; load average at the end: {load_average()}. "
        f"Constraints (feature index: sign): {describe_constraints({'concrete': CONCRETE})}. "
        f"{args.seeds} seeds x {args.folds} folds of each seed's training part ({len(rows)} "
        "paired folds; no test part read). Cost: the reference's R^2 minus the variant's, in "
        "points, mean ± standard error over the folds. Leaf offsets: ridge "
        f"{OFFSET_RIDGE:g}, {OFFSET_PASSES} backfitting passes; the constrained model's largest "
        f"move against its constraints along random lines: {worst:.2g}. "
        "Method: the module docstring of benchmarks/hinge_concrete_cost.py."
    )
    write_results(
        "hinge_concrete_cost.md",
        title="The constrained hinge regressor on concrete: where the cost comes from",
        tables=[("Cross-validated R^2 and costs", summarise(rows))],
        notes=notes,
    )
    write_results("hinge_concrete_cost.json", data={"rows": rows})
