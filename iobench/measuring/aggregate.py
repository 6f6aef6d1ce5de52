"""One record from every rank's measurements, combined with collectives.

A distributed epoch lasts until its slowest rank is done, so global throughput is the samples of
all ranks over the longest rank's epoch; the straggler ratio (slowest over fastest rank) says how
much of that is waiting. Per-node counters (disk reads, CPU) come from one process per node.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from iobench.measuring.distributed import World
from iobench.results.record import EpochTiming, RankStats, SystemStats

PER_EPOCH = 13  # numbers per timed epoch in a rank's row (see _row)


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
        row += [t.seconds, t.first_batch_seconds, t.batches, t.samples, t.wait_seconds, t.h2d_seconds]
        row += [t.step_seconds, float(t.partial), _num(s["device_read_bytes"]) if node else 0.0]
        row += [_num(s["process_read_bytes"]), before, after, t.transform_seconds]
    row += [float(node), world.node_rank, _num(m.total["cpu_utilisation"]), _num(m.total["cpu_iowait"])]
    row += [m.peak_rss["peak_rss_bytes"], m.peak_rss["peak_rss_children_bytes"], *m.cuda_memory, *m.setup]
    return row


def combine(m: RankMeasurements, world: World, hosts: list[str], sample_bytes: int, shard: str | None) -> Combined:
    """Gather every rank's row and merge them (on every rank; rank 0 writes the record)."""
    rows = world.gather(_row(m, world))
    n = len(m.timings)
    epochs = [[row[k * PER_EPOCH : (k + 1) * PER_EPOCH] for k in range(n)] for row in rows]  # [rank][epoch]
    tails = [row[n * PER_EPOCH :] for row in rows]
    timings = []
    for k in range(n):
        cols = list(zip(*(e[k] for e in epochs), strict=True))
        timings.append(
            EpochTiming(
                seconds=max(cols[0]),
                first_batch_seconds=max(cols[1]),
                batches=int(sum(cols[2])),
                samples=int(sum(cols[3])),
                wait_seconds=sum(cols[4]),
                h2d_seconds=sum(cols[5]),
                step_seconds=sum(cols[6]),
                partial=any(cols[7]),
                transform_seconds=sum(cols[12]),
            )
        )
    node_tails = [t for t in tails if t[0]]
    rank_seconds = [[e[k][0] for k in range(n)] for e in epochs]
    rank_rates = [statistics.median(e[k][3] / e[k][0] for k in range(n) if e[k][0] > 0) for e in epochs]
    allocated, reserved = max(t[6] for t in tails), max(t[7] for t in tails)
    ranks = RankStats(
        nodes=len({t[1] for t in tails}),
        hosts=sorted(set(hosts)),
        shard=shard,
        rank_epoch_seconds=rank_seconds,
        rank_samples_per_s=rank_rates,
        rank_mb_per_s_min=min(rank_rates) * sample_bytes / 1e6,
        rank_mb_per_s_max=max(rank_rates) * sample_bytes / 1e6,
        straggler_ratio=statistics.median(
            max(s[k] for s in rank_seconds) / min(s[k] for s in rank_seconds) for k in range(n)
        ),
    )
    system = SystemStats(
        device_read_bytes=[_opt_bytes(sum(e[k][8] for e in epochs)) for k in range(n)],
        process_read_bytes=[_opt_bytes(sum(e[k][9] for e in epochs)) for k in range(n)],
        residency_before=[max(e[k][10] for e in epochs) for k in range(n)],
        residency_after=[max(e[k][11] for e in epochs) for k in range(n)],
        cpu_utilisation=_node_mean([t[2] for t in node_tails]),
        cpu_iowait=_node_mean([t[3] for t in node_tails]),
        peak_rss_bytes=int(max(t[4] for t in tails)),
        peak_rss_children_bytes=int(max(t[5] for t in tails)),
        setup_seconds=[max(col) for col in zip(*(t[8:] for t in tails), strict=True)],
        # CUDA ranks: the largest rank's peaks
        cuda_max_memory_allocated_bytes=None if math.isnan(allocated) else int(allocated),
        cuda_max_memory_reserved_bytes=None if math.isnan(reserved) else int(reserved),
    )
    return Combined(timings, ranks, system)


def _node_mean(values: list[float]) -> float | None:
    known = [v for v in values if not math.isnan(v)]
    return statistics.fmean(known) if known else None
