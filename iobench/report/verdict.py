"""Whether one figure differs from another, decided with its noise (as hyperfine and pyperf decide): each record's
samples/s has an interval (the median's, by order statistics: `median_interval`), two intervals that overlap are no
change and no ranking, and two runs that saw different load on the machine are not comparable at all. On a shared
2-core machine the same configuration measured 131,357 and 591,878 samples/s in two runs, and `compare` called
back-to-back identical runs -39.5% and +145.6%.

`compare` takes a record's runs as the units of its interval (each run a fresh loader after its warm-up; the epochs of
one run share its minute's drift, and intervals from epochs called two identical runs 90 s apart -16.4%), and two
records both taken beside other programs are "not decidable here" unless they differ by more than the same
configuration varied between its own runs there. A ratio that is not a verdict is still shown, labelled."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from iobench.results.record import RunRecord
from iobench.results.stats import BUSY_CORES, median_interval


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
    return r.host.busy


@dataclass(frozen=True)
class Verdict:
    kind: str  # "change", "same" (the intervals overlap), "not decidable" (a shared machine's noise), "not comparable"
    change: float | None  # B's median samples/s over A's, less 1 ("change" only)
    text: str


def run_rates(r: RunRecord) -> list[float]:
    """samples/s of each run (its timed epochs' median): the units `compare` decides with. A record whose epochs
    cannot be told apart by run (one run, or a count that is not runs x epochs) gives its epochs instead."""
    values, runs, per_run = rates(r), r.config.runs, r.config.epochs
    if runs < 2 or per_run < 1 or len(values) != runs * per_run:
        return values
    return [statistics.median(values[k * per_run : (k + 1) * per_run]) for k in range(runs)]


def _interval_of(values: list[float]) -> Interval:
    low, high, coverage = median_interval(values)
    return Interval(statistics.median(values) if values else 0.0, low, high, coverage)


def run_interval(r: RunRecord) -> Interval:
    """The interval of the median of its runs (`run_rates`): what `compare` decides with."""
    return _interval_of(run_rates(r))


def variation(values: list[float]) -> float:
    """How much a configuration's own units spread: the largest over the smallest, less 1 (0 for one or none)."""
    positive = [v for v in values if v > 0]
    return max(positive) / min(positive) - 1 if len(positive) > 1 else 0.0


def compare_verdict(a: RunRecord, b: RunRecord) -> Verdict:
    """B against A, by their runs (`run_rates`), as `verdict_of` decides."""
    units_a, units_b = run_rates(a), run_rates(b)
    if a.timestamp and a.timestamp == b.timestamp and units_a == units_b:  # a file compared with itself
        return Verdict("same", None, "no change: the very same runs (one record, read twice)")
    return verdict_of(units_a, units_b, busy(a), busy(b), RUN_UNITS)


@dataclass(frozen=True)
class Units:
    """What `verdict_of` decides with, in words: the rate's unit, what was measured, what its units are, and what
    to do where one has no interval."""

    rate: str
    measured: str
    units: str
    alone: str


RUN_UNITS = Units("samples/s", "configuration", "runs", "one timed epoch has no interval (use --epochs 3 or more)")


def verdict_of(units_a: list[float], units_b: list[float], load_a: float | None, load_b: float | None,
               words: Units) -> Verdict:  # fmt: skip
    """B against A from each one's units (rates: higher is faster; a run's samples/s, a checkpoint round's GB/s): not
    comparable when they saw different load (`load_*`: the cores other programs used beside them), not decidable when
    both shared the machine and differ by no more than a unit of either varied by, no change when their intervals
    overlap, else the change of the median with both intervals. The ratio is always in the text, labelled where it
    decides nothing."""
    ia, ib = _interval_of(units_a), _interval_of(units_b)
    if ia.median <= 0:  # a measurement that delivered nothing (a hostile or broken record): no ratio to give
        return Verdict("not comparable", None, f"not comparable: A is 0 {words.rate}")
    change = ib.median / ia.median - 1
    ratio = f"(B/A {ib.median / ia.median:.2f}x, not a verdict)"
    if load_a is not None and load_b is not None and max(load_a, load_b) > BUSY_CORES:
        if abs(load_a - load_b) > BUSY_CORES:
            return Verdict("not comparable", None, f"not comparable: other programs used {load_a:.1f} cores beside A, "
                                                   f"{load_b:.1f} beside B {ratio}")  # fmt: skip
    if not math.isfinite(ia.high) or not math.isfinite(ib.high):
        return Verdict("not comparable", None, f"not comparable: {words.alone} {ratio}")
    if load_a is not None and load_b is not None and min(load_a, load_b) > BUSY_CORES:
        own = max(variation(units_a), variation(units_b))
        if abs(change) <= own:
            return Verdict("not decidable", None,
                           f"not decidable here: both shared the machine ({load_a:.1f} and {load_b:.1f} cores busy "
                           f"beside them) and the same {words.measured}'s own {words.units} differed by up to "
                           f"{1 + own:.2f}x "
                           f"{ratio}")  # fmt: skip
    if ia.overlaps(ib):
        return Verdict("same", None, f"no change: the intervals overlap {ratio}")
    return Verdict("change", change, f"{change:+.1%}")


def tied_with(r: RunRecord, best: RunRecord) -> bool:
    """Whether `r` cannot be told from the fastest: their intervals overlap."""
    a, b = interval(r), interval(best)
    return r is not best and math.isfinite(a.high) and math.isfinite(b.high) and a.overlaps(b)
