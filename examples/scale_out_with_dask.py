"""Build a forest on a dask.distributed cluster: joblib's dask backend, or obliquetrees.dask.

Two routes. (1) Forests build their trees with joblib, so any joblib backend applies; with
dask, trees are built by the cluster's workers. Here a LocalCluster with two
worker processes stands in for a real cluster (pass its scheduler address to
``Client`` instead). The forest is identical to the one built locally: every
tree's seed is drawn up front from ``random_state``. Large arguments (X, y)
are scattered to the workers once by joblib, not sent with every tree; every
worker thus receives the whole training set. (2) For data that do not fit one
machine, :mod:`obliquetrees.dask` fits on a dask array where its partitions
live: each tree draws its bootstrap from the partitions and grows node by node,
no task gathering more than ``rows_per_task`` rows, and predictions of a dask
array are lazy dask arrays.

    pip install ".[dask]"   # dask.array, dask.dataframe and distributed
    python examples/scale_out_with_dask.py
"""

import dask.array as da
import joblib
import numpy as np
from distributed import Client, LocalCluster
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from obliquetrees import CO2ForestClassifier
from obliquetrees.dask import DaskCO2ForestClassifier


def main():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    params = dict(n_estimators=20, random_state=0)

    local = CO2ForestClassifier(n_jobs=1, **params).fit(X_train, y_train)

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            print("dask cluster:", client)
            with joblib.parallel_backend("dask"):
                distributed = CO2ForestClassifier(n_jobs=-1, **params).fit(X_train, y_train)
            # (2) partitions stay on the workers; tasks of at most 500 rows grow each tree
            X_parts = da.from_array(X_train, chunks=(300, -1))
            y_parts = da.from_array(y_train, chunks=300)
            partitioned = DaskCO2ForestClassifier(rows_per_task=500, **params)
            partitioned.fit(X_parts, y_parts)
            lazy = partitioned.predict(da.from_array(X_test, chunks=(150, -1)))
            partitioned_accuracy = float((lazy.compute() == y_test).mean())

    same = np.array_equal(local.predict_proba(X_test), distributed.predict_proba(X_test))
    print(
        f"test accuracy {distributed.score(X_test, y_test):.4f}; "
        f"identical to the local forest: {same}"
    )
    print(
        f"obliquetrees.dask, 500 rows per task: test accuracy {partitioned_accuracy:.4f} "
        f"(model: {type(partitioned.to_local()).__name__})"
    )


if __name__ == "__main__":
    main()
