"""A grid of run configurations: expansion, presets, resolution, and the driver that runs what is left."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from iobench.errors import IobenchError
from iobench.events import QUIET, Events
from iobench.formats import FORMATS
from iobench.loaders import CORE_LOADERS, LOADERS
from iobench.plan.config import RunConfig
from iobench.plan.resolve import RunTarget, check_remote, resolve, settle_device
from iobench.plan.selection import RESIDENT_BASELINE, SCALING_LOADERS, SETTINGS_LOADER
from iobench.results.limits import MachineLimits, RemoteLimits
from iobench.results.record import RunRecord
from iobench.results.store import append_record, done_identities
from iobench.run.isolated import run_isolated
from iobench.run.runner import run
from iobench.settings import SETTINGS, settings_parts
from iobench.storage.remote import RemoteTarget

PRESETS = ("settings", "formats", "scaling")
SCALING_SIZES = (10**5, 10**6, 10**7)
_TOP_LEVEL = ("format", "loader", "cache")  # grid keys of RunConfig; the others are loader settings


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: the dataset size it needs and the run to do on it."""

    size: int | None  # None: the sweep's one dataset
    config: RunConfig


def expand(
    base: RunConfig, grid: dict[str, list], sizes: list[int | None], device: torch.device, remote: bool = False
) -> tuple[list[Point], list[str]]:
    """The product of the grid's values over the base configuration, minus what does not go together (here, and
    from object storage when `remote`)."""
    keys = list(grid)
    points, notes = [], []
    seen = set()
    for size in sizes:
        for values in itertools.product(*(grid[k] for k in keys)):
            changes = dict(zip(keys, values, strict=True))
            try:
                config = settle_device(_apply(base, changes), device)
                if remote:
                    check_remote(config)
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
        crossed = {s.name: s.preset_values(cuda) for s in SETTINGS.values() if s.preset}
        return {"format": [fmt], "loader": [SETTINGS_LOADER], **crossed}, [None]
    if name == "formats":
        return {"format": list(FORMATS), "loader": list(CORE_LOADERS), "cache": ["cold", "warm"]}, [None]
    if name == "scaling":
        pairs_formats = sorted({f for ld in SCALING_LOADERS for f in LOADERS[ld].reads})
        return {"format": pairs_formats, "loader": list(SCALING_LOADERS), "cache": ["warm"]}, list(SCALING_SIZES)
    raise IobenchError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")


def settings_extras(base: RunConfig, fmt: str, cache: str, remote: bool = False) -> list[RunConfig]:
    """The settings preset's rows outside the grid, with the grid's first cache: a background prefetch thread,
    everything resident (not from object storage, which reads it through no such loader)."""
    base = replace(base, format=fmt, cache=cache)
    extras = [replace(base, loader=SETTINGS_LOADER).with_settings(prefetch_thread=4)]
    return extras + ([] if remote else [replace(base, loader=RESIDENT_BASELINE)])


def still_to_run(
    points: list[Point], dirs: dict, device: torch.device, results: Path, remote: RemoteTarget | None = None
) -> list:
    """Every point resolved against its dataset, read from `remote` when given (so a bad one fails before any
    work), minus the configurations the results file already holds."""
    already = done_identities(results)
    resolved = [resolve(p.config, RunTarget(dirs[p.size], device, remote)) for p in points]
    return [r for r in resolved if r.recorded().identity() not in already]


def run_sweep(
    todo: list,
    results: Path,
    limits: MachineLimits | RemoteLimits | None,
    events: Events = QUIET,
    isolated: bool = False,
) -> list[RunRecord]:
    """Run each resolved configuration and append its record at once (a stopped sweep resumes). `isolated`: each
    in a process of its own (run.isolated), as object storage needs when some configurations fork workers.

    A configuration that fails is said in one line and the sweep goes on (a long grid is not lost to one library's
    error); the failures end it in one line, unrecorded, so that running the sweep again tries them again."""
    records, failed = [], []
    for k, resolved in enumerate(todo):
        events.run_started(k, len(todo), f"{resolved.config.label} {resolved.dataset_dir.name[:24]}")
        try:
            record = run_isolated(resolved, limits) if isolated else run(resolved, limits, events=events)
        except IobenchError as exc:
            c = resolved.recorded()
            failed.append(f"{c.label} {c.cache} {' '.join(settings_parts(c.settings))}: {exc}")
            events.say(f"warning: configuration {k + 1} of {len(todo)} failed, going on: {failed[-1]}")
            continue
        records.append(record)
        append_record(results, record)
    if failed:
        raise IobenchError(
            f"{len(failed)} of {len(todo)} configuration(s) failed and were not recorded (the "
            f"{len(records)} others were; the sweep tries the failed again when run again), first: "
            f"{failed[0]}"
        )
    return records
