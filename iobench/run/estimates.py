"""How long each configuration of a run will take, from a measured batch of each before any runs: the time left a
run prints was the pace so far, which said "about 30 s left" before an HDF5 configuration that took 5 minutes."""

from __future__ import annotations

import contextlib
import time

from iobench.errors import IobenchError
from iobench.plan.config import Cache
from iobench.plan.resolve import ResolvedRun

PROBE_BATCHES = 3  # batches timed after the first (which opens files and starts workers)


def estimated_seconds(resolved: ResolvedRun) -> float | None:
    """The configuration's whole run (every run's warm-up and timed epochs) at the pace of a few of its batches,
    read warm; None where a probe would cost what it measures (object storage) or fails (the run will say why)."""
    from iobench.run.runner import build_loader

    c = resolved.config
    if resolved.storage.kind != "local" or c.cache is Cache.COLD:
        return None
    with contextlib.suppress(IobenchError, OSError, ValueError, RuntimeError, StopIteration):
        loader = build_loader(resolved)
        try:
            loader.prepare(0)
            started = time.perf_counter()
            batches = iter(loader.epoch(0))
            next(batches)
            first = time.perf_counter() - started
            t = time.perf_counter()
            for _ in range(PROBE_BATCHES):
                next(batches)
            per_batch = (time.perf_counter() - t) / PROBE_BATCHES
        finally:
            with contextlib.suppress(Exception):
                loader.close()
        epoch = first + per_batch * max(0, loader.order.n_batches() - 1)
        if c.max_seconds is not None:
            epoch = min(epoch, c.max_seconds)
        return epoch * c.runs * (c.warmup + c.epochs)
    return None
