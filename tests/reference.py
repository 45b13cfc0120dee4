"""Plain-numpy references for every kernel of the package.

Slow and obviously correct: each kernel is tested against the function of the
same name here. Floating-point sums run in the same order as the kernels, so
results are expected to be bit-identical unless a test says otherwise.
"""

import numpy as np
import scipy.sparse as sp

from obliquetrees._core.tree import ObliqueTree

# ---- trees for tests ----


def random_tree(
    rng,
    n_features,
    n_outputs=1,
    max_depth=6,
    density=0.5,
    split_prob=0.8,
    missing=False,
    value_zeros=0.0,
):
    """A random valid ObliqueTree (breadth-first ids, sparse random splits).

    With ``missing``, every stored weight gets a random missing-value term.
    ``value_zeros`` is the fraction of ``value`` entries set to zero (the
    others get a random sign): rows with one nonzero entry, as in a pure
    classifier leaf, are stored inline by the traversal's routing layout.
    """
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
    if value_zeros:
        value *= rng.choice([-1.0, 1.0], size=value.shape)
        value[rng.random(value.shape) < value_zeros] = 0.0
    counts = rng.integers(1, 100, n_nodes)
    terms = np.where(weights != 0, rng.normal(size=weights.shape), 0.0) if missing else None
    return ObliqueTree.from_dense(
        left, right, weights, bias, value, counts, depth=depth, missing=terms
    )


def margin(tree, node, x):
    """``w . x + b`` of ``node`` in storage order, a NaN ``x_j`` giving its missing term."""
    s = 0.0
    for k in range(tree.weight_indptr[node], tree.weight_indptr[node + 1]):
        xj = float(x[tree.weight_index[k]])
        s += float(tree.weight_missing[k]) if np.isnan(xj) else float(tree.weight_value[k]) * xj
    return s + tree.bias[node]


# ---- traversal ----


def _dense_rows(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def walk(tree, x):
    """Node ids visited by row ``x`` (root first), with the kernels' sum order."""
    path = [0]
    node = 0
    while tree.children_left[node] != -1:
        s = margin(tree, node, x)
        node = tree.children_right[node] if s > 0.0 else tree.children_left[node]
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
    wl = W[trees, leaf]  # (n, M, C)
    d = (wl * Gm).sum(axis=2)  # (n, M)
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
    gW, gt, gU = hinge_backward(
        G, U, model["thr"], model["feat"], model["W"], model["depth"], model["is_fern"]
    )
    gA = (gU / sd).T @ Zb
    t = model["t"] + 1
    masks = {"W": None, "thr": None, "A": None}
    if optimizer == "lazy_adam":
        leaf, _, vstar = hinge_traverse(
            U, model["thr"], model["feat"], model["depth"], model["is_fern"]
        )
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


# ---- co2 ----
# Plain-numpy references of obliquetrees/_training/axis_split.py and
# co2/_kernels.py. Vectorised where the kernel loops, so sums may differ in the
# last bits: compare with a tolerance.

_CO2_MASK = (1 << 64) - 1


class Co2Rng:
    """splitmix64 with Python integers (the kernels' generator)."""

    def __init__(self, seed):
        self.state = int(seed) & _CO2_MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & _CO2_MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _CO2_MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _CO2_MASK
        return z ^ (z >> 31)

    def integer(self, n):
        return self.next() % n


def co2_node_seed(tree_seed, node_id):
    rng = Co2Rng((int(tree_seed) * 0x100000001B3 + int(node_id)) & _CO2_MASK)
    return rng.next()


def co2_shuffle(perm, rng):
    for i in range(len(perm) - 1, 0, -1):
        j = rng.integer(i + 1)
        perm[i], perm[j] = perm[j], perm[i]


def co2_weighted_entropy(yb, wb, mask, n_classes):
    """``N_L H_L + N_R H_R`` (nats) of the partition ``mask`` (True = right)."""
    out = 0.0
    for side in (~mask, mask):
        c = np.bincount(yb[side], weights=wb[side], minlength=n_classes)
        n = c.sum()
        if n > 0:
            c = c[c > 0]
            out += n * np.log(n) - np.sum(c * np.log(c))
    return out


def co2_weighted_squared_error(yb, wb, mask):
    """Weighted sum of squared errors about each side's mean of the partition ``mask``."""
    out = 0.0
    for side in (~mask, mask):
        n = wb[side].sum()
        if n > 0:
            mean = wb[side] @ yb[side] / n
            out += np.sum(wb[side, None] * (yb[side] - mean) ** 2)
    return out


def co2_best_axis_split(Xb, yb, wb, n_classes, max_features, min_samples_leaf, rng):
    """Exhaustive search over the same random features as the kernel.

    Targets (2-D ``yb``) are split by squared error, classes by entropy.
    Returns ``(feature, threshold, impurity)``; -1 as feature if no split.
    The impurity of targets is the sum of squared errors, which the kernel
    reports minus a constant of the node.
    """
    m, p = Xb.shape
    feats = list(range(p))
    best = (-1, 0.0, np.inf)
    visited = 0
    for k in range(p):
        if visited >= max_features:
            break
        j = k + rng.integer(p - k)
        feats[k], feats[j] = feats[j], feats[k]
        f = feats[k]
        col = Xb[:, f]
        if col.max() <= col.min() + 1e-7:
            continue
        visited += 1
        v = np.sort(col)
        for t in range(m - 1):
            if v[t + 1] <= v[t] + 1e-7:
                continue
            if t + 1 < min_samples_leaf or m - t - 1 < min_samples_leaf:
                continue
            thr = 0.5 * (v[t] + v[t + 1])
            if thr >= v[t + 1] or thr < v[t]:
                thr = v[t]
            if yb.ndim == 2:
                imp = co2_weighted_squared_error(yb, wb, col > thr)
            else:
                imp = co2_weighted_entropy(yb, wb, col > thr, n_classes)
            if imp < best[2] - 1e-9 * max(1.0, abs(best[2]) if np.isfinite(best[2]) else 1.0):
                best = (f, thr, imp)
    return best


def co2_init_theta(Xb, yb, wb, feature, threshold, n_classes, prior):
    """Leaf logits: log class frequencies (plus ``prior``) on each side of a split.

    Targets (2-D ``yb``): each side's weighted mean target.
    """
    right = Xb[:, feature] > threshold
    out = []
    for side in (~right, right):
        if yb.ndim == 2:
            out.append(wb[side] @ yb[side] / wb[side].sum())
            continue
        c = np.bincount(yb[side], weights=wb[side], minlength=n_classes) + prior
        out.append(np.log(c / c.sum()))
    return out[0], out[1]


def co2_log_loss(theta, yb):
    """Leaf loss per sample: ``logsumexp(theta) - theta[y]`` for class indices,
    ``||theta - y||^2 / 2`` for 2-D targets."""
    if yb.ndim == 2:
        return 0.5 * np.sum((theta - yb) ** 2, axis=1)
    mx = theta.max()
    return mx + np.log(np.sum(np.exp(theta - mx))) - theta[yb]


def co2_leaf_gradient(theta, yb, wb):
    """Sum over the samples of the weighted gradient of :func:`co2_log_loss` in ``theta``."""
    if yb.ndim == 2:
        return wb @ (theta - yb)
    e = np.exp(theta - theta.max())
    return wb.sum() * e / e.sum() - np.bincount(yb, wb, minlength=theta.shape[0])


def co2_surrogate(Xb, yb, wb, w, b, theta0, theta1):
    """Weighted means of the surrogate (Eq. 10) and the empirical loss (Eq. 2)."""
    z = Xb @ w + b
    l0 = co2_log_loss(theta0, yb)
    l1 = co2_log_loss(theta1, yb)
    sur = np.maximum(-z + l0, z + l1) - np.abs(z)
    emp = np.where(z > 0, l1, l0)
    return np.sum(wb * sur) / wb.sum(), np.sum(wb * emp) / wb.sum()


def co2_cccp_objective(Xb, yb, wb, w, b, theta0, theta1, signs):
    """Weighted mean of the linearised CCCP objective (Eq. 11)."""
    z = Xb @ w + b
    l0 = co2_log_loss(theta0, yb)
    l1 = co2_log_loss(theta1, yb)
    return np.sum(wb * (np.maximum(-z + l0, z + l1) - signs * z)) / wb.sum()


def co2_minibatch_gradient(Xb, yb, wb, batch, w, b, theta0, theta1, signs):
    """Weighted-mean subgradient of Eq. 11 over the rows ``batch``.

    Returns ``(gw, gb, g0, g1, run, wsum)`` as the kernel does.
    """
    Xm, ym, wm, sm = Xb[batch], yb[batch], wb[batch], signs[batch]
    z = Xm @ w + b
    a0 = -z + co2_log_loss(theta0, ym)
    a1 = z + co2_log_loss(theta1, ym)
    left = a0 >= a1
    coef = np.where(left, -(1.0 + sm), 1.0 - sm)
    wsum = wm.sum()
    run = np.sum(wm * (np.maximum(a0, a1) - np.abs(z)))
    g0 = co2_leaf_gradient(theta0, ym[left], wm[left])
    g1 = co2_leaf_gradient(theta1, ym[~left], wm[~left])
    gw = (wm * coef) @ Xm
    gb = np.sum(wm * coef)
    return gw / wsum, gb / wsum, g0 / wsum, g1 / wsum, run, wsum


def co2_cccp(Xb, yb, wb, w, b, theta0, theta1, params, rng, osc_patience=2, lr_decay=0.5):
    """The kernel's CCCP in numpy. Returns ``(w, b, theta0, theta1, history)``.

    Class labels ``yb`` of between 2 and all but one of the classes: the loop
    (:func:`co2_cccp_leaves`) runs on the present classes' logits, relabelled
    by rank, and the absent classes' logits come back as ``-inf``.
    """
    present = np.unique(yb) if yb.ndim == 1 else np.empty(0)
    if not 2 <= len(present) < len(theta0):
        return co2_cccp_leaves(
            Xb, yb, wb, w, b, theta0, theta1, params, rng, osc_patience, lr_decay
        )
    w, b, t0, t1, history = co2_cccp_leaves(
        Xb, np.searchsorted(present, yb), wb, w, b, theta0[present], theta1[present], params, rng,
        osc_patience, lr_decay,
    )  # fmt: skip
    theta0, theta1 = np.full(len(theta0), -np.inf), np.full(len(theta1), -np.inf)
    theta0[present], theta1[present] = t0, t1
    return w, b, theta0, theta1, history


def co2_cccp_leaves(
    Xb,
    yb,
    wb,
    w,
    b,
    theta0,
    theta1,
    params,
    rng,
    osc_patience=2,
    lr_decay=0.5,
):
    """The kernel's CCCP loop in numpy on the leaves as given: ``(w, b, theta0, theta1, history)``.

    It stops as the kernel does: a relative gain of at most ``tol``, or a
    settled partition (a node of at least ``batch_size`` rows of which at most
    ``tol * m`` changed side in the iteration).

    ``params`` has the attributes ``nu``, ``learning_rate``, ``batch_size``,
    ``momentum``, ``cccp_epochs``, ``max_cccp_iter`` and ``tol`` (the kernel's record).
    """
    nu, learning_rate, batch_size = params.nu, params.learning_rate, params.batch_size
    momentum, tol = params.momentum, params.tol
    w, theta0, theta1 = w.copy(), theta0.copy(), theta1.copy()
    m = Xb.shape[0]

    def project(w, b):
        sq = b * b + w @ w
        if sq > nu:
            r = np.sqrt(nu / sq)
            return w * r, b * r
        return w, b

    w, b = project(w, b)
    best, _ = co2_surrogate(Xb, yb, wb, w, b, theta0, theta1)
    signs = np.where(Xb @ w + b > 0, 1.0, -1.0)
    best_params = (w.copy(), b, theta0.copy(), theta1.copy())
    history = [best]
    vw, vb = np.zeros_like(w), 0.0
    v0, v1 = np.zeros_like(theta0), np.zeros_like(theta1)
    eta, prev_run, n_up = learning_rate, np.inf, 0
    n_batches = -(-m // batch_size)
    for _ in range(params.max_cccp_iter):
        if n_batches > 1:  # new random order of the rows, cut into batches
            perm = list(range(m))
            co2_shuffle(perm, rng)
            Xb, yb, wb, signs = Xb[perm], yb[perm], wb[perm], signs[perm]
        for _ in range(params.cccp_epochs):
            order = list(range(n_batches))
            if n_batches > 1:
                co2_shuffle(order, rng)
            run = tot = 0.0
            for k in order:
                batch = np.arange(k * batch_size, min((k + 1) * batch_size, m))
                gw, gb, g0, g1, r, ws = co2_minibatch_gradient(
                    Xb, yb, wb, batch, w, b, theta0, theta1, signs
                )
                run += r
                tot += ws
                if ws <= 0:
                    continue
                vw = momentum * vw - eta * gw
                w = w + vw
                vb = momentum * vb - eta * gb
                b = b + vb
                v0 = momentum * v0 - eta * g0
                theta0 = theta0 + v0
                v1 = momentum * v1 - eta * g1
                theta1 = theta1 + v1
                w, b = project(w, b)
            if tot > 0:
                run /= tot
            if run > prev_run:
                n_up += 1
                if n_up >= osc_patience:
                    eta *= lr_decay
                    n_up = 0
            prev_run = run
        current, _ = co2_surrogate(Xb, yb, wb, w, b, theta0, theta1)
        new_signs = np.where(Xb @ w + b > 0, 1.0, -1.0)
        n_flipped = np.count_nonzero(new_signs != signs)  # rows that changed side
        signs = new_signs
        if current < best:
            gain = best - current
            best = current
            best_params = (w.copy(), b, theta0.copy(), theta1.copy())
            history.append(best)
            if gain <= tol * abs(best) or (m >= batch_size and n_flipped <= tol * m):
                break
        else:
            break
    w, b, theta0, theta1 = best_params
    return w, b, theta0, theta1, np.asarray(history)


def co2_leaf_histograms(tree_value, leaf_of_row, y, row_weight, n_classes):
    """Normalised weighted class histogram of the rows reaching each leaf."""
    out = {}
    for leaf in np.unique(leaf_of_row):
        rows = leaf_of_row == leaf
        h = np.bincount(y[rows], weights=row_weight[rows], minlength=n_classes)
        out[int(leaf)] = h / h.sum()
    return out


# ---- soft ----
# Training convention: gate g = sigmoid(W[m] . x + b[m]) is P(left) (the paper's
# eq. 3); the stored container uses P(right) = sigmoid(w . x + b).


def _soft_sigmoid(a):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(a, dtype=np.float64)))


def soft_node_response(x, children_left, children_right, W, b, Z, m=0):
    """The paper's Fig. 1: response of the subtree rooted at m, recursively."""
    if children_left[m] < 0:
        return Z[m].astype(np.float64)
    g = _soft_sigmoid(W[m] @ x + b[m])
    return g * soft_node_response(x, children_left, children_right, W, b, Z, children_left[m]) + (
        1.0 - g
    ) * soft_node_response(x, children_left, children_right, W, b, Z, children_right[m])


def soft_path_probability(x, children_left, children_right, W, b, m):
    """Product of the gates from the root to node m."""
    parent = {}
    for j in range(len(children_left)):
        if children_left[j] >= 0:
            parent[children_left[j]] = (j, True)
            parent[children_right[j]] = (j, False)
    p = 1.0
    while m != 0:
        j, is_left = parent[m]
        g = _soft_sigmoid(W[j] @ x + b[j])
        p *= g if is_left else 1.0 - g
        m = j
    return p


def soft_forward_context(X, children_left, children_right, W, b, Z, m):
    """(F, P, A) of forward_context, sample by sample."""
    n, K = X.shape[0], Z.shape[1]
    F = np.array([soft_node_response(x, children_left, children_right, W, b, Z) for x in X])
    F = F.reshape(n, K)
    if m < 0:
        return F, np.ones(n), np.zeros((n, K))
    P = np.array([soft_path_probability(x, children_left, children_right, W, b, m) for x in X])
    return F, P, F - P[:, None] * Z[m]


def soft_predict_stored(tree, X, leaf_value):
    """Soft output of a stored container (P(right) = sigmoid(w . x + b))."""
    X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    out = np.zeros((X.shape[0], leaf_value.shape[1]))
    for i, x in enumerate(X):
        stack = [(0, 1.0)]
        while stack:
            j, p = stack.pop()
            if tree.children_left[j] < 0:
                out[i] += p * leaf_value[j]
                continue
            g_right = _soft_sigmoid(margin(tree, j, x))
            stack.append((tree.children_right[j], p * g_right))
            stack.append((tree.children_left[j], p * (1.0 - g_right)))
    return out


def soft_best_axis_split(X, u, Y):
    """Brute force over every feature and midpoint: (feature, threshold, gain)."""
    n, d = X.shape
    best = (-1, 0.0, -np.inf)

    def sse(mask):
        w = u[mask]
        if w.sum() <= 0:
            return None
        mean = (w[:, None] * Y[mask]).sum(0) / w.sum()
        return float((w[:, None] * (Y[mask] - mean) ** 2).sum())

    total = sse(np.ones(n, bool))
    for f in range(d):
        values = np.unique(X[:, f])
        for lo, hi in zip(values[:-1], values[1:], strict=True):
            thr = 0.5 * (lo + hi)
            left = X[:, f] <= thr
            sl, sr = sse(left), sse(~left)
            if sl is None or sr is None:
                continue
            gain = total - sl - sr
            if gain > best[2] + 1e-12:
                best = (f, thr, gain)
    return best


def soft_loss(F, R, sw, loss):
    """Summed weighted loss: 0.5 (F - r)^2, binary or softmax cross-entropy."""
    if loss == 0:
        return float((sw[:, None] * 0.5 * (F - R) ** 2).sum())
    if loss == 1:
        f, r = F[:, 0], R[:, 0]
        return float((sw * (np.logaddexp(0.0, -f) * r + np.logaddexp(0.0, f) * (1 - r))).sum())
    lse = np.logaddexp.reduce(F, axis=1)
    return float(-(sw * (R * (F - lse[:, None])).sum(1)).sum())


def soft_split_tree_loss(X, R, sw, children_left, children_right, W, b, Z, m, w, b0, zL, zR, loss):
    """Loss of the whole tree after leaf m becomes a gate (w, b0) with leaves zL, zR."""
    n_nodes = len(children_left)
    cl = np.append(children_left, [-1, -1]).copy()
    cr = np.append(children_right, [-1, -1]).copy()
    cl[m], cr[m] = n_nodes, n_nodes + 1
    W2 = np.vstack([W, np.zeros((2, W.shape[1]))])
    W2[m] = w
    b2 = np.append(b, [0.0, 0.0])
    b2[m] = b0
    Z2 = np.vstack([Z, zL[None], zR[None]])
    F = np.array([soft_node_response(x, cl, cr, W2, b2, Z2) for x in X]).reshape(len(X), -1)
    return soft_loss(F, R, sw, loss)


def soft_tree_loss(X, R, sw, children_left, children_right, W, b, Z, loss):
    """Loss of the whole soft tree."""
    F = np.array([soft_node_response(x, children_left, children_right, W, b, Z) for x in X])
    return soft_loss(F.reshape(len(X), -1), R, sw, loss)


def soft_sgd_split_squared(
    X, R, P, A, sw, w, b0, zL, zR, lr, max_epochs, momentum, decay, state, mid_epoch=True
):
    """Online SGD of a new split under the squared loss, one sample at a time.

    The paper's Fig. 2 lines 8-22 with the authors' momentum and per-sample
    step decay; the samples are shuffled every epoch with the kernels' own
    shuffle (``state``, modified). Stops as soon as the step size falls below
    ``1e-6 * lr``, mid-epoch if need be (``mid_epoch=False``: at the end of
    that epoch, as the authors' code). Returns (w, b0, zL, zR, steps).
    """
    from obliquetrees._core._random import shuffle

    n = X.shape[0]
    w, zL, zR = w.astype(np.float64), zL.astype(np.float64), zR.astype(np.float64)
    vw, vb, vL, vR = np.zeros_like(w), 0.0, np.zeros_like(zL), np.zeros_like(zR)
    order = np.arange(n)
    eta, steps = lr, 0
    for _ in range(max_epochs):
        shuffle(order, n, state)
        for i in order:
            g = _soft_sigmoid(w @ X[i] + b0)
            F = A[i] + P[i] * (g * zL + (1.0 - g) * zR)
            delta = sw[i] * (F - R[i]) * P[i]
            ga = float(delta @ (zL - zR)) * g * (1.0 - g)
            vw = momentum * vw - eta * ga * X[i]
            vb = momentum * vb - eta * ga
            vL = momentum * vL - eta * delta * g
            vR = momentum * vR - eta * delta * (1.0 - g)
            w, b0, zL, zR = w + vw, b0 + vb, zL + vL, zR + vR
            eta *= decay
            steps += 1
            if mid_epoch and eta < lr * 1e-6:
                return w, b0, zL, zR, steps
        if eta < lr * 1e-6:
            break
    return w, b0, zL, zR, steps


def soft_random_tree(rng, n_features, n_outputs=1, n_splits=4, scale=1.0):
    """A random soft tree in the training convention (children after parents)."""
    cl, cr = [-1], [-1]
    leaves = [0]
    for _ in range(n_splits):
        m = leaves.pop(rng.integers(len(leaves)))
        cl[m], cr[m] = len(cl), len(cl) + 1
        leaves += [len(cl), len(cl) + 1]
        cl += [-1, -1]
        cr += [-1, -1]
    n = len(cl)
    W = rng.normal(size=(n, n_features)) * scale
    b = rng.normal(size=n) * scale
    internal = np.asarray(cl) >= 0
    W[~internal] = 0.0
    b[~internal] = 0.0
    Z = rng.normal(size=(n, n_outputs))
    return np.asarray(cl, np.int64), np.asarray(cr, np.int64), W, b, Z


# ---- e2edt ----


def e2edt_log_sigmoid(z):
    """``log sigma(z)`` (stable)."""
    return -np.logaddexp(0.0, -z)


def e2edt_leaf_paths(left, right):
    """For every leaf (in node order): list of (node, went_right) on its path."""
    parent = {}
    for node in range(len(left)):
        if left[node] >= 0:
            parent[left[node]] = (node, False)
            parent[right[node]] = (node, True)
    paths = []
    for node in range(len(left)):
        if left[node] < 0:
            path, cur = [], node
            while cur in parent:
                par, went_right = parent[cur]
                path.append((par, went_right))
                cur = par
            paths.append(path[::-1])
    return paths


def e2edt_log_path_probs(A, gamma, left, right, split_col):
    """``log mu_l`` (eq. 1) leaf by leaf from explicit root-to-leaf paths; A is (n, n_splits)."""
    paths = e2edt_leaf_paths(left, right)
    out = np.zeros((A.shape[0], len(paths)))
    for leaf, path in enumerate(paths):
        for node, went_right in path:
            z = gamma[split_col[node]] * A[:, split_col[node]]
            out[:, leaf] += e2edt_log_sigmoid(z if went_right else -z)
    return out


def _e2edt_normalise(terms, impossible, pi, y, sw):
    """Responsibilities, leaf statistics and weighted log-likelihood from the (n, L)
    log joint ``terms`` of each sample and leaf; ``impossible`` rows (no leaf can
    produce their label) make the log-likelihood -inf when they weigh anything."""
    from scipy.special import logsumexp

    norm = logsumexp(terms, axis=1)
    h = np.exp(terms - norm[:, None])
    counts = np.zeros(pi.shape)
    for k in range(pi.shape[1]):
        counts[:, k] = (sw[y == k, None] * h[y == k]).sum(axis=0)
    loglik = -np.inf if np.any(impossible & (sw > 0)) else float(sw @ norm)
    return h, counts, loglik


def e2edt_e_step(A, gamma, left, right, split_col, pi, y, sw):
    """Responsibilities (n, L) (eq. 10), leaf statistics (L, K), weighted log-likelihood."""

    log_mu = e2edt_log_path_probs(A, gamma, left, right, split_col)
    with np.errstate(divide="ignore"):
        terms = np.log(pi[:, y].T) + log_mu
    impossible = np.all(np.isneginf(terms), axis=1)
    terms[impossible] = log_mu[impossible]
    return _e2edt_normalise(terms, impossible, pi, y, sw)


def e2edt_pruned_e_step(X, W, b, gamma, left, right, split_col, pi, y, sw, eps):
    """E-step of pruned routing: the leaves a sample reaches through children it keeps.

    Below a kept split, a child is kept if its path probability is at least
    ``eps`` or it is the child hard routing takes (right iff ``a > 0``).
    Responsibilities (n, L) are normalised over the kept leaves (0 elsewhere);
    also the leaf statistics, the weighted log-likelihood over the kept leaves
    and the kept mask.
    """

    A = X @ W.T + b
    log_mu = e2edt_log_path_probs(A, gamma, left, right, split_col)
    kept = np.ones(log_mu.shape, dtype=bool)
    for leaf, path in enumerate(e2edt_leaf_paths(left, right)):
        prefix = np.zeros(A.shape[0])
        for node, went_right in path:
            z = gamma[split_col[node]] * A[:, split_col[node]]
            prefix = prefix + e2edt_log_sigmoid(z if went_right else -z)
            hard = (A[:, split_col[node]] > 0) == went_right
            kept[:, leaf] &= hard | (prefix >= np.log(eps))
    with np.errstate(divide="ignore"):
        terms = np.where(kept, np.log(pi[:, y].T) + log_mu, -np.inf)
    impossible = np.all(np.isneginf(terms), axis=1)
    terms[impossible] = np.where(kept, log_mu, -np.inf)[impossible]
    return (*_e2edt_normalise(terms, impossible, pi, y, sw), kept)


def e2edt_leaf_m_step(counts, pi):
    """Eq. 13 with empty leaves keeping their distribution."""
    total = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / total, pi)


def e2edt_split_objective(W, b, gamma, left, right, split_col, h, coef, X):
    """``sum_n coef_n sum_l h_{n,l} log mu_l(x_n)`` (eq. 14) for X (n, p), h (n, L)."""
    A = X @ W.T + b
    return float(coef @ (h * e2edt_log_path_probs(A, gamma, left, right, split_col)).sum(axis=1))


def e2edt_split_gradient(W, b, gamma, left, right, split_col, h, coef, X):
    """Gradient of :func:`e2edt_split_objective` from per-leaf path derivatives."""
    A = X @ W.T + b
    dA = np.zeros_like(A)
    for leaf, path in enumerate(e2edt_leaf_paths(left, right)):
        for node, went_right in path:
            c = split_col[node]
            s = 1.0 / (1.0 + np.exp(-gamma[c] * A[:, c]))
            d = gamma[c] * (1.0 - s) if went_right else -gamma[c] * s
            dA[:, c] += coef * h[:, leaf] * d
    return dA.T @ X, dA.sum(axis=0), dA


def e2edt_grid_laplacian(image_shape):
    """Dense 4-neighbour grid Laplacian (degree on the diagonal, -1 for neighbours)."""
    h, w = image_shape
    p = h * w
    M = np.zeros((p, p))
    for r in range(h):
        for c in range(w):
            i = r * w + c
            for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < h and 0 <= cc < w:
                    M[i, rr * w + cc] = -1.0
                    M[i, i] += 1.0
    return M


def e2edt_masked_laplacian(M, mask_row):
    """Laplacian of the graph of ``M`` restricted to the nodes in ``mask_row``."""
    keep = mask_row.astype(bool)
    A = (M < 0) & keep[:, None] & keep[None, :]
    L = -A.astype(float)
    L[np.diag_indices_from(L)] = A.sum(axis=1)
    return L


def e2edt_gaussian_row(mean, var):
    """A Gaussian leaf's parameter row ``(mean, 1 / var, log normaliser)`` (one per output)."""
    mean, var = np.atleast_1d(mean), np.atleast_1d(var)
    return np.concatenate([mean, 1.0 / var, [-0.5 * np.log(2 * np.pi * var).sum()]])


def e2edt_gaussian_leaf_loglik(theta, Y):
    """``log N(Y_n; m_l, diag(var))`` (n, L) from leaf rows ``theta`` (L, 2d + 1), by scipy."""
    from scipy.stats import norm

    d = Y.shape[1]
    out = np.zeros((Y.shape[0], theta.shape[0]))
    for leaf, row in enumerate(theta):
        sd = 1.0 / np.sqrt(row[d : 2 * d])
        out[:, leaf] = norm.logpdf(Y, loc=row[:d], scale=sd).sum(axis=1)
    return out


def e2edt_gaussian_e_step(A, gamma, left, right, split_col, theta, Y, sw):
    """Responsibilities (n, L), leaf statistics ``(S0, S1, S2)`` (L, 1 + 2d), log-likelihood."""
    from scipy.special import logsumexp

    terms = e2edt_log_path_probs(A, gamma, left, right, split_col) + e2edt_gaussian_leaf_loglik(
        theta, Y
    )
    norm = logsumexp(terms, axis=1)
    h = np.exp(terms - norm[:, None])
    hw = h * sw[:, None]
    stats = np.column_stack([hw.sum(axis=0), hw.T @ Y, hw.T @ Y**2])
    return h, stats, float(sw @ norm)


def e2edt_gaussian_m_step(stats, theta, floor):
    """Means ``S1 / S0`` (empty leaves keep theirs), variance per output pooled over the
    leaves about the new means (``sum_l sum_n sw h (y - m_l)^2 / sum sw``), floored."""
    d = (theta.shape[1] - 1) // 2
    s0, s1, s2 = stats[:, 0], stats[:, 1 : 1 + d], stats[:, 1 + d :]
    full = s0 > 0
    means = theta[:, :d].copy()
    means[full] = s1[full] / s0[full, None]
    if not full.any():
        return theta.copy()
    sse = (s2[full] - 2 * means[full] * s1[full] + means[full] ** 2 * s0[full, None]).sum(axis=0)
    var = np.maximum(sse / s0[full].sum(), floor)
    return np.array([e2edt_gaussian_row(m, var) for m in means])


def e2edt_gaussian_loglik(W, b, gamma, left, right, split_col, theta, Y, sw, X):
    """``sum_n sw_n log sum_l mu_l(x_n) N(y_n; m_l, var)`` as a function of the splits."""
    return e2edt_gaussian_e_step(X @ W.T + b, gamma, left, right, split_col, theta, Y, sw)[2]


def _stump_leaf_terms(pi, y):
    """``log p(y | left)``, ``log p(y | right)`` of a stump (categorical or Gaussian rows)."""
    if y.ndim == 2:
        both = e2edt_gaussian_leaf_loglik(pi, y)
        return both[:, 0], both[:, 1]
    with np.errstate(divide="ignore"):
        return np.log(pi[0, y]), np.log(pi[1, y])


def e2edt_fit_stump(
    X,
    y,
    sw,
    w,
    b,
    pi,
    gamma0,
    dgamma,
    n_epochs,
    order,
    batch_size,
    lr,
    beta1,
    beta2,
    eps,
    lam,
    M,
    var_floor=1e-6,
):
    """The stump schedule of the E2EDT kernel, in numpy (M: dense local Laplacian).

    ``y`` int class indices (``pi`` class distributions) or 2-D float targets
    (``pi`` Gaussian rows, :func:`e2edt_gaussian_row`)."""
    w, b, pi = w.copy(), float(b), pi.copy()
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), 0.0, 0.0
    gamma, step = gamma0, 0
    for epoch in range(n_epochs):
        z = gamma * (X @ w + b)
        lr_, ll_ = e2edt_log_sigmoid(z), e2edt_log_sigmoid(-z)
        log_left, log_right = _stump_leaf_terms(pi, y)
        tr = log_right + lr_
        tl = log_left + ll_
        hr = 1.0 / (1.0 + np.exp(tl - tr))
        if y.ndim == 2:
            hw = np.column_stack([sw * (1 - hr), sw * hr])
            counts = np.column_stack([hw.sum(axis=0), hw.T @ y, hw.T @ y**2])
        else:
            counts = np.zeros_like(pi)
            np.add.at(counts[1], y, sw * hr)
            np.add.at(counts[0], y, sw * (1 - hr))
        if epoch >= 1:
            perm = order[epoch - 1]
            for s in range(0, X.shape[0], batch_size):
                rows = perm[s : s + batch_size]
                total = sw[rows].sum()
                if total <= 0:
                    continue
                zb = gamma * (X[rows] @ w + b)
                c = -sw[rows] * gamma * (hr[rows] - 1.0 / (1.0 + np.exp(-zb))) / total
                gw = c @ X[rows] + 2.0 * lam * (M @ w)
                gb = c.sum()
                step += 1
                w, mw, vw = adam_step(w, mw, vw, gw, step, lr, beta1, beta2, eps)
                bb, mb, vb = adam_step(
                    np.array([b]),
                    np.array([mb]),
                    np.array([vb]),
                    np.array([gb]),
                    step,
                    lr,
                    beta1,
                    beta2,
                    eps,
                )
                b, mb, vb = float(bb[0]), float(mb[0]), float(vb[0])
        if y.ndim == 2:
            pi = e2edt_gaussian_m_step(counts, pi, var_floor)
        else:
            pi = e2edt_leaf_m_step(counts, pi)
        gamma += dgamma
    return w, b, pi, gamma


# ---- decision machine ----
def machine_template_matrix(children_left, children_right):
    """Dense template matrix B (leaves x splits) of one tree, node-id order, recursively."""
    left = np.asarray(children_left)
    right = np.asarray(children_right)
    splits = [i for i in range(left.shape[0]) if left[i] != -1]
    leaves = [i for i in range(left.shape[0]) if left[i] == -1]
    col = {node: j for j, node in enumerate(splits)}
    row = {node: j for j, node in enumerate(leaves)}
    B = np.zeros((len(leaves), len(splits)), dtype=np.int64)

    def visit(node, path):
        if left[node] == -1:
            for split, sign in path:
                B[row[node], col[split]] = sign
            return
        visit(left[node], path + [(node, -1)])
        visit(right[node], path + [(node, 1)])

    visit(0, [])
    return B


def machine_select_leaves(H, B, leaf_offset):
    """argmax over each tree's leaves of B~ H (paper eq. 3); first maximum."""
    norm = np.abs(B).sum(axis=1).astype(float)
    scores = (B @ H.T).T / np.where(norm > 0, norm, 1.0)
    out = np.empty((H.shape[0], len(leaf_offset) - 1), dtype=np.int64)
    for t in range(len(leaf_offset) - 1):
        a, b = leaf_offset[t], leaf_offset[t + 1]
        out[:, t] = a + np.argmax(scores[:, a:b], axis=1)
    return out


def machine_segment_softmax(Z, leaf_offset, inv_temperature):
    """Softmax of Z / temperature over each tree's block of columns."""
    E = np.empty_like(Z)
    for t in range(len(leaf_offset) - 1):
        a, b = leaf_offset[t], leaf_offset[t + 1]
        z = Z[:, a:b] * inv_temperature
        z = np.exp(z - z.max(axis=1, keepdims=True))
        E[:, a:b] = z / z.sum(axis=1, keepdims=True)
    return E


def machine_mixture_backward(E, Vy, leaf_offset, sw, inv_temperature):
    """R, dLoss/dZ and log p of the forest mixture p = mean_t sum_l E V[:, y]."""
    n_trees = len(leaf_offset) - 1
    q = E * Vy
    total = q.sum(axis=1, keepdims=True)
    R = q / total
    logp = np.log(total[:, 0] / n_trees)
    GZ = np.empty_like(E)
    for t in range(n_trees):
        a, b = leaf_offset[t], leaf_offset[t + 1]
        rt = R[:, a:b].sum(axis=1, keepdims=True)
        GZ[:, a:b] = -sw[:, None] * inv_temperature * (R[:, a:b] - E[:, a:b] * rt)
    return R, GZ, logp


# ---- shared parts: random numbers, scalar functions, optimisers, growth ----

_MASK = (1 << 64) - 1


def splitmix64(state):
    """``(new_state, bits)``: one splitmix64 step on a Python int."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def shuffle(values, m, seed_state):
    """Fisher-Yates shuffle of ``values[:m]`` driven by :func:`splitmix64`."""
    values = list(values)
    state = seed_state
    for i in range(m - 1, 0, -1):
        state, bits = splitmix64(state)
        j = bits % (i + 1)
        values[i], values[j] = values[j], values[i]
    return values, state


def log_sigmoid(a):
    """``log(1 / (1 + exp(-a)))`` in extended precision."""
    return -float(np.logaddexp(np.longdouble(0.0), -np.longdouble(a)))


def adam(param, grad, m, v, step, lr, beta1, beta2, eps):
    """Adam (Kingma & Ba, Algorithm 1) with the bias corrections written out."""
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def grow_order(children_of, order, max_depth=None, max_leaf_nodes=None):
    """Node ids in the order a greedy grower visits them.

    ``children_of(node, n_nodes)`` says whether ``node`` splits; children get
    the next two ids. ``order`` is "breadth" (ids in creation order) or
    "depth" (last created first, left before right; the leaf limit stops).
    """
    depth, visited, n_leaves = [0], [], 1
    pending = [0]
    while pending:
        node = pending.pop(0) if order == "breadth" else pending.pop()
        if max_depth is not None and depth[node] >= max_depth:
            continue
        if max_leaf_nodes is not None and n_leaves >= max_leaf_nodes:
            if order == "depth":
                break
            continue
        visited.append(node)
        if children_of(node, len(depth)):
            left, right = len(depth), len(depth) + 1
            depth += [depth[node] + 1] * 2
            n_leaves += 1
            pending += [left, right] if order == "breadth" else [right, left]
    return visited


# ---- quantile regression forests ----


def _weighted_quantiles(values, cum, quantiles, tie_tolerance):
    """Quantiles of sorted ``values`` under cumulative weights ``cum``.

    The ``q``-quantile is the first value whose cumulative weight reaches
    ``q`` times the total, or the midpoint with the next where it equals it
    (within ``tie_tolerance`` of the total).
    """
    out = np.empty(len(quantiles))
    tol = tie_tolerance * cum[-1]
    for j, q in enumerate(quantiles):
        k = min(int(np.argmax(cum >= q * cum[-1] - tol)), len(values) - 1)
        if not cum[k] >= q * cum[-1] - tol:
            k = len(values) - 1
        tie = abs(cum[k] - q * cum[-1]) <= tol and k + 1 < len(values)
        out[j] = 0.5 * (values[k] + values[k + 1]) if tie else values[k]
    return out


def forest_quantiles(nodes, leaf_ptr, targets, weights, quantiles, tie_tolerance):
    """Quantiles of the leaf co-membership mixture, row by row (``_core.quantiles``).

    ``nodes``: global leaf ids (rows x trees). Each tree's reached leaf weighs
    1 in total, shared by its entries' weights; the ``q``-quantile is the
    first sorted target whose cumulative weight reaches ``q`` times the
    total, or the midpoint with the next where it equals it (within the
    tolerance). NaN where no reached leaf holds an entry.
    """
    n, n_outputs = nodes.shape[0], targets.shape[0]
    out = np.full((n, n_outputs, len(quantiles)), np.nan)
    for i in range(n):
        for o in range(n_outputs):
            parts = [slice(leaf_ptr[g], leaf_ptr[g + 1]) for g in nodes[i]]
            parts = [p for p in parts if p.stop > p.start]
            if not parts:
                continue
            values = np.concatenate([targets[o, p] for p in parts])
            share = np.concatenate([weights[o, p] / weights[o, p].sum() for p in parts])
            order = np.argsort(values, kind="stable")
            values, cum = values[order], np.cumsum(share[order])
            out[i, o] = _weighted_quantiles(values, cum, quantiles, tie_tolerance)
    return out


def path_probabilities(tree, X, steepness):
    """Every node's soft-routing path probability (rows x nodes), node by node.

    A split sends a row right with ``1 / (1 + exp(-s (w.x + b)))``; a NaN
    feature contributes its missing-value term instead of ``w_j x_j``.
    """
    n = X.shape[0]
    out = np.zeros((n, tree.node_count))
    out[:, 0] = 1.0
    for j in range(tree.node_count):
        left = tree.children_left[j]
        if left < 0:
            continue
        lo, hi = tree.weight_indptr[j], tree.weight_indptr[j + 1]
        columns = X[:, tree.weight_index[lo:hi]]
        terms = np.where(
            np.isnan(columns), tree.weight_missing[lo:hi], columns * tree.weight_value[lo:hi]
        )
        right = 1.0 / (1.0 + np.exp(-steepness[j] * (terms.sum(axis=1) + tree.bias[j])))
        out[:, tree.children_right[j]] = out[:, j] * right
        out[:, left] = out[:, j] * (1.0 - right)
    return out


def soft_forest_quantiles(
    probability, node_offset, leaf_ptr, targets, weights, quantiles, tie_tolerance
):
    """Quantiles of the soft leaf mixture, row by row (``_core.quantiles``, soft routing).

    ``probability``: every node's path probability (rows x nodes of the
    forest, trees at ``node_offset``). Entry ``i`` of leaf ``l`` of tree
    ``t`` weighs ``p_l / P_t * w_i / W_l``, ``P_t`` the probability of the
    tree's leaves that hold entries; each tree with ``P_t > 0`` counts once.
    Quantiles as :func:`forest_quantiles`.
    """
    n, n_outputs = probability.shape[0], targets.shape[0]
    out = np.full((n, n_outputs, len(quantiles)), np.nan)
    for i in range(n):
        for o in range(n_outputs):
            values, share = [], []
            for t in range(len(node_offset) - 1):
                leaves = [
                    g
                    for g in range(node_offset[t], node_offset[t + 1])
                    if leaf_ptr[g + 1] > leaf_ptr[g] and probability[i, g] > 0
                ]
                mass = sum(probability[i, g] for g in leaves)
                for g in leaves:
                    part = slice(leaf_ptr[g], leaf_ptr[g + 1])
                    values.append(targets[o, part])
                    leaf_share = weights[o, part] / weights[o, part].sum()
                    share.append(probability[i, g] / mass * leaf_share)
            if not values:
                continue
            values, share = np.concatenate(values), np.concatenate(share)
            order = np.argsort(values, kind="stable")
            values, cum = values[order], np.cumsum(share[order])
            keep = share[order] > 0
            values, cum = values[keep], cum[keep]
            out[i, o] = _weighted_quantiles(values, cum, quantiles, tie_tolerance)
    return out
