"""Whether one feed answer changed against another, decided from the records' raw values: the same N is no
difference; a different N is a change only where a count between them was measured in both and its least rank's
utilisation moved as a run's samples/s must to be called a change (`iobench.judge.change`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.judge.change import NO_DIFFERENCE, NOT_COMPARABLE, RUN_DRIFT, Change, Units, change_of
from iobench.judge.feed import record_answer
from iobench.results.feed_record import FeedPoint, FeedRecord

MORE, FEWER = "more accelerators", "fewer accelerators"
# A starved rank's utilisation is its loader's rate over the step's (samples/s x step / batch): it drifts between
# minutes as the loader's samples/s does (RUN_DRIFT, scripts/bench_false_changes.py); a fed one sits at the step's
# share whatever the storage does. A change of N is called only where the count that tells them apart moved beyond it.
AU_UNITS = Units(
    "AU",
    "count's utilisation",
    "epochs",
    "one epoch has no interval (use --epochs 2 or more)",
    RUN_DRIFT,
    "ask both in one session (`--what-if` searches another step beside the workload's)",
)


@dataclass(frozen=True)
class FeedChange:
    """B's answer against A's: MORE, FEWER, NO_DIFFERENCE or NOT_COMPARABLE, why, and the count that decided it."""

    kind: str
    reason: str
    n_a: int
    n_b: int
    at: Change | None = None  # the least rank's utilisation at the deciding count, B against A

    @property
    def text(self) -> str:
        return f"{self.kind}: {self.reason}"


def feed_change(a: FeedRecord, b: FeedRecord) -> FeedChange:
    """B against A. The same workload, format, loader, cache and threshold, or not comparable. The same N is no
    difference; a different N is a change only where a count between them was measured in both, starved in one and
    fed in the other, and its least rank's utilisation over the epochs changed as a run's samples/s must to be called
    a change (`iobench.judge.change.change_of`: intervals apart, beyond the drift between minutes, the loads alike)."""
    n_a, n_b = record_answer(a).n, record_answer(b).n

    def verdict(kind: str, reason: str, at: Change | None = None) -> FeedChange:
        return FeedChange(kind, reason, n_a, n_b, at)

    if a.identity() != b.identity() or a.threshold != b.threshold:
        return verdict(NOT_COMPARABLE, "another workload, format, loader, cache, step or threshold")
    if a.rules != b.rules:
        return verdict(NOT_COMPARABLE, f"AU counted two ways (--rules {a.rules} and {b.rules})")
    if n_a == n_b:
        return verdict(NO_DIFFERENCE, f"both answer {n_a}")
    low, high = (a, b) if n_a < n_b else (b, a)
    n_low = min(n_a, n_b)
    if n_low >= low.most:
        side = "A" if low is a else "B"
        return verdict(NOT_COMPARABLE, f"{side} could start no more than {low.most} ({low.why_most})")
    at = _deciding(a, b, range(n_low + 1, max(n_a, n_b) + 1))
    if at is None:
        return verdict(NO_DIFFERENCE, f"{n_a} and {n_b}, but no count between them was measured in both")
    n, change = at
    if not change.decided:  # not comparable at that count (the loads) is not comparable at all
        kind = NOT_COMPARABLE if change.kind == NOT_COMPARABLE else NO_DIFFERENCE
        return verdict(kind, f"{n_a} and {n_b}; at {n} the least rank's AU: {change.text}", change)
    more = n_b > n_a
    return verdict(
        MORE if more else FEWER,
        f"{n_a} -> {n_b}; at {n} the least rank's AU {change.a.median:.3f} -> {change.b.median:.3f} ({change.text})",
        change,
    )


def _deciding(a: FeedRecord, b: FeedRecord, counts: range) -> tuple[int, Change] | None:
    """Of the counts between the two answers measured in both, the one whose utilisation moved the most (decided
    first), with its change."""
    pa, pb = a.point_map(), b.point_map()
    found = []
    for n in counts:
        if n in pa and n in pb:
            change = change_of(_epochs(pa[n]), _epochs(pb[n]), pa[n].others_cores, pb[n].others_cores, AU_UNITS)
            found.append((n, change))
    if not found:
        return None
    return max(found, key=lambda nc: (nc[1].decided, abs(math.log(nc[1].ratio or 1.0))))


def _epochs(point: FeedPoint) -> list[float]:
    """Each measured epoch's least rank utilisation: what feeding every rank asks of an epoch."""
    return [min(epoch) for epoch in zip(*point.rank_au, strict=False)]
