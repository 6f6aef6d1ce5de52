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
    skipped: list[str] = []
    family = _family(results)
    if family == CHECKPOINTS:  # `iobench checkpoint`'s records
        from iobench.report.checkpoints import write_checkpoint_report

        paths = write_checkpoint_report(results, out_dir, skipped)
    elif family == FEEDS:  # `iobench feed`'s answers
        from iobench.report.feed import write_feed_report

        paths = write_feed_report(results, out_dir, skipped)
    else:
        from iobench.report.report import write_report  # matplotlib loads only when a report is made

        paths = write_report(results, out_dir, skipped, dataset)
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
    family, other = _family(a), _family(b)
    if family != other:  # refused before a line of either is read as the other's kind
        raise IobenchError(f"{a} holds {family} and {b} {other}: compare two files of one kind")
    if rerun:
        if family != RUNS:
            raise IobenchError(f"--rerun measures run records again; {a} holds {family}")
        return _compare_rerun(a, b, runs, results)
    if family == CHECKPOINTS:
        return _compare_checkpoints(a, b)
    if family == FEEDS:
        return _compare_feed(a, b)
    from iobench.judge.change import KINDS, compare_change
    from iobench.report.report import compare, describe
    from iobench.results.store import load_records

    for path in (a, b):
        for line in load_records(path).skipped:
            say(f"warning: {line}")
    pairs, only_a, only_b = compare(a, b)
    if not pairs:
        raise IobenchError(f"{a} and {b} have no configuration in common ({only_a} in A, {only_b} in B)")
    table = _comparison(
        a,
        b,
        "samples/s: the median of the runs [its interval, how sure]",
        ("configuration", "A samples/s", "B samples/s", "verdict"),
    )
    kinds = []
    for ra, rb, _change in pairs:
        verdict = compare_change(ra, rb)
        kinds.append(verdict.kind)
        table.add_row(describe(ra), verdict.a.text(), verdict.b.text(), verdict.text)
    out.print(table)
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in KINDS if kinds.count(k))
    out.print(
        f"{len(pairs)} matching configuration(s) ({counts}); {only_a} only in A, {only_b} only in B", highlight=False
    )


def _compare_rerun(a: Path, b: Path, runs: int, results: Path) -> None:
    """The configurations measured again in turn (`iobench.sessions.rerun`), B against A by their pairs."""
    from rich.markup import escape

    from iobench.cli.bars import RunEvents
    from iobench.judge.change import KINDS
    from iobench.results.store import check_writable
    from iobench.sessions.rerun import RerunRequest, rerun_session

    check_writable(results)
    request = RerunRequest(a, b, runs, results)
    outcome = rerun_session(request, RunEvents(False))
    table = _comparison(
        a,
        b,
        f"measured again in turn, {runs} rounds; samples/s: the median of the runs [its interval, how sure]",
        ("configuration", "A samples/s", "B samples/s", "verdict", "why"),
    )
    kinds = []
    for done in outcome.reruns:
        change = done.change
        kinds.append(change.kind)
        kind = change.text if change.decided else change.kind
        table.add_row(escape(done.label), change.a.text(), change.b.text(), escape(kind), escape(change.reason))
    out.print(table)
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in KINDS if kinds.count(k))
    out.print(
        f"{len(outcome.reruns)} configuration pair(s) measured again ({counts}); {outcome.only_a} only in A, "
        f"{outcome.only_b} only in B; the new records appended to {results}",
        highlight=False,
        soft_wrap=True,
    )


def _compare_checkpoints(a: Path, b: Path) -> None:
    """Per save or restore both checkpoint files measured (a library, a state size, a cache, a save mode), B against
    A by each round's GB/s, decided as run records are (`iobench.judge.change`): not comparable across loads."""
    from iobench.report.checkpoints import checkpoint_changes, range_text
    from iobench.results.checkpoint_file import load_checkpoints

    files = [load_checkpoints(path) for path in (a, b)]
    _warn_skipped(files)
    changes, only_a, only_b = checkpoint_changes(*files)
    if not changes:
        raise IobenchError(f"{a} and {b} have no checkpoint measurement in common ({only_a} in A, {only_b} in B)")
    table = _comparison(
        a, b, "seconds: the median of the rounds [min-max]; a save until durable", ("measurement", "A", "B", "verdict")
    )
    from rich.markup import escape

    for change in changes:
        table.add_row(escape(change.label), range_text(change.a), range_text(change.b), escape(change.verdict.text))
    out.print(table)
    out.print(f"{len(changes)} matching measurement(s); {only_a} only in A, {only_b} only in B", highlight=False)


def _compare_feed(a: Path, b: Path) -> None:
    """Per question both files answered (a workload, format, loader, cache and step), B's accelerators against A's,
    decided by the judgement (`iobench.judge.feed.feed_change`)."""
    from rich.markup import escape

    from iobench.report.feed import feed_changes, load_feed

    files = [load_feed(path) for path in (a, b)]
    _warn_skipped(files)
    pairs, only_a, only_b = feed_changes(*files)
    if not pairs:
        raise IobenchError(f"{a} and {b} have no feed question in common ({only_a} in A, {only_b} in B)")
    caption = "accelerators fed at the workload's AU (the latest answer of each file, per step)"
    table = _comparison(a, b, caption, ("question", "A", "B", "verdict"))
    for ra, _rb, change in pairs:
        question = f"{ra.workload} ({ra.compute_s * 1000:g} ms), {ra.format} read by {ra.loader}, {ra.cache}"
        table.add_row(escape(question), str(change.n_a), str(change.n_b), escape(change.text))
    out.print(table)
    out.print(f"{len(pairs)} matching question(s); {only_a} only in A, {only_b} only in B", highlight=False)


CHECKPOINTS, FEEDS, RUNS = "checkpoint records", "feed answers", "run records"


def _family(path: Path) -> str:
    """What a results file holds, by its records' kind, in words: what `report` writes and `compare` compares."""
    from iobench.results.checkpoint_file import holds_checkpoints
    from iobench.results.feed_record import FEED
    from iobench.results.store import first_kind

    if holds_checkpoints(path):
        return CHECKPOINTS
    return FEEDS if first_kind(path) == FEED else RUNS


def _warn_skipped(files: list) -> None:
    """Each line of the loaded files that was not a record, named (a file's `skipped`)."""
    for loaded in files:
        for line in loaded.skipped:
            say(f"warning: {line}")


def _comparison(a: Path, b: Path, caption: str, columns: tuple[str, ...]) -> Table:
    """compare's table of B against A: the first column names what is compared, the others are figures."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"{b} against {a}"), caption=caption)
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] else "right")
    return table
