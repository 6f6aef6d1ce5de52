"""What a measurement's processes waited for, read raw: for every thread of this process and of its descendants
(DataLoader workers, ranks, a trial's children), the CPU time it used and the time it was runnable but waited for a
CPU (`/proc/<pid>/task/<tid>/schedstat`: nanoseconds on a CPU, nanoseconds on the run queue, time slices); the cores
other programs used meanwhile (the machine's busy time less the tree's own); and the CPU and IO pressure over it
(PSI: `/proc/pressure/{cpu,io}`, or this process's own cgroup's `cpu.pressure`/`io.pressure` where it runs in one).

A worker that exits during the measurement takes its counters with it, so the tree is read every POLL_S by a thread
(stopped and joined before the figures are taken), and a child started by `multiprocessing` (DataLoader workers)
reports its own totals as it exits, over a pipe of this process's (`ExitReports`): a DataLoader's workers live for an
epoch, often less than POLL_S, and without their reports a meter saw 0.13-0.17 s of the 0.62-0.65 s CPU that two
workers' epochs used (getrusage), so a configuration with workers looked as though it waited less than it did. What a
thread of another kind of child (a rank, and the workers it starts) waited for after its last reading is lost; its CPU
comes back once the child is reaped (getrusage), so the cores other programs used are not charged with the tree's own
(quiet, `feed` had said "beside other programs using up to 0.4 cores" of a rank's workers). The judgement
(`iobench.judge`) derives the rest: a wait share, whether contention fell evenly."""

from __future__ import annotations

import math
import os
import resource
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.25
JOIN_S = 2.0
PSI_KINDS = ("cpu", "io")
REPORT = struct.Struct("=iiqq")  # an exiting child's pid, its parent's, ns on a CPU, ns waiting for one


def share_of(cpu_s: float, wait_s: float) -> float | None:
    """The share of runnable time spent waiting for a CPU (None where nothing ran)."""
    return wait_s / (cpu_s + wait_s) if cpu_s + wait_s > 0 else None


@dataclass(frozen=True)
class WaitFigures:
    """One unit's raw figures (a run, a trial, a count)."""

    wall_s: float
    cpu_s: float  # the tree's CPU time
    wait_s: float  # the tree's time runnable but waiting for a CPU
    others_cores: float | None  # the machine's busy cores less the tree's own, over the unit (None: no /proc/stat)
    psi_cpu_s: float | None  # seconds some task waited for a CPU (PSI "some"), machine's or the cgroup's
    psi_io_s: float | None  # seconds some task waited for IO
    psi_source: str  # "machine", "cgroup" or "" (no PSI)
    exits_reported: bool = True  # children started by multiprocessing counted to their exit (`ExitReports`)

    @property
    def wait_share(self) -> float | None:
        return share_of(self.cpu_s, self.wait_s)

    @property
    def cores(self) -> float | None:
        """The cores' worth of CPU the tree used over the unit."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    """The children of `pid` (every thread's), from /proc/<pid>/task/*/children."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/children")
        if text:
            found.extend(int(x) for x in text.split())
    return found


def tree(root: int, exclude: tuple[int, ...] = ()) -> list[int]:
    """`root` and every descendant, but those of `exclude` (rivals started on purpose) and theirs."""
    seen: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in seen or pid in exclude:
            continue
        seen.append(pid)
        todo.extend(_children(pid))
    return seen


def thread_counters(pids: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """(pid, tid) -> (ns on a CPU, ns waiting for one) of every thread of `pids`."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            text = _read(f"/proc/{pid}/task/{tid}/schedstat")
            if text:
                parts = text.split()
                if len(parts) >= 2:
                    out[(pid, int(tid))] = (int(parts[0]), int(parts[1]))
    return out


def machine_busy_s() -> float | None:
    """Seconds the machine's CPUs were busy since boot (/proc/stat's first line, idle and iowait left out)."""
    text = _read("/proc/stat")
    if not text:
        return None
    fields = [int(x) for x in text.splitlines()[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def psi_files() -> tuple[dict[str, str], str]:
    """The pressure files to read (kind -> path) and whose they are: this process's cgroup v2 folder where it is not
    the root (a job's own cgroup), else the machine's; ({}, "") where the kernel has no PSI."""
    cgroup = _own_cgroup_v2()
    if cgroup is not None:
        paths = {kind: str(cgroup / f"{kind}.pressure") for kind in PSI_KINDS}
        if all(os.path.exists(p) for p in paths.values()):
            return paths, "cgroup"
    paths = {kind: f"/proc/pressure/{kind}" for kind in PSI_KINDS}
    if all(os.path.exists(p) for p in paths.values()):
        return paths, "machine"
    return {}, ""


def _own_cgroup_v2() -> Path | None:
    """This process's cgroup v2 folder, where it is not the hierarchy's root."""
    text = _read("/proc/self/cgroup") or ""
    relative = next((line[3:] for line in text.splitlines() if line.startswith("0::")), None)
    if not relative or relative == "/":
        return None
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4]) / relative.lstrip("/")
    return None


def _psi_some_s(path: str) -> float | None:
    """The "some" line's total stall (µs) in seconds."""
    text = _read(path)
    for line in (text or "").splitlines():
        if line.startswith("some "):
            for part in line.split():
                if part.startswith("total="):
                    return int(part[6:]) / 1e6
    return None


def reaped_cpu_s() -> float:
    """The CPU seconds this process's reaped children used (each with the children it reaped in turn)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def thread_times_s() -> tuple[float, float]:
    """Seconds the calling thread has run on a CPU and waited for one since it started (`/proc/thread-self/schedstat`'s
    first two fields); NaN where the kernel keeps no schedstat."""
    parts = (_read("/proc/thread-self/schedstat") or "").split()
    return (int(parts[0]) / 1e9, int(parts[1]) / 1e9) if len(parts) >= 2 else (math.nan, math.nan)


def descendant_waits() -> dict[tuple[int, int], int]:
    """(pid, tid) -> ns waited for a CPU, of every thread of this process's descendants (a loader's workers)."""
    me = os.getpid()
    return {key: wait for key, (_, wait) in thread_counters([p for p in tree(me) if p != me]).items()}


def mean_worker_wait_s(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> float:
    """What each descendant process alive at `after` waited for a CPU since `before`, averaged over them (0 where
    there are none): the loader's workers produce batches side by side, so the mean worker's wait is what their
    output lost."""
    processes = {pid for pid, _ in after}
    if not processes:
        return 0.0
    return sum(max(0, wait - before.get(key, 0)) for key, wait in after.items()) / len(processes) / 1e9


class EpochWaits:
    """The calling thread's (a step loop's) time on a CPU and waiting for one, and the mean wait of its process's
    loader workers, from where it is made to `ended()`; the workers are read at `workers_stopping()`, before they
    stop (forked at the epoch's start, they are gone at its end)."""

    def __init__(self) -> None:
        self.loop, self.workers = thread_times_s(), descendant_waits()
        self.workers_at_end = self.workers

    def workers_stopping(self) -> None:
        self.workers_at_end = descendant_waits()

    def ended(self) -> tuple[float, float, float]:
        """(the loop's CPU s, its wait s, the mean worker's wait s); NaN where the kernel keeps no schedstat."""
        cpu, wait = (now - then for now, then in zip(thread_times_s(), self.loop, strict=True))
        return cpu, wait, math.nan if math.isnan(wait) else mean_worker_wait_s(self.workers, self.workers_at_end)


def own_totals() -> tuple[int, int]:
    """This process's threads' (ns on a CPU, ns waiting for one), summed."""
    cpu = wait = 0
    for (_, _), (c, w) in thread_counters([os.getpid()]).items():
        cpu, wait = cpu + c, wait + w
    return cpu, wait


class ExitReports:
    """Children started by `multiprocessing` write their totals (`REPORT`) to one pipe of this process as they exit
    (a finalizer armed after the fork, run by the child's own exit path); the meters inside read them. The pipe is
    made once, close-on-exec (only forked children hold it), non-blocking at both ends: a child never waits to
    exit, and a full pipe loses a report rather than a worker."""

    _lock = threading.Lock()
    _fds: tuple[int, int] | None = None
    _owner = 0  # the process that made the pipe: a forked child that meters makes its own
    _meters: list[WaitMeter] = []

    @classmethod
    def start(cls, meter: WaitMeter) -> None:
        with cls._lock:
            if cls._fds is None or cls._owner != os.getpid():
                read, write = os.pipe()
                os.set_blocking(read, False)
                os.set_blocking(write, False)
                cls._fds, cls._owner, cls._meters = (read, write), os.getpid(), []
                import multiprocessing.util

                multiprocessing.util.register_after_fork(cls, ExitReports._arm)
            cls._meters.append(meter)

    @classmethod
    def stop(cls, meter: WaitMeter) -> None:
        with cls._lock:
            if meter in cls._meters:
                cls._meters.remove(meter)

    @classmethod
    def drain(cls) -> None:
        """Hand each report waiting in the pipe to every meter inside (each keeps its own tree's)."""
        with cls._lock:
            if cls._fds is None or cls._owner != os.getpid():
                return
            data = b""
            while True:
                try:
                    chunk = os.read(cls._fds[0], REPORT.size * 256)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                data += chunk
            meters = list(cls._meters)
        for k in range(0, len(data) - len(data) % REPORT.size, REPORT.size):
            pid, parent, cpu, wait = REPORT.unpack_from(data, k)
            for meter in meters:
                meter.exited(pid, parent, cpu, wait)

    @staticmethod
    def _arm(_: object) -> None:
        """In a child just forked by `multiprocessing`: report this process's totals as it exits."""
        import multiprocessing.util

        multiprocessing.util.Finalize(None, ExitReports._report, exitpriority=-(10**6))

    @classmethod
    def _report(cls) -> None:
        if cls._fds is None:
            return
        cpu, wait = own_totals()
        try:
            os.write(cls._fds[1], REPORT.pack(os.getpid(), os.getppid(), cpu, wait))
        except OSError:
            pass  # a full or closed pipe: this child's last POLL_S is lost, as without the report


class WaitMeter:
    """The tree of `root` (this process by default) watched while inside, but `exclude`'s (--cpu-contention's
    rivals, which are other programs on purpose): `figures` once left."""

    def __init__(self, root: int | None = None, exclude: tuple[int, ...] = (), poll_s: float = POLL_S) -> None:
        self.root = os.getpid() if root is None else root
        self.exclude = tuple(exclude)
        self.poll_s = poll_s
        self._base: dict[tuple[int, int], tuple[int, int]] = {}
        self._last: dict[tuple[int, int], tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._psi, self._psi_source = psi_files()
        self._exited: dict[int, tuple[int, int]] = {}  # a reporting child's pid -> its (cpu, wait) ns in the unit
        self.figures: WaitFigures | None = None

    def exited(self, pid: int, parent: int, cpu_ns: int, wait_ns: int) -> None:
        """A child's totals as it exited (`ExitReports`): kept where its parent is in this tree, less what it had
        used before the meter began; its threads' readings give way to it."""
        with self._lock:
            known = {p for p, _ in self._last} | set(self._exited)
            if parent != self.root and parent not in known:
                return
            before = [self._base[k] for k in self._base if k[0] == pid]
            self._exited[pid] = (
                max(0, cpu_ns - sum(b[0] for b in before)),
                max(0, wait_ns - sum(b[1] for b in before)),
            )
            for key in [k for k in self._last if k[0] == pid]:
                del self._last[key]  # its base stays: what it used before the meter is taken off getrusage's too

    def _sample(self) -> set[int]:
        """Read the tree's threads; the pids alive."""
        ExitReports.drain()
        seen = thread_counters(tree(self.root, self.exclude))
        with self._lock:
            for key, value in seen.items():
                if key[0] in self._exited:
                    continue  # reported its totals as it exited: its last moments are in the report
                last = self._last.get(key)
                if last is not None and (value[0] < last[0] or value[1] < last[1]):
                    self._base[key] = (0, 0)  # a new thread of a reused id: counted from its start
                self._last[key] = value
        return {pid for pid, _ in seen}

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._sample()

    def __enter__(self) -> WaitMeter:
        ExitReports.start(self)
        ExitReports.drain()  # reports of children that ended before this meter: not its
        self._exited = {}
        self._base = thread_counters(tree(self.root, self.exclude))
        self._last = dict(self._base)
        self._started = time.perf_counter()
        self._machine = machine_busy_s()
        self._psi_start = {kind: _psi_some_s(path) for kind, path in self._psi.items()}
        self._reaped_start = reaped_cpu_s()
        self._thread = threading.Thread(target=self._watch, name="iobench-waits", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_S)  # bounded: a reading of /proc never blocks long
        alive = self._sample()
        ExitReports.stop(self)
        wall = time.perf_counter() - self._started
        with self._lock:
            used = {
                k: (v[0] - self._base.get(k, (0, 0))[0], v[1] - self._base.get(k, (0, 0))[1])
                for k, v in self._last.items()
            }
            polled = (sum(c for c, _ in used.values()) + sum(c for c, _ in self._exited.values())) / 1e9
            wait = (sum(w for _, w in used.values()) + sum(w for _, w in self._exited.values())) / 1e9
            living = sum(c for (pid, _), (c, _) in used.items() if pid in alive) / 1e9
            gone_before = sum(b[0] for (pid, _), b in self._base.items() if pid not in alive) / 1e9
        # Two lower bounds of the tree's CPU, the larger kept: its threads as last read (and the exit reports), or
        # those alive now plus what the children reaped meanwhile used (getrusage: a rank's whole tree once it is
        # reaped, its workers included, which no reading of /proc sees after they exit), less what they had used
        # before the meter began.
        reaped = reaped_cpu_s() - self._reaped_start - gone_before if self.root == os.getpid() else 0.0
        cpu = max(polled, living + max(0.0, reaped))
        machine = machine_busy_s()
        others = None
        if machine is not None and self._machine is not None and wall > 0:
            others = max(0.0, (machine - self._machine - cpu) / wall)
        psi = {}
        for kind, path in self._psi.items():
            end, start = _psi_some_s(path), self._psi_start.get(kind)
            psi[kind] = None if end is None or start is None else max(0.0, end - start)
        self.figures = WaitFigures(
            wall, max(0.0, cpu), max(0.0, wait), others, psi.get("cpu"), psi.get("io"), self._psi_source
        )
