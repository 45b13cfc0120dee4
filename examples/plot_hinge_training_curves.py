"""Random hinge forest: training curves on letter
================================================

A random hinge forest (Lay et al. 2018) trains all of its trees jointly by
gradient descent: every split is a learned linear feature compared with a
learned threshold, and the loss is back-propagated through the hinge of the
split on each path. ``loss_curve_`` holds the mean training loss of every
epoch and ``validation_loss_curve_`` the loss on the held-out
``validation_fraction`` of the training data (used for early stopping; the
parameters of ``best_epoch_`` are kept).

Trains 20 trees of depth 6 for 15 epochs on letter (UCI letter recognition:
20000 rows of 16 features, 26 classes; 4000 held out for testing, stratified
and seeded) and writes ``hinge_training_curves.png`` into ``--out`` (default:
a temporary directory).

**Needs a download**: letter comes from OpenML through
:func:`sklearn.datasets.fetch_openml` on the first run and is cached in
scikit-learn's data home (``~/scikit_learn_data``) afterwards.
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import fetch_openml, get_data_home  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from obliquetrees import HingeForestClassifier  # noqa: E402

OUTPUTS = ["hinge_training_curves.png"]
#: OpenML data sets this script downloads (name -> version)
OPENML = {"letter": 1}


def fetch(name):
    """``(X, y)`` of an OpenML data set of ``OPENML``: downloaded once, then cached."""
    try:
        return fetch_openml(
            name, version=OPENML[name], return_X_y=True, as_frame=False, parser="liac-arff"
        )
    except OSError as exc:  # no connection, or OpenML did not answer
        raise SystemExit(
            f"{Path(__file__).name} needs the OpenML data set {name!r}, which is downloaded "
            f"once and then cached in {get_data_home()}, but the download failed: {exc}. "
            "Run it again with an internet connection."
        ) from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    out = Path(parser.parse_args(argv).out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    X, y = fetch("letter")
    X, X_test, y, y_test = train_test_split(X, y, test_size=4000, stratify=y, random_state=0)
    clf = HingeForestClassifier(
        n_estimators=20, max_depth=6, max_epochs=15, n_jobs=1, random_state=0
    ).fit(X, y)
    accuracy = clf.score(X_test, y_test)

    epochs = np.arange(1, len(clf.loss_curve_) + 1)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(epochs, clf.loss_curve_, marker="o", ms=3, lw=2, label="training loss")
    if len(clf.validation_loss_curve_):
        ax.plot(epochs, clf.validation_loss_curve_, marker="o", ms=3, lw=2, label="validation loss")
        ax.axvline(clf.best_epoch_, color="0.5", ls=":", label=f"kept epoch {clf.best_epoch_}")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy")
    ax.set_title(
        f"Random hinge forest on letter (20 trees, depth 6): test accuracy {accuracy:.3f}",
        fontsize=10,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9)
    fig.tight_layout()
    path = out / OUTPUTS[0]
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)
    return [path]


if __name__ == "__main__":
    main()
