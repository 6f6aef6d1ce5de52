"""`iobench report` and `iobench compare`: Markdown with plots from result records, and A/B changes."""

from __future__ import annotations

import math
from pathlib import Path

from iobench.errors import IobenchError
from iobench.judge.warnings import record_warnings
from iobench.measuring.limit_rule import with_limits
from iobench.plan.labels import settings_label
from iobench.plan.run_options import option_words
from iobench.report import plots
from iobench.report.answer import answer_lines, collapsed, sorted_for_table
from iobench.report.exports import records_csv, write_report_files
from iobench.report.formats_table import format_lines
from iobench.report.tables import au_text, percent_text, shuffle_text
from iobench.results.limits import LOOPBACK, limits_key, remote_limits_key
from iobench.results.markdown import md_text
from iobench.results.record import RecordedConfig, RunRecord
from iobench.results.store import latest_per_config, load_all_limits, load_all_remote_limits, load_records
from iobench.system.fsutil import output_folder

ENVIRONMENT = (
    "hostname",
    "cpu_model",
    "cpu_count",
    "ram_bytes",
    "gpu_name",
    "kernel",
    "data_filesystem",
    "data_device",
    "python_version",
    "torch_version",
    "tensordict_version",
    "numpy_version",
    "h5py_version",
    "lmdb_version",
    "lz4_version",
    "git_sha",
)


def superseded(records: list[RunRecord], kept: list[RunRecord]) -> list[RunRecord]:
    """The records a later record of the same configuration replaced in the report (it kept 2 of 3 and said nothing
    of the third)."""
    shown = {id(r) for r in kept}
    return [r for r in records if id(r) not in shown]


def _left_out(gone: list[RunRecord]) -> list[str]:
    """The report's line on the records it does not show, and why."""
    if not gone:
        return []
    names = "; ".join(
        f"{md_text(r.label)} {md_text(settings_label(r, measured=False))} of {r.timestamp}" for r in gone[:5]
    )
    more = f" and {len(gone) - 5} more" if len(gone) > 5 else ""
    return [
        f"Left out: {len(gone)} earlier record(s) of a configuration measured again, the latest of each shown "
        f"(results.csv has them all, `superseded` true): {names}{more}.",
        "",
    ]


def _with_limits(records: list[RunRecord], results: Path) -> list[RunRecord]:
    """Recompute % of limit from the limits stored beside the results (for the host and data
    device, or the object store and profile, each record was measured on), by the current rule."""
    stored, remote = load_all_limits(results), load_all_remote_limits(results)
    if not stored and not remote:
        return records
    return [
        with_limits(r, stored.get(_limits_key(r)) if r.config.storage == "local" else remote.get(_remote_key(r)))
        for r in records
    ]


def _limits_key(r: RunRecord) -> str:
    return limits_key(r.environment.hostname, r.environment.data_device, r.config.read_limit_mb_per_s)


def _remote_key(r: RunRecord) -> str:
    c = r.config
    if c.remote_profile == "external":
        return remote_limits_key(r.environment.hostname, r.system.data_block_device or "", None, None)
    return remote_limits_key(r.environment.hostname, LOOPBACK, c.remote_latency_ms, c.remote_connection_mb_per_s)


def write_report(results: Path, out: Path, skipped: list[str] | None = None, dataset: str | None = None) -> list[Path]:
    """report.md, its plots, report.html (the plots embedded) and results.csv in out, each path written; lines of the
    results file that were not records go to skipped; `dataset` keeps that dataset's records alone."""
    loaded = load_records(results)
    if skipped is not None:
        skipped.extend(loaded.skipped)
    every = loaded.records if dataset is None else [r for r in loaded.records if r.config.dataset == dataset]
    records = _with_limits(latest_per_config(loaded.records), results)
    gone = superseded(every, latest_per_config(every))
    if dataset is not None:
        found = sorted({r.config.dataset for r in records})
        records = [r for r in records if r.config.dataset == dataset]
        if not records:
            raise IobenchError(f"{results}: no records of dataset {dataset!r} (it holds {', '.join(found)})")
    if not records:
        raise IobenchError(f"{results}: no records")
    output_folder(out, "--out")
    images = [(title, plots.render(name, records, out)) for name, (title, _) in plots.PLOTS.items()]
    lines = [
        f"# iobench report: {results.name}",
        "",
        f"{len(records)} configurations from `{results}`.",
        "",
        *_left_out(gone),
    ]
    groups = workload_groups(records)
    lines += answer_lines(groups)
    lines += format_lines(groups)
    lines += _environment(records)
    lines += [
        "## Results",
        "",
        "Epoch seconds are the median of the timed epochs with [min-max] and the median "
        "absolute deviation; MB = 10^6 bytes.",
        "",
    ]
    for name, group in groups.items():
        if len(groups) > 1:
            lines += ["", f"### {md_text(name)}", ""]
        lines += _table(sorted_for_table(group))
    notes = record_warnings(records)
    if notes:
        lines += ["", "### Warnings", ""] + collapsed(notes)
    for title, image in images:
        if image is not None:
            lines += ["", f"## {title}", "", f"![{title}]({image.name})"]
    shown = [image for _, image in images if image is not None]
    return write_report_files(out, lines, records_csv(records + gone, superseded=gone), shown)


def workload_of_record(r: RunRecord) -> str:
    """What was read and under which constraint, in words: the workload (or the source), the sample size,
    the transform, a page-cache budget or a read throttle, object storage and its profile (a figure under a
    budget, or from a 30 ms store, answers another question: it is kept apart from the local, unconstrained ones)."""
    d, c = r.dataset, r.config
    what = f"from {Path(d.source).name}" if d.source else (d.workload or "tabular")
    said = "".join(f", {words}" for words in option_words(c))
    return f"{what}, {d.sample_bytes:,} B/sample{said}{_storage_of(c)}"


def _storage_of(c: RecordedConfig) -> str:
    """'' on local files; object storage (a library's remote path or FUSE) per profile and its numbers."""
    if c.storage == "local":
        return ""
    if c.remote_profile is None or c.remote_latency_ms is None:  # an --endpoint-url: no shaper of iobench's
        return ", from object storage (an endpoint as it is)"
    bandwidth = f", {c.remote_connection_mb_per_s:g} MB/s per connection" if c.remote_connection_mb_per_s else ""
    return f", from object storage ({c.remote_profile}: {c.remote_latency_ms:g} ms first byte{bandwidth})"


def workload_groups(records: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """Records grouped by workload, sample size, transform and constraint, smallest samples first."""
    groups: dict[str, list[RunRecord]] = {}

    def order(r: RunRecord) -> tuple:
        c = r.config
        constraint = (c.cache_budget or "", c.read_limit_mb_per_s or 0, c.storage != "local", _storage_of(c))
        return r.dataset.sample_bytes, c.transform, c.transform_on or "", *constraint

    for r in sorted(records, key=order):
        groups.setdefault(workload_of_record(r), []).append(r)
    return groups


def _environment(records: list[dict]) -> list[str]:
    lines = ["## Where these were measured", "", "| field | value |", "| --- | --- |"]
    for key in ENVIRONMENT:
        values = sorted({str(getattr(r.environment, key)) for r in records})
        if key == "ram_bytes":
            values = [f"{int(v) / 2**30:.1f} GiB" for v in values if v]
        lines.append(f"| {key} | {md_text(', '.join(values)) or '-'} |")
    # schema 3: every other library on the runs' paths (older records name none, and their table stays as it was)
    named = sorted(
        {p for r in records for p in r.environment.packages} - {k.removesuffix("_version") for k in ENVIRONMENT}
    )
    for package in named:
        values = sorted({r.environment.packages.get(package, "-") for r in records})
        lines.append(f"| {md_text(package)} | {md_text(', '.join(values))} |")
    return lines + [""]


def _table(records: list[RunRecord]) -> list[str]:
    head = (
        "dataset",
        "format",
        "loader",
        "settings",
        "order",
        "cache",
        "device",
        "epoch s median [min-max] (MAD)",
        "samples/s",
        "MB/s",
        "% of limit",
    )
    au = any(r.epochs.accelerator_utilisation is not None for r in records)
    if au:
        head = (*head[:9], "AU (step)", *head[9:])
    shuffled = any(r.epochs.shuffle_spread is not None for r in records)
    if shuffled:  # records made before the scores existed keep their table as it was
        head = (*head[:5], "shuffle spread/order", *head[5:])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in records:
        c, e = r.config, r.epochs
        limit = r.limit.percent_of_limit
        cells = (
            c.dataset,
            c.format,
            c.loader,
            settings_label(r),
            c.order,
            c.cache,
            c.device,
            f"{e.epoch_seconds_median:.3f} [{e.epoch_seconds_min:.3f}-{e.epoch_seconds_max:.3f}] "
            f"({e.epoch_seconds_mad:.3f})" + (" partial" if e.partial else ""),
            f"{e.samples_per_s:,.0f}",
            f"{e.mb_per_s:,.1f}",
            percent_text(limit),
        )
        if au:
            cells = (*cells[:9], au_text(r), *cells[9:])
        if shuffled:
            cells = (*cells[:5], shuffle_text(r), *cells[5:])
        lines.append("| " + " | ".join(md_text(c) for c in cells) + " |")
    return lines


def compare(a: Path, b: Path) -> tuple[list[tuple[RunRecord, RunRecord, float]], int, int]:
    """Matching configurations (record in A, record in B, relative change of MB/s) and the unmatched counts."""
    left = {r.identity(): r for r in latest_per_config(load_records(a).records)}
    right = {r.identity(): r for r in latest_per_config(load_records(b).records)}
    pairs = [(left[k], right[k], _change(left[k], right[k])) for k in left if k in right]
    return pairs, len(left) - len(pairs), len(right) - len(pairs)


def _change(a: RunRecord, b: RunRecord) -> float:
    """B's MB/s relative to A's; NaN when A moved nothing (there is no ratio to 0)."""
    base = a.epochs.mb_per_s
    return b.epochs.mb_per_s / base - 1 if base > 0 else math.nan


def describe(r: RunRecord) -> str:
    c = r.config
    return (
        " ".join(str(x) for x in (c.dataset, c.format, c.loader, c.order, c.cache, c.device))
        + " "
        + settings_label(r, measured=False)
    )
