"""The benchmark runner: ``python -m benchmarks <subcommand> [arguments]`` from the repository root.

Each subcommand is a module of this package with ``add_arguments(parser)`` and
``main(args)``; ``python -m benchmarks <subcommand> --help`` lists its
arguments. Result files land in ``benchmarks/results`` and name the command
that regenerates them (see ``benchmarks/README.md``).
"""

import argparse
import ast
import importlib
import importlib.util
import shlex
import sys

from benchmarks import common

#: subcommand -> module (imported only when its subcommand runs).
SUBCOMMANDS = {
    "co2": "benchmarks.bench_co2",
    "e2edt": "benchmarks.bench_e2edt",
    "soft": "benchmarks.bench_soft",
    "hinge": "benchmarks.bench_hinge",
    "machine": "benchmarks.bench_machine",
    "predict": "benchmarks.bench_predict",
    "memory": "benchmarks.bench_memory",
    "parallel": "benchmarks.bench_parallel",
    "missing": "benchmarks.bench_missing",
    "categorical": "benchmarks.bench_categorical",
    "categorical-validation": "benchmarks.categorical_validation",
    "monotonic": "benchmarks.bench_monotonic",
    "monotonic-validation": "benchmarks.monotonic_validation",
    "monotonic-defaults": "benchmarks.monotonic_defaults",
    "monotone-pairs": "benchmarks.monotone_pairs",
    "monotone-additive": "benchmarks.monotone_additive",
    "hinge-concrete-cost": "benchmarks.hinge_concrete_cost",
    "free-tree-price": "benchmarks.free_tree_price",
    "regression": "benchmarks.bench_regression",
    "quantiles": "benchmarks.bench_quantiles",
    "e2edt-regression-validation": "benchmarks.e2edt_regression_validation",
    "e2edt-finetune-budget": "benchmarks.e2edt_finetune_budget",
    "e2edt-finetune-epochs": "benchmarks.e2edt_finetune_epochs",
    "e2edt-anneal": "benchmarks.e2edt_anneal",
    "proba": "benchmarks.bench_proba",
    "sparse": "benchmarks.bench_sparse",
    "sparse-seeds": "benchmarks.bench_sparse_seeds",
    "import": "benchmarks.bench_import",
    "first-fit": "benchmarks.bench_first_fit",
    "compile": "benchmarks.bench_compile",
    "unpickle-check": "benchmarks.bench_unpickle_check",
    "profile-co2": "benchmarks.profile_co2",
    "figure-e2edt-spatial": "benchmarks.figure_e2edt_spatial",
    "onnx": "benchmarks.bench_onnx",
    "dask": "benchmarks.bench_dask",
    "scale": "benchmarks.bench_scale",
    "suite": "benchmarks.bench_suite",
    "cost": "benchmarks.bench_cost",
    "defaults-validation": "benchmarks.defaults_validation",
    "run": "benchmarks.run",
}


def _summary(module):
    """First line of a module's docstring, read without importing it (imports are slow)."""
    source = importlib.util.find_spec(module).loader.get_source(module)
    return (ast.get_docstring(ast.parse(source)) or "").splitlines()[0]


def subcommand_parser(name):
    """The argument parser of one subcommand and its module."""
    module = importlib.import_module(SUBCOMMANDS[name])
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}",
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return parser, module


def run(argv=None):
    """Parse ``argv`` (default: the process's arguments) and run the subcommand."""
    argv = sys.argv[1:] if argv is None else list(argv)
    width = max(map(len, SUBCOMMANDS))
    listing = "\n".join(f"  {n:<{width}}  {_summary(m)}" for n, m in SUBCOMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.split("\n\n")[0],
        epilog="subcommands:\n" + listing,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("subcommand", choices=SUBCOMMANDS, metavar="subcommand")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the subcommand's arguments")
    top = parser.parse_args(argv)
    sub, module = subcommand_parser(top.subcommand)
    args = sub.parse_args(top.arguments)
    common.COMMAND = "python -m benchmarks " + shlex.join(argv)
    with common.LoadSampler() as common.SAMPLER:
        return module.main(args)


def script(name):
    """Entry of ``python -m benchmarks.<module>``: the same as ``python -m benchmarks <name>``."""
    return run([name, *sys.argv[1:]])


if __name__ == "__main__":
    run()
