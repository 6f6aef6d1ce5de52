"""Configurations measured in turn, judged in pairs, and what their runs waited for.

Runs of two configurations taken in the same round (minutes apart at most) share that minute's disk and the other
programs beside them: the ratio of their figures within a round cancels a drift that falls on both, where each one's
own interval spans it (one configuration drifted 27% between records 20-60 s apart, quiet). The ratios' median gets
the one interval (`interval_of`): where it lies wholly above 1, the leader is decided even if each configuration's
interval is wide.

Beside other programs a paired ranking holds only if the contention fell alike: each run's processes record the time
they were runnable but waited for a CPU (`iobench.system.waits`), and a configuration's wait share is that over its
runnable time. One rival process cut tensorclass at torch's default threads 72x while numpy's single-threaded paths
moved 0.70-1.02x: where the configurations' wait shares spread more than WAIT_MARGIN, the one it fell on most is named
and no ranking is given."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.intervals import Interval, interval_of, units_of
from iobench.results.record import RunRecord
from iobench.results.record_base import RecordBase, Waits
from iobench.system.waits import share_of

WAIT_MARGIN = 0.10  # wait shares within this of each other (10 points): contention fell alike on them


def wait_share(waits: Waits) -> float | None:
    """The share of its processes' runnable time spent waiting for a CPU, over every unit; None where not recorded."""
    return share_of(sum(waits.unit_cpu_s), sum(waits.unit_cpu_wait_s))


def ratio_text(paired: Interval) -> str:
    """A paired ratio as every answer says it: `1.41x [1.32-1.50]`."""
    return f"{paired.median:.2f}x [{paired.low:.2f}-{paired.high:.2f}]"


def ahead(paired: Interval | None) -> bool:
    """The paired ratio's interval lies wholly above 1: the leader is ahead in the rounds' pairs."""
    return paired is not None and paired.finite and paired.low > 1


def in_turn(a: RecordBase, b: RecordBase) -> bool:
    """Measured in turn together: the same session, each with its place in the rounds."""
    wa, wb = a.waits, b.waits
    return (
        bool(wa.turn_session) and wa.turn_session == wb.turn_session and bool(wa.turn_positions and wb.turn_positions)
    )


def paired_ratio(a: RecordBase, b: RecordBase, units_a: list[float], units_b: list[float]) -> Interval | None:
    """The median ratio a/b of units taken in the same round, with its interval; None where the two were not
    measured in turn or share no round."""
    if not in_turn(a, b):
        return None
    n = min(len(units_a), len(units_b), len(a.waits.turn_positions), len(b.waits.turn_positions))
    ratios = [units_a[k] / units_b[k] for k in range(n) if units_b[k] > 0]
    return interval_of(ratios) if ratios else None


def paired_runs(a: RunRecord, b: RunRecord) -> Interval | None:
    """Two run records' paired ratio of samples/s (a over b), round by round."""
    return paired_ratio(a, b, units_of(a), units_of(b))


@dataclass(frozen=True)
class Contention:
    """How other programs' contention fell on the configurations ranked: each one's wait share, and the one it fell on
    most where their shares spread more than WAIT_MARGIN (a quiet ranking may differ: its figure may move more)."""

    leader_share: float | None
    hit: str | None = None  # the configuration contention fell on most, named, where it fell unevenly
    hit_share: float | None = None
    low: float | None = None  # the least and most wait share among them
    high: float | None = None
    recorded: bool = True  # every one's waits were recorded

    @property
    def even(self) -> bool:
        return self.hit is None and self.leader_share is not None

    def shares_text(self) -> str:
        if self.low is None or self.high is None:
            return "what they waited for not recorded"
        if self.high - self.low < 0.01:
            return f"each waited for a CPU {self.high:.0%} of its time"
        return f"each waited for a CPU {self.low:.0%}-{self.high:.0%} of its time"


def contention_among(leader: tuple[str, float | None], others: list[tuple[str, float | None]]) -> Contention:
    """Whether contention fell alike on the leader and those it leads, each (name, wait share): every share within
    WAIT_MARGIN of every other. On the lent 16-core machine beside 16 busy loops the quiet leader lost 5x with a wait
    share under the new leader's: a like share is what lets a paired ranking stand, whichever way it spreads."""
    shares = [leader, *others]
    known = [s for _, s in shares if s is not None]
    low, high = (min(known), max(known)) if known else (None, None)
    if leader[1] is None or len(known) < len(shares):
        return Contention(leader[1], low=low, high=high, recorded=False)
    if high - low > WAIT_MARGIN:  # type: ignore[operator]
        worst = max(shares, key=lambda x: x[1] or 0.0)
        return Contention(leader[1], worst[0], worst[1], low, high)
    return Contention(leader[1], low=low, high=high)


def contention_of(leader: RecordBase, others: list[tuple[str, RecordBase]], leader_name: str = "") -> Contention:
    """`contention_among` of records (name, record), by their waits."""
    return contention_among((leader_name, wait_share(leader.waits)), [(n, wait_share(r.waits)) for n, r in others])
