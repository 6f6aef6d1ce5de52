"""The guard that ends what a local Ray instance started: a process it was never told of (iobench interrupted inside
`ray.init`, before the driver named its tree) is found by the run's owner token in its own environment, as Ray's
agents inherit it and rename themselves (`ray::DashboardAgent`); a process that merely names the run's folder (the
seventh probe's S4: the user's `env RAY_AUTH_TOKEN_PATH=<folder>/auth_token sleep`, `tail -f <folder>/auth_token`)
or holds another token is not ours, and the process it guards is never one of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from iobench.system.private import private_dir
from iobench.system.processes import process_alive, start_time
from iobench.system.reaper import OWNER_VARIABLE, Reaper, new_token

DETACHED = """
import json, os, subprocess, sys
env = {**os.environ, **json.loads(sys.argv[1])}
print(subprocess.Popen(json.loads(sys.argv[2]), env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL).pid)
"""


def _detached(env: dict[str, str], argv: list[str]) -> tuple[int, int | None]:
    """A process reparented to init, with `env` added to its environment."""
    import json

    done = subprocess.run(
        [sys.executable, "-c", DETACHED, json.dumps(env), json.dumps(argv)], capture_output=True, text=True, timeout=30
    )
    pid = int(done.stdout)
    return pid, start_time(pid)


def _alive(pid: int, started: int | None) -> bool:
    return process_alive(pid) and start_time(pid) == started


def test_the_guard_ends_a_process_it_was_never_told_of_by_the_token_in_its_environment_and_spares_bystanders():
    folder = private_dir("reaper")
    token = new_token()
    (folder / "auth_token").write_text("x")
    ours = _detached({OWNER_VARIABLE: token}, ["sleep", "300"])
    bystanders = [
        _detached({"RAY_AUTH_TOKEN_PATH": f"{folder}/auth_token"}, ["sleep", "300"]),
        _detached({}, ["tail", "-f", f"{folder}/auth_token"]),
        _detached({OWNER_VARIABLE: new_token()}, ["sleep", "300"]),  # another run's token
        _detached({OWNER_VARIABLE: token + "0"}, ["sleep", "300"]),
    ]
    try:
        Reaper(folder, token).close()
        assert not _alive(*ours)
        assert all(_alive(*b) for b in bystanders), [b for b in bystanders if not _alive(*b)]
        assert not folder.exists()
    finally:
        for pid, started in [ours, *bystanders]:
            if _alive(pid, started):
                os.kill(pid, signal.SIGKILL)


def test_the_guard_spares_the_process_it_guards_though_its_environment_holds_the_token():
    folder = private_dir("reaper")
    token = new_token()
    code = (
        "import sys; from pathlib import Path; from iobench.system.reaper import Reaper; "
        "Reaper(Path(sys.argv[1]), sys.argv[2]).close(); print('alive')"
    )
    env = {**os.environ, OWNER_VARIABLE: token}
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder), token], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr
    assert not folder.exists()
