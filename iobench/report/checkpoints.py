"""`report` and `compare` of `iobench checkpoint`'s records, and the tables the console prints of a session: per state
size, each library's and save mode's medians (the first save and the steady one, until returned, done and durable;
restores warm and cold), GB/s, peak memory, bytes stored, whether it came back exact; seconds and GB/s against size;
the kill test's counts; the answer (the judgement's). One builder of each table's cells serves the console and the
report; `compare` decides each measurement with the judgement's rule (`iobench.judge.change`), as it decides run
records."""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass
from pathlib import Path

from iobench.errors import IobenchError
from iobench.judge.change import ROUND_UNITS, Change, change_of
from iobench.judge.checkpoints import checkpoint_answer
from iobench.judge.rules import checkpoint_rules_line
from iobench.report.exports import csv_cell, write_report_files
from iobench.results.checkpoint_file import CheckpointFile, load_checkpoints
from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointTrial
from iobench.results.checkpoint_summary import LibraryRow, kill_counts, rows_of
from iobench.results.markdown import md_table, md_text
from iobench.system.fsutil import output_folder

CSV_FIELDS = (
    "library",
    "save_mode",
    "target",
    "params",
    "layout",
    "op",
    "cache",
    "trial",
    "seconds",
    "done_seconds",
    "durable_seconds",
    "first_seconds",
    "first_durable_seconds",
    "removed_seconds",
    "step",
    "blocked_seconds",
    "background_seconds",
    "step_rate",
    "step_rate_during",
    "started_seconds",
    "allocated_seconds",
    "restored_seconds",
    "stepped_seconds",
    "gb_per_s",
    "bytes_on_disk",
    "peak_rss_bytes",
    "anon_bytes",
    "file_bytes",
    "read_bytes",
    "resident_before",
    "exact",
    "torch_threads",
    "load_before",
    "load_after",
    "other_cpu_before",
    "other_cpu_after",
    "timestamp",
)


def summary_head(caches: tuple[str, ...]) -> list[str]:
    return [
        "library",
        "mode",
        "first durable s",
        "save s",
        "done s",
        "durable s",
        *(f"restore {c} s" for c in caches),
        "GB/s durable",
        "GB/s restore",
        "restore peak GB",
        "stored GB",
        "exact",
    ]


def summary_cells(r: LibraryRow, caches: tuple[str, ...]) -> list[str]:
    """One row's cells, as text (the console escapes them for rich, the report for Markdown)."""
    restore = {"warm": r.warm_s, "cold": r.cold_s}
    exact = "-" if r.exact is None else "yes" if r.exact else "NO"
    return [
        r.who + (" (reference)" if r.ceiling else ""),
        r.save_mode,
        _s(r.first_durable_s),
        _s(r.save_s),
        _s(r.done_s),
        _s(r.durable_s),
        *(_s(restore[c]) for c in caches),
        _rate(r.gb_per_s(r.durable_s)),
        _rate(r.gb_per_s(r.restore_s)),
        f"{r.restore_peak / 1e9:.2f}" if r.restore_peak else "-",
        f"{r.bytes_stored / 1e9:.2f}",
        exact,
    ]


def beside_head() -> list[str]:
    return ["library", "mode", "step", "blocked s", "background s", "steps/s alone", "steps/s beside", "step rate lost"]


def beside_cells(r: LibraryRow) -> list[str]:
    """The training loop beside one library's steady save (`--step`): how long the save blocked it, an asynchronous
    save's background time, and the loop's rate beside it against alone."""
    lost = "-"
    if r.step_rate and r.step_rate_during is not None:
        share = 1 - r.step_rate_during / r.step_rate
        lost = f"{share:.0%}" if share >= 0.005 else "none"  # never "-0%": beside the save it kept its rate
    during = f"{r.step_rate_during:,.1f}" if r.step_rate_during is not None else "-"
    alone = f"{r.step_rate:,.1f}" if r.step_rate is not None else "-"
    return [r.who, r.save_mode, r.step, _s(r.blocked_s), _s(r.background_s), alone, during, lost]


RESTART_PARTS = ("started_seconds", "allocated_seconds", "restored_seconds", "stepped_seconds")


def restart_head() -> list[str]:
    return [
        "library",
        "state GB",
        "cache",
        "start+import s",
        "allocate s",
        "restore s",
        "first step s",
        "unaccounted s",
        "whole s",
    ]


def restart_rows(trials: list[CheckpointTrial]) -> list[list[str]]:
    """Each library's restart per state and cache, medians of the rounds: the parts, what each round's whole holds
    beyond its parts (its line's printing; under ranks, the processes' exit), the whole."""
    rows = []
    for who, size, cache in dict.fromkeys((t.who, t.state_bytes, t.cache) for t in trials if t.op == "restart"):
        mine = [t for t in trials if t.op == "restart" and (t.who, t.state_bytes, t.cache) == (who, size, cache)]
        parts = [statistics.median(getattr(t, k) or 0.0 for t in mine) for k in RESTART_PARTS]
        left = statistics.median(t.seconds - sum(getattr(t, k) or 0.0 for k in RESTART_PARTS) for t in mine)
        whole = statistics.median(t.seconds for t in mine)
        rows.append([who, f"{size / 1e9:.2f}", cache or "-", *(_s(p) for p in parts), _s(left), _s(whole)])
    return rows


def size_head(sizes: list[int]) -> list[str]:
    return ["library", "mode", *(f"{b / 2**30:.2f} GiB {what}" for b in sizes for what in ("durable", "restore"))]


def size_cells(label: tuple[str, str], by_size: dict[int, LibraryRow | None], sizes: list[int]) -> list[str]:
    """One library's seconds and GB/s at each size: `1.23 s, 0.87 GB/s`."""
    cells = list(label)
    for size in sizes:
        r = by_size.get(size)
        for seconds in (r.durable_s, r.restore_s) if r else (None, None):
            cells.append(f"{seconds:.2f} s, {r.gb_per_s(seconds):.2f} GB/s" if r and seconds else "-")
    return cells


def by_size(rows: dict[int, list[LibraryRow]]) -> dict[tuple[str, str], dict[int, LibraryRow]]:
    """Each library and mode's row at each state size (bytes)."""
    found: dict[tuple[str, str], dict[int, LibraryRow]] = {}
    for size, size_rows in rows.items():
        for r in size_rows:
            found.setdefault((r.who, r.save_mode), {})[size] = r
    return found


def kill_head() -> list[str]:
    return ["library", "mode", "kills", *KILL_OUTCOMES]


def kill_cells(key: tuple[str, str], counts: dict[str, int]) -> list[str]:
    return [*key, str(sum(counts.values())), *(str(counts[o]) for o in KILL_OUTCOMES)]


def _s(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def _rate(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def write_checkpoint_report(results: Path, out: Path, skipped: list[str] | None = None) -> list[Path]:
    """report.md, the same as report.html and results.csv in `out`: the paths written."""
    loaded = load_checkpoints(results)
    if skipped is not None:
        skipped.extend(loaded.skipped)
    if not loaded.trials:
        raise IobenchError(f"{results}: no checkpoint records")
    output_folder(out, "--out")
    lines = [
        f"# iobench checkpoint report: {md_text(results.name)}",
        "",
        f"{len(loaded.trials)} trials from "
        f"`{md_text(str(results))}`; seconds are the medians of the rounds (a save: the steady one, a job's "
        "next checkpoint; the first in a process beside it), GB = 10^9 bytes.",
        "",
    ]
    kills = kill_counts(loaded.kills)  # a library and mode whose kills ever lost the checkpoint is no answer
    rows: dict[int, list[LibraryRow]] = {}
    for params, layout in sorted({(r.params, r.layout) for r in loaded.trials}):
        mine = [r for r in loaded.trials if r.params == params and r.layout == layout]
        rows[mine[0].state_bytes] = size_rows = rows_of(mine)
        caches = tuple(c for c in ("warm", "cold") if any(r.cache == c for r in mine))
        described = f"from {mine[0].source}" if mine[0].source else layout  # a record keeps the file's name
        lines += [f"## {mine[0].state_bytes / 1e9:.2f} GB state ({params:,} parameters, {md_text(described)})", ""]
        if said := checkpoint_answer(size_rows, kills):
            lines += [md_text(said), "", md_text(checkpoint_rules_line(size_rows)), ""]
        lines += [*md_table(summary_head(caches), [summary_cells(r, caches) for r in size_rows]), ""]
        if stepped := [r for r in size_rows if r.step != "none"]:
            lines += ["The training loop beside each steady save:", ""]
            lines += [*md_table(beside_head(), [beside_cells(r) for r in stepped]), ""]
        if any(r.op == "restart" for r in mine):
            lines += ["A restart, a fresh process to its first training step:", ""]
            lines += [*md_table(restart_head(), restart_rows(mine)), ""]
    if len(rows) > 1:
        sizes = sorted(rows)
        table = [size_cells(k, v, sizes) for k, v in by_size(rows).items()]
        lines += ["## Against size", "", *md_table(size_head(sizes), table), ""]
    if kills:
        states = sorted({f"{r.state_bytes / 1e6:.0f} MB" for r in loaded.kills})
        lines += [
            f"## What survives a kill ({', '.join(states)} state)",
            "",
            "A save of step N+1 over step N killed at random moments, then restored:",
            "",
            *md_table(kill_head(), [kill_cells(k, c) for k, c in kills.items()]),
            "",
        ]
    return write_report_files(out, lines, _csv(loaded))


def _csv(loaded: CheckpointFile) -> str:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in r.to_json().items()} for r in loaded.trials)
    return text.getvalue()


@dataclass(frozen=True)
class Measured:
    """One measurement both files hold, and the judgement's verdict of B against A."""

    key: tuple
    a: list[float]  # each round's seconds (a save until durable, a restore until its last byte)
    b: list[float]
    verdict: Change

    @property
    def label(self) -> str:
        library, params, layout, op, cache, ranks, mode, target, step = self.key
        what = (f"{op} {cache}" if cache else f"{op} {mode}") + (f" beside {step}" if step != "none" else "")
        where = f" on {target}" if target != "local" else ""
        return f"{library}{f' x{ranks} ranks' if ranks > 1 else ''} {params:.3g} params {layout} {what}{where}"


def checkpoint_changes(a: CheckpointFile, b: CheckpointFile) -> tuple[list[Measured], int, int]:
    """The measurements both files hold, each decided as `compare` decides run records (`change_of`, on each
    round's GB/s); how many only A and only B hold."""
    ka, kb = _by_key(a.trials), _by_key(b.trials)
    common = [k for k in ka if k in kb]
    changes = [
        Measured(
            k,
            [r.timed_seconds for r in ka[k]],
            [r.timed_seconds for r in kb[k]],
            change_of(_rates(ka[k]), _rates(kb[k]), _busy(ka[k]), _busy(kb[k]), ROUND_UNITS),
        )
        for k in common
    ]
    return changes, len(ka) - len(common), len(kb) - len(common)


def _by_key(trials: list[CheckpointTrial]) -> dict[tuple, list[CheckpointTrial]]:
    found: dict[tuple, list[CheckpointTrial]] = {}
    for r in trials:
        found.setdefault(r.key(), []).append(r)
    return found


def _rates(trials: list[CheckpointTrial]) -> list[float]:
    return [r.state_bytes / r.timed_seconds / 1e9 for r in trials]


def _busy(trials: list[CheckpointTrial]) -> float | None:
    """The most cores other programs used around the trials; None where any was not measured (schema 1)."""
    seen = [r.host.busy for r in trials]
    return None if any(x is None for x in seen) else max(seen)  # type: ignore[type-var]


def range_text(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"{middle:.3f} s" + (f" [{min(values):.3f}-{max(values):.3f}]" if len(values) > 1 else "")
