"""Build a forest on a dask.distributed cluster through joblib's dask backend.

Forests build their trees with joblib, so any joblib backend applies; with
dask, trees are built by the cluster's workers. Here a LocalCluster with two
worker processes stands in for a real cluster (pass its scheduler address to
``Client`` instead). The forest is identical to the one built locally: every
tree's seed is drawn up front from ``random_state``. Large arguments (X, y)
are scattered to the workers once by joblib, not sent with every tree.

    pip install ".[test]"   # or: pip install "dask[distributed]"
    python examples/scale_out_with_dask.py
"""

import joblib
import numpy as np
from distributed import Client, LocalCluster
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from obliquetrees import CO2ForestClassifier


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

    same = np.array_equal(local.predict_proba(X_test), distributed.predict_proba(X_test))
    print(
        f"test accuracy {distributed.score(X_test, y_test):.4f}; "
        f"identical to the local forest: {same}"
    )


if __name__ == "__main__":
    main()
