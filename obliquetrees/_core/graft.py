"""Grafted trees: one stored tree that predicts the sum of two trees.

:func:`graft_sum` hangs a copy of a tree ``F`` under every leaf of a tree
``T`` (a constrained tree and its tree of the free inputs:
:func:`obliquetrees.e2edt.training._with_free_tree`,
:func:`obliquetrees.soft.training._with_free_tree`), so every consumer of
an ordinary tree (hard and soft prediction, ``apply``, quantiles, ONNX,
pickles) serves the sum. Soft prediction of the stored tree visits every
node of every copy, ``n_leaves(T)`` times ``F``'s nodes; :func:`split_graft`
recognises the layout from the tree's arrays alone and
:func:`graft_soft_predict` evaluates ``T`` and ``F`` once each instead.
"""

import numpy as np

from obliquetrees._core.soft import path_probabilities
from obliquetrees._core.tree import ObliqueTree

#: Rows per block of :func:`graft_soft_predict` (two path-probability matrices,
#: rows x nodes, per block).
GRAFT_BLOCK_ROWS = 1 << 12


def graft_sum(tree, steepness, other, other_steepness):
    """One tree whose prediction is ``tree``'s plus ``other``'s, under hard and soft routing.

    Under every leaf ``l`` of ``tree`` (value ``v_l``) hangs a copy of
    ``other`` whose leaf values are shifted by ``v_l``; the copy's splits
    keep ``other``'s weights and steepness. A row's path to a grafted leaf
    ``(l, k)`` is its path to ``l`` followed by its path to ``other``'s leaf
    ``k``, so hard routing reaches ``v_l + u_k``, and under soft routing its
    probability is ``p_l q_k``; both trees' leaf probabilities sum to 1, so
    the soft prediction is ``sum_l p_l v_l + sum_k q_k u_k``, exactly up to
    rounding. Leaves multiply: ``tree.n_leaves * other.n_leaves``.

    Node ids: ``tree``'s keep theirs (leaf ``l`` becomes its copy's root);
    the copy under the ``b``-th leaf holds ``other``'s nodes ``1..`` as the
    block starting at ``tree.node_count + b * (other.node_count - 1)``, so
    parents still come before their children. Internal values and
    ``n_node_samples`` are copied (a copy's nodes take ``other``'s);
    :func:`~obliquetrees.e2edt.training._with_training_statistics` and
    :func:`~obliquetrees.soft.training.to_container` recompute them from
    training rows.

    Returns
    -------
    grafted : ObliqueTree
    grafted_steepness : ndarray (n_nodes,)
    """
    n_tree, n_other = tree.node_count, other.node_count
    leaves = np.flatnonzero(tree.children_left < 0)
    n_nodes = n_tree + leaves.shape[0] * (n_other - 1)
    # ids[b, k]: the id of other's node k in the copy under the b-th leaf
    ids = np.empty((leaves.shape[0], n_other), dtype=np.int64)
    ids[:, 0] = leaves
    ids[:, 1:] = (
        n_tree + (n_other - 1) * np.arange(leaves.shape[0])[:, None] + np.arange(n_other - 1)
    )

    def copies(per_node, of_tree):
        """``of_tree``'s rows, then ``per_node`` (``other``'s nodes, or (copy, node)) at ``ids``."""
        of_tree = np.asarray(of_tree)
        out = np.empty((n_nodes,) + of_tree.shape[1:], dtype=of_tree.dtype)
        out[:n_tree] = of_tree
        out[ids] = per_node
        return out

    left, right = (
        copies(np.where(child >= 0, ids[:, np.maximum(child, 0)], -1), of_tree)
        for child, of_tree in (
            (other.children_left, tree.children_left),
            (other.children_right, tree.children_right),
        )
    )
    value = copies(other.value, tree.value)
    value[ids] += tree.value[leaves][:, None, :]
    # the CSR weights: every node's entries in its own order, nodes by id
    tree_counts, other_counts = tree.weight_counts(), other.weight_counts()
    counts = copies(other_counts, tree_counts)
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    owner = np.concatenate(
        [
            np.repeat(np.arange(n_tree), tree_counts),
            ids[:, np.repeat(np.arange(n_other), other_counts)].ravel(),
        ]
    )
    order = np.argsort(owner, kind="stable")

    def entries(a, b):
        return np.concatenate([a, np.tile(b, leaves.shape[0])])[order]

    grafted = ObliqueTree(
        left,
        right,
        indptr,
        entries(tree.weight_index, other.weight_index),
        entries(tree.weight_value, other.weight_value),
        copies(other.bias, tree.bias),
        value,
        copies(other.n_node_samples, tree.n_node_samples),
        n_features=tree.n_features,
        weight_missing=entries(tree.weight_missing, other.weight_missing),
    )
    return grafted, copies(other_steepness, np.asarray(steepness, dtype=np.float64))


def split_graft(tree, steepness):
    """``T`` and ``F`` of a tree laid out as :func:`graft_sum` lays it out, or None.

    The layout is recognised from the arrays alone, then verified: nodes
    ``0 .. n_T - 1`` are ``T``'s, every one internal (``T``'s ``L`` leaves
    are the copies' roots, the only nodes below ``n_T`` whose children are
    not), and the nodes from ``n_T`` on are ``L`` blocks of ``s`` nodes, the
    ``b``-th the copy under the ``b``-th root. So ``N = n_T + L s`` with
    ``n_T = 2 L - 1``, which leaves few candidates ``L``. A candidate is
    accepted only if every copy has the same children (relative to its
    block), weights, missing-value terms, bias and steepness as the first:
    then the path probability of leaf ``k`` of copy ``b`` is ``p_b q_k`` for
    any leaf values, ``p_b`` the probability of reaching root ``b`` (a leaf
    of ``T``) and ``q_k`` that of ``F``'s leaf ``k``. Any tree that passes
    is evaluated exactly by :func:`graft_soft_predict`, however it was made.

    Returns
    -------
    None, or a tuple ``(T, T_steepness, roots, F, F_steepness, F_leaves, leaf_ids)``:
    the trees as :class:`~obliquetrees._core.tree.ObliqueTree` (leaf values
    unused), ``roots`` the copies' roots (``T``'s leaves, in the order of
    ``leaf_ids``' rows), ``F_leaves`` ``F``'s leaves (its columns),
    ``leaf_ids`` of shape (L, n_leaves(F)): the stored tree's node holding
    leaf ``F_leaves[k]`` of the copy under ``roots[b]``.
    """
    left, bias = tree.children_left, tree.bias
    steep = np.asarray(steepness, dtype=np.float64)
    first_leaf = int(np.argmax(left < 0))  # T's nodes are all internal
    n_roots = np.arange(2, (first_leaf + 1) // 2 + 1)
    block, rest = np.divmod(tree.node_count - (2 * n_roots - 1), n_roots)
    possible = (rest == 0) & (block >= 2)
    for n, s in zip(n_roots[possible].tolist(), block[possible].tolist(), strict=True):
        # the first node of the first two copies (F's node 1 twice): a test in constant
        # time that rejects an ordinary tree before the full verification
        a, b = 2 * n - 1, 2 * n - 1 + s
        if bias[a] != bias[b] or steep[a] != steep[b]:
            continue
        if (left[a] < 0) != (left[b] < 0) or (left[a] >= 0 and left[a] - a != left[b] - b):
            continue
        parts = _verified_graft(tree, steep, 2 * n - 1, n, s)
        if parts is not None:
            return parts
    return None


def _verified_graft(tree, steep, n_tree, n_roots, block):
    """:func:`split_graft`'s parts for one candidate layout (``steep`` the float64
    steepness), or None if it does not hold."""
    left, right = tree.children_left, tree.children_right
    roots = np.flatnonzero(left[:n_tree] >= n_tree)
    if roots.shape[0] != n_roots or (right[roots] < n_tree).any():
        return None
    inner = np.setdiff1d(np.arange(n_tree), roots, assume_unique=True)
    if (left[inner] >= n_tree).any() or (right[inner] >= n_tree).any():
        return None
    # ids[b, k]: node k of the copy under roots[b] (k = 0: the root itself)
    base = n_tree + block * np.arange(n_roots)[:, None]
    ids = np.empty((n_roots, block + 1), dtype=np.int64)
    ids[:, 0] = roots
    ids[:, 1:] = base + np.arange(block)
    local = []
    for child in (left, right):  # children relative to their block, -1 at leaves
        c = child[ids]
        mapped = np.where(c >= 0, c - base + 1, -1)
        if ((c >= 0) & ((mapped < 1) | (mapped > block))).any():
            return None
        if (mapped != mapped[0]).any():
            return None
        local.append(mapped[0])
    all_counts = tree.weight_counts()
    counts = all_counts[ids]
    if (tree.bias[ids] != tree.bias[ids[0]]).any() or (steep[ids] != steep[ids[0]]).any():
        return None
    if (counts != counts[0]).any():
        return None
    # every copy's weight entries in node order: its nodes' starts plus the offsets
    node_of_entry = np.repeat(np.arange(block + 1), counts[0])
    first_entry = np.cumsum(counts[0]) - counts[0]
    offset = np.arange(node_of_entry.shape[0]) - first_entry[node_of_entry]
    positions = tree.weight_indptr[ids][:, node_of_entry] + offset
    # read once: an implicit index and compact missing terms are built on each access
    index, value, missing = tree.weight_index, tree.weight_value, tree.weight_missing
    for array in (index, value, missing):
        entries = array[positions]
        if (entries != entries[0]).any():
            return None
    f_indptr = np.concatenate([[0], np.cumsum(counts[0])])
    free = ObliqueTree(
        local[0],
        local[1],
        f_indptr,
        index[positions[0]],
        value[positions[0]],
        tree.bias[ids[0]],
        np.zeros((block + 1, 1)),
        np.zeros(block + 1),
        n_features=tree.n_features,
        weight_missing=missing[positions[0]],
    )
    t_counts = all_counts[:n_tree].copy()
    t_counts[roots] = 0
    kept = np.repeat(t_counts > 0, all_counts[:n_tree])
    end = tree.weight_indptr[n_tree]
    t_left, t_right = left[:n_tree].copy(), right[:n_tree].copy()
    t_left[roots] = t_right[roots] = -1
    t_bias = tree.bias[:n_tree].copy()
    t_bias[roots] = 0.0
    constrained = ObliqueTree(
        t_left,
        t_right,
        np.concatenate([[0], np.cumsum(t_counts)]),
        index[:end][kept],
        value[:end][kept],
        t_bias,
        np.zeros((n_tree, 1)),
        np.zeros(n_tree),
        n_features=tree.n_features,
        weight_missing=missing[:end][kept],
    )
    f_leaves = np.flatnonzero(local[0] < 0)
    t_steep = steep[:n_tree].copy()
    t_steep[roots] = 0.0
    return constrained, t_steep, roots, free, steep[ids[0]], f_leaves, ids[:, f_leaves]


def graft_soft_predict(parts, X, leaf_value):
    """Soft output of a grafted tree from its parts (:func:`split_graft`), shape (n, n_outputs).

    ``sum_b sum_k p_b q_k v_bk``, ``v`` the rows of ``leaf_value`` (one per
    node of the stored tree, as :func:`~obliquetrees._core.soft.soft_predict`
    takes them) at the grafted leaves: ``T`` and ``F`` each evaluated once per row
    (:func:`~obliquetrees._core.soft.path_probabilities`), blocks of
    :data:`GRAFT_BLOCK_ROWS` rows. Equal to the soft prediction of the whole
    tree up to rounding (``p_b q_k`` against ``exp(log p_b + log q_k)`` and
    another order of the sums), not bit for bit.
    """
    constrained, t_steep, roots, free, f_steep, f_leaves, leaf_ids = parts
    values = np.asarray(leaf_value, dtype=np.float64)[leaf_ids]
    n = X.shape[0]
    out = np.empty((n, values.shape[2]))
    for start in range(0, n, GRAFT_BLOCK_ROWS):
        rows = slice(start, min(start + GRAFT_BLOCK_ROWS, n))
        p = path_probabilities(constrained, X[rows], t_steep)[:, roots]
        q = path_probabilities(free, X[rows], f_steep)[:, f_leaves]
        for o in range(values.shape[2]):
            out[rows, o] = ((p @ values[:, :, o]) * q).sum(axis=1)
    return out
