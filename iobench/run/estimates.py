"""How long each configuration of a run will take, from a measured batch of each before any runs: the time left a
run prints was the pace so far, which said "about 30 s left" before an HDF5 configuration that took 5 minutes."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass

from iobench.errors import IobenchError
from iobench.plan.config import Cache
from iobench.plan.resolve import ResolvedRun
from iobench.progress import minutes, pace_of
from iobench.results.record import RunRecord

PROBE_BATCHES = 6  # batches timed after the first (which opens files and starts workers)


@dataclass(frozen=True)
class Estimate:
    """A configuration's time, as a range: its probed batches' fastest and slowest pace over its epochs ("about 14 min"
    took 127 s, "about 71 s" 222 s: one figure from three batches said more than it knew)."""

    low: float
    high: float
    runs: int = 1  # the configuration's runs: each has its own fixed cost

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
        return Estimate(low * epochs, high * epochs, c.runs)
    return None


@dataclass(frozen=True)
class Finished:
    """A configuration that ran: its wall seconds, and what of them its epochs took (warm-up ones counted at the timed
    epochs' median) — the rest is what every run of a configuration costs whatever its size (a loader built, workers
    started, files evicted, its shuffle scored)."""

    seconds: float
    epoch_seconds: float
    runs: int


def standing(
    k: int,
    n: int,
    elapsed: float,
    estimates: list[Estimate | None] | None = None,
    finished: list[Finished] | None = None,
) -> str:
    """Where a run of several configurations stands, with the time left after the first has finished (before it, the
    line that gave the total said it). The time left is each configuration ahead's estimated epochs at the pace the
    finished epochs kept against theirs, plus the fixed cost per run the finished configurations showed: scaling the
    whole of a tiny first configuration's time by its estimate said "about 2 min left" for 7 s. Without estimates,
    the pace so far."""
    if n == 1 or k == 0:
        return "" if n == 1 else f"configuration 1 of {n}"
    known, done = estimates or [], finished or []
    if len(known) == n and all(x is not None for x in known) and len(done) == k:
        fixed = sum(max(0.0, f.seconds - f.epoch_seconds) for f in done) / max(1, sum(f.runs for f in done))
        ahead = known[k:]
        pace = pace_of(
            sum(f.epoch_seconds for f in done),
            sum(x.middle for x in known[:k]),  # type: ignore[union-attr]
            sum(x.middle for x in ahead),
        )  # type: ignore[union-attr]
        runs = [x.runs for x in ahead]  # type: ignore[union-attr]
        left = sum(pace * x.middle for x in ahead) + fixed * sum(runs)  # type: ignore[union-attr]
    else:
        left = elapsed / k * (n - k)
    return f"configuration {k + 1} of {n}, about {minutes(left)} left"


def finished_of(record: RunRecord, seconds: float) -> Finished:
    """A finished configuration's seconds and its epochs' part of them (its record's timed epochs, and its warm-up
    epochs at their median)."""
    e, c = record.epochs, record.config
    timed = sum(e.epoch_seconds)
    warm = c.runs * c.warmup * (statistics.median(e.epoch_seconds) if e.epoch_seconds else 0.0)
    return Finished(seconds, timed + warm, c.runs)


def time_range(low: float, high: float) -> str:
    """A time range as a person reads it: one figure where its ends round to the same."""
    a, b = minutes(low), minutes(high)
    if a == b:
        return a
    unit = a.split()[1]
    return f"{a.split()[0]}-{b}" if unit == b.split()[1] else f"{a}-{b}"
