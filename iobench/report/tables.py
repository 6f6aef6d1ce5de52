"""Console tables of result records (rich): results, the per-batch split, limits, a profile summary."""

from __future__ import annotations

import io
import pstats
from pathlib import Path

from rich.table import Table

from iobench.judge.labels import vs_fastest
from iobench.plan.labels import settings_label
from iobench.plan.run_options import CACHE_LABEL, option_labels
from iobench.results.limits import LOOPBACK, PAGE, MachineLimits, RemoteLimits
from iobench.results.record import RunRecord


def percent_text(share: float | None) -> str:
    """A % of limit as a table shows it: a share under 1% said as such, never "0%" for 41.7 MB/s of a fast disk."""
    if share is None:
        return "-"
    return f"{share:.0f}%" if share >= 1 or share == 0 else ("<1%" if share < 0.1 else f"{share:.1f}%")


def _residency(r: RunRecord) -> str:
    """The cache column: the cache (its residency before the timed epochs) and the run options shown there."""
    c, before = r.config, r.system.residency_before
    cache, *rest = option_labels(c, CACHE_LABEL)
    return " ".join([f"{cache} ({max(before):.0%})" if before else cache, *rest])


def compact_table(records: list[RunRecord], title: str) -> Table:
    """The ranking in under 100 columns: what differs between the configurations, their samples/s and MB/s, how far
    behind the fastest (with the judgement's mark where they cannot be told apart), the shuffle's quality and the
    cache. The settings every row shares go in the title; `--wide` shows every column and the per-batch split."""
    labels = [settings_label(r) for r in records]
    shared = labels[0] if records and len(set(labels)) == 1 else None
    table = Table(title=f"{title}\n{shared}" if shared else title)
    scored = any(r.epochs.shuffle_spread is not None for r in records)
    au = any(r.epochs.accelerator_utilisation is not None for r in records)  # against the step in the title
    if au:
        table.title = f"{table.title}, AU against step {records[0].config.step}"
    columns = [
        ("format", "left"),
        ("loader", "left"),
        *(() if shared else (("settings", "left"),)),
        ("samples/s", "right"),
        ("MB/s", "right"),
        ("vs fastest", "right"),
        *((("AU", "right"),) if au else ()),
        *((("shuffle", "right"),) if scored else ()),
        ("cache", "left"),
    ]
    for col, justify in columns:  # the figures whole; a long settings label folds onto a second line
        table.add_column(col, justify=justify, no_wrap=col != "settings", overflow="fold")
    for r, standing, label in zip(records, vs_fastest(records), labels, strict=True):
        e = r.epochs
        cells = [
            r.config.format,
            r.config.loader,
            *(() if shared else (label,)),
            f"{e.samples_per_s:,.0f}" + (" (partial)" if e.partial else ""),
            f"{e.mb_per_s:,.1f}",
            standing,
            *((au_text(r),) if au else ()),
            *((shuffle_text(r),) if scored else ()),
            r.config.cache,
        ]
        table.add_row(*cells)
    return table


def results_table(records: list[RunRecord], title: str) -> Table:
    scored = any(r.epochs.shuffle_spread is not None for r in records)  # none for a user's own pipeline
    caption = "shuffle: spread/order of the delivered order, 1.00/1.00 = a uniform shuffle" if scored else None
    table = Table(title=title, caption=caption)
    columns = (
        ("format", "left"),
        ("loader", "left"),
        ("settings", "left"),
        ("order", "left"),
        ("shuffle", "right"),
        ("cache (max resident)", "left"),
        ("epoch s (median, min-max)", "right"),
        ("samples/s", "right"),
        ("MB/s", "right"),
        ("% of limit", "right"),
        ("time vs fastest", "right"),
    )
    au = any(r.epochs.accelerator_utilisation is not None for r in records)
    if au:  # next to samples/s, with the step it was measured against
        columns = (*columns[:8], ("AU (step)", "right"), *columns[8:])
    for col, justify in columns:  # the settings name the configuration: kept on one line
        table.add_column(col, justify=justify, no_wrap=col == "settings")
    for r, standing in zip(records, vs_fastest(records), strict=True):
        e = r.epochs
        partial = " (partial)" if e.partial else ""
        limit = r.limit.percent_of_limit
        cells = [
            r.config.format,
            r.config.loader,
            settings_label(r),
            r.config.order,
            shuffle_text(r),
            _residency(r),
            f"{e.epoch_seconds_median:.3f} ({e.epoch_seconds_min:.3f}-{e.epoch_seconds_max:.3f}){partial}",
            f"{e.samples_per_s:,.0f}",
            f"{e.mb_per_s:,.1f}",
            percent_text(limit),
            standing,
        ]
        if au:
            cells.insert(8, au_text(r))
        table.add_row(*cells)
    return table


def shuffle_text(r: RunRecord) -> str:
    """Shuffle quality as spread/order (1.00/1.00: as good as a uniform shuffle); '-' before it was scored."""
    e = r.epochs
    if e.shuffle_spread is None or e.shuffle_order is None:
        return "-"
    return f"{e.shuffle_spread:.2f}/{e.shuffle_order:.2f}"


def au_text(r: RunRecord) -> str:
    """Accelerator utilisation with the step it was measured against, e.g. '87% (sleep:5)'."""
    au = r.epochs.accelerator_utilisation
    return f"{au:.0%} ({r.config.step})" if au is not None else "-"


def split_table(records: list[RunRecord]) -> Table:
    """Where each batch's time went, and what the system read from storage per epoch.

    Under torchrun also each rank's MB/s (slowest-fastest) and the straggler ratio."""
    # on the CPU nothing is copied: what is timed between the loader and the step is its hand-over (`to_device`), named
    # as such (a CPU run showed 12-25 ms a batch of "host-to-device")
    copy = "h2d" if any(r.config.device.startswith("cuda") for r in records) else "hand-over"
    stage = "host-to-device" if copy == "h2d" else "hand-over (no copy on the CPU)"
    table = Table(
        title=f"per batch (ms): waiting for the loader / {stage} / step; storage reads per epoch",
        caption="read MB/epoch: by this run's processes (/proc/PID/io), or the store's count; the "
        "device's, every process on the machine, in brackets",
    )
    ranks = any(r.config.world_size > 1 for r in records)
    columns = ["format", "loader", "wait", copy, "step", "first batch s", "read MB/epoch", "CPU %", "iowait %"]
    on_device = any(r.config.transform_on == "device" for r in records)
    if on_device:  # the batched transform after the copy, its own stage
        columns.insert(4, "transform")
    if ranks:
        columns += ["rank MB/s (min-max)", "straggler"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("format", "loader") else "right")
    for r in records:
        e, s = r.epochs, r.system
        extra = []
        if ranks:
            extra = ["-", "-"]
            if r.config.world_size > 1:
                low, high = r.ranks.rank_mb_per_s_min or 0.0, r.ranks.rank_mb_per_s_max or 0.0
                extra = [f"{low:,.0f}-{high:,.0f}", f"{r.ranks.straggler_ratio:.2f}x"]
        cells = [
            r.config.format,
            r.config.loader,
            f"{e.wait_ms_per_batch:.2f}",
            f"{e.h2d_ms_per_batch:.2f}",
            f"{e.step_ms_per_batch:.2f}",
            f"{e.first_batch_seconds_median:.3f}",
            read_text(r),
            f"{100 * s.cpu_utilisation:.0f}" if s.cpu_utilisation is not None else "-",
            f"{100 * s.cpu_iowait:.0f}" if s.cpu_iowait is not None else "-",
            *extra,
        ]
        if on_device:
            cells.insert(4, f"{e.transform_ms_per_batch:.2f}" if r.config.transform_on == "device" else "-")
        table.add_row(*cells)
    return table


def read_text(r: RunRecord) -> str:
    """What a run read per epoch: its own processes' count where the kernel gives one (a warm 301 MB dataset showed
    3,217 MB/epoch by the device's count, every process on the machine), the device's beside it; from object
    storage the store's (or the clients') count alone."""
    own = [x for x in r.system.process_read_bytes if x is not None]
    device = [x for x in r.system.device_read_bytes if x is not None]
    if r.config.storage != "local" or not own:
        return f"{sum(device) / len(device) / 1e6:,.1f}" if device else "-"
    shown = f"{sum(own) / len(own) / 1e6:,.1f}"
    return shown + (f" [{sum(device) / len(device) / 1e6:,.1f}]" if device else "")


def limits_table(limits: MachineLimits) -> Table:
    throttle = f", reads throttled to {limits.read_limit_mb_per_s:g} MB/s" if limits.read_limit_mb_per_s else ""
    table = Table(title=f"limits of {limits.hostname} ({limits.data_filesystem} on {limits.data_device}{throttle})")
    table.add_column("ceiling")
    table.add_column("MB/s", justify="right")
    table.add_column("IOPS", justify="right")
    rows: list[tuple[str, float | None, float | None]] = [
        (f"storage sequential read ({limits.storage_read_method})", limits.storage_read_mb_per_s, None),
        ("page-cache read (sequential copy)", limits.page_cache_read_mb_per_s, None),
    ]
    random = [(PAGE, limits.random_read_4k_qd1_iops, limits.random_read_4k_qd32_iops)]
    if limits.random_read_block_bytes not in (None, PAGE):
        block = limits.random_read_block_bytes
        random.append((block, limits.random_read_block_qd1_iops, limits.random_read_block_qd32_iops))
    for size, qd1, qd32 in random:
        for depth, iops in ((1, qd1), (32, qd32)):
            if iops is not None:
                rows.append((f"storage random read {size // 1024} KiB, queue depth {depth}", iops * size / 1e6, iops))
    if limits.memory_gather_mb_per_s is not None:
        rows.append((f"memory gather of {limits.gather_sample_bytes} B samples", limits.memory_gather_mb_per_s, None))
    rows += [
        ("host-to-device, pageable", limits.h2d_pageable_mb_per_s, None),
        ("host-to-device, pinned", limits.h2d_pinned_mb_per_s, None),
        ("device-to-device copy", limits.d2d_mb_per_s, None),
    ]
    for label, value, iops in rows:
        if value is not None:
            table.add_row(label, f"{value:,.0f}", f"{iops:,.0f}" if iops is not None else "")
    return table


def run_view(records: list[RunRecord], dataset: str, wide: bool = False) -> list[Table | str]:
    """What `run` prints of its records, in order: the ranking (compact, or every column and the per-batch split with
    `wide`), then each profiled record's profile. Its title names the dataset, the device and the step."""
    r0 = records[0]
    c = r0.config
    ranks = f", {c.world_size} processes on {r0.ranks.nodes} node(s)" if c.world_size > 1 else ""
    title = (
        f"{dataset} on {c.device} ({r0.environment.gpu_name or r0.environment.cpu_model}){ranks}, "
        f"{r0.epochs.samples_per_epoch:,} samples/epoch, step {c.step}"
    )
    parts: list[Table | str] = (
        [results_table(records, title), split_table(records)] if wide else [compact_table(records, title)]
    )
    for r in records:
        if r.system.profile_path:
            parts += [f"profile of {r.label}: {r.system.profile_path}", profile_summary(Path(r.system.profile_path))]
    return parts


def profile_summary(path: Path, top: int = 15) -> str:
    buf = io.StringIO()
    pstats.Stats(str(path), stream=buf).sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def remote_limits_table(limits: RemoteLimits) -> Table:
    where = "iobench's S3 server on loopback" if limits.endpoint == LOOPBACK else limits.endpoint
    table = Table(title=f"object storage ceilings from {limits.hostname}: {where}")
    table.add_column("ceiling")
    profile = "as it is" if limits.endpoint != LOOPBACK else limits.profile
    table.add_column(profile, justify="right")
    if limits.unshaped is not None:
        table.add_column("no shaper", justify="right")
    n = limits.connections
    rows = [
        (f"GETs/s of {limits.sample_bytes:,} B (a sample), 1 connection", "gets_sample_1", "{:,.0f}"),
        (f"GETs/s of {limits.sample_bytes:,} B, {n} connections", "gets_sample_n", "{:,.0f}"),
        ("GETs/s of 4 KiB, 1 connection", "gets_4k_1", "{:,.0f}"),
        (f"GETs/s of 4 KiB, {n} connections", "gets_4k_n", "{:,.0f}"),
        ("median 4 KiB GET, 1 connection (ms)", "first_byte_ms", "{:,.1f}"),
        ("MB/s of a large object, 1 connection", "mb_per_s_1", "{:,.0f}"),
        (f"MB/s of a large object, {n} connections", "mb_per_s_n", "{:,.0f}"),
    ]
    for label, name, form in rows:
        values = [form.format(getattr(limits.shaped, name))]
        if limits.unshaped is not None:
            values.append(form.format(getattr(limits.unshaped, name)))
        table.add_row(label, *values)
    return table
