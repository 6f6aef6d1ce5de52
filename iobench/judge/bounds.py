"""What binds, decided here once: the stage that took most of a batch's time (a report's answer), the stage that
would set the period at another step time (what-if's prediction), and what kept feed's ranks waiting at a count
(the storage at 80% of its access pattern's limit, the cores 85% busy with the ranks' own work, other programs' CPU
named as theirs, else the loader's hand-over)."""

from __future__ import annotations

from iobench.judge.evidence import busy
from iobench.results.feed_record import FeedPoint

WAITED = 0.05  # of the period, waiting for the loader above this: the loader was the bound
STORAGE_SHARE = 80.0  # percent of the access pattern's limit: the storage is the bound
CPU_SHARE = 0.85  # of the machine's cores busy: the CPU is the bound


def largest_stage(stages: dict[str, float]) -> tuple[str, float] | None:
    """The stage that took most of the time, and its share of the whole; None where nothing was measurable."""
    total = sum(stages.values())
    if total <= 0:
        return None
    name, taken = max(stages.items(), key=lambda kv: kv[1])
    return name, taken / total


def paced_bound(
    device: str, wait_ms: float, period_ms: float, compute_ms: float, slow_ms: float, fast_ms: float
) -> str:
    """A loader reading beside the step: what would set the period, the loader where the run waited for it more
    than `WAITED` of its period and the device's side (`device`: its copy or its step) would not cover it, else the
    device's side (or the loader, where the prediction's two bounds differ)."""
    if wait_ms > WAITED * period_ms:
        return device if compute_ms >= period_ms else "loader (its pace, or receiving its batches)"
    return device if slow_ms - fast_ms < 0.005 * slow_ms else f"{device} (or the loader)"


def feed_bound(point: FeedPoint) -> str:
    """What kept the ranks waiting at a feed count, in words with its figure."""
    if point.percent_of_limit is not None and point.percent_of_limit >= STORAGE_SHARE:
        return (
            f"the storage: {point.mb_per_s:,.0f} MB/s read, {point.percent_of_limit:.0f}% of {point.limit_name} "
            f"({point.limit_mb_per_s:,.0f} MB/s)"
        )
    if point.cpu_utilisation is not None and point.cpu_utilisation >= CPU_SHARE:
        if point.own_cores is not None and busy(point.others_cores):
            return (
                f"other programs' CPU: they used {point.others_cores:.1f} cores and the ranks {point.own_cores:.1f} "
                f"(the cores {point.cpu_utilisation:.0%} busy{waited_words(point)}); measure again with the machine "
                "quiet"
            )
        own = f"its processes used {point.own_cores:.1f} cores, " if point.own_cores is not None else ""
        return f"the CPU: {own}the cores {point.cpu_utilisation:.0%} busy"
    limit = f"{point.percent_of_limit:.0f}% of its limit" if point.percent_of_limit is not None else "no limit known"
    cpu = f"{point.cpu_utilisation:.0%}" if point.cpu_utilisation is not None else "unknown"
    if point.requests is not None and point.request_bytes is not None:  # from a store iobench served and counted
        return (
            f"the loader's hand-over from object storage: {point.wait_ms_per_batch:,.0f} ms waited a batch, "
            f"{point.requests:,} requests ({point.request_bytes / 1e6:,.1f} MB sent), the cores {cpu} busy"
        )
    return (
        f"the loader's hand-over: {point.wait_ms_per_batch:,.0f} ms waited a batch with the storage at {limit} and "
        f"the cores {cpu} busy"
    )


def waited_words(point: FeedPoint) -> str:
    """How long the count's processes waited for a CPU, where it was measured."""
    share = point.cpu_wait_share
    return f", the ranks waiting for a CPU {share:.0%} of their runnable time" if share is not None else ""
