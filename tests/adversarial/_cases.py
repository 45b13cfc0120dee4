"""The adversarial cases of one model, run in one fresh interpreter.

Starting an interpreter (and loading the kernels) costs seconds, so each
model's edited pickles, random corruptions and input widths run in one
subprocess; ``test_pickles.py`` and ``test_widths.py`` read their parts of its
report. A crash or hang fails every test of that model, naming the last case
printed, and leaves pytest running.
"""

import json

from tests.adversarial._models import model_file
from tests.adversarial._subprocess import assert_ok, run_python

#: Hypothesis examples of random corruption per model.
N_RANDOM = 60

_SNIPPET = """
import json, pickle
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.adversarial import _models as M

blob = M.load_blobs({path!r})[{name!r}]
X = M.data()[0]

# input widths at every prediction entry

import scipy.sparse as sp
from obliquetrees import machine
from obliquetrees._core import traversal, traversal_numpy
from obliquetrees._core import soft
from obliquetrees.hinge import _forward as _hinge_forward

model = pickle.loads(blob)
p = X.shape[1]
inputs = {{"narrower": X[:6, : p - 1], "wider": np.hstack([X[:6], X[:6]])}}
inputs.update({{k + " CSR": sp.csr_matrix(v) for k, v in list(inputs.items())}})
entries = {{}}  # name -> (call, accepts CSR)
if M.is_machine(model):
    for method in ("apply", "predict_value", "margins", "leaf_scores"):
        entries["DecisionMachine." + method] = (getattr(model, method), True)
    for method in ("relaxed_value", "relaxed_weights"):
        entries["DecisionMachine." + method] = (getattr(model, method), False)
else:
    forest = model._forest()
    entries.update({{
        "traversal.apply": (lambda Z: traversal.apply(forest, Z), True),
        "traversal.predict_value": (lambda Z: traversal.predict_value(forest, Z), True),
        "traversal.decision_path": (lambda Z: traversal.decision_path(forest, Z), True),
        "traversal_numpy.apply": (lambda Z: traversal_numpy.apply(forest, Z), False),
        "traversal_numpy.predict_value": (lambda Z: traversal_numpy.predict_value(forest, Z),
                                          False),
        "machine.predict_value": (lambda Z: machine.predict_value(forest, Z), True),
        "estimator.predict": (model.predict, True),
        "estimator.apply": (model.apply, True),
        "estimator.decision_path": (model.decision_path, True),
    }})
    if "SoftTree" in {name!r}:
        entries["soft_predict"] = (lambda Z: soft.soft_predict(model.tree_, Z, model.tree_.value),
                                   True)
    if {name!r}.startswith("E2EDT"):
        entries["soft_predict (E2EDT steepness)"] = (
            lambda Z: soft.soft_predict(model.trees_[0], Z, model.trees_[0].value,
                                        steepness=model.steepness_[0]), True)
    if "_model" in model.__dict__:
        entries["hinge.decision_values"] = (
            lambda Z: _hinge_forward.decision_values(model._model, Z), False)
results = {{}}
for entry, (call, csr) in entries.items():
    for label, Z in inputs.items():
        if label.endswith("CSR") and not csr:
            continue
        print("entry:", entry, label, flush=True)  # the last line names a crashing entry
        try:
            call(Z)
        except ValueError as exc:
            named = f"{{Z.shape[1]}} features" in str(exc) and str(p) in str(exc)
            results[entry + " " + label] = "ok" if named else "unclear: " + str(exc)
        else:
            results[entry + " " + label] = "accepted"
print("WIDTHS", json.dumps(results))

# the required edits, by name
results = {{}}
for case, edit in M.edits_for(pickle.loads(blob)).items():
    print("case:", case, flush=True)  # the last line printed names a crashing case
    results[case] = M.outcome(blob, edit, X)
print("EDITS", json.dumps(results), flush=True)

# hypothesis: one random value (or a truncation) in one container array
shape = M.predict(pickle.loads(blob), X).shape
n_targets = len(M.corruptible_arrays(pickle.loads(blob)))
VALUES = {{"i": [-(10**9), -2, -1, 0, 1, 2, 3, 10**9], "f": [np.nan, np.inf, -np.inf, -1e3, -1.0,
          0.0, 1.0, 1e3], "int8": [-128, -2, -1, 0, 1, 2, 3, 127]}}
seen = {{"rejected": 0, "accepted": 0}}


@settings(max_examples={n}, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, n_targets - 1), where=st.floats(0, 1, exclude_max=True),
       pick=st.integers(0, 7), truncate=st.integers(0, 9))
def corrupt(which, where, pick, truncate):
    model = pickle.loads(blob)
    owner, name = M.corruptible_arrays(model)[which]
    arr = getattr(owner, name)
    if truncate == 0:  # one time in ten: drop the last row
        setattr(owner, name, arr[:-1])
    elif arr.size:
        kind = "int8" if arr.dtype == np.int8 else arr.dtype.kind
        arr.reshape(-1)[int(where * arr.size)] = VALUES[kind][pick]
    data = pickle.dumps(model)
    print("corruption:", name, where, pick, truncate, flush=True)
    try:
        loaded = pickle.loads(data)
    except ValueError:
        seen["rejected"] += 1
        return
    out = M.predict(loaded, X)
    assert out.shape == shape and np.all(np.isfinite(out)), (name, out)
    seen["accepted"] += 1


corrupt()
print("RANDOM", json.dumps(seen), flush=True)

"""

_reports = {}


def report(name, part):
    """Part ``"EDITS"``, ``"RANDOM"`` or ``"WIDTHS"`` of model ``name``'s report."""
    if name not in _reports:
        _reports[name] = run_python(
            _SNIPPET.format(path=model_file(), name=name, n=N_RANDOM), timeout=300
        )
    proc = _reports[name]
    assert_ok(proc)
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith(part + " ")]
    return json.loads(line[len(part) + 1 :])
