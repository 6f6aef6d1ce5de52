"""What `run` and `tune` print: the results, the split, the warnings, the paste line."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from rich.table import Table

from iobench.cli.console import out, say
from iobench.judge.warnings import record_warnings, summarised
from iobench.report.answer import console_answer
from iobench.report.tables import au_text, run_view
from iobench.results.record import RunRecord
from iobench.run.tune import settings_text
from iobench.sessions.tune import TuneOutcome


def print_run(
    records: list[RunRecord],
    dataset_name: str,
    results: Path,
    min_au: float | None = None,
    wide: bool = False,
    place: list[str] | None = None,
) -> None:
    """The table, the warnings and the answer line; `place`: the options that found the dataset, as typed (for the
    commands the answer suggests)."""
    for part in run_view(records, dataset_name, wide):
        out.print(part, highlight=False, soft_wrap=isinstance(part, str), markup=False)
    for w in summarised(record_warnings(records, min_au), len(records)):
        say(w.console())
    out.print(f"{len(records)} record(s) appended to {results}", highlight=False, soft_wrap=True, markup=False)
    if (answer := console_answer(records, place or [])) is not None:
        out.print(answer, highlight=False, soft_wrap=True, markup=False)


def print_tune(tuned: TuneOutcome, results: Path) -> None:
    """The ranking, then the best configuration as a script: printed unstyled (a log or a redirect never wraps it),
    written beside the results file by the session; without a script, the run that measures it again; the pasted
    script's check. The figure reported and pasted is the winner's fresh run after the search, where it has one."""
    from iobench.judge.search import best_by_loading, faster_elsewhere, fastest_measured, stopped_words, too_short

    outcome = tuned.result
    _print_ranking(outcome, results)
    if not outcome.ranked:
        _records_line(results)
        return
    best = outcome.best
    if not best.meets(outcome.min_shuffle):
        out.print(
            f"no candidate shuffled to --min-shuffle {outcome.min_shuffle:g}: nothing to recommend; "
            "lower it knowingly (0: speed alone), or choose a format that shuffles globally"
        )
        out.print(f"records of every round in {results}", highlight=False, soft_wrap=True, markup=False)
        return
    fastest = fastest_measured(outcome.ranked)
    said = faster_elsewhere(_contender(best), _contender(fastest)) if fastest is not best else None
    if said is not None:
        out.print(
            f"{said}: {fastest.config.label} {settings_text(fastest.config)}: "
            f"{fastest.median:,.0f} samples/s, shuffle {_shuffle_text(fastest, outcome.min_shuffle)} "
            "(--min-shuffle 0 would recommend it)"
        )
    shown = best.interval()
    if not tuned.settled:  # fewer than two epochs of the leader: no interval, no recommendation
        measured = sum(1 for c in outcome.ranked if c.rates)
        out.print(
            f"inconclusive: after {outcome.rounds} round(s) {measured} of {outcome.candidates or len(outcome.ranked)} "
            "candidates were measured and the leader has fewer than two epochs; give more --budget-minutes (or a "
            "smaller dataset)"
        )
        if tuned.figure is None:
            out.print(f"records of every round in {results}", highlight=False, soft_wrap=True, markup=False)
            return
        out.print(
            f"the best measured so far, not settled (one epoch: no interval): {best.config.label} "
            f"{settings_text(best.config)}, {tuned.figure}"
        )
        _print_paste(tuned, results)
        return
    spread = f"{min(best.rates):,.0f}-{max(best.rates):,.0f}"
    out.print(
        f"best: {best.config.label} {settings_text(best.config)}: {best.median:,.0f} samples/s in the search "
        f"(epochs {spread}; {shown.coverage:.0%} CI of the median {shown.low:,.0f}-{shown.high:,.0f}); "
        f"{stopped_words(outcome.stopped, bool(outcome.within_noise()))}"
    )
    _print_confirmed(best)
    if (short := too_short(best.epoch_seconds)) is not None:
        out.print(short)
    near = outcome.within_noise()
    if near:
        out.print("within noise of it: " + "; ".join(f"{c.config.label} {settings_text(c.config)}" for c in near[:4]))
        out.print(deciding_budget(outcome, near[0]))
    by_loading = best_by_loading(outcome.ranked, outcome.min_shuffle)
    out.print(
        "best throughput by what loads: "
        + ", ".join(f"{what}: {rate:,.0f} samples/s" for what, rate in by_loading.items())
    )
    _print_paste(tuned, results)


def _print_paste(tuned: TuneOutcome, results: Path) -> None:
    if tuned.script is None:
        if tuned.command is not None:
            out.print("measure it again (no script: iobench's own readers of object storage read it):")
            print(tuned.command, file=out.file, flush=True)
        _records_line(results)
        return
    print_script(tuned.script, tuned.script_text)
    _records_line(results)
    if tuned.paste_check is not None:
        print_paste_check(tuned.paste_check, tuned.result.best)


def print_script(script: Path, text: str) -> None:
    """A script handed over: where it was saved, how to run it, then its text as written (rich would wrap it)."""
    out.print(
        f"paste (saved as {script}; `{shlex.join(['python', str(script)])}` runs it):",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    print(text, end="", file=out.file, flush=True)


def _records_line(results: Path) -> None:
    """Where the rounds are, and the command that reports them (quoted: a path may hold `$(...)` or spaces)."""
    out.print(
        f"records of every round in {results}; `{shlex.join(['iobench', 'report', str(results)])}` shows the search",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def _print_ranking(outcome: Any, results: Path) -> None:
    """tune's table: the best dozen candidates measured, with their intervals, epochs, AU and shuffle."""
    measured = [c for c in outcome.ranked if c.records]
    shown = measured[:12]
    title = f"tune: {outcome.rounds} round(s) in {outcome.seconds:.0f} s, stopped: {outcome.stopped}"
    title += f"\n{len(measured)} of {outcome.candidates or len(outcome.ranked)} candidates measured"
    title += f", the best {len(shown)} shown" if len(shown) < len(measured) else ""
    table = Table(title=title)
    if outcome.reused:
        say(f"resumed: {outcome.reused} candidate round(s) taken from {results}, not run again")
    for col in ("rank", "loader", "settings", "samples/s median", "CI of the median", "epochs", "AU (step)", "shuffle"):
        table.add_column(col, justify="left" if col in ("loader", "settings", "shuffle") else "right")
    for i, c in enumerate(shown, 1):
        shown = c.interval()
        ci = f"{shown.low:,.0f}-{shown.high:,.0f} ({shown.coverage:.0%})" if shown.finite else "-"
        last = c.records[-1]
        table.add_row(
            str(i),
            c.config.loader.value,
            settings_text(c.config),
            f"{c.median:,.0f}",
            ci,
            str(len(c.rates)),
            au_text(last),
            _shuffle_text(c, outcome.min_shuffle),
        )
    out.print(table)


def _print_confirmed(best: Any) -> None:
    """The winner's fresh run after the search, beside the search's median, with that run's warnings."""
    if best.confirmed is None or not best.confirmed_rates:
        return
    from iobench.judge.intervals import record_interval

    confirmed = record_interval(best.confirmed)
    out.print(
        f"confirmed in a fresh run after the search: {confirmed.text()} samples/s, "
        f"{confirmed.median / best.median:.2f}x the search's median (the best of many noisy "
        "measurements reads high): the figure to expect"
    )
    for w in summarised(record_warnings([best.confirmed]), 1):
        say(w.console())


def print_paste_check(check: Any, best: Any) -> None:
    """The pasted script's figure beside tune's confirmed one, with their ratio."""
    from iobench.judge.intervals import record_interval
    from iobench.judge.paste import paste_verdict, verdict_words

    figure = record_interval(best.confirmed).median
    ratio = check.ratio(figure)
    if ratio is None:
        say(f"the pasted script could not be checked: {check.said}")
        return
    verdict = verdict_words(paste_verdict(ratio))
    out.print(
        f"the pasted script, run in a fresh process: {check.figure:,.0f} samples/s, {ratio:.2f}x tune's "
        f"{figure:,.0f} ({verdict})",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


def deciding_budget(outcome: Any, rival: Any) -> str:
    """What would tell the best from its nearest rival (the judgement's words)."""
    from iobench.judge.search import deciding_budget

    return deciding_budget(_contender(outcome.best), _contender(rival))


def _contender(c: Any) -> Any:
    """A tune candidate as the judgement sees it (`iobench.judge.search.Contender`)."""
    from iobench.judge.search import Contender

    return Contender(f"{c.config.label} {settings_text(c.config)}", c.interval(), len(c.rates), c.epoch_seconds)


def _shuffle_text(c: Any, floor: float) -> str:
    """spread/order of its delivered order, and whether it fell below tune's floor."""
    e = c.records[-1].epochs
    if e.shuffle_spread is None or e.shuffle_order is None:
        return "-"
    return f"{e.shuffle_spread:.2f}/{e.shuffle_order:.2f}" + ("" if c.meets(floor) else f" < {floor:g}")
