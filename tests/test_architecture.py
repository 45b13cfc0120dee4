"""The package's layering, read from its source with ``ast`` (nothing is imported).

- no import cycle between modules of ``obliquetrees``;
- ``obliquetrees._core`` imports only ``_core``, numpy, scipy, numba and the
  standard library;
- ``obliquetrees._training`` (the training machinery the methods share)
  imports only ``_core``/``_training``, numpy, scipy, numba (and its
  llvmlite), joblib and the standard library (no scikit-learn, no
  estimators, no ``obliquetrees.utils``);
- each method's folder (``co2``, ``e2edt``, ``soft``, ``hinge``, ``machine``):
  its training modules import only ``_core``, ``_training`` and the same
  folder's training modules, under the rules of ``_training``; no module of
  a method imports a module of another method;
- ``obliquetrees.utils`` imports no estimator, no method folder and not
  ``base``;
- functions are short and simple: at most ``MAX_FUNCTION_LINES`` lines of
  code (the docstring not counted) and cyclomatic complexity at most
  ``MAX_COMPLEXITY``, except the compiled kernels listed in
  ``LONG_KERNELS``, each with the reason its shape is kept. (Modules are
  split by concept, not by length.)

Imports inside functions (lazy imports) count like module-level ones: they
run as soon as the function does. ``threadpoolctl`` (a declared dependency
that limits BLAS threads, independent of scikit-learn) is allowed in both
layers.
"""

import ast
import sys
from pathlib import Path

PACKAGE = "obliquetrees"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
MAX_FUNCTION_LINES = 120
MAX_COMPLEXITY = 25
#: Compiled kernels over the limits, and why they stay one function.
LONG_KERNELS = {
    "obliquetrees/co2/_kernels.py:descend": (
        "CCCP's epochs x minibatches loop, whose momentum, step size and cached margins "
        "every step reads and writes: split, that state would pass through every call"
    ),
    "obliquetrees/e2edt/_pruned_kernels.py:pruned_em_batch": (
        "a minibatch's E-step and gradient in one pass per sample over its kept paths: "
        "split, each sample's paths would be walked twice"
    ),
    "obliquetrees/e2edt/_pruned_kernels.py:_pruned_rows": (
        "the row-wise form of the same pass (pruned_em_batch with rowwise=True), sample by sample"
    ),
    "obliquetrees/soft/_axis_split.py:best_axis_split_sparse": (
        "one merge per feature of its sorted stored entries with the block of implicit "
        "zeros, whose running sums the whole sweep shares"
    ),
}

#: Third-party top-level packages each layer may import, besides the standard library.
ALLOWED_THIRD_PARTY = {
    "_core": {"numpy", "scipy", "numba", "threadpoolctl"},
    # llvmlite: numba's code generator, for the hinge kernels' prefetch intrinsic
    "_training": {"numpy", "scipy", "numba", "llvmlite", "joblib", "threadpoolctl"},
}
#: Package layers each layer may import.
ALLOWED_LAYERS = {
    "_core": {"_core"},
    "_training": {"_core", "_training"},
}
#: One folder per method: its estimators, its training entry, its kernels, its docstrings.
METHODS = ("co2", "e2edt", "soft", "hinge", "machine")
#: Modules of a method's folder that face users (estimators, their docstrings and size
#: checks, a public module's API): they may import ``base`` and ``utils``. Every other
#: module of the folder is the method's training and follows the rules of ``_training``.
SURFACE = {"__init__", "_estimator", "_regressor", "_docs", "_size"}


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(name):
    return MODULES[name].name == "__init__.py"


def _resolve_relative(module, node):
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module):
    """``(line, imported module)`` for every import statement of ``module``.

    ``from package import name`` counts as importing the submodule
    ``package.name`` when there is one, else ``package`` itself.
    """
    tree = ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))
    found = []
    for node in ast.walk(tree):  # every statement, at any depth
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_relative(module, node) if node.level else node.module
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else source))
    return found


def _location(module, line):
    return f"{MODULES[module].relative_to(ROOT.parent)}:{line}"


def _package_module(name):
    """The module of the package that ``name`` refers to, or None if outside it."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name if name.startswith(PACKAGE) else None


def _layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_no_import_cycle_between_package_modules():
    graph = {
        module: sorted(
            {
                target
                for _, name in imports_of(module)
                if (target := _package_module(name)) and target != module
            }
        )
        for module in MODULES
    }
    cycles = _cycles(graph)
    assert not cycles, "import cycles between package modules (lazy imports included):\n" + (
        "\n".join(" -> ".join(cycle + [cycle[0]]) for cycle in cycles)
    )


def _cycles(graph):
    """One cycle through every strongly connected component with more than one module."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    for v in graph:
        if v not in index:
            visit(v)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph, component):
    """A shortest cycle through the first module of ``component`` (breadth first)."""
    start = min(component)
    parent, frontier = {start: None}, [start]
    while frontier:
        following = []
        for v in frontier:
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                if w in component and w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    return sorted(component)


def _layer_violations(layer):
    allowed_third_party = ALLOWED_THIRD_PARTY[layer] | set(sys.stdlib_module_names)
    violations = []
    for module in MODULES:
        if _layer(module) != layer:
            continue
        for line, name in imports_of(module):
            target = _package_module(name)
            if target is not None:
                ok = _layer(target) in ALLOWED_LAYERS[layer]
            else:
                ok = name.split(".")[0] in allowed_third_party
            if not ok:
                violations.append(f"{_location(module, line)} imports {name}")
    return violations


def test_core_imports_only_core_and_numerical_libraries():
    violations = _layer_violations("_core")
    assert not violations, (
        "obliquetrees._core may import only _core, numpy, scipy, numba, threadpoolctl and "
        "the standard library:\n" + "\n".join(violations)
    )


def test_training_imports_only_core_training_and_numerical_libraries():
    violations = _layer_violations("_training")
    assert not violations, (
        "obliquetrees._training may import only _core, _training, numpy, scipy, numba, "
        "llvmlite, joblib, threadpoolctl and the standard library (no scikit-learn, estimators or "
        "obliquetrees.utils):\n" + "\n".join(violations)
    )


def _method(module):
    layer = _layer(module)
    return layer if layer in METHODS else None


def _is_method_training(module):
    name = MODULES[module].stem
    return _method(module) is not None and name not in SURFACE


def test_every_method_has_its_folder():
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert set(METHODS) <= folders
    for method in METHODS:
        assert any(_is_method_training(m) for m in MODULES if _method(m) == method), method
        # the tests mirror the package: one folder per method
        assert (ROOT.parent / "tests" / method / "__init__.py").exists(), method


def test_method_training_imports_only_core_training_and_its_own_folder():
    allowed_third_party = ALLOWED_THIRD_PARTY["_training"] | set(sys.stdlib_module_names)
    violations = []
    for module in filter(_is_method_training, MODULES):
        for line, name in imports_of(module):
            target = _package_module(name)
            if target is None:
                ok = name.split(".")[0] in allowed_third_party
            else:
                own = _method(target) == _method(module) and _is_method_training(target)
                ok = own or _layer(target) in ALLOWED_LAYERS["_training"]
            if not ok:
                violations.append(f"{_location(module, line)} imports {name}")
    assert not violations, (
        "a method's training modules may import only _core, _training, the same folder's "
        "training modules and the libraries _training may import:\n" + "\n".join(violations)
    )


def test_no_method_imports_another_method():
    violations = [
        f"{_location(module, line)} imports {name}"
        for module in MODULES
        if _method(module)
        for line, name in imports_of(module)
        if (target := _package_module(name)) and _method(target) not in (None, _method(module))
    ]
    assert not violations, (
        "methods meet only in the shared layers (_core, _training, base):\n" + "\n".join(violations)
    )


def test_shared_modules_reach_methods_only_through_the_registry():
    """base, the exporters and the public helpers name no method's module: a new method
    needs no line in them (they read ``_registry`` and the estimators' own hooks)."""
    shared = [
        m
        for m in MODULES
        if _layer(m) in ("base", "onnx", "convert", "inspection", "_registry", "utils")
    ]
    violations = [
        f"{_location(module, line)} imports {name}"
        for module in shared
        for line, name in imports_of(module)
        if (target := _package_module(name)) and _method(target)
    ]
    assert not violations, "\n".join(violations)


def test_utils_imports_no_estimator():
    violations = [
        f"{_location(module, line)} imports {name}"
        for module in MODULES
        if _layer(module) == "utils"
        for line, name in imports_of(module)
        if (target := _package_module(name))
        and (_method(target) or target in (PACKAGE, f"{PACKAGE}.base"))
    ]
    assert not violations, (
        "obliquetrees.utils serves the estimators and imports none of them (nor base):\n"
        + "\n".join(violations)
    )


#: The module every random draw below the estimators starts from (its docstring says why
#: its numpy generators are the ones they are).
RANDOM_MODULE = f"{PACKAGE}._core._random"


def test_random_draws_start_only_in_the_random_module():
    violations = [
        f"{_location(module, node.lineno)} uses numpy.random.{node.attr}"
        for module, path in MODULES.items()
        if module != RANDOM_MODULE
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "random"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id in ("np", "numpy")
    ]
    assert not violations, (
        f"seeded generators come from {RANDOM_MODULE} (one place for the RNG families):\n"
        + "\n".join(violations)
    )


def _complexity(function):
    """McCabe's cyclomatic complexity: 1 + decision points (nested functions included)."""
    branches = (ast.If, ast.For, ast.While, ast.IfExp, ast.ExceptHandler, ast.comprehension)
    branches += (ast.Assert, ast.match_case)
    n = 1
    for node in ast.walk(function):
        if isinstance(node, branches):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
    return n


def _code_lines(function):
    """Lines from the first statement after the docstring to the end."""
    body = function.body
    has_doc = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    first = body[1] if has_doc and len(body) > 1 else body[0]
    return function.end_lineno - first.lineno + 1


def _functions():
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{path.relative_to(ROOT.parent)}:{node.name}", node


def test_functions_are_short_and_simple_or_listed_kernels():
    over = {}
    for name, node in _functions():
        lines, cc = _code_lines(node), _complexity(node)
        if lines > MAX_FUNCTION_LINES or cc > MAX_COMPLEXITY:
            over[name] = (lines, cc)
    unlisted = {k: v for k, v in over.items() if k not in LONG_KERNELS}
    assert not unlisted, (
        f"functions over {MAX_FUNCTION_LINES} lines of code or complexity {MAX_COMPLEXITY} "
        f"((lines, complexity)); split them by step: {unlisted}"
    )
    stale = set(LONG_KERNELS) - set(over)
    assert not stale, f"LONG_KERNELS lists functions within the limits (remove them): {stale}"


def test_the_checks_see_lazy_imports_and_resolve_submodules():
    """The reader itself: a function-level import is found, a submodule is resolved."""
    found = dict((name, line) for line, name in imports_of("obliquetrees._core.predict"))
    assert "obliquetrees._core.machine" in found  # imported inside predict_mean
    assert "obliquetrees._core.traversal_numpy" in found  # ``from obliquetrees._core import ..``
