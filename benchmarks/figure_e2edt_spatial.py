"""Split weights of E2EDT trees on images, with and without spatial regularisation.

Trains two depth-3 E2EDT trees on Fashion-MNIST (a subset of the training
images, 28 x 28 pixels): one plain, one with the spatial regulariser of the
paper (eq. 15, ``spatial_reg``: the weights of each split are penalised by
their squared differences between 4-neighbour pixels). Each split's weight
vector is shown as an image, normalised to the full grey range as in the
paper's Fig. 4, and the test accuracy of both trees is printed. The trees
store weights on the raw pixels (the internal standardisation is folded in);
the images show them on the standardised pixels the model was trained on
(raw weight times the pixel's standard deviation), where the regulariser acts.

Run from the repository root (writes ``benchmarks/results/e2edt_spatial.png``)::

    python -m benchmarks figure-e2edt-spatial [--n-train 20000] [--reg 0.05]

The PNG's metadata (``Description``) holds the command, revision, versions,
CPU model and thread counts of the run.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.common import write_results  # noqa: E402
from benchmarks.datasets import load  # noqa: E402
from obliquetrees import E2EDTClassifier  # noqa: E402


def add_arguments(parser):
    """The arguments of ``python -m benchmarks figure-e2edt-spatial``."""
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--n-train", type=int, default=20000)
    parser.add_argument("--reg", type=float, default=0.05)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--out", default="e2edt_spatial.png", help="file in benchmarks/results")


def main(args):

    d = load(args.dataset)
    side = int(round(np.sqrt(d["X_train"].shape[1])))
    X, y = d["X_train"][: args.n_train], d["y_train"][: args.n_train]
    kw = dict(
        max_depth=args.depth, max_epochs=args.epochs, image_shape=(side, side), random_state=0
    )
    trees = {
        "no regularisation": E2EDTClassifier(**kw).fit(X, y),
        f"spatial_reg={args.reg}": E2EDTClassifier(**kw, spatial_reg=args.reg).fit(X, y),
    }
    n_splits = max(int((c.tree_.children_left >= 0).sum()) for c in trees.values())
    fig, axes = plt.subplots(
        len(trees), n_splits, figsize=(1.6 * n_splits, 1.9 * len(trees)), squeeze=False
    )
    for row, (label, clf) in enumerate(trees.items()):
        acc = clf.score(d["X_test"], d["y_test"])
        print(f"{label}: test accuracy {100 * acc:.2f} %")
        tree = clf.tree_
        scale = X.std(axis=0)
        W = tree.dense_weights() * np.where(scale > 0, scale, 1.0)  # standardised units
        splits = np.flatnonzero(tree.children_left >= 0)
        for col in range(n_splits):
            ax = axes[row, col]
            ax.set_xticks([])
            ax.set_yticks([])
            if col >= len(splits):
                ax.axis("off")
                continue
            img = W[splits[col]].reshape(side, side)
            ax.imshow(img, cmap="gray", vmin=img.min(), vmax=img.max())
            ax.set_title(f"node {splits[col]} (d{tree.depth[splits[col]]})", fontsize=7)
        axes[row, 0].set_ylabel(f"{label}\n{100 * acc:.1f} %", fontsize=8)
    fig.suptitle(
        f"E2EDT split weights on {args.dataset} ({args.n_train} training images)", fontsize=9
    )
    fig.tight_layout()
    print("wrote", write_results(args.out, figure=fig))


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("figure-e2edt-spatial")
