"""What `tune` may say of its leader against its nearest rival: how many more epochs would tell them apart, or that
no budget would (their gap within this machine's noise). Each is named by what sets it apart: "hdf5/dataloader and
hdf5/dataloader are 0.4% apart" named two candidates by what they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from iobench.judge.intervals import Interval, interval_of
from iobench.judge.paired import credited_lead

# epochs needed over epochs had beyond which no budget is worth spending: the gap is within the noise
HOPELESS_FACTOR = 100


@dataclass(frozen=True)
class Contender:
    """A candidate as the judgement sees it: its name (format/loader and settings), its epochs' interval and rates,
    and how long one of its epochs takes."""

    name: str
    interval: Interval
    epochs: int
    epoch_seconds: float


def settled(leader: Interval, rival: Interval, tight: float) -> bool:
    """The search may stop: the leader's interval is tight (its width under 2 x `tight` of its median) and apart from
    the runner-up's."""
    return leader.high - leader.low < 2 * tight * leader.median and leader.apart(rival)


def settled_in_pairs(
    leader: Sequence[float], rival: Sequence[float], tight: float, shares: tuple[float | None, float | None]
) -> bool:
    """The search may stop on paired evidence: each epoch of the leader over the rival's epoch of the same round
    (taken in turn, minutes apart at most: a drift of the disk or of other programs falls on both) has a tight interval
    (`settled`'s) whose low end stays above 1 once the rival is credited with its wait for a CPU beyond the leader's
    (`shares`: the leader's and the rival's, None where not recorded; `credited_lead`). The two ran the same rounds
    (the search only drops candidates), so their epochs pair in order."""
    ratios = [a / b for a, b in zip(leader, rival, strict=False) if b > 0]
    if len(ratios) < 2:
        return False
    paired = interval_of(ratios)
    if not paired.finite or paired.high - paired.low >= 2 * tight * paired.median:
        return False
    low = paired.low
    if shares[0] is not None and shares[1] is not None:
        low = credited_lead(low, shares[0], shares[1])
    return low > 1


def near(best: Interval, other: Interval) -> bool:
    """`other` cannot be told from the best: it has an interval and that interval reaches the best's."""
    return other.finite and other.high >= best.low


def differing(a: str, b: str) -> tuple[str, str]:
    """Two names with what they share left out (`hdf5/dataloader bs=1024 w=2` against `... w=0`: `w=2`, `w=0`); the
    shared start kept where nothing else tells them apart."""
    ta, tb = a.split(), b.split()
    only_a = [t for t in ta if t not in tb]
    only_b = [t for t in tb if t not in ta]
    if not only_a and not only_b:
        return a, b
    head = ta[0] if ta and tb and ta[0] == tb[0] else ""
    return " ".join([head, *only_a]).strip() or a, " ".join([head, *only_b]).strip() or b


def deciding_budget(best: Contender, rival: Contender) -> str:
    """What would tell the best from its rival: an interval of the median narrows about as 1/sqrt(epochs), so the
    epochs each needs for the two to separate, and at this pace the minutes that costs; a gap within the machine's
    noise no budget closes, said so."""
    mine, theirs = differing(best.name, rival.name)
    gap = best.interval.median - rival.interval.median
    widths = (best.interval.median - best.interval.low) + (rival.interval.high - rival.interval.median)
    if gap <= 0 or widths <= 0:
        return f"not decidable here: {mine} and {theirs} have the same median within the timer's resolution"
    factor = (widths / gap) ** 2  # epochs needed over epochs had, for the half-widths to fit in the gap
    if factor > HOPELESS_FACTOR:
        return (
            f"not decided: {mine} and {theirs} are {gap / rival.interval.median:.1%} apart, within this "
            "machine's noise; any budget would leave them unsettled"
        )
    epochs = max(best.epochs, rival.epochs)
    more = max(1, round(epochs * factor) - epochs)
    minutes = more * max(best.epoch_seconds, rival.epoch_seconds) * 2 / 60  # both candidates, each epoch
    return (
        f"to decide between {mine} and {theirs}: about {more} more epochs each ({minutes:.1f} more "
        "--budget-minutes at this pace)"
    )


# Why a search ended: tune sets one, and what it says of the leader is decided here
STOP_APART = "confidence intervals apart"
STOP_BUDGET = "time budget"
STOP_ONE_LEFT = "one candidate left"
# An epoch shorter than this is within the timer's and the scheduler's noise on a shared machine: a ranking of
# such epochs (20,000 rows: 3 ms epochs ranging 1.3M-7.7M samples/s) is said not to be decidable.
SHORT_EPOCH_S = 0.05


def stopped_words(stopped: str, near: bool) -> str:
    """Why the search ended, in the words of whether the leader is apart from the next (`near`: some candidate is
    within noise of it)."""
    if stopped == STOP_APART:
        return "the search stopped once its interval was tight and apart from the next's"
    if stopped == STOP_BUDGET:
        return "the search stopped at its time budget, its interval " + (
            "still overlapping the next's" if near else "apart from the others'"
        )
    return f"the search stopped: {stopped}"


def too_short(epoch_seconds: float) -> str | None:
    """Where the leader's epochs are too short to rank settings by, the words that say so; None otherwise."""
    if epoch_seconds >= SHORT_EPOCH_S:
        return None
    return (
        f"not decidable: its epochs last {epoch_seconds * 1000:.0f} ms, within this machine's timer and scheduling "
        "noise; a larger dataset (more samples per epoch) ranks these settings"
    )


def faster_elsewhere(best: Contender, fastest: Contender) -> str | None:
    """How a candidate below the shuffle floor with a larger median than the recommended one is said: "fastest at any
    shuffle" only where its interval is apart from the best's (a bare larger median was said so before); else
    measured faster, not told apart; None where its median is not larger."""
    if fastest.interval.median <= best.interval.median:
        return None
    if fastest.interval.apart(best.interval):
        return "fastest at any shuffle"
    return "measured faster at any shuffle, not told apart from the best"


def by_median(candidates: Sequence[Any]) -> list[Any]:
    """Candidates fastest first by their epochs' median: the order whose first half successive halving keeps (the
    leader against the next is decided by `settled` and `settled_in_pairs`, not by this order)."""
    return sorted(candidates, key=lambda c: c.median, reverse=True)


def ranking(candidates: Sequence[Any], floor: float) -> list[Any]:
    """tune's ranking of the candidates measured: those that shuffle to `floor` first, then those with an interval (two
    epochs or more: a single epoch's figure cannot be confirmed, and a winner of one epoch left a search with no script
    to paste), each group fastest first by median."""
    return sorted((c for c in candidates if c.rates), key=lambda c: (not c.meets(floor), len(c.rates) < 2, -c.median))


def fastest_measured(ranked: Sequence[Any]) -> Any:
    """The candidate with the highest median among those measured, whatever it shuffles: named beside the
    recommendation where `faster_elsewhere` says it is faster."""
    return max((c for c in ranked if c.rates), key=lambda c: c.median)


def best_by_loading(ranked: Sequence[Any], floor: float) -> dict[str, float]:
    """The best median of each way of loading (`Candidate.loading`: processes first, then threads, fewest first)
    among the candidates that shuffle to `floor`."""
    found: dict[str, float] = {}
    eligible = [c for c in ranked if c.meets(floor)]
    for c in sorted(eligible, key=lambda c: (c.threads, c.config.settings.num_workers)):
        found[c.loading] = max(found.get(c.loading, 0.0), c.median)
    return found
