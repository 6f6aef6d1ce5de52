"""The units a figure is judged by and the interval of their median: one function (`interval_of`) for every command.

A record's units are its runs (each a fresh loader after its warm-up; the median of its timed epochs): the epochs of
one run share its minute's drift, and intervals of epochs called two identical runs 90 s apart -16.4%. A record that
cannot be split into runs (one run, or a count that is not runs x epochs) is judged by its epochs. A checkpoint is
judged by its rounds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from iobench.results.record import RunRecord

CONFIDENCE = 0.95  # the coverage asked of a median's interval


def median_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(low, high, coverage): the median's confidence interval by order statistics, which assumes nothing about
    the distribution (a loaded machine's epochs are skewed: the mean's interval missed the median). The
    narrowest pair x_(j), x_(n+1-j) covering the median with CONFIDENCE; fewer than 6 values cannot reach it,
    and get their whole range with its lower coverage. Fewer than 2: no interval."""
    xs, n = sorted(values), len(values)
    if n < 2:
        return 0.0, math.inf, 0.0
    j, coverage = 1, 1 - 2 * 0.5**n  # [min, max] misses the median only when every value falls on one side
    for k in range(2, n // 2 + 1):
        wider = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
        if wider < CONFIDENCE:
            break
        j, coverage = k, wider
    return xs[j - 1], xs[n - j], coverage


@dataclass(frozen=True)
class Interval:
    """The median of some units with the interval that covers it (`coverage`: how sure); no interval where there
    were fewer than two units (high is infinite)."""

    median: float
    low: float
    high: float
    coverage: float
    units: int

    @property
    def finite(self) -> bool:
        return math.isfinite(self.high)

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def apart(self, other: Interval) -> bool:
        """Both have an interval and they do not overlap: the two can be told apart."""
        return self.finite and other.finite and not self.overlaps(other)

    def text(self, digits: int = 0) -> str:
        if not self.finite:
            return f"{self.median:,.{digits}f} (one {'unit' if self.units else 'value'}: no interval)"
        return f"{self.median:,.{digits}f} [{self.low:,.{digits}f}-{self.high:,.{digits}f}, {self.coverage:.0%}]"


def interval_of(values: Sequence[float]) -> Interval:
    """The one interval: of the median of `values`, by order statistics."""
    low, high, coverage = median_interval(values)
    return Interval(statistics.median(values) if values else 0.0, low, high, coverage, len(values))


def epoch_rates(r: RunRecord) -> list[float]:
    """samples/s of each timed epoch."""
    n = r.epochs.samples_per_epoch
    return [n / s for s in r.epochs.epoch_seconds if s > 0]


def units_of(r: RunRecord) -> list[float]:
    """samples/s of each run (its timed epochs' median); its epochs where it cannot be split into runs."""
    values, runs, per_run = epoch_rates(r), r.config.runs, r.config.epochs
    if runs < 2 or per_run < 1 or len(values) != runs * per_run:
        return values
    return [statistics.median(values[k * per_run : (k + 1) * per_run]) for k in range(runs)]


def record_interval(r: RunRecord) -> Interval:
    """A record's interval: of its runs' samples/s (`units_of`)."""
    return interval_of(units_of(r))


def variation(values: Sequence[float]) -> float:
    """How much units spread: the largest over the smallest, less 1 (0 for one or none)."""
    positive = [v for v in values if v > 0]
    return max(positive) / min(positive) - 1 if len(positive) > 1 else 0.0
