"""PNG plots of result records (matplotlib, headless).

Each plot is built by a function that returns its figure (or None when it would carry no information),
so a test can read its labels: every bar and line of a plot has a label no other one has.
"""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from iobench.judge.answer import fastest_of  # noqa: E402
from iobench.plan.labels import settings_label  # noqa: E402
from iobench.plan.selection import SETTINGS_LOADER  # noqa: E402
from iobench.results.record import RunRecord  # noqa: E402
from iobench.settings import HEATMAP_AXES, HEATMAP_PANELS, SETTINGS, held_fixed  # noqa: E402
from iobench.system.fsutil import atomic_write_bytes  # noqa: E402

CACHE_COLOURS = {"cold": "#3b6fb6", "warm": "#e08a2c", "as-is": "#7a7a7a"}
TOP = 25  # bars in one horizontal bar plot; the rest are counted in its title, listed in the tables
FAR_BELOW = 10.0  # % of the ceiling under which every figure is far below it: no plot, nothing to see


def label(r: RunRecord) -> str:
    """Format/loader and every knob that was set (batch size, workers, ...), without measured values."""
    return f"{r.config.format}/{r.config.loader} {settings_label(r, measured=False)}"


def distinct(names: list[str], records: list[RunRecord]) -> list[str]:
    """Names made unique: the step where two differ by it (bars #1 and #2 did not say which had the user's step), the
    dataset's name where two differ by that, then a counter."""
    counts = Counter(names)
    steps = {n: {r.config.step for m, r in zip(names, records, strict=True) if m == n} for n in counts}
    names = [
        f"{n} step {r.config.step}" if counts[n] > 1 and len(steps[n]) > 1 else n
        for n, r in zip(names, records, strict=True)
    ]
    counts = Counter(names)
    names = [f"{n} {r.config.dataset}" if counts[n] > 1 else n for n, r in zip(names, records, strict=True)]
    seen: Counter = Counter()
    counts = Counter(names)
    out = []
    for n in names:
        seen[n] += 1
        out.append(f"{n} #{seen[n]}" if counts[n] > 1 else n)
    return out


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value:,.0f}"


def _mb(r: RunRecord, seconds: float) -> float:
    return r.epochs.samples_per_epoch * r.dataset.sample_bytes / 1e6 / seconds


def _top(records: list[RunRecord], by: Callable[[RunRecord], float] | None = None, what: str = "fastest"):
    """The TOP records by `by` (samples/s unless given), largest first, and a note on how many were left out."""
    ranked = sorted(records, key=by or (lambda r: r.epochs.samples_per_s), reverse=True)
    left = len(ranked) - TOP
    return ranked[:TOP], (f" ({what} {TOP} of {len(ranked)}; all are in the tables)" if left > 0 else "")


def configuration(r: RunRecord) -> tuple[str, str]:
    """What one bar group stands for: the configuration's label on its dataset (its caches are its bars)."""
    return label(r), r.config.dataset


def top_configurations(records: list[RunRecord]) -> tuple[list[RunRecord], str]:
    """The fastest configurations (by their best cache) with every cache each was run in, so a cold bar
    slower than the cut is never dropped beside its warm one: at most about TOP bars, and a note."""
    caches = len({r.config.cache for r in records}) or 1
    groups: dict[tuple, list[RunRecord]] = {}
    for r in records:
        groups.setdefault(configuration(r), []).append(r)
    best = {k: fastest_of(group).epochs.samples_per_s for k, group in groups.items()}  # type: ignore[union-attr]
    ranked = sorted(best, key=lambda k: best[k], reverse=True)
    keep = set(ranked[: max(1, -(-TOP // caches))])
    rows = sorted((r for r in records if configuration(r) in keep), key=lambda r: -best[configuration(r)])
    left = len(ranked) - len(keep)
    note = f" (fastest {len(keep)} of {len(ranked)} configurations; all are in the tables)" if left > 0 else ""
    return rows, note


def throughput_figure(records: list[RunRecord]) -> Figure:
    """MB/s per configuration as horizontal bars, one panel per access order, cold beside warm when both
    were run; each bar carries its exact samples/s and MB/s; whiskers span the epochs' min-max."""
    orders = sorted({r.config.order for r in records})
    panels = []
    for order in orders:
        rows, note = top_configurations([r for r in records if r.config.order == order])
        keys = list(dict.fromkeys(configuration(r) for r in rows))  # fastest first
        panels.append((order, rows, note, keys, sorted({r.config.cache for r in rows})))
    heights = [0.28 * len(keys) * len(caches) + 1.2 for _, _, _, keys, caches in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(12, sum(heights) + 0.5), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    for ax, (order, rows, note, keys, caches) in zip(axes[:, 0], panels, strict=True):
        first = {k: next(r for r in rows if configuration(r) == k) for k in keys}
        names = distinct([k[0] for k in keys], [first[k] for k in keys])
        width = 0.8 / len(caches)
        for k, cache in enumerate(caches):
            labelled = False  # the legend names each cache once, at its first bar
            for i, key in enumerate(keys):
                match = [r for r in rows if configuration(r) == key and r.config.cache == cache]
                if not match:
                    continue
                r = match[-1]
                mid = r.epochs.mb_per_s
                lo, hi = _mb(r, r.epochs.epoch_seconds_max), _mb(r, r.epochs.epoch_seconds_min)
                y = i + k * width
                spread = [[max(0.0, mid - lo)], [max(0.0, hi - mid)]]
                ax.barh(
                    y,
                    mid,
                    width,
                    color=CACHE_COLOURS.get(cache, "grey"),
                    xerr=spread,
                    capsize=2,
                    label=None if labelled else cache,
                )
                labelled = True
                ax.text(hi, y, f" {_rate(r.epochs.samples_per_s)} samples/s, {mid:,.0f} MB/s", va="center", fontsize=6)
        ax.set_yticks([i + width * (len(caches) - 1) / 2 for i in range(len(keys))], names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("MB/s (10^6 B), log; whiskers: epoch min-max")
        ax.set_title(f"throughput, {order} order, {' and '.join(caches)}{note}", fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.margins(x=0.25)
    return fig


def _series_figure(series: dict, x_label: str, title: str, units: tuple[str, ...]) -> Figure:
    fig, axes = plt.subplots(1, len(units), figsize=(7 * len(units), 5), squeeze=False)
    for key, points in sorted(series.items()):
        xs = [p[0] for p in points]
        for ax, j in zip(axes[0], range(1, len(units) + 1), strict=True):
            ax.plot(xs, [p[j] for p in points], marker="o", label=" ".join(key) if ax is axes[0][0] else None)
    for ax, unit in zip(axes[0], units, strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel(unit)
    axes[0][0].set_title(title)
    axes[0][0].legend(fontsize=7)
    return fig


def kind_of_data(r: RunRecord) -> str:
    """What the samples are, their number aside: the workload (or the source folder), shape, dtype, transform and
    where they were read from. A line joins only figures of one kind (a 2,002-image JPEG folder and a 100,000-row
    table drew a trend that does not exist)."""
    d, c = r.dataset, r.config
    what = Path(d.source).name if d.source else (d.workload or "custom")
    shape = "x".join(str(x) for x in d.sample_shape)
    transform = f" {c.transform}" if c.transform != "none" else ""
    return f"{what} {shape} {d.dtype}{transform}" + ("" if c.storage == "local" else f" {c.storage}")


def scaling_figure(records: list[RunRecord]) -> Figure | None:
    """Samples/s over dataset size, log-log, per configuration, cache, order and kind of data."""
    series = defaultdict(list)
    for r in records:
        series[(label(r), r.config.cache, r.config.order, kind_of_data(r))].append(
            (r.dataset.n_samples, r.epochs.samples_per_s, r.epochs.mb_per_s)
        )
    series = {k: sorted(v) for k, v in series.items() if len({p[0] for p in v}) > 1}
    if not series:
        return None
    return _series_figure(series, "samples in the dataset", "scaling with dataset size", ("samples/s", "MB/s"))


def sample_size_figure(records: list[RunRecord]) -> Figure | None:
    """Samples/s and MB/s over the sample size, when several sizes were run."""
    series = defaultdict(list)
    for r in records:  # one line per configuration over datasets that differ in their samples' size alone
        d = r.dataset
        key = (
            f"{r.config.format}/{r.config.loader} w={r.config.settings.num_workers}",
            r.config.cache,
            r.config.order,
            str(d.workload or "custom"),
            *(() if d.source is None else (Path(d.source).name,)),
        )
        series[key].append((r.dataset.sample_bytes, r.epochs.samples_per_s, r.epochs.mb_per_s))
    series = {k: sorted(v) for k, v in series.items() if len({p[0] for p in v}) > 1}
    if not series:
        return None
    return _series_figure(series, "bytes per sample", "throughput against sample size", ("samples/s", "MB/s (10^6 B)"))


def split_figure(records: list[RunRecord]) -> Figure:
    """Per-batch time, stacked on a linear axis: waiting for the loader, host-to-device, transform, step."""
    rows, note = _top(records)
    names = distinct([f"{label(r)} {r.config.cache} {r.config.order}" for r in rows], rows)
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 2.2))
    left = [0.0] * len(rows)
    for key, colour, text in (
        ("wait_ms_per_batch", "#3b6fb6", "waiting for the loader"),
        ("h2d_ms_per_batch", "#e08a2c", "host-to-device"),
        ("transform_ms_per_batch", "#9467bd", "device transform"),
        ("step_ms_per_batch", "#5aa15a", "step"),
    ):
        values = [getattr(r.epochs, key) for r in rows]
        if not any(values):
            continue
        ax.barh(range(len(rows)), values, left=left, color=colour, label=text)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for i, total in enumerate(left):
        ax.text(total, i, f" {total:.2f} ms", va="center", fontsize=6)
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per batch (linear)")
    ax.set_title(f"where each batch's time goes{note}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over them
    return fig


def _heatmap_group(rows: list[RunRecord]) -> list[RunRecord]:
    """The largest set of DataLoader records that differ only in the heatmap's settings (its axes and panels):
    a heatmap of anything more mixed puts two figures in one cell."""
    groups: dict[tuple, list[RunRecord]] = defaultdict(list)
    mapped = (*HEATMAP_AXES, *HEATMAP_PANELS)
    for r in rows:  # everything but the heatmap's four knobs held fixed: one figure per cell, never one of several
        c = r.config
        held = tuple(getattr(c.settings, name) for name in SETTINGS if name not in mapped)
        groups[
            (
                c.dataset,
                c.format,
                c.cache,
                c.order,
                c.device,
                c.transform,
                c.step,
                c.torch_threads_asked,
                c.format_options,
                c.storage,
                c.remote_profile,
                *held,
            )
        ].append(r)
    return max(groups.values(), key=len) if groups else []


def settings_figure(records: list[RunRecord]) -> Figure | None:
    """Samples/s over the two settings of `iobench.settings.HEATMAP_AXES`, one panel per pair of HEATMAP_PANELS,
    exact values."""
    rows = _heatmap_group([r for r in records if r.config.loader == SETTINGS_LOADER])
    across, down = HEATMAP_AXES

    def value(r: RunRecord, name: str) -> object:
        return getattr(r.config.settings, name)

    workers = sorted({value(r, across) for r in rows})
    if len(workers) < 2:
        return None
    panels = sorted({tuple(value(r, p) for p in HEATMAP_PANELS) for r in rows})
    factors = sorted({value(r, down) or 0 for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        grid = [[float("nan")] * len(workers) for _ in factors]
        for r in rows:
            if tuple(value(r, p) for p in HEATMAP_PANELS) == panel:
                cell = factors.index(value(r, down) or 0), workers.index(value(r, across))
                grid[cell[0]][cell[1]] = r.epochs.samples_per_s
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, f"{v:,.0f}", ha="center", va="center", color="white", fontsize=7)
        ax.set_xticks(range(len(workers)), workers)
        ax.set_yticks(range(len(factors)), ["default" if f == 0 else f for f in factors])
        ax.set_xlabel(across)
        ax.set_ylabel(down)
        ax.set_title(" ".join(f"{p}={v}" for p, v in zip(HEATMAP_PANELS, panel, strict=True)), fontsize=9)
        fig.colorbar(image, ax=ax, label="samples/s")
    c = rows[0].config
    others = len([r for r in records if r.config.loader == SETTINGS_LOADER]) - len(rows)
    fig.suptitle(
        f"samples/s; held fixed: {c.format}, batch size {c.settings.batch_size}, {c.cache} {c.order}, "
        f"{c.device}, {held_fixed(c.settings)}, dataset {c.dataset}"
        + (f"; {others} other DataLoader records (other fixed settings) in the tables" if others else ""),
        fontsize=8,
    )
    return fig


def limit_figure(records: list[RunRecord]) -> Figure | None:
    """% of each figure's ceiling; None when every figure is far below its ceiling (then the ceiling is
    not what bounds these runs, and bars of 1% say nothing)."""
    rows = [r for r in records if r.limit.percent_of_limit is not None]
    if not rows or max(r.limit.percent_of_limit for r in rows) < FAR_BELOW:
        return None
    rows, note = _top(rows, lambda r: r.limit.percent_of_limit, "closest")
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.8))
    shares = [r.limit.percent_of_limit for r in rows]
    ax.barh(range(len(rows)), shares, color=[CACHE_COLOURS.get(r.config.cache, "grey") for r in rows])
    for i, share in enumerate(shares):
        ax.text(share, i, f" {share:.0f}%", va="center", fontsize=6)
    ax.set_yticks(
        range(len(rows)), distinct([f"{label(r)} {r.config.cache} {r.config.order}" for r in rows], rows), fontsize=7
    )
    ax.invert_yaxis()
    ax.axvline(100, color="black", linewidth=0.8)
    ax.set_xlabel("% of the ceiling of its pattern (storage or random reads when cold, page-cache copy or gather warm)")
    ax.set_title(f"how close to the hardware{note}", fontsize=9)
    return fig


PLOTS: dict[str, tuple[str, Callable[[list[RunRecord]], Figure | None]]] = {
    "throughput": ("Throughput per configuration", throughput_figure),
    "scaling": ("Scaling with dataset size", scaling_figure),
    "split": ("Per-batch time split", split_figure),
    "settings": ("DataLoader settings", settings_figure),
    "limit": ("Percent of the physical limit", limit_figure),
    "sample_size": ("Throughput against sample size", sample_size_figure),
}


def render(name: str, records: list[RunRecord], folder: Path) -> Path | None:
    """The named plot as folder/NAME.png; None when it would carry no information."""
    fig = PLOTS[name][1](records)
    if fig is None:
        return None
    path = folder / f"{name}.png"
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, image.getvalue())  # a link planted under the plot's name is replaced, not followed
    return path
