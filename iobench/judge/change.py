"""Whether B changed against A: faster, slower, no decidable difference, or not comparable, with the reason.

Every rule is about what the evidence can bound. Two measurements taken beside different loads are not comparable.
A measurement's own units (its runs, or a checkpoint's rounds) are taken inside one minute and share its drift, so
their spread does not bound the next minute's: on a shared 2-core machine `compare` called identical configurations
a minute apart +103.7% and +126.5% (and -39.5%, +145.6% before). So a change is called only where the two intervals
are apart **and** the ratio is beyond the drift this kind of measurement shows between minutes on a quiet machine
(`Units.drift`, measured by scripts/bench_false_changes.py); beside other programs (both loaded) no change is
called at all, since the drift there has no bound: the answer is to measure quiet, or to interleave the two.

Two configurations measured in turn (`compare --rerun`) are judged by their pairs instead (`paired_change`): the
ratio within each round cancels the minute's drift and the other programs that fall on both, so a change is called
where the paired ratio's interval, at CONFIDENCE, lies wholly beyond 1 +- PAIRED_FLOOR, beside other programs too,
unless the change does not survive crediting the slower with the CPU wait it had beyond the faster's (`paired`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.judge.evidence import BUSY_CORES
from iobench.judge.intervals import CONFIDENCE, Interval, interval_of, units_of
from iobench.judge.paired import contention_of, paired_runs, ratio_text
from iobench.judge.search import SHORT_EPOCH_S
from iobench.results.record import RunRecord

FASTER, SLOWER = "faster", "slower"
NO_DIFFERENCE = "no decidable difference"
NOT_COMPARABLE = "not comparable"
KINDS = (FASTER, SLOWER, NO_DIFFERENCE, NOT_COMPARABLE)


@dataclass(frozen=True)
class Units:
    """What a change is decided with, in words, and how far that measurement drifts between minutes on a quiet
    machine (a ratio within `drift` of 1 is not a change, whatever the intervals say)."""

    rate: str
    measured: str
    units: str
    alone: str
    drift: float
    again: str  # how to decide it instead: measured again in turn


# Drift between minutes, measured by scripts/bench_false_changes.py (docs/study/judgement/): the same run
# configuration (lmdb, 2e5 samples, 3 runs a record) at 20 s gaps on a quiet 2-core AMD EPYC guest drifted by up to
# 16.8% in one series and 27.3% in another (one slow minute: 86,528 samples/s among 101,983-110,134); a checkpoint's
# rounds ride the virtio disk's writeback and cold reads, which move +-30% between minutes (DESIGN.md).
RUN_DRIFT = 0.30
DISK_DRIFT = 0.30
RUN_UNITS = Units(
    "samples/s",
    "configuration",
    "runs",
    "one run has no interval (use --runs 3 or more)",
    RUN_DRIFT,
    "`compare --rerun` measures them again in turn",
)
ROUND_UNITS = Units(
    "GB/s",
    "measurement",
    "rounds",
    "one round has no interval (use --rounds 3 or more)",
    DISK_DRIFT,
    "one `checkpoint` session takes its libraries in turn",
)


@dataclass(frozen=True)
class Change:
    """B against A: `kind` (one of KINDS), B's median over A's (None where there is no ratio), why, and each side's
    interval."""

    kind: str
    ratio: float | None
    reason: str
    a: Interval
    b: Interval

    @property
    def decided(self) -> bool:
        return self.kind in (FASTER, SLOWER)

    @property
    def text(self) -> str:
        """The verdict as printed: the change where there is one; else the kind, why, and the ratio labelled as no
        verdict."""
        if self.decided:
            return f"{self.ratio - 1:+.1%}: {self.kind}"  # type: ignore[operator]
        shown = f" (B/A {self.ratio:.2f}x, not a verdict)" if self.ratio is not None else ""
        return f"{self.kind}: {self.reason}{shown}"


def change_of(
    units_a: list[float], units_b: list[float], load_a: float | None, load_b: float | None, words: Units
) -> Change:
    """B against A from each one's units (rates: higher is faster) and the cores other programs used beside each."""
    ia, ib = interval_of(units_a), interval_of(units_b)

    def verdict(kind: str, reason: str, ratio: float | None = None) -> Change:
        return Change(kind, ratio, reason, ia, ib)

    if ia.median <= 0 or ib.median <= 0:  # a measurement that delivered nothing: there is no ratio
        return verdict(NOT_COMPARABLE, f"{'A' if ia.median <= 0 else 'B'} is 0 {words.rate}")
    ratio = ib.median / ia.median
    loaded = [x for x in (load_a, load_b) if x is not None]
    if len(loaded) == 2 and max(loaded) > BUSY_CORES and abs(loaded[0] - loaded[1]) > BUSY_CORES:
        return verdict(NOT_COMPARABLE, f"other programs used {load_a:.1f} cores beside A, {load_b:.1f} beside B", ratio)
    if not ia.finite or not ib.finite:
        return verdict(NOT_COMPARABLE, words.alone, ratio)
    if len(loaded) == 2 and min(loaded) > BUSY_CORES:
        return verdict(
            NO_DIFFERENCE,
            f"both shared the machine ({load_a:.1f} and {load_b:.1f} cores busy beside "
            f"them), where {words.units} taken inside one minute do not bound the next minute's drift; "
            f"measure both on a quiet machine, or in turn: {words.again}",
            ratio,
        )
    if ia.overlaps(ib):
        return verdict(NO_DIFFERENCE, "their intervals overlap", ratio)
    if abs(math.log(ratio)) <= math.log1p(words.drift):
        return verdict(
            NO_DIFFERENCE,
            f"within the {words.drift:.0%} a {words.measured} drifts between minutes here, "
            f"which {words.units} taken inside one minute do not bound; to decide, {words.again}",
            ratio,
        )
    return verdict(FASTER if ratio > 1 else SLOWER, "their intervals apart, beyond the drift between minutes", ratio)


def compare_change(a: RunRecord, b: RunRecord) -> Change:
    """B's record against A's, by their runs (`units_of`)."""
    units_a, units_b = units_of(a), units_of(b)
    if a.timestamp and a.timestamp == b.timestamp and units_a == units_b:  # a file compared with itself
        same = interval_of(units_a)
        return Change(NO_DIFFERENCE, 1.0, "the very same runs (one record, read twice)", same, same)
    return change_of(units_a, units_b, a.host.busy, b.host.busy, RUN_UNITS)


PAIRS_NEEDED = 6  # the fewest rounds whose paired ratios bound their median at CONFIDENCE (96.9% with 6)
# How far apart two runs of one configuration stay when measured in turn: a record rerun against itself (npy, 1e6
# samples, batch 8192, 6 rounds; Intel Xeon 2 vCPU, quiet) gave paired medians 0.96-1.01, with all six rounds on one
# side in 2 of 3 trials (two loaders of one configuration differ by a percent or so, consistently): a paired interval
# within this of 1 is no change (scripts/bench_shared_machine.py --questions rerun)
PAIRED_FLOOR = 0.05
# Epochs that differ by less than this are not told apart, however tight their paired ratio: the floor's share of
# an epoch too short to rank by (judge.search.SHORT_EPOCH_S). A record against itself at 300 samples (epochs of
# 0.8 ms) was called 0.91x [0.79-0.95] "slower" over 6 rounds in CI (the long step).
EPOCH_NOISE_S = PAIRED_FLOOR * SHORT_EPOCH_S


def paired_change(a: RunRecord, b: RunRecord) -> Change:
    """B against A, two records measured in turn (the same session, round by round): by the ratio B/A within each
    round. No change where the paired interval spans 1, or where too few rounds bound it; not comparable where the
    change does not survive crediting the slower with the CPU wait it had beyond the faster's; where the two were not
    measured in turn, as `compare_change` decides."""
    paired = paired_runs(b, a)
    if paired is None:
        return compare_change(a, b)
    ia, ib = interval_of(units_of(a)), interval_of(units_of(b))
    said = f"B/A {ratio_text(paired)} paired over {paired.units} rounds in turn" if paired.finite else ""

    def verdict(kind: str, reason: str) -> Change:
        return Change(kind, paired.median, reason, ia, ib)

    if not paired.finite or paired.coverage < CONFIDENCE:
        return verdict(
            NO_DIFFERENCE,
            f"{paired.units} round(s) cannot bound the paired ratio at {CONFIDENCE:.0%} ({PAIRS_NEEDED} or more)",
        )
    if paired.low <= 1 <= paired.high:
        return verdict(NO_DIFFERENCE, f"the paired interval spans 1 ({said})")
    gap = abs(b.epochs.epoch_seconds_median - a.epochs.epoch_seconds_median)
    if gap < EPOCH_NOISE_S:
        return verdict(
            NO_DIFFERENCE,
            f"their epochs differ by {gap * 1000:.2f} ms, within this machine's timer and scheduling noise "
            f"({EPOCH_NOISE_S * 1000:.1f} ms; a larger dataset tells them apart) ({said})",
        )
    if paired.high < 1 / (1 + PAIRED_FLOOR) or paired.low > 1 + PAIRED_FLOOR:
        faster = paired.median > 1
        leader, behind = (("B", b), ("A", a)) if faster else (("A", a), ("B", b))
        lead = paired.low if faster else 1 / paired.high
        contention = contention_of(leader[1], [(behind[0], behind[1], lead)], leader[0], 1 + PAIRED_FLOOR)
        if contention.hit is not None:
            return verdict(NOT_COMPARABLE, f"other programs' {contention.uneven_text()} ({said})")
        return verdict(FASTER if faster else SLOWER, said)
    return verdict(
        NO_DIFFERENCE,
        f"within the {PAIRED_FLOOR:.0%} two runs of one configuration differ when measured in turn here ({said})",
    )
