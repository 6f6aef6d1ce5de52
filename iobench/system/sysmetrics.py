"""What the machine did during a run, from counters read at its start and end (no sampler thread): CPU
utilisation and iowait from /proc/stat, and peak resident memory of this process and of its largest child.
What moved from the storage is the storage's own count (`Storage.counters`)."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass


def _cpu_times() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return [int(x) for x in fields[1:]]
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class CpuSnapshot:
    wall: float
    cpu: list[int] | None


class CpuCounters:
    """CPU utilisation and iowait over an interval, from /proc/stat (every core, every process)."""

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(time.perf_counter(), _cpu_times())

    def delta(self, a: CpuSnapshot, b: CpuSnapshot) -> dict:
        if a.cpu is None or b.cpu is None:
            return {"cpu_utilisation": None, "cpu_iowait": None}
        d = [y - x for x, y in zip(a.cpu, b.cpu, strict=False)]
        total = sum(d) or 1
        idle, iowait = d[3], d[4] if len(d) > 4 else 0
        return {"cpu_utilisation": 1 - (idle + iowait) / total, "cpu_iowait": iowait / total}


def peak_rss_bytes() -> dict:
    """Peak resident memory of this process and of its largest reaped child (Linux reports KiB)."""
    return {
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_rss_children_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }
