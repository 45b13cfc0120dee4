"""E2EDT split weights on USPS digits, with and without spatial regularisation
============================================================================

Each split of an oblique tree on images is a weight image: pixels with
positive weight (red) push a digit to the right child, negative ones (blue)
to the left. :func:`obliquetrees.plot_tree` draws them in the nodes when the
estimator knows its ``image_shape``. E2EDT's spatial regulariser
(``spatial_reg``, eq. 15 of Hehn, Kooij & Hamprecht 2020) penalises weight
differences between neighbouring pixels and gives smoother, more
interpretable filters, the paper's figure of learned splits.

Trains two depth-3 trees on 3000 USPS training digits (16x16 pixels) and
writes ``e2edt_usps_weights.png`` into ``--out`` (default: a temporary
directory). Needs ``usps.npz`` from the shared data directory
(``$OBLIQUETREES_DATA`` or ``../shared/data`` beside the repository).
"""

import argparse
import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from obliquetrees import E2EDTClassifier, plot_tree  # noqa: E402

OUTPUTS = ["e2edt_usps_weights.png"]
DATASETS = ["usps"]


def load_dataset(name):
    """Arrays of ``<data dir>/<name>.npz`` (see the module docstring)."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"
    path = Path(os.environ.get("OBLIQUETREES_DATA", default)) / f"{name}.npz"
    if not path.exists():
        raise SystemExit(f"{path} not found: set OBLIQUETREES_DATA to the data directory.")
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    out = Path(parser.parse_args(argv).out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    data = load_dataset("usps")
    X, y = data["X_train"][:3000], data["y_train"][:3000]
    fig, axes = plt.subplots(2, 1, figsize=(13, 10))
    for ax, spatial_reg in zip(axes, (0.0, 1.0), strict=True):
        clf = E2EDTClassifier(
            max_depth=3,
            max_epochs=10,
            finetune_epochs=10,
            learning_rate=0.01,
            image_shape=(16, 16),
            spatial_reg=spatial_reg,
            random_state=0,
        ).fit(X, y)
        acc = clf.score(data["X_test"], data["y_test"])
        plot_tree(clf, ax=ax, fontsize=8)
        ax.set_title(
            f"spatial_reg = {spatial_reg:g}: test accuracy {acc:.3f} (depth 3, 3000 digits)",
            fontsize=11,
        )
    fig.tight_layout()
    path = out / OUTPUTS[0]
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(path)
    return [path]


if __name__ == "__main__":
    main()
