"""docs/architecture.md names only paths that exist."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "architecture.md").read_text()


def _named_paths():
    """``(path, where)`` for every file or folder the page names.

    Backticked names ending in ``.py`` or ``/`` are paths from the repository
    root; in a table row whose first cell is a folder, the bare file names of
    the second cell are inside that folder. In the picture, every ``name.py``
    is a module of the package.
    """
    found = []
    picture = DOC.split("```")[1]
    found += [(f"obliquetrees/**/{name}", "picture") for name in re.findall(r"[\w]+\.py", picture)]
    text = DOC.replace(picture, "")
    for line in text.splitlines():
        cells = line.split("|")[1:-1] if line.startswith("|") else [line]
        folder = None
        for i, cell in enumerate(cells):
            for name in re.findall(r"`([\w./<>-]+(?:\.py|/))`", cell):
                if "<" in name:  # a pattern such as obliquetrees/<method>/
                    continue
                if i == 0 and name.endswith("/") and len(cells) > 1:
                    folder = name
                relative = folder and i > 0 and "/" not in name
                found.append((folder + name if relative else name, line[:60]))
    return found


def test_every_path_the_architecture_page_names_exists():
    paths = _named_paths()
    assert len(paths) > 40
    missing = [
        (path, where)
        for path, where in paths
        if not (any(REPO.glob(path)) if "*" in path else (REPO / path).exists())
    ]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
