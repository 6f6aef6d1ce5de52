"""`report` and `compare`: what records say."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from iobench.cli.app import app
from iobench.cli.console import out, say
from iobench.errors import IobenchError


@app.command("report")
def report_cmd(
    results: Annotated[Path, typer.Argument(help="A results JSONL file.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.md and its PNG plots.")] = Path("report"),
) -> None:
    """Write a Markdown report with tables and plots from result records."""
    from iobench.results.report import write_report  # matplotlib loads only when a report is made

    skipped: list[str] = []
    path = write_report(results, out_dir, skipped)
    for line in skipped:
        say(f"warning: {line}")
    out.print(f"report: {path}", highlight=False, soft_wrap=True, markup=False)


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Baseline results JSONL.")],
    b: Annotated[Path, typer.Argument(help="Results to compare with the baseline.")],
) -> None:
    """Print the relative change of MB/s per configuration present in both files."""
    from rich.markup import escape
    from rich.table import Table

    from iobench.results.report import compare, describe
    from iobench.results.store import load_records

    for path in (a, b):
        for line in load_records(path).skipped:
            say(f"warning: {line}")
    pairs, only_a, only_b = compare(a, b)
    if not pairs:
        raise IobenchError(f"{a} and {b} have no configuration in common ({only_a} in A, {only_b} in B)")
    table = Table(title=escape(f"{b} against {a}"))
    for col in ("configuration", "A MB/s", "B MB/s", "change", "noise (epoch spread)"):
        table.add_column(col, justify="left" if col == "configuration" else "right")
    for ra, rb, change in pairs:
        noise = max(_spread(ra), _spread(rb))
        shown = f"{change:+.1%}" if math.isfinite(change) else "- (A is 0)"
        verdict = "within noise" if math.isfinite(change) and abs(change) <= noise else f"+-{noise:.1%}"
        table.add_row(describe(ra), f"{ra.epochs.mb_per_s:,.1f}", f"{rb.epochs.mb_per_s:,.1f}", shown, verdict)
    out.print(table)
    out.print(f"{len(pairs)} matching configuration(s); {only_a} only in A, {only_b} only in B", highlight=False)


def _spread(r) -> float:  # noqa: ANN001 - a RunRecord, imported when compare runs
    """How far a record's epochs spread around their median: (max - min) / median."""
    e = r.epochs
    return (e.epoch_seconds_max - e.epoch_seconds_min) / e.epoch_seconds_median if e.epoch_seconds_median else 0.0
