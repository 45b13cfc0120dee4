"""Soft tree vs hard tree on a noisy sinusoid
============================================

A soft decision tree (Irsoy, Yildiz & Alpaydin 2012) routes every sample to
all leaves with gating probabilities, so its output is a smooth blend of the
leaf values, while a hard tree's output is a step function. On a noisy
sinusoid the soft tree follows the curve with a few nodes where a hard tree
needs many steps (the soft tree paper's Fig. 3). Both trees choose their
size on a held-out half of the training data: the soft tree grows while a
split lowers the validation error; the scikit-learn tree takes the
``max_leaf_nodes`` with the best validation error.

Writes ``soft_vs_hard_tree.png`` into ``--out`` (default: a temporary
directory).
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import mean_squared_error  # noqa: E402
from sklearn.tree import DecisionTreeRegressor  # noqa: E402

from obliquetrees import SoftTreeRegressor  # noqa: E402

OUTPUTS = ["soft_vs_hard_tree.png"]


def make_sinusoid(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-np.pi, np.pi, size=n)
    return x[:, None], np.sin(x) + rng.normal(scale=0.25, size=n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    out = Path(parser.parse_args(argv).out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    X, y = make_sinusoid(400, seed=0)
    X_test, y_test = make_sinusoid(2000, seed=1)
    soft = SoftTreeRegressor(random_state=0).fit(X, y)

    # hard tree: pick max_leaf_nodes on the same kind of held-out half
    half = X.shape[0] // 2
    best = min(
        range(2, 41),
        key=lambda m: mean_squared_error(
            y[half:],
            DecisionTreeRegressor(max_leaf_nodes=m, random_state=0)
            .fit(X[:half], y[:half])
            .predict(X[half:]),
        ),
    )
    hard = DecisionTreeRegressor(max_leaf_nodes=best, random_state=0).fit(X, y)

    grid = np.linspace(-np.pi, np.pi, 500)[:, None]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.scatter(X[:, 0], y, s=6, color="0.6", label="training data")
    ax.plot(grid[:, 0], np.sin(grid[:, 0]), color="k", lw=1, ls=":", label="sin(x)")
    for model, name, color in ((hard, "hard tree", "tab:orange"), (soft, "soft tree", "tab:blue")):
        nodes = model.tree_.node_count
        mse = mean_squared_error(y_test, model.predict(X_test))
        ax.plot(
            grid[:, 0],
            model.predict(grid),
            color=color,
            lw=2,
            label=f"{name}: {nodes} nodes, test MSE {mse:.3f}",
        )
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title("Soft vs hard regression tree (noise sd 0.25)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = out / OUTPUTS[0]
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)
    return [path]


if __name__ == "__main__":
    main()
