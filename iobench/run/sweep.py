"""A grid of run configurations: expansion, presets, resolution, and the driver that runs what is left."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from iobench.errors import IobenchError
from iobench.events import QUIET, Events
from iobench.formats import FORMATS
from iobench.loaders import CORE_LOADERS, LOADERS, LoaderName
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, resolve, settle_device
from iobench.results.machine_limits import MachineLimits
from iobench.results.record import RunRecord
from iobench.results.store import append_record, done_identities
from iobench.run.runner import run

PRESETS = ("settings", "formats", "scaling")
SCALING_SIZES = (10**5, 10**6, 10**7)
_TOP_LEVEL = ("format", "loader", "cache")  # grid keys of RunConfig; the others are loader settings


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: the dataset size it needs and the run to do on it."""

    size: int | None  # None: the sweep's one dataset
    config: RunConfig


def expand(
    base: RunConfig, grid: dict[str, list], sizes: list[int | None], device: torch.device
) -> tuple[list[Point], list[str]]:
    """The product of the grid's values over the base configuration, minus what does not go together."""
    keys = list(grid)
    points, notes = [], []
    seen = set()
    for size in sizes:
        for values in itertools.product(*(grid[k] for k in keys)):
            changes = dict(zip(keys, values, strict=True))
            try:
                config = settle_device(_apply(base, changes), device)
            except IobenchError as exc:
                notes.append(f"skipped {_describe(changes)}: {exc}")
                continue
            marker = (size, config)
            if marker not in seen:
                seen.add(marker)
                points.append(Point(size, config))
    return points, notes


def _apply(base: RunConfig, changes: dict) -> RunConfig:
    top = {k: v for k, v in changes.items() if k in _TOP_LEVEL}
    settings = {k: v for k, v in changes.items() if k not in top}
    return replace(base, **top, settings=replace(base.settings, **settings))


def _describe(changes: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in changes.items())


def preset(name: str, device: torch.device, fmt: str = "memmap") -> tuple[dict, list]:
    """(grid, sizes) of a preset study."""
    cuda = device.type == "cuda"
    if name == "settings":
        # The DataLoader-settings study on one format, plus the prefetch thread and the resident baseline.
        grid = {
            "format": [fmt], "loader": ["dataloader"], "num_workers": [0, 4, 8], "prefetch_factor": [None, 2, 8],
            "pin_memory": [True, False] if cuda else [False], "non_blocking": [True, False],
        }  # fmt: skip
        return grid, [None]
    if name == "formats":
        return {"format": list(FORMATS), "loader": list(CORE_LOADERS), "cache": ["cold", "warm"]}, [None]
    if name == "scaling":
        pair = (LoaderName.DATALOADER, LoaderName.TENSORCLASS)
        pairs_formats = sorted({f for ld in pair for f in LOADERS[ld].reads})
        return {"format": pairs_formats, "loader": list(pair), "cache": ["warm"]}, list(SCALING_SIZES)
    raise IobenchError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")


def settings_extras(base: RunConfig, fmt: str) -> list[RunConfig]:
    """The settings preset's rows outside the grid: a background prefetch thread, everything resident."""
    return [
        replace(base, format=fmt, loader=LoaderName.DATALOADER).with_settings(prefetch_thread=4),
        replace(base, format=fmt, loader=LoaderName.GPU_RESIDENT),
    ]


def still_to_run(points: list[Point], dirs: dict, device: torch.device, results: Path) -> list:
    """Every point resolved against its dataset (so a bad one fails before any work), minus the
    configurations the results file already holds."""
    already = done_identities(results)
    resolved = [resolve(p.config, RunTarget(dirs[p.size], device)) for p in points]
    return [r for r in resolved if r.recorded().identity() not in already]


def run_sweep(todo: list, results: Path, limits: MachineLimits | None, events: Events = QUIET) -> list[RunRecord]:
    """Run each resolved configuration and append its record at once (a stopped sweep resumes)."""
    records = []
    for k, resolved in enumerate(todo):
        events.run_started(k, len(todo), f"{resolved.config.label} {resolved.dataset_dir.name[:24]}")
        records.append(run(resolved, limits, events=events))
        append_record(results, records[-1])
    return records
