"""CO2 Forest vs Random Forest: test error against the number of trees
=====================================================================

CO2 Forest (Norouzi et al. 2015) grows random-forest trees whose splits are
oblique hyperplanes optimised by the convex-concave procedure. The script
grows both forests on satimage (4435 training / 2000 test images, 36
features) and draws the test error of the first ``k`` trees for every ``k``,
as in the CO2 paper's Fig. 2. The error of a growing prefix of one fitted
forest is read from the fitted trees: :meth:`apply` gives the leaf each test
sample reaches in every tree and ``trees_[t].value`` the leaf class
distributions, which are averaged over the first ``k`` trees.

For speed the CO2 splits run at most 5 CCCP iterations (the package default
is 20); ``--n-trees`` sets the forest size (default 30).

Writes ``co2_vs_random_forest.png`` into ``--out`` (default: a temporary
directory). Needs ``satimage.npz`` from the shared data directory
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
from sklearn.ensemble import RandomForestClassifier  # noqa: E402

from obliquetrees import CO2ForestClassifier  # noqa: E402

OUTPUTS = ["co2_vs_random_forest.png"]
DATASETS = ["satimage"]


def load_dataset(name):
    """Arrays of ``<data dir>/<name>.npz`` (see the module docstring)."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"
    path = Path(os.environ.get("OBLIQUETREES_DATA", default)) / f"{name}.npz"
    if not path.exists():
        raise SystemExit(f"{path} not found: set OBLIQUETREES_DATA to the data directory.")
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def error_curve(tree_probas, y_test, classes):
    """Test error of the mean of the first k per-tree probabilities, k = 1..T."""
    running = np.cumsum(np.stack(tree_probas), axis=0)  # (T, n, K); the argmax ignores 1/k
    return np.mean(classes[np.argmax(running, axis=2)] != y_test[None, :], axis=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    parser.add_argument("--n-trees", type=int, default=30, help="trees per forest")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="obliquetrees-"))
    out.mkdir(parents=True, exist_ok=True)

    data = load_dataset("satimage")
    X, y, X_test, y_test = data["X_train"], data["y_train"], data["X_test"], data["y_test"]
    co2 = CO2ForestClassifier(
        n_estimators=args.n_trees, max_cccp_iter=5, n_jobs=1, random_state=0
    ).fit(X, y)
    rf = RandomForestClassifier(n_estimators=args.n_trees, n_jobs=1, random_state=0).fit(X, y)

    leaves = co2.apply(X_test)  # (n_test, n_trees) leaf ids local to each tree
    co2_probas = [tree.value[leaves[:, t]] for t, tree in enumerate(co2.trees_)]
    rf_probas = [tree.predict_proba(X_test.astype(np.float32)) for tree in rf.estimators_]
    k = np.arange(1, args.n_trees + 1)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for probas, model, name in ((rf_probas, rf, "Random Forest"), (co2_probas, co2, "CO2 Forest")):
        curve = error_curve(probas, y_test, model.classes_)
        ax.plot(k, 100 * curve, lw=2, label=f"{name} ({100 * curve[-1]:.1f} % at {k[-1]} trees)")
    ax.set_xlabel("number of trees")
    ax.set_ylabel("test error (%)")
    ax.set_title("satimage: test error against forest size", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    path = out / OUTPUTS[0]
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(path)
    return [path]


if __name__ == "__main__":
    main()
