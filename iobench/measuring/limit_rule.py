"""Which ceiling a run is held to, the one rule for it: storage when cold, the page cache otherwise (the gather of
its samples when shuffled), never above host-to-device on CUDA, per node and per rank under torchrun; object
storage's own profile for a remote run. A record of a loader that holds the dataset in device memory (gpu-resident)
is held to none: it moves nothing from the host. Above the loaders, so that it asks the loader what it does."""

from __future__ import annotations

import math
from dataclasses import replace

from iobench.loaders import kind_of
from iobench.results.limits import LimitShare, MachineLimits, RemoteLimits
from iobench.results.record import RunRecord


def device_resident(r: RunRecord) -> bool:
    """The dataset was loaded to the device once: the timed epochs move nothing from the host."""
    kind = kind_of(r.config.loader)
    return kind is not None and kind.in_device_memory


def ceiling(r: RunRecord, limits: MachineLimits | RemoteLimits) -> tuple[str, float] | None:
    """The ceiling this run is held to: storage when cold, the page cache otherwise, and never
    above host-to-device on CUDA. None for gpu-resident: its epochs move nothing from the host
    (a sequential batch is a view of device memory), so no transfer ceiling applies.

    Object storage (a remote run, cold) is held to its profile's fastest delivery (RemoteLimits.ceiling);
    a warm remote epoch may read a library's own local cache, which no network ceiling bounds: None.

    Under torchrun the storage and page-cache ceilings (one reader's, per node) count once per
    node and host-to-device once per rank (each rank has its own GPU)."""
    c = r.config
    if device_resident(r) or (c.storage == "local") != isinstance(limits, MachineLimits):
        return None
    if isinstance(limits, RemoteLimits):
        return limits.ceiling(r.dataset.sample_bytes) if c.cold else None
    name, value = _pattern_ceiling(r, limits)
    value *= r.ranks.nodes
    if c.device.startswith("cuda"):
        h2d = "h2d_pinned_mb_per_s" if c.settings.pin_memory else "h2d_pageable_mb_per_s"
        per_rank = getattr(limits, h2d)
        if per_rank and per_rank * c.world_size < value:
            name, value = h2d, per_rank * c.world_size
    return name, value


def _pattern_ceiling(r: RunRecord, limits: MachineLimits) -> tuple[str, float]:
    """The ceiling of the run's access pattern. Sequential (and block-shuffled) epochs: the
    sequential storage read cold, the page-cache copy warm. Shuffled: gathering samples from
    memory warm; cold, random reads of one sample's block at queue depth 32, or (when the whole
    dataset may be cached, so reading it all in sequence is allowed) the faster of that and the
    sequential read. Limits measured before these existed fall back to the sequential figures."""
    c, sample = r.config, r.dataset.sample_bytes
    if c.shuffled and not c.cold and limits.memory_gather_mb_per_s is not None:
        if limits.gather_sample_bytes == sample:
            return "memory_gather_mb_per_s", limits.memory_gather_mb_per_s
    if c.shuffled and c.cold:
        iops = limits.random_iops(sample)
        if iops is not None:
            random_read = ("random_read_qd32_samples", iops * sample / 1e6)
            budgeted = c.cache_budget is not None
            if budgeted or random_read[1] > limits.storage_read_mb_per_s:
                return random_read
    if c.cold:
        return "storage_read_mb_per_s", limits.storage_read_mb_per_s
    return "page_cache_read_mb_per_s", limits.page_cache_read_mb_per_s


def with_limits(r: RunRecord, limits: MachineLimits | RemoteLimits | None) -> RunRecord:
    """The record with its share of the applicable ceiling (recomputed by today's rule)."""
    found = ceiling(r, limits) if limits is not None else None
    if found is None or not 0 < found[1] < math.inf:  # never lose a measurement to a bad ceiling
        return replace(r, limit=LimitShare())
    name, value = found
    return replace(
        r,
        limit=LimitShare(limit_name=name, limit_mb_per_s=value, percent_of_limit=100 * r.epochs.mb_per_s / value),
    )
