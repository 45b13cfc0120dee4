"""Monotonic constraints of decision-machine fine-tuning: split signs and leaf-value bounds.

A hard-routed tree goes right iff ``w . x + b > 0``. Each split gets a fixed
orientation ``d`` at the start of fine-tuning: the sign of ``sum_j c_j w_j``
over the constrained features ``j`` (a converted ``x_j <= t`` split has
``w_j = 1``: ``d = c_j``), 0 if it has no constrained weight. Projected
steps keep ``d c_j w_j >= 0`` on every constrained feature (``w_j = 0``
where ``d = 0``), so along a constrained direction a split's margin only
moves one way and a sample can only move from its *lower* child (left if
``d = 1``, right if ``d = -1``) to its *upper* one. Leaf values are then
bounded as scikit-learn bounds them: top down, a split with ``d != 0``
splits its bounds ``[lo, hi]`` at a value ``mid`` (halfway between its
lower subtree's largest and its upper subtree's smallest value when those
are ordered; otherwise the value that clips the leaves out of order least,
in weighted squares), ``[lo, mid]`` for the lower child
and ``[mid, hi]`` for the upper one; splits with ``d = 0`` pass the bounds
on; each leaf value is clipped into its bounds. Where a path changes first,
at a split with ``d != 0``, the value moves from the lower bounds to the
upper ones, so each tree, and their mean, is monotone, exactly (rounding of
the margins and of the mean is monotone too). The bounded quantity is the
regression value or the probability of the second class, the other class
taking the rest.
"""

import numpy as np


def orient_splits(W, cst):
    """Orientation ``d`` (-1, 0, 1) of every split row of ``W`` (n_splits, n_features).

    ``W`` is projected (:func:`project_splits`) in place.
    """
    direction = np.sign(W @ cst.astype(np.float64)).astype(np.int8)
    project_splits(W, direction, cst)
    return direction


def project_splits(W, direction, cst):
    """Zero the constrained weights of ``W`` against ``d c_j w_j >= 0`` (all if ``d = 0``)."""
    columns = np.flatnonzero(cst)
    required = direction[:, None] * cst[columns][None, :]
    part = W[:, columns]
    W[:, columns] = np.where(required * part > 0, part, 0.0)


def _preorder(left, right):
    """Node ids of a tree, every parent before its children (root 0), and subtree sizes.

    In this order every subtree is the contiguous run of ``size[node]`` ids
    starting at ``node``'s position.
    """
    order = []
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        if left[node] >= 0:
            stack.extend((right[node], left[node]))
    order = np.asarray(order, dtype=np.int64)
    size = np.ones(left.shape[0], dtype=np.int64)
    for node in order[::-1]:
        if left[node] >= 0:
            size[node] += size[left[node]] + size[right[node]]
    return order, size


def _level(low_values, low_weights, high_values, high_weights):
    """The ``mid`` of least weighted squared clipping of two out-of-order leaf sets.

    Minimises ``sum w (v - mid)^2`` over the lower set's values above ``mid``
    and the upper set's below it (convex in ``mid``): the root of its
    increasing, piecewise linear derivative ``g``, found among the sorted
    values and then inside their segment (where it is the weighted mean of
    the values out of order).
    """
    lows, highs = np.argsort(low_values), np.argsort(high_values)
    lv, lw = low_values[lows], low_weights[lows]
    hv, hw = high_values[highs], high_weights[highs]
    l_weight = np.concatenate([[0.0], np.cumsum(lw)])
    l_sum = np.concatenate([[0.0], np.cumsum(lw * lv)])
    h_weight = np.concatenate([[0.0], np.cumsum(hw)])
    h_sum = np.concatenate([[0.0], np.cumsum(hw * hv)])

    def parts(m):  # weight and weighted sum of the values out of order at m
        above = np.searchsorted(lv, m, side="right")
        below = np.searchsorted(hv, m, side="left")
        weight = l_weight[-1] - l_weight[above] + h_weight[below]
        return weight, l_sum[-1] - l_sum[above] + h_sum[below]

    points = np.unique(np.concatenate([lv, hv]))
    points = points[(points >= hv[0]) & (points <= lv[-1])]
    weight, total = parts(points)
    first = int(np.argmax(points * weight - total >= 0.0))  # g(top) >= 0: always found
    if first == 0:
        return float(points[0])
    weight, total = parts(0.5 * (points[first - 1] + points[first]))
    if weight <= 0.0:
        return float(points[first])
    return float(min(max(total / weight, points[first - 1]), points[first]))


def bound_values(left, right, direction, value, weight):
    """Leaf values of one tree clipped to their monotone bounds (see the module).

    Parameters
    ----------
    left, right : ndarray of int, shape (n_nodes,)
        Children (-1 at leaves).
    direction : ndarray of int, shape (n_nodes,)
        ``d`` of each split (ignored at leaves).
    value : ndarray of float, shape (n_nodes,)
        The bounded quantity at the leaves (ignored elsewhere).
    weight : ndarray of float, shape (n_nodes,)
        Training weight of each leaf (the clipping cost ``mid`` minimises).

    Returns
    -------
    value : ndarray of float, shape (n_nodes,)
        A copy with every leaf value within its bounds.
    """
    order, size = _preorder(left, right)
    position = np.empty_like(order)
    position[order] = np.arange(order.shape[0])
    is_leaf = left[order] < 0
    values, weights = value[order], weight[order]
    lo, hi = np.full(value.shape, -np.inf), np.full(value.shape, np.inf)
    out = value.copy()

    def leaves(node):  # values (within the node's bounds) and weights under node
        run = slice(position[node], position[node] + size[node])
        keep = is_leaf[run]
        return np.clip(values[run][keep], lo[node], hi[node]), weights[run][keep]

    for node in order:  # bounds, top down
        if left[node] < 0:
            out[node] = min(max(value[node], lo[node]), hi[node])
            continue
        d = direction[node]
        lower, upper = (left[node], right[node]) if d >= 0 else (right[node], left[node])
        lo[lower], hi[lower] = lo[node], hi[node]
        lo[upper], hi[upper] = lo[node], hi[node]
        if d == 0:
            continue
        low_values, low_weights = leaves(lower)
        high_values, high_weights = leaves(upper)
        top, bottom = low_values.max(), high_values.min()
        if top <= bottom:
            mid = 0.5 * (top + bottom)
        else:
            mid = _level(low_values, low_weights, high_values, high_weights)
        hi[lower] = lo[upper] = mid
    return out


def project_leaf_values(forest, machine, V, direction, classifier, trees=None):
    """Clip the leaf values ``V`` (the machine's leaf rows) to their bounds, in place.

    ``direction``: ``d`` of every split row of ``machine``; the bounded
    column is the value (regressors) or the second class's probability
    (binary classifiers, whose first column becomes the rest). ``trees``:
    the indices of the trees to clip (None: all).
    """
    column = 1 if classifier else 0
    for k in range(machine.n_trees) if trees is None else trees:
        tree = forest.trees[k]
        splits = slice(machine.split_offset[k], machine.split_offset[k + 1])
        leaves = slice(machine.leaf_offset[k], machine.leaf_offset[k + 1])
        node_direction = np.zeros(tree.node_count, dtype=np.int8)
        node_direction[machine.split_node[splits]] = direction[splits]
        value = np.zeros(tree.node_count)
        value[machine.leaf_node[leaves]] = V[leaves, column]
        bounded = bound_values(
            tree.children_left, tree.children_right, node_direction, value, tree.n_node_samples
        )
        V[leaves, column] = bounded[machine.leaf_node[leaves]]
        if classifier:
            V[leaves, 0] = 1.0 - V[leaves, 1]
