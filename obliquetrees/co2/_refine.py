"""Joint refinement of a monotone CO2 regression forest's leaf values (``monotonic_cst``).

Why. Each constrained tree is made monotone on its own: every leaf under
the left child of a constrained split is clamped below every leaf under its
right child (:func:`~obliquetrees.co2._monotone.order_leaves`). On a deep
tree whose leaves hold one or two bootstrap rows, most of those clamps
answer noise, and the forest's average of independently clamped trees pays
for every one: on ``concrete`` (``benchmarks/bench_monotonic.py``) the clamp
cost 2.0 of the 2.8 points of R^2 x 100 the constraints took (session 55's
decomposition). The trees need not be monotone *and* independent: only
their average is scored.

What. Keep the grown structure; refit every tree's leaf values jointly to
the training targets, by block-coordinate projected gradient descent on the
forest's squared error. The forest predicts ``F(x) = (1/T) sum_t v_t(x)``.
A *pass* visits the trees in order; for tree ``t`` each leaf ``l`` moves by

    v_t[l] += step * sum_{i in l} c_ti w_i (y_i - F(x_i)) / sum_{i in l} c_ti w_i,

the mean residual of its in-bag rows (``c_ti``: the tree's bootstrap count
of row ``i``, ``w_i`` its ``sample_weight``), ``F`` being the current forest
(trees before ``t`` already moved: Gauss-Seidel). Then the tree is made
monotone again by the same ``order_leaves`` its growth used, weighted by the
leaves' in-bag weight. Each tree stays monotone after every pass, so the
forest is monotone exactly, as before; what changes is that a tree's clamp
no longer costs the forest, because the other trees' leaves move to make up
for it (the pass is backfitting, as in Ren et al., "Global refinement of
random forest", CVPR 2015, here with each block projected on its tree's
order). Every tree moving by ``step`` times its rows' residual moves the
forest's average by about ``step`` times the residual per pass, whatever
the number of trees ``T`` (the exact minimum over one tree's leaves, the
others fixed, would move them by ``T`` times it).

How many passes. Fitting the training targets ever closer overfits noisy
targets (``abalone``: every pass lowers test R^2) while clean ones gain for
tens of passes (``concrete``), so the number is chosen on held-out rows,
never on a fixed count: :data:`VALIDATION_FRACTION` of the training rows are
held out, a forest of the same parameters and tree seeds is grown on the
others and refined pass by pass, and the pass count with the least held-out
squared error (weighted; 0 passes included; stopping after
:data:`PATIENCE` passes without a new best, at most :data:`MAX_PASSES`) is
the one the forest grown on every row gets. The out-of-bag rows of each
tree cannot serve: after a pass the trees correct each other, so the
average over the trees a row was out of bag for is no longer an estimate of
the forest (on ``concrete`` its error rose while the test error fell).

This is ours, not the paper's (Norouzi et al. have no constraints). It
costs a second forest (on a copy of 80 % of the rows, so a constrained fit
holds 0.8 X more at its peak) and the passes, whose time is
mostly :func:`~obliquetrees.co2._monotone.order_leaves`' bisections: a
constrained fit of 100 trees on one thread of an Intel Xeon took 3.2 s
against 1.1 s unrefined on ``concrete`` (36 passes; at the step 0.5 it had
reached :data:`MAX_PASSES`, 50) and 17.4 s against 9.3 s on 5000 rows of
``california_housing`` (1 pass). :data:`STEP` was chosen on validation
parts; :data:`VALIDATION_FRACTION`, :data:`PATIENCE` and
:data:`MAX_PASSES` were set, not tuned. Rows
beyond :data:`MAX_ROWS` are subsampled for the passes (the growth still
uses every row). Regression only: the classifier's constrained forest
keeps its independently ordered trees.

Importing this module imports numba.
"""

import numpy as np

from obliquetrees._core._jit import jit
from obliquetrees._core._random import generator
from obliquetrees.co2._monotone import order_leaves

#: Fraction of each leaf's mean in-bag residual a pass adds (chosen on
#: validation parts, ``benchmarks/monotonic_defaults.py``: 0.5 on three seeds,
#: 1.0 on ten).
STEP = 1.0
#: Fraction of the training rows held out to choose the number of passes.
VALIDATION_FRACTION = 0.2
#: Passes without a new least held-out error before the search stops.
PATIENCE = 5
#: Most passes.
MAX_PASSES = 50
#: Most rows a pass reads (a seeded subsample beyond it); bounds the memory
#: of the leaf and bootstrap tables to ``16 * MAX_ROWS`` bytes per tree.
MAX_ROWS = 100_000
#: The stream of the first tree's seed that draws the held-out rows.
_STREAM = 41


@jit
def refine_pass(
    leaf, counts, weight, y, total, offsets, children_left, children_right,
    constrained, value, step, held_leaf, held_total, sums, mass, before,
):  # fmt: skip
    """One pass over the trees (module docstring), in place.

    ``leaf[t, i]``: tree ``t``'s leaf (local id) of refinement row ``i``;
    ``counts[t, i]`` its bootstrap count, ``weight[i]`` its sample weight,
    ``y[i]`` its target; ``total[i]``: the sum over the trees of the row's
    leaf values, kept current. Nodes of tree ``t`` are
    ``offsets[t]:offsets[t + 1]`` of ``children_left``, ``children_right``
    (local ids), ``constrained`` and ``value`` (one column).
    ``held_leaf``/``held_total``: the same for rows that only follow the
    pass (zero rows for none). ``sums``, ``mass``, ``before``: scratch of at
    least the largest tree's node count.
    """
    n_trees = offsets.shape[0] - 1
    for t in range(n_trees):
        start = offsets[t]
        m = offsets[t + 1] - start
        for node in range(m):
            sums[node] = 0.0
            mass[node] = 0.0
            before[node] = value[start + node, 0]
        for i in range(leaf.shape[1]):
            c = counts[t, i]
            if c > 0:
                w = c * weight[i]
                node = leaf[t, i]
                sums[node] += w * (y[i] - total[i] / n_trees)
                mass[node] += w
        for node in range(m):
            if children_left[start + node] < 0 and mass[node] > 0.0:
                value[start + node, 0] += step * sums[node] / mass[node]
            # a leaf without in-bag rows still takes part in the order, barely weighed
            mass[node] = max(mass[node], 1e-12)
        stop = start + m
        order_leaves(
            constrained[start:stop],
            children_left[start:stop],
            children_right[start:stop],
            value[start:stop],
            mass[:m],
        )
        for i in range(leaf.shape[1]):
            node = leaf[t, i]
            total[i] += value[start + node, 0] - before[node]
        for i in range(held_leaf.shape[1]):
            node = held_leaf[t, i]
            held_total[i] += value[start + node, 0] - before[node]


def constrained_nodes(tree, cst):
    """Whether each node of ``tree`` weighs a feature ``cst`` constrains (bool, per node)."""
    rows = np.repeat(np.arange(tree.node_count), np.diff(tree.weight_indptr))
    hit = (cst[tree.weight_index] != 0) & (tree.weight_value != 0.0)
    return np.bincount(rows[hit], minlength=tree.node_count) > 0


class _Passes:
    """Packed trees and their refinement rows, refined pass by pass.

    ``X``, ``y``, ``weight``: the refinement rows; ``counts``: each tree's
    bootstrap counts of them, ``(n_trees, n_rows)``; ``X_held``: rows whose
    forest output is followed (None: none).
    """

    def __init__(self, trees, cst, X, y, weight, counts, X_held, n_threads):
        from obliquetrees._core.forest import ObliqueForest

        forest = ObliqueForest.from_trees(trees, validate=False)  # a packed copy
        self.trees = trees
        self.offsets = np.asarray(forest.node_offset, dtype=np.int64)
        self.children_left = forest.children_left
        self.children_right = forest.children_right
        self.value = np.array(forest.value, dtype=np.float64, order="C")
        self.constrained = np.concatenate([constrained_nodes(tree, cst) for tree in trees])
        self.leaf = _leaves(forest, X, n_threads)
        self.counts = counts
        self.weight = weight
        self.y = y
        self.total = self._sums(self.leaf)
        empty = X_held is None
        self.held_leaf = _leaves(forest, X[:0] if empty else X_held, n_threads)
        self.held_total = self._sums(self.held_leaf)
        size = int(np.max(np.diff(self.offsets)))
        self.scratch = (np.empty(size), np.empty(size), np.empty(size))

    def _sums(self, leaf):
        """Sum over the trees of each row's leaf value (tree order)."""
        total = np.zeros(leaf.shape[1])
        for t in range(leaf.shape[0]):
            total += self.value[self.offsets[t] + leaf[t], 0]
        return total

    def run(self, step):
        """One pass (:func:`refine_pass`)."""
        refine_pass(
            self.leaf, self.counts, self.weight, self.y, self.total, self.offsets,
            self.children_left, self.children_right, self.constrained, self.value, step,
            self.held_leaf, self.held_total, *self.scratch,
        )  # fmt: skip

    def held_error(self, y, weight):
        """Weighted mean squared error of the forest on the held-out rows."""
        residual = y - self.held_total / len(self.trees)
        return float(np.sum(weight * residual**2) / np.sum(weight))

    def write_back(self):
        """Give every tree a new ``value`` array holding its refined leaf values.

        New arrays, never writes into the old ones: a warm start's kept
        trees share theirs with the fitted forest, which a fit that fails
        must leave as it was.
        """
        for t, tree in enumerate(self.trees):
            tree.value = self.value[self.offsets[t] : self.offsets[t + 1]].copy()


def _leaves(forest, X, n_threads):
    """Every row's leaf in every tree, ``(n_trees, n_rows)`` local ids."""
    from obliquetrees._core import traversal

    return np.ascontiguousarray(traversal.apply(forest, X, n_threads).T)


def _subsample(rows, seed, key):
    """At most :data:`MAX_ROWS` of ``rows`` (sorted), drawn from stream ``key`` of ``seed``."""
    if rows.shape[0] <= MAX_ROWS:
        return rows
    rng = generator(seed, _STREAM, key)
    return np.sort(rng.choice(rows, MAX_ROWS, replace=False))


def _counts(bootstrap_counts, n, seeds, rows):
    """``(n_trees, len(rows))``: each tree's bootstrap counts of ``rows`` (of ``n``)."""
    return np.stack([bootstrap_counts(n, int(s))[rows] for s in seeds])


def choose_passes(grow, bootstrap_counts, X, y, sample_weight, seeds, cst, n_threads):
    """The number of passes, chosen on held-out rows (module docstring).

    ``grow(rows)`` grows a forest with the fit's parameters and ``seeds``
    on rows ``rows`` of ``X``, ``y``, ``sample_weight`` and returns its
    folded trees; ``bootstrap_counts(n, seed)`` gives the float64 counts of
    the tree of ``seed`` grown on ``n`` rows.
    """
    n = X.shape[0]
    n_held = int(VALIDATION_FRACTION * n)
    if n_held < 1 or n - n_held < 2:
        return 0
    order = generator(int(seeds[0]), _STREAM).permutation(n)
    held = _subsample(np.sort(order[:n_held]), int(seeds[0]), 1)
    y_held, w_held = y[held], sample_weight[held]
    if not np.sum(w_held) > 0.0:  # nothing to judge the passes by: no forest to grow
        return 0
    fit = np.sort(order[n_held:])
    trees = grow(fit)
    rows = _subsample(np.arange(fit.shape[0]), int(seeds[0]), 2)
    passes = _Passes(
        trees,
        cst,
        X[fit[rows]],
        y[fit[rows]],
        sample_weight[fit[rows]],
        _counts(bootstrap_counts, fit.shape[0], seeds, rows),
        X[held],
        n_threads,
    )
    best_error, best = passes.held_error(y_held, w_held), 0
    for k in range(1, MAX_PASSES + 1):
        passes.run(STEP)
        error = passes.held_error(y_held, w_held)
        if error < best_error:
            best_error, best = error, k
        elif k - best >= PATIENCE:
            break
    return best


def refine(trees, n_passes, bootstrap_counts, X, y, sample_weight, seeds, cst, n_threads):
    """Refine ``trees`` (grown on every row of ``X`` from ``seeds``) by ``n_passes`` passes.

    Each tree's ``value`` attribute is replaced by a new array of refined
    leaf values (the old arrays are not written).
    """
    if n_passes <= 0:
        return
    n = X.shape[0]
    rows = _subsample(np.arange(n), int(seeds[0]), 3)
    passes = _Passes(
        trees,
        cst,
        X[rows],
        y[rows],
        sample_weight[rows],
        _counts(bootstrap_counts, n, seeds, rows),
        None,
        n_threads,
    )
    for _ in range(n_passes):
        passes.run(STEP)
    passes.write_back()
