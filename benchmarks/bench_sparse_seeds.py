"""Dense vs CSR fits whose predictions differ: test accuracy over several seeds.

``bench_sparse`` hashes the predictions of one dense and one CSR fit
(``random_state=0``). CO2 and soft trees differ there: their sparse kernels keep
the standardisation (and CO2's node centring) implicit and sum in another order,
so sparse fits agree with dense fits only to rounding; CO2 then moves a few test
predictions, while the soft tree's online SGD, where one ulp can change the
grown tree, can end in another tree, as a slightly perturbed dense fit would. This measures that
spread: fashion_mnist, the same stratified 10000 training rows (seed 0) as
``bench_sparse``, the fixed 10000 test images, the same estimator settings, for
``random_state`` 0..n-1; reports dense and CSR accuracy per seed, their means
and standard deviations, and the paired CSR - dense difference.
"""

import numpy as np

from benchmarks.bench_sparse import SETTINGS, _canonical, _subsample, train_test
from benchmarks.common import write_results

ESTIMATORS = ("CO2ForestClassifier", "SoftTreeClassifier")


def add_arguments(parser):
    parser.add_argument("--seeds", type=int, default=5, help="random_state 0..seeds-1 (default 5)")
    parser.add_argument(
        "--max-train", type=int, default=10000, help="training rows (default 10000)"
    )
    parser.add_argument("--out", default="sparse_seeds.md", help="markdown file in results/")


def main(args):
    import obliquetrees

    X_train, y, X_test, y_test = train_test("fashion_mnist", seed=0)
    X_train, y = _subsample(X_train, y, args.max_train, 0)  # bench_sparse's rows
    X_csr, X_test_csr = _canonical(X_train), _canonical(X_test)
    X, X_test = X_csr.toarray(), X_test_csr.toarray()
    rows, summary = [], []
    for name in ESTIMATORS:
        cls = getattr(obliquetrees, name)
        acc, same = np.empty((args.seeds, 2)), 0
        for seed in range(args.seeds):
            params = dict(SETTINGS["real"][name], random_state=seed)
            pred_dense = cls(**params).fit(X, y).predict(X_test)
            pred_csr = cls(**params).fit(X_csr, y).predict(X_test_csr)
            acc[seed] = 100 * np.mean(pred_dense == y_test), 100 * np.mean(pred_csr == y_test)
            same += np.array_equal(pred_dense, pred_csr)
            rows.append(
                {
                    "estimator": name,
                    "random_state": seed,
                    "dense %": acc[seed, 0],
                    "CSR %": acc[seed, 1],
                    "CSR - dense": acc[seed, 1] - acc[seed, 0],
                }
            )
            print(rows[-1], flush=True)
        diff = acc[:, 1] - acc[:, 0]
        summary.append(
            {
                "estimator": name,
                "dense % (mean ± sd)": f"{acc[:, 0].mean():.2f} ± {acc[:, 0].std(ddof=1):.2f}",
                "CSR % (mean ± sd)": f"{acc[:, 1].mean():.2f} ± {acc[:, 1].std(ddof=1):.2f}",
                "CSR - dense (mean ± sd)": f"{diff.mean():.2f} ± {diff.std(ddof=1):.2f}",
                "seeds with identical predictions": f"{same} of {args.seeds}",
            }
        )
    notes = (
        __doc__.split("\n\n", 1)[1]
        + "\nSettings: "
        + ", ".join(f"{e}: {SETTINGS['real'][e]}" for e in ESTIMATORS)
        + ".\n"
    )
    path = write_results(
        args.out,
        "Sparse training: dense vs CSR accuracy over seeds (fashion_mnist)",
        [("Summary", summary), ("Per seed", rows)],
        notes,
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("sparse-seeds")
