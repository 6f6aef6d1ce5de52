"""The physical ceilings of this machine, which no loader can beat: measured, stored, kept at their best.

Each is measured on a large file on the data directory's file system (the largest prepared data file
when there is one, else a probe file written for the purpose): the storage's own ceilings (its sequential
read, the best of O_DIRECT at several shapes and buffered reads after eviction, and random reads:
`LocalStorage.probe_ceilings`), then iobench/measuring/read_rates.py's page-cache copy, memory gather, and
host-to-device and device copies on CUDA. Stored as JSON
beside the results, one entry per (host, data device, throttle), so every run can report its MB/s as a
share of the ceiling that applies to it (the rule: `RunRecord.ceiling`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import torch

from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.events import QUIET, Events
from iobench.measuring.read_rates import BLOCK, cuda_limits, memory_gather_mb_per_s, page_cache_mb_per_s
from iobench.results.limits import PAGE, MachineLimits, limits_key, read_block
from iobench.results.store import cached_limits_path, limits_path, load_all_limits, load_cached_limits
from iobench.spec import DatasetSpec
from iobench.storage.local import LocalStorage
from iobench.storage.local.confine import Confinement, check_can_confine
from iobench.system.environment import mount_of
from iobench.system.fsutil import PARTIAL_PREFIX, atomic_write_json, free_bytes, remove_stale_probes
from iobench.system.private import CREATE_FLAGS
from iobench.units import DEFAULT_SIZE

DEFAULT_PROBE_BYTES = 2**30
PROBE_MARGIN = 1.05  # leave 5% of the probe's size free, as prepare does


def _key(data_dir: Path, read_limit: float | None) -> str:
    _fs, source = mount_of(data_dir)
    return limits_key(platform.node(), source, read_limit)


def load_limits(results: Path, data_dir: Path, read_limit: float | None = None) -> MachineLimits | None:
    """This machine's limits for the data's disk and throttle: those stored beside the results (`iobench limits
    --results`, a study's), else those in the user's cache (measured once per machine, whatever the results' path:
    they were measured again for every new --results folder)."""
    key = _key(data_dir, read_limit)
    beside = load_all_limits(results).get(key)
    return beside if beside is not None else load_cached_limits().get(key)


def save_limits(results: Path, data_dir: Path, limits: MachineLimits) -> Path:
    """Beside the results (what `iobench limits` was asked to write) and in the user's cache; the path beside."""
    cache_limits(data_dir, limits)
    key = _key(data_dir, limits.read_limit_mb_per_s)
    return save_entry(limits_path(results), lambda: load_all_limits(results), key, limits)


def cache_limits(data_dir: Path, limits: MachineLimits) -> Path:
    """The user's cache of limits, with this entry."""
    key = _key(data_dir, limits.read_limit_mb_per_s)
    return save_entry(cached_limits_path(), load_cached_limits, key, limits)


def save_entry(path: Path, load: Callable[[], dict[str, Any]], key: str, value: Any) -> Path:
    """What the file held (`load`) with `key` set to `value` (a typed entry with to_json), written whole; a
    broken file is replaced by the fresh measurement."""
    try:
        stored = {**load(), key: value}
    except IobenchError:
        stored = {key: value}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {k: v.to_json() for k, v in stored.items()})
    except OSError as exc:
        raise IobenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


METHOD_OF = {"storage_read_mb_per_s": "storage_read_method", "memory_gather_mb_per_s": "memory_gather_method"}


def best_of(old: MachineLimits, new: MachineLimits) -> MachineLimits:
    """Each ceiling at the best of two measurements of the same machine (with the method that got it):
    a ceiling is what the machine can do, and a slow minute of a shared disk is not that."""
    before = old.measured_at.removesuffix(", best of each")
    changes: dict = {"measured_at": f"{before} and {new.measured_at}, best of each"}
    for f in fields(new):
        if not f.name.endswith(("_mb_per_s", "_iops")) or f.name == "read_limit_mb_per_s":
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a is not None and (b is None or a > b):
            changes[f.name] = a
            if f.name in METHOD_OF:
                changes[METHOD_OF[f.name]] = getattr(old, METHOD_OF[f.name])
    return replace(new, **changes)


def stored_or_measured(
    results: Path,
    data_dir: Path,
    device: torch.device,
    events: Events = QUIET,
    read_limit: float | None = None,
) -> MachineLimits:
    """The limits stored for this host, disk and throttle (beside the results, else in the user's cache); measured
    and cached if none."""
    limits = load_limits(results, data_dir, read_limit)
    if limits is None:
        limits = measure_limits(data_dir, device, events=events, read_limit=read_limit)
        cache_limits(data_dir, limits)
    return limits


def write_probe(path: Path, nbytes: int) -> None:
    """A file of incompressible bytes (whole blocks), fsynced: its pages are clean and can be evicted. Made new
    (`O_EXCL | O_NOFOLLOW`): a link planted under the probe's name is removed, never written through."""
    block = os.urandom(BLOCK)
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, CREATE_FLAGS, 0o600), "wb", buffering=0) as f:
        for _ in range(nbytes // BLOCK):
            f.write(block)
        os.fsync(f.fileno())


def _probe_source(data_dir: Path, probe_bytes: int) -> Path | None:
    """The prepared data file to read instead of a probe, or None after checking that a probe file fits,
    with room to spare."""
    existing = _largest_data_file(data_dir, probe_bytes // 2)
    if existing is not None:
        return existing
    free = free_bytes(data_dir)
    if probe_bytes * PROBE_MARGIN > free:
        raise IobenchError(
            f"not enough disk space in {data_dir} for a {probe_bytes / 2**20:,.0f} MiB probe file "
            f"({free / 2**20:,.0f} MiB free); give `iobench limits` a smaller --probe-size"
        )
    return None


def _sample_bytes(data_file: Path | None) -> int:
    """The sample size of the dataset the data file belongs to (the default dataset's for a probe)."""
    if data_file is not None:
        try:
            return Manifest.load(data_file.parent.parent).spec.sample_bytes
        except IobenchError:
            pass
    return DatasetSpec(DEFAULT_SIZE).sample_bytes


def _largest_data_file(data_dir: Path, at_least: int) -> Path | None:
    """The largest prepared data file under data_dir (what runs read), if one is big enough."""
    best = None
    for manifest in [data_dir / "manifest.json", *data_dir.glob("*/manifest.json")]:
        if not manifest.is_file():
            continue
        for path in manifest.parent.glob("*/*"):
            if path.is_file() and not path.name.startswith(".") and path.stat().st_size >= at_least:
                if best is None or path.stat().st_size > best.stat().st_size:
                    best = path
    return best


def measure_limits(
    data_dir: Path,
    device: torch.device,
    probe_bytes: int = DEFAULT_PROBE_BYTES,
    events: Events = QUIET,
    read_limit: float | None = None,
) -> MachineLimits:
    """Read a large file on the data directory's file system cold (O_DIRECT) and warm.

    The file is the largest prepared data file when one holds at least half of probe_bytes (on a
    virtual machine a freshly written probe may still sit in the host's cache and read faster than
    the data really does); otherwise a probe file of probe_bytes is written, read and deleted.
    """
    if probe_bytes < BLOCK:
        raise IobenchError(f"the probe file must be at least {BLOCK // 2**20} MiB")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {data_dir}: {exc.strerror or exc}") from None
    confinement = Confinement(read_limit_mb_per_s=read_limit)
    check_can_confine(confinement, data_dir)
    remove_stale_probes(data_dir)
    existing = _probe_source(data_dir, probe_bytes)
    if existing is None and not os.access(data_dir, os.W_OK | os.X_OK):
        raise IobenchError(
            f"{data_dir} is not writable: the limits need a probe file there, or a prepared dataset to read; "
            "measure them once with `iobench limits --data-dir` on a writable folder of the same disk"
        )
    events.measuring_limits()
    probe = existing or data_dir / f"{PARTIAL_PREFIX}limits-probe-{os.getpid()}.bin"
    try:
        if existing is None:
            write_probe(probe, probe_bytes)
        sample_bytes = _sample_bytes(existing)
        block = read_block(sample_bytes)
        ceilings = LocalStorage([probe], data_dir, confinement=confinement).probe_ceilings(probe, (PAGE, block))
        storage, method, random_iops = ceilings.sequential_mb_per_s, ceilings.sequential_method, ceilings.random_iops
        cache = page_cache_mb_per_s(probe)
        gather, gather_method = memory_gather_mb_per_s(probe, sample_bytes)
    except OSError as exc:
        raise IobenchError(f"cannot measure the limits in {data_dir}: {exc.strerror or exc}") from None
    finally:
        if existing is None:
            with contextlib.suppress(OSError):  # never a new error over the one that ended the probe
                probe.unlink()
    fstype, source = mount_of(data_dir)
    return MachineLimits(
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        hostname=platform.node(),
        data_dir=str(data_dir),
        data_filesystem=fstype,
        data_device=source,
        probe_file=str(probe) if existing is not None else "a fresh probe file",
        probe_bytes=probe.stat().st_size if existing is not None else probe_bytes,
        storage_read_mb_per_s=storage,
        storage_read_method=method,
        page_cache_read_mb_per_s=cache,
        read_limit_mb_per_s=read_limit,
        random_read_4k_qd1_iops=random_iops[PAGE, 1],
        random_read_4k_qd32_iops=random_iops[PAGE, 32],
        random_read_block_bytes=block,
        random_read_block_qd1_iops=random_iops[block, 1],
        random_read_block_qd32_iops=random_iops[block, 32],
        memory_gather_mb_per_s=gather,
        memory_gather_method=gather_method,
        gather_sample_bytes=sample_bytes,
        **(cuda_limits(device) if device.type == "cuda" else {}),
    )
