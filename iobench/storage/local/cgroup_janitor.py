"""The confined run's janitor: a process of its own, outside the run's cgroups, that removes them if the run
is killed.

`python -m iobench.storage.local.cgroup_janitor GROUP...` waits on its stdin. A line means the run released its
groups itself: it exits. End of file means every holder of the pipe's write end is gone, the run and the
DataLoader workers it forked (SIGKILL closes all of a process's descriptors): it then moves out whatever is
still inside each group after a grace period, and removes the groups. Before it, a killed run left its groups
(and its read throttle) until the next confined run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system.processes import python_module

GRACE_SECONDS = 30  # a killed run's workers notice their parent is gone within a few seconds
POLL_SECONDS = 0.1


def remove(group: Path, grace: float = GRACE_SECONDS) -> None:
    """Wait for the group to empty (moving what stays past `grace` to its parent), then remove it."""
    deadline = time.monotonic() + grace
    while True:
        try:
            pids = (group / "cgroup.procs").read_text().split()
        except OSError:
            return  # already gone
        if pids and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            continue
        for pid in pids:
            try:
                (group.parent / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # it exited meanwhile
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline + grace:
                return  # not ours to force: the next confined run removes it once it is empty
            time.sleep(POLL_SECONDS)


class Janitor:
    """The run's handle on its janitor, started outside the groups in a session of its own (Ctrl-C is the
    run's); told `done` when the run released them itself."""

    def __init__(self, groups: list[Path]) -> None:
        self.process = subprocess.Popen(
            python_module("iobench.storage.local.cgroup_janitor", *map(str, groups)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        if self.process.stdout.readline().strip() != "ready":
            self.done()
            raise IobenchError("the cgroups' janitor process did not start")

    def done(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.communicate(input="done\n", timeout=10)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            process.kill()
            process.communicate()


def main(argv: list[str]) -> int:
    groups = [Path(a) for a in argv]
    print("ready", flush=True)
    if sys.stdin.readline():  # "done": the run released them
        return 0
    for group in groups:
        remove(group)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
