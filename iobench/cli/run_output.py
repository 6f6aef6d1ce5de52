"""What `iobench run` prints of its session's Outcome (`iobench.sessions.run`): the tables, the answer, the what-if
table, or what had finished before an interruption."""

from __future__ import annotations

from rich.table import Table

from iobench.cli.console import out, say
from iobench.cli.render import print_run
from iobench.plan.place import RunPlace
from iobench.report.whatif import error, predict
from iobench.run.what_if_checks import WhatIfCheck
from iobench.sessions.run import RunInterrupted, RunOutcome


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


def print_outcome(outcome: RunOutcome, where: RunPlace, min_au: float | None, wide: bool) -> None:
    """The run's tables and answer (rank 0's: another rank prints nothing), and the what-if table."""
    if not outcome.main:
        return
    print_run(outcome.records, outcome.dataset, where.results, min_au, wide, where.place_flags(outcome.dataset))
    if outcome.what_ifs:
        print_what_if(outcome.what_ifs)


def print_interrupted(stopped: RunInterrupted, where: RunPlace, min_au: float | None, wide: bool) -> None:
    """What had finished before the interruption, then its line."""
    if stopped.outcome.main:
        print_run(
            stopped.outcome.records,
            stopped.outcome.dataset,
            where.results,
            min_au,
            wide,
            where.place_flags(stopped.outcome.dataset),
        )
        say(stopped.said)
