"""A table row's standing against the fastest: its time over the fastest's, and the judgement's mark where the two
cannot be told apart (`≈`, with why). "tied" beside 35x (intervals that overlapped only because under load they were
enormous) said nothing a reader could check: the mark now says which."""

from __future__ import annotations

from collections.abc import Sequence

from iobench.judge.evidence import records_load
from iobench.judge.intervals import record_interval
from iobench.results.record import RunRecord

CANNOT_TELL = "≈"  # docs/commands.md defines it with every other verdict word


def times_vs_fastest(records: Sequence[RunRecord]) -> list[float]:
    """Each record's median epoch time over the fastest's (1.0 = the fastest)."""
    seconds = [r.epochs.epoch_seconds_median for r in records]
    best = min(seconds) if seconds else 0.0
    return [s / best if best > 0 else float("nan") for s in seconds]


def vs_fastest(records: Sequence[RunRecord]) -> list[str]:
    """The "vs fastest" cell of each row: `2.35x`; `≈ 1.04x: intervals overlap` where its interval and the fastest's
    overlap, `... under load` where other programs used the cores beside the runs."""
    ratios = times_vs_fastest(records)
    if not records:
        return []
    best = records[min(range(len(records)), key=lambda k: ratios[k])]
    top = record_interval(best)
    load = records_load(records)
    cells = []
    for r, rel in zip(records, ratios, strict=True):
        mine = record_interval(r)
        if r is not best and mine.finite and top.finite and mine.overlaps(top):
            why = "intervals overlap under load" if load is not None and load.busy else "intervals overlap"
            cells.append(f"{CANNOT_TELL} {rel:.2f}x: {why}")
        else:
            cells.append(f"{rel:.2f}x")
    return cells
