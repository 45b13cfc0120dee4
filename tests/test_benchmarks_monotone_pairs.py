"""benchmarks/monotone_pairs.py's two tests of whether a move along one input connects two leaves.

Checked on hand-made splits whose answer is known, and on random paths: the
axis-aligned test must call connected every pair the exact one does (it
ignores oblique splits, so it may only say "connected" more often).
"""

import numpy as np
import pytest

from benchmarks.monotone_pairs import connected_axis, connected_exact

# nodes: 0 the root (x0 > 0, the constrained input), 1 its left child, 2 its right child
W = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, -1.0, 0.0]])
B = np.array([0.0, -1.0, -1.0])  # node 1: x1 > 1 goes right; node 2: x1 < -1 goes right
W_OBLIQUE = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.0, -1.0, -1.0]])


def leaf(side, below):
    """The path of the leaf ``below`` (True: right) under the root's ``side`` child (1 or 2)."""
    return [(side, below), (0, side == 2)]


@pytest.mark.parametrize(
    "a, c, expected",
    [
        (leaf(1, False), leaf(2, False), True),  # x1 <= 1 and x1 >= -1 overlap
        (leaf(1, False), leaf(2, True), True),  # x1 <= 1 and x1 < -1
        (leaf(1, True), leaf(2, False), True),  # x1 > 1 and x1 >= -1
        (leaf(1, True), leaf(2, True), False),  # x1 > 1 and x1 < -1: no line along x0
    ],
)
def test_hand_made_pairs(a, c, expected):
    for connected in (connected_exact, connected_axis):
        assert connected(W, B, a, c, 0, 1) is expected


def test_a_move_the_wrong_way_connects_only_closures_that_touch():
    # x0 falling from the root's right child (x0 > 0) reaches its left child
    assert connected_exact(W, B, leaf(2, False), leaf(1, False), 0, -1) is True
    # x0 rising from the right child reaches the left child's closure at x0 = 0 only
    # (t = 0): the closed test counts it, which can only overstate the connected share
    assert connected_exact(W, B, leaf(2, False), leaf(1, False), 0, 1) is True


def test_oblique_splits_only_the_exact_test_separates():
    a, c = leaf(1, True), leaf(2, True)  # x1 + x2 > 1 and x1 + x2 < -1
    assert connected_exact(W_OBLIQUE, B, a, c, 0, 1) is False
    assert connected_axis(W_OBLIQUE, B, a, c, 0, 1) is True


def test_axis_test_is_a_relaxation_of_the_exact_one():
    rng = np.random.default_rng(0)
    n_checked = 0
    for _ in range(300):
        d = 3
        W_random = rng.normal(size=(7, d)) * (rng.random((7, d)) < 0.5)
        W_random[W_random.sum(axis=1) == 0.0, 0] = 1.0
        b_random = rng.normal(size=7)
        path_a = [(int(n), bool(rng.random() < 0.5)) for n in rng.choice(7, 3, replace=False)]
        path_c = [(int(n), bool(rng.random() < 0.5)) for n in rng.choice(7, 3, replace=False)]
        j, c_j = int(rng.integers(d)), int(rng.choice([-1, 1]))
        if connected_exact(W_random, b_random, path_a, path_c, j, c_j):
            assert connected_axis(W_random, b_random, path_a, path_c, j, c_j)
            n_checked += 1
    assert n_checked > 50
