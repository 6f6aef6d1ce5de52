"""CI's third step runs, with the extras installed, every test file that skips without them (`pytest -m extras`): a
file not marked has tests that no CI run ever executes (test_hostile_formats.py was left off CI's hand-written list
for one release)."""

from __future__ import annotations

import re

from tests.conftest import ROOT, pyproject

NEEDS_AN_EXTRA = re.compile(
    r"format_param|every_format|NEEDS_TORCHDATA|NEEDS_SPDL|importorskip|needs_module|FORMATS\.installed|"
    r"pip install 'iobench\["
)


EXTRAS_MARK = re.compile(r"^pytestmark = .*pytest\.mark\.extras", re.M | re.S)


def unmarked(paths: list) -> set[str]:
    """The test files that need an extra and are not marked `extras`."""
    texts = {path.name: path.read_text(encoding="utf-8") for path in paths}
    return {name for name, text in texts.items() if NEEDS_AN_EXTRA.search(text) and not EXTRAS_MARK.search(text)}


def test_every_test_file_that_needs_an_extra_runs_in_the_extras_step():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q -m extras" in ci[ci.index("# 3.") :]
    files = [p for p in (ROOT / "tests").rglob("test_*.py") if p.name != "test_ci.py"]
    assert unmarked(files) == set()


def test_a_file_that_needs_an_extra_without_the_mark_is_found(tmp_path):
    needs = tmp_path / "test_needs.py"
    needs.write_text("import pytest\npytest.importorskip('ray')\n")
    assert unmarked([needs]) == {"test_needs.py"}
    needs.write_text("import pytest\npytest.importorskip('ray')\npytestmark = pytest.mark.extras\n")
    assert unmarked([needs]) == set()


def test_every_package_is_installed_by_a_plain_install():
    """`pip install .` installs the packages pyproject lists, not what the folder holds: a package left off
    works in the editable install of the tests and breaks the README's first command."""
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    found = {
        ".".join(("iobench", *p.parent.relative_to(ROOT / "iobench").parts))
        for p in (ROOT / "iobench").rglob("__init__.py")
    }
    found.discard("iobench.formats")  # a link in some checkouts; installed from formats/ (package-dir)
    assert found - listed == set()


def test_an_unmarked_test_that_fills_its_folder_is_told_to_shrink_or_be_marked_slow(tmp_path):
    from tests.conftest import SMALL_BYTES, too_big

    (tmp_path / "data.bin").write_bytes(bytes(SMALL_BYTES + 1))
    assert "mark it @pytest.mark.slow" in too_big(tmp_path, slow=False)
    assert too_big(tmp_path, slow=True) is None
    (tmp_path / "data.bin").write_bytes(bytes(1024))
    assert too_big(tmp_path, slow=False) is None


def test_what_a_plain_pytest_leaves_out_ci_runs():
    """addopts leaves the crash matrix and the long tests out of the README's command (to take minutes); a
    marker left out there and run by no step of CI would be tests that never run."""
    addopts = pyproject()["tool"]["pytest"]["ini_options"]["addopts"]
    left_out = re.findall(r"not (\w+)", addopts)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    run = re.findall(r"^python -m pytest -q -m '?(\w+)", ci, re.M)
    assert set(left_out) >= {"crash", "long"} and set(left_out) <= set(run)
