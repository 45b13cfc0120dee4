"""Golden outputs: fitted arrays and predictions bit-identical to the record.

Every public estimator and the converted, fine-tuned and leaf-refitted models
(``tests/golden/cases.py``) are fitted with fixed seeds on two data sets each
and compared, checksum by checksum, with ``tests/golden/outputs.json``.
The cases run in one child process whose numpy SIMD dispatch and OpenBLAS
kernels are fixed (``tests/golden/cases.py`` says why), so the record holds on
every x86-64 CPU with AVX2 and FMA. Bits also depend on library versions, so
a record exists per set of versions; where none matches, the tests skip and
say how to record one (``python -m tests.golden.record`` on the revision to
compare with).
"""

import json

import pytest

from tests.golden.cases import all_runs, run_all_canonical
from tests.golden.record import PATH

RECORDS = json.loads(PATH.read_text()) if PATH.exists() else {}


@pytest.fixture(scope="module")
def canonical_runs():
    """Every case's fingerprint, computed once in the fixed configuration."""
    try:
        return run_all_canonical()
    except RuntimeError as error:
        if "failed in the child" in str(error):
            raise
        pytest.skip(str(error))


@pytest.mark.parametrize(("name", "dataset"), all_runs(), ids=lambda v: v)
def test_outputs_match_the_golden_record(canonical_runs, name, dataset):
    key = canonical_runs["key"]
    if key not in RECORDS:
        pytest.skip(
            f"no golden record for these library versions ({key}); record one with "
            "`python -m tests.golden.record` on the revision to compare with"
        )
    expected = RECORDS[key]["runs"][f"{name}/{dataset}"]
    got = canonical_runs["runs"][f"{name}/{dataset}"]
    assert got.keys() == expected.keys(), "the fitted attributes changed"
    changed = sorted(k for k in got if got[k] != expected[k])
    assert not changed, (
        f"{name} on {dataset} differs from the record made at "
        f"{RECORDS[key]['revision']} in: {changed}"
    )
