"""numba kernels for deterministic (hard) traversal of oblique trees and forests.

One kernel family serves every estimator: a tree is routed by the sign of
``w . x + b`` (right iff > 0, ties left) over the packed arrays of an
:class:`~obliquetrees._core.forest.ObliqueForest`.

Shape of the work: a gather-and-branch walk, latency-bound, not a matrix
product. Each kernel splits the rows into blocks and runs the blocks in
parallel (``prange``); inside a block each tree is walked for every row of
the block before the next tree, so the tree's hot nodes stay in cache across
the block's rows and the block's rows stay in cache across trees (the layout
each step reads is ``ObliqueForest.routing_arrays``), four rows at a time in
lockstep so that their independent chains of loads overlap. Each output row is
written by exactly one block, with trees accumulated in tree order, so
results are bit-identical for any block size and any number of threads.

Inputs: dense float32/float64 arrays in C or F order (read-only ones too;
NaN marks a missing value, see ``ObliqueTree.weight_missing``), or scipy CSR
matrices (explicit NaN entries are missing, implicit zeros are zeros), which
are scattered block by block into a dense scratch buffer (memory
``rows_per_block * n_features``, bounded by ``CSR_BUFFER``).
The public wrappers take already validated input (estimators validate) but
check its width against the forest, which the kernels cannot.

The public functions (:func:`apply`, :func:`predict_value`,
:func:`decision_path`) take ``forest`` (an ObliqueForest), ``X`` (float32 or
float64 array of shape (n_samples, n_features), or CSR matrix) and
``n_threads`` (default 1).
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core._jit import jit, jit_inline, jit_parallel, numba_threads, prange
from obliquetrees._core.tree import missing_kernel_arrays
from obliquetrees._core.validation import check_n_features

#: Smallest number of rows per block.
BLOCK_ROWS = 64
#: Largest dense block (in bytes) a thread walks through all trees at once.
BLOCK_BYTES = 1 << 18
#: Largest dense scratch buffer (in elements) one CSR block may use.
CSR_BUFFER = 1 << 18

_OP_APPLY = 0
_OP_VALUE = 1


@jit_inline
def _margin(X, r, feature, weight, bias, n_extra, first, first_id, weights, missing, fill):
    """``w . x + b`` of a node for row ``r``, summed in storage order.

    The node's fields come as scalars, read by the caller from its
    ``ROUTING_NODE`` record: a record handed to a function, or read inside
    an inlined one, made the walk 5 times slower (numba 0.68, one
    scikit-learn tree on letter, 100k rows: 0.043 s vs 0.0067 s). A NaN
    ``x_j`` contributes the weight's missing-value term instead (``missing``
    is the forest's stored ``weight_missing``, indexed like the weights, or
    empty and ``fill`` its compact form's ``missing_fill``; the node's
    first weight sits just before ``first = extra_start[node]``, the
    feature ids of the others from ``first_id = extra_index[node]`` on).
    """
    if n_extra < 0:  # a split without weights
        return bias
    x = X[r, feature]
    s = weight * x if x == x else _missing_term(missing, fill, first - 1, weight, feature)
    index, values = weights
    for e in range(n_extra):
        k = first + e
        j = index[first_id + e]
        x = X[r, j]
        s += values[k] * x if x == x else _missing_term(missing, fill, k, values[k], j)
    return s + bias


@jit_inline
def _missing_term(missing, fill, k, weight, feature):
    """Missing-value term of weight ``k``: stored, or ``weight * fill[feature]`` (compact form).

    The compact form's product is the one the container's ``weight_missing``
    computes, so both forms give the same bits.
    """
    if missing.shape[0]:
        return missing[k]
    return weight * fill[feature]


@jit
def _walk_block(Xb, root, nodes, extra_start, extra_index, weights, missing, fill, leaves):
    """Global id of the leaf every row of ``Xb`` reaches from ``root``, into ``leaves``.

    Four rows walk in lockstep, each in its own scalar cursor: their chains
    of dependent loads are independent, so the CPU overlaps their cache
    misses. The four steps are written out: cursors kept in a small array,
    rotated through one written step, or a step factored into an inlined
    function (its array arguments are then reference-counted on every
    step) made the walk 1.3 to 25 times slower (numba 0.68, AMD EPYC). The
    last rows of a block that are fewer than four walk in the same lockstep,
    the block's last row standing in for the missing ones.
    """
    last = Xb.shape[0] - 1
    for r in range(0, last + 1, 4):
        r1, r2, r3 = min(r + 1, last), min(r + 2, last), min(r + 3, last)
        a0 = a1 = a2 = a3 = root
        moved = True
        while moved:
            moved = False
            rec = nodes[a0]
            if rec.left != -1:
                s = _margin(
                    Xb, r, rec.feature, rec.weight, rec.bias, rec.n_extra,
                    extra_start[a0], extra_index[a0], weights, missing, fill,
                )  # fmt: skip
                a0 = rec.right if s > 0.0 else rec.left
                moved = True
            rec = nodes[a1]
            if rec.left != -1:
                s = _margin(
                    Xb, r1, rec.feature, rec.weight, rec.bias, rec.n_extra,
                    extra_start[a1], extra_index[a1], weights, missing, fill,
                )  # fmt: skip
                a1 = rec.right if s > 0.0 else rec.left
                moved = True
            rec = nodes[a2]
            if rec.left != -1:
                s = _margin(
                    Xb, r2, rec.feature, rec.weight, rec.bias, rec.n_extra,
                    extra_start[a2], extra_index[a2], weights, missing, fill,
                )  # fmt: skip
                a2 = rec.right if s > 0.0 else rec.left
                moved = True
            rec = nodes[a3]
            if rec.left != -1:
                s = _margin(
                    Xb, r3, rec.feature, rec.weight, rec.bias, rec.n_extra,
                    extra_start[a3], extra_index[a3], weights, missing, fill,
                )  # fmt: skip
                a3 = rec.right if s > 0.0 else rec.left
                moved = True
        leaves[r], leaves[r1], leaves[r2], leaves[r3] = a0, a1, a2, a3


@jit
def _process_block(Xb, row0, forest, op, value, out_leaf, out_value):
    """Apply operation ``op`` to the rows ``row0 : row0 + len(Xb)``, tree by tree."""
    roots, nodes, extra_start, extra_index, weight_index, weight_value, missing, fill = forest
    weights = (weight_index, weight_value)
    n_trees = roots.shape[0] - 1
    n_rows = Xb.shape[0]
    leaves = np.empty(n_rows, dtype=np.int64)
    for t in range(n_trees):
        root = roots[t]
        _walk_block(Xb, root, nodes, extra_start, extra_index, weights, missing, fill, leaves)
        if op == _OP_APPLY:
            for r in range(n_rows):
                out_leaf[row0 + r, t] = leaves[r] - root
            continue
        for r in range(n_rows):
            leaf = leaves[r]
            i = row0 + r
            column = nodes[leaf].right
            if column >= 0:  # the leaf's one nonzero value, inline (see ROUTING_NODE)
                out_value[i, column] += nodes[leaf].weight
            else:
                row = nodes[leaf].feature  # the leaf's row in the leaf-value table
                for k in range(value.shape[1]):
                    out_value[i, k] += value[row, k]


@jit_parallel
def _traverse_dense(X, block_rows, forest, op, value, out_leaf, out_value):
    n = X.shape[0]
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        start = b * block_rows
        stop = min(start + block_rows, n)
        _process_block(X[start:stop], start, forest, op, value, out_leaf, out_value)


@jit_parallel
def _traverse_csr(
    data, indices, indptr, n_features, block_rows, forest, op, value, out_leaf, out_value
):
    n = indptr.shape[0] - 1
    n_blocks = (n + block_rows - 1) // block_rows
    for b in prange(n_blocks):
        start = b * block_rows
        stop = min(start + block_rows, n)
        buf = np.zeros((stop - start, n_features), dtype=data.dtype)
        for r in range(stop - start):
            for k in range(indptr[start + r], indptr[start + r + 1]):
                buf[r, indices[k]] += data[k]  # += sums duplicate entries, as scipy does
        _process_block(buf, start, forest, op, value, out_leaf, out_value)


@jit_parallel
def _write_paths(leaves, parent, depth, indptr, path_indices):
    """Root-to-leaf paths of the global ``leaves`` (rows x trees), tree after tree per row.

    A leaf determines its path: written from the leaf up through ``parent``,
    each path ends where the next tree's begins.
    """
    for i in prange(leaves.shape[0]):
        end = indptr[i]
        for t in range(leaves.shape[1]):
            node = leaves[i, t]
            end += depth[node] + 1
            for pos in range(end - 1, end - depth[node] - 2, -1):
                path_indices[pos] = node
                node = parent[node]


def _parents(forest):
    """Global id of every node's parent (-1 for the roots), from the routing layout."""
    nodes = forest.routing_arrays()[1]
    parent = np.full(nodes.shape[0], -1, dtype=np.int64)
    inner = np.flatnonzero(nodes["left"] != -1)
    parent[nodes["left"][inner]] = inner
    parent[nodes["right"][inner]] = inner
    return parent


def _dense_block_rows(X, n_threads):
    """Rows per block: one block per thread, capped so a block stays in L2.

    Each tree is walked for all rows of a block before the next tree, so the
    larger the block the fewer times a tree is brought into cache. Outputs
    are computed row by row, so the blocking never changes a result.
    """
    row_bytes = max(1, X.shape[1] * X.itemsize)
    cap = max(BLOCK_ROWS, BLOCK_BYTES // row_bytes)
    per_thread = -(-X.shape[0] // max(1, n_threads))
    return int(max(BLOCK_ROWS, min(per_thread, cap)))


def _run(forest, X, op, n_threads, out_leaf=None, out_value=None):
    """Run operation ``op``; the output it does not write may be left out (None)."""
    # the kernels take both output arrays: an empty one of the same type stands in
    if out_leaf is None:
        out_leaf = np.zeros((0, 0), dtype=np.int64)
    if out_value is None:
        out_value = np.zeros((0, 0), dtype=np.float64)
    check_n_features(X, forest.n_features)  # the kernels index X by stored feature ids
    roots, nodes, extra_start, extra_index, weights, leaf_value = forest.routing_arrays()
    # flat: a parallel kernel's arguments hold arrays, not tuples of tuples
    arrays = (roots, nodes, extra_start, extra_index, *weights, *missing_kernel_arrays(forest))
    outputs = (op, leaf_value, out_leaf, out_value)
    with numba_threads(n_threads):
        if sp.issparse(X):
            block_rows = int(max(1, min(BLOCK_ROWS, CSR_BUFFER // max(1, X.shape[1]))))
            csr = (X.data, X.indices, X.indptr, X.shape[1])
            _traverse_csr(*csr, block_rows, arrays, *outputs)
        else:
            _traverse_dense(X, _dense_block_rows(X, n_threads), arrays, *outputs)


def apply(forest, X, n_threads=1):
    """Leaf reached by every sample in every tree: int64 ``(n_samples, n_trees)``, local ids."""
    out_leaf = np.empty((X.shape[0], forest.n_trees), dtype=np.int64)
    _run(forest, X, _OP_APPLY, n_threads, out_leaf=out_leaf)
    return out_leaf


def predict_value(forest, X, n_threads=1, initial=None):
    """Sum over the trees of the ``value`` of the leaf each sample reaches.

    A float64 ``(n_samples, n_outputs)`` array; trees are added in tree order
    (divide by ``forest.n_trees`` for the mean), to ``initial`` (a copy of
    it) when given: the sum of the trees before them, so that a forest
    summed in consecutive parts gives the whole forest's sum bit for bit.
    """
    shape = (X.shape[0], forest.n_outputs)
    if initial is None:
        out_value = np.zeros(shape, dtype=np.float64)
    elif initial.shape != shape or initial.dtype != np.float64:
        raise ValueError(
            f"initial must be float64 of shape {shape}; got {initial.dtype} {initial.shape}."
        )
    else:
        out_value = np.array(initial, order="C")
    _run(forest, X, _OP_VALUE, n_threads, out_value=out_value)
    return out_value


def decision_path(forest, X, n_threads=1):
    """Node indicator of the root-to-leaf path of every sample in every tree.

    Returns
    -------
    indicator : scipy.sparse.csr_matrix of int64, shape (n_samples, n_nodes_total)
        Column ``forest.node_offset[t] + j`` is node ``j`` of tree ``t``, as in
        scikit-learn's forests (``n_nodes_ptr`` is ``forest.node_offset``).
    """
    leaves = apply(forest, X, n_threads) + forest.node_offset[:-1][None, :]
    depth = forest.depth.astype(np.int64, copy=False)
    indptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
    np.cumsum((depth[leaves] + 1).sum(axis=1), out=indptr[1:])
    path_indices = np.empty(indptr[-1], dtype=np.int64)
    with numba_threads(n_threads):
        _write_paths(leaves, forest.derived("parents", _parents), depth, indptr, path_indices)
    data = np.ones(path_indices.shape[0], dtype=np.int64)
    shape = (X.shape[0], int(forest.node_offset[-1]))
    return sp.csr_matrix((data, path_indices, indptr), shape=shape)
