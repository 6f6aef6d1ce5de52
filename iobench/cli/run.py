"""`run`: time loading from disk to the device."""

from __future__ import annotations

from pathlib import Path

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.errors import IobenchError
from iobench.run.place import RunPlace
from iobench.storage.remote import FUSE_CHUNK, FuseOptions
from iobench.storage.remote.profiles import Profile


@app.command("run")
@o.takes_run_options("run", after="seed")
@o.takes_settings(after="device")
def run_cmd(
    ctx: typer.Context,
    format: o.Formats = None,
    loader: o.Loaders = None,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    dataset_factory: o.DatasetFactory = None,
    size: o.RunSize = None,
    device: o.Device = "auto",
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
    remote: o.Remote = None,
    endpoint_url: o.EndpointUrl = None,
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
    fuse_chunk: o.FuseChunk = None,
    fuse_read_ahead: o.FuseReadAhead = None,
    profile: o.Profile = False,
    results: o.Results = Path("results/results.jsonl"),
    nproc: o.Nproc = None,
    rank_timeout: o.RankTimeout = 1800.0,
    wide: o.Wide = False,
    quiet: o.Quiet = False,
    **declared: object,  # the settings' options (iobench.settings) after --device, the run options' after --seed
) -> None:
    """Time loading from storage to the device: by default each core format through the DataLoader, and tensorclass.
    Under torchrun each rank reads its share; --dataset-factory times your Dataset; --remote reads object storage."""
    from iobench.plan.selection import parse_pairs
    from iobench.results.store import check_writable

    # Everything that can be refused without torch first: a mistake is named in a fraction of a second.
    _check_share(min_au)
    if dataset_factory is not None:
        return _run_factory(ctx)
    net, fuse = remote_of(remote, latency_ms, connection_mb_per_s, nproc, endpoint_url, fuse_chunk, fuse_read_ahead)
    if nproc is None:
        check_writable(results)
    pairs, notes = parse_pairs(format, loader, remote=net is not None or endpoint_url is not None)
    samples = _size_of(size, dataset)
    from iobench.cli.measuring import config_of, measure_run, read_options_of, settings_of, step_times
    from iobench.plan.run_options import RUN, run_options_of
    from iobench.torchrun_env import launched_by_torchrun

    what_if_ms = step_times(what_if, nproc is not None or launched_by_torchrun()) if what_if else None
    options = dict(shuffle=shuffle, block_size=block_shuffle, epochs=epochs, warmup=warmup, runs=runs)
    options.update(max_batches=max_batches, max_seconds=max_seconds, step=step, seed=seed)
    options.update(run_options_of(ctx.params, RUN))
    read = read_options_of(format_option or [], pairs)
    configs = [config_of(f, ld, settings_of(ctx.params), read_options=read, **options) for f, ld in pairs]
    where = RunPlace(data_dir, dataset, device, results, options["read_limit_mb_per_s"], profile, samples, net,
                     endpoint_url, fuse, rank_timeout)  # fmt: skip
    measure_run(configs, notes, where, nproc=nproc, quiet=quiet, min_au=min_au, what_if_ms=what_if_ms, wide=wide,
                loaders_named=loader)  # fmt: skip


def _check_share(min_au: float | None) -> None:
    if min_au is not None and not 0 <= min_au <= 1:
        raise IobenchError(f"--min-au is a share between 0 and 1 (0.9 for 90%), got {min_au}")


def _run_factory(ctx: typer.Context) -> None:
    from iobench.cli.dataset_factory import run_factory_cmd

    return run_factory_cmd(ctx)


def remote_of(remote: str | None, latency_ms: float | None, connection_mb_per_s: float | None, nproc: int | None,
            endpoint_url: str | None, chunk: str | None, read_ahead: str | None
            ) -> tuple[Profile | None, FuseOptions | None]:  # fmt: skip
    """--remote's profile and the FUSE options, checked before anything is read."""
    network = _network(remote, latency_ms, connection_mb_per_s, nproc, endpoint_url)
    return network, _fuse(chunk, read_ahead, network is not None or endpoint_url is not None)


def _fuse(chunk: str | None, read_ahead: str | None, remote: bool) -> FuseOptions | None:
    if chunk is None and read_ahead is None:
        return None
    from iobench.storage.remote.mount import check_size

    return FuseOptions(
        check_size("--fuse-chunk", chunk, remote, 64 * 2**10) if chunk is not None else FUSE_CHUNK,
        check_size("--fuse-read-ahead", read_ahead, remote, 0) if read_ahead is not None else None,
    )


def _network(remote: str | None, latency_ms: float | None, connection_mb_per_s: float | None,
             nproc: int | None, endpoint_url: str | None) -> Profile | None:  # fmt: skip
    """--remote's profile with its overrides; the overrides alone are refused (they shape nothing)."""
    if endpoint_url is not None and (remote is not None or nproc is not None):
        raise IobenchError("--endpoint-url reads a store as it is: not with --remote (iobench's own) or --nproc")
    if remote is None:
        if latency_ms is not None or connection_mb_per_s is not None:
            raise IobenchError("--latency-ms and --connection-mb-per-s shape --remote: give --remote PROFILE too")
        return None
    if nproc is not None:
        raise IobenchError("--remote does not run under torchrun (--nproc) in this release")
    from iobench.storage.remote.profiles import profile

    return profile(remote, latency_ms, connection_mb_per_s)


def _size_of(text: str | None, dataset: str | None) -> int | None:
    from iobench.units import parse_size

    if text is None:
        return None
    if dataset is not None:
        raise IobenchError("--size and --dataset both name a dataset: give one")
    return parse_size(text)
