"""PNG plots of result records (matplotlib, headless)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from iobench.results.record import RunRecord  # noqa: E402
from iobench.results.tables import transform_label  # noqa: E402

CACHE_COLOURS = {"cold": "#3b6fb6", "warm": "#e08a2c", "as-is": "#7a7a7a"}


def label(r: RunRecord) -> str:
    extra = f" {r.config.fetch}" if r.config.loader == "dataloader" else ""
    workers = f" w{r.config.num_workers}" if r.config.num_workers else ""
    ranks = f" ranks={r.config.world_size} t{r.environment.torch_threads}" if r.config.backend else ""
    transform = f" {transform_label(r)}" if transform_label(r) else ""
    return f"{r.config.format}/{r.config.loader}{extra}{workers}{ranks}{transform}"


def _mb(r: dict, seconds: float) -> float:
    return r.epochs.samples_per_epoch * r.dataset.sample_bytes / 1e6 / seconds


def throughput(records: list[RunRecord], path: Path) -> Path:
    """MB/s per format and loader, cold next to warm, one panel per access order; bars span min-max."""
    orders = sorted({r.config.order for r in records})
    fig, axes = plt.subplots(len(orders), 1, figsize=(10, 3.2 * len(orders)), squeeze=False)
    for ax, order in zip(axes[:, 0], orders, strict=True):
        rows = [r for r in records if r.config.order == order]
        names = sorted({label(r) for r in rows})
        caches = sorted({r.config.cache for r in rows})
        width = 0.8 / len(caches)
        for k, cache in enumerate(caches):
            for i, name in enumerate(names):
                match = [r for r in rows if label(r) == name and r.config.cache == cache]
                if not match:
                    continue
                r = match[-1]
                mid = r.epochs.mb_per_s
                lo, hi = _mb(r, r.epochs.epoch_seconds_max), _mb(r, r.epochs.epoch_seconds_min)
                ax.bar(
                    i + k * width,
                    mid,
                    width,
                    color=CACHE_COLOURS.get(cache, "grey"),
                    yerr=[[mid - lo], [hi - mid]],
                    capsize=3,
                    label=cache if i == 0 else None,
                )
        ax.set_xticks(
            [i + width * (len(caches) - 1) / 2 for i in range(len(names))], names, rotation=20, ha="right", fontsize=8
        )
        ax.set_ylabel("MB/s (10^6 B)")
        ax.set_yscale("log")
        ax.set_title(f"throughput, {order} order (bars: median epoch; whiskers: min-max)")
        ax.legend(fontsize=8)
    return _save(fig, path)


def scaling(records: list[RunRecord], path: Path) -> Path | None:
    """Samples/s over dataset size, log-log, per format/loader/cache."""
    series = defaultdict(list)
    for r in records:
        series[(label(r), r.config.cache, r.config.order)].append((r.dataset.n_samples, r.epochs.samples_per_s))
    series = {k: sorted(v) for k, v in series.items() if len({n for n, _ in v}) > 1}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for (name, cache, order), points in sorted(series.items()):
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label=f"{name} {cache} {order}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("samples in the dataset")
    ax.set_ylabel("samples/s")
    ax.set_title("scaling with dataset size")
    ax.legend(fontsize=7)
    return _save(fig, path)


def sample_size(records: list[RunRecord], path: Path) -> Path | None:
    """Samples/s and MB/s over the sample size, per format/loader/cache/order, when several sizes were run."""
    series = defaultdict(list)
    for r in records:
        key = (label(r), r.config.cache, r.config.order)
        series[key].append((r.dataset.sample_bytes, r.epochs.samples_per_s, r.epochs.mb_per_s))
    series = {k: sorted(v) for k, v in series.items() if len({b for b, _, _ in v}) > 1}
    if not series:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    for (name, cache, order), points in sorted(series.items()):
        sizes, rates, mbs = zip(*points, strict=True)
        left.plot(sizes, rates, marker="o", label=f"{name} {cache} {order}")
        right.plot(sizes, mbs, marker="o")
    for ax, unit in ((left, "samples/s"), (right, "MB/s (10^6 B)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes per sample")
        ax.set_ylabel(unit)
    left.set_title("throughput against sample size")
    left.legend(fontsize=7)
    return _save(fig, path)


def split(records: list[RunRecord], path: Path) -> Path:
    """Per-batch time split: waiting for the loader, host-to-device, step (stacked)."""
    names = [f"{label(r)} {r.config.cache} {r.config.order}" for r in records]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(records) + 1.5))
    left = [0.0] * len(records)
    for key, colour, text in (
        ("wait_ms_per_batch", "#3b6fb6", "waiting for the loader"),
        ("h2d_ms_per_batch", "#e08a2c", "host-to-device"),
        ("step_ms_per_batch", "#5aa15a", "step"),
    ):
        values = [getattr(r.epochs, key) for r in records]
        ax.barh(range(len(records)), values, left=left, color=colour, label=text)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(range(len(records)), names, fontsize=7)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("ms per batch")
    ax.set_title("where each batch's time goes")
    ax.legend(fontsize=8)
    return _save(fig, path)


def settings_heatmap(records: list[RunRecord], path: Path) -> Path | None:
    """Samples/s of DataLoader records over num_workers x prefetch_factor, one panel per pin/non_blocking."""
    rows = [r for r in records if r.config.loader == "dataloader"]
    panels = sorted({(r.config.pin_memory, r.config.non_blocking) for r in rows})
    workers = sorted({r.config.num_workers for r in rows})
    factors = sorted({r.config.prefetch_factor or 0 for r in rows})
    if len(workers) < 2:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5), squeeze=False)
    for ax, (pin, nb) in zip(axes[0], panels, strict=True):
        grid = [[float("nan")] * len(workers) for _ in factors]
        for r in rows:
            if (r.config.pin_memory, r.config.non_blocking) == (pin, nb):
                grid[factors.index(r.config.prefetch_factor or 0)][workers.index(r.config.num_workers)] = (
                    r.epochs.samples_per_s
                )
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, f"{v / 1e3:,.0f}k", ha="center", va="center", color="white", fontsize=8)
        ax.set_xticks(range(len(workers)), workers)
        ax.set_yticks(range(len(factors)), ["default" if f == 0 else f for f in factors])
        ax.set_xlabel("num_workers")
        ax.set_ylabel("prefetch_factor")
        ax.set_title(f"pin_memory={pin} non_blocking={nb}", fontsize=9)
        fig.colorbar(image, ax=ax, label="samples/s")
    return _save(fig, path)


def percent_of_limit(records: list[RunRecord], path: Path) -> Path | None:
    rows = [r for r in records if r.limit.percent_of_limit is not None]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1.5))
    ax.barh(
        range(len(rows)),
        [r.limit.percent_of_limit for r in rows],
        color=[CACHE_COLOURS.get(r.config.cache, "grey") for r in rows],
    )
    ax.set_yticks(range(len(rows)), [f"{label(r)} {r.config.cache} {r.config.order}" for r in rows], fontsize=7)
    ax.axvline(100, color="black", linewidth=0.8)
    ax.set_xlabel("% of the applicable ceiling (storage when cold, page cache when warm)")
    ax.set_title("how close to the hardware")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
