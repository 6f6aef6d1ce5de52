"""Whose folder this is: a marker iobench writes in every folder it may later remove as stale, naming the process
that made it by host, boot, PID namespace, PID and start time.

A folder's name is not proof: a user can make `.iobench-checkpoint-1-1-abcdefgh/` with their files in it, and a PID
means something only in its own namespace on its own host and boot (a checkpoint `--dir` shared by containers or by
nodes over NFS holds folders of runs whose PIDs mean nothing here: the seventh probe's S3 swept a live run's folder
made in another PID namespace). A folder is swept only when its marker is intact, it belongs to this user, and the
marker names a process of this host, boot and PID namespace that is gone (no process with that PID and start time).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from iobench.system.processes import start_time

MARKER = ".iobench-owner"
MAX_MARKER_BYTES = 4096


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's PID namespace (`pid:[4026531836]`); empty where the kernel does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class Owner:
    """The process that made a folder, named so that it stays one process across hosts, boots, namespaces and PID
    reuse."""

    host: str
    boot: str
    pid_ns: str
    pid: int
    start: int

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), boot_id(), pid_namespace(), pid, start_time(pid) or 0)

    def here(self) -> bool:
        """Made on this host, since its last boot, in this PID namespace: its PID means a process here."""
        me = Owner.this_process()
        return (self.host, self.boot, self.pid_ns) == (me.host, me.boot, me.pid_ns) and bool(self.boot)

    def gone(self) -> bool:
        """Provably ended: a process of here whose PID now names no process, or another (a different start time)."""
        return self.here() and start_time(self.pid) != self.start

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def of_json(cls, data: object) -> Owner | None:
        if not isinstance(data, dict):
            return None
        try:
            owner = cls(str(data["host"]), str(data["boot"]), str(data["pid_ns"]), int(data["pid"]), int(data["start"]))
        except (KeyError, TypeError, ValueError):
            return None
        return owner if owner.pid > 0 and owner.start > 0 else None


def mark(folder: Path, owner: Owner | None = None) -> None:
    """Write the marker in a folder this process just made (never through an existing name or a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(folder / MARKER, flags, 0o600), "wb") as f:
        f.write(json.dumps((owner or Owner.this_process()).to_json()).encode())


def owner_of(folder: Path) -> Owner | None:
    """The marker's owner; None where there is none, it is a link or not this user's file, or it does not parse."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > MAX_MARKER_BYTES:
            return None
        data = os.read(fd, MAX_MARKER_BYTES)
    finally:
        os.close(fd)
    with contextlib.suppress(ValueError):
        return Owner.of_json(json.loads(data))
    return None


def is_ours(folder: Path) -> bool:
    """The folder is a directory (not a link) of this user's holding this process's marker."""
    owner = owner_of(folder) if _own_directory(folder) else None
    return owner == Owner.this_process()


def stale(folder: Path) -> bool:
    """The folder may be removed: a directory of this user's (not a link) whose marker names a process of this host,
    boot and PID namespace that is gone. A folder with no marker, another user's, or one made elsewhere is never
    stale."""
    if not _own_directory(folder):
        return False
    owner = owner_of(folder)
    return owner is not None and owner.gone()


def _own_directory(folder: Path) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
