"""The coordinate of each category, learned from the training target.

Every method's split is ``w . x + b > 0``; a categorical feature takes part as
one number per category (:mod:`obliquetrees._core.categories`). Which number
matters: a split can only cut a line, so the categories must lie on it in the
order that separates the targets. This module puts them there, for every
method alike, before any tree is grown.

The derivation (what is the literature's and what is ours):

1. **Target vectors.** A row's target is ``t_i``: the one-hot vector of its
   class (classification), or its outputs standardised by their weighted
   standard deviation (regression). Weights are rescaled to mean 1, so
   weighted counts count rows.
2. **A category's effect, adjusted for the other features** (ours): the
   linear mixed model ``t_i = b + B x_i + sum_c u_c[k_c(i)] + e_i``, with the
   numeric features ``x_i`` (standardised; a missing value at the mean) as
   fixed effects and each categorical feature's categories as random
   effects ``u_c[k] ~ N(0, tau_c^2)``, ``e_i ~ N(0, sigma_c^2)``. The effects'
   best linear unbiased predictors (Henderson) solve the ridge-regression
   normal equations of the one-hot design with penalty
   ``sigma_c^2 / tau_c^2`` on feature ``c``'s categories: a category of few
   rows is pulled to 0 (empirical Bayes shrinkage), and its effect is what
   it adds *given* the other features. That adjustment is the point: on the
   diamonds data the two best clarities (IF, VVS1) have the lowest mean
   prices, their stones being the smallest (0.5 carat on average, 1.3 for
   the worst clarity), so ordering by raw mean targets scrambles the order a
   split on price given carat needs (``benchmarks/results/
   categorical_validation.md`` compares the two on validation parts).
   The variance components are estimated per feature by the method of
   moments of the one-way analysis of variance (``E[sum_k n_k |m_k - mu|^2]
   = (K - 1) sigma^2 + (N - sum_k n_k^2 / N) tau^2``, summed over the
   target's dimensions), which overstates ``sigma^2`` where other features
   explain the target (more shrinkage: the cautious side).
3. **Only features that carry something.** A feature whose categories do
   not differ beyond chance gets ``tau^2 = 0``: it leaves the model, every
   category sits at 0, in training and at prediction, and no split can use
   it. "Beyond chance" is a test at level ``ALPHA`` (Bonferroni over the
   categorical features): Pearson's chi-squared test of independence of
   category and class, or the one-way analysis of variance of the target
   (ours: the estimate of ``tau^2`` alone is positive by chance for about
   half of the pure-noise columns, and a method that rescales its inputs,
   such as E2EDT, then reads that noise at full scale).
4. **One axis.** With two classes or one output the effects lie on a line,
   and ordering categories by it is optimal for a binary split (Breiman et
   al. 1984; Fisher 1958). With more classes or outputs they do not; the
   categories are ordered by their projection on the first principal axis
   of the ``n_k``-weighted effects (centred), the heuristic of Coppersmith,
   Hong and Hosking (1999, "Partitioning nominal attributes in decision
   trees"). The coordinate of category ``k`` is ``u_c[k] . a`` (sign: the
   axis' largest entry, the last of ties, is positive, so with two classes
   the coordinate rises with the rate of the second class). The split's own
   optimiser then learns the weight of that coordinate, and its sign, with
   the other features' (ours: the table is shared by all nodes of all
   trees, not re-ordered per node as LightGBM and scikit-learn's histogram
   trees re-order it).
5. **Cross-fitting against target leakage** (as scikit-learn's
   ``TargetEncoder``): the rows are dealt into ``N_FOLDS`` folds, and a
   training row's coordinate comes from the model fitted on the other folds
   (on the axis of the whole data), so a category's value never saw the
   row's own target: a column of many random levels, whose in-sample means
   would separate the training rows perfectly, gives the trees noise they
   cannot fit. The variance components (two numbers per feature) stay those
   of all rows, so a feature found uninformative is 0 in every fold.
   Prediction uses the model fitted on all training rows.

The normal equations have one row per fixed effect and per category; past
``MAX_JOINT`` of them (many categories, or many numeric features) the
numeric features leave the model, and past that again each categorical
feature is fitted alone (its raw shrunk means, the model without step 2's
adjustment).

Imports numpy and scipy (sparse one-hot blocks, the test's distributions).
"""

import numpy as np
from scipy import sparse

from obliquetrees._core._random import generator

#: Family-wise significance level of step 3's test (Bonferroni over the
#: categorical features): a feature whose categories do not differ at this level
#: gets no coordinate. The level of the missing-value indicators' test.
ALPHA = 0.01

#: Stream of the seed the rows are dealt into folds from (its own: the seed may be a
#: tree's too).
FOLD_STREAM = 40

#: Folds of the cross-fitting (step 5): each training row's coordinate comes
#: from the other ``N_FOLDS - 1`` folds.
N_FOLDS = 5

#: Most unknowns (intercept, numeric features, categories) of one system of
#: normal equations: its matrix takes ``8 * MAX_JOINT**2`` bytes (32 MiB) and is
#: solved ``N_FOLDS + 1`` times.
MAX_JOINT = 2048

#: Ridge on the numeric features' coefficients, relative to the rows (their
#: diagonal is about the number of rows): keeps collinear features solvable.
NUMERIC_RIDGE = 1e-6


def learn_coordinates(codes, n_categories, numeric, y, sample_weight, n_classes, seed, alpha=ALPHA):
    """Coordinates of the categories of every categorical feature, and of each training row.

    Parameters
    ----------
    codes : list of ndarray of int64, shape (n_samples,)
        Per categorical feature, each row's category; ``-1`` where missing.
    n_categories : list of int
        Per categorical feature, its number of categories.
    numeric : ndarray of float64, shape (n_samples, n_numeric)
        The numeric features (NaN where missing); ``n_numeric`` may be 0.
    y : ndarray
        Class indices, int64 of shape (n_samples,) (``n_classes`` given), or
        float64 targets of shape (n_samples,) or (n_samples, n_outputs).
    sample_weight : ndarray of float64, shape (n_samples,)
    n_classes : int or None
        None for regression.
    seed : int
        Seeds the deal of the rows into folds.
    alpha : float, default=ALPHA
        Family-wise level of step 3's test (divided here by the number of
        categorical features).

    Returns
    -------
    tables : list of ndarray of float64, shape (n_categories[i],)
        The coordinate of each category (the model of all training rows).
    train : ndarray of float64, shape (n_samples, len(codes))
        Each row's cross-fitted coordinates (step 5); NaN where missing.
    """
    n = y.shape[0]
    total = sample_weight.sum()
    weight = sample_weight * (n / total) if total > 0 else sample_weight
    targets = _target_matrix(y, weight, n_classes)
    level = alpha / max(len(codes), 1)
    onehot = [_one_hot(c, k) for c, k in zip(codes, n_categories, strict=True)]
    penalty = [_penalty(o, targets, weight, n_classes is not None, level) for o in onehot]
    active = [i for i, p in enumerate(penalty) if p is not None]
    tables = [np.zeros(k) for k in n_categories]
    train = np.zeros((n, len(codes)))
    n_folds = min(N_FOLDS, n)
    fold = generator(seed, FOLD_STREAM).permutation(n) % n_folds
    n_active = sum(n_categories[i] for i in active)
    if 1 + numeric.shape[1] + n_active > MAX_JOINT:
        numeric = numeric[:, :0]  # the intercept alone
    fixed = _fixed_effects(numeric, weight)
    groups = [active] if 1 + numeric.shape[1] + n_active <= MAX_JOINT else [[i] for i in active]
    for group in groups if active else []:  # no feature carries anything: all coordinates 0
        parts = [(codes[i], onehot[i], penalty[i]) for i in group]
        found, rows = _mixed_model(fixed, parts, targets, weight, fold, n_folds)
        for i, table, values in zip(group, found, rows, strict=True):
            tables[i], train[:, i] = table, values
    for i, c in enumerate(codes):
        train[c < 0, i] = np.nan
    return tables, train


def _target_matrix(y, weight, n_classes):
    """One-hot classes, or regression targets standardised (weighted), as (n, d) float64."""
    if n_classes is not None:
        return np.eye(max(n_classes, 1))[y]
    t = y.reshape(y.shape[0], -1).astype(np.float64)
    total = weight.sum()
    if t.shape[0] == 0 or total <= 0:
        return np.zeros_like(t)
    mean = weight @ t / total
    std = np.sqrt(weight @ (t - mean) ** 2 / total)
    return (t - mean) / np.where(std > 0, std, 1.0)


def _fixed_effects(numeric, weight):
    """The intercept and the numeric features standardised (weighted), a NaN at 0 (the mean).

    One array of the numeric features' size is the only copy (plus a mask).
    """
    out = np.empty((numeric.shape[0], numeric.shape[1] + 1))
    out[:, 0] = 1.0
    x = out[:, 1:]
    np.copyto(x, numeric)
    missing = np.isnan(x)
    x[missing] = 0.0
    count = weight @ ~missing
    mean = np.divide(weight @ x, count, out=np.zeros(x.shape[1]), where=count > 0)
    x -= mean
    x[missing] = 0.0
    var = np.divide(
        np.einsum("i,ij,ij->j", weight, x, x), count, out=np.zeros(x.shape[1]), where=count > 0
    )
    x /= np.where(var > 0, np.sqrt(var), 1.0)
    return out


def _one_hot(codes, n_categories):
    """Sparse (n, K) indicator of each row's category (an empty row where missing)."""
    rows = np.flatnonzero(codes >= 0)
    ones = np.ones(rows.size)
    return sparse.csr_matrix((ones, (rows, codes[rows])), shape=(codes.shape[0], n_categories))


def _penalty(onehot, targets, weight, classification, alpha):
    """``sigma^2 / tau^2`` of one feature (step 2), or None when it carries nothing (step 3).

    ``onehot`` is the feature's (n, K) indicator: a missing value's empty row
    adds nothing to the sums.
    """
    n = onehot.T @ weight
    sums = onehot.T @ (weight[:, None] * targets)
    squares = onehot.T @ (weight * np.einsum("ij,ij->i", targets, targets))
    components = _variance_components(n, sums, squares)
    if components is None:
        return None
    sigma2, tau2, between = components
    if tau2 == 0.0 or not _depends_on_target(n, sums, sigma2, between, classification, alpha):
        return None
    return max(sigma2 / tau2, NUMERIC_RIDGE * n.sum())


def _mixed_model(fixed, parts, targets, weight, fold, n_folds):
    """Step 2 (the effects' normal equations) for a group of features, then steps 4 and 5.

    ``parts`` lists ``(codes, one-hot indicator, penalty)`` per feature. Returns
    each feature's table (the model of all rows) and its rows' coordinates
    (cross-fitted when there are two folds or more).
    """
    onehot = sparse.hstack([o for _, o, _ in parts], format="csr")
    ridge = np.concatenate(
        [[0.0], np.full(fixed.shape[1] - 1, NUMERIC_RIDGE * fixed.shape[0])]
        + [np.full(o.shape[1], p) for _, o, p in parts]
    )
    per_fold = [
        _normal_equations(fixed, onehot, targets, weight, fold == f) for f in range(n_folds)
    ]
    gram, rhs = sum(g for g, _ in per_fold), sum(h for _, h in per_fold)
    ends = np.cumsum([fixed.shape[1]] + [o.shape[1] for _, o, _ in parts])
    blocks = [slice(ends[i], ends[i + 1]) for i in range(len(parts))]

    def effects(g, h):  # each feature's centred category effects
        solved = np.linalg.solve(g + np.diag(ridge), h)
        return [_centred(solved[b], np.diag(g)[b]) for b in blocks]

    full = effects(gram, rhs)
    axes = [_principal_axis(u, np.diag(gram)[b]) for u, b in zip(full, blocks, strict=True)]
    tables = [u @ a for u, a in zip(full, axes, strict=True)]
    rows = [t[np.maximum(c, 0)] for t, (c, _, _) in zip(tables, parts, strict=True)]
    if n_folds < 2:
        return tables, rows  # one row: nothing to hold out
    for f, (g, h) in enumerate(per_fold):  # each fold's rows from the model of the others
        mine = fold == f
        for i, u in enumerate(effects(gram - g, rhs - h)):
            rows[i][mine] = (u @ axes[i])[np.maximum(parts[i][0][mine], 0)]
    return tables, rows


def _normal_equations(fixed, onehot, targets, weight, rows):
    """``Z'WZ`` and ``Z'WT`` of the rows ``rows`` (bool), ``Z = [fixed, onehot]``."""
    d, o, w = fixed[rows], onehot[rows], weight[rows]
    wd = w[:, None] * d
    wo = sparse.diags(w) @ o
    cross = np.asarray(o.T @ wd)  # (categories, fixed effects)
    gram = np.block([[wd.T @ d, cross.T], [cross, (wo.T @ o).toarray()]])
    t = targets[rows]
    return gram, np.vstack([wd.T @ t, np.asarray(wo.T @ t)])


def _centred(effects, counts):
    """Effects minus their ``counts``-weighted mean (the intercept's share)."""
    total = counts.sum()
    return effects - (counts @ effects) / total if total > 0 else effects


def _variance_components(n, sums, squares):
    """``(sigma^2, tau^2, between)`` of step 2 by the method of moments, or None.

    ``n`` (K,), ``sums`` (K, d) and ``squares`` (K,) are the categories'
    weighted counts, target sums and squared-norm sums; ``between`` is
    ``sum_k n_k |m_k - mu|^2``. None when there is nothing to estimate:
    fewer than two categories, or no row beyond one per category (no
    within-category spread to measure chance against).
    """
    present = n > 0
    total, k = n.sum(), int(present.sum())
    if k < 2 or total - k <= 0:
        return None
    mu = sums.sum(0) / total
    means = sums[present] / n[present, None]
    between = n[present] @ np.sum((means - mu) ** 2, axis=1)
    within = max(float(squares[present].sum() - n[present] @ np.sum(means**2, axis=1)), 0.0)
    sigma2 = within / (total - k)
    spread = total - n[present] @ n[present] / total  # positive: two categories or more
    return sigma2, max((between - (k - 1) * sigma2) / spread, 0.0), between


def _depends_on_target(n, sums, sigma2, between, classification, alpha):
    """Whether the categories' targets differ beyond chance at level ``alpha`` (step 3).

    Classification (``sums`` is the category x class table of weighted
    counts): Pearson's chi-squared test of independence. Regression: the
    one-way analysis of variance, ``F`` with the sums of squares of the
    standardised outputs summed (``sigma2`` and ``between`` from
    :func:`_variance_components`). Rows count as their weights (mean 1).
    """
    from scipy import stats

    present = n > 0
    total, k = n.sum(), int(present.sum())
    if classification:
        table = sums[present]
        table = table[:, table.sum(0) > 0]
        expected = np.outer(table.sum(1), table.sum(0)) / total
        chi2 = float(np.sum((table - expected) ** 2 / expected))
        dof = (k - 1) * (table.shape[1] - 1)
        return dof > 0 and stats.chi2.sf(chi2, dof) < alpha
    if sigma2 <= 0:
        return True  # every category constant inside, and not all alike (tau^2 > 0)
    d = sums.shape[1]  # both sums of squares are summed over the d outputs
    return stats.f.sf(between / ((k - 1) * sigma2), d * (k - 1), d * (total - k)) < alpha


def _principal_axis(deviation, n):
    """Unit first principal axis of the ``n``-weighted effects (step 4), sign fixed."""
    d = deviation.shape[1]
    scatter = (deviation * n[:, None]).T @ deviation
    if d == 1 or not np.any(scatter):
        return np.eye(d)[0]
    axis = np.linalg.eigh(scatter)[1][:, -1]
    magnitude = np.abs(axis)
    largest = d - 1 - int(np.argmax(magnitude[::-1] >= magnitude.max() * (1 - 1e-12)))
    return axis if axis[largest] > 0 else -axis
