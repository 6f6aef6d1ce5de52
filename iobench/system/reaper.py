"""A guard that outlives the process that started it: when that process ends, however it ends (SIGKILL included),
the processes it named are ended and its folder removed.

Ray's agents (`ray::DashboardAgent`, `ray::RuntimeEnvAgent`) outlived a SIGKILLed driver for more than a minute,
reparented to init. The guard runs in a session of its own (a Ctrl-C to the terminal's process group does not reach
it) and reads a pipe whose only writer is the process that started it: end of file means that process has closed
it or is gone. Each process it is told of is named by PID and start time, so a PID reused meanwhile is never
signalled. A process it was not told of (started while iobench was being stopped) is one of ours only where its own
environment holds the owner token iobench set before starting what it guards (`OWNER_VARIABLE=<token>`, a secret
of this run told to the guard through the pipe): never by a path in its command line or a variable anyone can copy
(the seventh probe's S4: `env RAY_AUTH_TOKEN_PATH=<the run's folder>/auth_token sleep` and `tail -f` of that file,
both the user's, were ended with the run). Run as `python -m iobench.system.reaper FOLDER` with the pipe on its stdin.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from iobench.system.processes import parent_of, process_alive, python_module, start_time

TERM_WAIT_S = 2.0  # after SIGTERM, before SIGKILL
OWNER_VARIABLE = "IOBENCH_OWNER_TOKEN"


def new_token() -> str:
    """A run's owner token: set in the environment of what the guard will end (`{OWNER_VARIABLE: token}`)."""
    return secrets.token_hex(16)


class Reaper:
    """The guard, seen from the process it guards: `watch` names processes, `close` (or this process's end) ends
    them, and those whose environment holds `token`, and removes the folder."""

    def __init__(self, folder: Path, token: str) -> None:
        self.folder = folder
        read, self._write = os.pipe()  # not inherited by what this process execs (Ray's servers)
        env = {k: v for k, v in os.environ.items() if k != OWNER_VARIABLE}  # the guard is not one it ends
        try:
            self._proc = subprocess.Popen(
                python_module("iobench.system.reaper", str(folder)),
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        finally:
            os.close(read)
        try:
            os.write(self._write, f"token {token}\n".encode())
        except OSError:  # the guard ended at its start: nothing it could end
            pass

    def watch(self, pids: list[int]) -> None:
        """These processes are ended when this process ends (or `close` is called)."""
        lines = "".join(
            f"{pid} {start}\n" for pid in pids if pid != self._proc.pid and (start := start_time(pid)) is not None
        )
        if lines and self._write >= 0:
            try:
                os.write(self._write, lines.encode())
            except OSError:
                pass

    def close(self, wait: float = TERM_WAIT_S + 2.0) -> None:
        """Ends the watched processes now (those still running) and removes the folder; waits for it, bounded."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
            try:
                self._proc.wait(wait)
            except subprocess.TimeoutExpired:
                pass


def descendants(root: int) -> list[int]:
    """Every process below `root` (children, their children, ...), by PID."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        ppid = parent_of(int(entry.name))
        if ppid is not None:
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _holds_token(pid: int, token: str) -> bool:
    """Whether the process's environment holds `OWNER_VARIABLE=token` as one of its entries: Ray's agents rename
    themselves (`ray::DashboardAgent`), and when iobench is interrupted inside `ray.init` they were never named to
    the guard, but they inherit the environment iobench gave Ray."""
    if not token:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{OWNER_VARIABLE}={token}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _ours(pid: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def _holding(token: str) -> set[int]:
    """The processes of ours whose environment holds the run's token, this one and the one it guards (still running
    when it closed the pipe itself) left out."""
    spared = {os.getpid(), os.getppid()}
    pids = (int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit())
    return {pid for pid in pids if pid not in spared and _ours(pid) and _holds_token(pid, token)}


def _end(watched: set[tuple[int, int]], token: str) -> None:
    """SIGTERM to every watched process still the one it was (PID and start time), and to any process of ours
    holding the run's token (started after the last `watch`); SIGKILL to those left after a wait. Ray's raylet starts
    its agents while it comes up: those it started between the scan and its own end are found by a second scan."""
    me = os.getpid()
    found = {pid for pid, start in watched if pid != me and start_time(pid) == start and _ours(pid)}
    targets: dict[int, int | None] = {}
    for _ in range(3):
        new = (found | _holding(token)) - set(targets)
        found = set()
        if not new:
            break
        batch = {pid: start_time(pid) for pid in new}
        targets.update(batch)
        _signal_until_gone(batch)


def _signal_until_gone(targets: dict[int, int | None]) -> None:
    """SIGTERM, then SIGKILL to those still alive after a wait; a process is signalled only while it is still the
    one it was (its start time)."""
    for sig, wait in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, 0.5)):
        alive = [pid for pid, start in targets.items() if process_alive(pid) and start_time(pid) == start]
        for pid in alive:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if process_alive(pid)]
            time.sleep(0.05)


def main(folder: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the end of the pipe ends the guard's wait
    watched: set[tuple[int, int]] = set()
    token = ""
    for line in sys.stdin:
        pid, _, start = line.strip().partition(" ")
        if pid == "token":
            token = start
        elif pid.isdigit() and start.isdigit():
            watched.add((int(pid), int(start)))
    path = Path(folder)
    _end(watched, token)
    from iobench.system.private import state_root

    if path.parent == state_root() and not path.is_symlink():  # only a folder of iobench's own
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
