"""The coordinate of each category, learned from the training target.

Every method's split is ``w . x + b > 0``; a categorical feature takes part as
one number per category (:mod:`obliquetrees._core.categories`). Which number
matters: a split can only cut a line, so the categories must lie on it in the
order that separates the targets. This module puts them there, for every
method alike, before any tree is grown.

The derivation (what is the literature's and what is ours):

1. **Target vectors.** A row's target is ``t_i``: the one-hot vector of its
   class (classification), or its outputs standardised by their weighted
   standard deviation (regression). Category ``k`` has weighted count
   ``n_k`` and mean target ``m_k``; ``mu`` is the overall mean.
2. **Shrinkage** (empirical Bayes, the one-way random-effects model): a
   category of few rows has a noisy mean, so it is pulled to ``mu`` by
   ``lambda_k = n_k tau^2 / (n_k tau^2 + sigma^2)``, with the within-category
   variance ``sigma^2`` and the between-category variance ``tau^2`` estimated
   by the method of moments (ANOVA: ``E[sum_k n_k |m_k - mu|^2] = (K - 1)
   sigma^2 + (N - sum_k n_k^2 / N) tau^2``), summed over the target's
   dimensions, once on all training rows. A column whose categories do not
   differ beyond chance gets ``tau^2 = 0``: every category sits at 0, in
   training and at prediction, and no split can use it. "Beyond chance" is
   a test at level ``ALPHA`` (Bonferroni over the categorical features):
   Pearson's chi-squared test of independence of category and class, or
   the one-way analysis of variance of the target (ours: the estimate of
   ``tau^2`` alone is positive by chance for about half of the pure-noise
   columns, and a method that rescales its inputs, such as E2EDT, then
   reads that noise at full scale). (Weights are rescaled to mean 1 first,
   so ``N`` counts rows.)
3. **One axis.** With two classes or one output the shrunk means lie on a
   line, and ordering categories by it is optimal for a binary split
   (Breiman et al. 1984; Fisher 1958). With more classes or outputs they do
   not; the categories are ordered by their projection on the first
   principal axis of the ``n_k``-weighted shrunk deviations ``m~_k - mu``,
   the heuristic of Coppersmith, Hong and Hosking (1999, "Partitioning
   nominal attributes in decision trees"). The coordinate of category ``k``
   is ``(m~_k - mu) . a`` (sign: the axis' largest entry, the last of ties,
   is positive, so with two classes the coordinate rises with the rate of
   the second class). The split's own optimiser then learns the weight of
   that coordinate, and its sign, with the other features' (ours: the
   category table is shared by all nodes of all trees, not re-ordered per
   node as LightGBM and scikit-learn's histogram trees re-order it).
4. **Cross-fitting against target leakage** (as scikit-learn's
   ``TargetEncoder``): the rows are dealt into ``N_FOLDS`` folds, and a
   training row's coordinate comes from the other folds' statistics (on the
   axis of the whole data), so a category's value never saw the row's own
   target: a column of many random levels, whose in-sample means would
   separate the training rows perfectly, gives the trees noise they cannot
   fit. The two variance components stay those of all rows (two numbers,
   not a fit to any row's target), so a column found uninformative is 0 in
   every fold. Prediction uses the statistics of all training rows.

Imports numpy (and scipy's distributions for step 2's test).
"""

import numpy as np

from obliquetrees._core._random import generator

#: Family-wise significance level of step 2's test (Bonferroni over the
#: categorical features): a feature whose categories do not differ at this level
#: gets no coordinate. The level of the missing-value indicators' test.
ALPHA = 0.01

#: Stream of the seed the rows are dealt into folds from (its own: the seed may be a
#: tree's too).
FOLD_STREAM = 40

#: Folds of the cross-fitting (step 4): each training row's coordinate comes
#: from the other ``N_FOLDS - 1`` folds.
N_FOLDS = 5


def learn_coordinates(codes, n_categories, y, sample_weight, n_classes, seed, alpha=ALPHA):
    """Coordinates of the categories of one feature, and of its training rows.

    Parameters
    ----------
    codes : ndarray of int64, shape (n_samples,)
        Each row's category, ``-1`` where the value is missing.
    n_categories : int
    y : ndarray
        Class indices, int64 of shape (n_samples,) (``n_classes`` given), or
        float64 targets of shape (n_samples,) or (n_samples, n_outputs).
    sample_weight : ndarray of float64, shape (n_samples,)
    n_classes : int or None
        None for regression.
    seed : int
        Seeds the deal of the rows into folds.
    alpha : float, default=ALPHA
        Significance level of the test of step 2 (the caller divides it by
        the number of categorical features: Bonferroni).

    Returns
    -------
    table : ndarray of float64, shape (n_categories,)
        The coordinate of each category (all training rows' statistics).
    train : ndarray of float64, shape (n_samples,)
        Each row's cross-fitted coordinate (step 4); NaN where ``codes`` is -1.
    """
    observed = codes >= 0
    rows = np.flatnonzero(observed)
    targets = _targets(y[rows], sample_weight[rows], n_classes)
    weight = sample_weight[rows]
    total = weight.sum()
    if total > 0:
        weight = weight * (rows.size / total)  # mean 1: N counts rows (step 2)
    n_folds = min(N_FOLDS, rows.size)
    fold = generator(seed, FOLD_STREAM).permutation(rows.size) % max(n_folds, 1)
    groups = fold * n_categories + codes[rows]
    n_groups = max(n_folds, 1) * n_categories
    n, sums, squares = _group_sums(groups, n_groups, targets, weight, n_classes)
    shape = (max(n_folds, 1), n_categories)
    n, squares = n.reshape(shape), squares.reshape(shape)
    sums = sums.reshape(*shape, -1)
    components = _variance_components(n.sum(0), sums.sum(0), squares.sum(0))
    informative = components[1] > 0 and _depends_on_target(
        n.sum(0), sums.sum(0), components[0], n_classes is not None, alpha
    )
    if not informative:
        components = (components[0], 0.0)  # step 2's test
    deviation = _shrunk_deviations(n.sum(0), sums.sum(0), *components)
    axis = _principal_axis(deviation, n.sum(0))
    table = deviation @ axis
    train = np.full(codes.shape[0], np.nan)
    if n_folds < 2:
        train[rows] = table[codes[rows]]
        return table, train
    for f in range(n_folds):  # each fold's rows from the other folds
        other = _shrunk_deviations(n.sum(0) - n[f], sums.sum(0) - sums[f], *components)
        mine = fold == f
        train[rows[mine]] = (other @ axis)[codes[rows[mine]]]
    return table, train


def _targets(y, weight, n_classes):
    """Class indices as they are; regression targets as a standardised 2-D array."""
    if n_classes is not None:
        return y
    t = y.reshape(y.shape[0], -1)
    total = weight.sum()
    if t.shape[0] == 0 or total <= 0:
        return np.zeros_like(t)
    mean = weight @ t / total
    std = np.sqrt(weight @ (t - mean) ** 2 / total)
    return (t - mean) / np.where(std > 0, std, 1.0)


def _group_sums(groups, n_groups, targets, weight, n_classes):
    """Per group: weighted count, sum of target vectors (n_groups, d), sum of squared norms."""
    n = np.bincount(groups, weight, n_groups)
    if n_classes is not None:  # class indices: one-hot vectors, each of squared norm 1
        sums = np.bincount(groups * n_classes + targets, weight, n_groups * n_classes)
        return n, sums.reshape(n_groups, n_classes), n
    sums = np.column_stack(
        [np.bincount(groups, weight * targets[:, j], n_groups) for j in range(targets.shape[1])]
    )
    squares = np.bincount(groups, weight * np.einsum("ij,ij->i", targets, targets), n_groups)
    return n, sums, squares


def _variance_components(n, sums, squares):
    """``(sigma^2, tau^2)`` of step 2 by the method of moments; ``tau^2 = 0``: nothing to learn.

    ``n`` (K,), ``sums`` (K, d) and ``squares`` (K,) are the categories'
    weighted counts, target sums and squared-norm sums.
    """
    present = n > 0
    total, k = n.sum(), int(present.sum())
    if k < 2 or total <= 0:
        return 1.0, 0.0  # one category (or none) separates nothing
    mu = sums.sum(0) / total
    means = sums[present] / n[present, None]
    between = n[present] @ np.sum((means - mu) ** 2, axis=1)
    within = max(float(squares[present].sum() - n[present] @ np.sum(means**2, axis=1)), 0.0)
    if total - k > 0:
        sigma2 = within / (total - k)
    else:  # every category is one row: no within-category spread to go by
        sigma2 = (within + between) / max(total - 1, 1e-12)
    spread = total - n[present] @ n[present] / total
    tau2 = max((between - (k - 1) * sigma2) / spread, 0.0) if spread > 0 else 0.0
    return sigma2, tau2


def _depends_on_target(n, sums, sigma2, classification, alpha):
    """Whether the categories' targets differ beyond chance at level ``alpha`` (step 2).

    Classification (``sums`` is the category x class table of weighted
    counts): Pearson's chi-squared test of independence. Regression: the
    one-way analysis of variance, ``F`` with the sums of squares of the
    standardised outputs summed. Rows count as their weights (mean 1). A
    column of one-row categories has no within-category spread to test
    against: it does not depend on the target.
    """
    from scipy import stats

    present = n > 0
    total, k = n.sum(), int(present.sum())
    if total - k <= 0:
        return False
    if classification:
        table = sums[present]
        table = table[:, table.sum(0) > 0]
        expected = np.outer(table.sum(1), table.sum(0)) / total
        chi2 = float(np.sum((table - expected) ** 2 / expected))
        dof = (k - 1) * (table.shape[1] - 1)
        return dof > 0 and stats.chi2.sf(chi2, dof) < alpha
    if sigma2 <= 0:
        return True  # every category constant inside, and not all alike (tau^2 > 0)
    mu = sums.sum(0) / total
    means = sums[present] / n[present, None]
    between = n[present] @ np.sum((means - mu) ** 2, axis=1)
    d = sums.shape[1]  # both sums of squares are summed over the d outputs
    return stats.f.sf(between / ((k - 1) * sigma2), d * (k - 1), d * (total - k)) < alpha


def _shrunk_deviations(n, sums, sigma2, tau2):
    """``lambda_k (m_k - mu)`` per category (step 2); zeros where nothing is known."""
    deviation = np.zeros(sums.shape)
    present = n > 0
    total = n.sum()
    if tau2 == 0.0 or total <= 0:
        return deviation
    mu = sums.sum(0) / total
    shrink = n[present] * tau2 / (n[present] * tau2 + sigma2)
    deviation[present] = shrink[:, None] * (sums[present] / n[present, None] - mu)
    return deviation


def _principal_axis(deviation, n):
    """Unit first principal axis of the ``n``-weighted deviations (step 3), sign fixed."""
    d = deviation.shape[1]
    scatter = (deviation * n[:, None]).T @ deviation
    if d == 1 or not np.any(scatter):
        return np.eye(d)[0]
    axis = np.linalg.eigh(scatter)[1][:, -1]
    magnitude = np.abs(axis)
    largest = d - 1 - int(np.argmax(magnitude[::-1] >= magnitude.max() * (1 - 1e-12)))
    return axis if axis[largest] > 0 else -axis
