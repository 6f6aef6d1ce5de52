"""The kinds of results file `report` and `compare` read, one registry (hyperfine's exporters, one interface): each kind
says how a file of it is recognised, how its report is written and how two files of it compare. The command line asks
the registry and prints what comes back; it never branches on a record's kind (it did, twice, in `cli/reports.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.errors import IobenchError

if TYPE_CHECKING:
    from iobench.judge.change import Change
    from iobench.sessions.rerun import RerunOutcome


@dataclass
class Comparison:
    """B against A as a table: its caption and columns (the first names what is compared, the rest are figures), a row
    each, the line said after it, and the lines of either file that were not records."""

    caption: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    footer: str = ""
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RecordKind:
    """One kind of results file: its name in words, whether a file holds it (by its first record's `kind`), its
    report (the paths written) and its comparison."""

    name: str
    holds: Callable[[Path], bool]
    write: Callable[[Path, Path, list[str], str | None], list[Path]]
    compare: Callable[[Path, Path], Comparison]
    rerun: bool = False  # `compare --rerun` can measure its configurations again


def _checkpoint_report(results: Path, out: Path, skipped: list[str], dataset: str | None) -> list[Path]:
    from iobench.report.checkpoints import write_checkpoint_report

    return write_checkpoint_report(results, out, skipped)


def _feed_report(results: Path, out: Path, skipped: list[str], dataset: str | None) -> list[Path]:
    from iobench.report.feed import write_feed_report

    return write_feed_report(results, out, skipped)


def _workload_report(results: Path, out: Path, skipped: list[str], dataset: str | None) -> list[Path]:
    from iobench.report.workload import write_workload_report

    return write_workload_report(results, out, skipped)


def _holds_workloads(path: Path) -> bool:
    from iobench.results.store import first_kind
    from iobench.results.workload_record import WORKLOAD

    return first_kind(path) == WORKLOAD


def _compare_workloads(a: Path, b: Path) -> Comparison:
    """Per workload, layers and ranks both files measured, each phase's GB/s together, B against A, decided as run
    records are (`iobench.judge.workload.workload_change`)."""
    from iobench.report.workload import load_workloads, workload_changes

    files = [load_workloads(path) for path in (a, b)]
    changes, only_a, only_b = workload_changes(*files)
    rows = [(label, c.a.text(2), c.b.text(2), c.text) for label, c in changes]
    caption = (
        "GB/s together: every rank's bytes over the slowest rank's seconds, the checkpoints' median [its interval]"
    )
    return _measurements(a, b, caption, rows, (only_a, only_b), [x for f in files for x in f.skipped])


def _run_report(results: Path, out: Path, skipped: list[str], dataset: str | None) -> list[Path]:
    from iobench.report.report import write_report  # matplotlib loads only when a report is made

    return write_report(results, out, skipped, dataset)


def _holds_checkpoints(path: Path) -> bool:
    from iobench.results.checkpoint_file import holds_checkpoints

    return holds_checkpoints(path)


def _holds_feed(path: Path) -> bool:
    from iobench.results.feed_record import FEED
    from iobench.results.store import first_kind

    return first_kind(path) == FEED


def _compare_checkpoints(a: Path, b: Path) -> Comparison:
    """Per save or restore both files measured (a library, a state size, a cache, a save mode), B against A by each
    round's GB/s, decided as run records are (`iobench.judge.change`): not comparable across loads."""
    from iobench.report.checkpoints import checkpoint_changes, range_text
    from iobench.results.checkpoint_file import load_checkpoints

    files = [load_checkpoints(path) for path in (a, b)]
    changes, only_a, only_b = checkpoint_changes(*files)
    rows = [(c.label, range_text(c.a), range_text(c.b), c.verdict.text) for c in changes]
    caption = "seconds: the median of the rounds [min-max]; a save until durable"
    return _measurements(a, b, caption, rows, (only_a, only_b), [x for f in files for x in f.skipped])


def _measurements(
    a: Path, b: Path, caption: str, rows: list[tuple[str, ...]], only: tuple[int, int], skipped: list[str]
) -> Comparison:
    """A table of the measurements two files share, B against A; one line where they share none."""
    if not rows:
        raise IobenchError(f"{a} and {b} have no measurement in common ({only[0]} in A, {only[1]} in B)")
    footer = f"{len(rows)} matching measurement(s); {only[0]} only in A, {only[1]} only in B"
    return Comparison(caption, ("measurement", "A", "B", "verdict"), rows, footer, skipped)


def _compare_feed(a: Path, b: Path) -> Comparison:
    """Per question both files answered (a workload, format, loader, cache and step), B's accelerators against A's,
    decided by the judgement (`iobench.judge.feed_change.feed_change`)."""
    from iobench.report.feed import feed_changes, load_feed

    files = [load_feed(path) for path in (a, b)]
    pairs, only_a, only_b = feed_changes(*files)
    if not pairs:
        raise IobenchError(f"{a} and {b} have no feed question in common ({only_a} in A, {only_b} in B)")
    rows = [
        (
            f"{ra.workload} ({ra.compute_s * 1000:g} ms), {ra.format} read by {ra.loader}, {ra.cache}",
            str(change.n_a),
            str(change.n_b),
            change.text,
        )
        for ra, _rb, change in pairs
    ]
    return Comparison(
        "accelerators fed at the workload's AU (the latest answer of each file, per step)",
        ("question", "A", "B", "verdict"),
        rows,
        f"{len(pairs)} matching question(s); {only_a} only in A, {only_b} only in B",
        [line for loaded in files for line in loaded.skipped],
    )


def _compare_runs(a: Path, b: Path) -> Comparison:
    """Per configuration both files hold, B's samples/s against A's (`iobench.judge.change.compare_change`)."""
    from iobench.judge.change import compare_change
    from iobench.report.report import compare, describe
    from iobench.results.store import load_records

    skipped = [line for path in (a, b) for line in load_records(path).skipped]
    pairs, only_a, only_b = compare(a, b)
    if not pairs:
        raise IobenchError(f"{a} and {b} have no configuration in common ({only_a} in A, {only_b} in B)")
    changes = [(ra, compare_change(ra, rb)) for ra, rb, _change in pairs]
    return Comparison(
        "samples/s: the median of the runs [its interval, how sure]",
        ("configuration", "A samples/s", "B samples/s", "verdict"),
        [(describe(ra), c.a.text(), c.b.text(), c.text) for ra, c in changes],
        f"{len(pairs)} matching configuration(s) ({_counts(c for _, c in changes)}); {only_a} only in A, "
        f"{only_b} only in B",
        skipped,
    )


def rerun_comparison(outcome: RerunOutcome, runs: int, results: Path) -> Comparison:
    """`compare --rerun`'s table: each pair measured again in turn, B against A by their pairs, and why."""
    rows = [
        (
            r.label,
            r.change.a.text(),
            r.change.b.text(),
            r.change.text if r.change.decided else r.change.kind,
            r.change.reason,
        )
        for r in outcome.reruns
    ]
    return Comparison(
        f"measured again in turn, {runs} rounds; samples/s: the median of the runs [its interval, how sure]",
        ("configuration", "A samples/s", "B samples/s", "verdict", "why"),
        rows,
        f"{len(outcome.reruns)} configuration pair(s) measured again ({_counts(r.change for r in outcome.reruns)}); "
        f"{outcome.only_a} only in A, {outcome.only_b} only in B; the new records appended to {results}",
    )


def _counts(changes: Iterable[Change]) -> str:
    """How many of each verdict, in the judgement's order: `2 faster, 1 no decidable difference`."""
    from iobench.judge.change import KINDS

    kinds = [c.kind for c in changes]
    return ", ".join(f"{kinds.count(k)} {k}" for k in KINDS if kinds.count(k))


# in the order a file is recognised: a file of neither checkpoint nor feed records is read as run records
KINDS = (
    RecordKind("checkpoint records", _holds_checkpoints, _checkpoint_report, _compare_checkpoints),
    RecordKind("feed answers", _holds_feed, _feed_report, _compare_feed),
    RecordKind("checkpoint workload records", _holds_workloads, _workload_report, _compare_workloads),
    RecordKind("run records", lambda path: True, _run_report, _compare_runs, rerun=True),
)


def kind_of(path: Path) -> RecordKind:
    """The kind of records a results file holds, by its first record."""
    return next(k for k in KINDS if k.holds(path))
