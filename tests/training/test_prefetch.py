"""The prefetch intrinsic: compiles to a prefetch instruction and changes nothing."""

import platform

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from obliquetrees._training._prefetch import prefetch  # noqa: E402


@numba.njit
def _prefetch_all(W):
    """Prefetch every element of ``W``, then return its sum (read after the prefetches)."""
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            for k in range(W.shape[2]):
                prefetch(W, (i, j, k))
    return W.sum()


@numba.njit
def _prefetch_rows(A):
    """A 2-D array, one prefetch per row (its first element)."""
    for i in range(A.shape[0]):
        prefetch(A, (i, 0))
    return A.sum()


@pytest.mark.parametrize("strided", [False, True])
def test_prefetch_leaves_values_unchanged(rng, strided):
    W = rng.normal(size=(3, 8, 5))
    view = W[:, ::2, 1:] if strided else W
    before = view.copy()
    assert _prefetch_all(view) == pytest.approx(before.sum(), rel=1e-12)
    np.testing.assert_array_equal(view, before)
    rows = view[:, :, 0]
    assert _prefetch_rows(rows) == pytest.approx(rows.sum(), rel=1e-12)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 mnemonic")
def test_prefetch_compiles_to_a_prefetch_instruction():
    W = np.zeros((2, 2, 2))
    _prefetch_all(W)
    assert "prefetch" in _prefetch_all.inspect_asm(_prefetch_all.signatures[0])
