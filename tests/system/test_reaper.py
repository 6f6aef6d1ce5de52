"""The guard that ends what a local Ray instance started: a process it was never told of (iobench interrupted inside
`ray.init`, before the driver named its tree) is found by the folder its environment names, as Ray's agents inherit
`RAY_AUTH_TOKEN_PATH` and rename themselves (`ray::DashboardAgent`); the process it guards is never one of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from iobench.system.private import private_dir
from iobench.system.processes import process_alive, start_time
from iobench.system.reaper import Reaper

DETACHED = """
import os, subprocess, sys
env = {**os.environ, "RAY_AUTH_TOKEN_PATH": sys.argv[1] + "/auth_token"}
print(subprocess.Popen(["sleep", "300"], env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL).pid)
"""


def _detached_naming(folder) -> tuple[int, int | None]:
    """A process reparented to init whose command line does not name `folder` and whose environment does."""
    out = subprocess.run([sys.executable, "-c", DETACHED, str(folder)], capture_output=True, text=True, timeout=30)
    pid = int(out.stdout)
    return pid, start_time(pid)


def test_the_guard_ends_a_process_it_was_never_told_of_by_the_folder_its_environment_names():
    folder = private_dir("reaper")
    pid, started = _detached_naming(folder)
    try:
        assert str(folder).encode() not in open(f"/proc/{pid}/cmdline", "rb").read()
        Reaper(folder).close()
        assert not (process_alive(pid) and start_time(pid) == started)
        assert not folder.exists()
    finally:
        if process_alive(pid) and start_time(pid) == started:
            os.kill(pid, signal.SIGKILL)


def test_the_guard_spares_the_process_it_guards_though_its_environment_names_the_folder():
    folder = private_dir("reaper")
    code = (
        "import sys; from pathlib import Path; from iobench.system.reaper import Reaper; "
        "Reaper(Path(sys.argv[1])).close(); print('alive')"
    )
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": f"{folder}/auth_token"}
    argv = [sys.executable, "-c", code, str(folder)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr
    assert not folder.exists()
