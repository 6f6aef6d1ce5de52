"""Whether one figure differs from another, decided with its noise (as hyperfine and pyperf decide): each record's
samples/s over its timed epochs has an interval (the median's, by order statistics: `median_interval`), two
intervals that overlap are no change and no ranking, and two runs that saw different load on the machine are
not comparable at all. On a shared 2-core machine the same configuration measured 131,357 and 591,878 samples/s in
two runs, and `compare` called back-to-back identical runs -39.5% and +145.6%."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from iobench.results.record import RunRecord
from iobench.results.stats import median_interval

BUSY_CORES = 0.25  # other programs' cores beside a run above which its figures are a shared machine's


def rates(r: RunRecord) -> list[float]:
    """samples/s of each timed epoch."""
    n = r.epochs.samples_per_epoch
    return [n / s for s in r.epochs.epoch_seconds if s > 0]


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    coverage: float  # how sure: 0.95 from 6 epochs on; the whole range, less sure, with fewer

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def text(self) -> str:
        if not math.isfinite(self.high):
            return f"{self.median:,.0f} (one epoch: no interval)"
        return f"{self.median:,.0f} [{self.low:,.0f}-{self.high:,.0f}, {self.coverage:.0%}]"


def interval(r: RunRecord) -> Interval:
    values = rates(r)
    low, high, coverage = median_interval(values)
    return Interval(statistics.median(values) if values else 0.0, low, high, coverage)


def busy(r: RunRecord) -> float | None:
    """The most cores other programs used around the run (before or after it), None where it was not measured."""
    seen = [x for x in (r.system.other_cpu_before, r.system.other_cpu_after) if x is not None]
    return max(seen) if seen else None


@dataclass(frozen=True)
class Verdict:
    kind: str  # "change", "same" (the intervals overlap), "not comparable"
    change: float | None  # B's median samples/s over A's, less 1 ("change" only)
    text: str


def compare_verdict(a: RunRecord, b: RunRecord) -> Verdict:
    """B against A: not comparable when they saw different load, no change when their intervals overlap, else the
    change of the median with both intervals."""
    load_a, load_b = busy(a), busy(b)
    if load_a is not None and load_b is not None and max(load_a, load_b) > BUSY_CORES:
        if abs(load_a - load_b) > BUSY_CORES:
            return Verdict("not comparable", None, f"not comparable: other programs used {load_a:.1f} cores beside A, "
                                                   f"{load_b:.1f} beside B")  # fmt: skip
    ia, ib = interval(a), interval(b)
    if ia.median <= 0:  # a run that delivered nothing (a hostile or broken record): no ratio to give
        return Verdict("not comparable", None, "not comparable: A is 0 samples/s")
    if not math.isfinite(ia.high) or not math.isfinite(ib.high):
        return Verdict(
            "not comparable", None, "not comparable: one timed epoch has no interval (use --epochs 3 or more)"
        )
    if ia.overlaps(ib):
        return Verdict("same", None, "no change: the intervals overlap")
    change = ib.median / ia.median - 1
    return Verdict("change", change, f"{change:+.1%}")


def tied_with(r: RunRecord, best: RunRecord) -> bool:
    """Whether `r` cannot be told from the fastest: their intervals overlap."""
    a, b = interval(r), interval(best)
    return r is not best and math.isfinite(a.high) and math.isfinite(b.high) and a.overlaps(b)
