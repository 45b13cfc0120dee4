"""Run every ```python block of README.md on its own, as a newcomer would.

Each block runs alone in a fresh interpreter (``sys.executable``), in an empty
temporary directory, with the repository root on ``PYTHONPATH`` so that the
source tree's ``obliquetrees`` is the one imported. A block that needs a
name from another block fails here with a ``NameError``. Blocks that import an
optional package (onnx, onnxruntime, skl2onnx, skops, dask, matplotlib; all in
the ``test`` extra) run too, and skip only where that package is not installed.
Each block has an empty numba cache of its own: where the kernels shipped in
the wheel are usable (``pip install .`` before ``pytest``), a block must
compile none.
"""

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from obliquetrees._core._kernel_cache import shipped_kernels_usable

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: imports a block may need beyond the runtime dependencies (all in the test extra)
OPTIONAL = {"onnx", "onnxruntime", "skl2onnx", "skops", "dask", "distributed", "matplotlib"}
#: seconds per block; a first run in a fresh checkout compiles the kernels it uses
#: (up to about 75 s for one block on 2 cores), later runs load them from the cache
TIMEOUT = 300


def _python_blocks(text):
    """``(heading, code)`` of every ```python block, in order.

    ``heading`` is the nearest Markdown heading above the block; lines inside
    fences (a ``# comment`` in code) are not headings. A fence indented under a
    list item has its indentation removed from its lines.
    """
    blocks, heading, code, fence, indent = [], "top", None, None, 0
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None:
            if stripped.startswith("```"):
                fence, indent, code = stripped[3:].strip(), len(line) - len(stripped), []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif stripped.startswith("```"):
            if fence == "python":
                blocks.append((heading, "\n".join(code) + "\n"))
            fence = None
        else:
            code.append(line[indent:])
    assert fence is None, f"README.md ends inside a ```{fence} block"
    return blocks


def _slug(heading):
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


TEXT = README.read_text(encoding="utf-8")
BLOCKS = _python_blocks(TEXT)


def test_every_python_fence_is_collected():
    fences = re.findall(r"^[ \t]*```python[ \t]*$", TEXT, flags=re.MULTILINE)
    assert len(BLOCKS) > 0
    assert len(BLOCKS) == len(fences)


def _imported_modules(code):
    modules = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    return modules


def _run_alone(script):
    """Run ``script`` in a fresh interpreter, in its own directory, on the source tree."""
    path = os.environ.get("PYTHONPATH")
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT) if not path else os.pathsep.join([str(ROOT), path]),
        MPLBACKEND="Agg",
        NUMBA_CACHE_DIR=str(script.parent / "numba"),
    )
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=script.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize(
    "code",
    [block for _, block in BLOCKS],
    ids=[f"{_slug(heading)}-{i}" for i, (heading, _) in enumerate(BLOCKS)],
)
def test_readme_block_runs_alone(code, tmp_path):
    for module in sorted(_imported_modules(code) & OPTIONAL):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the block needs {module} (test extra: pip install '.[test]')")
    script = tmp_path / "readme_block.py"
    script.write_text(code, encoding="utf-8")
    result = _run_alone(script)
    assert result.returncode == 0, f"block failed:\n{code}\nstderr:\n{result.stderr[-5000:]}"
    if shipped_kernels_usable():
        compiled = sorted(p.name for p in (tmp_path / "numba").rglob("*.nbi"))
        assert compiled == [], f"the block compiled kernels the wheel should ship: {compiled}"


def test_blocks_import_the_source_tree(tmp_path):
    script = tmp_path / "which.py"
    script.write_text("import obliquetrees\nprint(obliquetrees.__file__)\n", encoding="utf-8")
    result = _run_alone(script)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == ROOT / "obliquetrees" / "__init__.py"


def _commands(section):
    """The lines of the ```bash blocks of README section ``section`` (a ``## `` heading)."""
    body = TEXT.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readmes_two_commands_verbatim():
    commands = _commands("The two commands")
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in commands:
        assert command in ci, f".ci/run does not run the README's {command!r}"
