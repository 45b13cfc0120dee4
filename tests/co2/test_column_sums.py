"""CO2's weight-gradient column sums (an LLVM intrinsic) against a plain reference."""

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from obliquetrees.co2._column_sums import BLOCK_WIDTHS, column_sums  # noqa: E402


@numba.njit
def _call(X, cbuf, rbuf, na, gw):
    column_sums(X, cbuf, rbuf, na, gw)


def _reference(X, cbuf, rbuf, na):
    """Each column's sum in the order of the listed rows, one addition at a time."""
    out = np.zeros(X.shape[1])
    for u in range(na):
        out += cbuf[u] * X[rbuf[u]]
    return out


@pytest.mark.parametrize("n_columns", [1, 7, 8, 9, 16, 17, 25, 40, 100])
@pytest.mark.parametrize("na", [0, 1, 5, 64])
def test_column_sums_match_the_sequential_sum_bit_for_bit(n_columns, na):
    rng = np.random.default_rng(n_columns * 101 + na)
    X = rng.normal(size=(80, n_columns)) * rng.choice([1e-8, 1.0, 1e8], size=(80, n_columns))
    cbuf = rng.normal(size=na + 3)  # longer than na: only the first na entries count
    rbuf = rng.integers(0, X.shape[0], size=na + 3)
    gw = np.full(n_columns, np.nan)
    _call(X, cbuf, rbuf, na, gw)
    np.testing.assert_array_equal(gw, _reference(X, cbuf, rbuf, na))


def test_the_last_block_width_is_one_so_every_column_is_summed():
    assert BLOCK_WIDTHS[-1] == 1 and list(BLOCK_WIDTHS) == sorted(BLOCK_WIDTHS, reverse=True)
