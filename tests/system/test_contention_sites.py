"""Every module that measures the cores other programs use is one the `quiet_machine` fixture makes quiet: a new
site left out would make its tests' answers depend on what else the CI machine runs."""

from __future__ import annotations

import re

from tests.conftest import MEASURES_OTHER_CORES, ROOT


def test_the_quiet_machine_fixture_covers_every_module_that_measures_other_programs():
    sites = set()
    for path in (ROOT / "iobench").rglob("*.py"):
        if path.name != "contention.py" and re.search(r"\bother_cores_busy\b", path.read_text()):
            sites.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert sites == set(MEASURES_OTHER_CORES)
