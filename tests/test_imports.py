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
    *sorted((ROOT / "tests").rglob("*.py")),  # every test file: a glob of tests/*.py checked none of the 67 files
]  # that moved into package folders


def test_every_test_file_is_checked():
    """The sources include the test files in package folders (tests/run/, tests/loaders/, ...), not only the top."""
    checked = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    every = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")}
    assert every <= checked and any("/" in name.removeprefix("tests/") for name in every)


def _imports(path: Path) -> list[tuple[int, str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("iobench"):
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_imported_name_exists(path):
    assert _missing_names(path) == []


def _missing_names(path: Path) -> list[str]:
    return [
        f"{path.name}:{line}: {module} has no {name}"
        for line, module, name in _imports(path)
        if not _exists(module, name)
    ]


def test_a_name_that_does_not_exist_is_found(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("def f():\n    from iobench.sessions.run import no_such_session\n")
    assert _missing_names(bad) == ["test_bad.py:2: iobench.sessions.run has no no_such_session"]


def _exists(module: str, name: str) -> bool:
    """A name in the module, or a submodule of the package. A module that imports an optional library which is
    not installed (zarr in the README's bare venv) is read instead of imported: its top-level names."""
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError as missing:
        if (missing.name or "").startswith("iobench"):
            raise
        return name in _top_level_names(Path(importlib.util.find_spec(module).origin))
    if hasattr(target, name):
        return True
    return hasattr(target, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def test_a_module_whose_optional_library_is_missing_is_read_for_its_names(monkeypatch):
    """The fallback is what runs in the README's bare venv; here zarr is made unimportable to run it anyway."""
    import sys

    monkeypatch.setitem(sys.modules, "zarr", None)
    monkeypatch.delitem(sys.modules, "iobench.formats.zarr_store", raising=False)
    assert _exists("iobench.formats.zarr_store", "checked_arrays")
    assert not _exists("iobench.formats.zarr_store", "no_such_name")
