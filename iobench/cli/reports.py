"""`report` and `compare`: what records say."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from iobench.cli.app import app
from iobench.cli.console import out, say
from iobench.errors import IobenchError

if TYPE_CHECKING:
    from rich.table import Table

    from iobench.report.kinds import Comparison


@app.command("report")
def report_cmd(
    results: Annotated[Path, typer.Argument(help="A results JSONL file.")],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="Folder for report.md, its PNG plots, report.html (one file, plots inside) and results.csv."
        ),
    ] = Path("report"),
    dataset: Annotated[str | None, typer.Option(help="Only this dataset's records.")] = None,
) -> None:
    """Write a report from result records: Markdown with its plots, the same as one HTML file, and a CSV of the
    records for a spreadsheet."""
    from iobench.report.kinds import kind_of

    skipped: list[str] = []
    paths = kind_of(results).write(results, out_dir, skipped, dataset)
    for line in skipped:
        say(f"warning: {line}")
    written = ", ".join(p.name for p in paths)
    out.print(
        f"report: {paths[0]} ({len(paths)} files in {out_dir}: {written})",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Baseline results JSONL.")],
    b: Annotated[Path, typer.Argument(help="Results to compare with the baseline.")],
    rerun: Annotated[
        bool,
        typer.Option(
            "--rerun",
            help="Measure the configurations again, A's and B's in turn round by round, and judge B against A by "
            "the ratio within each round (a drift or other programs that fall on both cancel out): those both files "
            "hold, or the one each holds. Run records of one local dataset.",
        ),
    ] = False,
    runs: Annotated[int, typer.Option(help="--rerun: rounds in turn (6-100; 6 bound a paired ratio at 95%).")] = 6,
    results: Annotated[Path, typer.Option(help="--rerun: JSONL file the new records are appended to.")] = Path(
        "results/rerun.jsonl"
    ),
) -> None:
    """Per configuration present in both files, B's samples/s against A's, decided with their noise: faster or slower
    only where their intervals are apart and the change exceeds the drift between minutes; "no decidable difference"
    otherwise (always beside other programs), "not comparable" where the runs saw different load. --rerun measures
    them again in turn and decides by their pairs, beside other programs too. Checkpoint records: per measurement, by
    its rounds; feed records: per question, B's number of accelerators against A's."""
    from iobench.report.kinds import kind_of

    kind, other = kind_of(a), kind_of(b)
    if kind != other:  # refused before a line of either is read as the other's kind
        raise IobenchError(f"{a} holds {kind.name} and {b} {other.name}: compare two files of one kind")
    if rerun:
        if not kind.rerun:
            raise IobenchError(f"--rerun measures run records again; {a} holds {kind.name}")
        return _compare_rerun(a, b, runs, results)
    _print_comparison(a, b, kind.compare(a, b))


def _compare_rerun(a: Path, b: Path, runs: int, results: Path) -> None:
    """The configurations measured again in turn (`iobench.sessions.rerun`), B against A by their pairs."""
    from iobench.cli.bars import RunEvents
    from iobench.report.kinds import rerun_comparison
    from iobench.results.store import check_writable
    from iobench.sessions.rerun import RerunRequest, rerun_session

    check_writable(results)
    outcome = rerun_session(RerunRequest(a=a, b=b, runs=runs, results=results), RunEvents(False))
    _print_comparison(a, b, rerun_comparison(outcome, runs, results))


def _print_comparison(a: Path, b: Path, comparison: Comparison) -> None:
    """The lines of either file that were not records, the table of B against A, and its closing line."""
    from rich.markup import escape

    for line in comparison.skipped:
        say(f"warning: {line}")
    table = _comparison(a, b, comparison.caption, comparison.columns)
    for row in comparison.rows:
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
    out.print(comparison.footer, highlight=False, soft_wrap=True)


def _comparison(a: Path, b: Path, caption: str, columns: tuple[str, ...]) -> Table:
    """compare's table of B against A: the first column names what is compared, the others are figures."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"{b} against {a}"), caption=caption)
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] else "right")
    return table
