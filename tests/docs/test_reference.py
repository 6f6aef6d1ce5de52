"""docs/reference.md is every command's `--help`, regenerated: a changed option without the page fails here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.long
def test_the_command_reference_is_what_help_says():
    done = subprocess.run(
        [sys.executable, "scripts/gen_reference.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
