"""CO2 Forest vs Random Forest: test error against the number of trees
=====================================================================

CO2 Forest (Norouzi et al. 2015) grows random-forest trees whose splits are
oblique hyperplanes optimised by the convex-concave procedure. The script
grows both forests on satimage (Statlog Landsat: 6430 images of 36 features,
6 classes; 2000 held out for testing, stratified and seeded, the size of the
original test set) and draws the test error of the first ``k`` trees for
every ``k``, as in the CO2 paper's Fig. 2. The error of a growing prefix of
one fitted forest is read from the fitted trees: :meth:`apply` gives the leaf
each test sample reaches in every tree and ``trees_[t].value`` the leaf class
distributions, which are averaged over the first ``k`` trees.

For speed the CO2 splits run at most 5 CCCP iterations (the package default
is 20); ``--n-trees`` sets the forest size (default 30).

**Needs a download**: satimage comes from OpenML through
:func:`sklearn.datasets.fetch_openml` on the first run and is cached in
scikit-learn's data home (``~/scikit_learn_data``) afterwards. Writes
``co2_vs_random_forest.png`` into ``--out`` (default: a temporary directory).
"""

import argparse
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import fetch_openml, get_data_home  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from obliquetrees import CO2ForestClassifier  # noqa: E402

OUTPUTS = ["co2_vs_random_forest.png"]
#: OpenML data sets this script downloads (name -> version)
OPENML = {"satimage": 1}


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

    X, y = fetch("satimage")
    X, X_test, y, y_test = train_test_split(X, y, test_size=2000, stratify=y, random_state=0)
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
