"""Which configuration to use, per access pattern: the answer `run`, `sweep` and `report` print from the same
records, decided once. Figures of one pattern (cache, order, device, step) answer the same question. A winner is
settled against the runner-up where their intervals are apart, or where their runs were taken in turn and the paired
ratio's interval lies above 1 (`iobench.judge.paired`). Beside other programs a ranking is the answer only when it was
paired and the lead survives crediting each configuration it beat with the CPU wait it had beyond the leader's
(`iobench.judge.paired`); else no answer, naming why (a loaded machine promoted npy/preload at 82-620 samples/s,
4,374 with one torch thread)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iobench.judge.evidence import Load, records_load
from iobench.judge.intervals import Interval, record_interval
from iobench.judge.paired import Contention, ahead, contention_of, lead_of, paired_runs, ratio_text
from iobench.measuring.limit_rule import device_resident
from iobench.plan.labels import settings_label
from iobench.results.record import RunRecord


def pattern_of(r: RunRecord) -> str:
    """The access pattern a figure belongs to: only figures of one pattern answer the same question. The step is part
    of it: a run with the user's step and the same pipeline without it are not competing loaders (one was ranked
    '3.96x the next' against the other)."""
    c = r.config
    step = f", step {c.step}" if c.step != "none" else ""
    return f"{c.cache} {c.order} on {c.device}{step}"


def named(r: RunRecord) -> str:
    """A configuration as an answer names it: format/loader and the settings that tell it apart."""
    return f"{r.config.label} ({settings_label(r, measured=False)})"


@dataclass(frozen=True)
class Answer:
    """The answer for one access pattern: the fastest measured, and whether it is the one to use (`refused`: why
    not), how far ahead of the runner-up and whether that is settled (their intervals apart)."""

    pattern: str
    fastest: RunRecord
    interval: Interval
    count: int  # configurations ranked
    runner_up: RunRecord | None = None
    rival: Interval | None = None
    refused: str = ""  # why no configuration is the answer ("": one is)
    load: Load | None = None
    paired: Interval | None = None  # the fastest's samples/s over the runner-up's, round by round (taken in turn)
    contention: Contention | None = None  # beside other programs: how contention fell on the configurations

    @property
    def winner(self) -> RunRecord | None:
        return None if self.refused else self.fastest

    @property
    def ratio(self) -> float | None:
        """The fastest's samples/s over the runner-up's."""
        if self.runner_up is None or self.runner_up.epochs.samples_per_s <= 0:
            return None
        return self.fastest.epochs.samples_per_s / self.runner_up.epochs.samples_per_s

    @property
    def settled(self) -> bool:
        """Told apart from the runner-up (their intervals apart, or the paired ratio's above 1), or alone."""
        return self.rival is None or self.interval.apart(self.rival) or ahead(self.paired)

    def _paired_text(self) -> str:
        p = self.paired
        return f"{ratio_text(p)} paired over {p.units} rounds in turn"  # type: ignore[arg-type,union-attr]

    def verdict(self) -> str:
        """The answer in words, the same in the console and in a report."""
        figure = figure_text(self.fastest, self.interval)
        if self.refused:
            return f"none: {self.refused} (fastest measured: {named(self.fastest)}, {figure})"
        if self.runner_up is None or self.rival is None:
            return f"{named(self.fastest)}, {figure} (nothing else measured to rank it against)"
        rival = named(self.runner_up)
        if self.load is not None and self.load.busy and self.contention is not None:
            return (
                f"use {named(self.fastest)}: {figure}, {self._paired_text()} the next, {rival}; beside other "
                f"programs using {self.load.text()} cores ({self.contention.shares_text()})"
            )
        if self.settled and not self.interval.apart(self.rival):
            return f"use {named(self.fastest)}: {figure}, {self._paired_text()} the next, {rival}"
        if self.settled:
            return (
                f"use {named(self.fastest)}: {figure}, {self.ratio:.2f}x the next, {rival} (their intervals "
                f"apart, {self.interval.coverage:.0%} each)"
            )
        why = (
            "one of them has a single run: no interval"
            if not (self.interval.finite and self.rival.finite)
            else f"its interval spans {self.rival.low:,.0f}-{self.rival.high:,.0f}, which overlaps"
        )
        return (
            f"{named(self.fastest)} leads: {figure}, not settled against {rival}: its median is "
            f"{self.ratio:.2f}x lower, but {why}; more --runs would tell them apart"
        )


def fastest_of(records: Sequence[RunRecord]) -> RunRecord | None:
    """The record of the highest samples/s (a table's or a plot's best; an answer is `answer_for`'s)."""
    return max(records, key=lambda r: r.epochs.samples_per_s) if records else None


def figure_text(r: RunRecord, interval: Interval) -> str:
    """The record's samples/s (the figure its table row shows) with the interval it is judged by."""
    shown = f"{r.epochs.samples_per_s:,.0f}"
    if not interval.finite:
        return f"{shown} samples/s (one run: no interval)"
    return f"{shown} [{interval.low:,.0f}-{interval.high:,.0f}, {interval.coverage:.0%}] samples/s"


def answer_for(pattern: str, records: Sequence[RunRecord]) -> Answer:
    """The answer among records of one pattern (at least one)."""
    ranked = sorted(records, key=lambda r: -r.epochs.samples_per_s)
    best = ranked[0]
    second = ranked[1] if len(ranked) > 1 else None
    load = records_load(ranked)
    paired = paired_runs(best, second) if second is not None else None
    refused, contention = "", None
    if load is not None and load.busy:
        refused, contention = _busy(best, ranked[1:], paired, load)
    return Answer(
        pattern,
        best,
        record_interval(best),
        len(ranked),
        second,
        record_interval(second) if second is not None else None,
        refused,
        load,
        paired,
        contention,
    )


def _busy(
    best: RunRecord, others: list[RunRecord], paired: Interval | None, load: Load
) -> tuple[str, Contention | None]:
    """Beside other programs: why there is no answer (""), and how contention fell where there is one. The ranking
    stands where the fastest is ahead of the runner-up in the rounds' pairs and its paired lead over every
    configuration it beat survives crediting that one with the CPU wait it had beyond the fastest's."""
    if not others:
        return "", None
    if not ahead(paired):
        how = (
            "its runs were not taken in turn with the runner-up's (run several configurations, --runs 2 or more)"
            if paired is None
            else f"the fastest is not ahead in every pair of runs ({ratio_text(paired)} the runner-up, paired over "
            f"{paired.units} rounds)"
        )
        return (
            f"other programs used {load.text()} cores beside the runs and {how}: more --runs, or measure again with "
            "the machine quiet",
            None,
        )
    contention = contention_of(best, [(named(r), r, lead_of(paired_runs(best, r))) for r in others], named(best))
    if contention.unpaired is not None:
        return (
            f"other programs used {load.text()} cores beside the runs and {contention.unpaired}'s runs were not taken "
            "in turn with the fastest's: measure them together, or with the machine quiet",
            None,
        )
    if not contention.recorded:
        return (
            f"other programs used {load.text()} cores beside the runs and what each run waited for was not recorded "
            "whole (records made before 0.3.1, or with DataLoader workers before they reported as they exited): "
            "measure again",
            None,
        )
    if contention.hit is not None:
        return (
            f"other programs used {load.text()} cores beside the runs and {contention.uneven_text()}, so the quiet "
            "ranking may differ; --torch-threads 1 and fewer --num-workers keep a configuration from competing with "
            "other programs, or measure with the machine quiet",
            contention,
        )
    return "", contention


def by_pattern(records: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    """Records by access pattern, the gpu-resident baseline (data already in device memory) left out."""
    found: dict[str, list[RunRecord]] = {}
    for r in records:
        if not device_resident(r):
            found.setdefault(pattern_of(r), []).append(r)
    return found


def answers(records: Sequence[RunRecord]) -> list[Answer]:
    """One answer per access pattern, in the patterns' order."""
    return [answer_for(pattern, rs) for pattern, rs in sorted(by_pattern(records).items())]


def main_answer(records: Sequence[RunRecord]) -> Answer | None:
    """The answer for the pattern measured most (a run's last line); None where nothing is ranked."""
    groups = by_pattern(records)
    if not groups:
        return None
    pattern, rs = max(groups.items(), key=lambda kv: len(kv[1]))
    return answer_for(pattern, rs)
