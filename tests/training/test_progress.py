"""Progress lines of long fits: one per finished tree at ``verbose=1``, none at 0."""

import io
import re

import joblib
import numpy as np
import pytest
from sklearn.datasets import make_classification

from obliquetrees import (
    CO2ForestClassifier,
    CO2ForestRegressor,
    E2EDTClassifier,
    HingeForestClassifier,
    HingeForestRegressor,
)
from obliquetrees._training._parallel import parallel_map
from obliquetrees._training._progress import Progress, format_seconds

LINE = re.compile(r"^\[(\w+)\] tree (\d+)/(\d+); \d+\.\d s elapsed, (about \d+\.\d s left|done)$")


def _square(x):
    return x * x


@pytest.mark.parametrize(
    "seconds, text",
    [(0.04, "0.0 s"), (42.04, "42.0 s"), (185, "3 min 05 s"), (7380, "2 h 03 min")],
)
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_progress_estimates_the_time_left_from_the_mean_unit():
    out = io.StringIO()
    progress = Progress("Model", 4, unit="epoch", verbose=1, may_stop_early=True, stream=out)
    progress.start -= 10.0  # as if two units had taken 10 s
    progress.update(done=2, detail="loss 0.5")
    line = out.getvalue().strip()
    assert line.startswith("[Model] epoch 2/4, loss 0.5; 10.")
    assert line.endswith("elapsed, at most 10.0 s left")


def test_progress_is_quiet_at_verbose_0():
    out = io.StringIO()
    progress = Progress("Model", 3, verbose=0, stream=out)
    for _ in range(3):
        progress.update()
    assert out.getvalue() == "" and progress.done == 3


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_parallel_map_keeps_the_order_and_reports_every_task(n_jobs, capsys):
    assert parallel_map(_square, [(i,) for i in range(7)], n_jobs=n_jobs, verbose=1) == [
        i * i for i in range(7)
    ]
    lines = capsys.readouterr().out.splitlines()
    assert [LINE.match(line).group(2) for line in lines] == [str(k) for k in range(1, 8)]
    assert lines[-1].endswith("done")


@pytest.mark.parametrize(
    "make, n_grown",
    [
        # oblique_penalty="auto" grows 2 pilot trees at each of its 2 margins, then 1 more
        (lambda v: CO2ForestClassifier(n_estimators=3, max_depth=3, verbose=v, random_state=0), 5),
        (lambda v: CO2ForestRegressor(n_estimators=3, max_depth=3, verbose=v, random_state=0), 3),
        (
            lambda v: E2EDTClassifier(
                n_estimators=3, max_depth=2, max_epochs=1, verbose=v, random_state=0
            ),
            3,
        ),
    ],
    ids=["CO2ForestClassifier", "CO2ForestRegressor", "E2EDTClassifier"],
)
def test_forests_report_each_tree_grown_at_verbose_1_only(make, n_grown, capsys):
    X, y = make_classification(n_samples=200, n_features=6, random_state=0)
    y = y.astype(float) if "Regressor" in type(make(0)).__name__ else y
    quiet = make(0).fit(X, y)
    assert capsys.readouterr().out == ""
    loud = make(1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines
    assert [m.group(1) for m in matches] == [type(loud).__name__] * n_grown
    assert [int(m.group(2)) for m in matches] == list(range(1, n_grown + 1))
    assert lines[-1].endswith("done")
    np.testing.assert_array_equal(quiet.predict(X), loud.predict(X))


def test_backends_without_generators_report_once_at_the_end(capsys):
    with joblib.parallel_backend("multiprocessing", n_jobs=2):
        assert parallel_map(_square, [(i,) for i in range(5)], verbose=1) == [
            i * i for i in range(5)
        ]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]).group(2) == "5"


EPOCH = re.compile(
    r"^\[(\w+)\] epoch (\d+)/(\d+), loss \d+\.\d+, val_loss \d+\.\d+; "
    r"\d+\.\d s elapsed, (at most \d+\.\d s left|done)$"
)


@pytest.mark.parametrize("cls", [HingeForestClassifier, HingeForestRegressor])
def test_hinge_forests_report_each_epoch_and_early_stopping(cls, capsys):
    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    y = y.astype(float) if cls is HingeForestRegressor else y
    params = dict(n_estimators=4, max_depth=2, max_epochs=30, n_iter_no_change=1, random_state=0)
    # one training (the classifier's "auto" defaults report each candidate's)
    params.update(n_hinge_features=100, feature_screening=False)
    quiet = cls(**params).fit(X, y)
    assert capsys.readouterr().out == ""
    loud = cls(verbose=1, **params).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    epochs = [EPOCH.match(line) for line in lines[:-1]]
    assert all(epochs), lines
    assert [int(m.group(2)) for m in epochs] == list(range(1, len(epochs) + 1))
    assert {m.group(1) for m in epochs} == {cls.__name__}
    # n_iter_no_change=1 stops long before 30 epochs, and says so
    assert len(epochs) < 30
    assert lines[-1].startswith(f"[{cls.__name__}] stopped after epoch {len(epochs)}/30: ")
    np.testing.assert_array_equal(quiet.predict(X), loud.predict(X))


def test_hinge_auto_names_each_candidate_and_the_one_it_keeps(capsys):
    # 30 inputs, 4 of them informative: the screen keeps some, so three candidates train
    X, y = make_classification(
        n_samples=400, n_features=30, n_informative=4, shuffle=False, random_state=0
    )
    params = dict(n_estimators=4, max_depth=2, max_epochs=3, random_state=0)
    quiet = HingeForestClassifier(**params).fit(X, y)
    assert capsys.readouterr().out == ""
    loud = HingeForestClassifier(verbose=1, **params).fit(X, y)
    own = [line for line in capsys.readouterr().out.splitlines() if not EPOCH.match(line)]
    assert len(own) == 4, own
    head = "[HingeForestClassifier] "
    assert own[0] == head + "candidate 1/3: 100 learnt features on every input"
    screened = re.match(
        r"^\[HingeForestClassifier\] candidate 2/3: 100 learnt features on the (\d+) of 30 "
        r"inputs the screen kept$",
        own[1],
    )
    assert screened and 1 <= int(screened.group(1)) < 30, own
    assert own[2] == head + "candidate 3/3: the raw inputs (axis-aligned decisions)"
    kept = re.match(
        r"^\[HingeForestClassifier\] kept candidate (\d)/3 \(lowest validation loss, "
        r"(\d+\.\d+)\): (.*)$",
        own[3],
    )
    assert kept, own
    index = int(kept.group(1)) - 1
    # the line names the candidate the model holds, and its best validation loss
    assert kept.group(3) == own[index].split(": ", 1)[1]
    assert float(kept.group(2)) == pytest.approx(min(quiet.validation_loss_curve_), abs=1e-5)
    if index == 1:
        assert quiet.screened_features_.sum() == int(screened.group(1))
    else:
        assert quiet.screened_features_ is None
        assert quiet.n_hinge_features_ == (100 if index == 0 else None)
    np.testing.assert_array_equal(quiet.predict(X), loud.predict(X))


@pytest.mark.parametrize("n_estimators, verbose", [(1, 1), (2, 2)])
def test_e2edt_reports_growth_and_every_finetune_epoch(n_estimators, verbose, capsys):
    X, y = make_classification(n_samples=200, n_features=6, random_state=0)
    params = dict(n_estimators=n_estimators, max_depth=2, max_epochs=1, finetune_epochs=3)
    E2EDTClassifier(verbose=verbose, random_state=0, **params).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    for k in range(1, n_estimators + 1):
        label = "E2EDTClassifier" if n_estimators == 1 else f"E2EDTClassifier tree {k}/2"
        own = [line for line in lines if line.startswith(f"[{label}] ") and not LINE.match(line)]
        assert re.match(rf"^\[{label}\] greedy growth 1/1, \d+ splits; ", own[0]), own
        assert [line.split(";")[0] for line in own[1:]] == [
            f"[{label}] finetune epoch {e}/3" for e in (1, 2, 3)
        ]
    # one line per finished tree (a single tree's too)
    assert len([line for line in lines if LINE.match(line)]) == n_estimators
