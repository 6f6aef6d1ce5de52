"""`iobench report` and `iobench compare`: Markdown with plots from result records, and A/B changes."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from iobench.results import plots
from iobench.errors import IobenchError
from iobench.run.limits import limits_path
from iobench.results.tables import STRAGGLER_LIMIT, settings_label
from iobench.results.store import read_records
from iobench.run.runner import limit_fields
from iobench.results.stats import summary, warnings
from iobench.run.sweep import identity

ENVIRONMENT = ("hostname", "cpu_model", "cpu_count", "ram_bytes", "gpu_name", "kernel", "data_filesystem",
               "data_device", "python_version", "torch_version", "tensordict_version", "numpy_version",
               "h5py_version", "lmdb_version", "lz4_version", "git_sha")  # fmt: skip


def measured_key(r: dict) -> tuple:
    """What makes two records measurements of the same thing: the configuration, and whether it ran
    under torchrun (even one rank, where torchrun may set one thread) with how many torch threads."""
    return (*identity(r), r.get("backend"), r.get("torch_threads"))


def latest_per_config(records: list[dict]) -> list[dict]:
    """One record per configuration: the latest, in first-seen order."""
    by_key: OrderedDict[tuple, dict] = OrderedDict()
    for r in records:
        by_key[measured_key(r)] = r
    return list(by_key.values())


def _with_limits(records: list[dict], results: Path) -> list[dict]:
    """Recompute % of limit from the limits stored beside the results, by the current rule."""
    path = limits_path(results)
    if not path.is_file():
        return records
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return records
    by_host = {v.get("hostname"): v for v in stored.values()}
    return [{**r, **limit_fields(r, by_host.get(r.get("hostname")))} for r in records]


def write_report(results: Path, out: Path) -> Path:
    records = _with_limits(latest_per_config(read_records(results)), results)
    if not records:
        raise IobenchError(f"{results}: no records")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {out}: {exc.strerror or exc}") from None
    images = [
        ("Throughput per format and loader, cold next to warm", plots.throughput(records, out / "throughput.png")),
        ("Scaling with dataset size", plots.scaling(records, out / "scaling.png")),
        ("Per-batch time split", plots.split(records, out / "split.png")),
        ("DataLoader settings", plots.settings_heatmap(records, out / "settings.png")),
        ("Percent of the physical limit", plots.percent_of_limit(records, out / "limit.png")),
    ]
    lines = [f"# iobench report: {results.name}", "", f"{len(records)} configurations from `{results}`.", ""]
    lines += _environment(records)
    lines += [
        "## Results",
        "",
        "Epoch seconds are the median of the timed epochs with [min-max] and the median "
        "absolute deviation; MB = 10^6 bytes.",
        "",
    ]
    lines += _table(records)
    notes = [w for r in records for w in warnings(f"{plots.label(r)} {r['cache']} {r['order']}", r["epoch_seconds"])]
    notes += [
        f"warning: {plots.label(r)}: a cold epoch started {max(r['residency_before']):.0%} cached"
        for r in records
        if r.get("cold_not_cold")
    ]
    notes += [
        f"warning: {plots.label(r)} {r['cache']} {r['order']}: the slowest rank took {r['straggler_ratio']:.2f}x "
        "as long as the fastest"
        for r in records
        if r.get("straggler_ratio", 1.0) > STRAGGLER_LIMIT
    ]
    if notes:
        lines += ["", "### Warnings", ""] + [f"- {n}" for n in notes]
    for title, image in images:
        if image is not None:
            lines += ["", f"## {title}", "", f"![{title}]({image.name})"]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _environment(records: list[dict]) -> list[str]:
    lines = ["## Where these were measured", "", "| field | value |", "| --- | --- |"]
    for key in ENVIRONMENT:
        values = sorted({str(r.get(key, "")) for r in records})
        if key == "ram_bytes":
            values = [f"{int(v) / 2**30:.1f} GiB" for v in values if v]
        lines.append(f"| {key} | {', '.join(values) or '-'} |")
    return lines + [""]


def _table(records: list[dict]) -> list[str]:
    head = ("dataset", "format", "loader", "settings", "order", "cache", "device", "epoch s median [min-max] (MAD)",
            "samples/s", "MB/s", "% of limit")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in records:
        s = summary(r["epoch_seconds"])
        limit = r.get("percent_of_limit")
        cells = (r["dataset"], r["format"], r["loader"], settings_label(r), r["order"], r["cache"], r["device"],
                 f"{s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}] ({s['mad']:.3f})"
                 + (" partial" if r["partial"] else ""),
                 f"{r['samples_per_s']:,.0f}", f"{r['mb_per_s']:,.1f}",
                 f"{limit:.0f}%" if limit is not None else "-")  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def compare(a: Path, b: Path) -> tuple[list[tuple[dict, dict, float]], int, int]:
    """Matching configurations (record in A, record in B, relative change of MB/s) and the unmatched counts."""
    left = {measured_key(r): r for r in latest_per_config(read_records(a))}
    right = {measured_key(r): r for r in latest_per_config(read_records(b))}
    pairs = [(left[k], right[k], right[k]["mb_per_s"] / left[k]["mb_per_s"] - 1) for k in left if k in right]
    return pairs, len(left) - len(pairs), len(right) - len(pairs)


def describe(r: dict) -> str:
    differing = ("dataset", "format", "loader", "order", "cache", "device")
    return " ".join(str(r[k]) for k in differing) + " " + settings_label(r)
