"""The cgroup file systems: where each controller's hierarchy is mounted, this process's own group in it,
and one group made for a run (`iobench-PID`) beneath it. Used by `confine`."""

from __future__ import annotations

import os
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system.processes import process_alive

HELPER = "scripts/confine.sh"


def mounts() -> tuple[dict[str, Path], Path | None]:
    """cgroup v1 mount points by controller, and the cgroup v2 mount, from /proc/self/mountinfo."""
    v1: dict[str, Path] = {}
    v2 = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        parts, tail = left.split(), right.split()
        if len(parts) < 5 or len(tail) < 3:
            continue
        mountpoint = Path(parts[4].replace("\\040", " "))
        if tail[0] == "cgroup2":
            v2 = v2 or mountpoint
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                v1.setdefault(option, mountpoint)
    return v1, v2


def own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller ('' for v2), from /proc/self/cgroup."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    return own


class Group:
    """One cgroup directory made for this run, and the one the process came from."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / f"iobench-{os.getpid()}"
        for stale in home.glob("iobench-*"):  # left by a run that was killed; removable only when empty
            if owner_alive(stale.name):  # another run's group, perhaps not entered yet
                continue
            try:
                stale.rmdir()
            except OSError:
                pass
        try:
            self.path.mkdir()
        except FileExistsError:  # a previous run with this pid was killed: reuse its empty group
            pass
        except OSError as exc:
            raise permission_error(home, exc.strerror or str(exc)) from None

    def write(self, name: str, value: str) -> None:
        try:
            (self.path / name).write_text(value)
        except OSError as exc:
            raise IobenchError(f"cannot set {self.path / name} to {value!r}: {exc.strerror or exc}") from None

    def read(self, name: str) -> str:
        return (self.path / name).read_text()

    def enter(self) -> None:
        self.write("cgroup.procs", str(os.getpid()))

    def leave(self) -> None:
        """Move every process still inside (ours and anything we started) home, then remove the group."""
        for _ in range(20):
            try:
                pids = self.read("cgroup.procs").split()
            except OSError:
                return
            for pid in pids:
                try:
                    (self.home / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # it exited meanwhile
            try:
                self.path.rmdir()
                return
            except OSError:
                continue


def owner_alive(name: str) -> bool:
    """Whether the run that made group `iobench-PID` is still running (it may be about to enter it)."""
    pid = name.removeprefix("iobench-")
    return pid.isdigit() and int(pid) != os.getpid() and process_alive(int(pid))


def home_of(controller: str) -> tuple[Path, int]:
    """The process's own cgroup folder for a controller, and the cgroup version that has it."""
    v1, v2 = mounts()
    own = own_paths()
    if controller in v1:
        return v1[controller] / own.get(controller, "/").lstrip("/"), 1
    if v2 is not None:
        home = v2 / own.get("", "/").lstrip("/")
        listed = home / "cgroup.controllers"
        if controller in (listed.read_text().split() if listed.exists() else []):
            return home, 2
    name = "blkio/io" if controller in ("blkio", "io") else controller
    raise IobenchError(f"this machine has no {name} cgroup controller mounted; --read-limit/--cache-budget need it")


def io_controller() -> str:
    return "blkio" if "blkio" in mounts()[0] else "io"


def permission_error(home: Path, reason: str) -> IobenchError:
    return IobenchError(
        f"--read-limit and --cache-budget need permission to create a cgroup in {home} ({reason}); "
        f"run as root, or under `sudo {HELPER}`"
    )


def group_for(controller: str) -> tuple[Group, int]:
    """A fresh group for a controller, beneath the process's own cgroup, and its cgroup version."""
    home, version = home_of(controller)
    if version == 2:
        try:
            (home / "cgroup.subtree_control").write_text(f"+{controller}")
        except OSError as exc:
            raise IobenchError(
                f"cgroup v2: cannot delegate {controller} below {home} ({exc.strerror}); run under "
                f"`sudo {HELPER}`, which starts iobench in a cgroup of its own"
            ) from None
    return Group(home), version
