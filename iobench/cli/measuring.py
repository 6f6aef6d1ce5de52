"""Measuring from the command line: the session (`iobench.run.session`) run with the console's bars and messages, its
results printed, the what-if table. Imported by the commands that measure, when they run."""

from __future__ import annotations

import math

from rich.table import Table

from iobench.choices import split_list
from iobench.cli.app import ARGV
from iobench.cli.bars import RunEvents
from iobench.cli.console import out, say
from iobench.cli.render import print_run
from iobench.errors import IobenchError
from iobench.plan.config import RunConfig
from iobench.report.whatif import error, predict
from iobench.run.place import RunPlace
from iobench.run.session import RunInterrupted, SessionResult, measure_session
from iobench.run.what_if_checks import WhatIfCheck


def step_times(text: str, ranks: bool) -> list[float]:
    if ranks:
        raise IobenchError("--what-if measures its checks in one process; run it without torchrun or --nproc")
    try:
        values = [float(x) for x in split_list(text, "--what-if step time")]
    except ValueError:
        raise IobenchError(f"--what-if takes step times in ms, e.g. 2.5,10; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise IobenchError(f"--what-if step times must be >= 0 ms, got {text!r}")
    return values


def print_what_if(checks: list[WhatIfCheck]) -> None:
    """Each configuration predicted at other step times from its run, beside what was measured with that step."""
    table = Table(title="what-if: predicted from the run above, then measured with that step")
    for col in (
        "configuration",
        "step now",
        "samples/s now",
        "what-if step",
        "predicted samples/s",
        "predicted AU",
        "bound",
        "measured samples/s",
        "error",
    ):
        table.add_column(col, justify="left" if col in ("configuration", "bound") else "right")
    for check in checks:
        record, ms, measured = check.record, check.step_ms, check.measured
        p = predict(record, ms)
        rate = f"{p.samples_per_s_low:,.0f}" + (
            f"-{p.samples_per_s_high:,.0f}" if p.samples_per_s_high > p.samples_per_s_low * 1.005 else ""
        )
        au = f"{p.utilisation_low:.0%}" + (
            f"-{p.utilisation_high:.0%}" if p.utilisation_high > p.utilisation_low + 0.005 else ""
        )
        table.add_row(
            record.label,
            record.config.step,
            f"{record.epochs.samples_per_s:,.0f}",
            f"sleep:{ms:g}",
            rate,
            au,
            p.bound,
            f"{measured.epochs.samples_per_s:,.0f}",
            f"{error(p, measured):+.1%}",
        )
    out.print(table)


def measure_run(
    configs: list[RunConfig],
    notes: list[str],
    where: RunPlace,
    *,
    nproc: int | None,
    quiet: bool,
    min_au: float | None,
    what_if_ms: list[float] | None,
    wide: bool = False,
    loaders_named: str | None = None,
) -> None:
    """`iobench run` once its values are checked: the session (iobench.run.session) measures and saves, this prints
    its results, or, interrupted, what had finished before the interruption's line."""
    events = RunEvents(quiet)
    try:
        result = measure_session(
            configs,
            notes,
            where,
            events,
            argv=ARGV,
            nproc=nproc,
            loaders_named=loaders_named,
            estimate=not quiet,
            what_if_ms=what_if_ms,
        )
    except RunInterrupted as stopped:
        if stopped.result.main:
            _print(stopped.result, where, min_au, wide)
            say(stopped.said)
        raise
    if result is None or not result.main:  # torchrun was launched, or another rank prints
        return
    _print(result, where, min_au, wide)
    if result.what_ifs:
        print_what_if(result.what_ifs)


def _print(result: SessionResult, where: RunPlace, min_au: float | None, wide: bool) -> None:
    print_run(result.records, result.dataset, where.results, min_au, wide, where.place_flags(result.dataset))
