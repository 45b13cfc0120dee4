"""Plain-numpy references for every kernel of the package.

Slow and obviously correct: each kernel is tested against the function of the
same name here. Floating-point sums run in the same order as the kernels, so
results are expected to be bit-identical unless a test says otherwise.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core.tree import ObliqueTree

# ---- trees for tests ----


def random_tree(rng, n_features, n_outputs=1, max_depth=6, density=0.5, split_prob=0.8):
    """A random valid ObliqueTree (breadth-first ids, sparse random splits)."""
    left, right, depth = [-1], [-1], [0]
    frontier = [0]
    while frontier:
        node = frontier.pop(0)
        if depth[node] < max_depth and rng.random() < split_prob:
            left[node], right[node] = len(left), len(left) + 1
            for _ in range(2):
                left.append(-1)
                right.append(-1)
                depth.append(depth[node] + 1)
                frontier.append(len(left) - 1)
    n_nodes = len(left)
    internal = np.asarray(left) != -1
    mask = rng.random((n_nodes, n_features)) < density
    weights = np.where(mask & internal[:, None], rng.normal(size=(n_nodes, n_features)), 0.0)
    bias = np.where(internal, rng.normal(size=n_nodes), 0.0)
    value = rng.random((n_nodes, n_outputs))
    return ObliqueTree.from_dense(
        left, right, weights, bias, value, rng.integers(1, 100, n_nodes), depth=depth
    )


# ---- traversal ----


def _dense_rows(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def walk(tree, x):
    """Node ids visited by row ``x`` (root first), with the kernels' sum order."""
    path = [0]
    node = 0
    while tree.children_left[node] != -1:
        s = 0.0
        for k in range(tree.weight_indptr[node], tree.weight_indptr[node + 1]):
            s += float(tree.weight_value[k]) * float(x[tree.weight_index[k]])
        node = tree.children_right[node] if s + tree.bias[node] > 0.0 else tree.children_left[node]
        path.append(node)
    return path


def apply(trees, X):
    """Leaf id of every row in every tree, shape (n_samples, n_trees)."""
    X = _dense_rows(X)
    return np.array([[walk(t, x)[-1] for t in trees] for x in X], dtype=np.int64).reshape(
        len(X), len(trees)
    )


def predict_value(trees, X):
    """Sum over trees (in order) of the reached leaf's value."""
    X = _dense_rows(X)
    out = np.zeros((len(X), trees[0].n_outputs))
    for i, x in enumerate(X):
        for t in trees:
            out[i] += t.value[walk(t, x)[-1]]
    return out


def decision_path(trees, X):
    """Dense 0/1 indicator of visited nodes, trees' columns concatenated."""
    X = _dense_rows(X)
    offsets = np.concatenate([[0], np.cumsum([t.node_count for t in trees])])
    out = np.zeros((len(X), offsets[-1]), dtype=np.int64)
    for i, x in enumerate(X):
        for t, tree in enumerate(trees):
            out[i, offsets[t] + np.asarray(walk(tree, x))] = 1
    return out


# ---- hinge ----


def hinge_traverse(U, thr, feat, depth, is_fern):
    """Algorithm 3 for every (sample, tree), vectorised over both.

    Returns ``leaf``, ``rstar``, ``vstar`` of shape (n, M): the leaf reached,
    the signed margin of smallest |r| on the path (first one on ties) and the
    index of its decision (heap node for trees, level for ferns).
    """
    n = U.shape[0]
    M = thr.shape[0]
    trees = np.arange(M)[None, :]
    v = np.zeros((n, M), dtype=np.int64)
    leaf = np.zeros((n, M), dtype=np.int64)
    rstar = np.full((n, M), np.inf)
    vstar = np.zeros((n, M), dtype=np.int64)
    for i in range(depth):
        d = np.full((n, M), i) if is_fern else v
        f = feat[trees, d]
        r = U[np.arange(n)[:, None], f] - thr[trees, d]
        better = np.abs(r) < np.abs(rstar)
        rstar = np.where(better, r, rstar)
        vstar = np.where(better, d, vstar)
        bit = (r > 0).astype(np.int64)
        leaf = 2 * leaf + bit
        v = 2 * v + 1 + bit
    return leaf, rstar, vstar


def hinge_forward(U, thr, feat, W, depth, is_fern, head_sum=True):
    """Tree outputs: summed over trees (n, C) or one column per tree (n, M)."""
    leaf, rstar, _ = hinge_traverse(U, thr, feat, depth, is_fern)
    per_tree = np.abs(rstar)[:, :, None] * W[np.arange(W.shape[0])[None, :], leaf]
    return per_tree.sum(axis=1) if head_sum else per_tree[:, :, 0]


def hinge_backward(G, U, thr, feat, W, depth, is_fern, head_sum=True):
    """Exact gradients (eqs. 11-12) of ``sum(G * out)``.

    ``G`` is (n, C) for the summed head, (n, M) for the linear head.
    Returns dense ``gW`` (M, L, C), ``gt`` (M, NT) and ``gU`` (n, H).
    """
    n = U.shape[0]
    M = thr.shape[0]
    leaf, rstar, vstar = hinge_traverse(U, thr, feat, depth, is_fern)
    Gm = np.broadcast_to(G[:, None, :], (n, M, G.shape[1])) if head_sum else G[:, :, None]
    trees = np.broadcast_to(np.arange(M)[None, :], (n, M))
    wl = W[trees, leaf]                                   # (n, M, C)
    d = (wl * Gm).sum(axis=2)                             # (n, M)
    sg = np.sign(rstar)
    gW = np.zeros_like(W)
    np.add.at(gW, (trees, leaf), np.abs(rstar)[:, :, None] * Gm)
    gt = np.zeros_like(thr)
    np.add.at(gt, (trees, vstar), -sg * d)
    gU = np.zeros_like(U)
    rows = np.broadcast_to(np.arange(n)[:, None], (n, M))
    np.add.at(gU, (rows, feat[trees, vstar]), sg * d)
    return gW, gt, gU


def adam_step(p, m1, m2, g, t, lr, beta1=0.9, beta2=0.999, eps=1e-8, mask=None):
    """One Adam step (PyTorch form) on arrays; with ``mask`` only masked entries move."""
    m1n = beta1 * m1 + (1 - beta1) * g
    m2n = beta2 * m2 + (1 - beta2) * g * g
    pn = p - lr / (1 - beta1**t) * m1n / (np.sqrt(m2n) / np.sqrt(1 - beta2**t) + eps)
    if mask is None:
        return pn, m1n, m2n
    return np.where(mask, pn, p), np.where(mask, m1n, m1), np.where(mask, m2n, m2)


def hinge_train_step(model, Zb, Yb, lr, optimizer="adam"):
    """One training step of the summed-head classifier (softmax cross-entropy),
    written with the functions above; ``model`` is a dict of arrays (A, bn_mean,
    bn_var, thr, feat, W, depth, is_fern, t, and Adam moments ``<name>_1``,
    ``<name>_2``), updated and returned. Lazy Adam moves only the leaf rows
    and decisions that received a gradient contribution in the batch.
    """
    B = Zb.shape[0]
    sd = np.sqrt(model["bn_var"] + 1e-7)
    Hf = Zb @ model["A"].T
    U = (Hf - model["bn_mean"]) / sd
    F = hinge_forward(U, model["thr"], model["feat"], model["W"], model["depth"], model["is_fern"])
    P = np.exp(F - F.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    G = P.copy()
    G[np.arange(B), Yb] -= 1.0
    G /= B
    gW, gt, gU = hinge_backward(G, U, model["thr"], model["feat"], model["W"],
                                model["depth"], model["is_fern"])
    gA = (gU / sd).T @ Zb
    t = model["t"] + 1
    masks = {"W": None, "thr": None, "A": None}
    if optimizer == "lazy_adam":
        leaf, _, vstar = hinge_traverse(U, model["thr"], model["feat"], model["depth"], model["is_fern"])
        M = model["thr"].shape[0]
        mw = np.zeros(model["W"].shape[:2], dtype=bool)
        mw[np.arange(M)[None, :], leaf] = True
        mt = np.zeros(model["thr"].shape, dtype=bool)
        mt[np.arange(M)[None, :], vstar] = True
        masks = {"W": mw[:, :, None], "thr": mt, "A": None}
    for name, g in (("W", gW), ("thr", gt), ("A", gA)):
        model[name], model[name + "_1"], model[name + "_2"] = adam_step(
            model[name], model[name + "_1"], model[name + "_2"], g, t, lr, mask=masks[name]
        )
    model["t"] = t
    return model
