"""`report` and `compare` of `iobench feed`'s records, and the table the console prints of a session: per count of
accelerators, the least rank's AU, its verdict, MB/s together and each, the wait; then the answer. Every verdict and
the answer are the judgement's (`iobench.judge.feed`), decided from the record's raw values; one builder of the
table's cells serves the console and the report."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.feed.workloads import closed_of
from iobench.judge.feed import dlio_au, feed_verdict, record_answer
from iobench.judge.feed_change import FeedChange, feed_change
from iobench.judge.rules import rules_line
from iobench.report.exports import csv_cell, write_report_files
from iobench.results.feed_record import FeedPoint, FeedRecord
from iobench.results.markdown import md_table, md_text
from iobench.results.store import parsed_file
from iobench.system.fsutil import output_folder

CSV_FIELDS = ("timestamp", "workload", "format", "loader", "cache", "dataset", "accelerators", "least_rank_au")
CSV_FIELDS += ("verdict", "mb_per_s", "wait_ms_per_batch", "cpu_utilisation", "percent_of_limit", "first_batch_share")
CSV_FIELDS += ("store", "requests", "request_bytes")  # store: "" the data folder, else the object store's


@dataclass
class FeedFile:
    records: list[FeedRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load_feed(path: Path) -> FeedFile:
    """Every feed record of the file; other lines skipped with the reason."""
    return FeedFile(*parsed_file(path, FeedRecord.from_json, "a feed record"))


def count_head(record: FeedRecord) -> list[str]:
    """The table's columns; the store's requests where iobench served the dataset and counted them."""
    head = ["accelerators", "least rank AU", "AU as DLIO counts", "verdict", "MB/s together", "MB/s each"]
    return [*head, "ms waited a batch", *(["requests"] if _counted(record) else [])]


def count_cells(point: FeedPoint, record: FeedRecord) -> list[str]:
    dlio = dlio_au(point)
    cells = [
        str(point.n),
        f"{point.au:.3f}",
        f"{dlio:.3f}" if dlio is not None else "-",
        feed_verdict(point, record.threshold, record.rules),
        f"{point.mb_per_s:,.0f}",
        f"{point.mb_per_s / point.n:,.0f}",
        f"{point.wait_ms_per_batch:,.0f}",
    ]
    return [*cells, *([f"{point.requests:,}" if point.requests is not None else "-"] if _counted(record) else [])]


def _counted(record: FeedRecord) -> bool:
    return any(p.requests is not None for p in record.points)


def title_of(r: FeedRecord) -> str:
    step = f"{r.compute_s * 1000:g} ms a batch"
    whose = f" ({r.workloads}'s)" if r.workloads else ""
    where = f" from object storage ({r.store})" if r.store else ""
    return f"{r.workload}{whose}, {step}: {r.format} read by {r.loader}, {r.cache} epochs over {r.dataset}{where}"


def write_feed_report(results: Path, out: Path, skipped: list[str] | None = None) -> list[Path]:
    """report.md (each answer: its counts and the judgement's answer), the same as report.html and results.csv (a row
    a count) in `out`: the paths written."""
    loaded = load_feed(results)
    if skipped is not None:
        skipped.extend(loaded.skipped)
    if not loaded.records:
        raise IobenchError(f"{results}: no feed records")
    output_folder(out, "--out")
    lines = [
        f"# iobench feed report: {md_text(results.name)}",
        "",
        f"{len(loaded.records)} answer(s) from `{md_text(str(results))}`: each count of emulated accelerators is that "
        "many ranks, each reading its shard with the workload's batch and step; MB = 10^6 bytes.",
        "",
    ]
    for r in loaded.records:
        lines += [f"## {md_text(title_of(r))} ({md_text(r.timestamp)})", ""]
        lines += [
            f"Batch {r.batch_size} of {r.sample_bytes:,} bytes a sample as read (its data and label) every "
            f"{r.compute_s * 1000:g} ms: "
            f"{r.demand_mb_per_s:,.0f} MB/s an {md_text(r.accelerator)}; every rank's AU at least {r.threshold:.2f}.",
            "",
        ]
        lines += [*md_table(count_head(r), [count_cells(p, r) for p in r.points]), ""]
        lines += [md_text(record_answer(r).line), "", md_text(rules_line(r, closed_of(r.workload))), ""]
    return write_report_files(out, lines, _csv(loaded.records))


def _csv(records: list[FeedRecord]) -> str:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(CSV_FIELDS)
    for r in records:
        for p in r.points:
            row = (r.timestamp, r.workload, r.format, r.loader, r.cache, r.dataset, p.n, p.au)
            row += (feed_verdict(p, r.threshold, r.rules), p.mb_per_s, p.wait_ms_per_batch, p.cpu_utilisation)
            row += (p.percent_of_limit, p.first_batch_share, r.store, p.requests, p.request_bytes)
            writer.writerow([csv_cell(v) for v in row])
    return text.getvalue()


def feed_changes(a: FeedFile, b: FeedFile) -> tuple[list[tuple[FeedRecord, FeedRecord, FeedChange]], int, int]:
    """Per question both files answered (`FeedRecord.identity`: a workload, format, loader, cache, step and store), the
    latest answer of each, B against A; and how many questions only A, only B answered."""
    latest_a = {r.identity(): r for r in a.records}
    latest_b = {r.identity(): r for r in b.records}
    common = [k for k in latest_a if k in latest_b]
    pairs = [(latest_a[k], latest_b[k], feed_change(latest_a[k], latest_b[k])) for k in common]
    return pairs, len(latest_a) - len(common), len(latest_b) - len(common)
