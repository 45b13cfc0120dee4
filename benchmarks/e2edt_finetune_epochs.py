"""E2EDTClassifier above the row budget: validation accuracy after every finetune epoch.

Asks whether early stopping of the finetune could cut its cost above the row
budget (issue 17: 10 trees of depth 10 on 100,000 rows must fit within 5x
the CPU of RandomForestClassifier(10)). On the data of the scale benchmark
(``bench_scale``: ``make_classification(n_features=40, n_informative=20,
n_classes=5)``), training rows only: the first fifth of the training part is
held out for validation, the rest trains (the test rows are never read).
One fresh process fits ``E2EDTClassifier(n_estimators=10, max_depth=10,
random_state=0, n_jobs=1)`` (otherwise the defaults, or the finetune epochs
and steepness increase of the row) with its finetune observed after every
epoch: the tree is stored as the estimator stores it (its leaves are that
epoch's distributions; the fitted estimator's final leaves-only pass over all
rows is not applied) and evaluated on the validation rows.

Per epoch: the validation accuracy of the deterministic (hard) trees, their
mean and that of the forest of all trees at that epoch (argmax of the mean
leaf distribution, as ``predict`` does), the mean soft log-loss of the
trees (the probabilistic model with the steepness of that epoch), and the
mean finetune CPU seconds of a tree up to that epoch (process time, the
evaluation excluded). "final" is the fitted estimator's validation accuracy
(after the leaves-only pass over all rows). The patience table simulates
early stopping on the same validation rows: a tree stops once ``patience``
epochs have passed without a higher validation accuracy than its best and
keeps its best epoch; it gives the stop epochs, the forest of the kept trees'
accuracy and the share of the finetune CPU spent until the stops. (These
validation rows are larger and less noisy than a validation draw an
estimator could afford, so the simulated stops are, if anything, too late
rather than too early.)

    python -m benchmarks e2edt-finetune-epochs                       # ~15 min on 2 cores
    python -m benchmarks e2edt-finetune-epochs --data synthetic-30000
    python -m benchmarks e2edt-finetune-epochs --finetune-epochs 30 --steepness-increase 0.2
"""

import json

from benchmarks.bench_scale import DATA
from benchmarks.common import results_path, run_child_row, write_results

RESULTS = "e2edt_finetune_epochs.json"
PATIENCES = (3, 5, 10)

CHILD = """
import json, sys, time
import numpy as np
from benchmarks.bench_scale import load_data
from obliquetrees import E2EDTClassifier
from obliquetrees._core import traversal
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.soft import soft_predict
from obliquetrees._core.tree import standardization
from obliquetrees.e2edt import training as E
from obliquetrees._training.leaf_models import Categorical

data, settings, patiences = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
X, y, _, _ = load_data(data)  # the test rows are not used
n_val = X.shape[0] // 5
Xv, yv, X, y = X[:n_val], y[:n_val], X[n_val:], y[n_val:]
n_classes = int(y.max()) + 1
mean, scale = standardization(X, np.ones(X.shape[0]))  # as fit_e2edt (no sample_weight)
leaves = Categorical(n_classes)
curves = []  # per tree: [(hard acc, soft log-loss, finetune CPU s)] for epochs 0..E
forest = {}  # epoch -> summed leaf distributions of the validation rows
kept = {p: [] for p in patiences}  # per patience: (stop epoch, best epoch, output) per tree


def evaluate(tt, epoch, curve, state):
    tree, steep = E.to_oblique_tree(tt, Xv, yv, np.ones(n_val), leaves, mean, scale)
    hard = traversal.predict_value(ObliqueForest.from_trees([tree], validate=False), Xv, 1)
    soft = soft_predict(tree, Xv, tree.value, steepness=steep)
    soft = soft / soft.sum(axis=1, keepdims=True)
    acc = float(np.mean(hard.argmax(axis=1) == yv))
    loss = float(-np.mean(np.log(np.maximum(soft[np.arange(n_val), yv], 1e-12))))
    forest[epoch] = forest.get(epoch, 0) + hard
    for p, s in state.items():
        if s["stop"] is None:
            if acc > s["best"]:
                s.update(best=acc, epoch=epoch, out=hard)
            elif epoch - s["epoch"] >= p:
                s["stop"] = epoch
    curve.append([acc, loss])


class Observer:
    # stands in for the per-epoch Progress of finetune
    def __init__(self, tt):
        self.tt, self.curve, self.cpu, self.epoch = tt, [], [0.0], 0
        self.state = {p: dict(best=-1.0, epoch=0, out=None, stop=None) for p in patiences}
        evaluate(tt, 0, self.curve, self.state)
        self.t0 = time.process_time()

    def update(self, done=None, detail=""):
        self.cpu.append(self.cpu[-1] + time.process_time() - self.t0)
        self.epoch += 1
        evaluate(self.tt, self.epoch, self.curve, self.state)
        self.t0 = time.process_time()


finetune = E.finetune


def observed(tt, *args, progress=None):
    obs = Observer(tt)
    finetune(tt, *args, progress=obs)
    curves.append([c + [t] for c, t in zip(obs.curve, obs.cpu)])
    for p, s in obs.state.items():
        kept[p].append((obs.epoch if s["stop"] is None else s["stop"], s["epoch"], s["out"]))
    return tt


E.finetune = observed  # _fit_one_tree calls it through the module
model = E2EDTClassifier(n_estimators=10, max_depth=10, n_jobs=1, random_state=0, **settings)
cpu = time.process_time()
model.fit(X, y)
cpu = time.process_time() - cpu
C = np.array(curves)  # (trees, epochs + 1, 3)
epochs = [
    {
        "epoch": e,
        "forest accuracy": float(np.mean(forest[e].argmax(axis=1) == yv)),
        "mean tree accuracy": float(C[:, e, 0].mean()),
        "min tree accuracy": float(C[:, e, 0].min()),
        "max tree accuracy": float(C[:, e, 0].max()),
        "mean soft log-loss": float(C[:, e, 1].mean()),
        "finetune CPU s per tree": float(C[:, e, 2].mean()),
    }
    for e in range(C.shape[1])
]
patience = []
for p in patiences:
    stops = [s for s, _, _ in kept[p]]
    out = sum(o for _, _, o in kept[p])
    patience.append({
        "patience": p,
        "stop epochs": " ".join(map(str, stops)),
        "best epochs": " ".join(str(b) for _, b, _ in kept[p]),
        "forest accuracy": float(np.mean(out.argmax(axis=1) == yv)),
        "finetune CPU share": float(np.mean([C[t, s, 2] / C[t, -1, 2]
                                             for t, s in enumerate(stops)])),
    })
print(json.dumps({
    "train rows": int(X.shape[0]), "validation rows": int(n_val),
    "final accuracy": float(np.mean(model.predict(Xv) == yv)),
    "fit CPU s (with the evaluations)": cpu,
    "best epochs (hard accuracy)": " ".join(str(int(b)) for b in C[:, :, 0].argmax(axis=1)),
    "epochs": epochs, "patience": patience,
}))
"""


def add_arguments(parser):
    """The arguments of ``python -m benchmarks e2edt-finetune-epochs``."""
    parser.add_argument("--data", nargs="+", choices=DATA, default=["synthetic-100000"])
    parser.add_argument("--finetune-epochs", type=int, default=None, help="default: 3 x 20")
    parser.add_argument("--steepness-increase", type=float, default=0.1)
    parser.add_argument("--redo", action="store_true", help="measure stored settings again")


def main(args):
    path = results_path(RESULTS)
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    settings = {"finetune_epochs": args.finetune_epochs}
    settings["steepness_increase"] = args.steepness_increase
    for data in args.data:
        key = {"data": data, **settings}
        if not args.redo and any(_key(r) == key for r in runs):
            continue
        run = run_child_row(key, CHILD, data, json.dumps(settings), json.dumps(PATIENCES))
        runs = [r for r in runs if _key(r) != key] + [run]
        write_results(RESULTS, data={"runs": runs})
        _report(runs)


def _key(run):
    return {k: run[k] for k in ("data", "finetune_epochs", "steepness_increase")}


def _report(runs):
    tables = []
    for run in runs:
        epochs = run["finetune_epochs"] or "default"
        steep = run["steepness_increase"]
        head = f"{run['data']}, finetune_epochs={epochs}, steepness_increase={steep}"
        summary = {k: v for k, v in run.items() if k not in ("epochs", "patience", *_key(run))}
        every = run["epochs"]
        shown = [r for r in every if r["epoch"] % 5 == 0 or r["epoch"] == len(every) - 1]
        tables += [
            (head, [summary]),
            (f"{head}: per epoch (every 5th)", shown),
            (f"{head}: simulated early stopping (keep the best epoch)", run["patience"]),
        ]
    write_results(
        "e2edt_finetune_epochs.md",
        "E2EDTClassifier above the row budget: validation accuracy per finetune epoch",
        tables,
        __doc__.split("\n\n    python")[0],
    )


if __name__ == "__main__":
    from benchmarks.__main__ import script

    script("e2edt-finetune-epochs")
