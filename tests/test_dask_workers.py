"""The workers' side of obliquetrees.dask: plain partition checks, and a CO2 worker's imports.

A worker that fits or predicts a CO2 forest on a dask array checks its
partitions with the plain checks of :mod:`obliquetrees._core.row_checks`
and imports neither scikit-learn nor pandas (about 160 MB of a worker's
memory). The plain checks must agree with the estimator's own (scikit-learn's)
on everything they accept, and leave the rest to them.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip(
    "distributed", reason="the dask estimators fit on dask.distributed (the test extra has it)"
)

from sklearn.utils import check_array  # noqa: E402

from obliquetrees._core.row_checks import (  # noqa: E402
    Deferred,
    PartitionRows,
    _plain_fit_rows,
    _plain_predict_rows,
)
from obliquetrees.dask import (  # noqa: E402
    DaskCO2ForestClassifier,
    DaskCO2ForestRegressor,
    _least_free_memory,
    _partition_rows,
    _validated_rows,
)


def _template(cls, n_features):
    template = cls(n_estimators=1)
    template.n_features_in_ = n_features
    return template


def _fit_rows(template, plain=True):
    """The checks a fit gives its workers (obliquetrees.dask._DaskForest._fit)."""
    return _partition_rows(template, plain, fallback_fit=Deferred(_validated_rows, template))


def _blocks(rng, kind, n=50, p=4):
    """A random block of ``kind`` with some NaN (floats)."""
    X = rng.standard_normal((n, p)) * 10
    if kind == "float64":
        X[rng.random((n, p)) < 0.1] = np.nan
        return X
    if kind == "float32":
        return X.astype(np.float32)
    if kind == "int":
        return X.astype(np.int64)
    if kind == "uint8":
        return np.abs(X).astype(np.uint8)
    return X > 0  # bool


@pytest.mark.parametrize("kind", ["float64", "float32", "int", "uint8", "bool"])
@pytest.mark.parametrize("cls", [DaskCO2ForestClassifier, DaskCO2ForestRegressor])
@pytest.mark.parametrize("weighted", [False, True])
def test_plain_checks_give_what_the_estimators_checks_give(cls, kind, weighted):
    rng = np.random.default_rng([3, len(kind), weighted])
    template = _template(cls, 4)
    rows = _fit_rows(template)
    for _ in range(5):
        X = _blocks(rng, kind)
        if cls is DaskCO2ForestClassifier:  # integer labels, or integral floats
            y = rng.integers(0, 3, 50).astype(rng.choice([np.int64, np.float64]))
        else:  # one output or two
            y = rng.standard_normal((50,) if rng.random() < 0.5 else (50, 2))
        w = rng.random(50) if weighted else None
        plain = _plain_fit_rows(rows, X, y, w)  # the plain checks decide these themselves
        assert plain is not None
        sklearn = _validated_rows(template, X, y, w)
        for ours, theirs in zip(plain, sklearn, strict=True):
            assert ours.dtype == theirs.dtype and ours.flags.c_contiguous
            np.testing.assert_array_equal(ours, theirs)
        # what obliquetrees.utils.validation.validate_predict_data asks of dense input
        expected = check_array(
            X, dtype=[np.float64, np.float32], order="C", ensure_all_finite="allow-nan"
        )
        predict = _plain_predict_rows(rows, X)
        assert predict is not None
        assert predict.dtype == expected.dtype and predict.flags.c_contiguous
        np.testing.assert_array_equal(predict, expected)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda X, y, w: (X[:, :3], y, w), "X has 3 features"),
        (lambda X, y, w: (np.where(X > 1, np.inf, X), y, w), "infinity"),
        (lambda X, y, w: (X.astype(object), y, w), None),  # another dtype: theirs decide
        (lambda X, y, w: (X, y + 0.5, w), "Unknown label type"),
        (lambda X, y, w: (X, np.where(y > 1, np.nan, y), w), "NaN"),
        (lambda X, y, w: (X, y, -w), "Negative values in data passed to `sample_weight`"),
        (lambda X, y, w: (X, y, np.where(w > 0.5, np.nan, w)), "NaN"),
        (lambda X, y, w: (X, y.astype(str), w), None),  # string labels: theirs decide
    ],
)
def test_what_plain_checks_leave_goes_to_the_estimators_checks(change, message):
    rng = np.random.default_rng(0)
    template = _template(DaskCO2ForestClassifier, 4)
    rows = _fit_rows(template)
    X, y, w = rng.standard_normal((60, 4)), rng.integers(0, 3, 60).astype(float), rng.random(60)
    X, y, w = change(X, y, w)
    assert _plain_fit_rows(rows, X, y, w) is None
    if message is None:  # accepted by scikit-learn's checks: the same result through them
        pairs = zip(rows.fit_rows(X, y, w), _validated_rows(template, X, y, w), strict=True)
        for ours, theirs in pairs:
            np.testing.assert_array_equal(ours, theirs)
        return
    with pytest.raises(ValueError, match=message):
        rows.fit_rows(X, y, w)


def test_dataframe_and_feature_names_take_the_estimators_checks():
    template = _template(DaskCO2ForestClassifier, 2)
    assert not _fit_rows(template, plain=False).plain
    template.feature_names_in_ = np.array(["a", "b"], dtype=object)
    assert not _fit_rows(template).plain
    assert isinstance(_fit_rows(template), PartitionRows)


class _Scheduler:
    """What ``_least_free_memory`` reads of a client: the scheduler's report of its workers."""

    def scheduler_info(self, n_workers=5):
        workers = {
            "a": {"memory_limit": 500e6, "metrics": {"memory": 250e6}},
            "b": {"memory_limit": 500e6, "metrics": {"memory": 300e6}},
            "c": {"memory_limit": None, "metrics": {"memory": 900e6}},  # no limit: not counted
        }
        return {"workers": workers}


def test_free_memory_is_counted_to_dasks_pause_threshold():
    # a prediction that takes a worker past the pause threshold can wait for good: the
    # room is what the fullest worker takes before dask pauses it
    import dask

    with dask.config.set({"distributed.worker.memory.pause": 0.8}):
        assert _least_free_memory(_Scheduler()) == pytest.approx(0.8 * 500e6 - 300e6)
    with dask.config.set({"distributed.worker.memory.pause": False}):  # never pauses
        assert _least_free_memory(_Scheduler()) == pytest.approx(500e6 - 300e6)
    assert _least_free_memory(None) is None


#: A LocalCluster's worker processes import the script that starts them (multiprocessing's
#: spawn), so the script imports obliquetrees inside its main block only.
_WORKER_IMPORTS = textwrap.dedent(
    """
    import sys


    def heavy_modules():
        return sorted(m for m in ("sklearn", "pandas", "pyarrow") if m in sys.modules)


    if __name__ == "__main__":
        import dask.array as da
        import numpy as np
        from distributed import Client, LocalCluster

        from obliquetrees.dask import DaskCO2ForestClassifier, DaskCO2ForestRegressor

        rng = np.random.default_rng(0)
        X = rng.standard_normal((3000, 5))
        X[rng.random(X.shape) < 0.05] = np.nan
        y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(np.int64)
        Xd, yd = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
        target = da.from_array(np.nan_to_num(X[:, 2]) + rng.normal(0, 0.1, 3000), chunks=500)
        with LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster, Client(cluster) as client:
            for cls, target in ((DaskCO2ForestClassifier, yd), (DaskCO2ForestRegressor, target)):
                # rows_per_task=600: node growth (passes, stumps, gathered subtrees)
                model = cls(n_estimators=2, max_cccp_iter=5, rows_per_task=600, random_state=0)
                model.fit(Xd, target)
                lazy = model.predict(Xd).compute()
                np.testing.assert_array_equal(lazy, model.to_local().predict(X))
            print("worker imports:", client.run(heavy_modules))
    """
)


def test_a_co2_worker_imports_neither_scikit_learn_nor_pandas(tmp_path):
    # a worker process of its own (the test process has imported scikit-learn): the fit's
    # validation pass, node growth and the lazy prediction of both CO2 classes
    script = tmp_path / "worker_imports.py"
    script.write_text(_WORKER_IMPORTS)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("worker imports:")]
    assert line and line[0].endswith("[]}"), result.stdout
