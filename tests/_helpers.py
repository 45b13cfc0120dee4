"""Test scaffolding shared by the method folders: tree array names, sparse data, memory peaks."""

import tracemalloc

import numpy as np
import scipy.sparse as sp

#: The per-node arrays of an ObliqueTree that its predictions read.
TREE_MODEL_ARRAYS = (
    "children_left",
    "children_right",
    "weight_indptr",
    "weight_index",
    "weight_value",
    "bias",
    "value",
)
#: Every per-node array of an ObliqueTree: the model and its training statistics.
TREE_ARRAYS = (*TREE_MODEL_ARRAYS, "n_node_samples", "depth")


def sparse_linear_problem(n, d, density, seed):
    """CSR with an all-zero column (3) and empty rows (first 5), a linear target.

    Returns ``X``, the target ``X @ w`` and its labels (above the median or not).
    """
    X = sp.random(n, d, density=density, random_state=seed, format="lil")
    X[:, 3] = 0.0
    X[:5, :] = 0.0
    X = X.tocsr()
    X.eliminate_zeros()
    s = X @ np.random.default_rng(seed).normal(size=d)
    return X, s, (s > np.median(s)).astype(int)


def large_sparse_classification():
    """A 20000 x 20000 CSR at 0.1 % density (dense: 3.2 GB) and linear binary labels."""
    rng = np.random.default_rng(0)
    n = p = 20_000
    X = sp.random(n, p, density=0.001, random_state=rng, format="csr")
    y = (X @ rng.standard_normal(p) > 0).astype(int)
    return X, y


def fit_peak_memory(estimator, X, y):
    """The peak of the memory tracemalloc sees during ``estimator.fit(X, y)``.

    A fit on the first 200 rows compiles the kernels outside the measurement.
    """
    estimator.fit(X[:200], y[:200])
    tracemalloc.start()
    try:
        estimator.fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def kernel_state(seed):
    """A random state as the numba kernels take it: one uint64 in an array (updated in place)."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed)
    return state
