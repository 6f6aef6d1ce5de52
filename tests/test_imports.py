"""Every `from iobench... import name` in the code, scripts and tests names something that exists, the
ones inside functions included (importing each module runs only its top-level imports: five imports
inside functions named a module's old home after a move, and one of their paths had no test)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = [
    *sorted((ROOT / "iobench").rglob("*.py")),
    *sorted((ROOT / "formats").glob("*.py")),
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
]


def _imports(path: Path) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("iobench"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_imported_name_exists(path):
    missing = [f"{path.name}:{line}: {module} has no {name}" for line, module, name in _imports(path)
               if not _exists(module, name)]  # fmt: skip
    assert missing == []


def _exists(module: str, name: str) -> bool:
    """A name in the module, or a submodule of the package."""
    target = importlib.import_module(module)
    if hasattr(target, name):
        return True
    return hasattr(target, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None
