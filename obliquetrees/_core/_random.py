"""Every random draw below the estimators starts here, from an explicit integer seed.

The estimator draws one integer seed per tree (or per stage) from
``random_state`` (:func:`obliquetrees.utils.seeds.draw_seeds`); nothing
below it draws from a global stream, so the same seed gives the same numbers
whatever the thread count or worker.

- Kernels: splitmix64 with its state in a one-element ``uint64`` array
  (:func:`make_state`, :func:`random_int`, :func:`random_uniform`), node
  seeds hashed from the tree's (:func:`node_seed`).
- Python-level draws (validation splits, initial weights, minibatch orders,
  bootstraps): numpy's ``Generator`` (PCG64) of a seed, or of one named stream
  of it (:func:`generator`); soft trees' nodes take seeds spawned from the
  tree's (:func:`spawned_seeds`).
- One exception, kept for its recorded bits: CO2's bootstrap and tree seeds
  are drawn by MT19937 (:func:`legacy_generator`), the generator every CO2
  model of the golden record (``tests/golden``) was trained with; moving them
  to PCG64 would change every CO2 model.

``tests/test_architecture.py`` checks that no other module calls ``np.random``.
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


def generator(seed, stream=None, *keys):
    """numpy ``Generator`` (PCG64) of ``seed``, or of its stream number ``stream``.

    Streams of one seed are independent: a tree's growth rows and its
    bootstrap, say, are drawn from two streams of the tree's seed, so turning
    one off leaves the other's draws as they were. ``keys``, non-negative
    integers of any size, pick independent sub-streams of a stream (a node
    of a tree, a partition of the data).
    """
    return np.random.default_rng(seed if stream is None else [seed, stream, *keys])


def spawned_seeds(seed):
    """Endless integer seeds, spawned one after another from ``seed``'s ``SeedSequence``."""
    sequence = np.random.SeedSequence(seed)
    while True:
        yield int(sequence.spawn(1)[0].generate_state(1)[0])


def legacy_generator(seed):
    """MT19937 ``RandomState`` of ``seed``: CO2's bootstrap and tree seeds only (module notes)."""
    return np.random.RandomState(seed)
