"""E2EDT: from a probabilistic to a deterministic tree by annealing
=================================================================

E2EDT trains a *probabilistic* tree (each split sends a sample right with
probability ``sigmoid(gamma * (w . x + b))``) and predicts with the
*deterministic* tree obtained by routing on the sign of ``w . x + b``. The
steepness ``gamma`` of every split grows after each training epoch, so the
probabilistic posterior (top row) approaches the deterministic one (bottom
row) as training goes on, as in Fig. 3 of Hehn, Kooij & Hamprecht (2020).

The same depth-3 tree is trained for more and more epochs on two moons;
``routing="soft"`` gives the probabilistic posterior, ``routing="hard"`` the
deterministic one (switching ``routing`` needs no refit).

Writes ``e2edt_annealing.png`` into ``--out`` (default: a temporary directory).
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import make_moons  # noqa: E402

from obliquetrees import E2EDTClassifier  # noqa: E402

OUTPUTS = ["e2edt_annealing.png"]
EPOCHS = [1, 4, 16, 48]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    out = Path(parser.parse_args(argv).out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    grid_x = np.linspace(X[:, 0].min() - 0.5, X[:, 0].max() + 0.5, 160)
    grid_y = np.linspace(X[:, 1].min() - 0.5, X[:, 1].max() + 0.5, 120)
    xx, yy = np.meshgrid(grid_x, grid_y)
    grid_points = np.column_stack([xx.ravel(), yy.ravel()])

    fig, axes = plt.subplots(2, len(EPOCHS), figsize=(3.3 * len(EPOCHS), 6.2))
    for col, epochs in enumerate(EPOCHS):
        clf = E2EDTClassifier(
            max_depth=3,
            max_epochs=epochs,
            finetune_epochs=epochs,
            learning_rate=0.05,
            steepness_increase=0.25,
            random_state=0,
        ).fit(X, y)
        gamma = clf.steepness_[0][clf.steepness_[0] > 0]
        for row, routing in enumerate(("soft", "hard")):
            clf.set_params(routing=routing)
            zz = clf.predict_proba(grid_points)[:, 1].reshape(xx.shape)
            ax = axes[row, col]
            ax.contourf(xx, yy, zz, levels=np.linspace(0, 1, 21), cmap="RdBu_r")
            ax.scatter(X[:, 0], X[:, 1], c=y, cmap="RdBu_r", s=7, edgecolors="w", linewidths=0.4)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(
                    f"{epochs} epoch{'s' if epochs > 1 else ''} per stage\n"
                    f"mean steepness {gamma.mean():.1f}",
                    fontsize=9,
                )
        axes[0, col].set_ylabel("probabilistic" if col == 0 else "")
        axes[1, col].set_ylabel("deterministic" if col == 0 else "")
    fig.suptitle("E2EDT posterior P(class 1 | x) as the steepness grows", fontsize=11)
    fig.tight_layout()
    path = out / OUTPUTS[0]
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)
    return [path]


if __name__ == "__main__":
    main()
