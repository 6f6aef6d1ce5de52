"""Storage you control: a run's reads throttled and its page cache capped, by a cgroup around it.

The process moves into a fresh cgroup for the run and back out after it; everything it starts
meanwhile (DataLoader workers, a local Ray instance) is inside too. If the run is killed, a janitor process
outside the groups removes them once the run and its workers are gone (`cgroup_janitor`). Two knobs:

- `--read-limit MB/s`: a block-I/O throttle on the data directory's disk (v1
  `blkio.throttle.read_bps_device`, v2 `io.max rbps=`). Slower storage, and a ceiling that holds
  still on a shared virtual disk.
- `--cache-budget SIZE`: the page cache the run may hold. A memory cgroup limits the process's own
  memory too, so a governor process re-sets the limit every 10 ms to what the group holds other than
  file cache (anonymous memory, shared memory of worker batches, kernel memory) plus the budget. v1
  sets `memory.limit_in_bytes` with the OOM killer disabled for the group (a burst of allocations
  between two adjustments waits instead of being killed); v2 sets `memory.high`, which throttles
  rather than kills. Datasets 5-20x the budget then behave like datasets 5-20x the RAM.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from iobench.errors import IobenchError
from iobench.storage import Applied
from iobench.storage.local.cache_governor import Governor
from iobench.storage.local.cgroup_janitor import Janitor
from iobench.storage.local.cgroups import (
    Group,
    group_for,
    home_of,
    io_controller,
    permission_error,
)
from iobench.system.processes import python_module
from iobench.system.signals import signals_held
from iobench.units import parse_bytes


@dataclass(frozen=True)
class CacheBudget:
    """`256M` (bytes, binary units) or `20%` (of the dataset's files), as the user wrote it."""

    text: str

    def __post_init__(self) -> None:
        self.of(1)  # refuse a malformed budget when it is given, not when the run starts

    def of(self, dataset_bytes: int) -> int:
        text = self.text.strip()
        if text.endswith("%"):
            try:
                share = float(text[:-1])
            except ValueError:
                share = -1.0
            if not 0 < share <= 100:
                raise IobenchError(f"--cache-budget {self.text!r}: a share must be between 0% and 100%")
            return max(1, int(dataset_bytes * share / 100))
        if text.replace(".", "", 1).isdigit():  # "20": 20 bytes, or 20%? ask
            raise IobenchError(
                f"--cache-budget {self.text!r}: give a unit (256M, 1.5G) or a share of the dataset (20%)"
            )
        try:
            return parse_bytes(text)
        except IobenchError:
            raise IobenchError(
                f"--cache-budget {self.text!r}: give a size (256M, 1.5G) or a share of the dataset (20%)"
            ) from None


# A throttle is bytes a second in a cgroup file: 1e308 MB/s overflowed it, and below 1 kB/s it rounds to 0, which the
# kernel reads as no limit at all
READ_LIMIT_RANGE = (0.001, 1e9)


@dataclass(frozen=True)
class Confinement:
    """What a run asks for; empty (both None) runs unconfined."""

    read_limit_mb_per_s: float | None = None
    cache_budget_bytes: int | None = None

    def __post_init__(self) -> None:
        limit = self.read_limit_mb_per_s
        if limit is not None and not (READ_LIMIT_RANGE[0] <= limit <= READ_LIMIT_RANGE[1]):
            raise IobenchError(
                f"--read-limit must be a number of MB/s from {READ_LIMIT_RANGE[0]:g} to "
                f"{READ_LIMIT_RANGE[1]:,.0f}, got {limit:g}"
            )

    def __bool__(self) -> bool:
        return self.read_limit_mb_per_s is not None or self.cache_budget_bytes is not None


def check_read_limit(value: float | None) -> float | None:
    Confinement(read_limit_mb_per_s=value)
    return value


def check_can_confine(confinement: Confinement, data_dir: Path) -> None:
    """Before any work starts: the controllers exist, their folders are writable, the disk can be throttled."""
    needed = []
    if confinement.read_limit_mb_per_s is not None:
        disk_of(data_dir)
        needed.append(io_controller())
    if confinement.cache_budget_bytes is not None:
        needed.append("memory")
    for controller in needed:
        home, _version = home_of(controller)
        if not os.access(home, os.W_OK):
            raise permission_error(home, "Permission denied")


# ---- the read throttle ----------------------------------------------------------------------------


def disk_of(path: Path) -> str:
    """MAJ:MIN of the whole disk holding path (a throttle applies to disks, not partitions)."""
    st = os.stat(path)
    node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if os.major(st.st_dev) == 0 or not node.exists():
        raise IobenchError(f"--read-limit: {path} is not on a block device (tmpfs, NFS, btrfs subvolume?)")
    if (node / "partition").exists():
        node = node.resolve().parent
    return (node / "dev").read_text().strip()


def _throttle(limit_mb_per_s: float, data_dir: Path) -> tuple[Group, str]:
    device = disk_of(data_dir)
    group, version = group_for(io_controller())
    rate = int(limit_mb_per_s * 1e6)
    if version == 1:
        group.write("blkio.throttle.read_bps_device", f"{device} {rate}")
        return group, f"cgroup v1 blkio.throttle.read_bps_device {device}"
    group.write("io.max", f"{device} rbps={rate}")
    return group, f"cgroup v2 io.max {device} rbps"


# ---- the cache budget -----------------------------------------------------------------------------


class _Governor:
    """The process that keeps the group's limit at (what it holds other than file cache) + budget;
    started outside the group (`cache_governor`), before this process enters it."""

    WATCH_SECONDS = 0.2
    STOP_SECONDS = 10

    def __init__(self, group: Group, version: int, budget: int) -> None:
        self.group, self.version, self.budget = group, version, budget
        self.process: subprocess.Popen | None = None
        self.peak_cache = 0
        self.failure = ""
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        args = python_module("iobench.storage.local.cache_governor", str(self.group.path), str(self.version))
        self.process = subprocess.Popen(
            [*args, str(self.budget)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        if self.process.stdout.readline().strip() != "ready":
            self.stop()
            raise IobenchError(f"the cache budget's governor did not start: {self.failure or 'no reason given'}")
        self._watcher = threading.Thread(target=self._watch, args=(self.process,), name="governor-watch", daemon=True)
        self._watcher.start()

    def _watch(self, process: subprocess.Popen) -> None:
        """A governor that dies mid-run leaves the limit frozen with the OOM killer off: the run would
        stall at the frozen limit. Lift it here; stop() then fails the run."""
        while not self._stopping.wait(self.WATCH_SECONDS):
            if process.poll() is not None:
                self._lift()
                return

    def _lift(self) -> None:
        """What the governor does when it stops, done from here when it cannot."""
        try:
            Governor(self.group.path, self.version, self.budget).lift()
        except OSError:
            pass  # the group is gone

    def stop(self) -> None:
        if self.process is None:
            return
        self._stopping.set()
        process, self.process = self.process, None
        try:
            # A line ends it: closing stdin alone would not, while forked workers hold the pipe too.
            out, _ = process.communicate(input="stop\n", timeout=self.STOP_SECONDS)
        except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
            process.kill()
            out, _ = process.communicate()
            self._lift()
        words = out.split(maxsplit=2)
        if len(words) >= 2 and words[0] == "peak":
            self.peak_cache = int(words[1])
            self.failure = words[2].strip() if len(words) > 2 else ""
        else:
            self._lift()
            self.failure = (
                f"its governor process ended early (exit status {process.returncode}); the budget was not held"
            )


def _group_paths(confinement: Confinement) -> list[Path]:
    """The groups `confined` will make (`Group`), known before they exist."""
    controllers = [io_controller()] if confinement.read_limit_mb_per_s is not None else []
    controllers += ["memory"] if confinement.cache_budget_bytes is not None else []
    return list(dict.fromkeys(home_of(c)[0] / f"iobench-{os.getpid()}" for c in controllers))


def _budget(budget: int) -> tuple[Group, _Governor, str]:
    group, version = group_for("memory")
    governor = _Governor(group, version, budget)
    if version == 1:
        group.write("memory.swappiness", "0")  # reclaim cache, not the process's memory
        group.write("memory.oom_control", "1")  # wait for the governor rather than kill
        method = "cgroup v1 memory.limit_in_bytes = non-cache usage + budget every 10 ms, OOM killer off"
    else:
        if (group.path / "memory.swap.max").exists():
            group.write("memory.swap.max", "0")
        method = "cgroup v2 memory.high = non-cache usage + budget every 10 ms"
    return group, governor, method


def _release(groups: list[Group], governor: _Governor | None, janitor: Janitor | None, applied: Applied) -> None:
    """Every step runs even when one raises (torch's SIGCHLD handler can, when a worker died).

    The governor stops first: it reads and writes the group's files every 10 ms, and a group removed
    under it fails its next read (ENOENT, or ENODEV mid-read: seen in CI) as if the budget broke. The
    janitor is told last that the groups are gone."""
    raised: BaseException | None = None
    steps = ([governor.stop] if governor is not None else []) + [group.leave for group in reversed(groups)]
    steps += [janitor.done] if janitor is not None else []
    for step in steps:
        try:
            step()
        except BaseException as exc:  # re-raised once the others have run
            raised = raised or exc
    if governor is not None:
        applied.peak_cache_bytes = governor.peak_cache
    if raised is not None:
        raise raised


@contextmanager
def confined(confinement: Confinement, data_dir: Path) -> Iterator[Applied]:
    """Run the body (and every process it starts) throttled and budgeted; unconfined if empty."""
    applied = Applied()
    if not confinement:
        yield applied
        return
    groups: list[Group] = []
    governor = janitor = None
    methods = []
    try:
        # Started first, before any group holds a rule: its start-up (a Python process) must not fall between
        # a throttle being set and the first read (blk-throttle let that time through at full speed).
        janitor = Janitor(_group_paths(confinement))
        if confinement.read_limit_mb_per_s is not None:
            group, method = _throttle(confinement.read_limit_mb_per_s, data_dir)
            groups.append(group)
            methods.append(method)
        if confinement.cache_budget_bytes is not None:
            group, governor, method = _budget(confinement.cache_budget_bytes)
            if groups and group.path == groups[0].path:  # v2: one group holds both controllers
                group = groups[0]
            else:
                groups.append(group)
            methods.append(method)
        if governor is not None:
            governor.start()  # from outside the group: it must never wait on the limit it sets
        for group in groups:
            group.enter()
        applied.method = "; ".join(methods)
        yield applied
    finally:
        with signals_held():  # an interrupt must not leave this process in the group
            _release(groups, governor, janitor, applied)
    if governor is not None and governor.failure:
        raise IobenchError(f"the cache budget could not be kept: {governor.failure}")
