"""Console tables and warnings built from result records."""

from __future__ import annotations

import io
import pstats
from pathlib import Path

from rich.table import Table

from iobench.results.store import relative_to_fastest
from iobench.results.stats import warnings

STRAGGLER_LIMIT = 1.2  # slowest rank over fastest, above which the record is flagged


def settings_label(r: dict) -> str:
    """The knobs of a record that differ between configurations, in a few characters."""
    parts = [f"bs={r['batch_size']}", f"w={r['num_workers']}"]
    if r.get("backend"):  # under torchrun, where the thread count is torchrun's to set
        parts.insert(0, f"ranks={r['world_size']}" + (f"/{r['nodes']}n" if r.get("nodes", 1) > 1 else ""))
        parts.append(f"threads={r['torch_threads']}")
    if r["loader"] == "dataloader":
        parts.append(f"fetch={r['fetch']}")
    if r.get("prefetch_factor"):
        parts.append(f"pf={r['prefetch_factor']}")
    if r.get("pin_memory"):
        parts.append("pin")
    if r.get("prefetch_thread"):
        parts.append(f"thread={r['prefetch_thread']}")
    return " ".join(parts)


def _residency(r: dict) -> str:
    before = r.get("residency_before") or []
    return f"{r['cache']} ({max(before):.0%})" if before else r["cache"]


def results_table(records: list[dict], title: str) -> Table:
    table = Table(title=title)
    columns = (
        ("format", "left"), ("loader", "left"), ("settings", "left"), ("order", "left"),
        ("cache (max resident)", "left"), ("epoch s (median, min-max)", "right"), ("samples/s", "right"),
        ("MB/s", "right"), ("% of limit", "right"), ("vs fastest", "right"),
    )  # fmt: skip
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for r, rel in zip(records, relative_to_fastest(records), strict=True):
        partial = " (partial)" if r["partial"] else ""
        limit = r.get("percent_of_limit")
        table.add_row(
            r["format"],
            r["loader"],
            settings_label(r),
            r["order"],
            _residency(r),
            f"{r['epoch_seconds_median']:.3f} ({r['epoch_seconds_min']:.3f}-{r['epoch_seconds_max']:.3f}){partial}",
            f"{r['samples_per_s']:,.0f}",
            f"{r['mb_per_s']:,.1f}",
            f"{limit:.0f}%" if limit is not None else "-",
            f"{rel:.2f}x",
        )
    return table


def split_table(records: list[dict]) -> Table:
    """Where each batch's time went, and what the system read from storage per epoch.

    Under torchrun also each rank's MB/s (slowest-fastest) and the straggler ratio."""
    table = Table(title="per batch (ms): waiting for the loader / host-to-device / step; storage reads per epoch")
    ranks = any(r.get("world_size", 1) > 1 for r in records)
    columns = ["format", "loader", "wait", "h2d", "step", "first batch s", "disk MB/epoch", "CPU %", "iowait %"]
    if ranks:
        columns += ["rank MB/s (min-max)", "straggler"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("format", "loader") else "right")
    for r in records:
        reads = [x for x in r.get("device_read_bytes") or [] if x is not None]
        extra = []
        if ranks:
            extra = [f"{r['rank_mb_per_s_min']:,.0f}-{r['rank_mb_per_s_max']:,.0f}", f"{r['straggler_ratio']:.2f}x"]
            extra = extra if r.get("world_size", 1) > 1 else ["-", "-"]
        table.add_row(
            r["format"],
            r["loader"],
            f"{r['wait_ms_per_batch']:.2f}",
            f"{r['h2d_ms_per_batch']:.2f}",
            f"{r['step_ms_per_batch']:.2f}",
            f"{r['first_batch_seconds_median']:.3f}",
            f"{sum(reads) / len(reads) / 1e6:,.1f}" if reads else "-",
            f"{100 * r['cpu_utilisation']:.0f}" if r.get("cpu_utilisation") is not None else "-",
            f"{100 * r['cpu_iowait']:.0f}" if r.get("cpu_iowait") is not None else "-",
            *extra,
        )
    return table


def run_warnings(records: list[dict]) -> list[str]:
    """What makes a figure suspect, and what to do about it."""
    lines = []
    for r in records:
        name = f"{r['format']}/{r['loader']}"
        if r.get("cold_not_cold"):
            worst = max(r["residency_before"])
            lines.append(
                f"warning: {name}: a cold epoch started with {worst:.0%} of the dataset cached (> 5%); "
                "something still maps the files, or eviction is not permitted: try sudo"
            )
        lines.extend(warnings(name, r["epoch_seconds"]))
        if r.get("straggler_ratio", 1.0) > STRAGGLER_LIMIT:
            lines.append(
                f"warning: {name}: the slowest of {r['world_size']} ranks took {r['straggler_ratio']:.2f}x as long as "
                "the fastest (median over epochs); every rank waits for it: see rank_epoch_seconds in the record"
            )
        if r["partial"]:
            lines.append(f"note: {name}: epochs stopped early (--max-batches/--max-seconds): a partial read")
    return lines


def limits_table(limits: dict) -> Table:
    table = Table(title=f"limits of {limits['hostname']} ({limits['data_filesystem']} on {limits['data_device']})")
    table.add_column("ceiling")
    table.add_column("MB/s", justify="right")
    rows = (
        ("storage sequential read (" + limits["storage_read_method"] + ")", "storage_read_mb_per_s"),
        ("page-cache read", "page_cache_read_mb_per_s"),
        ("host-to-device, pageable", "h2d_pageable_mb_per_s"),
        ("host-to-device, pinned", "h2d_pinned_mb_per_s"),
        ("device-to-device copy", "d2d_mb_per_s"),
    )
    for label, key in rows:
        if limits.get(key) is not None:
            table.add_row(label, f"{limits[key]:,.0f}")
    return table


def profile_summary(path: Path, top: int = 15) -> str:
    buf = io.StringIO()
    pstats.Stats(str(path), stream=buf).sort_stats("cumulative").print_stats(top)
    return buf.getvalue()
