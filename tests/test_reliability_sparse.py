"""Sparse input at scale and the fitted arrays at export (issue 37).

- Soft-routed prediction (soft trees, E2EDT's ``"soft"`` and ``"hybrid"``
  probabilities) of a CSR matrix never densifies it: memory independent of
  ``n_features``, outputs those of the dense rows bit for bit.
- CO2 growth on a CSR matrix stores each split's weights sparse, not one
  row of ``n_features`` per node.
- ``to_onnx`` runs the checks unpickling runs: a tampered model raises the
  unpickling ``ValueError`` instead of exporting a wrong or broken graph.
- Dense and CSR fits of the same data with the same seed: the same splits,
  labels and outputs (to 1e-9) for every public estimator, except those of
  ``DENSE_CSR_DIFFER`` (strict xfails, with the reason).
"""

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from obliquetrees import E2EDTClassifier, SoftTreeClassifier, SoftTreeRegressor
from tests.adversarial._subprocess import assert_ok, run_python

pytest.importorskip("numba")

LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="ru_maxrss in KiB, /proc/self/statm and RLIMIT_AS are Linux specifics",
)


def wide_csr(n_rows, n_features, per_row=15, seed=0):
    """A CSR of ``per_row`` entries a row, one of them in the first 10 columns.

    The target is a linear function of those 10 columns, so the trees split.
    Built from its arrays (``scipy.sparse.random`` draws from all
    ``n_rows * n_features`` positions).
    """
    rng = np.random.default_rng(seed)
    cols = rng.integers(10, n_features, size=(n_rows, per_row))
    cols[:, 0] = rng.integers(0, 10, size=n_rows)
    cols.sort(axis=1)
    data = rng.random((n_rows, per_row)) + 0.5
    indptr = np.arange(0, n_rows * per_row + 1, per_row)
    X = sp.csr_matrix((data.ravel(), cols.ravel(), indptr), shape=(n_rows, n_features))
    X.sum_duplicates()
    score = np.asarray(X[:, :10] @ np.linspace(-1.0, 1.0, 10)).ravel()
    return X, score


# --------------------------------------------------------- soft routing on CSR
#: Soft-tree settings that grow depth-2 trees on 300 rows of :func:`wide_csr`: the
#: defaults at 2000 features; at 10**6 (where each SGD step costs O(n_features))
#: fewer epochs and restarts, with a step size at which each model splits.
SOFT_SETTINGS = {
    2000: ({}, {}),
    10**6: (
        dict(max_epochs=5, n_restarts=2),
        dict(max_epochs=5, n_restarts=2, learning_rate=0.5),
    ),
}


def _soft_models(n_features):
    """The soft-routed models of the issue, fitted on 300 rows of a wide CSR."""
    X, score = wide_csr(300, n_features, seed=1)
    y = (score > 0).astype(int)
    classifier, regressor = SOFT_SETTINGS[n_features]
    soft = dict(max_depth=2, random_state=0)
    e2edt = dict(max_depth=2, max_epochs=2, finetune_epochs=2, random_state=0)
    return {
        "SoftTreeClassifier": SoftTreeClassifier(**soft, **classifier).fit(X, y),
        "SoftTreeRegressor": SoftTreeRegressor(**soft, **regressor).fit(X, score),
        "E2EDT hybrid": E2EDTClassifier(**e2edt).fit(X, y),
        "E2EDT soft": E2EDTClassifier(**e2edt, routing="soft").fit(X, y),
    }


def _soft_output(model, X):
    return model.predict(X) if isinstance(model, SoftTreeRegressor) else model.predict_proba(X)


def test_soft_routing_of_csr_equals_the_dense_rows_bit_for_bit():
    models = _soft_models(2000)
    X, _ = wide_csr(500, 2000, seed=2)
    X.data[::7] = np.nan  # explicit NaN entries: the missing-value terms
    X.data[::11] = 0.0  # explicit zeros are zeros
    Xd = X.toarray()
    for name, model in models.items():
        tree = model.trees_[0] if hasattr(model, "trees_") else model.tree_
        assert tree.node_count > 1, name  # the models route
        dense = _soft_output(model, Xd)
        for sparse in (X, X.tocsc()):
            assert np.array_equal(_soft_output(model, sparse), dense), name
        dense32 = _soft_output(model, Xd.astype(np.float32))
        assert np.array_equal(_soft_output(model, X.astype(np.float32)), dense32), name
        # unsorted indices and duplicate entries: summed, as densifying sums them
        messy = _unsorted_duplicates(X)
        assert not messy.has_canonical_format
        want = _soft_output(model, messy.toarray())
        assert np.array_equal(_soft_output(model, messy), want), name


def _unsorted_duplicates(X):
    """``X`` with every entry stored twice (a quarter, then three quarters), indices reversed."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    coo = sp.coo_matrix(
        (
            np.concatenate([0.25 * X.data, 0.75 * X.data]),
            (np.concatenate([rows, rows]), np.concatenate([X.indices, X.indices])),
        ),
        shape=X.shape,
    )
    order = np.lexsort((-coo.col, coo.row))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(coo.row, minlength=X.shape[0]))])
    return sp.csr_matrix((coo.data[order], coo.col[order], indptr), shape=X.shape)


def test_soft_routing_of_unsorted_weights_equals_the_dense_rows():
    # a container whose node lists its features in decreasing order takes the
    # per-node lookup path; the result is the dense one, bit for bit
    from obliquetrees._core.soft import feature_major_weights, soft_predict
    from obliquetrees._core.tree import ObliqueTree

    tree = _soft_models(2000)["SoftTreeClassifier"].tree_
    idx, val, mis = (a.copy() for a in (tree.weight_index, tree.weight_value, tree.weight_missing))
    for j in range(tree.node_count):
        span = slice(tree.weight_indptr[j], tree.weight_indptr[j + 1])
        idx[span], val[span], mis[span] = idx[span][::-1], val[span][::-1], mis[span][::-1]
    reversed_tree = ObliqueTree(
        tree.children_left,
        tree.children_right,
        tree.weight_indptr,
        idx,
        val,
        tree.bias,
        tree.value,
        tree.n_node_samples,
        tree.n_features,
        weight_missing=mis,
    )
    assert not feature_major_weights(reversed_tree)[-1]
    X, _ = wide_csr(400, 2000, seed=3)
    X.data[::5] = np.nan
    steep = np.linspace(0.5, 2.0, tree.node_count)
    want = soft_predict(reversed_tree, X.toarray(), tree.value, steep)
    assert np.array_equal(soft_predict(reversed_tree, X, tree.value, steep), want)


_SOFT_PEAK_SCRIPT = """
import pickle, resource, sys
import numpy as np
from tests.test_reliability_sparse import _soft_output, wide_csr

with open(sys.argv[1] if len(sys.argv) > 1 else {path!r}, "rb") as f:
    models = pickle.load(f)
X, _ = wide_csr(3000, 1_000_000)
data_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
for name, model in models.items():  # compile the kernels (their memory is not prediction's)
    tree = model.trees_[0] if hasattr(model, "trees_") else model.tree_
    assert tree.node_count > 1, name  # the model routes
    _soft_output(model, X[:5])
# a safety net for the machine: an allocation of gigabytes fails here instead
vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
limit = vm + 2 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("data", data_mb)
for name, model in models.items():
    before = peak_mb()
    try:
        out = _soft_output(model, X)
    except MemoryError:
        print(name, "MemoryError")
        continue
    assert out.shape[0] == 3000 and np.all(np.isfinite(out))
    print(name, peak_mb() - before)
"""


@LINUX_ONLY
@pytest.mark.slow
def test_soft_routing_of_a_wide_csr_needs_no_dense_rows(tmp_path):
    # 3000 x 1,000,000, 0.5 MB of stored entries: densified blocks took 24 GB
    fit = run_python(
        f"""
        import pickle
        from tests.test_reliability_sparse import _soft_models
        with open({str(tmp_path / "models.pkl")!r}, "wb") as f:
            pickle.dump(_soft_models(1_000_000), f)
        """,
        timeout=600,
    )
    assert_ok(fit)
    proc = run_python(_SOFT_PEAK_SCRIPT.format(path=str(tmp_path / "models.pkl")), timeout=600)
    assert_ok(proc)
    lines = dict(line.rsplit(" ", 1) for line in proc.stdout.strip().splitlines())
    assert float(lines.pop("data")) < 1.0
    assert len(lines) == 4
    for name, growth in lines.items():
        assert growth != "MemoryError", f"{name}: prediction tried to allocate gigabytes"
        assert float(growth) < 50, (name, growth)


# ------------------------------------------------------- CO2 growth on wide CSR
_CO2_PEAK_SCRIPT = """
import resource
import numpy as np
import scipy.sparse as sp
from obliquetrees import CO2ForestClassifier

n, d = 2000, 50_000
rng = np.random.default_rng(0)
nnz = int(n * d * 1e-4)
X = sp.csr_matrix((rng.random(nnz) + 0.5, (rng.integers(0, n, nnz), rng.integers(0, d, nnz))),
                  shape=(n, d))
X.sum_duplicates()
y = rng.integers(0, 2, n)
data_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
CO2ForestClassifier(n_estimators=1, random_state=0).fit(X[:50], y[:50])  # compiles the kernels
vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
limit = vm + 2 * 2**30  # a safety net for the machine: gigabytes fail here instead
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
try:
    model = CO2ForestClassifier(n_estimators=1, random_state=0).fit(X, y)
except MemoryError:
    print(data_mb, "MemoryError", 0)
else:
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    print(data_mb, growth, model.forest_.children_left.shape[0])
"""


@LINUX_ONLY
@pytest.mark.slow
def test_co2_growth_on_a_wide_csr_keeps_no_dense_weight_rows():
    # a fully grown tree on 2000 x 50,000 at density 1e-4 (0.2 MB stored, 2171
    # nodes): a row of 50,000 weights per node would take 0.87 GB (on 200,000
    # features it took 2.8 GB; 50,000 keeps that margin over 300 MB at a quarter
    # of the time, most of it the per-node passes over all 50,000 features)
    proc = run_python(_CO2_PEAK_SCRIPT, timeout=600)
    assert_ok(proc)
    data_mb, growth, n_nodes = proc.stdout.split()
    assert float(data_mb) < 1.0
    assert growth != "MemoryError", "the fit tried to allocate gigabytes"
    assert int(n_nodes) > 500  # fully grown
    assert float(growth) < 300, growth


# ------------------------------------------------- to_onnx checks what it exports
def _tamper_depth(model):
    depth = model.forest_.depth
    depth[depth == depth.max()] -= 1  # the deepest leaves one level up


def _tamper_value(model):
    model.forest_.value[1, 0] = np.nan


def _tamper_child(model):
    model.forest_.children_left[0] = 10**6


def _tamper_feature(model):
    stored = vars(model.forest_)["weight_index"]
    stored[stored.shape[0] // 2] = model.n_features_in_ + 5


def _tamper_steepness(model):
    model.steepness_[0] = model.steepness_[0][:-1]


def _tamper_soft_order(model):
    tree = model.tree_
    tree.children_left[0], tree.children_right[0] = 0, 0


def _tamper_hinge(model):
    model._model.thr = model._model.thr[:, :-1]


TAMPERINGS = {
    "CO2 depth lowered": ("CO2ForestClassifier", _tamper_depth),
    "CO2 NaN value": ("CO2ForestClassifier", _tamper_value),
    "CO2 child out of range": ("CO2ForestRegressor", _tamper_child),
    "CO2 feature out of range": ("CO2ForestClassifier", _tamper_feature),
    "E2EDT steepness of a wrong length": ("E2EDTClassifier", _tamper_steepness),
    "soft tree whose root is its own child": ("SoftTreeRegressor", _tamper_soft_order),
    "hinge thresholds of a wrong shape": ("HingeForestClassifier", _tamper_hinge),
}


@pytest.fixture(scope="module")
def small_fitted():
    import obliquetrees
    from tests.test_common import FAST_PARAMS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
    fitted = {}

    def fit(name):
        if name not in fitted:
            cls = getattr(obliquetrees, name)
            params = {**FAST_PARAMS.get(name, {}), "random_state": 0}
            if name.startswith("CO2"):
                params = {"n_estimators": 3, "random_state": 0}  # fully grown trees
            target = X @ np.arange(1.0, 6.0) if name.endswith("Regressor") else y
            fitted[name] = (cls(**params).fit(X, target), X)
        return fitted[name]

    return fit


@pytest.mark.parametrize("case", list(TAMPERINGS))
def test_to_onnx_refuses_a_tampered_model_as_unpickling_does(small_fitted, case):
    import copy
    import pickle

    pytest.importorskip("onnx")
    from obliquetrees.onnx import to_onnx

    name, tamper = TAMPERINGS[case]
    model, _ = small_fitted(name)
    tampered = copy.deepcopy(model)
    tamper(tampered)
    with pytest.raises(ValueError) as loading:
        pickle.loads(pickle.dumps(tampered))
    with pytest.raises(ValueError) as exporting:
        to_onnx(tampered)
    # the same check, with the export named
    assert str(loading.value) in str(exporting.value)
    assert "to_onnx" in str(exporting.value)


def test_to_onnx_of_an_untouched_model_exports_the_model_itself(small_fitted):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from obliquetrees.onnx import to_onnx

    model, X = small_fitted("CO2ForestClassifier")
    session = ort.InferenceSession(
        to_onnx(model, dtype=np.float64).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    label, proba = session.run(None, {"X": X})
    assert np.array_equal(label, model.predict(X))
    np.testing.assert_allclose(proba, model.predict_proba(X), rtol=1e-12, atol=1e-12)


# ------------------------------------------- dense and CSR fits of the same data
#: Estimators whose dense and CSR fits cannot agree exactly, and why.
DENSE_CSR_DIFFER = {
    "CO2ForestClassifier": (
        "the CSR kernel sums over stored entries with the centring applied "
        "algebraically, the dense one over the centred block: a stored bias differs "
        "in its last bits, and on integer features an axis-aligned threshold (the "
        "midpoint of the values of the node's bootstrap rows, 1 between 0 and 2) can "
        "be the exact value of a row the node did not train on, whose margin is then "
        "+-1e-16 and sends it to either side (every difference measured was such a row)"
    ),
    "E2EDTClassifier": (
        "two differences of the dense finetune: its default prune_threshold=1e-3 "
        "routes each sample only through the splits of path probability >= 1e-3 "
        "(CSR input always takes the exact pass: another objective), and it runs its "
        "products in float32 (CSR: float64 on the stored entries; a centred float32 "
        "copy would be dense); EM with rising steepness amplifies the differences, "
        "and the soft probabilities carry them (connect4, 20k rows, depth 4: 96.65 % "
        "of test labels agree; with prune_threshold=0 99.98 %; exact and float64 "
        "100 %, probabilities within 3e-6)"
    ),
}
DENSE_CSR_DIFFER["CO2ForestRegressor"] = DENSE_CSR_DIFFER["CO2ForestClassifier"]
#: Estimators whose dense and CSR fits agree exactly on some CPUs only, and why.
DENSE_CSR_MAY_DIFFER = {
    "E2EDTRegressor": (
        "the dense fit runs its products in float32 BLAS, whose summation order is the "
        "CPU's BLAS kernel's (the CSR fit: float64 on the stored entries), and EM "
        "amplifies the last bits: on AMD EPYC (AVX2) the two fits agree exactly here "
        "(stops 60-66), on an Intel Xeon with AVX-512 (stop 67; also at b97d16d, before "
        "that stop's changes) the same tree structure routes 16 of 400 rows elsewhere "
        "and the two fits score R^2 0.954 and 0.954; the docstring promises agreement "
        "up to rounding, where a row near a split's plane can change the tree below"
    ),
}


def _integer_data(n=400, d=20, seed=0):
    """Connect-4-like inputs: small integers, 65 % zeros; classes and targets linear in them."""
    rng = np.random.default_rng(seed)
    X = rng.integers(1, 4, size=(n, d)).astype(float) * (rng.random((n, d)) < 0.35)
    score = X @ rng.normal(size=d)
    return X, score, np.digitize(score, np.quantile(score, [0.4, 0.75]))


def _public_estimators():
    import obliquetrees

    return [name for name in obliquetrees.__all__ if name[0].isupper()]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(strict=True, reason=DENSE_CSR_DIFFER[name])
            if name in DENSE_CSR_DIFFER
            else pytest.mark.xfail(strict=False, reason=DENSE_CSR_MAY_DIFFER[name])
            if name in DENSE_CSR_MAY_DIFFER
            else (),
        )
        for name in _public_estimators()
    ],
)
def test_dense_and_csr_fits_of_the_same_data_agree(name):
    import obliquetrees
    from tests.test_common import FAST_PARAMS

    X, score, y = _integer_data()
    target = score if name.endswith("Regressor") else y
    params = {**FAST_PARAMS.get(name, {}), "random_state": 0}
    dense = getattr(obliquetrees, name)(**params).fit(X, target)
    csr = getattr(obliquetrees, name)(**params).fit(sp.csr_matrix(X), target)
    for a, b in zip(dense._forest().trees, csr._forest().trees, strict=True):
        np.testing.assert_array_equal(a.children_left, b.children_left)  # the same splits ...
    np.testing.assert_array_equal(dense.apply(X), csr.apply(X))  # ... routing the same rows
    output = "predict"
    if name.endswith("Classifier"):
        np.testing.assert_array_equal(dense.predict(X), csr.predict(X))
        output = "predict_proba"
    if getattr(dense, "routing", None) == "soft" and name == "E2EDTRegressor":
        # the dense fit runs its products in float32: split weights agree to ~3e-7,
        # which the soft output shows (to ~1e-7 of its scale) and hard leaf means hide
        scale = np.abs(dense.predict(X)).max()
        np.testing.assert_allclose(dense.predict(X), csr.predict(X), rtol=0, atol=1e-6 * scale)
        dense.set_params(routing="hard")
        csr.set_params(routing="hard")
    np.testing.assert_allclose(
        getattr(dense, output)(X), getattr(csr, output)(X), rtol=0, atol=1e-9
    )
