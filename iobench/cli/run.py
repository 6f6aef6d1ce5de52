"""`run`: time loading from disk to the device."""

from __future__ import annotations

from pathlib import Path

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.errors import IobenchError


@app.command("run")
@o.takes_run_options("run", after="seed")
@o.takes_settings(after="shuffle")
@o.takes_place(after="size")
def run_cmd(
    ctx: typer.Context,
    format: o.Formats = None,
    loader: o.Loaders = None,
    dataset_factory: o.DatasetFactory = None,
    size: o.RunSize = None,
    shuffle: o.Shuffle = True,
    block_shuffle: o.BlockShuffle = 0,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 3,
    max_batches: o.MaxBatches = None,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    min_au: o.MinAu = None,
    what_if: o.WhatIf = None,
    seed: o.Seed = 0,
    format_option: o.ReadOption = None,
    profile: o.Profile = False,
    results: o.Results = Path("results/results.jsonl"),
    nproc: o.Nproc = None,
    rank_timeout: o.RankTimeout = 1800.0,
    wide: o.Wide = False,
    quiet: o.Quiet = False,
    **declared: object,  # the place after --size, the settings after --shuffle, the run options after --seed
) -> None:
    """Time loading from storage to the device: by default each core format through the DataLoader, and tensorclass.
    Under torchrun each rank reads its share; --dataset-factory times your Dataset; --remote reads object storage."""
    from iobench.plan.selection import parse_pairs
    from iobench.results.store import check_writable
    from iobench.run.place import place_of

    # Everything that can be refused without torch first: a mistake is named in a fraction of a second.
    _check_share(min_au)
    if dataset_factory is not None:
        return _run_factory(ctx)
    where = place_of(
        ctx.params,
        results,
        nproc=nproc,
        flags=o.place_flags(ctx),
        cprofile=profile,
        size=_size_of(size, ctx.params["dataset"]),
        rank_timeout=rank_timeout,
    )
    if nproc is None:
        check_writable(results)
    pairs, notes = parse_pairs(format, loader, remote=where.object_storage)
    from iobench.cli.measuring import measure_run, step_times
    from iobench.plan.command_values import config_of, read_options_of, settings_of
    from iobench.plan.run_options import RUN, run_options_of
    from iobench.torchrun_env import launched_by_torchrun

    what_if_ms = step_times(what_if, nproc is not None or launched_by_torchrun()) if what_if else None
    options = dict(shuffle=shuffle, block_size=block_shuffle, epochs=epochs, warmup=warmup, runs=runs)
    options.update(max_batches=max_batches, max_seconds=max_seconds, step=step, seed=seed)
    options.update(run_options_of(ctx.params, RUN))
    read = read_options_of(format_option or [], pairs)
    configs = [config_of(f, ld, settings_of(ctx.params), read_options=read, **options) for f, ld in pairs]
    measure_run(
        configs,
        notes,
        where,
        nproc=nproc,
        quiet=quiet,
        min_au=min_au,
        what_if_ms=what_if_ms,
        wide=wide,
        loaders_named=loader,
    )


def _check_share(min_au: float | None) -> None:
    if min_au is not None and not 0 <= min_au <= 1:
        raise IobenchError(f"--min-au is a share between 0 and 1 (0.9 for 90%), got {min_au}")


def _run_factory(ctx: typer.Context) -> None:
    from iobench.cli.dataset_factory import run_factory_cmd

    return run_factory_cmd(ctx)


def _size_of(text: str | None, dataset: str | None) -> int | None:
    from iobench.units import parse_size

    if text is None:
        return None
    if dataset is not None:
        raise IobenchError("--size and --dataset both name a dataset: give one")
    return parse_size(text)
