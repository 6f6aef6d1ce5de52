"""`report` of `iobench checkpoint`'s records: per state size, each library's medians (save until it returns, until
done and until durable; restores warm and cold), its cold GB/s, peak memory, bytes on disk, whether it came back
exact, the kill test's counts, and the answer; a CSV of every trial beside it."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from iobench.checkpoint.bench import answer, summary
from iobench.checkpoint.records import load_checkpoints
from iobench.errors import IobenchError
from iobench.report.exports import csv_cell
from iobench.report.warnings import md_text
from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointKills
from iobench.system.fsutil import atomic_write_text, output_folder

CSV_FIELDS = ("library", "params", "layout", "op", "cache", "trial", "seconds", "done_seconds", "durable_seconds",
              "gb_per_s", "bytes_on_disk", "peak_rss_bytes", "anon_bytes", "file_bytes", "read_bytes",
              "resident_before", "exact", "load_before", "timestamp")  # fmt: skip


def write_checkpoint_report(results: Path, out: Path, skipped: list[str] | None = None) -> Path:
    """report.md and results.csv in `out`."""
    loaded = load_checkpoints(results)
    if skipped is not None:
        skipped.extend(loaded.skipped)
    if not loaded.trials:
        raise IobenchError(f"{results}: no checkpoint records")
    output_folder(out, "--out")
    lines = [f"# iobench checkpoint report: {results.name}", "", f"{len(loaded.trials)} trials from `{results}`; "
             "seconds are the medians of the rounds, GB = 10^9 bytes.", ""]  # fmt: skip
    kills = _kills(loaded.kills)  # a library that ever came back silently corrupted is no answer, at any size
    sizes = sorted({(r.params, r.layout) for r in loaded.trials})
    for params, layout in sizes:
        mine = [r for r in loaded.trials if r.params == params and r.layout == layout]
        rows = summary(mine)
        lines += [f"## {mine[0].state_bytes / 1e9:.2f} GB state ({params:,} parameters, {md_text(layout)})", ""]
        said = answer(rows, kills or None)
        lines += [md_text(said), ""] if said else []
        lines += [*table(rows), ""]
    if kills:
        states = sorted({f"{r.state_bytes / 1e6:.0f} MB" for r in loaded.kills})
        lines += [f"## What survives a kill ({', '.join(states)} state)", "", *kill_table(kills), ""]
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.to_json().items()} for r in loaded.trials)
    atomic_write_text(out / "results.csv", text.getvalue())
    return path


def _kills(records: list[CheckpointKills]) -> dict[str, dict[str, int]]:
    """Each library's kill-test counts, summed over the file's kill tests."""
    found: dict[str, dict[str, int]] = {}
    for r in records:
        counts = found.setdefault(r.library, dict.fromkeys(KILL_OUTCOMES, 0))
        for outcome in KILL_OUTCOMES:
            counts[outcome] += r.counts.get(outcome, 0)
    return found


def table(rows: list[dict]) -> list[str]:
    head = ["library", "save s", "done s", "durable s", "restore warm s", "restore cold s", "GB/s cold",
            "restore peak GB", "on disk GB", "exact"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cold = r["bytes_on_disk"] / r["cold_s"] / 1e9 if r.get("cold_s") else None
        cells = [md_text(r["library"]) + (" (reference)" if r["ceiling"] else ""), _s(r["save_s"]),
                 _s(r.get("done_s")), _s(r["durable_s"]), _s(r.get("warm_s")),
                 _s(r.get("cold_s")), f"{cold:.2f}" if cold else "-",
                 f"{r['restore_peak'] / 1e9:.2f}" if r["restore_peak"] else "-", f"{r['bytes_on_disk'] / 1e9:.2f}",
                 "-" if r["exact"] is None else "yes" if r["exact"] else "NO"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def kill_table(kills: dict[str, dict[str, int]]) -> list[str]:
    head = ["library", "kills", *KILL_OUTCOMES]
    lines = ["A save of step N+1 over step N killed at random moments, then restored:", "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]  # fmt: skip
    for name, counts in kills.items():
        lines.append(f"| {md_text(name)} | {sum(counts.values())} | "
                     + " | ".join(str(counts[o]) for o in KILL_OUTCOMES) + " |")  # fmt: skip
    return lines


def _s(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"
