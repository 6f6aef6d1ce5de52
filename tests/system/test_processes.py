"""/proc/PID/stat read past the command name, which a process chooses (spaces and parentheses included)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from iobench.system.processes import parent_of, start_time

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def test_parent_and_start_are_read_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    sleeper = tmp_path / "a) 1 2 (b"  # its name is the command name /proc/PID/stat shows, in parentheses
    shutil.copy(shutil.which("sleep"), sleeper)
    child = subprocess.Popen([str(sleeper), "30"])
    try:
        assert open(f"/proc/{child.pid}/stat").read().startswith(f"{child.pid} (a) 1 2 (b) ")
        assert parent_of(child.pid) == os.getpid()
        assert start_time(child.pid) >= start_time(os.getpid()) > 0
    finally:
        child.kill()
        child.wait()
    assert parent_of(child.pid) is None and start_time(child.pid) is None  # gone: nothing to name
