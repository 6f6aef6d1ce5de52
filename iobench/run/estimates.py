"""How long each configuration of a run will take, from a measured batch of each before any runs: the time left a
run prints was the pace so far, which said "about 30 s left" before an HDF5 configuration that took 5 minutes."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from iobench.errors import IobenchError
from iobench.plan.config import Cache
from iobench.plan.resolve import ResolvedRun

PROBE_BATCHES = 6  # batches timed after the first (which opens files and starts workers)


@dataclass(frozen=True)
class Estimate:
    """A configuration's time, as a range: its probed batches' fastest and slowest pace over its epochs ("about 14 min"
    took 127 s, "about 71 s" 222 s: one figure from three batches said more than it knew)."""

    low: float
    high: float

    @property
    def middle(self) -> float:
        return (self.low + self.high) / 2


def estimated_seconds(resolved: ResolvedRun) -> Estimate | None:
    """The configuration's whole run (every run's warm-up and timed epochs) at the pace of a few of its batches,
    read warm; None where a probe would cost what it measures (object storage) or fails (the run will say why)."""
    from iobench.run.building import build_loader

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
            paces = []
            for _ in range(min(PROBE_BATCHES, max(0, loader.order.n_batches() - 1))):
                t = time.perf_counter()
                next(batches)
                paces.append(time.perf_counter() - t)
        finally:
            with contextlib.suppress(Exception):
                loader.close()
        rest = max(0, loader.order.n_batches() - 1)
        paces = paces or [first]
        epochs = c.runs * (c.warmup + c.epochs)
        low, high = (first + min(paces) * rest, first + max(paces) * rest)
        if c.max_seconds is not None:
            low, high = min(low, c.max_seconds), min(high, c.max_seconds)
        return Estimate(low * epochs, high * epochs)
    return None


def standing(k: int, n: int, elapsed: float, estimates: list[Estimate | None] | None = None) -> str:
    """Where a run of several configurations stands, with the time left: before any has finished, the range their
    measured batches give; after, those estimates scaled by how the finished ones compared with theirs (a run's
    batches are not its probe's); without estimates, at the pace so far."""
    if n == 1:
        return ""
    known = estimates or []
    if len(known) == n and all(x is not None for x in known):
        ahead = known[k:]
        if k == 0:
            left = f", about {time_range(sum(x.low for x in ahead), sum(x.high for x in ahead))} left"  # type: ignore
        else:
            pace = elapsed / max(1e-9, sum(x.middle for x in known[:k]))  # type: ignore[union-attr]
            left = f", about {minutes(pace * sum(x.middle for x in ahead))} left"  # type: ignore[union-attr]
    else:
        left = "" if k == 0 else f", about {minutes(elapsed / k * (n - k))} left"
    return f"configuration {k + 1} of {n}{left}"


def time_range(low: float, high: float) -> str:
    """A time range as a person reads it: one figure where its ends round to the same."""
    a, b = minutes(low), minutes(high)
    if a == b:
        return a
    unit = a.split()[1]
    return f"{a.split()[0]}-{b}" if unit == b.split()[1] else f"{a}-{b}"


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
