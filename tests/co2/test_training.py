"""CO2 training (obliquetrees/co2/: training.py, _kernels.py, _node.py; and
obliquetrees/_training/axis_split.py) against tests/reference.py."""

import inspect

import numpy as np
import pytest
import scipy.sparse as sp

from tests import reference as ref
from tests._helpers import kernel_state as _state

K = pytest.importorskip("obliquetrees.co2._kernels")
N = pytest.importorskip("obliquetrees.co2._node")
A = pytest.importorskip("obliquetrees._training.axis_split")
co2 = pytest.importorskip("obliquetrees.co2.training")

#: A split kernel's out-of-bag rows outside ``oblique_test="out_of_bag"``: none.
NO_OOB = (np.empty(0, dtype=np.int64), np.empty(0), 0, 0)

R = pytest.importorskip("obliquetrees._core._random")


def _problem(rng, m=120, p=5, n_classes=4, integer_weights=True):
    X = rng.normal(size=(m, p))
    W = rng.normal(size=(p, n_classes))
    y = np.argmax(X @ W + 0.5 * rng.normal(size=(m, n_classes)), axis=1).astype(np.int64)
    if integer_weights:
        w = rng.integers(1, 4, size=m).astype(np.float64)
    else:
        w = rng.uniform(0.2, 2.0, size=m)
    return np.ascontiguousarray(X), y, w


def _params(rng, p, n_classes, scale=1.0):
    return (
        scale * rng.normal(size=p),
        float(scale * rng.normal()),
        rng.normal(size=n_classes),
        rng.normal(size=n_classes),
    )


# ------------------------------------------------------------------ rng
def test_rng_matches_reference():
    state = _state(12345)
    r = ref.Co2Rng(12345)
    for _ in range(50):
        assert int(R.next_uint64(state)) == r.next()
    for n in (1, 2, 7, 1000):
        assert R.random_int(state, n) == r.integer(n)
    for tree_seed, node in [(0, 0), (7, 3), (2**31 - 2, 10**6)]:
        assert int(R.node_seed(tree_seed, node)) == ref.co2_node_seed(tree_seed, node)


def test_shuffle_matches_reference():
    perm = np.arange(37)
    R.shuffle(perm, 37, _state(5))
    expected = list(range(37))
    ref.co2_shuffle(expected, ref.Co2Rng(5))
    np.testing.assert_array_equal(perm, expected)


# ----------------------------------------------------- axis-aligned init
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("min_samples_leaf", [1, 5])
@pytest.mark.parametrize("integer_weights", [True, False])  # x log x table / logarithms
@pytest.mark.parametrize("n_classes", [2, 4])  # two classes and a table: scan_binary
def test_best_axis_split_matches_exhaustive_search(
    seed, min_samples_leaf, integer_weights, n_classes
):
    rng = np.random.default_rng(seed)
    X, y, w = _problem(rng, m=60, p=6, n_classes=n_classes, integer_weights=integer_weights)
    X[:, 2] = 1.5  # a constant feature is skipped and does not count
    X[:, 3] = np.round(X[:, 3])  # ties
    k = n_classes
    f, thr, imp = A.best_axis_split(X, y, w, X.shape[0], k, 3, min_samples_leaf, _state(seed))
    rf, rthr, rimp = ref.co2_best_axis_split(X, y, w, k, 3, min_samples_leaf, ref.Co2Rng(seed))
    assert f >= 0 and f != 2
    np.testing.assert_allclose(imp, rimp, rtol=1e-10)
    # the kernel's threshold realises the reported impurity
    np.testing.assert_allclose(ref.co2_weighted_entropy(y, w, X[:, f] > thr, k), imp, rtol=1e-10)
    if f == rf:
        assert thr == rthr
    right = (X[:, f] > thr).sum()
    assert min_samples_leaf <= right <= X.shape[0] - min_samples_leaf


@pytest.mark.parametrize("seed", range(3))
def test_two_features_that_split_the_rows_alike_score_the_same_bits(seed):
    # two classes, whole weights (scan_binary): a threshold's impurity is a function of
    # the partition, not of the order the scan reached it in
    rng = np.random.default_rng(seed)
    X, y, w = _problem(rng, m=80, p=1, n_classes=2)
    X = np.ascontiguousarray(np.column_stack([X[:, 0], 3.0 * X[:, 0] + 1.0, -X[:, 0]]))
    scores = np.full(3, np.nan)
    A.ranked_axis_split(X, y, w, X.shape[0], 2, 3, 1, _state(seed), scores)
    assert scores[0] == scores[1] == scores[2]


@pytest.mark.parametrize("seed", range(3))
def test_xlogx_table_matches_numpy_and_the_scalar_kernel(seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(0, 4, size=50).astype(np.float64)
    table = A.xlogx_table(w, 50, w.sum())
    k = np.arange(int(w.sum()) + 1, dtype=np.float64)
    assert table.shape == k.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(k > 0, k * np.log(k), 0.0)
    np.testing.assert_allclose(table, expected, rtol=1e-14, atol=0)
    # the scan's lookups return exactly the bits of the logarithm they replace
    assert all(table[i] == A.xlogx(float(i)) for i in range(table.shape[0]))
    # fractional or negative weights, or a node heavier than the cap: no table
    frac = w.copy()
    frac[7] += 0.5
    assert A.xlogx_table(frac, 50, frac.sum()).shape == (0,)
    neg = w.copy()
    neg[3] = -1.0
    assert A.xlogx_table(neg, 50, neg.sum()).shape == (0,)
    assert A.xlogx_table(w, 50, A.MAX_XLOGX_TABLE + 1.0).shape == (0,)


def test_best_axis_split_no_valid_split():
    X = np.ones((10, 3))
    y = np.arange(10) % 2
    f, _, _ = A.best_axis_split(X, y, np.ones(10), 10, 2, 3, 1, _state(0))
    assert f == -1


@pytest.mark.parametrize("prior", [1.0, 0.1])
def test_init_theta_matches_reference(prior):
    rng = np.random.default_rng(3)
    X, y, w = _problem(rng, m=50)
    t0, t1 = A.init_theta(X, y, w, 50, 1, 0.2, 4, prior)
    r0, r1 = ref.co2_init_theta(X, y, w, 1, 0.2, 4, prior)
    np.testing.assert_allclose(t0, r0, rtol=1e-12)
    np.testing.assert_allclose(t1, r1, rtol=1e-12)


# ------------------------------------------------------------ surrogate
@pytest.mark.parametrize("seed", range(5))
def test_surrogate_matches_reference_and_bounds_loss(seed):
    rng = np.random.default_rng(seed)
    X, y, wt = _problem(rng, integer_weights=bool(seed % 2))
    for scale in (0.01, 1.0, 30.0):
        w, b, t0, t1 = _params(rng, X.shape[1], 4, scale)
        signs = np.empty(X.shape[0])
        sur, emp = K.surrogate(X, y, wt, X.shape[0], w, b, t0, t1, signs)
        rsur, remp = ref.co2_surrogate(X, y, wt, w, b, t0, t1)
        np.testing.assert_allclose([sur, emp], [rsur, remp], rtol=1e-12)
        np.testing.assert_array_equal(signs, np.where(X @ w + b > 0, 1.0, -1.0))
        # Eq. 5: the surrogate upper-bounds the empirical loss
        assert sur >= emp - 1e-12
        # Eq. 8: the bound tightens as ||w|| grows
        sur_big, _ = K.surrogate(X, y, wt, X.shape[0], 3 * w, 3 * b, t0, t1, signs)
        assert sur_big <= sur + 1e-12
        # CCCP: the linearised objective (Eq. 11) upper-bounds the surrogate
        other_signs = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
        lin = ref.co2_cccp_objective(X, y, wt, w, b, t0, t1, other_signs)
        assert lin >= sur - 1e-12


def test_surrogate_is_tight_for_large_margins():
    rng = np.random.default_rng(0)
    X, y, wt = _problem(rng)
    w, b, t0, t1 = _params(rng, X.shape[1], 4)
    signs = np.empty(X.shape[0])
    sur, emp = K.surrogate(X, y, wt, X.shape[0], 1e6 * w, 1e6 * b, t0, t1, signs)
    np.testing.assert_allclose(sur, emp, rtol=1e-6)


# ------------------------------------------------------------- gradient
def descend_gradient(X, y, wt, rows, w, b, t0, t1, signs, zs=None):
    """The subgradient :func:`descend` steps along on one minibatch: the rows ``rows``.

    One epoch of one minibatch with momentum 0, step size 1 and no projection,
    so the step is ``-gradient`` exactly (``0 * 0 - 1 * g``); ``descend``'s
    scratch keeps the gradients of ``w``, ``theta0`` and ``theta1``. With
    ``zs`` the rows' ``z`` are read from it (``zs[t]`` for ``rows[t]``).
    Returns ``(gw, gb, g0, g1, run)``, ``run`` the minibatch's weighted mean surrogate.
    """
    Xs = np.ascontiguousarray(X[rows])
    m, p, k = len(rows), X.shape[1], t0.shape[0]
    params = _co2_params(batch_size=m, momentum=0.0, cccp_epochs=1, nu=1e300).kernel_args()
    gw, g0, g1 = np.empty(p), np.empty(k), np.empty(k)
    _, vb, _, run, _ = K.descend(
        Xs, y[rows].copy(), wt[rows].copy(), m, signs[rows].copy(),
        np.empty(m) if zs is None else zs, zs is not None, w.copy(), b, 0.0, t0.copy(), t1.copy(),
        np.zeros(p), np.zeros(k), np.zeros(k), gw, g0, g1, np.empty(k), np.empty(k),
        np.empty(m), np.empty(m, dtype=np.int64), np.empty(1, dtype=np.int64), params,
        _state(0), 1.0, np.inf, 0,
    )  # fmt: skip
    return gw, -vb, g0, g1, run


def assert_gradient_is_finite_differences(X, y, wt, rows, w, b, t0, t1, signs):
    """:func:`descend_gradient` on ``rows`` is the central differences of the CCCP
    objective (Eq. 11, ``ref.co2_cccp_objective``) over all of ``X``: step 1e-6,
    ``rtol=1e-5``, ``atol=1e-7``."""
    gw, gb, g0, g1, _ = descend_gradient(X, y, wt, rows, w, b, t0, t1, signs)
    theta = np.concatenate([w, [b], t0, t1])
    p, q = X.shape[1], X.shape[1] + 1 + t0.size  # theta: w | b | theta0 | theta1

    def f(v):
        return ref.co2_cccp_objective(X, y, wt, v[:p], v[p], v[p + 1 : q], v[q:], signs)

    eps = 1e-6
    num = np.array(
        [(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in np.eye(theta.size)]
    )
    np.testing.assert_allclose(num, np.concatenate([gw, [gb], g0, g1]), rtol=1e-5, atol=1e-7)


def _row_dot_python(w, x, b):
    """``b + w . x`` with partial sums over ``j mod 4``, in plain Python (the kernel's order)."""
    s = [0.0, 0.0, 0.0, 0.0]
    p4 = len(w) - len(w) % 4
    for j in range(p4):
        s[j % 4] += float(w[j]) * float(x[j])
    for j in range(p4, len(w)):
        s[0] += float(w[j]) * float(x[j])
    return b + ((s[0] + s[1]) + (s[2] + s[3]))


@pytest.mark.parametrize("seed", range(4))
def test_rows_dot_matches_numpy_and_the_one_row_order(seed):
    rng = np.random.default_rng(seed)
    m, p = int(rng.integers(1, 30)), int(rng.integers(1, 23))
    X, w, b = rng.normal(size=(m, p)), rng.normal(size=p), float(rng.normal())
    lo = int(rng.integers(0, m))
    hi = int(rng.integers(lo, m + 1))  # odd and even counts, empty ranges too
    zs = np.full(m, np.nan)
    K.rows_dot(w, X, lo, hi, b, zs)
    np.testing.assert_allclose(zs[lo:hi], X[lo:hi] @ w + b, rtol=1e-12, atol=1e-12)
    assert [float(z) for z in zs[lo:hi]] == [_row_dot_python(w, X[i], b) for i in range(lo, hi)]
    assert np.isnan(zs[:lo]).all() and np.isnan(zs[hi:]).all()  # nothing outside the range


@pytest.mark.parametrize("seed", range(4))
def test_minibatch_gradient_matches_reference(seed):
    rng = np.random.default_rng(seed)
    X, y, wt = _problem(rng, integer_weights=bool(seed % 2))
    w, b, t0, t1 = _params(rng, X.shape[1], 4)
    signs = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    rows = rng.permutation(X.shape[0]).astype(np.int64)[10:45]
    gw, gb, g0, g1, run = descend_gradient(X, y, wt, rows, w, b, t0, t1, signs)
    rgw, rgb, rg0, rg1, rrun, rwsum = ref.co2_minibatch_gradient(
        X, y, wt, rows, w, b, t0, t1, signs
    )
    np.testing.assert_allclose(gw, rgw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose([gb, run], [rgb, rrun / rwsum], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g0, rg0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g1, rg1, rtol=1e-10, atol=1e-12)
    # with the z the surrogate wrote at the same (w, b): the same bits, and those z are
    # numpy's up to rounding
    zs = np.empty(len(rows))
    Xs = np.ascontiguousarray(X[rows])
    K.surrogate_z(Xs, y[rows], wt[rows], len(rows), w, b, t0, t1, signs[rows].copy(), zs)
    np.testing.assert_allclose(zs, Xs @ w + b, rtol=1e-12, atol=1e-12)
    cached = descend_gradient(X, y, wt, rows, w, b, t0, t1, signs, zs)
    assert cached[1] == gb and cached[4] == run
    for a, c in ((gw, cached[0]), (g0, cached[2]), (g1, cached[3])):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("seed", range(4))
def test_minibatch_gradient_finite_differences(seed):
    """Away from the kinks the subgradient is the gradient of Eq. 11."""
    rng = np.random.default_rng(seed)
    X, y, wt = _problem(rng, m=40)
    w, b, t0, t1 = _params(rng, X.shape[1], 4)
    signs = np.where(rng.random(X.shape[0]) < 0.5, 1.0, -1.0)
    rows = np.arange(X.shape[0], dtype=np.int64)
    assert_gradient_is_finite_differences(X, y, wt, rows, w, b, t0, t1, signs)


# ------------------------------------------------------------------ CCCP
def _cccp_inputs(seed, m=150):
    rng = np.random.default_rng(seed)
    X, y, wt = _problem(rng, m=m)
    X -= np.average(X, axis=0, weights=wt)
    f, thr, _ = A.best_axis_split(X, y, wt, m, 4, 2, 1, _state(seed))
    w = np.zeros(X.shape[1])
    w[f] = 1.0
    t0, t1 = A.init_theta(X, y, wt, m, f, thr, 4, 1.0)
    return X, y, wt, w, -thr, t0, t1


def assert_cccp_matches_reference(X, y, wt, w, b, t0, t1, *, nu, seed):
    """Six CCCP iterations (two epochs of minibatches of 32, step 0.03, tol 1e-4) of the
    kernel and of ``ref.co2_cccp`` from the same start: the same surrogate history
    (``rtol=1e-9``) and parameters (``rtol=1e-8``, ``atol=1e-10``). Returns the kernel's
    ``w``, ``b`` and surrogate history."""
    params = _co2_params(
        nu=nu, learning_rate=0.03, batch_size=32, cccp_epochs=2, max_cccp_iter=6, tol=1e-4
    ).kernel_args()
    kw, kt0, kt1 = w.copy(), t0.copy(), t1.copy()
    history = np.empty(params.max_cccp_iter + 1)
    # the kernel reorders its rows in place: it gets copies, the reference the originals
    kb, _, n_hist = K.cccp(
        X.copy(), y.copy(), wt.copy(), X.shape[0], kw, b, kt0, kt1, params, _state(seed), history
    )
    rw, rb, rt0, rt1, rhist = ref.co2_cccp(X, y, wt, w, b, t0, t1, params, ref.Co2Rng(seed))
    np.testing.assert_allclose(history[:n_hist], rhist, rtol=1e-9)
    np.testing.assert_allclose(
        np.concatenate([kw, [kb], kt0, kt1]),
        np.concatenate([rw, [rb], rt0, rt1]),
        rtol=1e-8,
        atol=1e-10,
    )
    return kw, kb, history[:n_hist]


@pytest.mark.parametrize("seed", range(4))
def test_partition_change_count_and_settled_test_match_numpy(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 3000))
    prev = rng.choice([-1.0, 1.0], size=m + 5)
    signs = prev.copy()
    signs[rng.random(m + 5) < rng.uniform(0.0, 0.01)] *= -1.0
    n = K.n_changed(signs, prev, m)
    assert n == np.count_nonzero(signs[:m] != prev[:m])  # only the first m rows count
    for batch_size in (1, 100, m + 1):
        for tol in (0.0, 1e-3, 1e-2):
            params = _co2_params(batch_size=batch_size, tol=tol).kernel_args()
            expected = m >= batch_size and n <= tol * m
            assert K.partition_settled(n, m, params) == expected


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("nu", [0.5, 10.0])
def test_cccp_matches_reference(seed, nu):
    kw, kb, _ = assert_cccp_matches_reference(*_cccp_inputs(seed), nu=nu, seed=seed)
    assert kw @ kw + kb * kb <= nu * (1 + 1e-12)


def _absent_class_inputs(seed, present):
    """:func:`_cccp_inputs` with 6 classes of which only ``present`` occur (labels kept)."""
    X, y, wt, w, b, t0, t1 = _cccp_inputs(seed)
    y = np.asarray(present)[y % len(present)]  # y in 0..3 onto the present classes
    y[: len(present)] = present  # (each of them, when more than 4)
    f = int(np.flatnonzero(w)[0])
    t0, t1 = A.init_theta(X, y, wt, X.shape[0], f, -b, 6, 1.0)
    return X, y, wt, w, b, t0, t1


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("present", [(0, 3), (1, 2, 5), (0, 1, 2, 3, 4)])
def test_cccp_on_the_present_classes_matches_reference(seed, present):
    """With some of the 6 classes absent from the rows, the kernel runs on the present classes'
    logits as ``ref.co2_cccp`` does (relabelled by rank, the absent ones back at ``-inf``)."""
    X, y, wt, w, b, t0, t1 = _absent_class_inputs(seed, present)
    assert_cccp_matches_reference(X, y, wt, w, b, t0, t1, nu=10.0, seed=seed)


@pytest.mark.parametrize("seed", range(3))
def test_cccp_keeps_the_labels_and_leaves_absent_classes_at_minus_inf(seed):
    X, y, wt, w, b, t0, t1 = _absent_class_inputs(seed, (1, 2, 5))
    params = _co2_params(batch_size=32).kernel_args()
    history = np.empty(params.max_cccp_iter + 1)
    Xk, yk, wk = X.copy(), y.copy(), wt.copy()
    K.cccp(Xk, yk, wk, X.shape[0], w, b, t0, t1, params, _state(seed), history)
    # rows move together, each with its own label and weight (relabelled for the descent, back)
    before = sorted(zip(map(bytes, X), y.tolist(), wt.tolist(), strict=True))
    assert sorted(zip(map(bytes, Xk), yk.tolist(), wk.tolist(), strict=True)) == before
    absent = [0, 3, 4]
    assert np.all(t0[absent] == -np.inf) and np.all(t1[absent] == -np.inf)
    assert np.all(np.isfinite(t0[[1, 2, 5]])) and np.all(np.isfinite(t1[[1, 2, 5]]))
    # the surrogate of the returned stump is that of its present classes' leaves alone
    signs = np.empty(X.shape[0])
    full, _ = K.surrogate(Xk, yk, wk, X.shape[0], w, 0.0, t0, t1, signs)
    code = np.searchsorted([1, 2, 5], yk)
    part, _ = K.surrogate(Xk, code, wk, X.shape[0], w, 0.0, t0[[1, 2, 5]], t1[[1, 2, 5]], signs)
    assert full == part


def test_cccp_with_every_class_or_one_is_the_loop_itself():
    """All classes present, or a single one: no relabelling, the leaves as given."""
    for present in [(0, 1, 2, 3, 4, 5), (2,)]:
        X, y, wt, w, b, t0, t1 = _absent_class_inputs(0, present)
        params = _co2_params(batch_size=32).kernel_args()
        out = []
        for kernel in (K.cccp, K.cccp_leaves):
            kw, k0, k1 = w.copy(), t0.copy(), t1.copy()
            history = np.empty(params.max_cccp_iter + 1)
            kb, n_iter, n_hist = kernel(
                X.copy(), y.copy(), wt.copy(), X.shape[0], kw, b, k0, k1, params, _state(0),
                history,
            )  # fmt: skip
            out.append((kw.tobytes(), kb, k0.tobytes(), k1.tobytes(), history[:n_hist].tobytes()))
        assert out[0] == out[1]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("nu", [0.1, 4.0, 100.0])
def test_cccp_surrogate_non_increasing_and_improves(seed, nu):
    X, y, wt, w, b, t0, t1 = _cccp_inputs(seed, m=300)
    history = np.empty(31)
    signs = np.empty(X.shape[0])
    params = _co2_params(nu=nu, max_cccp_iter=30, tol=1e-4).kernel_args()
    kb, n_iter, n_hist = K.cccp(X, y, wt, X.shape[0], w, b, t0, t1, params, _state(seed), history)
    hist = history[:n_hist]  # X, y, wt are now reordered alike: the surrogate below is the same
    assert n_hist >= 2 and 1 <= n_iter <= 30
    assert np.all(np.diff(hist) <= 0)
    assert hist[-1] < hist[0]
    # the returned parameters are the last accepted iterate
    sur, emp = K.surrogate(X, y, wt, X.shape[0], w, kb, t0, t1, signs)
    np.testing.assert_allclose(sur, hist[-1], rtol=1e-12)
    assert emp <= sur + 1e-12


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("targets", [False, True])
def test_permute_rows_matches_fancy_indexing(seed, targets):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 60))
    X = rng.normal(size=(m + 3, 5))
    y = rng.normal(size=(m + 3, 2)) if targets else rng.integers(0, 4, m + 3)
    wt, signs = rng.random(m + 3), rng.choice([-1.0, 1.0], m + 3)
    perm = rng.permutation(m)
    expect = [a.copy() for a in (X, y, wt, signs)]
    for a in expect:
        a[:m] = a[perm]
    seen, xrow = np.empty(m, dtype=np.bool_), np.empty(5)
    ytmp = np.empty((1, 2)) if targets else np.empty(1, dtype=np.int64)
    K.permute_rows(perm, m, X, y, wt, signs, seen, xrow, ytmp)
    for got, want in zip((X, y, wt, signs), expect, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("m, max_samples", [(50, -1), (50, 50), (50, 80), (500, 64), (64, 1)])
def test_cccp_rows_draws_distinct_rows_only_above_the_cap(m, max_samples):
    state = _state(7)
    pick = N.cccp_rows(m, max_samples, state)
    if max_samples < 0 or m <= max_samples:
        np.testing.assert_array_equal(pick, np.arange(m))
        assert state[0] == _state(7)[0]  # no draw: nodes under the cap are unchanged
        return
    assert pick.shape == (max_samples,)
    assert np.all(np.diff(pick) > 0) and 0 <= pick[0] and pick[-1] < m  # distinct, sorted
    np.testing.assert_array_equal(pick, N.cccp_rows(m, max_samples, _state(7)))  # seeded


def test_cccp_rows_is_uniform():
    # each row is drawn with probability max_samples / m
    counts = np.zeros(40)
    for seed in range(2000):
        counts[N.cccp_rows(40, 10, _state(seed + 1))] += 1
    expected = 2000 * 10 / 40
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_max_cccp_samples_at_least_the_node_size_changes_nothing():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    full = _grow(X, y, np.ones(300), 3)
    for cap in (300, 1000):
        for a, b in zip(full, _grow(X, y, np.ones(300), 3, max_cccp_samples=cap), strict=True):
            np.testing.assert_array_equal(a, b)
    capped = _grow(X, y, np.ones(300), 3, max_cccp_samples=60)
    assert not np.array_equal(capped[3][0], full[3][0])  # the root split is fit on 60 rows


def _ref_split_sampled(X, y, rw, rows, tree_seed, node, params, n_classes):
    """numpy reference of a node above max_cccp_samples rows: ``(w, b, goes right)``."""
    m = rows.shape[0]
    rng = ref.Co2Rng(ref.co2_node_seed(tree_seed, node))
    pick = list(range(m))
    for k in range(params.max_cccp_samples):  # cccp_rows: partial Fisher-Yates
        j = k + rng.integer(m - k)
        pick[k], pick[j] = pick[j], pick[k]
    r = rows[np.sort(pick[: params.max_cccp_samples])]
    mu = (rw[r][:, None] * X[r]).sum(axis=0) / rw[r].sum()  # the sample's mean
    Xc, yc, wc = X[r] - mu, y[r], rw[r]
    f, thr, _ = ref.co2_best_axis_split(
        Xc, yc, wc, n_classes, params.max_features, params.min_samples_leaf, rng
    )
    t0, t1 = ref.co2_init_theta(Xc, yc, wc, f, thr, n_classes, A.THETA_PRIOR)
    w = np.zeros(X.shape[1])
    w[f] = 1.0
    w, b, *_ = ref.co2_cccp(Xc, yc, wc, w, -thr, t0, t1, params, rng)
    b = b - w @ mu
    right = X[rows] @ w + b > 0
    if min(right.sum(), m - right.sum()) < max(params.min_samples_leaf, 1):
        w = np.zeros(X.shape[1])
        w[f] = 1.0
        b = -thr - mu[f]
        right = X[rows, f] + b > 0
    return w, b, right


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_samples_leaf", [1, 30])
def test_sampled_split_matches_reference(seed, min_samples_leaf):
    # a node above max_cccp_samples rows: axis-aligned start and CCCP on the sample, the
    # sides of all rows from X itself (no block), the stored split is the one partitioned;
    # the kernel standardises the raw rows as it reads them, the reference takes a copy
    rng = np.random.default_rng(seed)
    raw, y, rw = _problem(rng, m=300)
    mean, scale = rng.normal(size=5), rng.uniform(0.3, 3.0, size=5)
    X = (raw - mean) / scale
    params = _co2_params(
        max_cccp_samples=70, max_features=3, min_samples_leaf=min_samples_leaf, max_cccp_iter=4
    ).kernel_args()
    rows = np.concatenate([[0], rng.permutation(np.arange(1, 300))[:250]]).astype(np.int64)
    start, end = 1, 251  # the node's slice of rows, not at 0
    node_rows = rows[start:end].copy()
    weights = np.zeros((3, X.shape[1]))
    bias, value, nns = np.zeros(3), np.zeros((3, 4)), np.zeros(3)
    source = N.dense_source(raw, mean, scale)
    n_left, n_iter, oblique = N.split_node(
        (source, y, rw, rows, NO_OOB),
        start,
        end,
        2,
        np.uint64(seed + 11),
        (weights, bias, value, nns),
        params,
    )
    w, b, right = _ref_split_sampled(X, y, rw, node_rows, seed + 11, 2, params, 4)
    np.testing.assert_allclose(weights[2], w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(bias[2], b, rtol=1e-8, atol=1e-10)
    assert oblique == (np.count_nonzero(weights[2]) > 1)
    assert n_iter > 0 and n_left == np.count_nonzero(~right)
    assert rows[0] == 0 and rows[251:].size == 0  # only the node's slice moves
    moved = rows[start:end]
    assert sorted(moved) == sorted(node_rows)
    z = X[moved] @ weights[2] + bias[2]  # the stored split reproduces the partition
    assert np.all(z[:n_left] <= 0) and np.all(z[n_left:] > 0)
    assert min(n_left, 250 - n_left) >= min_samples_leaf


def test_sampled_split_falls_back_to_all_rows_without_a_sample_split():
    # min_samples_leaf above half the sample: no axis-aligned split of the sample, so
    # the node is split as a node of all its rows (stump on all rows, CCCP on a sample)
    rng = np.random.default_rng(5)
    X, y, rw = _problem(rng, m=200)
    params = _co2_params(max_cccp_samples=40, min_samples_leaf=25, max_cccp_iter=3)
    kernel_params = params.kernel_args()
    table = (np.zeros((1, X.shape[1])), np.zeros(1), np.zeros((1, 4)), np.zeros(1))
    rows = np.arange(200)
    source = N.dense_source(X)
    data = (source, y, rw, rows, NO_OOB)
    out = N.split_sampled(data, 0, 200, 0, np.uint64(3), table, kernel_params)
    assert out[0] == N.NO_SAMPLE_SPLIT and np.array_equal(rows, np.arange(200))
    got = N.split_node(data, 0, 200, 0, np.uint64(3), table, kernel_params)
    block_table = (np.zeros((1, X.shape[1])), np.zeros(1), np.zeros((1, 4)), np.zeros(1))
    block_rows = np.arange(200)
    N.node_value(y, rw, block_rows, 0, 200, 0, block_table[2], block_table[3])
    expected = N.split_block(
        (source, y, rw, block_rows, NO_OOB), 0, 200, 0, np.uint64(3), block_table, kernel_params
    )
    assert got == expected and got[0] >= 25
    for a, b in zip(table, block_table, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(rows, block_rows)


@pytest.mark.parametrize("sparse", [False, True])
def test_grown_tree_partitions_as_stored_with_sampled_nodes(sparse):
    # every internal node's stored split sends its training weight to its children
    rng = np.random.default_rng(2)
    X, y, rw = _problem(rng, m=400)
    X[rng.random(X.shape) < 0.3] = 0.0
    source = X
    if sparse:
        Xsp = sp.csr_matrix(X)
        Xsp.indices = Xsp.indices.astype(np.int64)
        Xsp.indptr = Xsp.indptr.astype(np.int64)
        source = co2.scaled_csr(Xsp, np.ones(X.shape[1]))
    left, right, W, bias, value, nns, depth, _ = _grow(source, y, rw, 4, max_cccp_samples=50)
    W = weight_table(W, X.shape[1])
    reach = {0: np.flatnonzero(rw > 0)}
    for node in range(left.shape[0]):
        if left[node] < 0:
            continue
        r = reach[node]
        goes = X[r] @ W[node] + bias[node] > 0
        reach[left[node]], reach[right[node]] = r[~goes], r[goes]
        np.testing.assert_allclose(nns[left[node]], rw[r[~goes]].sum())
        np.testing.assert_allclose(nns[right[node]], rw[r[goes]].sum())
    assert nns[0] == rw.sum() and max(nns[left >= 0]) > 50  # sampled nodes were split


# ----------------------------------------------------------------- trees
def _co2_params(**kw):
    params = dict(
        max_features=2,
        max_depth=None,
        min_samples_split=2,
        min_samples_leaf=1,
        max_leaf_nodes=None,
        min_impurity_decrease=0.0,
        nu=10.0,
        learning_rate=0.03,
        batch_size=100,
        momentum=0.9,
        cccp_epochs=1,
        max_cccp_iter=5,
        tol=1e-3,
        bootstrap=True,
        max_samples=None,
        max_cccp_samples=None,
        max_split_features=None,
        min_samples_oblique=1,
        oblique_penalty=None,
        oblique_test="fit",
    )
    return co2.CO2Params(**{**params, **kw})


def _grow(X, y, row_weight, n_classes, seed=0, **kw):
    return co2.grow_tree(X, y, row_weight, n_classes, seed, _co2_params(**kw))


def weight_table(weights, n_features):
    """``grow_tree``'s weights as a dense (n_nodes, n_features) table (CSR input keeps a CSR)."""
    if not isinstance(weights, tuple):
        return weights
    indptr, index, value = weights
    table = np.zeros((indptr.shape[0] - 1, n_features))
    table[np.repeat(np.arange(table.shape[0]), np.diff(indptr)), index] = value
    return table


def _tree_from(arrays, n_features=4):
    from obliquetrees._core.tree import ObliqueTree

    left, right, weights, bias, value, nns, depth, _ = arrays
    weights = weight_table(weights, n_features)
    return ObliqueTree.from_dense(left, right, weights, bias, value, nns, depth)


def _leaf_of(tree, X):
    return np.array([ref.walk(tree, x)[-1] for x in X])


@pytest.mark.parametrize("seed", range(3))
def test_grown_tree_routes_and_histograms(seed):
    rng = np.random.default_rng(seed)
    X, y, _ = _problem(rng, m=200, p=4, n_classes=3)
    counts = co2.bootstrap_counts(200, seed)
    arrays = _grow(X, y, counts, 3, seed=seed)
    tree = _tree_from(arrays)
    tree.check_invariants()
    rows = np.flatnonzero(counts > 0)
    leaves = _leaf_of(tree, X[rows])
    # leaves hold the weighted class distribution of the rows reaching them
    hists = ref.co2_leaf_histograms(tree.value, leaves, y[rows], counts[rows], 3)
    for leaf, h in hists.items():
        np.testing.assert_allclose(tree.value[leaf], h, rtol=1e-12)
        np.testing.assert_allclose(tree.n_node_samples[leaf], counts[rows][leaves == leaf].sum())
    # fully grown: every leaf is pure (continuous X has no duplicate rows)
    assert all(np.count_nonzero(h) == 1 for h in hists.values())
    assert tree.n_node_samples[0] == counts.sum()
    # breadth-first ids: depth never decreases with the node id
    assert np.all(np.diff(tree.depth) >= 0)


def test_grow_tree_limits():
    rng = np.random.default_rng(1)
    X, y, _ = _problem(rng, m=300, p=4, n_classes=3)
    ones = np.ones(300)
    t = _tree_from(_grow(X, y, ones, 3, max_depth=3))
    assert t.max_depth <= 3
    t = _tree_from(_grow(X, y, ones, 3, max_leaf_nodes=7))
    assert t.n_leaves == 7
    t = _tree_from(_grow(X, y, ones, 3, min_samples_leaf=20))
    leaves = _leaf_of(t, X)
    assert np.bincount(leaves)[np.unique(leaves)].min() >= 20
    t = _tree_from(_grow(X, y, ones, 3, min_samples_split=100))
    internal = ~t.is_leaf
    assert np.all(t.n_node_samples[internal] >= 100)


@pytest.mark.parametrize("limits", [{"max_depth": 2}, {"max_leaf_nodes": 5}])
def test_leaves_kept_by_the_limits_hold_their_histograms(limits):
    """Nodes the grower never reaches (limits) still get their class distribution."""
    rng = np.random.default_rng(4)
    X, y, w = _problem(rng, m=200, p=4, n_classes=3, integer_weights=False)
    tree = _tree_from(_grow(X, y, w, 3, **limits))
    leaves = _leaf_of(tree, X)
    for leaf, h in ref.co2_leaf_histograms(tree.value, leaves, y, w, 3).items():
        np.testing.assert_allclose(tree.value[leaf], h, rtol=1e-12)
        np.testing.assert_allclose(tree.n_node_samples[leaf], w[leaves == leaf].sum())
    assert np.all(tree.n_node_samples > 0)


def test_grow_tree_is_deterministic_and_seed_dependent():
    rng = np.random.default_rng(2)
    X, y, _ = _problem(rng, m=200, p=4, n_classes=3)
    ones = np.ones(200)
    a = _grow(X, y, ones, 3, seed=11)
    b = _grow(X, y, ones, 3, seed=11)
    c = _grow(X, y, ones, 3, seed=12)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not (a[2].shape == c[2].shape and np.array_equal(a[2], c[2]))


def test_pure_and_single_sample_nodes_are_leaves():
    X = np.random.default_rng(0).normal(size=(5, 3))
    arrays = _grow(X, np.zeros(5, dtype=np.int64), np.ones(5), 1)
    assert arrays[0].shape == (1,)
    arrays = _grow(X[:1], np.zeros(1, dtype=np.int64), np.ones(1), 2)
    assert arrays[0].shape == (1,)


def test_kernels_take_the_parameters_by_their_estimator_names():
    from obliquetrees import CO2ForestClassifier

    for kernel in (N.split_node, K.cccp):
        assert "params" in inspect.signature(kernel.py_func).parameters
    fields = [f.name for f in co2.dataclasses.fields(co2.CO2Params)]
    assert list(co2.CO2KernelParams._fields) == fields
    assert set(fields) <= set(CO2ForestClassifier().get_params())


def test_kernel_args_are_scalars_of_the_kernel_types():
    params = _co2_params(max_depth=np.int64(3), nu=10).kernel_args()
    assert isinstance(params, co2.CO2KernelParams)
    assert params.max_depth == 3 and params.max_leaf_nodes == -1  # None: no limit
    assert params.max_samples == -1  # None: as many draws as rows
    assert params._asdict() == {
        **co2.dataclasses.asdict(_co2_params(max_depth=3, nu=10)),
        "max_leaf_nodes": -1,
        "max_samples": -1,
        "max_cccp_samples": -1,
        "max_split_features": -1,
        "oblique_penalty": -1.0,  # None: no axis-or-oblique test
        "oblique_test": 0,  # "fit"
    }
    for name, value in params._asdict().items():
        field_type = co2.CO2Params.__dataclass_fields__[name].type
        kernel_type = float if field_type == float | None else field_type
        assert type(value) is (kernel_type if kernel_type in (float, bool) else int), name
    assert _co2_params(oblique_penalty=2).kernel_args().oblique_penalty == 2.0


def test_params_cast_to_the_kernel_types():
    params = _co2_params(
        nu=10, max_depth=np.int64(3), max_features=np.int32(2), bootstrap=np.bool_(1)
    )
    assert type(params.nu) is float and params.nu == 10.0
    assert type(params.max_depth) is int and type(params.max_features) is int
    assert params.bootstrap is True and params.max_leaf_nodes is None
    with pytest.raises(co2.dataclasses.FrozenInstanceError):
        params.nu = 1.0


# ------------------------------------------------- min_impurity_decrease
def _entropy_bits(hist):
    p = hist[hist > 0] / hist.sum()
    return float(-(p * np.log2(p)).sum())


def _reference_decrease(y, w, goes_left, n_classes, total):
    """scikit-learn's weighted impurity decrease (entropy in bits), in plain numpy."""
    left = np.bincount(y[goes_left], weights=w[goes_left], minlength=n_classes)
    right = np.bincount(y[~goes_left], weights=w[~goes_left], minlength=n_classes)
    n_l, n_r = left.sum(), right.sum()
    n_t = n_l + n_r
    h_l = _entropy_bits(left) if n_l > 0 else 0.0
    h_r = _entropy_bits(right) if n_r > 0 else 0.0
    return n_t / total * (_entropy_bits(left + right) - n_r / n_t * h_r - n_l / n_t * h_l)


@pytest.mark.parametrize("seed", range(4))
def test_entropy_decrease_matches_the_reference(seed):
    from obliquetrees._training.grower import entropy_decrease

    rng = np.random.default_rng(seed)
    n, n_classes = 60, 3
    y = rng.integers(0, n_classes, n).astype(np.int64)
    w = rng.uniform(0.0, 2.0, n)
    rows = rng.permutation(n).astype(np.int64)
    start, mid, end = 5, 5 + int(rng.integers(0, 50)), 55  # a node's slice, split at mid
    node = rows[start:end]
    goes_left = np.isin(np.arange(n), rows[start:mid])
    total = 3.0 * w.sum()  # the tree's weight: the node is part of it
    got = entropy_decrease(y, w, rows, start, mid, end, n_classes, total)
    want = _reference_decrease(y[node], w[node], goes_left[node], n_classes, total)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_entropy_decrease_is_scikit_learns_impurity_improvement():
    """The stump of a weighted DecisionTreeClassifier(criterion="entropy") gives the same number."""
    from sklearn.tree import DecisionTreeClassifier

    from obliquetrees._training.grower import entropy_decrease

    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=80) > 0).astype(np.int64) + (X[:, 1] > 1)
    w = rng.uniform(0.5, 3.0, 80)
    stump = DecisionTreeClassifier(criterion="entropy", max_depth=1, random_state=0)
    t = stump.fit(X, y, sample_weight=w).tree_
    wn, imp = t.weighted_n_node_samples, t.impurity
    left, right = t.children_left[0], t.children_right[0]
    sklearn_decrease = (wn[0] / wn[0]) * (
        imp[0] - wn[right] / wn[0] * imp[right] - wn[left] / wn[0] * imp[left]
    )
    goes_left = X[:, t.feature[0]] <= t.threshold[0]
    rows = np.concatenate([np.flatnonzero(goes_left), np.flatnonzero(~goes_left)])
    got = entropy_decrease(y, w, rows, 0, goes_left.sum(), 80, 3, w.sum())
    np.testing.assert_allclose(got, sklearn_decrease, rtol=1e-10)


def _stored_decreases(tree):
    """Weighted impurity decrease of every split of a grown tree, from its stored nodes."""
    total = tree.n_node_samples[0]
    out = []
    for node in np.flatnonzero(tree.children_left >= 0):
        left, right = tree.children_left[node], tree.children_right[node]
        n_t, n_l, n_r = (tree.n_node_samples[i] for i in (node, left, right))
        h = [_entropy_bits(tree.value[i]) for i in (node, left, right)]
        out.append(n_t / total * (h[0] - n_r / n_t * h[2] - n_l / n_t * h[1]))
    return np.array(out)


@pytest.mark.parametrize("sparse", [False, True])
def test_min_impurity_decrease_keeps_only_splits_that_reach_it(sparse):
    import scipy.sparse as sp

    from obliquetrees.utils.validation import as_training_csr

    rng = np.random.default_rng(5)
    X, y, w = _problem(rng, m=300, p=4, n_classes=3, integer_weights=False)
    source = co2.scaled_csr(as_training_csr(sp.csr_matrix(X)), np.ones(4)) if sparse else X
    full = _tree_from(co2.grow_tree(source, y, w, 3, 0, _co2_params()))
    value = 0.01
    arrays = co2.grow_tree(source, y, w, 3, 0, _co2_params(min_impurity_decrease=value))
    pruned = _tree_from(arrays)
    pruned.check_invariants()
    decreases = _stored_decreases(pruned)
    assert decreases.size >= 3 and decreases.min() >= value - 1e-12
    assert pruned.n_leaves < full.n_leaves
    # fully grown trees end in pure leaves; rejected splits leave impure ones
    assert all(np.count_nonzero(full.value[full.is_leaf], axis=1) == 1)
    assert np.any(np.count_nonzero(pruned.value[pruned.is_leaf], axis=1) > 1)
    # a rejected split is a leaf: no weights left on it
    leaf_weights = np.diff(pruned.weight_indptr)[pruned.is_leaf]
    assert np.all(leaf_weights == 0)
    assert arrays[-1][1] + arrays[-1][2] == pruned.node_count // 2  # splits counted as kept


def test_min_impurity_decrease_above_the_root_entropy_keeps_a_single_leaf():
    rng = np.random.default_rng(6)
    X, y, w = _problem(rng, m=200, p=4, n_classes=2, integer_weights=False)
    root_entropy = _entropy_bits(np.bincount(y, weights=w))
    tree = _tree_from(_grow(X, y, w, 2, min_impurity_decrease=root_entropy + 1e-9))
    assert tree.node_count == 1
    np.testing.assert_allclose(tree.value[0], np.bincount(y, weights=w) / w.sum())


# ------------------------------------------------------------ max_samples
def test_bootstrap_counts_draw_max_samples_rows():
    default = co2.bootstrap_counts(500, 3)
    np.testing.assert_array_equal(default, co2.bootstrap_counts(500, 3, 500))
    assert default.sum() == 500
    for n_draws in (1, 120, 1500):
        counts = co2.bootstrap_counts(500, 3, n_draws)
        assert counts.shape == (500,) and counts.sum() == n_draws
