"""Slow guard: each public estimator's first fit in a fresh process with an empty numba cache.

Runs ``benchmarks/bench_first_fit.py``'s child on the package under test
(this checkout). Where shipped kernels are usable (an installed wheel, or a
checkout whose sources an installed build was made from), nothing should compile
and the bound is 20 s, twice issue 18's 10 s on a quiet machine; without
them every kernel compiles and the bound is 120 s, a hang or runaway guard.
"""

import pytest

from benchmarks.bench_first_fit import ESTIMATORS, first_fit

OURS = [name for name in ESTIMATORS if name.startswith("obliquetrees.")]


@pytest.mark.slow
@pytest.mark.parametrize("estimator", OURS, ids=lambda name: name.rsplit(".", 1)[1])
def test_first_fit_with_an_empty_numba_cache_is_bounded(estimator, tmp_path):
    result = first_fit(estimator, tmp_path / "numba", source=True)
    bound = 20.0 if result["shipped kernels"] else 120.0
    assert result["fit s"] + result["predict s"] <= bound, result
