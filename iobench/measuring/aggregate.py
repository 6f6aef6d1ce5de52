"""One record from every rank's measurements, combined with collectives.

A distributed epoch lasts until its slowest rank is done, so global throughput is the samples of
all ranks over the longest rank's epoch; the straggler ratio (slowest over fastest rank) says how
much of that is waiting. Per-node counters (disk reads, CPU) come from one process per node.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from iobench.measuring.clocks import EpochTiming
from iobench.results.record import EpochStats, RankStats, SystemStats, Timed
from iobench.results.stats import summary
from iobench.system.world import World

# A rank's row is a flat float tensor (gathered without pickle): these fields per timed epoch, then these of the
# rank, then its setup times. Read back by name (`_epochs`, `_rank`), never by position.
EPOCH_FIELDS = (
    "seconds",
    "first_batch_seconds",
    "batches",
    "samples",
    "wait_seconds",
    "h2d_seconds",
    "step_seconds",
    "partial",
    "device_read_bytes",
    "process_read_bytes",
    "resident_before",
    "resident_after",
    "transform_seconds",
    "loop_wait_seconds",
    "worker_wait_seconds",
    "loop_cpu_seconds",
)
RANK_FIELDS = (
    "node_main",
    "node_rank",
    "cpu_utilisation",
    "cpu_iowait",
    "peak_rss_bytes",
    "peak_rss_children_bytes",
    "cuda_allocated",
    "cuda_reserved",
)


@dataclass
class RankMeasurements:
    """What one process measured over its timed epochs."""

    timings: list[EpochTiming]
    system: list[dict]  # SystemCounters.delta per epoch
    resident_before: list[float]
    resident_after: list[float]
    setup: list[float]
    total: dict  # SystemCounters.delta over all timed epochs
    peak_rss: dict
    cuda_memory: tuple[float, float]  # max allocated, max reserved (NaN off CUDA)


@dataclass
class Combined:
    timings: list[EpochTiming]  # per timed epoch, over all ranks
    ranks: RankStats
    system: SystemStats  # the runner adds what only it knows (eviction, totals)


def _num(x: float | int | None) -> float:
    return math.nan if x is None else float(x)


def _opt_bytes(x: float) -> int | None:
    return None if math.isnan(x) else int(x)


def _row(m: RankMeasurements, world: World) -> list[float]:
    node = world.is_node_main
    row: list[float] = []
    for t, s, before, after in zip(m.timings, m.system, m.resident_before, m.resident_after, strict=True):
        epoch = {
            **{name: float(getattr(t, name)) for name in EPOCH_FIELDS if hasattr(t, name)},
            "device_read_bytes": _num(s["device_read_bytes"]) if node else 0.0,
            "process_read_bytes": _num(s["process_read_bytes"]),
            "resident_before": before,
            "resident_after": after,
        }
        row += [epoch[name] for name in EPOCH_FIELDS]
    allocated, reserved = m.cuda_memory
    rank = {
        "node_main": float(node),
        "node_rank": world.node_rank,
        "cpu_utilisation": _num(m.total["cpu_utilisation"]),
        "cpu_iowait": _num(m.total["cpu_iowait"]),
        **m.peak_rss,
        "cuda_allocated": allocated,
        "cuda_reserved": reserved,
    }
    return row + [rank[name] for name in RANK_FIELDS] + list(m.setup)


def _epochs(row: list[float], n: int) -> list[dict[str, float]]:
    """A rank's row's timed epochs, by field name."""
    size = len(EPOCH_FIELDS)
    return [dict(zip(EPOCH_FIELDS, row[k * size : (k + 1) * size], strict=True)) for k in range(n)]


def _rank(row: list[float], n: int) -> tuple[dict[str, float], list[float]]:
    """A rank's own fields by name, and its setup times."""
    tail = row[n * len(EPOCH_FIELDS) :]
    return dict(zip(RANK_FIELDS, tail[: len(RANK_FIELDS)], strict=True)), tail[len(RANK_FIELDS) :]


def combine(m: RankMeasurements, world: World, hosts: list[str], sample_bytes: int, shard: str | None) -> Combined:
    """Gather every rank's row and merge them (on every rank; rank 0 writes the record)."""
    rows = world.gather(_row(m, world))
    n = len(m.timings)
    epochs = [_epochs(row, n) for row in rows]  # [rank][epoch]
    ranks_own = [_rank(row, n) for row in rows]
    own = [r for r, _ in ranks_own]
    timings = []
    for k in range(n):
        at = [e[k] for e in epochs]  # every rank's epoch k

        def total(name: str, at: list[dict[str, float]] = at) -> float:
            return sum(x[name] for x in at)

        timings.append(
            EpochTiming(
                seconds=max(x["seconds"] for x in at),
                first_batch_seconds=max(x["first_batch_seconds"] for x in at),
                batches=int(total("batches")),
                samples=int(total("samples")),
                wait_seconds=total("wait_seconds"),
                h2d_seconds=total("h2d_seconds"),
                step_seconds=total("step_seconds"),
                partial=any(x["partial"] for x in at),
                transform_seconds=total("transform_seconds"),
                loop_wait_seconds=total("loop_wait_seconds"),
                worker_wait_seconds=total("worker_wait_seconds"),
                loop_cpu_seconds=total("loop_cpu_seconds"),
            )
        )
    node_own = [r for r in own if r["node_main"]]
    rank_seconds = [[e[k]["seconds"] for k in range(n)] for e in epochs]
    rank_rates = [statistics.median(x["samples"] / x["seconds"] for x in e if x["seconds"] > 0) for e in epochs]
    allocated, reserved = max(r["cuda_allocated"] for r in own), max(r["cuda_reserved"] for r in own)
    ranks = RankStats(
        nodes=len({r["node_rank"] for r in own}),
        hosts=sorted(set(hosts)),
        shard=shard,
        rank_epoch_seconds=rank_seconds,
        rank_samples_per_s=rank_rates,
        rank_mb_per_s_min=min(rank_rates) * sample_bytes / 1e6,
        rank_mb_per_s_max=max(rank_rates) * sample_bytes / 1e6,
        rank_au=[[x["step_seconds"] / x["seconds"] if x["seconds"] > 0 else 0.0 for x in e] for e in epochs],
        rank_au_after_first=[[au_after_first(x) for x in e] for e in epochs],
        rank_loop_wait=_wait_shares(epochs, "loop_wait_seconds"),
        rank_worker_wait=_wait_shares(epochs, "worker_wait_seconds"),
        rank_loop_cpu=_wait_shares(epochs, "loop_cpu_seconds"),
        straggler_ratio=statistics.median(
            max(s[k] for s in rank_seconds) / min(s[k] for s in rank_seconds) for k in range(n)
        ),
    )

    def per_epoch(name: str, merge: Callable[[Iterable[float]], float]) -> list[float]:
        return [merge(e[k][name] for e in epochs) for k in range(n)]

    system = SystemStats(
        device_read_bytes=[_opt_bytes(x) for x in per_epoch("device_read_bytes", sum)],
        process_read_bytes=[_opt_bytes(x) for x in per_epoch("process_read_bytes", sum)],
        residency_before=per_epoch("resident_before", max),
        residency_after=per_epoch("resident_after", max),
        cpu_utilisation=_node_mean([r["cpu_utilisation"] for r in node_own]),
        cpu_iowait=_node_mean([r["cpu_iowait"] for r in node_own]),
        peak_rss_bytes=int(max(r["peak_rss_bytes"] for r in own)),
        peak_rss_children_bytes=int(max(r["peak_rss_children_bytes"] for r in own)),
        setup_seconds=[max(col) for col in zip(*(setup for _, setup in ranks_own), strict=True)],
        # CUDA ranks: the largest rank's peaks
        cuda_max_memory_allocated_bytes=None if math.isnan(allocated) else int(allocated),
        cuda_max_memory_reserved_bytes=None if math.isnan(reserved) else int(reserved),
    )
    return Combined(timings, ranks, system)


def _wait_shares(epochs: list[list[dict[str, float]]], name: str) -> list[list[float]]:
    """Each rank's `name` per epoch (its step loop's wait for a CPU or time on one, its mean loader worker's wait),
    as a share of its epoch; none where a rank's kernel kept no schedstat."""
    shares = [[x[name] / x["seconds"] if x["seconds"] > 0 else 0.0 for x in e] for e in epochs]
    if any(math.isnan(x) for r in shares for x in r):
        return []
    return [[min(1.0, max(0.0, x)) for x in r] for r in shares]


def _node_mean(values: list[float]) -> float | None:
    known = [v for v in values if not math.isnan(v)]
    return statistics.fmean(known) if known else None


def epoch_stats(
    timings: Sequence[Timed], sample_bytes: int, n_samples: int, has_step: bool = False, ranks: int = 1
) -> EpochStats:
    """The timed epochs as a record keeps them: median with min and max, the spread, where each batch's time went,
    the share of the time in the step (a rank's step over its epoch, under torchrun)."""
    seconds = [t.seconds for t in timings]
    s = summary(seconds)
    samples = statistics.median([t.samples for t in timings])
    batches = sum(t.batches for t in timings) or 1
    median = s.median
    return EpochStats(
        epoch_seconds=seconds,
        epoch_seconds_median=median,
        epoch_seconds_min=s.min,
        epoch_seconds_max=s.max,
        epoch_seconds_cv=s.cv,
        epoch_seconds_mad=s.mad,
        first_batch_seconds=[t.first_batch_seconds for t in timings],
        first_batch_seconds_median=statistics.median(t.first_batch_seconds for t in timings),
        samples_per_epoch=int(samples),
        batches_per_epoch=int(statistics.median(t.batches for t in timings)),
        samples_per_s=samples / median if median > 0 else math.nan,
        mb_per_s=samples * sample_bytes / 1e6 / median if median > 0 else math.nan,
        wait_ms_per_batch=1000 * sum(t.wait_seconds for t in timings) / batches,
        h2d_ms_per_batch=1000 * sum(t.h2d_seconds for t in timings) / batches,
        step_ms_per_batch=1000 * sum(t.step_seconds for t in timings) / batches,
        transform_ms_per_batch=1000 * sum(t.transform_seconds for t in timings) / batches,
        # An epoch cut short by --max-batches or --max-seconds did not read the whole dataset.
        partial=any(t.partial for t in timings) or samples < n_samples,
        accelerator_utilisation=(
            statistics.median(t.step_seconds / ranks / t.seconds for t in timings if t.seconds > 0)
            if has_step
            else None
        ),
    )


def au_after_first(epoch: dict[str, float]) -> float:
    """A rank's utilisation in one epoch as DLIO counts it: the first step left out, its wait for the first batch and
    its compute (the step's time over the epoch's batches: the steps are alike); 0 where nothing is left after it."""
    batches, step = epoch["batches"], epoch["step_seconds"]
    first = step / batches if batches > 0 else 0.0
    rest = epoch["seconds"] - epoch["first_batch_seconds"] - first
    if batches < 2 or rest <= 0:
        return 0.0
    return min(1.0, max(0.0, (step - first) / rest))
