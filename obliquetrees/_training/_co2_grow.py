"""Breadth-first growth of one CO2 tree in one numba kernel, on dense or CSR input.

:func:`grow_tree` runs the shared grower's mechanics
(:mod:`obliquetrees._training.grower`) and calls one per-node kernel: the
dense :func:`~obliquetrees._training._co2_node.split_node` when the input
is the triple ``(X, mean, scale)`` of a 2-D array and its standardisation
(:func:`~obliquetrees._training._co2_node.dense_source`),
:func:`~obliquetrees._training._co2_sparse_kernels.split_node_sparse`
when it is a CSR triple ``(indptr, indices, data)``. The choice is made by
numba at compile time from the input's type (:func:`split_any`), so each
input kind has one compiled (and cached) growth kernel and the loop exists once.

Importing this module imports numba; the estimator imports it lazily.
"""

import math

import numpy as np
from numba import types

from obliquetrees._core._jit import jit, jit_overload
from obliquetrees._training._co2_node import node_value, split_node
from obliquetrees._training._co2_sparse_kernels import split_node_sparse
from obliquetrees._training._co2_targets import impurity_decrease
from obliquetrees._training.grower import (
    EPSILON,
    INITIAL_CAPACITY,
    grow_capacity,
    link_children,
    may_split,
)


def split_any(data, start, end, node, tree_seed, table, params):
    """Split one node with the kernel for ``data[0]``'s kind (numba only)."""
    raise NotImplementedError("split_any is only callable from numba kernels")


@jit_overload(split_any)
def _split_any(data, start, end, node, tree_seed, table, params):
    first = data[0].types[0]  # X (2-D) of (X, mean, scale), or the CSR's indptr (1-D)
    if isinstance(first, types.Array) and first.ndim == 2:
        return lambda data, start, end, node, tree_seed, table, params: split_node(
            data, start, end, node, tree_seed, table, params
        )
    return lambda data, start, end, node, tree_seed, table, params: split_node_sparse(
        data, start, end, node, tree_seed, table, params
    )


@jit
def grow_tree(source, y, row_weight, rows, n_features, tree_seed, n_classes, params, capacity):
    """Grow one CO2 tree breadth-first on the rows ``rows`` of ``source``, in one kernel.

    ``y`` holds class indices (1-D int64; ``n_classes`` of them) or targets
    (2-D float64; ``n_classes`` is then the number of outputs): every kernel
    picks its leaf model from ``y``'s type (:mod:`._co2_targets`).
    ``source`` is ``(X, mean, scale)``, ``X`` standardised as its rows are read
    (:func:`~obliquetrees._training._co2_node.dense_source`), or the CSR triple of
    ``X / scale`` (see :mod:`obliquetrees._training._co2_sparse_kernels`).
    The shared grower's mechanics (:mod:`obliquetrees._training.grower`:
    ``may_split``, ``link_children``, ``grow_capacity``) in a numba loop, so
    the per-node work (one split kernel) pays no Python call. Node ids
    are assigned in creation order, so increasing ids are a breadth-first
    sweep; nodes the limits keep as leaves get their leaf value. A split
    whose weighted impurity decrease
    (:func:`~obliquetrees._training._co2_targets.impurity_decrease`: entropy
    in bits, or the variance of the targets) falls short of
    ``params.min_impurity_decrease`` (up to scikit-learn's
    ``EPSILON``) is undone: the node stays a leaf with its distribution, and
    the test is skipped when the parameter is 0 (every split kept). Returns
    the arrays of :func:`obliquetrees._training.co2.grow_tree`.

    The node table starts with room for ``capacity`` nodes (at least
    ``INITIAL_CAPACITY``) and grows by half when full: a good first guess
    (the size of the forest's trees grown so far) spares the table its
    reallocations and most of its unused rows, which are most of a growing
    tree's memory (one row of ``n_features`` weights per node). The capacity
    changes no result.
    """
    cap = max(capacity, INITIAL_CAPACITY)
    children_left = np.full(cap, -1, dtype=np.int64)
    children_right = np.full(cap, -1, dtype=np.int64)
    depth = np.zeros(cap, dtype=np.int64)
    start = np.zeros(cap, dtype=np.int64)
    end = np.zeros(cap, dtype=np.int64)
    weights = np.zeros((cap, n_features))
    bias = np.zeros(cap)
    value = np.zeros((cap, n_classes))
    n_node_samples = np.zeros(cap)
    stats = np.zeros(3, dtype=np.int64)
    end[0] = rows.shape[0]
    n_nodes = 1
    n_leaves = 1
    node = 0
    while node < n_nodes:  # node ids in creation order: breadth first
        if not may_split(depth[node], n_leaves, params.max_depth, params.max_leaf_nodes):
            node_value(y, row_weight, rows, start[node], end[node], node, value, n_node_samples)
            node += 1
            continue
        data = (source, y, row_weight, rows)
        table = (weights, bias, value, n_node_samples)
        n_left, n_iter, oblique = split_any(
            data, start[node], end[node], node, tree_seed, table, params
        )
        if n_left >= 0 and params.min_impurity_decrease > 0.0:
            # the split as stored (optimised or axis-aligned fallback) on the rows it
            # partitioned; node 0 is the first node split, so its weight is known
            decrease = impurity_decrease(
                y,
                row_weight,
                rows,
                start[node],
                start[node] + n_left,
                end[node],
                n_classes,
                n_node_samples[0],
            )
            if decrease + EPSILON < params.min_impurity_decrease:
                stats[0] += n_iter  # the CCCP iterations were run all the same
                weights[node] = 0.0
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
                weights = grow_capacity(weights, cap, 0.0)
                bias = grow_capacity(bias, cap, 0.0)
                value = grow_capacity(value, cap, 0.0)
                n_node_samples = grow_capacity(n_node_samples, cap, 0.0)
            link_children(children_left, children_right, depth, start, end, node, n_nodes, n_left)
            n_nodes += 2
            n_leaves += 1
        node += 1
    # the split weights stay a view of the growth table: :func:`fold_split_weights` reads
    # them once into the stored CSR, so a trimmed dense copy would only add to the peak
    return (
        children_left[:n_nodes].copy(),
        children_right[:n_nodes].copy(),
        weights[:n_nodes],
        bias[:n_nodes].copy(),
        value[:n_nodes].copy(),
        n_node_samples[:n_nodes].copy(),
        depth[:n_nodes].copy(),
        stats,
    )


@jit
def fold_split_weights(children_left, weights, bias, mean, scale):
    """The stored CSR of a grown tree's split weights, folded into raw input units.

    One pass over the dense table of :func:`grow_tree`, with the bits of
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
    n_nodes, p = weights.shape
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    for i in range(n_nodes):
        count = 0
        if children_left[i] != -1:
            for j in range(p):
                if weights[i, j] != 0.0 and np.isfinite(scale[j]):
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
        for j in range(p):
            w = weights[i, j]
            if w != 0.0 and np.isfinite(scale[j]):
                v = w / scale[j]
                centre = v * mean[j]
                shift += centre
                index[k] = j
                value[k] = v
                k += 1
                term = 0.0 + centre  # fold_standardization's zero terms plus the centre
                if centre == 0.0 and math.copysign(1.0, centre) < 0.0:
                    compact = False  # -0.0 becomes +0.0: the terms are not the products
                finite = finite and np.isfinite(v) and np.isfinite(term)
        folded_bias[i] = bias[i] - shift
        finite = finite and np.isfinite(folded_bias[i])
    return indptr, index, value, folded_bias, compact, finite
