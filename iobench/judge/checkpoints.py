"""Which checkpoint library and save mode to use: the fastest durable (steady) save plus restore (cold where measured)
among those that restored exactly and whose kills, where the kill test ran, never lost or corrupted the checkpoint; the
ceiling is not a choice. A library left out is named with why, and said to be faster where it was (`iobench checkpoint
--kill-test 5` named safetensors fastest at 4.87 s while torch in place, durable in 2.25 s, stood in the table: 1 of its
5 kills had lost the checkpoint, and the line did not say so). Beside other programs a ranking is the answer only where
the libraries were taken in turn, the best ahead of the runner-up in every round's pair, and its lead survives the
contention (`iobench.judge.paired`). The console and `report` print this same line."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.judge.evidence import Load, load_of
from iobench.judge.intervals import Interval, interval_of
from iobench.judge.paired import ahead, contention_among, lead_of, ratio_text
from iobench.results.checkpoint_summary import LibraryRow, lost
from iobench.system.waits import share_of


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
    """The fastest kill-proof library and mode (None where nothing restored exactly with both figures, or every such one
    lost a checkpoint to a kill), the others in order, those left out for their kills, and the load beside the
    trials (a ranking taken beside other programs is not settled)."""

    best: LibraryRow | None
    candidates: list[LibraryRow]
    unsafe: list[LibraryRow]
    exact: list[LibraryRow]
    load: Load | None

    paired: Interval | None = None  # the runner-up's round totals over the best's, round by round (taken in turn)
    refused: str = ""  # beside other programs: why the ranking is no answer ("": it is, or the machine was quiet)

    @property
    def settled(self) -> bool:
        return self.best is not None and not self.refused


def checkpoint_choice(
    rows: list[LibraryRow], kills: dict[tuple[str, str], dict[str, int]] | None = None
) -> CheckpointChoice:
    """The one ranking of libraries and save modes: `checkpoint`'s answer and `checkpoint --tune`'s code rest on it."""
    kills = kills or {}
    exact = sorted((r for r in rows if not r.ceiling and r.exact and r.durable_s and r.restore_s), key=_total)
    unsafe = [r for r in exact if lost(kills.get((r.saver, r.save_mode), {})) > 0]
    candidates = [r for r in exact if r not in unsafe]
    best = candidates[0] if candidates else None
    load = load_of(r.busy for r in rows)
    paired = _paired(best, candidates[1]) if best is not None and len(candidates) > 1 else None
    refused = _busy(best, candidates[1:], paired, load) if load is not None and load.busy else ""
    return CheckpointChoice(best, candidates, unsafe, exact, load, paired, refused)


def _paired(best: LibraryRow, second: LibraryRow) -> Interval | None:
    """The runner-up's total (durable save + restore) over the best's, round by round, where their trials were taken
    in turn in one session."""
    if not best.turn_session or best.turn_session != second.turn_session:
        return None
    a, b = _round_map(best), _round_map(second)
    ratios = [b[k] / a[k] for k in a if k in b and a[k] > 0]
    return interval_of(ratios) if ratios else None


def _share(r: LibraryRow) -> float | None:
    return share_of(r.cpu_s, r.cpu_wait_s)


def _busy(best: LibraryRow | None, others: list[LibraryRow], paired: Interval | None, load: Load) -> str:
    """Beside other programs, why the ranking is no answer: the best not ahead of the runner-up in every round's pair,
    or its paired lead over a library not surviving that library's credit for the CPU wait it had beyond the best's
    (`iobench.judge.paired`); "" where it stands."""
    if best is None or not others:
        return ""
    if not ahead(paired):
        how = (
            "the trials were not paired round by round (--rounds 2 or more)"
            if paired is None
            else f"the fastest is not ahead in every round ({ratio_text(paired)})"
        )
        return f"other programs used {load.text()} cores beside the trials and {how}"
    leads = [(r.label, _share(r), lead_of(_paired(best, r))) for r in others]
    contention = contention_among((best.label, _share(best)), leads)
    if contention.unpaired is not None:
        return (
            f"other programs used {load.text()} cores beside the trials and not every library was paired round by round"
        )
    if not contention.recorded:
        return f"other programs used {load.text()} cores beside the trials and what they waited for was not recorded"
    if contention.hit is not None:
        return (
            f"other programs used {load.text()} cores beside the trials and {contention.uneven_text()}, so the quiet "
            "ranking may differ"
        )
    return ""


def checkpoint_answer(rows: list[LibraryRow], kills: dict[tuple[str, str], dict[str, int]] | None = None) -> str | None:
    """The answer line (`answer: ...`); None where no library restored exactly with both figures measured."""
    kills = kills or {}
    choice = checkpoint_choice(rows, kills)
    if not choice.exact:
        return None
    candidates = choice.candidates
    left_out = _left_out(choice.unsafe, choice.best, kills)
    load = choice.load
    if choice.refused:
        fastest = candidates[0] if candidates else choice.exact[0]
        return (
            f"answer: none: {choice.refused}: measure again with the machine quiet, or more --rounds (fastest "
            f"measured among the kill-proof: {_what(fastest)})" + (f"; {left_out}" if left_out else "")
        )
    if choice.best is None:
        return f"answer: none: {left_out}"
    best = choice.best
    parts = [f"answer: save with {_what(best)}", kills_said(best, kills)]
    if len(candidates) > 1:
        parts.append(_against(best, candidates[1], choice.paired))
    if load is not None and load.busy:
        shares = [x for x in (_share(r) for r in candidates) if x is not None]
        waited = f"waited for a CPU {min(shares):.0%}-{max(shares):.0%} of its time" if shares else "waits not recorded"
        alone = "nothing else to rank it against" if len(candidates) == 1 else "paired round by round"
        parts.append(f"beside other programs using {load.text()} cores ({waited}; {alone}): its figures are theirs")
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


def _against(best: LibraryRow, second: LibraryRow, paired: Interval | None = None) -> str:
    """How sure the ranking is: the rounds' totals (durable save + restore) of the two, by their intervals, or round by
    round where they were taken in turn and the pairs decide."""
    a, b = interval_of(_round_totals(best)), interval_of(_round_totals(second))
    ratio = _total(second) / _total(best)
    if not (a.finite and b.finite):
        return f"{ratio:.2f}x the next, {second.label} (one round: no interval)"
    if a.overlaps(b) and ahead(paired):
        return f"{ratio_text(paired)} the next, {second.label}, paired over {paired.units} rounds in turn"  # type: ignore[union-attr]
    if a.overlaps(b):
        return (
            f"not settled against {second.label}: its total is {ratio:.2f}x longer, but its rounds span "
            f"{b.low:.2f}-{b.high:.2f} s against {a.low:.2f}-{a.high:.2f} s, which overlap; more --rounds would "
            "tell them apart"
        )
    return f"{ratio:.2f}x the next, {second.label} (their rounds apart)"


def _round_totals(r: LibraryRow) -> list[float]:
    return list(_round_map(r).values())


def _round_map(r: LibraryRow) -> dict[int, float]:
    return {k: r.durable_rounds[k] + r.restore_rounds[k] for k in r.durable_rounds if k in r.restore_rounds}
