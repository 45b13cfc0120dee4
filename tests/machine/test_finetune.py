"""Fine-tuning's relaxation: kernels vs plain-numpy references, gradients by finite differences."""

import numpy as np
import pytest

from obliquetrees._core.forest import ObliqueForest
from obliquetrees.machine import relaxed_nll, relaxed_squared_error, to_machine
from tests.reference import (
    machine_mixture_backward,
    machine_segment_softmax,
    random_tree,
)

K = pytest.importorskip("obliquetrees._core._machine_kernels")
FK = pytest.importorskip("obliquetrees.machine._finetune_kernels")


def _forest(rng, n_trees=3, n_features=5, n_outputs=3, max_depth=5):
    trees = [random_tree(rng, n_features, n_outputs, max_depth=max_depth) for _ in range(n_trees)]
    return ObliqueForest.from_trees(trees)


def test_zero_likelihood_rows_get_no_gradient():
    offsets = np.array([0, 2], dtype=np.int64)
    E = np.full((1, 2), 0.5)
    V = np.zeros((2, 1))
    indptr = np.array([0, 1, 2], dtype=np.int64)
    index = np.zeros(2, dtype=np.int64)
    value = np.array([-1.0, 1.0])
    R, GH, logp = np.empty_like(E), np.empty((1, 1)), np.empty(1)
    FK.relaxed_backward(
        E, V, np.zeros(1, np.int64), np.ones(1), indptr, index, value, offsets, 1.0, R, GH, logp
    )
    assert logp[0] == -np.inf and np.all(GH == 0) and np.all(R == 0)


@pytest.mark.parametrize("sigma", ["tanh", "saturated"])
def test_relaxed_nll_gradient_by_finite_differences(sigma):
    rng = np.random.default_rng(3)
    forest = _forest(rng, n_trees=2, n_features=4, n_outputs=3, max_depth=3)
    dm = to_machine(forest, cache=False)
    X = rng.normal(size=(40, 4))
    y = rng.integers(0, 3, 40)
    sw = rng.random(40) + 0.5
    V = rng.random(dm.V.shape) + 0.1
    V /= V.sum(axis=1, keepdims=True)
    W = dm.dense_S() + 0.1 * rng.normal(size=dm.dense_S().shape)
    b = dm.bias.copy()
    args = dict(temperature=0.3, eps=2.0, sigma=sigma, sample_weight=sw, V=V)
    loss, gW, gb = relaxed_nll(dm, X, y, W=W, b=b, **args)
    h = 1e-6
    for i, j in [(0, 0), (1, 2), (dm.n_splits - 1, 3)]:
        Wp, Wm = W.copy(), W.copy()
        Wp[i, j] += h
        Wm[i, j] -= h
        fd = (
            relaxed_nll(dm, X, y, W=Wp, b=b, **args)[0]
            - relaxed_nll(dm, X, y, W=Wm, b=b, **args)[0]
        ) / (2 * h)
        assert fd == pytest.approx(gW[i, j], rel=1e-4, abs=1e-6)
    for i in range(dm.n_splits):
        bp, bm = b.copy(), b.copy()
        bp[i] += h
        bm[i] -= h
        fd = (
            relaxed_nll(dm, X, y, W=W, b=bp, **args)[0]
            - relaxed_nll(dm, X, y, W=W, b=bm, **args)[0]
        ) / (2 * h)
        assert fd == pytest.approx(gb[i], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("objective", ["trees", "forest"])
@pytest.mark.parametrize("sigma", ["tanh", "saturated"])
def test_relaxed_squared_error_gradient_by_finite_differences(sigma, objective):
    rng = np.random.default_rng(4)
    forest = _forest(rng, n_trees=3, n_features=4, n_outputs=2, max_depth=3)
    dm = to_machine(forest, cache=False)
    X = rng.normal(size=(40, 4))
    Y = rng.normal(size=(40, 2))
    sw = rng.random(40) + 0.5
    W = dm.dense_S() + 0.1 * rng.normal(size=dm.dense_S().shape)
    b = dm.bias.copy()
    V = rng.normal(size=dm.V.shape)
    args = dict(temperature=0.3, eps=2.0, sigma=sigma, sample_weight=sw, objective=objective)

    def loss(**params):
        return relaxed_squared_error(dm, X, Y, **{"W": W, "b": b, "V": V, **params}, **args)[0]

    value, gW, gb, gV = relaxed_squared_error(dm, X, Y, W=W, b=b, V=V, **args)
    # the loss itself, against a direct evaluation from the paper's formula
    predictions = [
        _softmax_per_tree(dm, X, W, b, k, 0.3, 2.0, sigma)
        @ V[dm.leaf_offset[k] : dm.leaf_offset[k + 1]]
        for k in range(dm.n_trees)
    ]
    if objective == "trees":
        direct = sum(np.sum(sw[:, None] * (P - Y) ** 2) for P in predictions) / dm.n_trees
    else:
        direct = np.sum(sw[:, None] * (np.mean(predictions, axis=0) - Y) ** 2)
    assert value == pytest.approx(direct, rel=1e-10)
    h = 1e-6
    for name, array, grad in (("W", W, gW), ("b", b, gb), ("V", V, gV)):
        for index in list(np.ndindex(array.shape))[:: max(1, array.size // 12)]:
            plus, minus = array.copy(), array.copy()
            plus[index] += h
            minus[index] -= h
            fd = (loss(**{name: plus}) - loss(**{name: minus})) / (2 * h)
            assert fd == pytest.approx(grad[index], rel=1e-4, abs=1e-6), (name, index)


def _softmax_per_tree(dm, X, W, b, k, temperature, eps, sigma):
    """Tree ``k``'s relaxed leaf weights, straight from the paper's formula."""
    A = X @ W.T + b
    H = np.tanh(A / eps) if sigma == "tanh" else np.clip(A / eps, -1.0, 1.0)
    Bn = dm.B_normalised.toarray()[dm.leaf_offset[k] : dm.leaf_offset[k + 1]]
    logits = H @ Bn.T / temperature
    logits -= logits.max(axis=1, keepdims=True)
    E = np.exp(logits)
    return E / E.sum(axis=1, keepdims=True)


def test_fused_relaxed_kernels_match_reference(rng):
    forest = _forest(rng, n_trees=3, n_features=4, n_outputs=3, max_depth=4)
    dm = to_machine(forest, cache=False)
    Bn = dm.B_normalised
    Hs = np.tanh(dm.margins(rng.normal(size=(60, 4))))
    args = (Bn.indptr.astype(np.int64), Bn.indices.astype(np.int64), Bn.data, dm.leaf_offset)
    E = np.empty((60, dm.n_leaves))
    K.relaxed_forward(Hs, *args, 5.0, E)
    Eref = machine_segment_softmax((Bn @ Hs.T).T, dm.leaf_offset, 5.0)
    np.testing.assert_allclose(E, Eref, rtol=1e-12)
    V = rng.random(dm.V.shape) + 0.05
    y = rng.integers(0, 3, 60)
    sw = rng.random(60)
    R, GH, logp = np.empty_like(E), np.empty_like(Hs), np.empty(60)
    FK.relaxed_backward(E, V, y, sw, *args[:3], dm.leaf_offset, 5.0, R, GH, logp)
    Rr, GZr, logpr = machine_mixture_backward(E, V[:, y].T, dm.leaf_offset, sw, 5.0)
    np.testing.assert_allclose(R, Rr, rtol=1e-12)
    np.testing.assert_allclose(logp, logpr, rtol=1e-12)
    np.testing.assert_allclose(GH, GZr @ Bn.toarray(), rtol=1e-10, atol=1e-13)
