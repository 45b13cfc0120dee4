"""Oblique vs axis-aligned trees on a rotated 2-D problem
========================================================

Class 1 is a wedge bounded by lines at 30 and 120 degrees. An axis-aligned
tree (scikit-learn's ``DecisionTreeClassifier``) needs a staircase of splits
to follow them; oblique trees learn the tilted lines directly. The script
draws the decision regions of a depth-2 scikit-learn tree, a single CO2 tree
and an E2EDT tree (all depth 2) and the CO2 tree itself with
:func:`obliquetrees.plot_tree`.

Writes ``oblique_vs_axis_aligned.png`` and ``oblique_tree.png`` into
``--out`` (default: a new temporary directory).
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

from obliquetrees import CO2ForestClassifier, E2EDTClassifier, plot_tree  # noqa: E402

OUTPUTS = ["oblique_vs_axis_aligned.png", "oblique_tree.png"]


def make_rotated(n=600, seed=0):
    """A corner (quadrant) of the square rotated by 30 degrees is class 1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    theta = np.deg2rad(30)
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    U = X @ rot  # coordinates along the rotated axes
    y = ((U[:, 0] > -0.2) & (U[:, 1] > -0.1)).astype(int)
    return X, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    out = Path(parser.parse_args(argv).out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    X, y = make_rotated()
    X_test, y_test = make_rotated(seed=1)
    models = {
        "axis-aligned (scikit-learn)": DecisionTreeClassifier(max_depth=2, random_state=0),
        "CO2 tree": CO2ForestClassifier(
            n_estimators=1, bootstrap=False, max_features=None, max_depth=2, random_state=0
        ),
        "E2EDT tree": E2EDTClassifier(
            max_depth=2, max_epochs=30, learning_rate=0.05, random_state=0
        ),
    }
    grid = np.linspace(-1, 1, 201)
    xx, yy = np.meshgrid(grid, grid)
    grid_points = np.column_stack([xx.ravel(), yy.ravel()])
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4.2))
    for ax, (name, model) in zip(axes, models.items(), strict=True):
        model.fit(X, y)
        zz = model.predict_proba(grid_points)[:, 1].reshape(xx.shape)
        ax.contourf(xx, yy, zz, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.6)
        ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", s=8, edgecolors="k", linewidths=0.2)
        acc = model.score(X_test, y_test)
        ax.set_title(f"{name}\ndepth 2, test accuracy {acc:.3f}", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    written = [out / OUTPUTS[0]]
    fig.savefig(written[0], dpi=100)

    ax = plot_tree(models["CO2 tree"], feature_names=["x1", "x2"], class_names=["outside", "wedge"])
    ax.set_title("The CO2 tree: each node tests w . x > threshold", fontsize=10)
    written.append(out / OUTPUTS[1])
    ax.figure.savefig(written[1], dpi=100, bbox_inches="tight")
    plt.close("all")
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    main()
