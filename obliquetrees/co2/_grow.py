"""Breadth-first growth of one CO2 tree in one numba kernel, on dense or CSR input.

:func:`grow_tree` runs the shared grower's mechanics
(:mod:`obliquetrees._training.grower`) and calls one per-node kernel: the
dense :func:`~obliquetrees.co2._node.split_node` when the input
is the triple ``(X, mean, scale)`` of a 2-D array and its standardisation
(:func:`~obliquetrees.co2._node.dense_source`),
:func:`~obliquetrees.co2._sparse_kernels.split_node_sparse`
when it is a CSR triple ``(indptr, indices, data)``. The choice is made by
numba at compile time from the input's type (:func:`split_any`), so each
input kind has one compiled (and cached) growth kernel and the loop exists once.

The split weights are kept in the form that suits the input
(:func:`new_weights` and the functions after it). Dense input: a
``(nodes, n_features)`` table, each split kernel writing its node's row.
CSR input: one scratch row of ``n_features`` that each split kernel fills
(and zeroes first), whose nonzero entries are appended to a CSR of the
tree's weights once the split is kept (:func:`keep_split`). A node's
weights can only be nonzero on features stored in its rows: the CCCP starts
from a unit vector on such a feature (the axis-aligned split needs a
feature that varies in the node), and the gradient of any other feature is
``acc_j / W - mu_j g_b = 0`` (no stored entry adds to ``acc_j``, the node
mean ``mu_j`` is 0), so its momentum velocity stays 0 and the projection on
the ball only rescales zeros. A tree on wide sparse data therefore holds
O(sum over nodes of their rows' distinct features) weights, not one row of
``n_features`` per node (a full tree on a 2000 x 200,000 CSR of density
1e-4 took 2.8 GB that way). The weights kept, and their order, are those of
the table's rows: :func:`fold_split_weights` stores the same tree from
either form, bit for bit.

Importing this module imports numba; the estimator imports it lazily.
"""

import math

import numpy as np
from numba import types

from obliquetrees._core._jit import is_none_type, jit, jit_inline, jit_overload
from obliquetrees._training.grower import (
    EPSILON,
    INITIAL_CAPACITY,
    grow_capacity,
    link_children,
    may_split,
)
from obliquetrees._training.targets import impurity_decrease
from obliquetrees.co2._monotone import free_type, keeps_order, order_leaves
from obliquetrees.co2._node import node_value, split_node
from obliquetrees.co2._oob import grow_oob, node_oob, split_oob
from obliquetrees.co2._rows import is_dense
from obliquetrees.co2._sparse_kernels import split_node_sparse


def split_any(data, start, end, node, tree_seed, table, params, cst, presorted):
    """Split one node with the kernel for ``data[0]``'s kind (numba only).

    ``presorted``: the growth's :func:`presorted_rows`, or None (the kernels
    sort each node's rows).
    """
    raise NotImplementedError("split_any is only callable from numba kernels")


@jit_overload(split_any)
def _split_any(data, start, end, node, tree_seed, table, params, cst, presorted):
    kernel = split_node if is_dense(data[0]) else split_node_sparse  # X 2-D, or CSR's indptr

    def split(data, start, end, node, tree_seed, table, params, cst, presorted):
        return kernel(data, start, end, node, tree_seed, table, params, cst, presorted)

    return split


def presorted_rows(column_order, rows):
    """The tree's rows in increasing order of each feature, and scratch (numba only).

    ``column_order`` (int32, ``(n_features, n_samples)``): every row of ``X``
    in increasing order of each column, ties by row id; None gives None.
    Otherwise ``(sorted_rows, local, left, buffer)``: ``sorted_rows[f]`` the
    tree's ``rows`` (distinct ids) in that order, which
    :func:`partition_presorted` keeps partitioned as the node slices of
    ``rows`` are, so that each node's slice is its rows sorted by every
    feature; ``local`` and ``left`` one scratch entry per row of ``X``,
    ``buffer`` one per tree row.
    """
    raise NotImplementedError("presorted_rows is only callable from numba kernels")


@jit_overload(presorted_rows)
def _presorted_rows(column_order, rows):
    if is_none_type(column_order):
        return lambda column_order, rows: None

    def tree_rows(column_order, rows):
        p, n = column_order.shape
        left = np.zeros(n, dtype=np.bool_)  # scratch; first the tree's rows
        for r in rows:
            left[r] = True
        sorted_rows = np.empty((p, rows.shape[0]), dtype=np.int32)
        for f in range(p):
            k = 0
            for r in column_order[f]:
                if left[r]:
                    sorted_rows[f, k] = r
                    k += 1
        left[:] = False
        local = np.empty(n, dtype=np.int32)
        return sorted_rows, local, left, np.empty(rows.shape[0], dtype=np.int32)

    return tree_rows


def partition_presorted(presorted, rows, start, middle, end):
    """Partition every feature's sorted slice ``[start, end)`` as ``rows`` was (numba only).

    The rows ``rows[start:middle]`` went left: each ``sorted_rows[f, start:end]``
    becomes its left rows then its right rows, each in the order they had
    (a stable partition), so both children's slices stay sorted. O(rows x
    features). Nothing for None.
    """
    raise NotImplementedError("partition_presorted is only callable from numba kernels")


@jit_overload(partition_presorted)
def _partition_presorted(presorted, rows, start, middle, end):
    if is_none_type(presorted):
        return lambda presorted, rows, start, middle, end: None

    def partition(presorted, rows, start, middle, end):
        sorted_rows, _, left, buffer = presorted
        for t in range(start, middle):
            left[rows[t]] = True
        for f in range(sorted_rows.shape[0]):
            column = sorted_rows[f]
            n_left = start
            n_right = 0
            for t in range(start, end):
                # branch-free (a row's side is unpredictable): both stores, one kept;
                # column[n_left] (n_left <= t) was read already
                r = column[t]
                is_left = left[r]
                column[n_left] = r
                buffer[n_right] = r
                n_left += is_left
                n_right += 1 - is_left
            for t in range(n_right):
                column[middle + t] = buffer[t]
        for t in range(start, middle):
            left[rows[t]] = False

    return partition


#: Stored weights the CSR of a tree on sparse input starts with room for (it grows by half).
INITIAL_SPARSE_WEIGHTS = 1024


def new_weights(source, capacity, n_features):
    """The growth's split weights for ``source``'s kind, room for ``capacity`` nodes (numba only).

    Dense: a zero ``(capacity, n_features)`` table. CSR: ``(row, indptr, index,
    value)``, a zero scratch row of ``n_features``, the node pointers and
    the stored weights (feature ids int32, as the container's).
    """
    raise NotImplementedError("new_weights is only callable from numba kernels")


@jit_overload(new_weights)
def _new_weights(source, capacity, n_features):
    if is_dense(source):
        return lambda source, capacity, n_features: np.zeros((capacity, n_features))

    def sparse(source, capacity, n_features):
        return (
            np.zeros(n_features),
            np.zeros(capacity + 1, dtype=np.int64),
            np.empty(INITIAL_SPARSE_WEIGHTS, dtype=np.int32),
            np.empty(INITIAL_SPARSE_WEIGHTS),
        )

    return sparse


def split_weights(weights):
    """What a split kernel writes its weights to: the table, or the scratch row (numba only)."""
    raise NotImplementedError("split_weights is only callable from numba kernels")


@jit_overload(split_weights)
def _split_weights(weights):
    if isinstance(weights, types.Array):
        return lambda weights: weights
    return lambda weights: weights[0]


def node_split_weights(weights, node):
    """The weights the split kernel wrote for ``node``: its table row, or the scratch row.

    Numba only.
    """
    raise NotImplementedError("node_split_weights is only callable from numba kernels")


@jit_overload(node_split_weights)
def _node_split_weights(weights, node):
    if isinstance(weights, types.Array):
        return lambda weights, node: weights[node]
    return lambda weights, node: weights[0]


def clear_split(weights, node):
    """Forget the weights the split kernel wrote for ``node`` (numba only).

    Dense: its row of the table becomes zero. CSR: nothing (the scratch row
    is only stored by :func:`keep_split`, and each split kernel zeroes it first).
    """
    raise NotImplementedError("clear_split is only callable from numba kernels")


@jit_overload(clear_split)
def _clear_split(weights, node):
    if isinstance(weights, types.Array):

        def dense(weights, node):
            weights[node] = 0.0

        return dense
    return lambda weights, node: None


def keep_split(weights, node, is_split):
    """Record ``node``'s weights (every node, in id order); returns the weights (numba only).

    Dense: nothing to do (the kernel wrote the table's row). CSR: the nonzero
    entries of the scratch row, in feature order, are appended for a split,
    none for a leaf; the stored weights grow by half when full.
    """
    raise NotImplementedError("keep_split is only callable from numba kernels")


@jit_overload(keep_split)
def _keep_split(weights, node, is_split):
    if isinstance(weights, types.Array):
        return lambda weights, node, is_split: weights

    def sparse(weights, node, is_split):
        row, indptr, index, value = weights
        k = indptr[node]
        if is_split:
            count = 0
            for j in range(row.shape[0]):
                count += row[j] != 0.0
            if k + count > index.shape[0]:
                cap = max(index.shape[0] + index.shape[0] // 2, k + count)
                index = grow_capacity(index, cap, 0)
                value = grow_capacity(value, cap, 0.0)
            for j in range(row.shape[0]):
                if row[j] != 0.0:
                    index[k] = j
                    value[k] = row[j]
                    k += 1
        indptr[node + 1] = k
        return row, indptr, index, value

    return sparse


def grow_weights(weights, capacity):
    """The weights with room for ``capacity`` nodes (numba only)."""
    raise NotImplementedError("grow_weights is only callable from numba kernels")


@jit_overload(grow_weights)
def _grow_weights(weights, capacity):
    if isinstance(weights, types.Array):
        return lambda weights, capacity: grow_capacity(weights, capacity, 0.0)

    def sparse(weights, capacity):
        row, indptr, index, value = weights
        return row, grow_capacity(indptr, capacity + 1, 0), index, value

    return sparse


def finished_weights(weights, n_nodes):
    """The weights of the first ``n_nodes`` nodes, as :func:`grow_tree` returns them (numba only).

    Dense: a view of the table's first rows. CSR: ``(indptr, index, value)``,
    views of the stored weights.
    """
    raise NotImplementedError("finished_weights is only callable from numba kernels")


@jit_overload(finished_weights)
def _finished_weights(weights, n_nodes):
    if isinstance(weights, types.Array):
        return lambda weights, n_nodes: weights[:n_nodes]

    def sparse(weights, n_nodes):
        _, indptr, index, value = weights
        n_weights = indptr[n_nodes]
        return indptr[: n_nodes + 1], index[:n_weights], value[:n_weights]

    return sparse


def order_tree(cst, children_left, children_right, weights, value, n_node_samples):
    """Order a grown tree's leaf values by its constrained splits (numba only).

    :func:`~obliquetrees.co2._monotone.order_leaves` of the splits whose
    weights (:func:`finished_weights`) weigh an input ``cst`` constrains;
    nothing when ``cst`` is None.
    """
    raise NotImplementedError("order_tree is only callable from numba kernels")


@jit_overload(order_tree)
def _order_tree(cst, children_left, children_right, weights, value, n_node_samples):
    if free_type(cst):
        return lambda cst, children_left, children_right, weights, value, n_node_samples: None

    def order(cst, children_left, children_right, weights, value, n_node_samples):
        constrained = np.zeros(children_left.shape[0], dtype=np.bool_)
        for node in range(children_left.shape[0]):
            if children_left[node] >= 0:
                lo, hi = node_weights(weights, node)
                for t in range(lo, hi):
                    j, w = node_weight(weights, node, t)
                    constrained[node] |= w != 0.0 and cst[j] != 0
        order_leaves(constrained, children_left, children_right, value, n_node_samples)

    return order


@jit
def grow_tree(
    source, y, row_weight, rows, n_features, tree_seed, n_classes, params, capacity, oob, cst=None,
    column_order=None,
):  # fmt: skip
    """Grow one CO2 tree breadth-first on the rows ``rows`` of ``source``, in one kernel.

    ``y`` holds class indices (1-D int64; ``n_classes`` of them) or targets
    (2-D float64; ``n_classes`` is then the number of outputs): every kernel
    picks its leaf model from ``y``'s type (:mod:`obliquetrees._training.targets`).
    ``source`` is ``(X, mean, scale)``, ``X`` standardised as its rows are read
    (:func:`~obliquetrees.co2._node.dense_source`), or the CSR triple of
    ``X / scale`` (see :mod:`obliquetrees.co2._sparse_kernels`).
    The shared grower's mechanics (:mod:`obliquetrees._training.grower`:
    ``may_split``, ``link_children``, ``grow_capacity``) in a numba loop, so
    the per-node work (one split kernel) pays no Python call. Node ids
    are assigned in creation order, so increasing ids are a breadth-first
    sweep; nodes the limits keep as leaves get their leaf value. A split
    whose weighted impurity decrease
    (:func:`~obliquetrees._training.targets.impurity_decrease`: entropy
    in bits, or the variance of the targets) falls short of
    ``params.min_impurity_decrease`` (up to scikit-learn's
    ``EPSILON``) is undone: the node stays a leaf with its distribution, and
    the test is skipped when the parameter is 0 (every split kept). Returns
    the arrays of :func:`obliquetrees.co2.training.grow_tree`.

    The node table starts with room for ``capacity`` nodes (at least
    ``INITIAL_CAPACITY``) and grows by half when full: a good first guess
    (the size of the forest's trees grown so far) spares the table its
    reallocations and most of its unused rows, which are most of a growing
    tree's memory on dense input (one row of ``n_features`` weights per
    node; on CSR input the weights are stored sparse, see the module
    docstring). The capacity changes no result.

    ``oob`` holds the tree's out-of-bag rows and their slices
    (:mod:`obliquetrees.co2._oob`): each node's are handed to its split
    kernel, and partitioned into its children's by the split it keeps.

    ``cst`` holds the monotonic constraint of each input (int8; None: an
    unconstrained fit, grown as before the parameter existed). The split
    kernels then keep each split compatible with it
    (:mod:`obliquetrees.co2._monotone`), a split that weighs a constrained
    input with its sides' values out of order is undone (the node stays a
    leaf), and the grown tree's leaf values are made to keep every
    constrained split's order (:func:`order_tree`).

    ``column_order`` (:func:`obliquetrees.co2.training.column_order` of the
    input; None: none) gives the split kernels the tree's rows in order of
    every feature (:func:`presorted_rows`), partitioned with ``rows`` at
    every kept split (:func:`partition_presorted`), so that the axis-aligned
    searches read each node's order instead of sorting its values.
    """
    cap = max(capacity, INITIAL_CAPACITY)
    children_left = np.full(cap, -1, dtype=np.int64)
    children_right = np.full(cap, -1, dtype=np.int64)
    depth = np.zeros(cap, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    weights = new_weights(source, cap, n_features)
    bias = np.zeros(cap)
    value = np.zeros((cap, n_classes))
    n_node_samples = np.zeros(cap)
    stats = np.zeros(3, dtype=np.int64)
    end[0] = rows.shape[0]
    oob = grow_oob(oob, cap)
    presorted = presorted_rows(column_order, rows)
    n_nodes = 1
    n_leaves = 1
    node = 0
    while node < n_nodes:  # node ids in creation order: breadth first
        if not may_split(depth[node], n_leaves, params.max_depth, params.max_leaf_nodes):
            node_value(y, row_weight, rows, start[node], end[node], node, value, n_node_samples)
            weights = keep_split(weights, node, False)
            node += 1
            continue
        data = (source, y, row_weight, rows, node_oob(oob, node))
        table = (split_weights(weights), bias, value, n_node_samples)
        n_left, n_iter, oblique = split_any(
            data, start[node], end[node], node, tree_seed, table, params, cst, presorted
        )
        if n_left >= 0:
            middle = start[node] + n_left
            keep = keeps_order(
                cst, y, row_weight, rows, start[node], middle, end[node],
                node_split_weights(weights, node),
            )  # fmt: skip
            if keep and params.min_impurity_decrease > 0.0:
                # the split as stored (optimised or axis-aligned fallback) on the rows it
                # partitioned; node 0 is the first node split, so its weight is known
                decrease = impurity_decrease(
                    y, row_weight, rows, start[node], middle, end[node], n_classes,
                    n_node_samples[0],
                )  # fmt: skip
                keep = not decrease + EPSILON < params.min_impurity_decrease
            if not keep:
                stats[0] += n_iter  # the CCCP iterations were run all the same
                clear_split(weights, node)
                bias[node] = 0.0
                n_left = -1  # a leaf with the distribution split_any wrote
        if n_left >= 0:
            stats[0] += n_iter
            stats[1 if oblique else 2] += 1
            if n_nodes + 2 > cap:
                # by half, not doubling: the spare rows and the old table held during
                # the copy cost memory (the copying itself is cheap)
                cap += cap // 2
                children_left = grow_capacity(children_left, cap, -1)
                children_right = grow_capacity(children_right, cap, -1)
                depth = grow_capacity(depth, cap, 0)
                start = grow_capacity(start, cap, 0)
                end = grow_capacity(end, cap, 0)
                weights = grow_weights(weights, cap)
                bias = grow_capacity(bias, cap, 0.0)
                value = grow_capacity(value, cap, 0.0)
                n_node_samples = grow_capacity(n_node_samples, cap, 0.0)
                oob = grow_oob(oob, cap)
            split_oob(oob, source, node_split_weights(weights, node), bias[node], node, n_nodes)
            partition_presorted(presorted, rows, start[node], start[node] + n_left, end[node])
            link_children(children_left, children_right, depth, start, end, node, n_nodes, n_left)
            n_nodes += 2
            n_leaves += 1
        weights = keep_split(weights, node, n_left >= 0)
        node += 1
    order_tree(
        cst, children_left[:n_nodes], children_right[:n_nodes],
        finished_weights(weights, n_nodes), value, n_node_samples,
    )  # fmt: skip
    # the split weights stay a view of the growth table: :func:`fold_split_weights` reads
    # them once into the stored CSR, so a trimmed dense copy would only add to the peak
    return (
        children_left[:n_nodes].copy(),
        children_right[:n_nodes].copy(),
        finished_weights(weights, n_nodes),
        bias[:n_nodes].copy(),
        value[:n_nodes].copy(),
        n_node_samples[:n_nodes].copy(),
        depth[:n_nodes].copy(),
        stats,
    )


@jit_inline
def _folded_weight(w, j, mean, scale):
    """A weight ``w`` on feature ``j`` in raw units: ``(value, centre, negative_zero, finite)``.

    ``value = w / scale[j]``, ``centre = value * mean[j]`` (its share of the
    bias shift); ``negative_zero`` when the centre is -0.0 (the missing-value
    term ``0.0 + centre`` is then not the compact product); ``finite`` when
    the value and the term are.
    """
    v = w / scale[j]
    centre = v * mean[j]
    negative_zero = centre == 0.0 and math.copysign(1.0, centre) < 0.0
    return v, centre, negative_zero, np.isfinite(v) and np.isfinite(0.0 + centre)


def node_weights(weights, node):
    """``(lo, hi)``: the positions :func:`node_weight` reads ``node``'s weights at (numba only).

    Dense table: ``0..n_features``; CSR of :func:`finished_weights`: the
    node's stored entries.
    """
    raise NotImplementedError("node_weights is only callable from numba kernels")


@jit_overload(node_weights, inline="always")
def _node_weights(weights, node):
    if isinstance(weights, types.Array):
        return lambda weights, node: (0, weights.shape[1])
    return lambda weights, node: (weights[0][node], weights[0][node + 1])


def node_weight(weights, node, t):
    """``(feature, weight)`` at position ``t`` of ``node``'s weights (numba only)."""
    raise NotImplementedError("node_weight is only callable from numba kernels")


@jit_overload(node_weight, inline="always")
def _node_weight(weights, node, t):
    if isinstance(weights, types.Array):
        return lambda weights, node, t: (t, weights[node, t])
    return lambda weights, node, t: (weights[1][t], weights[2][t])


@jit
def fold_split_weights(children_left, weights, bias, mean, scale):
    """The stored CSR of a grown tree's split weights, folded into raw input units.

    One pass over the weights of :func:`grow_tree` (the dense table, or the
    CSR it keeps for sparse input, which holds the table's nonzero entries in
    the same order), with the bits of
    ``fold_standardization(ObliqueTree.from_dense(...), mean, scale)``
    (:func:`obliquetrees._core.tree.fold_standardization`) but none of its
    per-weight temporaries: a weight is stored iff it is nonzero, on a split
    node and on a feature of finite ``scale``; its value is ``w / scale[j]``;
    a split's bias becomes ``bias - sum(value * mean[j])`` (summed in storage
    order from 0.0, as ``np.bincount``), a leaf's 0.0.

    Returns
    -------
    indptr : ndarray of int64, shape (n_nodes + 1,)
    index : ndarray of int32, shape (n_weights,)
    value : ndarray of float64, shape (n_weights,)
    folded_bias : ndarray of float64, shape (n_nodes,)
    compact : bool
        Whether the missing-value terms ``0.0 + value * mean[index]`` equal
        ``value * mean[index]`` bit for bit (no product is -0.0), i.e. are
        stored as ``missing_fill = mean``.
    finite : bool
        Whether every value, folded bias and term is finite.
    """
    n_nodes = children_left.shape[0]
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    for i in range(n_nodes):
        count = 0
        if children_left[i] != -1:
            lo, hi = node_weights(weights, i)
            for t in range(lo, hi):
                j, w = node_weight(weights, i, t)
                if w != 0.0 and np.isfinite(scale[j]):
                    count += 1
        indptr[i + 1] = indptr[i] + count
    index = np.empty(indptr[n_nodes], dtype=np.int32)
    value = np.empty(indptr[n_nodes])
    folded_bias = np.zeros(n_nodes)
    compact = True
    finite = True
    k = 0
    for i in range(n_nodes):
        if children_left[i] == -1:
            continue
        shift = 0.0
        lo, hi = node_weights(weights, i)
        for t in range(lo, hi):
            j, w = node_weight(weights, i, t)
            if w != 0.0 and np.isfinite(scale[j]):
                v, centre, negative_zero, ok = _folded_weight(w, j, mean, scale)
                shift += centre
                index[k] = j
                value[k] = v
                k += 1
                compact = compact and not negative_zero
                finite = finite and ok
        folded_bias[i] = bias[i] - shift
        finite = finite and np.isfinite(folded_bias[i])
    return indptr, index, value, folded_bias, compact, finite
