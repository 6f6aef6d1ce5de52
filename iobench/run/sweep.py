"""A grid of run configurations: expansion, presets, and resuming from what the results file holds."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.run.runner import CORE_LOADERS, LOADER_FORMATS, RunConfig, check_config, config_fields, resolve

# Record fields that identify a configuration: two records with equal values measured the same thing.
IDENTITY = (
    "dataset", "format", "loader", "fetch", "batch_size", "num_workers", "prefetch_factor", "pin_memory",
    "non_blocking", "persistent_workers", "prefetch_thread", "readahead_mb", "order", "cache", "epochs",
    "warmup", "runs", "step", "device", "max_batches", "max_seconds", "seed", "world_size",
)  # fmt: skip
# What a field meant in records written before it existed.
BEFORE_FIELD = {"world_size": 1}
PRESETS = ("settings", "formats", "scaling")
SCALING_SIZES = (10**5, 10**6, 10**7)


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: the dataset size it needs and the run to do on it."""

    size: int | None  # None: the sweep's one dataset
    config: RunConfig


def identity(record: dict) -> tuple:
    return tuple(record.get(k, BEFORE_FIELD.get(k)) for k in IDENTITY)


def config_identity(config: RunConfig, device: torch.device) -> tuple:
    """The identity a record of this configuration will have (pinning resolved for the device)."""
    fields = {"dataset": config.dataset_dir.name, **config_fields(resolve(config, device), device)}
    return tuple(fields[k] for k in IDENTITY)


def done(results: Path) -> set[tuple]:
    """Identities of the configurations the results file already holds (a resumed sweep skips them)."""
    if not results.is_file():
        return set()
    keys = set()
    with open(results, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    keys.add(identity(json.loads(line)))
                except json.JSONDecodeError:
                    continue  # a line cut by a crash: that configuration runs again
    return keys


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
                config = _apply(base, changes)
                check_config(config)
                resolve(config, device)
            except IobenchError as exc:
                notes.append(f"skipped {_describe(changes)}: {exc}")
                continue
            marker = (size, config)
            if marker not in seen:
                seen.add(marker)
                points.append(Point(size, config))
    return points, notes


def _apply(base: RunConfig, changes: dict) -> RunConfig:
    top = {k: v for k, v in changes.items() if k in ("format", "loader", "cache")}
    settings = {k: v for k, v in changes.items() if k not in top}
    config = replace(base, **top)
    return replace(config, settings=replace(config.settings, **settings)) if settings else config


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
        pairs_formats = sorted({f for ld in ("dataloader", "tensorclass") for f in LOADER_FORMATS[ld]})
        return {"format": pairs_formats, "loader": ["dataloader", "tensorclass"], "cache": ["warm"]}, list(
            SCALING_SIZES
        )
    raise IobenchError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")


def settings_extras(base: RunConfig, fmt: str) -> list[RunConfig]:
    """The settings preset's rows outside the grid: a background prefetch thread, everything resident."""
    return [
        replace(base, format=fmt, loader="dataloader", settings=replace(base.settings, prefetch_thread=4)),
        replace(base, format=fmt, loader="gpu-resident"),
    ]
