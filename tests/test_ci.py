"""CI's third step runs, with the extras installed, every test file that skips without them: a file left off
its list has tests that no CI run ever executes (test_hostile_formats.py was, for one release)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

NEEDS_AN_EXTRA = re.compile(
    r"format_param|every_format|NEEDS_TORCHDATA|NEEDS_SPDL|importorskip|FORMATS\.installed|pip install 'iobench\["
)


def test_every_test_file_that_needs_an_extra_runs_in_the_extras_step():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extras_step = ci[ci.index("# 3.") :]
    listed = set(re.findall(r"tests/[\w/]*test_\w+\.py", extras_step))
    needing = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")
               if NEEDS_AN_EXTRA.search(path.read_text(encoding="utf-8"))}  # fmt: skip
    needing.discard("tests/test_ci.py")
    assert needing - listed == set()


def test_every_package_is_installed_by_a_plain_install():
    """`pip install .` installs the packages pyproject lists, not what the folder holds: a package left off
    works in the editable install of the tests and breaks the README's first command."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("iobench", *p.parent.relative_to(ROOT / "iobench").parts))
        for p in (ROOT / "iobench").rglob("__init__.py")
    }
    found.discard("iobench.formats")  # a link in some checkouts; installed from formats/ (package-dir)
    assert found - listed == set()
