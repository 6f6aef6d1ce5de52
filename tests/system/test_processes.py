"""/proc/PID/stat read past the command name, which a process chooses (spaces and parentheses included), and a
process that has exited told from one that runs."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time

import pytest

from iobench.system import processes
from iobench.system.processes import parent_of, process_alive, start_time

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


def test_a_zombie_is_not_alive_nor_one_its_parent_is_reaping(monkeypatch):
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert process_alive(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        assert not process_alive(child.pid)  # exited, not yet reaped: it maps nothing
    finally:
        child.kill()
        child.wait()
    assert not process_alive(child.pid)
    # The parent reaping it: Z becomes X (dead) for a moment before the entry goes; the Ray loader's close() saw
    # its actor's Z, and the test after it saw X and called the process alive again (CI's extras step).
    for state, alive in (("X", False), ("x", False), ("S", True), ("R", True), ("D", True)):
        stat = f"{os.getpid()} (a) X (b) {state} 1 1 1 0"
        monkeypatch.setattr(processes, "open", lambda path, s=stat: io.StringIO(s), raising=False)
        assert process_alive(os.getpid()) is alive, state
