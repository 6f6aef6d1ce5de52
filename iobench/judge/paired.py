"""Configurations measured in turn, judged in pairs, and what their runs waited for.

Runs of two configurations taken in the same round (minutes apart at most) share that minute's disk and the other
programs beside them: the ratio of their figures within a round cancels a drift that falls on both, where each one's
own interval spans it (one configuration drifted 27% between records 20-60 s apart, quiet). The ratios' median gets
the one interval (`interval_of`): where it lies wholly above 1, the leader is decided even if each configuration's
interval is wide.

Beside other programs a paired lead holds only where it survives the contention: each run's processes record the
time they were runnable but waited for a CPU (`iobench.system.waits`), and a configuration's wait share is that over
its runnable time; quiet, it would have run at most 1 / (1 - share) of its busy figure (its waits taken away, none of
its own work). A lead holds where the leader's paired interval over each configuration it beat stays above the bar
with that configuration credited with the wait it had beyond the leader's (`credited_lead`); the leader is never
credited with its own, so the credit can undo a ranking but never make one. One rival process cut tensorclass at
torch's default threads 72x while numpy's single-threaded paths moved 0.70-1.02x: contention does not fall evenly.
Before this rule, a configuration's shares spread more than 10 points apart refused the answer outright: 3 of 12
trials of `run` beside two busy loops on 2 cores (shares 31-48%) said none where the credited leads were 1.16x-1.65x
(docs/study/shared-machine/)"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.intervals import Interval, interval_of, units_of
from iobench.results.record import RunRecord
from iobench.results.record_base import RecordBase, Waits
from iobench.system.waits import share_of


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


def lead_of(paired: Interval | None) -> float | None:
    """A paired interval's low end, the lead `contention_among` credits; None where the two were not in turn."""
    return None if paired is None else paired.low


def credited_lead(low: float, leader_share: float, share: float) -> float:
    """The leader's paired lead over a configuration (its interval's low end) with that configuration credited with
    the share of its time it waited for a CPU beyond the leader's: quiet, it would have run at most
    (1 - leader_share) / (1 - share) times closer."""
    if share >= 1:
        return 0.0
    return low * min(1.0, (1 - share) / (1 - leader_share)) if leader_share < 1 else low


@dataclass(frozen=True)
class Contention:
    """How other programs' contention fell on the configurations ranked: each one's wait share, and the one whose
    credited lead (`credited_lead`) fell to the bar or under, where one did (a quiet ranking may differ)."""

    leader_share: float | None
    hit: str | None = None  # the configuration the lead does not survive, named
    hit_share: float | None = None
    credited: float | None = None  # the leader's lead over `hit` once credited
    low: float | None = None  # the least and most wait share among them
    high: float | None = None
    recorded: bool = True  # every one's waits were recorded
    unpaired: str | None = None  # one the leader was not measured in turn with: no lead to credit

    def shares_text(self) -> str:
        if self.low is None or self.high is None:
            return "what they waited for not recorded"
        if self.high - self.low < 0.01:
            return f"each waited for a CPU {self.high:.0%} of its time"
        return f"each waited for a CPU {self.low:.0%}-{self.high:.0%} of its time"

    def uneven_text(self) -> str:
        """Why the lead does not survive, in words every command shares."""
        return (
            f"contention fell unevenly: {self.hit} waited for a CPU {self.hit_share:.0%} of its time, the leader "
            f"{self.leader_share:.0%}; credited with the difference, the lead over it is {self.credited:.2f}x"
        )


def contention_among(
    leader: tuple[str, float | None], others: list[tuple[str, float | None, float | None]], bar: float = 1.0
) -> Contention:
    """Whether the leader's lead survives the contention: `leader` (name, wait share) and those it leads, each
    (name, wait share, the low end of the leader's paired interval over it: None where not measured in turn); `bar`
    the credited lead must pass."""
    known = [s for s in (leader[1], *(o[1] for o in others)) if s is not None]
    low, high = (min(known), max(known)) if known else (None, None)
    unpaired = next((name for name, _, lead in others if lead is None), None)
    if unpaired is not None:
        return Contention(leader[1], low=low, high=high, unpaired=unpaired)
    if leader[1] is None or len(known) < len(others) + 1:
        return Contention(leader[1], low=low, high=high, recorded=False)
    leads = [(credited_lead(lead, leader[1], share), name, share) for name, share, lead in others]  # type: ignore[arg-type]
    falls = [x for x in leads if x[0] <= bar]
    if falls:
        credited, name, share = min(falls)
        return Contention(leader[1], name, share, credited, low, high)
    return Contention(leader[1], low=low, high=high)


def record_share(r: RecordBase) -> float | None:
    """A record's wait share, None where its waits are not whole: a run with DataLoader workers recorded before a
    worker reported its totals as it exited (`Waits.exits_reported`) missed most of its workers' time."""
    if isinstance(r, RunRecord) and r.config.settings.num_workers and not r.waits.exits_reported:
        return None
    return wait_share(r.waits)


def contention_of(
    leader: RecordBase, others: list[tuple[str, RecordBase, float | None]], leader_name: str = "", bar: float = 1.0
) -> Contention:
    """`contention_among` of records: (name, record, the low end of the leader's paired interval over it)."""
    return contention_among(
        (leader_name, record_share(leader)), [(n, record_share(r), lead) for n, r, lead in others], bar
    )
