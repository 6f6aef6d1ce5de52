"""`iobench doctor`: checks, on the user's machine, what iobench's numbers rest on, in plain words.

Each check returns a Finding. The CUDA checks are written from the PyTorch documentation and have not
been run on a GPU by the project: they say so in their output until someone runs scripts/gpu_smoke.sh.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from iobench.choices import Choice
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.judge.evidence import busy as shared
from iobench.measuring.machine_limits import write_probe
from iobench.storage.local import LocalStorage
from iobench.storage.local.page_cache import Eviction
from iobench.system.contention import other_cores_busy
from iobench.system.environment import can_drop_caches, max_workers, usable_cores
from iobench.system.fsutil import PARTIAL_PREFIX, free_bytes, remove_stale_probes

MAX_IDLE_SECONDS = 3600.0

PROBE_BYTES = 64 * 2**20
RECLAIMED = 0.05  # a warm file losing more than this while idle: the machine reclaims page cache
# where the three CUDA checks were first seen to pass (issue 38): their verdicts say so beside what they measured
CHECKED_ON = "seen to hold on an NVIDIA H100 (torch 2.11, CUDA 13.0; docs/study/gpu)"


class Status(Choice):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str


def cores() -> Finding:
    usable = usable_cores()
    return Finding(
        "cores and --num-workers",
        Status.OK,
        f"{usable} usable cores: DataLoader workers beyond {usable} only share them (CPU-bound decoding gains "
        f"nothing more); iobench refuses more than {max_workers()}",
    )


def sharing(sample_seconds: float = 1.0) -> Finding:
    """Other programs' CPU right now: on shared cores torch's threaded paths collapse (9.5x measured)."""
    busy = other_cores_busy(sample_seconds)
    load = os.getloadavg()[0]
    if busy is None:
        return Finding("other programs", Status.SKIPPED, "no /proc/stat to ask")
    if shared(busy):
        return Finding(
            "other programs",
            Status.WARN,
            f"busy: other programs use {busy:.1f} of {usable_cores()} cores (load average {load:.1f}); figures "
            "taken now, torch's most of all, will be slower than on a quiet machine; wait, or measure it on "
            "purpose with --cpu-contention N and --torch-threads 1",
        )
    return Finding("other programs", Status.OK, f"quiet: other programs use {busy:.2f} cores (load average {load:.1f})")


def drop_caches() -> Finding:
    if can_drop_caches():
        return Finding(
            "drop_caches",
            Status.OK,
            "permitted: --eviction drop_caches drops the whole page cache (cold "
            "runs evict the dataset's files alone by default)",
        )
    return Finding(
        "drop_caches",
        Status.WARN,
        "not permitted (needs root): cold runs evict the dataset's files with fadvise, which works unless "
        "another process maps them; scripts/drop_caches.sh for a sudo-only drop",
    )


def torchvision() -> Finding:
    """Whether torchvision imports beside this torch: `.[formats]` brings torchvision in (through LitData), and where
    torch is a CPU build the index's torchvision is a CUDA one, which fails on import (`operator torchvision::nms does
    not exist`) while `pip check` sees nothing wrong. Tried in a process of its own."""
    import importlib.metadata
    import importlib.util
    import subprocess

    from iobench.system.processes import python_code

    if importlib.util.find_spec("torchvision") is None:
        return Finding("torchvision", Status.OK, "not installed: images decode with Pillow")
    version = importlib.metadata.version("torchvision")
    done = subprocess.run(python_code("import torchvision"), capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return Finding("torchvision", Status.OK, f"torchvision {version} imports beside torch {torch.__version__}")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return Finding(
        "torchvision",
        Status.WARN,
        f"torchvision {version} is installed but does not import beside torch {torch.__version__} "
        f"({lines[-1] if lines else 'it failed'}): a build for another torch (a CUDA one beside a CPU "
        "torch); images decode with Pillow, and LitData's image helpers fail",
    )


def cgroups(root: Path = Path("/sys/fs/cgroup")) -> Finding:
    """Which memory and block-I/O controllers exist and may be written (page-cache budgets, read throttles)."""
    found = []
    for name, path in (("v1 memory", root / "memory"), ("v1 blkio", root / "blkio")):
        if (path / "tasks").is_file():
            found.append(f"{name} ({'writable' if os.access(path, os.W_OK) else 'read-only'})")
    for unified in (root, root / "unified"):
        controllers = unified / "cgroup.controllers"
        if controllers.is_file():
            names = controllers.read_text().split()
            have = [c for c in ("memory", "io") if c in names]
            writable = "writable" if os.access(unified, os.W_OK) else "read-only"
            found.append(f"v2 at {unified} ({', '.join(have) or 'no memory/io controller'}; {writable})")
    if not found:
        return Finding("cgroups", Status.WARN, "no memory or block-I/O cgroup controller found")
    return Finding("cgroups", Status.OK, "; ".join(found))


def _read(path: Path) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.read(8 * 2**20):
            pass


def page_cache(folder: Path, idle_seconds: float, wait: Callable[[float], None] = time.sleep) -> list[Finding]:
    """Eviction empties the cache for a file, a read fills it, and (after idle_seconds) it stays filled."""
    remove_stale_probes(folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        return [Finding("eviction", Status.SKIPPED, f"{folder} is not writable: no probe file can be made there")]
    if free_bytes(folder) < 2 * PROBE_BYTES:
        return [Finding("eviction", Status.SKIPPED, f"less than {2 * PROBE_BYTES // 2**20} MiB free in {folder}")]
    path = folder / f"{PARTIAL_PREFIX}doctor-{os.getpid()}.bin"
    try:
        write_probe(path, PROBE_BYTES)  # inside: a probe cut short by a full disk is removed too
        _read(path)
        probe = LocalStorage([path], folder, eviction=Eviction.FADVISE)
        filled = probe.residency()
        method = probe.make_cold()
        emptied = probe.residency()
        ok = emptied < RECLAIMED and filled > 1 - RECLAIMED
        findings = [
            Finding(
                "eviction",
                Status.OK if ok else Status.FAIL,
                f"a {PROBE_BYTES // 2**20} MiB file: {filled:.0%} cached after a read, {emptied:.0%} after "
                f"eviction by {method}" + ("" if ok else ": cold runs cannot be trusted here"),
            )
        ]
        if idle_seconds <= 0:
            return findings + [Finding("warm page cache", Status.SKIPPED, "--idle-seconds 0")]
        _read(path)
        before = probe.residency()
        wait(idle_seconds)
        after = probe.residency()
        lost = before - after
        if lost > RECLAIMED:
            detail = (
                f"{lost:.0%} of a warm file was paged out after {idle_seconds:g} s idle ({before:.0%} -> "
                f"{after:.0%}): this machine reclaims idle page cache, so 'warm' decays between commands; take "
                "warm figures right after a warm-up epoch (the default) and read the residency in each record"
            )
            findings.append(Finding("warm page cache", Status.WARN, detail))
        else:
            findings.append(
                Finding("warm page cache", Status.OK, f"stayed {after:.0%} cached after {idle_seconds:g} s idle")
            )
        return findings
    finally:
        path.unlink(missing_ok=True)


def clock_verdict(unsynced_s: float, synced_s: float) -> Finding:
    """A copy timed without waiting for the device must look (much) shorter than one that waits."""
    if synced_s > 2 * unsynced_s:
        return Finding(
            "synchronised clock",
            Status.OK,
            f"a non_blocking copy returns in {1e3 * unsynced_s:.2f} ms, lands in {1e3 * synced_s:.2f} ms: "
            f"iobench's clock stops after synchronize; {CHECKED_ON}",
        )
    return Finding(
        "synchronised clock",
        Status.WARN,
        f"a non_blocking copy took {1e3 * unsynced_s:.2f} ms unsynchronised and {1e3 * synced_s:.2f} ms "
        f"synchronised: copies do not run asynchronously here; {CHECKED_ON}",
    )


def pinned_verdict(pageable_mb_s: float, pinned_mb_s: float) -> Finding:
    if pinned_mb_s > 1.1 * pageable_mb_s:
        status, words = Status.OK, "pinned memory is faster: use pin_memory=True"
    else:
        status, words = Status.WARN, "pinned memory is not faster here: pinning only costs a copy"
    return Finding(
        "pinned host-to-device",
        status,
        f"pageable {pageable_mb_s:,.0f} MB/s, pinned {pinned_mb_s:,.0f} MB/s: {words}; {CHECKED_ON}",
    )


def overlap_verdict(pageable_call_s: float, pinned_call_s: float, copy_s: float) -> Finding:
    """A non_blocking copy from pageable memory returns only when the copy is done (it is staged)."""
    blocks = pageable_call_s > 0.5 * copy_s
    overlaps = pinned_call_s < 0.2 * copy_s
    status = Status.OK if blocks and overlaps else Status.WARN
    return Finding(
        "non_blocking overlap",
        status,
        f"non_blocking from pageable memory returned after {1e3 * pageable_call_s:.2f} ms "
        f"({'does not overlap' if blocks else 'overlapped'}), from pinned after {1e3 * pinned_call_s:.2f} ms "
        f"({'overlaps' if overlaps else 'did not overlap'}) of a {1e3 * copy_s:.2f} ms copy: non_blocking only "
        f"helps with pin_memory; {CHECKED_ON}",
    )


def cuda_checks(device: torch.device, nbytes: int = 256 * 2**20) -> list[Finding]:
    if device.type != "cuda":
        return [
            Finding(
                "GPU path",
                Status.SKIPPED,
                f"no CUDA device here (torch {torch.__version__}): run scripts/gpu_smoke.sh on a GPU machine",
            )
        ]
    from iobench.measuring.read_rates import cuda_limits

    host = torch.ones(nbytes // 4)
    pinned = host.pin_memory()
    target = torch.empty(nbytes // 4, device=device)
    target.copy_(pinned, non_blocking=True)
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    target.copy_(pinned, non_blocking=True)
    unsynced = time.perf_counter() - t0
    torch.cuda.synchronize(device)
    synced = time.perf_counter() - t0
    t0 = time.perf_counter()
    target.copy_(host, non_blocking=True)
    pageable_call = time.perf_counter() - t0
    torch.cuda.synchronize(device)
    limits = cuda_limits(device, nbytes)
    return [
        clock_verdict(unsynced, synced),
        pinned_verdict(limits["h2d_pageable_mb_per_s"], limits["h2d_pinned_mb_per_s"]),
        overlap_verdict(pageable_call, unsynced, synced),
    ]


def examine(folder: Path, device: torch.device, idle_seconds: float, wait: Callable[[float], None] = time.sleep):
    """Every check, in the order a reader wants them."""
    checks = [cores(), sharing(), drop_caches(), cgroups(), torchvision()]
    return [*checks, *page_cache(folder, idle_seconds, wait), *cuda_checks(device)]


@dataclass(frozen=True)
class DoctorRequest:
    data_dir: Path  # where the page-cache checks write their file
    device: str  # as given: auto, cpu, cuda, cuda:N
    idle_seconds: float = 75.0  # how long a warm file is left idle (0: that check skipped)


@dataclass(frozen=True)
class DoctorOutcome:
    device: torch.device
    findings: list[Finding]


def doctor_session(request: DoctorRequest, events: Events) -> DoctorOutcome:
    """Every check on the data folder and the device, the idle wait said first (it takes a minute)."""
    from iobench.plan.resolve import device_of

    if not 0 <= request.idle_seconds <= MAX_IDLE_SECONDS:  # also refuses nan
        raise IobenchError(f"--idle-seconds must be 0..{MAX_IDLE_SECONDS:g}, got {request.idle_seconds:g}")
    if not request.data_dir.is_dir():  # a mistyped folder is named, not created
        raise IobenchError(f"--data-dir {request.data_dir}: no such folder")
    target = device_of(request.device)
    if request.idle_seconds > 0:
        events.say(
            f"checking; this leaves a file idle for {request.idle_seconds:g} s (--idle-seconds 0 skips that) ..."
        )
    return DoctorOutcome(target, examine(request.data_dir, target, request.idle_seconds))
