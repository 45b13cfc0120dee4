"""Scalar functions shared by training and soft evaluation, stable for any input."""

import numpy as np

from obliquetrees._core._jit import jit_inline


@jit_inline
def sigmoid(a):
    """``1 / (1 + exp(-a))`` without overflow."""
    if a >= 0.0:
        return 1.0 / (1.0 + np.exp(-a))
    e = np.exp(a)
    return e / (1.0 + e)


@jit_inline
def log_sigmoid(a):
    """``log(sigmoid(a))`` without overflow or log(0)."""
    if a >= 0.0:
        return -np.log1p(np.exp(-a))
    return a - np.log1p(np.exp(a))


@jit_inline
def log_sigmoid_pair(a):
    """``(log sigmoid(a), log sigmoid(-a))`` with one exponential."""
    e = np.log1p(np.exp(-abs(a)))
    if a >= 0.0:
        return -e, -a - e
    return a - e, -e
