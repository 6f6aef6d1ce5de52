"""The loader registry answers what it is asked without importing what it names."""

from __future__ import annotations

from dataclasses import replace

from iobench.loaders import LOADERS, LoaderName


def test_a_loader_whose_dotted_extra_has_no_parent_package_is_not_installed():
    """`find_spec("nvidia.dali")` raised ModuleNotFoundError in a fresh venv without any nvidia package: collecting
    the tests (and `--loader all`) failed there, not in a developer's venv that had DALI."""
    kind = replace(LOADERS[LoaderName.DALI], imports="iobench_no_such_parent.child")
    assert kind.installed is False
    assert replace(kind, extra=None, imports=None).installed is True
