"""Monotonic constraints of gradient-trained trees: the projections after each step.

A tree is monotone in the constrained features (``sign[j] = +1``: the output
may only rise with feature ``j``, ``-1``: only fall) when

1. every split's weights satisfy ``sign[j] * w[j] >= 0``, with the container's
   routing "right iff ``w . x + b > 0``": the right child takes the inputs
   with the larger constrained values;
2. at every *ordered* node (a split allowed to use constrained features),
   every leaf under the left child is at most every leaf under the right
   child. A *free* node (its constrained weights are pinned at 0) needs no
   ordering across its children: along a constrained feature, its inputs
   never change side.

Both hold for hard routing and for soft routing ``f = g R + (1 - g) L``,
``g = sigmoid(w . x + b)``: ``df/dx_j = g' w_j (R - L) + g dR/dx_j + (1 - g)
dL/dx_j`` and every output under a child is a convex combination of its
leaves, so ``R - L >= 0`` at ordered nodes. A NaN contributes a constant to
the margin (:mod:`obliquetrees._core.missing`), so it does not break 1.

Gradient-trained methods (E2EDT, soft trees) call these projections after
every optimiser step, so training is projected gradient descent (or a
constrained M-step) and the final parameters satisfy 1 and 2 exactly:

- :func:`project_weights`: 1 on ordered rows, 0 on free rows (the Euclidean
  projection);
- :func:`order_leaves`: 2. When every internal node is ordered this is "leaf
  values non-decreasing in in-order", and the weighted isotonic regression of
  the leaves (:func:`isotonic_regression`, PAVA) is the exact weighted
  Euclidean projection (and the exact maximum-likelihood M-step of Gaussian
  leaves with a shared variance or of Bernoulli leaves, PAVA being optimal
  for every Bregman divergence). Otherwise scikit-learn's bound propagation:
  from the root, an ordered node splits its interval ``[lo, hi]`` at
  ``mid``, giving its children ``[lo, mid]`` and ``[mid, hi]``; a free node
  passes its interval on; leaves are clipped. Ours: ``mid`` is the
  threshold that moves the node's (clipped) leaves least in weighted
  squares (:func:`_threshold`; scikit-learn takes the children's mean). It
  is the identity on trees that already satisfy 2 and always returns one
  that does, but it is not the exact projection;
- :func:`leaf_interval`: the values a leaf may take, the other leaves fixed
  (for growth that trains one new split while the tree is frozen);
- :func:`least_squares_leaves`: the leaves that minimise a quadratic (a soft
  prediction's squared error) under 2, from a feasible start.

Every kernel takes node arrays with parents before children (a child's id
is larger than its parent's), as every grower here builds them.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline


def constraint_signs(monotonic_cst, n_inputs):
    """float64 required sign of every training input (0: free), or None without constraints.

    ``monotonic_cst`` (the checked int8 array, or None) covers the original
    features; the inputs a method appends after them (missing-value
    indicators) are unconstrained.
    """
    if monotonic_cst is None:
        return None
    sign = np.zeros(n_inputs)
    sign[: monotonic_cst.shape[0]] = monotonic_cst
    return sign


def mixed_free_inputs(sign):
    """The free inputs (``sign == 0``) when constrained and free inputs mix, else None.

    A constrained tree's tree of the free inputs (E2EDT's regressor, the
    soft trees) needs both kinds: none free leaves it nothing to see, none
    constrained is an unconstrained fit.
    """
    free = np.flatnonzero(sign == 0.0)
    if free.shape[0] in (0, sign.shape[0]):
        return None
    return free


def orientation(w, sign):
    """+1 if the split ``w`` leans the constrained way (``sum_j sign_j w_j >= 0``), else -1.

    A split can be flipped (``w, b -> -w, -b``, children swapped) without
    changing the tree: the one that agrees more with the constraints loses
    less to :func:`project_weights`.
    """
    return 1.0 if float(np.dot(sign, w)) >= 0.0 else -1.0


def uses_constrained(w, sign):
    """Whether the split ``w`` has a nonzero weight on a constrained input."""
    return bool(np.any((sign != 0.0) & (w != 0.0)))


@jit_inline
def project_weight_row(w, sign, ordered):
    """One split's weights, in place: wrong-signed constrained weights (every one if free) to 0."""
    for j in range(w.shape[0]):
        if sign[j] != 0.0 and (not ordered or sign[j] * w[j] < 0.0):
            w[j] = 0.0


@jit
def project_weights(W, sign, ordered):
    """:func:`project_weight_row` of every row of ``W`` (``ordered``: one flag per row)."""
    for r in range(W.shape[0]):
        project_weight_row(W[r], sign, ordered[r])


@jit
def isotonic_regression(y, w):
    """Weighted least-squares non-decreasing fit of ``y`` (pool adjacent violators).

    ``w`` >= 0; a block whose weights are all 0 takes the plain mean of its
    two pooled parts. Returns a new array, exactly non-decreasing.
    """
    n = y.shape[0]
    value = np.empty(n)
    weight = np.empty(n)
    size = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        value[k] = y[i]
        weight[k] = w[i]
        size[k] = 1
        k += 1
        while k > 1 and value[k - 2] > value[k - 1]:
            total = weight[k - 2] + weight[k - 1]
            if total > 0.0:
                pooled = (weight[k - 2] * value[k - 2] + weight[k - 1] * value[k - 1]) / total
            else:
                pooled = 0.5 * (value[k - 2] + value[k - 1])
            # rounding must not leave the pooled value outside its parts
            value[k - 2] = min(max(pooled, value[k - 1]), value[k - 2])
            weight[k - 2] = total
            size[k - 2] += size[k - 1]
            k -= 1
    out = np.empty(n)
    i = 0
    for b in range(k):
        for _ in range(size[b]):
            out[i] = value[b]
            i += 1
    return out


@jit
def in_order_leaves(children_left, children_right):
    """Leaf ids from left to right (in-order), from the root 0."""
    n_nodes = children_left.shape[0]
    leaves = np.empty(n_nodes, dtype=np.int64)
    stack = np.empty(n_nodes, dtype=np.int64)
    top = 0
    stack[0] = 0
    n_leaves = 0
    while top >= 0:
        node = stack[top]
        top -= 1
        if children_left[node] < 0:
            leaves[n_leaves] = node
            n_leaves += 1
        else:  # right pushed first: the left subtree is visited first
            stack[top + 1] = children_right[node]
            stack[top + 2] = children_left[node]
            top += 2
    return leaves[:n_leaves]


@jit
def _subtree_extremes(children_left, children_right, value):
    """Smallest and largest leaf value under every node (children after parents)."""
    n_nodes = children_left.shape[0]
    low = value.copy()
    high = value.copy()
    for node in range(n_nodes - 1, -1, -1):
        left = children_left[node]
        if left >= 0:
            right = children_right[node]
            low[node] = min(low[left], low[right])
            high[node] = max(high[left], high[right])
    return low, high


@jit
def _leaf_ranges(children_left, children_right, leaves):
    """``(first, stop)`` per node: its leaves are ``leaves[first[node]:stop[node]]`` (in-order)."""
    n_nodes = children_left.shape[0]
    first = np.empty(n_nodes, dtype=np.int64)
    stop = np.empty(n_nodes, dtype=np.int64)
    for q in range(leaves.shape[0]):
        first[leaves[q]] = q
        stop[leaves[q]] = q + 1
    for node in range(n_nodes - 1, -1, -1):
        if children_left[node] >= 0:
            first[node] = first[children_left[node]]
            stop[node] = stop[children_right[node]]
    return first, stop


@jit
def _threshold(value, weight, leaves, split, first, stop, lo, hi):
    """The ``mid`` an ordered node splits its interval ``[lo, hi]`` at.

    Its left leaves are ``leaves[first:split]``, its right ones
    ``leaves[split:stop]``, their values clipped to ``[lo, hi]``. Ordered
    already: the midpoint of the largest left and smallest right value (the
    values stay). Otherwise the ``mid`` that moves them least, minimising
    ``sum_left w (v - mid)_+^2 + sum_right w (mid - v)_+^2`` (bisection on its
    increasing derivative; the midpoint when no weight is involved).
    """
    high = -np.inf
    for q in range(first, split):
        high = max(high, min(max(value[leaves[q]], lo), hi))
    low = np.inf
    for q in range(split, stop):
        low = min(low, min(max(value[leaves[q]], lo), hi))
    a, b = low, high
    if b <= a:
        return 0.5 * (a + b)
    for _ in range(64):
        m = 0.5 * (a + b)
        if m <= a or m >= b:
            break
        slope = 0.0
        for q in range(first, split):
            v = min(max(value[leaves[q]], lo), hi)
            if v > m:
                slope -= weight[leaves[q]] * (v - m)
        for q in range(split, stop):
            v = min(max(value[leaves[q]], lo), hi)
            if v < m:
                slope += weight[leaves[q]] * (m - v)
        if slope < 0.0:
            a = m
        elif slope > 0.0:
            b = m
        else:
            return m
    return 0.5 * (a + b)


@jit
def order_leaves(children_left, children_right, ordered, value, weight):
    """Leaf values ``value`` (one per node) projected onto the ordering constraints, in place.

    ``ordered[node]``: whether the ordering constraint holds at that internal
    node. Every internal node ordered: weighted isotonic regression of the
    leaves in in-order, weights ``weight`` (the exact projection); otherwise
    bound propagation (module docstring). Values of internal nodes are left
    as they are.
    """
    n_nodes = children_left.shape[0]
    every = True
    for node in range(n_nodes):
        if children_left[node] >= 0 and not ordered[node]:
            every = False
    if every:
        leaves = in_order_leaves(children_left, children_right)
        fitted = isotonic_regression(value[leaves], weight[leaves])
        for q in range(leaves.shape[0]):
            value[leaves[q]] = fitted[q]
        return
    leaves = in_order_leaves(children_left, children_right)
    first, stop = _leaf_ranges(children_left, children_right, leaves)
    lo = np.full(n_nodes, -np.inf)
    hi = np.full(n_nodes, np.inf)
    for node in range(n_nodes):
        left = children_left[node]
        if left < 0:
            value[node] = min(max(value[node], lo[node]), hi[node])
            continue
        right = children_right[node]
        if ordered[node]:
            mid = _threshold(
                value, weight, leaves, first[right], first[node], stop[node], lo[node], hi[node]
            )
            lo[left], hi[left] = lo[node], mid
            lo[right], hi[right] = mid, hi[node]
        else:
            lo[left], hi[left] = lo[node], hi[node]
            lo[right], hi[right] = lo[node], hi[node]


#: :func:`least_squares_leaves`: at most this many steps, and it stops earlier when
#: a step lowers the objective by less than this fraction of the objective's scale.
LEAST_SQUARES_MAX_STEPS = 500
LEAST_SQUARES_TOL = 1e-10


def leaf_bounds(target, weight, margin):
    """``(lo, hi)`` for :func:`least_squares_leaves`: the range of ``target`` over the
    rows of positive ``weight``, widened on each side by ``margin`` times its width.

    A soft prediction is a mixture of leaves, so a leaf may need to lie beyond
    every target for the mixture to reach the extreme ones; each method
    chooses its ``margin`` on validation parts
    (``benchmarks/monotonic_defaults.py``, families ``e2edt-leaf-margin`` and
    ``soft-leaf-margin``).
    """
    fitted = target[weight > 0]
    lo, hi = float(fitted.min()), float(fitted.max())
    return lo - margin * (hi - lo), hi + margin * (hi - lo)


def normal_equations(blocks, weight, target, n_leaves):
    """``(P' S P, P' S target)`` of :func:`least_squares_leaves`, summed block by block.

    ``blocks`` yields ``(rows, P)``: ``P`` the path probabilities of the
    ``n_leaves`` leaves for the rows ``rows`` (an index array or a slice of
    ``weight`` and ``target``); ``S`` is ``diag(weight)``.
    """
    gram = np.zeros((n_leaves, n_leaves))
    rhs = np.zeros(n_leaves)
    for rows, P in blocks:
        weighted = P * weight[rows, None]
        gram += weighted.T @ P
        rhs += weighted.T @ target[rows]
    return gram, rhs


def least_squares_leaves(
    children_left, children_right, ordered, leaves, gram, rhs, start, bounds=None
):
    """Leaf values lowering ``f(v) = v' gram v / 2 - rhs' v`` under the ordering constraints.

    For a soft prediction ``P v`` (rows of ``P``: a training row's path
    probabilities of ``leaves``), ``gram = P' S P`` and ``rhs = P' S y`` with
    the row weights ``S``: ``f`` is half the weighted squared error up to a
    constant. ``gram`` has no negative entry, so ``D = diag(row sums of
    gram)`` (each leaf's soft weight) bounds it (``D - gram`` is diagonally
    dominant, hence positive semi-definite) and ``f`` has the majoriser
    ``f(x) + f'(x)(v - x) + (v - x)' D (v - x) / 2``, whose minimum on the
    constraints is the ``D``-weighted projection of ``x - D^-1 f'(x)``:
    projected gradient in the metric ``D``, accelerated (FISTA) and restarted
    whenever a step would raise ``f``. Under hard routing ``gram = D`` and one
    step gives the weighted projection of the leaves' means.

    The projection is :func:`order_leaves` weighted by ``D``: exact when every
    split is ordered (the iteration then converges to the constrained
    minimum), otherwise feasible but not exact, so the iteration may stop
    short of it. Every accepted step lowers ``f``, so the result is feasible
    and never worse than ``start``.

    ``bounds = (lo, hi)`` adds ``lo <= v <= hi`` (callers pass
    :func:`leaf_bounds`): a leaf that almost no row reaches has almost no weight
    in ``gram``, and the unbounded minimum may give it any value (an
    E2EDTRegressor leaf of -3039 against targets in [-2.7, 5.2] predicted
    -446 for a row that reached it). Each step clips the projection to the
    bounds; clipping keeps every order, so the steps stay feasible (for a
    weighted isotonic fit the clipped projection is the projection onto the
    order and the bounds together, Barlow et al. 1972).

    Parameters
    ----------
    children_left, children_right : ndarray of int64 (n_nodes,)
        The tree, parents before children.
    ordered : ndarray of bool (n_nodes,)
    leaves : ndarray of int64 (n_leaves,)
        The node ids of the leaves, in the order of ``gram``'s rows.
    gram : ndarray of float64 (n_leaves, n_leaves)
        Symmetric, no negative entry.
    rhs : ndarray of float64 (n_leaves,)
    start : ndarray of float64 (n_leaves,)
        Leaf values satisfying the constraints (clipped to ``bounds``).
    bounds : tuple of float or None, default=None
        ``(lo, hi)``, ``lo <= hi``: every leaf value stays in ``[lo, hi]``.

    Returns
    -------
    ndarray of float64 (n_leaves,)
    """
    n_nodes = children_left.shape[0]
    mass = gram.sum(axis=1)
    metric = np.where(mass > 0.0, mass, 1.0)  # a leaf no row reaches has no gradient
    node_mass = np.zeros(n_nodes)
    node_mass[leaves] = mass

    def objective(v):
        return 0.5 * float(v @ (gram @ v)) - float(rhs @ v)

    def step(v):
        full = np.zeros(n_nodes)
        full[leaves] = v - (gram @ v - rhs) / metric
        order_leaves(children_left, children_right, ordered, full, node_mass)
        return full[leaves] if bounds is None else np.clip(full[leaves], *bounds)

    x = np.asarray(start, dtype=np.float64).copy()
    if bounds is not None:
        x = np.clip(x, *bounds)
    fx = objective(x)
    scale = max(abs(fx), float(np.abs(rhs).sum()) * float(np.abs(x).max(initial=0.0)), 1e-300)
    z, t = x, 1.0
    for _ in range(LEAST_SQUARES_MAX_STEPS):
        candidate = step(z)
        f_candidate = objective(candidate)
        if f_candidate >= fx and z is not x:  # momentum overshot: restart from x
            z, t = x, 1.0
            candidate = step(x)
            f_candidate = objective(candidate)
        if not f_candidate < fx:
            break
        decrease = fx - f_candidate
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        z = candidate + ((t - 1.0) / t_next) * (candidate - x)
        x, fx, t = candidate, f_candidate, t_next
        if decrease <= LEAST_SQUARES_TOL * scale:
            break
    return x


@jit
def leaf_interval(children_left, children_right, ordered, value, leaf):
    """``(lo, hi)``: the values leaf ``leaf`` may take with every other leaf fixed.

    For each ordered ancestor: at least every leaf of its left subtree when
    ``leaf`` is under its right child, at most every leaf of its right
    subtree when under its left child.
    """
    n_nodes = children_left.shape[0]
    parent = np.full(n_nodes, -1, dtype=np.int64)
    for node in range(n_nodes):
        if children_left[node] >= 0:
            parent[children_left[node]] = node
            parent[children_right[node]] = node
    low, high = _subtree_extremes(children_left, children_right, value)
    lo, hi = -np.inf, np.inf
    child = leaf
    node = parent[leaf]
    while node >= 0:
        if ordered[node]:
            if children_right[node] == child:
                lo = max(lo, high[children_left[node]])
            else:
                hi = min(hi, low[children_right[node]])
        child = node
        node = parent[node]
    return lo, hi


@jit_inline
def project_pair(z_left, z_right, ordered, lo, hi):
    """Two sibling leaves projected onto ``lo <= z_left (<= z_right if ordered) <= hi``.

    Equal weights: pool a violating pair at its mean, then clip both (the
    exact Euclidean projection: clipping an isotonic fit to a box is the
    projection onto monotone and box). Returns the new pair.
    """
    if ordered and z_left > z_right:
        z_left = z_right = 0.5 * (z_left + z_right)
    return min(max(z_left, lo), hi), min(max(z_right, lo), hi)


@jit
def project_tree(children_left, children_right, W, Z, sign, ordered):
    """A dense tree's weights (a row per node) and leaves ``Z[:, 0]`` projected, in place.

    The Euclidean projection step of projected gradient descent on every
    parameter at once: :func:`project_weights` on the internal nodes' rows,
    :func:`order_leaves` with unit weights on the leaves.
    """
    n_nodes = children_left.shape[0]
    for node in range(n_nodes):
        if children_left[node] >= 0:
            project_weight_row(W[node], sign, ordered[node])
    value = Z[:, 0].copy()
    order_leaves(children_left, children_right, ordered, value, np.ones(n_nodes))
    Z[:, 0] = value
