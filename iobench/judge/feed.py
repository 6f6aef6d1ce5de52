"""Whether N emulated accelerators were fed, and what the `feed` answer says, decided here from the records' raw
values: every rank's utilisation (its step's time over its epoch's) in every measured epoch against the workload's
threshold. Fed: every rank at or above it in every epoch; starved: some rank below it in every epoch; undecided: a
rank whose epochs fall on both sides (counted as not fed: N is the largest count seen fed). What bound the first
count not fed: the storage where the ranks together read at 80% or more of the limit of their access pattern, the
CPU where the cores were 85% busy with the ranks' own work (other programs' CPU named as theirs, never the storage's or
the ranks'), else the loader's hand-over (batches waited for with storage and cores to spare). Other programs beside a
count are named in the answer; beside them a count starved as measured that their share of its waits for a CPU,
given back (`loop_credited`), would carry over the threshold is undecided, never fed, and the answer says both
figures."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from iobench.judge.bounds import feed_bound, waited_words
from iobench.judge.evidence import busy
from iobench.results.feed_record import RULES, FeedPoint, FeedRecord

FED, STARVED, UNDECIDED = "fed", "starved", "undecided"
# How AU is counted: feed's (whole epochs, every rank in every epoch: the training job's) or DLIO's (each epoch's first
# step left out, ranks and epochs averaged: MLPerf Storage's number). On a small dataset an epoch's start weighs: with
# 28 unet3d samples DLIO said 98% and feed 0.77-0.79.
FEED_RULES, DLIO_RULES = RULES  # the record's names, kept there once
RULES_WORDS = {
    FEED_RULES: "whole epochs, every rank in every epoch (the training job's)",
    DLIO_RULES: "as DLIO counts it: each epoch's first step out, ranks and epochs averaged (MLPerf Storage's)",
}
START_SHARE = 0.03  # of an epoch, a first batch worth naming: a larger dataset would amortise it
# How far a count's AU moves when the same question is asked again minutes later, quiet (Intel Xeon 2 vCPU, the same
# count: 0.896-0.904 over three askings at a 20 ms step, 0.942-0.947, 0.923-0.933 and 0.917-0.926 over two at 40 ms,
# docs/study/shared-machine/): an answer whose deciding count lies within twice that of the threshold says it is at
# the edge (the same question had answered 2 and then 1 five minutes apart).
EDGE_AU = 0.02


def dlio_au(point: FeedPoint) -> float | None:
    """The count's AU as DLIO counts it: every rank's and epoch's utilisation after its first step, averaged; None in
    answers made before it was recorded."""
    values = [x for r in point.rank_au_after_first for x in r]
    return sum(values) / len(values) if values else None


def au_of(point: FeedPoint, rules: str = FEED_RULES) -> float | None:
    """The count's AU by `rules`: feed's least rank's median, or DLIO's average."""
    return dlio_au(point) if rules == DLIO_RULES else point.au


def judged_au(point: FeedPoint, rules: str = FEED_RULES) -> float | None:
    """The AU a count's verdict is decided from (`judged_rows`): feed's least rank's median, or DLIO's average."""
    rows = judged_rows(point, rules)
    if not rows:
        return None
    return statistics.fmean(x for r in rows for x in r) if rules == DLIO_RULES else min(map(statistics.median, rows))


def judged_rows(point: FeedPoint, rules: str = FEED_RULES) -> tuple[tuple[float, ...], ...]:
    """Each rank's utilisation per epoch as it could be: as measured, or beside other programs with the others' share
    of its step loop's waits for a CPU given back (`loop_credited`): what decides a starved count undecided."""
    credited = loop_credited(point, rules)
    return credited if credited is not None else _rows(point, rules)


def feed_verdict(point: FeedPoint, threshold: float, rules: str = FEED_RULES) -> str:
    """Fed, starved or undecided as measured; beside other programs, a count starved as measured that reaches the
    threshold once their share of its waits for a CPU is given back (`judged_rows`, or every wait: `credited_au`) is
    undecided, never fed. Given back as fed, beside two busy loops on 2 cores (Intel Xeon, 40 ms step) counts of 3 and
    4 were called fed where the quiet runs alternating with them starved at one (AU 0.883-0.910, credited 0.909-0.917
    at one: the loops' waits overlapped the loop's own; docs/study/shared-machine/feed-2-loops)."""
    measured = _verdict_of(_rows(point, rules), threshold, rules)
    if measured != STARVED:
        return measured
    if _verdict_of(judged_rows(point, rules), threshold, rules) != STARVED:
        return UNDECIDED
    upper = credited_au(point, rules)
    return UNDECIDED if upper is not None and upper >= threshold else STARVED


def _rows(point: FeedPoint, rules: str) -> tuple[tuple[float, ...], ...]:
    """Each rank's utilisation per epoch as `rules` count it."""
    return point.rank_au_after_first if rules == DLIO_RULES else point.rank_au


def _verdict_of(rows: tuple[tuple[float, ...], ...], threshold: float, rules: str) -> str:
    """Feed's rule: every rank in every epoch; DLIO's: the average (undecided where it was not recorded)."""
    if rules == DLIO_RULES:
        values = [x for r in rows for x in r]
        return UNDECIDED if not values else FED if statistics.fmean(values) >= threshold else STARVED
    if rows and all(min(r) >= threshold for r in rows):
        return FED
    if not rows or any(max(r) < threshold for r in rows):
        return STARVED
    return UNDECIDED


def others_share(point: FeedPoint) -> float | None:
    """Beside other programs, the share of a step loop's wait for a CPU that was theirs. A woken thread waits when
    every one of the C cores is busy; with the cores held as the CPU time was used (the count's own U cores' worth,
    the others' O), that is about ((U + O) / C)^C beside them and (U / C)^C quiet, so (U / (U + O))^C of the wait was
    the count's own. Re-judged against the quiet answers of the same trials (Intel Xeon 2 vCPU, one busy loop, 40 ms
    step), the loops' waits given back so put each count's AU within 0.02 of its quiet figure at 1-6 accelerators
    (N=1: 0.953-0.956 against 0.943-0.949 quiet); the others' share of the CPU time alone (O / (U + O)) left counts
    of 4-5 0.02-0.03 under. None quiet, or where the count's own CPU or the cores were not recorded."""
    others, own, cores = point.others_cores, point.own_cores, point.cores
    if not busy(others) or own is None or others is None or not cores or others + own <= 0:
        return None
    return 1 - (own / (own + others)) ** cores


def loop_credited(point: FeedPoint, rules: str = FEED_RULES) -> tuple[tuple[float, ...], ...] | None:
    """Beside other programs, each rank's utilisation per epoch with the others' share of the waits for a CPU on its
    critical path given back (`critical_wait`): a wait of the step loop's own lengthened the epoch by that much.
    Beside one busy loop (Intel Xeon 2 vCPU, 40 ms step) a rank measured 0.899, its loop waited 6.9% of the epoch (1%
    quiet), and quiet it kept 0.943-0.949; given back 95% of the wait (the others' share, `others_share`), 0.956. None
    quiet, or where the loops' waits were not recorded. By DLIO's rules the rows are those after each epoch's first
    step."""
    share, waits, rows = others_share(point), point.rank_loop_wait, _rows(point, rules)
    if share is None or not waits or not rows:
        return None
    workers, cpu = point.rank_worker_wait, point.rank_loop_cpu
    if not workers or not cpu:  # not recorded: the loop's own wait alone
        workers = cpu = tuple((0.0,) * len(r) for r in waits)
    return tuple(
        tuple(
            min(1.0, au / (1 - min(0.99, share * critical_wait(au, w, v, c))))
            for au, w, v, c in zip(r, wr, vr, cr, strict=False)
        )
        for r, wr, vr, cr in zip(rows, waits, workers, cpu, strict=False)
    )


def critical_wait(au: float, loop: float, worker: float, loop_cpu: float) -> float:
    """Of an epoch, the waits for a CPU on its critical path: the step loop's own, and its mean loader worker's up to
    the time the loop was blocked for data (neither stepping, nor on a CPU, nor waiting for one: feed's step is a
    sleep). A worker's wait delays its batch, but the loop waited for it no longer than it was blocked: the prefetched
    batches hide the rest. Beside one busy loop at 1-6 accelerators (Intel Xeon 2 vCPU, 40 ms step) the workers
    waited 5-32% of an epoch (3-14% quiet) and the loops ran 3-6% of it; given back up to all the time the loop did
    not step the counts came out 0.03-0.05 over their quiet AU, given back so 0.01 or less at 1 and 4 (N=4:
    0.934-0.935 against 0.933-0.940 quiet; docs/study/shared-machine/feed-worker-credit-2)."""
    return loop + min(worker, max(0.0, 1 - au - loop - loop_cpu))


def credited_au(point: FeedPoint, rules: str = FEED_RULES) -> float | None:
    """Beside other programs, the count's AU with the time its processes waited for a CPU given back to each rank's
    epoch (the tree's waits, spread over its ranks): an upper bound of what it would keep quiet. Beside one busy loop
    a rank that used a third of a core kept AU 0.884-0.891 against 0.942-0.947 quiet, its step loop waking to a CPU
    the loop held (docs/study/shared-machine/). None quiet, or where the waits were not recorded."""
    share, own, au = point.cpu_wait_share, point.own_cores, au_of(point, rules)
    if not busy(point.others_cores) or share is None or own is None or au is None or share >= 1:
        return None
    waited = min(0.99, own * share / (1 - share) / point.n)  # of each rank's time
    return min(1.0, au / (1 - waited))


@dataclass(frozen=True)
class FeedAnswer:
    n: int  # the largest count fed (0: not even one)
    line: str


def feed_answer(
    points: dict[int, FeedPoint],
    threshold: float,
    accelerator: str,
    demand_mb_per_s: float,
    most: int,
    why_most: str,
    rules: str = FEED_RULES,
) -> FeedAnswer:
    """The answer from the counts measured, by `rules`: N, its AU and the next count's (or why it was not started),
    what one accelerator needs against what it got, and the bound; a fraction of one where one was not fed; and where
    the other way of counting AU gives another N, that N and why."""
    n = fed_count(points, threshold, rules)
    other = _other_rules(points, threshold, rules, n)
    if n == 0:
        one = points[1]
        got, au = one.mb_per_s, au_of(one, rules) or 0.0
        return FeedAnswer(
            0,
            f"answer: {au:.2f} of one {accelerator} (AU {au:.3f}{_credit_said(one, rules)} under {threshold:.2f}"
            f"{_counted(rules)}): it needs "
            f"{demand_mb_per_s:,.0f} MB/s and got {got:,.0f}; bound by {feed_bound(one)}"
            + _start(one)
            + _undecided(one, threshold, rules)
            + edge_of(points, threshold, rules)
            + _beside(points, feed_bound(one))
            + other,
        )
    at = points[n]
    least = "least " if rules == FEED_RULES else ""
    head = (
        f"answer: {n} {accelerator} accelerator(s) fed ({_rule_said(rules)} {threshold:.2f}{_counted(rules)}: "
        f"{least}{au_of(at, rules) or 0.0:.3f}{_credit_said(at, rules)}); each needs "
        f"{demand_mb_per_s * threshold:,.0f} MB/s at AU {threshold:.2f} "
        f"({demand_mb_per_s:,.0f} at 1.0) and got {at.mb_per_s / n:,.0f}"
    )
    after = points.get(n + 1)
    if after is None:
        said = f"{head}; {n + 1} not measured: {why_most}" if n >= most else head
        return FeedAnswer(n, said + _start(at) + edge_of(points, threshold, rules) + _beside(points) + other)
    return FeedAnswer(
        n,
        f"{head}; at {n + 1}: AU {au_of(after, rules) or 0.0:.3f}{_credit_said(after, rules)} "
        f"({feed_verdict(after, threshold, rules)}), bound by "
        f"{feed_bound(after)}"
        + _start(after)
        + _undecided(after, threshold, rules)
        + edge_of(points, threshold, rules)
        + _beside(points, feed_bound(after))
        + other,
    )


def edge_of(points: dict[int, FeedPoint], threshold: float, rules: str = FEED_RULES) -> str:
    """Where the answer's N or N+1 lies within EDGE_AU of the threshold: said, with both AUs ("" where neither does):
    asked again, the answer may move by one."""
    n = fed_count(points, threshold, rules)
    near = [
        (k, au)
        for k in (n, n + 1)
        if k in points and (au := au_of(points[k], rules)) is not None and abs(au - threshold) < EDGE_AU
    ]
    if not near:
        return ""
    said = ", ".join(f"{k} at AU {au:.3f}" for k, au in near)
    moves = " or ".join(str(k - 1 if k == n else k) for k, _ in near)
    return (
        f"; at the edge: {said}, within {EDGE_AU:.2f} of {threshold:.2f} (a count's AU moves by up to 0.01 between "
        f"minutes here): asked again, the answer may be {moves}"
    )


def fed_count(points: dict[int, FeedPoint], threshold: float, rules: str) -> int:
    """N: the largest count fed by `rules` (0 where not even one)."""
    return max((n for n, p in points.items() if feed_verdict(p, threshold, rules) == FED), default=0)


def _rule_said(rules: str) -> str:
    return "every rank's AU at or above" if rules == FEED_RULES else "the AU at or above"


def _counted(rules: str) -> str:
    return "" if rules == FEED_RULES else ", counted as DLIO counts it"


def _other_rules(points: dict[int, FeedPoint], threshold: float, rules: str, n: int) -> str:
    """Where AU counted the other way gives another N: that N, and why they differ (an epoch's start)."""
    other = DLIO_RULES if rules == FEED_RULES else FEED_RULES
    if any(au_of(p, other) is None for p in points.values()):
        return ""
    m = fed_count(points, threshold, other)
    if m == n:
        return ""
    start = max(p.first_batch_share for p in points.values())
    return (
        f"; counted {RULES_WORDS[other]}, {m} (`--rules {other}`): an epoch's first batch took up to {start:.0%} of "
        "it here, which one counts and the other leaves out"
    )


def _credit_said(point: FeedPoint, rules: str) -> str:
    """Beside the measured AU, where other programs' share of the loops' waits was given back: what it came to (it
    decides undecided, never fed), the loops' longest wait and the others' share."""
    measured, credited = au_of(point, rules), judged_au(point, rules)
    if measured is None or credited is None or loop_credited(point, rules) is None or credited == measured:
        return ""
    worst = max(x for r in point.rank_loop_wait for x in r)
    workers = max((x for r in point.rank_worker_wait for x in r), default=0.0)
    theirs = f", a loader worker up to {workers:.1%}" if workers > 0 else ""
    return (
        f" as measured; {credited:.3f} with other programs' share of its step loops' waits for a CPU given back (a "
        f"loop waited up to {worst:.1%} of an epoch{theirs}, {others_share(point):.0%} of it theirs: they used "
        f"{point.others_cores:.1f} cores beside the ranks' {point.own_cores:.1f} on {point.cores})"
    )


def _beside(points: dict[int, FeedPoint], said: str = "") -> str:
    """Where other programs used the cores beside a count: the most of them, said with the answer (unless its bound
    already names them)."""
    seen = [p for p in points.values() if busy(p.others_cores)]
    if not seen or "other programs' CPU" in said:
        return ""
    worst = max(seen, key=lambda p: p.others_cores or 0.0)
    return (
        f"; beside other programs using up to {worst.others_cores:.1f} cores (at {worst.n}{waited_words(worst)}): "
        "a quiet machine may feed more"
    )


def _start(point: FeedPoint) -> str:
    if point.first_batch_share < START_SHARE:
        return ""
    return (
        f"; an epoch's first batch took {point.first_batch_share:.0%} of it (its first reads; a dataset of the "
        "workload's full size would amortise them)"
    )


def _undecided(point: FeedPoint, threshold: float, rules: str = FEED_RULES) -> str:
    if feed_verdict(point, threshold, rules) != UNDECIDED:
        return ""
    if _verdict_of(_rows(point, rules), threshold, rules) == STARVED:
        reach = max(x for x in (judged_au(point, rules), credited_au(point, rules)) if x is not None)
        waited = (
            f" and its processes waited for a CPU {point.cpu_wait_share:.0%} of their runnable time"
            if (point.cpu_wait_share is not None)
            else ""
        )
        return (
            f" (undecided beside other programs: they used {point.others_cores:.1f} cores{waited}; given that "
            f"time back its AU could reach {reach:.3f}: measure with the machine quiet)"
        )
    if rules != FEED_RULES:
        return ""
    return f" (undecided: a rank's epochs fell on both sides of {threshold:.2f}; more --epochs would tell)"


def record_answer(record: FeedRecord) -> FeedAnswer:
    """The answer of a stored record, decided again from its raw values."""
    return feed_answer(
        record.point_map(),
        record.threshold,
        record.accelerator,
        record.demand_mb_per_s,
        record.most,
        record.why_most,
        record.rules,
    )


def what_if_line(base: FeedRecord, other: FeedRecord) -> str:
    """The answer searched again with another step (a faster accelerator), beside the workload's own."""
    ratio = base.compute_s / other.compute_s
    speed = f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"
    was = record_answer(base).n
    now = record_answer(other)
    return (
        f"what if a batch's compute took {other.compute_s * 1000:g} ms ({speed} than {base.compute_s * 1000:g}): "
        f"{now.line.removeprefix('answer: ')} (measured; {was} at the workload's step)"
    )
