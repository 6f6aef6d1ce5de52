"""`sweep`: a grid of configurations, resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import say
from iobench.errors import IobenchError


@app.command("sweep")
@o.takes_run_options("sweep", after="step")
@o.takes_settings(after="loader", sweep=True)
def sweep_cmd(
    ctx: typer.Context,
    preset: o.Preset = None,
    format: o.List("--format", "Comma list or all.") = None,
    loader: o.List("--loader", "Comma list or all.") = None,
    cache: o.List("--cache", "Comma list of cold, warm, as-is.") = None,
    size: o.List("--size", "Comma list of dataset sizes (prepared when missing, default spec otherwise).") = None,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    shuffle: o.Shuffle = True,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 5,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    remote: o.Remote = None,
    endpoint_url: o.EndpointUrl = None,
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
    fuse_chunk: o.FuseChunk = None,
    fuse_read_ahead: o.FuseReadAhead = None,
    results: Annotated[Path, typer.Option(help="JSONL file; configurations already in it are skipped.")] = Path(
        "results/results.jsonl"
    ),
    quiet: o.Quiet = False,
    **declared: str | None,  # a comma list of each setting sweep takes after --loader; the run options after --step
) -> None:
    """Run a grid of configurations (resumable: what the results file holds is not run again).

    --remote reads object storage, each configuration in a process of its own."""

    from iobench.cli.console import ConsoleEvents
    from iobench.cli.measuring import config_of
    from iobench.cli.run import remote_of
    from iobench.cli.sweep_options import measure_sweep, sweep_datasets, sweep_grid
    from iobench.loaders import DEFAULT_LOADER
    from iobench.loaders.device import resolve_device
    from iobench.plan.run_options import SWEEP, run_options_of
    from iobench.results.store import check_writable
    from iobench.run.place import RunPlace
    from iobench.run.sweep import Point, expand, settings_extras
    from iobench.settings import LoaderSettings, swept

    network, fuse = remote_of(remote, latency_ms, connection_mb_per_s, None, endpoint_url, fuse_chunk, fuse_read_ahead)
    options = run_options_of(ctx.params, SWEEP)
    where = RunPlace(data_dir, dataset, device, results, options["read_limit_mb_per_s"], remote=network,
                     endpoint_url=endpoint_url, fuse=fuse)  # fmt: skip
    check_writable(results)
    target = resolve_device(device)
    base = config_of(  # as-is: the grid's caches (warm unless --cache says) decide; a cold one needs no warm-up
        "memmap", DEFAULT_LOADER, LoaderSettings(), shuffle=shuffle, block_size=0, epochs=epochs, warmup=warmup,
        cache="as-is", runs=runs, max_seconds=max_seconds, step=step, **options,
    )  # fmt: skip
    settings = {s.name: ctx.params[s.name] for s in swept()}
    lists = dict(format=format, loader=loader, cache=cache, size=size, **settings)
    objects = where.object_storage  # read from object storage
    grid, sizes = sweep_grid(preset, base, target, objects, **lists)
    points, notes = expand(base, grid, sizes, target, objects)
    if preset == "settings":
        points += [Point(None, c) for c in settings_extras(base, grid["format"][0], grid["cache"][0], objects)]
    if not points:
        raise IobenchError(f"every combination was skipped, e.g. {notes[0]}" if notes else "the grid is empty")
    if notes:
        say(f"{len(notes)} combination(s) skipped because they do not go together, e.g. {notes[0]}")
    measure_sweep(points, sweep_datasets(points, data_dir, dataset, ConsoleEvents(quiet)), target, where, quiet)
