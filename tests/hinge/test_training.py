"""Hinge forest kernels against the plain-numpy references in tests/reference.py."""

import numpy as np
import pytest

from obliquetrees.hinge import _forward as HF
from obliquetrees.hinge import training as H
from tests import reference as R

K = pytest.importorskip("obliquetrees.hinge._kernels")


def _random_forest(rng, n, Hn, M, D, C, is_fern):
    NT = D if is_fern else 2**D - 1
    U = rng.normal(size=(n, Hn))
    thr = rng.uniform(-2, 2, (M, NT))
    feat = rng.integers(0, Hn, (M, NT))
    W = rng.normal(size=(M, 2**D, C))
    return U, thr, feat, W


def _run_forward(U, thr, feat, W, D, is_fern, head_sum):
    n, M = U.shape[0], thr.shape[0]
    n_out = W.shape[2] if head_sum else M
    out = np.empty((n, n_out))
    leaf = np.empty((n, M), np.int64)
    rstar = np.empty((n, M))
    vstar = np.empty((n, M), np.int64)
    K.forward(U, thr, feat, W, D, is_fern, 0 if head_sum else 1, out, (leaf, rstar, vstar), True)
    return out, leaf, rstar, vstar


@pytest.mark.parametrize("is_fern", [False, True])
@pytest.mark.parametrize("head_sum", [True, False])
@pytest.mark.parametrize("n", [1, 7, 37])
def test_forward_matches_reference(rng, is_fern, head_sum, n):
    D = 4
    U, thr, feat, W = _random_forest(rng, n, 6, 5, D, 3 if head_sum else 1, is_fern)
    out, leaf, rstar, vstar = _run_forward(U, thr, feat, W, D, is_fern, head_sum)
    leaf_r, rstar_r, vstar_r = R.hinge_traverse(U, thr, feat, D, is_fern)
    np.testing.assert_array_equal(leaf, leaf_r)
    np.testing.assert_array_equal(rstar, rstar_r)
    np.testing.assert_array_equal(vstar, vstar_r)
    np.testing.assert_allclose(
        out, R.hinge_forward(U, thr, feat, W, D, is_fern, head_sum), rtol=1e-13, atol=1e-13
    )


def test_traversal_ties_and_margin():
    # one tree of depth 2 on one feature: thresholds 0 (root), -1 (left), 1 (right)
    thr = np.array([[0.0, -1.0, 1.0]])
    feat = np.zeros((1, 3), dtype=np.int64)
    W = np.arange(4, dtype=float).reshape(1, 4, 1)
    U = np.array([[0.0], [0.4], [2.5], [-0.9]])
    out, leaf, rstar, vstar = _run_forward(U, thr, feat, W, 2, False, True)
    # x = 0: tie goes left at the root (margin 0), then right at node 1 (0 > -1)
    assert leaf[0, 0] == 1 and rstar[0, 0] == 0.0 and vstar[0, 0] == 0
    # x = 0.4: right, then left of threshold 1; smallest margin 0.4 at the root
    assert leaf[1, 0] == 2 and rstar[1, 0] == pytest.approx(0.4) and vstar[1, 0] == 0
    # x = 2.5: right, right; margins 2.5 and 1.5
    assert leaf[2, 0] == 3 and rstar[2, 0] == pytest.approx(1.5) and vstar[2, 0] == 2
    # x = -0.9: left, right; margins -0.9 and 0.1
    assert leaf[3, 0] == 1 and rstar[3, 0] == pytest.approx(0.1) and vstar[3, 0] == 1
    np.testing.assert_allclose(out[:, 0], np.abs(rstar[:, 0]) * W[0, leaf[:, 0], 0])


def _backward(G, leaf, rstar, vstar, feat, thr, W, head_sum, n_chunks=1):
    """Gradients from the production kernel (no update), scattered into dense arrays."""
    B, M = leaf.shape
    L, C = W.shape[1:]
    NT = thr.shape[1]
    grads = (
        np.empty((M, B, C)),
        np.empty((M, B)),
        np.empty((M, B + 1), np.int64),
        np.empty((M, B + 1), np.int64),
        np.empty((B, M)),
        np.empty((B, M), np.int64),
    )
    # slot maps of n_chunks chunks of trees (results do not depend on it): all -1
    slots = (np.full((n_chunks, L), -1, np.int32), np.full((n_chunks, NT), -1, np.int32))
    stride = 0 if head_sum else 1
    optim = (0, (W, W, thr, thr), np.zeros(6))  # not read without an update
    K.backward_update(G, (leaf, rstar, vstar), feat, thr, W, stride, slots, grads, False, optim)
    assert (slots[0] == -1).all() and (slots[1] == -1).all()  # left as found
    gW, gt, tw, tt, contrib, cf = grads
    dW = np.zeros_like(W)
    dt = np.zeros_like(thr)
    for m in range(M):
        dW[m, tw[m, : tw[m, B]]] = gW[m, : tw[m, B]]
        dt[m, tt[m, : tt[m, B]]] = gt[m, : tt[m, B]]
    return dW, dt, contrib, cf


@pytest.mark.parametrize("is_fern", [False, True])
@pytest.mark.parametrize("head_sum", [True, False])
@pytest.mark.parametrize("n_chunks", [1, 2, 5])
def test_backward_matches_reference(rng, is_fern, head_sum, n_chunks):
    D, n, Hn, M = 4, 29, 6, 5
    U, thr, feat, W = _random_forest(rng, n, Hn, M, D, 3 if head_sum else 1, is_fern)
    out, leaf, rstar, vstar = _run_forward(U, thr, feat, W, D, is_fern, head_sum)
    G = rng.normal(size=out.shape)
    W0, thr0 = W.copy(), thr.copy()
    dW, dt, contrib, cf = _backward(G, leaf, rstar, vstar, feat, thr, W, head_sum, n_chunks)
    np.testing.assert_array_equal(W, W0)  # no update requested
    np.testing.assert_array_equal(thr, thr0)
    gU = np.empty_like(U)
    K.input_gradient(contrib, cf, gU)
    rW, rt, rU = R.hinge_backward(G, U, thr, feat, W, D, is_fern, head_sum)
    np.testing.assert_allclose(dW, rW, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dt, rt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gU, rU, rtol=1e-12, atol=1e-12)


def _params(**changes):
    """HingeParams of a small classifier, with ``changes``."""
    params = dict(
        task="classification",
        n_estimators=4,
        max_depth=3,
        tree_type="tree",
        n_hinge_features=5,
        head="sum",
        optimizer="lazy_adam",
        learning_rate=0.01,
        batch_size=50,
        max_epochs=1,
        n_iter_no_change=20,
        verbose=0,
        monotonic_cst=None,
    )
    return H.HingeParams(**{**params, **changes})


def _small_model(rng, tree_type="tree", head="sum", n_out=3, p=4, n_hinge=5, depth=3):
    X = rng.normal(size=(40, p))
    params = _params(tree_type=tree_type, head=head, n_hinge_features=n_hinge, max_depth=depth)
    model = H.init_model(p, n_out, params, X.mean(0), X.std(0), seed=1)
    model.W = rng.normal(size=model.W.shape)  # larger leaves: non-trivial gradients
    Z = (X - model.x_mean) / model.z_scale()
    Hf = Z @ model.A.T
    model.bn_mean = Hf.mean(0)
    model.bn_var = Hf.var(0)
    model.bn_count = 1
    return model, Z


def _batch_gradients(model, Zb, Yb, wb, task):
    """Loss and exact gradients on one batch of standardised inputs ``Zb``.

    The production kernels without an update: forward, loss, head gradients,
    per-tree backward, input gradient. Returns the loss and dense gradients
    of ``W``, ``thr``, ``A`` and (linear head) ``Q``, ``q``.
    """
    B, M = Zb.shape[0], model.n_trees
    walk = (np.empty((B, M), np.int64), np.empty((B, M)), np.empty((B, M), np.int64))
    sd = np.sqrt(model.bn_var + K.BN_EPS)
    U = np.ascontiguousarray(HF.hinge_features(model, Zb))
    out = HF.tree_outputs(model, U, walk)
    if task != "classification" and np.ndim(Yb) == 1:
        Yb = Yb[:, None]
    loss, G = H.loss_and_grad(HF.head_outputs(model, out), Yb, wb, task)
    grads = {}
    linear = model.head == "linear"
    if linear:
        grads["Q"] = G.T @ out
        grads["q"] = G.sum(axis=0)
    G_trees = np.ascontiguousarray(G @ model.Q if linear else G)
    grads["W"], grads["thr"], contrib, cf = _backward(
        G_trees, *walk, model.feat, model.thr, model.W, not linear
    )
    gU = np.empty((B, model.A.shape[0]))
    K.input_gradient(contrib, cf, gU)
    grads["A"] = (gU / sd).T @ Zb
    return loss, grads


def _loss(model, Z, Y, w, task):
    U = np.ascontiguousarray(HF.hinge_features(model, Z))
    F = HF.head_outputs(model, HF.tree_outputs(model, U))
    return H.loss_and_grad(F, Y, w, task)[0]


@pytest.mark.parametrize("tree_type", ["tree", "fern"])
@pytest.mark.parametrize("head", ["sum", "linear"])
@pytest.mark.parametrize("task", ["classification", "regression"])
def test_gradients_match_finite_differences(rng, tree_type, head, task):
    n_out = 3 if task == "classification" else 2
    model, Z = _small_model(rng, tree_type, head, n_out=n_out)
    Y = (
        rng.integers(0, n_out, Z.shape[0])
        if task == "classification"
        else rng.normal(size=(Z.shape[0], n_out))
    )
    w = rng.uniform(0.5, 1.5, Z.shape[0])
    loss, grads = _batch_gradients(model, Z, Y, w, task)
    assert loss == pytest.approx(_loss(model, Z, Y, w, task), rel=1e-12)
    h = 1e-6
    names = ["W", "thr", "A"] + (["Q", "q"] if head == "linear" else [])
    for name in names:
        P = getattr(model, name)
        flat = P.reshape(-1)
        idx = rng.choice(flat.size, size=min(flat.size, 25), replace=False)
        if name == "W":  # make sure touched leaves are among the checked entries
            nz = np.flatnonzero(grads["W"].reshape(-1))
            idx = np.unique(np.concatenate([idx, nz[:25]]))
        num = np.empty(idx.size)
        for j, i in enumerate(idx):
            old = flat[i]
            flat[i] = old + h
            lp = _loss(model, Z, Y, w, task)
            flat[i] = old - h
            lm = _loss(model, Z, Y, w, task)
            flat[i] = old
            num[j] = (lp - lm) / (2 * h)
        np.testing.assert_allclose(
            grads[name].reshape(-1)[idx], num, rtol=1e-5, atol=1e-7, err_msg=name
        )


@pytest.mark.parametrize("optimizer", ["adam", "lazy_adam"])
@pytest.mark.parametrize("is_fern", [False, True])
def test_train_epoch_step_matches_reference(rng, optimizer, is_fern):
    model, Z = _small_model(rng, "fern" if is_fern else "tree", "sum", n_out=3)
    Y = rng.integers(0, 3, Z.shape[0])
    B = 12
    ref = {
        "A": model.A.copy(),
        "bn_mean": model.bn_mean.copy(),
        "bn_var": model.bn_var.copy(),
        "thr": model.thr.copy(),
        "feat": model.feat,
        "W": model.W.copy(),
        "depth": model.depth,
        "is_fern": is_fern,
        "t": 0,
    }
    for name in ("A", "thr", "W"):
        ref[name + "_1"] = np.zeros_like(ref[name])
        ref[name + "_2"] = np.zeros_like(ref[name])
    Yi, Yf = H._targets(Y, "classification")
    for step in range(3):  # three batches, statistics frozen for the comparison
        order = np.arange(step * B, (step + 1) * B)
        mean, var = model.bn_mean.copy(), model.bn_var.copy()
        H.run_epoch(
            model, Z, Yi, Yf, np.ones(Z.shape[0]), order, _params(optimizer=optimizer, batch_size=B)
        )
        model.bn_mean, model.bn_var = mean, var
        ref = R.hinge_train_step(ref, Z[order], Y[order], 0.01, optimizer)
        for name in ("W", "thr", "A"):
            np.testing.assert_allclose(
                getattr(model, name),
                ref[name],
                rtol=1e-10,
                atol=1e-12,
                err_msg=f"{name} step {step}",
            )
    assert model.step == 3


def test_batch_norm_statistics_schedule(rng):
    model, Z = _small_model(rng)
    model.bn_count = 0
    Yi, Yf = H._targets(rng.integers(0, 3, Z.shape[0]), "classification")
    order = np.arange(20)
    Hf0 = Z[:10] @ model.A.T
    H.run_epoch(
        model,
        Z,
        Yi,
        Yf,
        np.ones(40),
        order[:10],
        _params(optimizer="sgd", learning_rate=0.0, batch_size=10),
    )
    # first batch: statistics are the batch's (unbiased variance), count 1
    np.testing.assert_allclose(model.bn_mean, Hf0.mean(0))
    np.testing.assert_allclose(model.bn_var, Hf0.var(0, ddof=1))
    assert model.bn_count == 1
    Hf1 = Z[10:20] @ model.A.T  # lr 0: A unchanged
    H.run_epoch(
        model,
        Z,
        Yi,
        Yf,
        np.ones(40),
        order[10:],
        _params(optimizer="sgd", learning_rate=0.0, batch_size=10),
    )
    np.testing.assert_allclose(model.bn_mean, 0.5 * Hf0.mean(0) + 0.5 * Hf1.mean(0))
    assert model.bn_count == 2


def test_sparse_optimisers_leave_untouched_parameters(rng):
    for optimizer in ("lazy_adam", "adagrad", "sgd"):
        model, Z = _small_model(rng, depth=5)
        Yi, Yf = H._targets(rng.integers(0, 3, Z.shape[0]), "classification")
        W0, t0 = model.W.copy(), model.thr.copy()
        H.run_epoch(
            model, Z, Yi, Yf, np.ones(40), np.arange(4), _params(optimizer=optimizer, batch_size=4)
        )
        changed_leaves = np.any(model.W != W0, axis=2).sum()
        assert 0 < changed_leaves <= 4 * model.n_trees
        assert 0 < np.count_nonzero(model.thr != t0) <= 4 * model.n_trees
    model, Z = _small_model(rng, depth=5)
    W0 = model.W.copy()
    Yi, Yf = H._targets(rng.integers(0, 3, Z.shape[0]), "classification")
    # dense Adam: the first step moves only touched leaves (zero moments
    # elsewhere), the second moves every leaf that was touched once
    H.run_epoch(
        model, Z, Yi, Yf, np.ones(40), np.arange(8), _params(optimizer="adam", batch_size=4)
    )
    assert np.any(model.W != W0, axis=2).sum() <= 8 * model.n_trees


@pytest.mark.parametrize("optimizer", ["adam", "lazy_adam", "adagrad"])
@pytest.mark.parametrize("head", ["sum", "linear"])
def test_epoch_identical_for_any_thread_count(rng, optimizer, head):
    from obliquetrees._core._jit import numba_threads

    results = []
    for n_threads in (1, 2, 3):
        model, Z = _small_model(np.random.default_rng(5), head=head, depth=4)
        Yi, Yf = H._targets(np.random.default_rng(6).integers(0, 3, 40), "classification")
        with numba_threads(n_threads):
            losses = H.run_epoch(
                model,
                Z,
                Yi,
                Yf,
                np.ones(40),
                np.arange(40)[::-1].copy(),
                _params(optimizer=optimizer, batch_size=7),
            )
        results.append((losses, model.W, model.thr, model.A))
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("tree_type", ["tree", "fern"])
def test_stored_trees_route_like_hinge_traversal(rng, tree_type):
    from obliquetrees._core import traversal
    from obliquetrees._core.forest import ObliqueForest

    model, Z = _small_model(rng, tree_type, depth=4)
    X = rng.normal(size=(60, 4)) * 3 + 1
    counts = HF.leaf_counts(model, X, np.ones(X.shape[0]))
    trees = HF.to_trees(model, counts)
    for tree in trees:
        tree.check_invariants()
        assert tree.n_node_samples[0] == X.shape[0]
    leaf = np.empty((60, model.n_trees), np.int64)
    U = np.ascontiguousarray(HF.hinge_features(model, HF.standardise(model, X)))
    HF.tree_outputs(
        model, U, (leaf, np.empty((60, model.n_trees)), np.empty((60, model.n_trees), np.int64))
    )
    applied = traversal.apply(ObliqueForest.from_trees(trees), X, 1)
    np.testing.assert_array_equal(applied, leaf + 2**4 - 1)
