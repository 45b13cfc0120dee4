"""Quickstart: every obliquetrees estimator beside scikit-learn on bundled data.

Classification on scikit-learn's handwritten digits (1797 images of 8x8
pixels, 10 classes) and regression on its diabetes data, each with a seeded
75/25 split. Prints test scores and fit times. Needs only the runtime
dependencies:

    pip install . && python examples/quickstart.py

The first run also compiles the numba kernels (cached on disk afterwards);
that time is included in the first fit of each estimator.
"""

import time

from sklearn.datasets import load_diabetes, load_digits
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, RandomForestRegressor
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from obliquetrees import (
    CO2ForestClassifier,
    E2EDTClassifier,
    HingeForestClassifier,
    HingeForestRegressor,
    SoftTreeClassifier,
    SoftTreeRegressor,
)


def report(title, models, X, y, metric):
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    print(f"\n{title}: {len(X_train)} training / {len(X_test)} test rows, {X.shape[1]} features")
    print(f"{'model':<58} {metric:>10} {'fit s':>8}")
    for name, model in models:
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        print(f"{name:<58} {model.score(X_test, y_test):>10.4f} {seconds:>8.2f}")


def main():
    X, y = load_digits(return_X_y=True)
    report(
        "Digits (classification)",
        [
            (
                "obliquetrees CO2ForestClassifier(n_estimators=30)",
                CO2ForestClassifier(n_estimators=30, n_jobs=2, random_state=0),
            ),
            (
                "obliquetrees E2EDTClassifier(max_depth=6), one tree",
                E2EDTClassifier(max_depth=6, random_state=0),
            ),
            ("obliquetrees SoftTreeClassifier()", SoftTreeClassifier(random_state=0)),
            (
                "obliquetrees HingeForestClassifier()",
                HingeForestClassifier(n_jobs=2, random_state=0),
            ),
            (
                "scikit-learn DecisionTreeClassifier(max_depth=6)",
                DecisionTreeClassifier(max_depth=6, random_state=0),
            ),
            (
                "scikit-learn RandomForestClassifier(n_estimators=30)",
                RandomForestClassifier(n_estimators=30, n_jobs=2, random_state=0),
            ),
            (
                "scikit-learn ExtraTreesClassifier(n_estimators=30)",
                ExtraTreesClassifier(n_estimators=30, n_jobs=2, random_state=0),
            ),
        ],
        X,
        y,
        metric="accuracy",
    )
    X, y = load_diabetes(return_X_y=True)
    report(
        "Diabetes (regression)",
        [
            ("obliquetrees SoftTreeRegressor()", SoftTreeRegressor(random_state=0)),
            ("obliquetrees HingeForestRegressor()", HingeForestRegressor(n_jobs=2, random_state=0)),
            (
                "scikit-learn DecisionTreeRegressor(max_depth=3)",
                DecisionTreeRegressor(max_depth=3, random_state=0),
            ),
            (
                "scikit-learn RandomForestRegressor(n_estimators=100)",
                RandomForestRegressor(n_estimators=100, n_jobs=2, random_state=0),
            ),
        ],
        X,
        y,
        metric="R^2",
    )


if __name__ == "__main__":
    main()
