"""numba kernels of the decision-machine view of trees (:mod:`obliquetrees._core.machine`).

Leaf selection by template matching: given the signs of all split margins of
a batch (one BLAS product upstream), every leaf ``l`` of every tree is scored
by the logical similarity ``B_l . sgn(S x - t) / ||B_l||_1`` of Zhang's
decision machine, and the leaf scoring exactly 1 is selected (Theorem 1: it
exists and is unique). The score is an integer count, compared exactly
(``B_l . h == ||B_l||_1``), so no rounding enters the selection. A template
row stops being scored at its first mismatch: it can no longer reach 1.

Work shape: per row, a scan of the template rows of each tree (integer
reads, no gathers of ``X``). Rows are processed in fixed blocks in parallel;
each output row is written by one block, trees accumulated in tree order, so
results do not depend on the number of threads.

Also here: the margins of a CSR ``S`` (:func:`sparse_margins`,
:func:`sparse_signs`) and the relaxation's soft leaf weights
(:func:`relaxed_forward`), which fine-tuning reuses as its forward pass.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline, jit_parallel, prange

#: Rows per parallel block.
BLOCK_ROWS = 256


@jit
def _select_row(H, r, t_indptr, t_index, t_right, t_skip, leaf_offset, tree):
    """Template row (global leaf row) matched by row ``r`` of ``H`` in ``tree``.

    Leaves are stored left to right and each template root first, so the
    leaves sharing a template prefix are contiguous: when leaf ``l`` first
    disagrees with the signs at entry ``k`` (its template says left, the
    sample went right), every leaf with the same prefix disagrees too, and
    the scan jumps to ``t_skip[k]``, the first leaf of the right subtree,
    whose template agrees on the prefix and at ``k``'s node. About one check
    per level: the exact template match without scoring every leaf.
    """
    leaf = leaf_offset[tree]
    j = 0
    while True:
        start = t_indptr[leaf]
        end = t_indptr[leaf + 1]
        k = start + j
        while k < end and H[r, t_index[k]] == t_right[k]:
            k += 1
        if k == end:
            return leaf
        j = k - start
        leaf = t_skip[k]


@jit_parallel
def select_leaves(H, t_indptr, t_index, t_right, t_skip, leaf_offset, out):
    """Leaf row of every (row, tree) whose template matches the signs ``H``.

    Parameters
    ----------
    H : bool array (n, n_splits)
        ``sgn`` of the margins as ``margin > 0`` (True: right; ties and NaN
        go left).
    t_indptr, t_index, t_right : template matrix ``B`` in CSR (int64, int64,
        bool ``B == +1``)
        One row per leaf (trees in order, leaves left to right), entries
        root first; columns = split columns.
    t_skip : int64 (nnz,)
        Leaf row to resume at when entry ``k`` disagrees (see ``_select_row``).
    leaf_offset : int64 (n_trees + 1,)
    out : int64 (n, n_trees), filled with global leaf rows.
    """
    n = H.shape[0]
    n_trees = leaf_offset.shape[0] - 1
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    for b in prange(n_blocks):
        for r in range(b * BLOCK_ROWS, min((b + 1) * BLOCK_ROWS, n)):
            for t in range(n_trees):
                out[r, t] = _select_row(H, r, t_indptr, t_index, t_right, t_skip, leaf_offset, t)


@jit_parallel
def select_leaves_value(H, t_indptr, t_index, t_right, t_skip, leaf_offset, value, out):
    """Like :func:`select_leaves`, summing ``value[leaf]`` over the trees into ``out``.

    ``out`` (n, n_outputs) float64 must be zero on entry; trees are added in
    tree order.
    """
    n = H.shape[0]
    n_trees = leaf_offset.shape[0] - 1
    n_out = value.shape[1]
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    for b in prange(n_blocks):
        for r in range(b * BLOCK_ROWS, min((b + 1) * BLOCK_ROWS, n)):
            for t in range(n_trees):
                leaf = _select_row(H, r, t_indptr, t_index, t_right, t_skip, leaf_offset, t)
                for k in range(n_out):
                    out[r, k] += value[leaf, k]


@jit_inline
def _sparse_margin(X, r, j, s_indptr, s_index, s_value, bias):
    """Margin of split ``j`` for row ``r``: weights in storage order, then the bias.

    The traversal kernels sum in the same order, so margins are bit-identical
    to theirs.
    """
    s = 0.0
    for k in range(s_indptr[j], s_indptr[j + 1]):
        s += s_value[k] * X[r, s_index[k]]
    return s + bias[j]


@jit_parallel
def sparse_margins(X, s_indptr, s_index, s_value, bias, A):
    """``A = X S^T + b`` for CSR ``S`` (few weights per split), rows in parallel."""
    for r in prange(X.shape[0]):
        for j in range(bias.shape[0]):
            A[r, j] = _sparse_margin(X, r, j, s_indptr, s_index, s_value, bias)


@jit_parallel
def sparse_signs(X, s_indptr, s_index, s_value, bias, H):
    """``H = (X S^T + b > 0)`` for CSR ``S`` without storing the margins."""
    for r in prange(X.shape[0]):
        for j in range(bias.shape[0]):
            H[r, j] = _sparse_margin(X, r, j, s_indptr, s_index, s_value, bias) > 0.0


@jit_parallel
def relaxed_forward(Hs, t_indptr, t_index, t_value, leaf_offset, inv_temperature, E):
    """Soft leaf weights ``E = softmax_t(B~ Hs / temperature)`` for every row.

    ``Hs`` (n, n_splits) is ``sigma`` of the margins; ``t_value`` holds the
    entries of ``B~`` (the template divided by the leaf's depth). Fuses the
    sparse product and the per-tree softmax (the relaxation's forward pass).
    """
    n = Hs.shape[0]
    n_trees = leaf_offset.shape[0] - 1
    for r in prange(n):
        for t in range(n_trees):
            a = leaf_offset[t]
            b = leaf_offset[t + 1]
            zmax = -np.inf
            for leaf in range(a, b):
                z = 0.0
                for k in range(t_indptr[leaf], t_indptr[leaf + 1]):
                    z += t_value[k] * Hs[r, t_index[k]]
                z *= inv_temperature
                E[r, leaf] = z
                if z > zmax:
                    zmax = z
            total = 0.0
            for leaf in range(a, b):
                e = np.exp(E[r, leaf] - zmax)
                E[r, leaf] = e
                total += e
            for leaf in range(a, b):
                E[r, leaf] /= total
