"""The vector row dot products of E2EDT's pruned kernels against a plain-Python reference.

:func:`block_dot` and :func:`block_dot_pair` must return the bits of the
scalar four-partial-sum order (``four_sum_dot``), for the
vector form (C-contiguous float64) and the scalar fallback (other layouts,
float32 rows) alike.
"""

import numba
import numpy as np
import pytest

from obliquetrees.e2edt._simd import block_dot, block_dot_pair, four_sum_dot


def _reference_dot(w, x):
    """Four running sums over ``j = k (mod 4)``, the tail into the first, in Python floats."""
    n = len(w)
    n4 = n - n % 4
    a = [0.0, 0.0, 0.0, 0.0]
    for j in range(0, n4, 4):
        for k in range(4):
            a[k] += float(w[j + k]) * float(x[j + k])
    for j in range(n4, n):
        a[0] += float(w[j]) * float(x[j])
    return (a[0] + a[1]) + (a[2] + a[3])


@numba.njit
def _dots(W, X, c, q, r):
    pair = block_dot_pair(W, c, X, q, r)
    return pair[0], pair[1], block_dot(W, c, X, q)


def _problem(rng, n_rows, p):
    # magnitudes over ten decades: any reordering of the sums would show in the bits
    W = rng.normal(size=(n_rows, p)) * 10.0 ** rng.uniform(-5, 5, (n_rows, p))
    X = rng.normal(size=(n_rows + 2, p)) * 10.0 ** rng.uniform(-5, 5, (n_rows + 2, p))
    return W, X


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 7, 8, 9, 40, 43, 784])
@pytest.mark.parametrize("layout", ["C", "F", "float32"])
def test_block_dots_match_the_scalar_order(p, layout):
    rng = np.random.default_rng(p)
    W, X = _problem(rng, 5, p)
    if layout == "F":  # the scalar fallback
        W, X = np.asfortranarray(W), np.asfortranarray(X)
    elif layout == "float32":
        X = X.astype(np.float32)
    for c in range(W.shape[0]):
        for q in range(X.shape[0]):
            r = (3 * q + 1) % X.shape[0]
            dq, dr, single = _dots(W, X, c, q, r)
            expected_q = _reference_dot(W[c], X[q])
            assert dq == expected_q
            assert dr == _reference_dot(W[c], X[r])
            assert single == expected_q


def test_block_dots_keep_special_values():
    """inf and nan propagate as in the scalar sums (nothing is reassociated or fused)."""
    W = np.array([[1.0, np.inf, 2.0, 3.0, -1.0, 0.5]])
    X = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]])
    dq, dr, single = _dots(W, X, 0, 0, 1)
    assert dq == np.inf and single == np.inf
    assert np.isnan(dr)  # inf * 0
    assert np.isnan(_reference_dot(W[0], X[1]))


@numba.njit
def _gather_dot(W, c, X, q, idx, k0, k1):
    return four_sum_dot(W, c, X, q, idx, k0, k1)


@pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 9, 40])
def test_four_sum_dot_over_a_feature_list(length):
    """A split's feature list (``idx[k0:k1]``) is summed in the same order as its columns."""
    rng = np.random.default_rng(length)
    W, X = _problem(rng, 3, 50)
    idx = np.concatenate([rng.permutation(50)[:7], np.sort(rng.permutation(50)[:length])])
    k0, k1 = 7, 7 + length
    for c in range(W.shape[0]):
        for q in range(X.shape[0]):
            cols = idx[k0:k1]
            assert _gather_dot(W, c, X, q, idx, k0, k1) == _reference_dot(W[c, cols], X[q, cols])
