"""Whether N emulated accelerators were fed, and what the `feed` answer says, decided here from the records' raw
values: every rank's utilisation (its step's time over its epoch's) in every measured epoch against the workload's
threshold. Fed: every rank at or above it in every epoch; starved: some rank below it in every epoch; undecided: a
rank whose epochs fall on both sides (counted as not fed: N is the largest count seen fed). What bound the first
count not fed: the storage where the ranks together read at 80% or more of the limit of their access pattern, the
CPU where the cores were 85% busy, else the loader's hand-over (batches waited for with storage and cores to spare)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

FED, STARVED, UNDECIDED = "fed", "starved", "undecided"
START_SHARE = 0.03  # of an epoch, a first batch worth naming: a larger dataset would amortise it
STORAGE_SHARE = 80.0  # percent of the access pattern's limit: the storage is the bound
CPU_SHARE = 0.85  # of the machine's cores busy: the CPU is the bound


@dataclass(frozen=True)
class FeedPoint:
    """One count of accelerators measured: each rank's utilisation per measured epoch, and the run's other figures."""

    n: int
    rank_au: tuple[tuple[float, ...], ...]
    mb_per_s: float  # all ranks together, the median epoch
    wait_ms_per_batch: float
    cpu_utilisation: float | None = None
    limit_name: str | None = None
    limit_mb_per_s: float | None = None
    percent_of_limit: float | None = None
    cache: str = "warm"
    first_batch_share: float = 0.0  # of an epoch, its first batch (its first reads, the prefetch filling)

    @property
    def au(self) -> float:
        """The least fed rank's median utilisation (MLPerf's rule is every rank's)."""
        return min(statistics.median(r) for r in self.rank_au) if self.rank_au else 0.0


def feed_verdict(point: FeedPoint, threshold: float) -> str:
    if point.rank_au and all(min(r) >= threshold for r in point.rank_au):
        return FED
    if not point.rank_au or any(max(r) < threshold for r in point.rank_au):
        return STARVED
    return UNDECIDED


def bound_of(point: FeedPoint) -> str:
    """What kept the ranks waiting at this count, in words with its figure."""
    if point.percent_of_limit is not None and point.percent_of_limit >= STORAGE_SHARE:
        return (
            f"the storage: {point.mb_per_s:,.0f} MB/s read, {point.percent_of_limit:.0f}% of {point.limit_name} "
            f"({point.limit_mb_per_s:,.0f} MB/s)"
        )
    if point.cpu_utilisation is not None and point.cpu_utilisation >= CPU_SHARE:
        return f"the CPU: the cores {point.cpu_utilisation:.0%} busy"
    limit = f"{point.percent_of_limit:.0f}% of its limit" if point.percent_of_limit is not None else "no limit known"
    cpu = f"{point.cpu_utilisation:.0%}" if point.cpu_utilisation is not None else "unknown"
    return (
        f"the loader's hand-over: {point.wait_ms_per_batch:,.0f} ms waited a batch with the storage at {limit} and "
        f"the cores {cpu} busy"
    )


@dataclass(frozen=True)
class FeedAnswer:
    n: int  # the largest count fed (0: not even one)
    line: str


def feed_answer(
    points: dict[int, FeedPoint], threshold: float, accelerator: str, demand_mb_per_s: float, most: int, why_most: str
) -> FeedAnswer:
    """The answer from the counts measured: N, its AU and the next count's (or why it was not started), what one
    accelerator needs against what it got, and the bound; a fraction of one where one was not fed."""
    fed = sorted(n for n, p in points.items() if feed_verdict(p, threshold) == FED)
    n = fed[-1] if fed else 0
    if n == 0:
        one = points[1]
        got = one.mb_per_s
        return FeedAnswer(
            0,
            f"answer: {one.au:.2f} of one {accelerator} (AU {one.au:.3f} under {threshold:.2f}): it needs "
            f"{demand_mb_per_s:,.0f} MB/s and got {got:,.0f}; bound by {bound_of(one)}" + _undecided(one, threshold),
        )
    at = points[n]
    head = (
        f"answer: {n} {accelerator} accelerator(s) fed (every rank's AU at or above {threshold:.2f}: least "
        f"{at.au:.3f}); each needs {demand_mb_per_s:,.0f} MB/s and got {at.mb_per_s / n:,.0f}"
    )
    after = points.get(n + 1)
    if after is None:
        return FeedAnswer(n, f"{head}; {n + 1} not measured: {why_most}" if n >= most else head)
    return FeedAnswer(
        n,
        f"{head}; at {n + 1}: AU {after.au:.3f} ({feed_verdict(after, threshold)}), bound by {bound_of(after)}"
        + _start(after)
        + _undecided(after, threshold),
    )


def _start(point: FeedPoint) -> str:
    if point.first_batch_share < START_SHARE:
        return ""
    return (
        f"; an epoch's first batch took {point.first_batch_share:.0%} of it (its first reads; a dataset of the "
        "workload's full size would amortise them)"
    )


def _undecided(point: FeedPoint, threshold: float) -> str:
    if feed_verdict(point, threshold) != UNDECIDED:
        return ""
    return f" (undecided: a rank's epochs fell on both sides of {threshold:.2f}; more --epochs would tell)"
