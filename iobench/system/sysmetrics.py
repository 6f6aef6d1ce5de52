"""What the system did during a run, from counters read at its start and end (no sampler thread).

- storage reads: the data device's sectors read in /proc/diskstats (the kernel's own count, for
  every process), and read_bytes in /proc/<pid>/io of this process and its live children
  (DataLoader workers); the kernel adds a reaped child's count to its parent's, so workers that
  exit during the epoch are counted too, once;
- CPU utilisation and iowait over the run, from /proc/stat;
- peak resident memory of this process and of its largest child.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


def _cpu_times() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return [int(x) for x in fields[1:]]
    except (OSError, ValueError):
        return None


@dataclass
class Snapshot:
    wall: float
    device_sectors: int | None
    tree_read: int | None
    cpu: list[int] | None


class SystemCounters:
    """Take a snapshot at start(), another at stop(); the difference is the run's."""

    def __init__(self, data_dir: Path) -> None:
        _fstype, source = mount_of(data_dir)
        self.device = _diskstats_name(source)

    def snapshot(self, others: Sequence[int] = ()) -> Snapshot:
        return Snapshot(
            wall=time.perf_counter(),
            device_sectors=_device_sectors_read(self.device),
            tree_read=_tree_read_bytes(others),
            cpu=_cpu_times(),
        )

    def delta(self, a: Snapshot, b: Snapshot) -> dict:
        out: dict = {"data_block_device": self.device or "unknown"}
        if a.device_sectors is not None and b.device_sectors is not None:
            out["device_read_bytes"] = (b.device_sectors - a.device_sectors) * 512
        else:
            out["device_read_bytes"] = None
        proc = None
        if a.tree_read is not None and b.tree_read is not None:
            proc = b.tree_read - a.tree_read
        out["process_read_bytes"] = proc
        if a.cpu is not None and b.cpu is not None:
            d = [y - x for x, y in zip(a.cpu, b.cpu, strict=False)]
            total = sum(d) or 1
            idle, iowait = d[3], d[4] if len(d) > 4 else 0
            out["cpu_utilisation"] = 1 - (idle + iowait) / total
            out["cpu_iowait"] = iowait / total
        else:
            out["cpu_utilisation"] = out["cpu_iowait"] = None
        return out


def peak_rss_bytes() -> dict:
    """Peak resident memory of this process and of its largest reaped child (Linux reports KiB)."""
    return {
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_rss_children_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }
