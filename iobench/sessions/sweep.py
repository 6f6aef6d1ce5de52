"""One `iobench sweep`, whole: the grid from a preset and the lists given, every dataset size it needs found or
prepared, the formats served when read from object storage, what the results file holds already left out, the limits
measured once and each configuration run (`iobench.run.sweep.run_sweep`). It talks through `Events` (the command
line's draw a bar over the configurations) and prints nothing."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from iobench.choices import parse_choices, split_list
from iobench.data.manifest import MANIFEST, Manifest, find_run_dataset
from iobench.data.prepare import WriteRequest, prepare
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.formats import DEFAULT_FORMATS, FORMATS
from iobench.plan.config import Cache, RunConfig
from iobench.plan.place import RunPlace
from iobench.plan.resolve import refuse_local_controls
from iobench.plan.selection import default_loaders, parse_loaders
from iobench.results.record import RunRecord
from iobench.run.serving import limits_of, served
from iobench.run.sweep import Point, expand, preset, run_sweep, settings_extras, still_to_run
from iobench.settings import swept
from iobench.spec import DatasetSpec
from iobench.units import parse_size


@dataclass(frozen=True)
class SweepRequest:
    """A sweep as its command gave it: the base configuration, the preset, the comma lists (format, loader, cache,
    size and each swept setting, as typed) and the place."""

    base: RunConfig
    preset: str | None
    lists: dict[str, str | None]
    place: RunPlace


@dataclass
class SweepOutcome:
    points: int  # configurations in the grid
    done_before: int  # of them, already in the results file
    records: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # combinations that do not go together


def sweep_session(request: SweepRequest, events: Events) -> SweepOutcome:
    """The grid expanded and measured (see the module's docstring); combinations that do not go together said."""
    from iobench.plan.resolve import device_of

    where, base = request.place, request.base
    device = device_of(where.device)
    grid, sizes = sweep_grid(request.preset, base, device, where.object_storage, **request.lists)
    points, notes = expand(base, grid, sizes, device, where.object_storage)
    if request.preset == "settings":
        extras = settings_extras(base, grid["format"][0], grid["cache"][0], where.object_storage)
        points += [Point(None, c) for c in extras]
    if not points:
        raise IobenchError(f"every combination was skipped, e.g. {notes[0]}" if notes else "the grid is empty")
    if notes:
        events.say(f"{len(notes)} combination(s) skipped because they do not go together, e.g. {notes[0]}")
    outcome = SweepOutcome(len(points), 0, skipped=notes)
    measure_sweep(
        points,
        sweep_datasets(points, where.data_dir, where.dataset, events),
        device,
        where,
        events,
        base.read_limit_mb_per_s,
        outcome,
    )
    return outcome


def sweep_grid(
    name: str | None, base: RunConfig, device: torch.device, remote: bool = False, **lists: str | None
) -> tuple[dict, list]:
    """The grid (option -> values) and the dataset sizes: a preset's, overridden by explicit lists. From object
    storage (`remote`) the loaders default to the DataLoader and each format's own pipeline, and the local storage
    controls are refused."""
    if remote:
        refuse_local_controls(base.read_limit_mb_per_s, base.cache_budget)
    grid, sizes = preset(name, device, _first_format(lists.get("format"))) if name else ({}, [None])
    parsers = {
        "format": lambda t: parse_choices(t, tuple(FORMATS), "format"),
        "loader": parse_loaders,
        **{s.name: s.parse_list for s in swept()},
        "cache": lambda t: parse_choices(t, tuple(c.value for c in Cache), "cache"),
    }
    for key, parse in parsers.items():
        if lists.get(key) is not None:
            grid[key] = parse(lists[key])
    if lists.get("size") is not None:
        sizes = [parse_size(x) for x in split_list(lists["size"], "--size value")]
    grid.setdefault("format", list(DEFAULT_FORMATS))  # what a plain `iobench prepare` writes
    grid.setdefault("cache", [Cache.WARM.value])
    grid.setdefault("loader", [ld.value for ld in default_loaders(remote)])
    return grid, sizes


def _first_format(text: str | None) -> str:
    return parse_choices(text, tuple(FORMATS), "format")[0] if text else "memmap"


def sweep_datasets(points: list[Point], data_dir: Path, dataset: str | None, events: Events) -> dict:
    """size -> dataset folder (None: the dataset found under data_dir). Sizes that are missing are
    prepared, and so are the formats a dataset lacks: only those the sweep reads."""
    dirs: dict[int | None, Path] = {}
    for size in dict.fromkeys(p.size for p in points):
        if size is None:
            reads = tuple(dict.fromkeys(p.config.format for p in points if p.size is None))
            skipped: list[str] = []
            found = find_run_dataset(data_dir, dataset, reads, skipped)
            for reason in skipped:
                events.say(f"warning: skipped {reason}")
            if found is None:
                raise IobenchError(f"no dataset in {data_dir}; run `iobench prepare` or give --size")
            directory, spec = found, Manifest.load(found).spec
        else:
            spec = DatasetSpec(size)
            directory = data_dir / spec.name
        needed = tuple(n for n in FORMATS if any(p.size == size and p.config.format == n for p in points))
        have = set(Manifest.load(directory).formats) if (directory / MANIFEST).is_file() else set()
        missing = tuple(n for n in needed if n not in have)
        if missing:
            events.say(f"preparing {directory.name}: {', '.join(missing)}")
            request = replace(
                WriteRequest.with_default_options(spec, directory.parent, missing), dataset=directory.name
            )
            with events.progress() as reporter:
                prepare(request, reporter)
        dirs[size] = directory
    return dirs


def measure_sweep(
    points: list[Point],
    dirs: dict,
    device: torch.device,
    where: RunPlace,
    events: Events,
    read_limit: float | None,
    outcome: SweepOutcome,
) -> None:
    """What is left of the sweep, measured: from the folder, or with the folder served as S3 (or the store at
    --endpoint-url) for as long as it runs, each configuration then in a process of its own."""
    parents = {d.parent for d in dirs.values()}
    if where.object_storage and len(parents) > 1:
        raise IobenchError(
            f"--remote serves one folder; this sweep's datasets are in {len(parents)}: give them one --data-dir"
        )
    first = next(iter(dirs.values()))
    with served(where.remote, where.endpoint_url, first, where.fuse) as remote:
        todo = still_to_run(points, dirs, device, where.results, remote)
        outcome.done_before = len(points) - len(todo)
        events.say(
            f"{len(points)} configuration(s), {outcome.done_before} already in {where.results}, {len(todo)} to run"
        )
        if not todo:
            return
        limits = limits_of(remote, todo[0].dataset_dir, device, where.results, events, read_limit)
        with events.configurations(len(todo)) as bar:
            outcome.records = run_sweep(todo, where.results, limits, bar, isolated=remote is not None)
