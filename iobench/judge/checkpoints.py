"""Which checkpoint library and save mode to use: the fastest durable (steady) save plus restore (cold where measured)
among those that restored exactly and whose kills, where the kill test ran, never lost or corrupted the checkpoint; the
ceiling is not a choice. A library left out is named with why, and said to be faster where it was (`iobench checkpoint
--kill-test 5` named safetensors fastest at 4.87 s while torch in place, durable in 2.25 s, stood in the table: 1 of its
5 kills had lost the checkpoint, and the line did not say so). A ranking taken beside other programs is no answer.
The console and `report` print this same line."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.evidence import Load, load_of
from iobench.judge.intervals import interval_of
from iobench.results.checkpoint_summary import LibraryRow, lost


def _total(r: LibraryRow) -> float:
    return (r.durable_s or 0.0) + (r.restore_s or 0.0)


def _s(seconds: float | None) -> str:
    return f"{seconds:.2f} s" if seconds is not None else "not timed"


def _what(r: LibraryRow) -> str:
    return (
        f"{r.label}: durable in {r.durable_s:.2f} s (the steady save; the first in a process "
        f"{_s(r.first_durable_s)}), restored {r.restore_word} in {r.restore_s:.2f} s"
    )


@dataclass(frozen=True)
class CheckpointChoice:
    """The fastest safe library and mode (None where nothing restored exactly with both figures, or every such one
    lost a checkpoint to a kill), the others in order, those left out for their kills, and the load beside the
    trials (a ranking taken beside other programs is not settled)."""

    best: LibraryRow | None
    candidates: list[LibraryRow]
    unsafe: list[LibraryRow]
    exact: list[LibraryRow]
    load: Load | None

    @property
    def settled(self) -> bool:
        return self.best is not None and not (self.load is not None and self.load.busy)


def checkpoint_choice(
    rows: list[LibraryRow], kills: dict[tuple[str, str], dict[str, int]] | None = None
) -> CheckpointChoice:
    """The one ranking of libraries and save modes: `checkpoint`'s answer and `checkpoint --tune`'s code rest on it."""
    kills = kills or {}
    exact = sorted((r for r in rows if not r.ceiling and r.exact and r.durable_s and r.restore_s), key=_total)
    unsafe = [r for r in exact if lost(kills.get((r.saver, r.save_mode), {})) > 0]
    candidates = [r for r in exact if r not in unsafe]
    best = candidates[0] if candidates else None
    return CheckpointChoice(best, candidates, unsafe, exact, load_of(r.busy for r in rows))


def checkpoint_answer(rows: list[LibraryRow], kills: dict[tuple[str, str], dict[str, int]] | None = None) -> str | None:
    """The answer line (`answer: ...`); None where no library restored exactly with both figures measured."""
    kills = kills or {}
    choice = checkpoint_choice(rows, kills)
    if not choice.exact:
        return None
    candidates = choice.candidates
    left_out = _left_out(choice.unsafe, choice.best, kills)
    load = choice.load
    if load is not None and load.busy:
        fastest = candidates[0] if candidates else choice.exact[0]
        return (
            f"answer: none: other programs used {load.high:.1f} cores beside the trials, and a ranking taken there "
            f"may not hold on a quiet machine (fastest measured among the safe: {_what(fastest)})"
            + (f"; {left_out}" if left_out else "")
        )
    if choice.best is None:
        return f"answer: none: {left_out}"
    best = choice.best
    parts = [f"answer: save with {_what(best)}", kills_said(best, kills)]
    if len(candidates) > 1:
        parts.append(_against(best, candidates[1]))
    ceiling = next((r for r in rows if r.ceiling and r.restore_s), None)
    if ceiling is not None:
        parts.append(f"{ceiling.restore_s / best.restore_s:.2f}x the raw read")
    if left_out:
        parts.append(left_out)
    return "; ".join(parts)


def kills_said(row: LibraryRow, kills: dict[tuple[str, str], dict[str, int]]) -> str:
    counts = kills.get((row.saver, row.save_mode))
    if not counts:
        return "not kill-tested (--kill-test N tells what a killed save leaves)"
    n = sum(counts.values())
    return f"{n} of {n} kills left step N or N+1 intact ({row.saver} {row.save_mode})"


def _left_out(unsafe: list[LibraryRow], chosen: LibraryRow | None, kills: dict[tuple[str, str], dict[str, int]]) -> str:
    """Each library and mode left out, with its kills, and whether it was faster than the one chosen."""
    said = []
    for r in unsafe:
        counts = kills[(r.saver, r.save_mode)]
        faster = (
            f", faster ({_total(r):.2f} s save and restore)"
            if chosen is not None and _total(r) < _total(chosen)
            else ""
        )
        said.append(f"{r.label}{faster}: {lost(counts)} of {sum(counts.values())} kills lost the checkpoint")
    return ("left out: " + "; ".join(said)) if said else ""


def _against(best: LibraryRow, second: LibraryRow) -> str:
    """How sure the ranking is: the rounds' totals (durable save + restore) of the two, by their intervals."""
    a, b = interval_of(_round_totals(best)), interval_of(_round_totals(second))
    ratio = _total(second) / _total(best)
    if not (a.finite and b.finite):
        return f"{ratio:.2f}x the next, {second.label} (one round: no interval)"
    if a.overlaps(b):
        return (
            f"not settled against {second.label}: its total is {ratio:.2f}x longer, but its rounds span "
            f"{b.low:.2f}-{b.high:.2f} s against {a.low:.2f}-{a.high:.2f} s, which overlap; more --rounds would "
            "tell them apart"
        )
    return f"{ratio:.2f}x the next, {second.label} (their rounds apart)"


def _round_totals(r: LibraryRow) -> list[float]:
    return [r.durable_rounds[k] + r.restore_rounds[k] for k in r.durable_rounds if k in r.restore_rounds]
