"""The shared kernels of _core/_random, _core/_math, _training/_optim and the grower."""

import numpy as np
import pytest

from tests import reference as ref

R = pytest.importorskip("obliquetrees._core._random")
M = pytest.importorskip("obliquetrees._core._math")
OPT = pytest.importorskip("obliquetrees._training._optim")
G = pytest.importorskip("obliquetrees._training.grower")


@pytest.mark.parametrize("seed", [0, 1, 12345, np.uint64(2**63 + 7)])
def test_random_stream_matches_python_splitmix64(seed):
    state = R.make_state(seed)
    ref_state, _ = ref.splitmix64(int(seed))  # make_state advances once
    for _ in range(20):
        ref_state, bits = ref.splitmix64(ref_state)
        assert int(R.next_uint64(state)) == bits
    assert int(state[0]) == ref_state


@pytest.mark.parametrize("m", [0, 1, 2, 17])
def test_shuffle_matches_reference_and_leaves_the_tail(m):
    values = np.arange(20)
    state = R.make_state(3)
    start = int(state[0])
    R.shuffle(values, m, state)
    want, end = ref.shuffle(range(20), m, start)
    assert values.tolist() == want
    assert int(state[0]) == end
    assert sorted(values.tolist()) == list(range(20))


def test_random_int_and_uniform_ranges():
    state = R.make_state(9)
    ints = np.array([R.random_int(state, 7) for _ in range(2000)])
    assert ints.min() == 0 and ints.max() == 6
    u = np.array([R.random_uniform(state) for _ in range(2000)])
    assert u.min() >= 0.0 and u.max() < 1.0
    noise = R.uniform_noise(5, 1000, 0.25)
    assert np.all(np.abs(noise) < 0.25) and np.array_equal(noise, R.uniform_noise(5, 1000, 0.25))


def test_node_seeds_differ_per_node_and_tree():
    seeds = {int(R.node_seed(t, n)) for t in range(5) for n in range(50)}
    assert len(seeds) == 250


@pytest.mark.parametrize("a", [-800.0, -40.0, -1.5, -1e-12, 0.0, 1e-12, 2.0, 35.0, 800.0])
def test_sigmoid_and_log_sigmoid_are_stable(a):
    s = M.sigmoid(a)
    assert 0.0 <= s <= 1.0 and np.isclose(s, np.exp(ref.log_sigmoid(a)), rtol=1e-14, atol=0)
    ls = M.log_sigmoid(a)
    assert np.isfinite(ls) and np.isclose(ls, ref.log_sigmoid(a), rtol=1e-14, atol=1e-300)
    assert M.log_sigmoid_pair(a) == (M.log_sigmoid(a), M.log_sigmoid(-a))


def test_log_sigmoid_pair_has_the_bits_of_two_log_sigmoids(rng):
    """The soft kernels take both log-sigmoids of a split from the pair: same bits, sign of 0 too.

    (A NaN margin gives NaNs either way; only the sign bit of the NaN can differ.)
    """
    special = [0.0, -0.0, np.inf, -np.inf, 1e-300, -1e-300, 745.0, -745.0, 36.7, -36.7]
    values = np.concatenate([special, rng.normal(size=2000) * 10.0 ** rng.integers(-8, 4, 2000)])
    for a in values:
        pair = np.array(M.log_sigmoid_pair(a))
        both = np.array([M.log_sigmoid(a), M.log_sigmoid(-a)])
        np.testing.assert_array_equal(pair.view(np.int64), both.view(np.int64))
    assert np.isnan(M.log_sigmoid_pair(np.nan)).all()


def test_vector_max(rng):
    for k in (1, 2, 7):
        values = rng.normal(size=k)
        assert M.vector_max(values) == values.max()
    assert M.vector_max(np.array([-np.inf, -np.inf])) == -np.inf


def test_logsumexp_matches_scipy(rng):
    from scipy.special import logsumexp

    for k in (1, 2, 5, 26):
        for scale in (1e-3, 1.0, 30.0, 700.0):
            values = rng.normal(size=k) * scale
            np.testing.assert_allclose(M.logsumexp(values), logsumexp(values), rtol=1e-14)


@pytest.mark.parametrize(
    "values",
    [
        [1e308, 1e308, -1e308],  # exp would overflow without the shift
        [-1e308, -1e308],  # ... or underflow to log(0)
        [800.0, -800.0, 0.0],
        [-np.inf, 2.0, -np.inf],  # a class with zero probability
        [5.0],
    ],
)
def test_logsumexp_is_stable(values):
    from scipy.special import logsumexp

    values = np.array(values)
    got = M.logsumexp(values)
    assert np.isfinite(got) and got >= values.max()
    with np.errstate(over="ignore"):  # scipy's -1e308 - 1e308; the kernel's is the same -inf
        want = logsumexp(values)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_adam_matches_the_paper_form(rng):
    p, g = rng.normal(size=30), rng.normal(size=30)
    m, v = rng.normal(size=30) * 0.1, rng.random(30) * 0.1
    want = ref.adam(p, g, m, v, 4, 0.01, 0.9, 0.999, 1e-8)
    p2, m2, v2 = p.copy(), m.copy(), v.copy()
    OPT.adam_update(p2, g, m2, v2, 4, 0.01, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(p2, want[0], rtol=1e-13)
    np.testing.assert_array_equal(m2, want[1])
    np.testing.assert_array_equal(v2, want[2])
    P, Gr = p.reshape(5, 6).copy(), g.reshape(5, 6)
    Mm, V = m.reshape(5, 6).copy(), v.reshape(5, 6).copy()
    OPT.adam_update_2d(P, Gr, Mm, V, 4, 0.01, 0.9, 0.999, 1e-8)
    np.testing.assert_array_equal(P.ravel(), p2)


def test_momentum_velocity():
    assert OPT.momentum_velocity(2.0, 3.0, 0.5, 0.1) == 0.5 * 2.0 - 0.1 * 3.0


@pytest.mark.parametrize("order", ["breadth", "depth"])
@pytest.mark.parametrize("limits", [(None, None), (3, None), (None, 5), (2, 3)])
def test_grower_visits_nodes_in_the_reference_order(rng, order, limits):
    max_depth, max_leaf_nodes = limits
    decisions = rng.random(200) < 0.7
    grower = G.Grower(0, order=order, max_depth=max_depth, max_leaf_nodes=max_leaf_nodes)
    visited = []

    def split(node):
        visited.append(node)
        if decisions[node] and grower.n_nodes < 150:
            grower.add_children(node)

    grower.grow(split)
    want = ref.grow_order(
        lambda node, n: decisions[node] and n < 150, order, max_depth, max_leaf_nodes
    )
    assert visited == want
    table = grower.arrays()
    assert table["children_left"].shape == (grower.n_nodes,)
    assert grower.n_leaves == int(np.sum(table["children_left"] < 0))


def test_grower_best_first_and_partition(rng):
    X = rng.normal(size=100)
    grower = G.Grower(100, order="best", max_leaf_nodes=4, payload={"gain": ((), np.float64, 0.0)})

    def propose(node):
        rows = grower.node_rows(node)
        return float(rows.size) if rows.size >= 2 else None

    def split(node):
        rows = grower.node_rows(node)
        goes_right = X[rows] > np.median(X[rows])
        before = rows.copy()
        n_left = grower.partition(node, goes_right)
        # stable: each side keeps its original order
        assert grower.node_rows(node)[:n_left].tolist() == before[~goes_right].tolist()
        grower.add_children(node, n_left)

    grower.grow(split, propose)
    assert grower.n_leaves == 4
    leaves = np.flatnonzero(grower.arrays()["children_left"] < 0)
    sizes = sorted(grower.n_node_rows(i) for i in leaves)
    assert sum(sizes) == 100 and sorted(
        np.concatenate([grower.node_rows(i) for i in leaves])
    ) == list(range(100))


def test_grower_table_grows_with_its_payload():
    grower = G.Grower(
        0, order="breadth", max_leaf_nodes=100, payload={"w": ((3,), np.float64, 0.5)}
    )
    grower.grow(lambda node: grower.add_children(node))
    assert grower.n_nodes == 199
    assert grower.w.shape[0] >= 199 and np.all(grower.w[: grower.n_nodes] == 0.5)
    with pytest.raises(ValueError, match="unknown growth order"):
        G.Grower(1, order="random")
