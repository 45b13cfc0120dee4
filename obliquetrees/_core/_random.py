"""The package's one random number generator: splitmix64 on explicit seeds.

Kernels never draw from a global stream: every tree, node or restart gets an
integer seed (drawn up front by the estimator, or hashed from a parent seed
with :func:`node_seed`) and keeps its state in a one-element ``uint64`` array.
The same seed therefore gives the same numbers whatever the thread count.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline

_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)


@jit_inline
def next_uint64(state):
    """splitmix64: advance ``state[0]`` and return 64 random bits."""
    state[0] = state[0] + _GOLDEN_GAMMA
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit_inline
def random_int(state, n):
    """Random integer in ``[0, n)`` (``n >= 1``)."""
    return np.int64(next_uint64(state) % np.uint64(n))


@jit_inline
def random_uniform(state):
    """Uniform float in ``[0, 1)`` (the top 53 bits)."""
    return float(next_uint64(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@jit
def make_state(seed):
    """A state array for an integer seed (advanced once, so seed 0 is fine)."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed)
    next_uint64(state)
    return state


@jit
def node_seed(tree_seed, node_id):
    """Seed of one node: a hash of the tree's seed and the node id."""
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(tree_seed) * np.uint64(0x100000001B3) + np.uint64(node_id)
    return next_uint64(state)


@jit
def shuffle(values, m, state):
    """Fisher-Yates shuffle of ``values[:m]`` in place."""
    for i in range(m - 1, 0, -1):
        j = random_int(state, i + 1)
        tmp = values[i]
        values[i] = values[j]
        values[j] = tmp


@jit
def uniform_noise(seed, n, half_width):
    """``n`` draws of U(-half_width, half_width) from an explicit seed."""
    state = make_state(seed)
    out = np.empty(n)
    for i in range(n):
        out[i] = (2.0 * random_uniform(state) - 1.0) * half_width
    return out
