"""Tables of results for the console (Markdown reports and plots build on the same records)."""

from __future__ import annotations

from rich.table import Table

from iobench.results import relative_to_fastest


def _settings(r: dict) -> str:
    parts = [f"bs={r['batch_size']}", f"w={r['num_workers']}"]
    if r["loader"] == "dataloader":
        parts.append(f"fetch={r['fetch']}")
    if r.get("prefetch_factor"):
        parts.append(f"pf={r['prefetch_factor']}")
    if r.get("pin_memory"):
        parts.append("pin")
    if r.get("prefetch_thread"):
        parts.append(f"thread={r['prefetch_thread']}")
    return " ".join(parts)


def results_table(records: list[dict], title: str) -> Table:
    table = Table(title=title)
    for col, justify in (
        ("format", "left"),
        ("loader", "left"),
        ("settings", "left"),
        ("order", "left"),
        ("epoch s (median, min-max)", "right"),
        ("samples/s", "right"),
        ("MB/s", "right"),
        ("vs fastest", "right"),
    ):
        table.add_column(col, justify=justify)
    for r, rel in zip(records, relative_to_fastest(records), strict=True):
        partial = " (partial)" if r["partial"] else ""
        table.add_row(
            r["format"],
            r["loader"],
            _settings(r),
            r["order"],
            f"{r['epoch_seconds_median']:.3f} ({r['epoch_seconds_min']:.3f}-{r['epoch_seconds_max']:.3f}){partial}",
            f"{r['samples_per_s']:,.0f}",
            f"{r['mb_per_s']:,.1f}",
            f"{rel:.2f}x",
        )
    return table


def split_table(records: list[dict]) -> Table:
    """Where each batch's time went: waiting for the loader, host-to-device, the step."""
    table = Table(title="per batch (ms): waiting for the loader / host-to-device / step")
    for col in ("format", "loader", "wait", "h2d", "step", "first batch s"):
        table.add_column(col, justify="left" if col in ("format", "loader") else "right")
    for r in records:
        table.add_row(
            r["format"],
            r["loader"],
            f"{r['wait_ms_per_batch']:.2f}",
            f"{r['h2d_ms_per_batch']:.2f}",
            f"{r['step_ms_per_batch']:.2f}",
            f"{r['first_batch_seconds_median']:.3f}",
        )
    return table
