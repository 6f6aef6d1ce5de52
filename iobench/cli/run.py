"""`run`: time loading from disk to the device."""

from __future__ import annotations

from pathlib import Path

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import reporter, say
from iobench.errors import IobenchError


@app.command("run")
def run_cmd(
    format: o.Formats = None,
    loader: o.Loaders = None,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    batch_size: o.BatchSize = 1024,
    num_workers: o.NumWorkers = 0,
    prefetch_factor: o.PrefetchFactor = None,
    pin_memory: o.PinMemory = None,
    non_blocking: o.NonBlocking = True,
    shuffle: o.Shuffle = True,
    block_shuffle: o.BlockShuffle = 0,
    persistent_workers: o.PersistentWorkers = False,
    in_order: o.InOrder = True,
    fetch: o.Fetch = "batch",
    prefetch_thread: o.PrefetchThread = 0,
    readahead_mb: o.ReadaheadMb = 32,
    ray_address: o.RayAddress = None,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 3,
    max_batches: o.MaxBatches = None,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    min_au: o.MinAu = None,
    what_if: o.WhatIf = None,
    seed: o.Seed = 0,
    cache: o.Cache = "warm",
    eviction: o.Eviction = "auto",
    read_limit: o.ReadLimit = None,
    cache_budget: o.CacheBudget = None,
    transform: o.Transform = "none",
    transform_on: o.TransformOn = "host",
    profile: o.Profile = False,
    results: o.Results = Path("results/results.jsonl"),
    nproc: o.Nproc = None,
    quiet: o.Quiet = False,
) -> None:
    """Time loading from disk to the device: every format through the DataLoader, and tensorclass memmap.

    Under torchrun every rank reads its share of each epoch (DistributedSampler for the DataLoader,
    contiguous shares of the shared order otherwise) and rank 0 writes one record for all of them.
    """
    from iobench.cli import app as cli_app
    from iobench.cli.console import announce_limits
    from iobench.cli.measuring import config_of, measure_what_if, run_one, save, step_times
    from iobench.cli.render import print_run
    from iobench.results.store import check_writable
    from iobench.run.config import RunTarget, settle_device
    from iobench.run.device import resolve_device
    from iobench.run.distributed import joined, launched_by_torchrun
    from iobench.run.limits import stored_or_measured
    from iobench.run.loaders.base import LoaderSettings
    from iobench.run.selection import parse_pairs
    from iobench.run.session import dataset_for_run, launch_torchrun, resolve_all

    pairs, notes = parse_pairs(format, loader)
    what_if_ms = step_times(what_if, nproc is not None or launched_by_torchrun()) if what_if else None
    if min_au is not None and not 0 <= min_au <= 1:
        raise IobenchError(f"--min-au is a share between 0 and 1 (0.9 for 90%), got {min_au}")
    settings = LoaderSettings(**{k: v for k, v in locals().items() if k in LoaderSettings.__dataclass_fields__})
    options = dict(shuffle=shuffle, block_size=block_shuffle, epochs=epochs, warmup=warmup, runs=runs)
    options.update(max_batches=max_batches, max_seconds=max_seconds, step=step, seed=seed, cache=cache)
    options.update(read_limit_mb_per_s=read_limit, cache_budget=cache_budget)
    options.update(transform=transform, transform_on=transform_on)
    configs = [config_of(f, ld, settings, eviction=eviction, **options) for f, ld in pairs]
    if nproc is not None:
        launch_torchrun(nproc, cli_app.ARGV, data_dir, dataset, device, configs, say, lambda: reporter(quiet))
        return
    check_writable(results)
    with joined(device) as (world, own_device):
        quiet = quiet or not world.is_main  # one progress bar and one table, from rank 0
        target_device = resolve_device(own_device)
        configs = [settle_device(c, target_device) for c in configs]  # machine checks before any dataset
        formats = tuple(dict.fromkeys(f for f, _ in pairs))
        dataset_dir = dataset_for_run(world, data_dir, dataset, formats, say, lambda: reporter(quiet))
        todo = resolve_all(configs, RunTarget(dataset_dir, target_device), world)
        limits = None
        if world.is_main:
            for note in notes:
                say(note)
            limits = stored_or_measured(results, dataset_dir, target_device, announce_limits, read_limit)
        world.barrier()  # no rank reads while rank 0 measures the machine's limits
        profile_dir = results.parent / "profiles" if profile else None
        records = []
        for resolved in todo:
            records.append(run_one(resolved, quiet, limits, profile_dir))
            if world.is_main:
                save(results, records[-1])
    if world.is_main:
        print_run(records, dataset_dir.name, results, min_au)
        if what_if_ms:
            measure_what_if(todo, records, what_if_ms, results, limits, quiet)
