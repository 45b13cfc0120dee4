"""Scalar functions and a vector log-sum-exp, shared by training and soft evaluation; stable
for any finite input."""

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


@jit_inline
def vector_max(values):
    """Largest entry of a non-empty 1-D array, by ``>`` from the first entry."""
    mx = values[0]
    for k in range(1, values.shape[0]):
        if values[k] > mx:
            mx = values[k]
    return mx


@jit_inline
def logsumexp(values):
    """``log(sum_k exp(values[k]))`` of a 1-D array, shifted by its maximum against overflow."""
    mx = vector_max(values)
    acc = 0.0
    for k in range(values.shape[0]):
        acc += np.exp(values[k] - mx)
    return mx + np.log(acc)
