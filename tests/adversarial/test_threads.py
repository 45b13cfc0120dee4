"""Several Python threads predicting with one model at once (issue 14).

Prediction releases the GIL and may run BLAS under a thread limit; eight
threads sharing a model must get what one thread gets, and the process-wide
BLAS thread count must be what it was before once they are done.
"""

import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.adversarial._models import MODEL_NAMES, data, is_machine, load_blobs, model_file
from tests.adversarial._subprocess import assert_ok, run_python

N_THREADS = 8


def _outputs(model, X):
    if is_machine(model):
        X32 = X.astype(np.float32)
        return [model.predict_value(X32), model.apply(X32)]
    path = model.decision_path(X)
    path = path[0] if isinstance(path, tuple) else path  # forests add n_nodes_ptr
    out = [model.predict(X), model.apply(X), path.toarray()]
    if hasattr(model, "predict_proba"):
        out.append(model.predict_proba(X))
    return out


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_concurrent_predictions_equal_serial_ones(name):
    model = pickle.loads(load_blobs(model_file())[name])
    X = np.tile(data()[0], (20, 1))  # 3000 rows: large enough for the parallel kernels
    expected = _outputs(model, X)
    with ThreadPoolExecutor(N_THREADS) as pool:
        results = list(pool.map(lambda _: _outputs(model, X), range(2 * N_THREADS)))
    for got in results:
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_blas_thread_limit_is_restored_after_concurrent_predicts():
    """8 threads on the BLAS path (dense-S machine, hinge decision values) at once."""
    proc = run_python(
        f"""
        import os
        os.environ["OPENBLAS_NUM_THREADS"] = "2"  # the original count, held by no thread
        import pickle
        from concurrent.futures import ThreadPoolExecutor
        import numpy as np
        from threadpoolctl import threadpool_info
        from tests.adversarial import _models as M

        blobs = M.load_blobs({model_file()!r})
        dm = pickle.loads(blobs["machine_dense"])
        hinge = pickle.loads(blobs["HingeForestClassifier"])
        assert not hasattr(dm.S, "indices")  # dense S: the path that limits BLAS threads
        before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        assert before and all(n == 2 for n in before), before
        X = np.tile(M.data()[0], (4, 1))

        def work(i):
            for _ in range(30):
                dm.predict_value(X) if i % 2 else hinge.predict_proba(X)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(16)))
        after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        assert after == before, (before, after)
        print("ok")
        """,
        timeout=180,
    )
    assert_ok(proc)
