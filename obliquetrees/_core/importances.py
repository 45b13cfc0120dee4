"""Impurity-based feature importances of oblique trees (numpy only).

Each split's weighted impurity decrease, shared among its features in
proportion to ``|w_j| * std(x_j)``, normalised per tree and averaged over the
trees; the full definition is in :mod:`obliquetrees.inspection`. Every
estimator's ``feature_importances_`` is this function of its packed forest.
"""

import numpy as np

from obliquetrees._core.forest import ObliqueForest


def feature_importances(trees, feature_std=None):
    """Impurity-based feature importances of trees (definition: :mod:`obliquetrees.inspection`).

    Parameters
    ----------
    trees : ObliqueForest or list of ObliqueTree
        The trees; all share ``n_features``.
    feature_std : ndarray of shape (n_features,) or None
        Training standard deviation of every feature; None weighs the
        features of a split by ``|w_j|`` alone.

    Returns
    -------
    importances : ndarray of float64, shape (n_features,)
        Non-negative, summing to 1 (all zeros when no tree has a split with a
        positive impurity decrease).
    """
    forest = trees if isinstance(trees, ObliqueForest) else ObliqueForest.from_trees(trees)
    n_features = forest.n_features
    n_trees = forest.n_trees
    node_offset = forest.node_offset
    n_nodes = forest.children_left.shape[0]
    tree_of_node = np.repeat(np.arange(n_trees), np.diff(node_offset))
    internal = forest.children_left != -1
    # global child ids (children are stored local to each tree)
    left = np.where(internal, forest.children_left + node_offset[tree_of_node], -1)
    right = np.where(internal, forest.children_right + node_offset[tree_of_node], -1)

    # N and S = N * value summed from the leaves up, one depth level at a time
    N = np.where(internal, 0.0, np.maximum(forest.n_node_samples, 0.0))
    S = np.where(internal[:, None], 0.0, forest.value * N[:, None])
    depth = forest.depth
    for d in range(int(depth.max()) - 1, -1, -1) if n_nodes else ():
        nodes = np.flatnonzero(internal & (depth == d))
        N[nodes] = N[left[nodes]] + N[right[nodes]]
        S[nodes] = S[left[nodes]] + S[right[nodes]]

    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(N > 0, np.einsum("ij,ij->i", S, S) / N, 0.0)  # |S|^2 / N
    decrease = np.zeros(n_nodes)
    idx = np.flatnonzero(internal)
    decrease[idx] = q[left[idx]] + q[right[idx]] - q[idx]
    # rounding can make a zero decrease slightly negative
    decrease = np.maximum(decrease, 0.0)

    # share each node's decrease among its features by |w_j| * std_j
    pointer_rows = np.arange(n_nodes) + tree_of_node  # one extra pointer per tree
    counts = np.diff(forest.weight_indptr)[pointer_rows]
    row = np.repeat(np.arange(n_nodes), counts)
    feature = forest.weight_index
    weight = np.abs(forest.weight_value)
    if feature_std is None:
        contrib = weight
    else:
        contrib = weight * np.asarray(feature_std, dtype=np.float64)[feature]
        total = np.bincount(row, weights=contrib, minlength=n_nodes)
        # a split whose features all had zero spread: fall back to |w_j|
        zero = total[row] <= 0
        contrib = np.where(zero, weight, contrib)
    total = np.bincount(row, weights=contrib, minlength=n_nodes)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(total[row] > 0, contrib / total[row], 0.0)
    per_tree = np.bincount(
        tree_of_node[row] * n_features + feature,
        weights=decrease[row] * share,
        minlength=n_trees * n_features,
    ).reshape(n_trees, n_features)

    tree_total = per_tree.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_tree = np.where(tree_total > 0, per_tree / tree_total, 0.0)
    has_split = np.bincount(tree_of_node, weights=internal, minlength=n_trees) > 0
    if not has_split.any():
        return np.zeros(n_features)
    importances = per_tree[has_split].mean(axis=0)
    total = importances.sum()
    return importances / total if total > 0 else np.zeros(n_features)
