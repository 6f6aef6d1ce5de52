"""Local storage's counters: bytes read from the data's block device (/proc/diskstats: the kernel's own count,
for every process) and by this process and its live children (/proc/<pid>/io read_bytes: the kernel adds a
reaped child's count to its parent's, so DataLoader workers that exit during an epoch are counted too, once).
Counters read at an epoch's start and end: nothing samples during the measurement."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iobench.storage import Counters
from iobench.system.environment import mount_of


def _diskstats_name(source: str) -> str | None:
    """/dev/vda1 -> vda1 (resolving symlinks such as /dev/disk/by-uuid/...); None if not a block device."""
    if not source.startswith("/dev/"):
        return None
    return os.path.basename(os.path.realpath(source))


def _device_sectors_read(name: str | None) -> int | None:
    if name is None:
        return None
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 5 and fields[2] == name:
                    return int(fields[5])
    except OSError:
        pass
    return None


def _read_bytes(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _children() -> list[str]:
    pids: list[str] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.extend(f.read().split())
    except OSError:
        pass
    return pids


def _tree_read_bytes(others: Sequence[int] = ()) -> int | None:
    """read_bytes of this process (reaped children included by the kernel), its live children, and of
    other processes that read for it (Ray actors on this host)."""
    own = _read_bytes("self")
    if own is None:
        return None
    pids = [*_children(), *map(str, others)]
    return own + sum(x for x in map(_read_bytes, pids) if x is not None)


@dataclass(frozen=True)
class TrafficSnapshot:
    device_sectors: int | None
    tree_read: int | None


class Traffic(Counters):
    """Bytes read from the disk holding a folder, and by this process tree."""

    def __init__(self, data_dir: Path) -> None:
        _fstype, source = mount_of(data_dir)
        self.device = _diskstats_name(source)

    def snapshot(self, pids: Sequence[int] = ()) -> TrafficSnapshot:
        return TrafficSnapshot(_device_sectors_read(self.device), _tree_read_bytes(pids))

    def delta(self, a: TrafficSnapshot, b: TrafficSnapshot) -> dict:
        device = None
        if a.device_sectors is not None and b.device_sectors is not None:
            device = (b.device_sectors - a.device_sectors) * 512
        tree = b.tree_read - a.tree_read if a.tree_read is not None and b.tree_read is not None else None
        return {"data_block_device": self.device or "unknown", "device_read_bytes": device, "process_read_bytes": tree}
