"""E2EDT's leaf models: class distributions (the paper) or Gaussians (regression, ours).

The EM kernels of :mod:`obliquetrees.e2edt._kernels` and :mod:`obliquetrees.e2edt._sparse` touch the
leaves in four places only: the likelihood ``p(y_n | leaf)`` of a sample
under a leaf (E-step), its logarithm (the log-space rescue of underflowing
samples), the accumulation of a sample's responsibility into the leaf's
sufficient statistics, and the closed-form M-step. Each is a stub below whose
numba implementation is chosen at compile time from the type of ``y``
(:func:`~obliquetrees._core._jit.jit_overload`), so every kernel exists once
and compiles once per leaf model:

- ``y`` int64, 1-D (class indices): categorical leaves, a leaf's row of
  ``pi`` is its class distribution, the statistics are weighted class counts
  and the M-step is eq. 13 (:func:`~obliquetrees.e2edt._kernels.leaf_m_step`). The
  operations are those the kernels ran before they were generalised, in the
  same order, so classification trains bit for bit as before.
- ``y`` float64, 2-D (standardised targets, ``d`` columns): Gaussian leaves
  ``N(y; m_l, diag(sigma^2))`` with a variance per output shared by all
  leaves. A leaf's row holds ``(m_l[0:d], 1/sigma^2[0:d], c)`` with the log
  normaliser ``c = sum_k log(1/sigma_k^2 / (2 pi)) / 2``; the statistics per
  leaf are ``(sum sw h, sum sw h y[0:d], sum sw h y^2[0:d])``; the M-step
  (:func:`gaussian_m_step`) sets the means to the responsibility-weighted
  means and the shared variance to the pooled within-leaf variance, floored
  at :data:`VAR_FLOOR`.

The Python side (:class:`Categorical`, :class:`Gaussian`) holds what the
training driver needs beyond the kernels: node values, the stumps' initial
leaves, the gain of best-first growth and the stored leaf values.

Importing this module imports numba.
"""

import numpy as np
from numba import types

from obliquetrees._core._jit import jit, jit_overload
from obliquetrees._core.tree import check_centred_range, feature_moments

#: Smallest shared leaf variance, in units of the standardised target
#: (variance 1 over the training rows): keeps the precisions finite when the
#: leaves fit their rows exactly (a collapsed likelihood would make every
#: responsibility 0 or 1 and the log normaliser unbounded).
VAR_FLOOR = 1e-6


def _is_targets(y):
    """Whether the numba type of ``y`` is a 2-D array of regression targets."""
    return isinstance(y, types.Array) and y.ndim == 2


# ------------------------------------------------------------ the four stubs
def leaf_likelihood(row, y, r):
    """``p(y[r] | leaf)`` for the leaf parameters ``row`` (numba only)."""
    raise NotImplementedError("leaf_likelihood is only callable from numba kernels")


def leaf_log_likelihood(row, y, r):
    """``log p(y[r] | leaf)`` (``-inf`` where it is 0) (numba only)."""
    raise NotImplementedError("leaf_log_likelihood is only callable from numba kernels")


def add_statistics(stats, y, r, weight):
    """Accumulate ``weight`` times sample ``r``'s statistics into ``stats`` (numba only)."""
    raise NotImplementedError("add_statistics is only callable from numba kernels")


def m_step(counts, pi, y):
    """Closed-form update of the leaves ``pi`` from their statistics (numba only)."""
    raise NotImplementedError("m_step is only callable from numba kernels")


def n_statistics(pi, y):
    """Width of a leaf's statistics row (numba only)."""
    raise NotImplementedError("n_statistics is only callable from numba kernels")


@jit  # not inlined into the inlined overloads (numba's IR checks warn on nested inlining)
def gaussian_log_density(row, y, r):
    """``log N(y[r]; m, diag(1 / precision))`` for the row ``(m, precision, c)``."""
    d = y.shape[1]
    quad = 0.0
    for k in range(d):
        diff = y[r, k] - row[k]
        quad += row[d + k] * diff * diff
    return row[2 * d] - 0.5 * quad


@jit_overload(leaf_likelihood, inline="always")
def _leaf_likelihood(row, y, r):
    if not _is_targets(y):
        return lambda row, y, r: row[y[r]]

    return lambda row, y, r: np.exp(gaussian_log_density(row, y, r))


@jit_overload(leaf_log_likelihood)  # off the hot path: not inlined
def _leaf_log_likelihood(row, y, r):
    if not _is_targets(y):

        def categorical(row, y, r):
            p = row[y[r]]
            return np.log(p) if p > 0.0 else -np.inf

        return categorical

    return lambda row, y, r: gaussian_log_density(row, y, r)


@jit_overload(add_statistics, inline="always")
def _add_statistics(stats, y, r, weight):
    if not _is_targets(y):

        def categorical(stats, y, r, weight):
            stats[y[r]] += weight

        return categorical

    def gaussian(stats, y, r, weight):
        d = y.shape[1]
        stats[0] += weight
        for k in range(d):
            v = y[r, k]
            stats[1 + k] += weight * v
            stats[1 + d + k] += weight * v * v

    return gaussian


@jit_overload(m_step)
def _m_step(counts, pi, y):
    if not _is_targets(y):
        return lambda counts, pi, y: leaf_m_step(counts, pi)
    return lambda counts, pi, y: gaussian_m_step(counts, pi)


@jit_overload(n_statistics)
def _n_statistics(pi, y):
    if not _is_targets(y):
        return lambda pi, y: pi.shape[1]
    return lambda pi, y: 1 + 2 * y.shape[1]


# ----------------------------------------------------------------- M-steps
@jit
def leaf_m_step(counts, pi):
    """Closed-form leaf update (eq. 13), in place; empty leaves keep ``pi``."""
    for leaf in range(counts.shape[0]):
        total = 0.0
        for k in range(counts.shape[1]):
            total += counts[leaf, k]
        if total > 0.0:
            for k in range(counts.shape[1]):
                pi[leaf, k] = counts[leaf, k] / total


@jit
def gaussian_m_step(counts, pi):
    """Closed-form update of Gaussian leaves with a shared variance, in place.

    ``counts[l] = (S0, S1[0:d], S2[0:d])`` (weight, weighted sums of ``y`` and
    ``y^2`` under the responsibilities). Means ``m_l = S1 / S0`` (empty leaves
    keep theirs); the variance of output ``k`` maximises the likelihood given
    the new means, ``sum_l (S2 - S1 m_l) / sum_l S0`` (the pooled
    within-leaf variance), floored at :data:`VAR_FLOOR`; every leaf's row
    gets its precision and the log normaliser. Nothing changes when all
    leaves are empty.
    """
    n_leaves = counts.shape[0]
    d = (pi.shape[1] - 1) // 2
    weight = 0.0
    for leaf in range(n_leaves):
        s0 = counts[leaf, 0]
        if s0 > 0.0:
            weight += s0
            for k in range(d):
                pi[leaf, k] = counts[leaf, 1 + k] / s0
    if weight <= 0.0:
        return
    log_norm = 0.0
    for k in range(d):
        sse = 0.0
        for leaf in range(n_leaves):
            if counts[leaf, 0] > 0.0:
                sse += counts[leaf, 1 + d + k] - counts[leaf, 1 + k] * pi[leaf, k]
        precision = 1.0 / max(sse / weight, VAR_FLOOR)
        log_norm += 0.5 * np.log(precision / (2.0 * np.pi))
        for leaf in range(n_leaves):
            pi[leaf, d + k] = precision
    for leaf in range(n_leaves):
        pi[leaf, 2 * d] = log_norm


@jit
def update_leaves(counts, pi, y):
    """The M-step of the leaf model of ``y`` (:func:`m_step`), callable from Python."""
    m_step(counts, pi, y)


@jit
def path_sums(leaf, parent, values):
    """Per node, the sum of ``values[r]`` over the rows ``r`` whose hard path passes through it.

    ``leaf[r]`` is the leaf row ``r`` reaches, ``parent`` the parent of
    every node (-1 at the root). Each node adds its rows in increasing row
    order, every column (zeros too): the additions, in the order, of the
    sparse product ``indicator.T @ values`` of the node indicator
    (scipy's ``csc_matvecs``), so the same bits, without building the
    indicator (a second pass of the tree over the rows).
    """
    sums = np.zeros((parent.shape[0], values.shape[1]))
    for r in range(leaf.shape[0]):
        node = leaf[r]
        while node >= 0:
            for k in range(values.shape[1]):
                sums[node, k] += values[r, k]
            node = parent[node]
    return sums


@jit
def empty_statistics(pi, y):
    """Zeroed statistics (one row per row of ``pi``) of the leaf model of ``y``."""
    return np.zeros((pi.shape[0], n_statistics(pi, y)))


# ------------------------------------------------------------ Python side
class Categorical:
    """Leaves holding class distributions (the paper); ``y`` holds class indices.

    Parameters
    ----------
    n_classes : int
    """

    #: Greedy stumps are the paper's alone (no axis-aligned candidate).
    axis_candidate = False

    def __init__(self, n_classes):
        self.n_classes = n_classes
        #: width of a leaf's parameter row and of a stored value
        self.width = self.n_outputs = n_classes

    def training_targets(self, y):
        """``y`` as the kernels take it (int64 class indices)."""
        return y

    def node_value(self, y, sw):
        """The weighted class distribution of rows ``y`` (weights ``sw``)."""
        value = np.bincount(y, weights=sw, minlength=self.n_classes)
        return value / value.sum()

    def stump_leaves(self, value):
        """Both leaves of a new stump: uniform (whatever the node's distribution)."""
        return np.full((2, self.n_classes), 1.0 / self.n_classes)

    def gain(self, value, pi, y, sw, right):
        """Information gain of a stump with leaves ``pi`` that sends ``right`` right.

        The node's entropy minus the entropies of the trained leaves weighted
        by the hard-routed fractions of the node's weight (sect. 3.4).
        """
        frac = sw[right].sum() / sw.sum()
        return _entropy(value) - (frac * _entropy(pi[1]) + (1 - frac) * _entropy(pi[0]))

    def leaf_values(self, pi, weight, sums):
        """Stored values of trained leaves: their EM distributions ``pi`` (the paper).

        ``weight`` and ``sums`` (the leaves' rows of :meth:`node_sums`) are
        not used: ``predict_proba`` of the default ``routing="hybrid"`` is
        the probabilistic model, whose leaves are these distributions.
        """
        return pi

    def node_sums(self, leaf, parent, y, sw):
        """``(weight, sums)`` per node of the hard-routed rows (see :func:`path_sums`).

        ``sums[node] / weight[node]`` is the node's stored value.
        """
        onehot = np.zeros((y.shape[0], self.n_classes))
        onehot[np.arange(y.shape[0]), y] = sw
        class_counts = path_sums(leaf, parent, onehot)
        return class_counts.sum(axis=1), class_counts

    def sums_value(self, sums, total):
        """A node's value from its row of ``node_sums`` and its weight ``total``."""
        return sums / total

    def fallback_value(self):
        """The value of a root that no weighted row reaches."""
        return 1.0 / self.n_classes

    def prior_value(self, y, sw):
        """The stored value of a tree that is one leaf: the weighted class frequencies."""
        return np.bincount(y, weights=sw, minlength=self.n_classes) / sw.sum()


class Gaussian:
    """Gaussian leaves for regression targets, a variance per output shared by all leaves.

    Training sees the targets standardised with the weighted mean and
    standard deviation of every output (:meth:`from_targets`); stored leaf
    values are means in raw units, of the rows hard routing sends to each
    leaf (:meth:`leaf_values`).

    Parameters
    ----------
    mean, scale : ndarray of shape (n_outputs,)
        The standardisation of the targets (``scale`` 1 for a constant output).
    """

    n_classes = None
    #: A greedy node takes its best axis-aligned split when that reduces the
    #: squared error more than the paper's stump (ours:
    #: :meth:`~obliquetrees.e2edt._greedy._StumpSplitter._with_axis_candidate`).
    axis_candidate = True

    def __init__(self, mean, scale):
        self.mean = mean
        self.scale = scale
        self.n_outputs = mean.shape[0]
        self.width = 2 * self.n_outputs + 1

    @classmethod
    def from_targets(cls, y, sw):
        """The standardisation of targets ``y`` (n, n_outputs) weighted by ``sw``.

        The moments are pre-scaled against overflow (as the soft trees'
        targets: :func:`~obliquetrees._core.tree.feature_moments`); a constant
        output (zero spread, or at rounding level of its mean) keeps scale 1.
        """
        mean, std = feature_moments(y, sw)
        check_centred_range(y, mean, name="y")
        scale = np.where(std > 1e-12 * np.abs(mean), std, 1.0)
        return cls(mean, scale)

    def training_targets(self, y):
        """``(y - mean) / scale``, C-contiguous float64 (n, n_outputs)."""
        return np.ascontiguousarray((y - self.mean) / self.scale)

    def node_value(self, y, sw):
        """The Gaussian of rows ``y`` (standardised): their weighted mean and variance."""
        w = sw / sw.sum()
        mean = w @ y
        var = np.maximum(w @ (y - mean) ** 2, VAR_FLOOR)
        return _gaussian_row(mean, var)

    def stump_leaves(self, value):
        """Both leaves of a new stump: the node's Gaussian (so the first E-step is ``mu``)."""
        return np.tile(value, (2, 1))

    def split_leaves(self, value, y, sw, right):
        """Both leaves of the hard split ``right`` of rows ``y`` (weights ``sw``).

        One M-step (:func:`gaussian_m_step`) from responsibilities 0 or 1:
        the weighted mean of each side and the pooled within-side variance
        (floored), starting from :meth:`stump_leaves` of the node's
        ``value`` (kept by a side without weight).
        """
        side = np.stack([~right, right]) * sw  # (2, n): hard responsibilities x weights
        counts = np.concatenate([side.sum(axis=1)[:, None], side @ y, side @ (y * y)], axis=1)
        pi = self.stump_leaves(value)
        update_leaves(counts, pi, y)
        return pi

    def gain(self, value, pi, y, sw, right):
        """Variance reduction of the hard split ``right`` per unit of the node's weight.

        The node's weighted squared error about its mean minus those of the
        two sides about theirs, summed over the outputs, divided by the node's
        weight: scikit-learn's squared-error impurity decrease at this node.
        """
        total = sw.sum()
        sse = _weighted_sse(y, sw)
        return (sse - _weighted_sse(y[right], sw[right]) - _weighted_sse(y[~right], sw[~right])) / (
            total
        )

    def leaf_values(self, pi, weight, sums):
        """Stored values of trained leaves: the mean target of the rows hard routing sends there.

        ``weight`` and ``sums`` are the leaves' rows of :meth:`node_sums`
        (hard-routed training weight and weighted target sums): each leaf
        stores ``sums / weight`` in raw units, the least-squares value of the
        partition the deterministic tree predicts with. A leaf that no
        weighted row reaches keeps its EM mean (``pi``'s mean, in raw units).
        """
        values = pi[:, : self.n_outputs] * self.scale + self.mean
        reached = weight > 0
        values[reached] = self.sums_value(sums[reached], weight[reached, None])
        return values

    def node_sums(self, leaf, parent, y, sw):
        """``(weight, sums)`` per node of the hard-routed rows (see :func:`path_sums`)."""
        weight = path_sums(leaf, parent, sw[:, None])[:, 0]
        return weight, path_sums(leaf, parent, sw[:, None] * y)

    def sums_value(self, sums, total):
        """A node's raw value from its row of ``node_sums`` and its weight ``total``."""
        return sums / total * self.scale + self.mean

    def fallback_value(self):
        """The value of a root that no weighted row reaches: the weighted target mean."""
        return self.mean

    def prior_value(self, y, sw):
        """The stored value of a tree that is one leaf: the weighted mean of ``y``."""
        return (sw @ y) / sw.sum() * self.scale + self.mean


def leaf_model(y, n_classes, sw):
    """The leaf model for targets ``y``: :class:`Categorical` for class indices
    (``n_classes`` an int), :class:`Gaussian` for 2-D float targets (``n_classes`` None)."""
    if n_classes is not None:
        return Categorical(n_classes)
    return Gaussian.from_targets(y, sw)


def as_leaf_model(leaves):
    """``leaves`` itself, or :class:`Categorical` of an int number of classes."""
    return Categorical(int(leaves)) if isinstance(leaves, (int, np.integer)) else leaves


def _gaussian_row(mean, var):
    precision = 1.0 / var
    log_norm = 0.5 * np.log(precision / (2.0 * np.pi)).sum()
    return np.concatenate([mean, precision, [log_norm]])


def _weighted_sse(y, sw):
    total = sw.sum()
    if total <= 0:
        return 0.0
    mean = sw @ y / total
    return float(sw @ ((y - mean) ** 2).sum(axis=1))


def _entropy(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())
