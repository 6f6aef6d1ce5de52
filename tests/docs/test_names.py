"""What the docs, the refusals, the skip reasons and `doctor` tell a user to type exists: every `iobench[EXTRA]` and
`.[EXTRA]` is an extra of pyproject.toml (`--loader dali` said `pip install 'iobench[nvidia.dali]'`, skips named
`iobench[nodes]` and `iobench[ray-data]`; pip answers "does not provide the extra"), and every `--option` the docs
name is an option of an iobench command, of one of its scripts, or of the other tool the sentence is about."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, pyproject

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

EXTRA = re.compile(r"(?:iobench|\.)\[([a-z][a-z0-9._-]*(?:,\s*[a-z][a-z0-9._-]*)*)\]")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# options of the other tools the docs speak of, each with its tool
FOREIGN = {
    "--help": "every command",
    "--upgrade": "pip",
    "--check": "ruff format",
    "--buffer-size": "rclone mount",
    "--vfs-cache-mode": "rclone mount",
    "--standalone": "torchrun",
    "--nproc-per-node": "torchrun",
    "--rdzv-endpoint": "torchrun",
    "--master-addr": "torchrun",
    "--memory": "scripts/confine.sh",
}


def _docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def _sources() -> list[Path]:
    found = [*_docs(), ROOT / ".ci" / "run", *sorted((ROOT / "scripts").glob("*"))]
    for folder in ("iobench", "formats", "tests"):
        found += sorted((ROOT / folder).rglob("*.py"))
    return [p for p in found if p.is_file()]


def _extras() -> set[str]:
    return set(pyproject()["project"]["optional-dependencies"])


def extras_named(text: str) -> set[str]:
    return {name.strip() for m in EXTRA.finditer(text) for name in m.group(1).split(",")}


def test_every_extra_named_anywhere_is_one_pyproject_provides():
    extras = _extras()
    wrong = {
        f"{p.relative_to(ROOT)}: [{name}]"
        for p in _sources()
        if p.name != "test_names.py"
        for name in extras_named(p.read_text(errors="replace"))
        if name not in extras
    }
    assert not wrong, sorted(wrong)


def test_the_check_finds_an_extra_that_does_not_exist():
    assert extras_named("pip install 'iobench[nvidia.dali]'; pip install '.[formats,ray-data]'") == {
        "nvidia.dali",
        "formats",
        "ray-data",
    }
    assert not {"nvidia.dali", "ray-data"} <= _extras()


def test_every_loaders_extra_is_one_pyproject_provides():
    from iobench.loaders import LOADERS

    assert {k.extra for k in LOADERS.values() if k.extra} <= _extras()


def _iobench_options() -> set[str]:
    import typer

    from iobench.cli import app

    found: set[str] = set()

    def walk(command) -> None:
        for param in command.params:
            found.update(param.opts + param.secondary_opts)
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return found


def test_every_option_the_docs_name_exists():
    known = _iobench_options() | set(FOREIGN)
    scripts = "\n".join(p.read_text(errors="replace") for p in (ROOT / "scripts").glob("*") if p.is_file())
    unknown = {
        f"{p.relative_to(ROOT)}: {m.group()}"
        for p in _docs()
        for m in OPTION.finditer(p.read_text())
        if m.group() not in known and f'"{m.group()}"' not in scripts
    }
    assert not unknown, sorted(unknown)
    assert "--nproc" in known and "--no-such-option" not in known  # the check can fail


def test_a_flag_shows_no_value_in_help():
    """typer 0.29 printed `--help <bool>` and `--quiet <bool>`, as if a flag took a value."""
    assert "<bool>" not in (ROOT / "docs" / "reference.md").read_text()
    assert "--quiet" in (ROOT / "docs" / "reference.md").read_text()
