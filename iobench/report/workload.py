"""`report` and `compare` of `checkpoint --workload`'s records: per record, each checkpoint's duration and GB/s written
and read, then the judgement's answer and rules line (`iobench.judge.workload`), decided from the raw seconds."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from iobench.errors import IobenchError
from iobench.judge.change import Change
from iobench.judge.workload import READ, WRITE, answer, phase_of, workload_change, workload_rules_line
from iobench.report.exports import csv_cell, write_report_files
from iobench.results.markdown import md_table, md_text
from iobench.results.store import parsed_file
from iobench.results.workload_record import WorkloadRecord
from iobench.system.fsutil import output_folder

CSV_FIELDS = ("timestamp", "workload", "layers", "ranks", "checkpoint_bytes", "phase", "checkpoint", "seconds")
CSV_FIELDS += ("gb_per_s_slowest_rank", "gb_per_s_together")


@dataclass
class WorkloadFile:
    records: list[WorkloadRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load_workloads(path: Path) -> WorkloadFile:
    """Every checkpoint workload record of the file; other lines skipped with the reason."""
    return WorkloadFile(*parsed_file(path, WorkloadRecord.from_json, "a checkpoint workload record"))


def write_workload_report(results: Path, out: Path, skipped: list[str] | None = None) -> list[Path]:
    """report.md (each record's checkpoints, its answer and rules), report.html and results.csv (a row a checkpoint
    and phase) in `out`: the paths written."""
    loaded = load_workloads(results)
    if skipped is not None:
        skipped.extend(loaded.skipped)
    if not loaded.records:
        raise IobenchError(f"{results}: no checkpoint workload records")
    output_folder(out, "--out")
    lines = [f"# iobench checkpoint workload report: {md_text(results.name)}", ""]
    head = ["checkpoint", "write s", "write GB/s slowest rank", "read s", "read GB/s slowest rank"]
    for r in loaded.records:
        lines += [f"## {md_text(r.workload)}, {r.layers} of {r.layers_whole} layers ({md_text(r.timestamp)})", ""]
        w, rd = phase_of(r, WRITE), phase_of(r, READ)
        rows = [
            [
                str(k + 1),
                f"{w.seconds[k]:.2f}",
                f"{w.rank_gb_per_s[k]:.2f}",
                f"{rd.seconds[k]:.2f}",
                f"{rd.rank_gb_per_s[k]:.2f}",
            ]
            for k in range(min(len(w.seconds), len(rd.seconds)))
        ]
        lines += [*md_table(head, rows), "", md_text(answer(r)), "", md_text(workload_rules_line(r)), ""]
    return write_report_files(out, lines, _csv(loaded.records))


def _csv(records: list[WorkloadRecord]) -> str:
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(CSV_FIELDS)
    for r in records:
        for phase in (WRITE, READ):
            p = phase_of(r, phase)
            for k, seconds in enumerate(p.seconds):
                row = (r.timestamp, r.workload, r.layers, r.ranks, r.checkpoint_bytes, phase, k + 1, seconds)
                writer.writerow([csv_cell(v) for v in (*row, p.rank_gb_per_s[k], p.together_gb_per_s[k])])
    return text.getvalue()


def workload_changes(a: WorkloadFile, b: WorkloadFile) -> tuple[list[tuple[str, Change]], int, int]:
    """B against A, per workload, layers and ranks both files measured (the latest record of each) and phase."""
    latest_a = {r.identity(): r for r in a.records}
    latest_b = {r.identity(): r for r in b.records}
    common = [k for k in latest_a if k in latest_b]
    changes = [
        (f"{k[0]}, {k[1]} layers, {k[2]} rank(s), {phase}", workload_change(latest_a[k], latest_b[k], phase))
        for k in common
        for phase in (WRITE, READ)
    ]
    return changes, len(latest_a) - len(common), len(latest_b) - len(common)
