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


def monotone_violations(
    predict, X, monotonic_cst, *, n_lines, n_steps=25, nan_fraction=0.0, seed=0
):
    """Largest move against ``monotonic_cst`` of ``predict`` along lines in constrained features.

    Each line starts at a row of ``X`` drawn at random (with a fraction
    ``nan_fraction`` of its *other* features set to NaN) and sweeps one
    constrained feature over ``n_steps`` increasing values spanning beyond the
    feature's range in ``X`` (so splits at either end are crossed). Returns
    the largest ``-c * (f(t_{k+1}) - f(t_k))`` over every line and step: at
    most 0 (or a rounding error) when the model is monotone as constrained.

    Parameters
    ----------
    predict : callable
        ``X -> ndarray of shape (n,)``: a regressor's predictions or a binary
        classifier's probability of ``classes_[1]``.
    X : ndarray of shape (n_samples, n_features), NaN-free
    monotonic_cst : array-like of int of shape (n_features,)
    n_lines : int
        Lines per constrained feature.
    """
    rng = np.random.default_rng(seed)
    cst = np.asarray(monotonic_cst)
    worst = -np.inf
    for j in np.flatnonzero(cst):
        low, high = X[:, j].min(), X[:, j].max()
        pad = 0.25 * (high - low) + 1.0
        steps = np.linspace(low - pad, high + pad, n_steps)
        base = X[rng.integers(len(X), size=n_lines)].copy()
        others = np.arange(X.shape[1]) != j
        hidden = (rng.random(base.shape) < nan_fraction) & others
        base[hidden] = np.nan
        lines = np.repeat(base, n_steps, axis=0)
        lines[:, j] = np.tile(steps, n_lines)
        values = np.asarray(predict(lines), dtype=np.float64).reshape(n_lines, n_steps)
        worst = max(worst, float((-cst[j] * np.diff(values, axis=1)).max()))
    return worst


def monotone_problem(seed, n=300, d=5, nan_rows=0.0):
    """Random data, a random constraint vector and targets that follow it, plus noise.

    At least one feature is constrained; the target rises with the features
    constrained +1, falls with those constrained -1 and varies freely with the
    others. Returns ``X`` (NaN in a fraction ``nan_rows`` of the rows, one
    random feature each), the regression target, binary labels and ``cst``.
    """
    rng = np.random.default_rng(seed)
    cst = rng.integers(-1, 2, size=d)
    cst[rng.integers(d)] = rng.choice([-1, 1])
    X = rng.normal(size=(n, d))
    free = cst == 0
    y = X @ (cst * rng.uniform(0.5, 2.0, size=d)) + np.sin(2 * X[:, free]).sum(axis=1)
    y += 0.3 * rng.normal(size=n)
    hidden = rng.random(n) < nan_rows
    X[hidden, rng.integers(d, size=hidden.sum())] = np.nan
    return X, y, (y > np.median(y)).astype(int), cst


def monotone_problem_with_free_input(seed, **kw):
    """:func:`monotone_problem` with at least one free input (feature 0 freed if none is)."""
    X, y, labels, cst = monotone_problem(seed, **kw)
    if np.all(cst != 0):
        cst[0] = 0
    return X, y, labels, cst


def record_grafts(monkeypatch, module):
    """Every ``module.graft_sum`` call of a fit, as ``(args, result)`` pairs (the list fills
    as the fit runs; the calls still graft)."""
    from obliquetrees._core.graft import graft_sum

    grafts = []

    def recording_graft(*args):
        grafts.append((args, graft_sum(*args)))
        return grafts[-1][1]

    monkeypatch.setattr(module, "graft_sum", recording_graft)
    return grafts


def model_violation(model, X, cst, *, n_lines, seed=0):
    """:func:`monotone_violations` of a fitted regressor or binary classifier (P(classes_[1])).

    Lines start at NaN-free rows of ``X``, with and without NaN (30 %) in the
    features other than the swept one.
    """
    if hasattr(model, "predict_proba"):
        predict = lambda Z: model.predict_proba(Z)[:, 1]  # noqa: E731
    else:
        predict = model.predict
    X = X[~np.isnan(X).any(axis=1)]
    return max(
        monotone_violations(predict, X, cst, n_lines=n_lines, nan_fraction=f, seed=seed)
        for f in (0.0, 0.3)
    )


def check_monotonic_api(make, X, y, labels, cst):
    """scikit-learn's behaviour of ``monotonic_cst`` on the estimators ``make(**params)`` builds.

    ``make(classifier, **params)``: multiclass is refused with scikit-learn's
    message, a dict by feature name (DataFrame input) equals the array, all
    zeros equal None (bit for bit), and a constrained model pickles.
    """
    import pickle

    import pandas as pd
    import pytest

    with pytest.raises(ValueError, match="not supported with multiclass"):
        make(True, monotonic_cst=cst).fit(X, np.arange(len(y)) % 3)
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    by_name = {name: int(c) for name, c in zip(names, cst, strict=True) if c}
    for classifier, target in ((False, y), (True, labels)):
        array = make(classifier, monotonic_cst=cst).fit(X, target)
        named = make(classifier, monotonic_cst=by_name).fit(frame, target)
        output = "predict_proba" if classifier else "predict"
        want = getattr(array, output)(X)
        assert np.array_equal(getattr(named, output)(frame), want)
        assert np.array_equal(getattr(pickle.loads(pickle.dumps(array)), output)(X), want)
        zeros = make(classifier, monotonic_cst=[0] * X.shape[1]).fit(X, target)
        free = make(classifier).fit(X, target)
        assert np.array_equal(getattr(zeros, output)(X), getattr(free, output)(X))
    with pytest.raises(ValueError, match="monotonic_cst has shape"):
        make(False, monotonic_cst=[1]).fit(X, y)


def monotone_cost(make, seed=8):
    """Held-out R^2 lost to the constraints by the regressors ``make(False, **params)`` builds.

    On :func:`monotone_problem` (600 rows: 400 to train, 200 to score).
    """
    X, y, _, cst = monotone_problem(seed, n=600)
    train, test = np.arange(400), np.arange(400, 600)
    free = make(False).fit(X[train], y[train]).score(X[test], y[test])
    return free - make(False, monotonic_cst=cst).fit(X[train], y[train]).score(X[test], y[test])


def sparse_monotone_violation(make, classifier, seed=7, **params):
    """:func:`model_violation` of ``make(classifier, **params)`` fitted on CSR input."""
    X, y, labels, cst = monotone_problem(seed)
    X[np.abs(X) < 0.5] = 0.0
    model = make(classifier, monotonic_cst=cst, **params)
    model.fit(sp.csr_matrix(X), labels if classifier else y)
    return model_violation(model, X, cst, n_lines=200)
