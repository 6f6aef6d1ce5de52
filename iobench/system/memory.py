"""How much host memory this process can still take: the machine's MemAvailable, and the room left under every memory
cgroup above the process (v1 `memory.limit_in_bytes`, v2 `memory.max`). A process inside a memory cgroup sees the
machine's MemAvailable, not its limit: a preload larger than the cgroup ended in a silent SIGKILL by the OOM killer.
Page cache charged to a cgroup is counted as room when the kernel can drop it (clean and not mapped)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

UNLIMITED = 2**60  # v1 writes 9223372036854771712 for "no limit", v2 "max"


@dataclass(frozen=True)
class MemoryRoom:
    available: int  # bytes this process can still allocate, about
    total: int  # the machine's RAM, or the smallest memory cgroup limit above this process
    limited_by: str  # "" (the machine), or the cgroup whose limit leaves the least room

    def says(self) -> str:
        """Where the figure comes from, for a refusal: 'available' or 'left under the memory cgroup X'."""
        return f"left under the memory cgroup {self.limited_by}" if self.limited_by else "available"


def memory_room() -> MemoryRoom:
    available, total, limited_by = _meminfo_available(), _ram_bytes(), ""
    for group, limit, room in _cgroup_levels():
        total = min(total, limit)
        if room < available:
            available, limited_by = room, group
    return MemoryRoom(max(0, available), total, limited_by)


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f if ":" in line)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return UNLIMITED


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return UNLIMITED


def _cgroup_levels() -> list[tuple[str, int, int]]:
    """(cgroup path, limit, room) of every limited memory cgroup from this process's own up to the root."""
    found = []
    for mount, own, version in _memory_hierarchies():
        path = own
        while True:
            folder = mount / path.lstrip("/")
            level = _level(folder, version)
            if level is not None:
                found.append((path, *level))
            if path in ("/", ""):
                break
            path = os.path.dirname(path.rstrip("/")) or "/"
    return found


def _memory_hierarchies() -> list[tuple[Path, str, int]]:
    """(mount point, this process's cgroup path, version) of the memory controller: v1's, and v2's where it has one."""
    try:
        own_lines = Path("/proc/self/cgroup").read_text().splitlines()
        mount_lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    own: dict[str, str] = {}
    for line in own_lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else ["<v2>"]:
                own[controller] = parts[2]
    found = []
    for line in mount_lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup" and "memory" in tail[2].split(",") and "memory" in own:
            found.append((mount, own["memory"], 1))
        elif tail[0] == "cgroup2" and "<v2>" in own and (mount / "cgroup.controllers").is_file():
            found.append((mount, own["<v2>"], 2))
    return found


def _level(folder: Path, version: int) -> tuple[int, int] | None:
    """(limit, room) of one cgroup folder; None where it has no limit or cannot be read."""
    names = ("memory.limit_in_bytes", "memory.usage_in_bytes") if version == 1 else ("memory.max", "memory.current")
    try:
        limit_text = (folder / names[0]).read_text().strip()
        usage = int((folder / names[1]).read_text().strip())
    except (OSError, ValueError):
        return None
    if limit_text == "max" or not limit_text.isdigit() or int(limit_text) >= UNLIMITED:
        return None
    limit = int(limit_text)
    return limit, limit - usage + _droppable_cache(folder, version)


def _droppable_cache(folder: Path, version: int) -> int:
    """Page cache charged to the group that the kernel can drop: clean, not mapped."""
    v1 = ("total_cache", "total_mapped_file", "total_dirty")
    keys = v1 if version == 1 else ("file", "file_mapped", "file_dirty")
    try:
        stat = dict(line.split()[:2] for line in (folder / "memory.stat").read_text().splitlines() if " " in line)
        cache, mapped, dirty = (int(stat.get(k, 0)) for k in keys)
    except (OSError, ValueError):
        return 0
    return max(0, cache - mapped - dirty)
