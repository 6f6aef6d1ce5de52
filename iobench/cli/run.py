"""`run`: time loading from disk to the device."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.errors import IobenchError

if TYPE_CHECKING:
    from iobench.sessions.run import RunRequest

MAX_UNTIL_MINUTES = 24 * 60.0  # --until-decided's bound where it is parsed: a day


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
    until_decided: o.UntilDecided = None,
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
    _check_share(min_au)  # what can be refused without torch first: a mistake is named in a fraction of a second
    if dataset_factory is not None:
        return _run_factory(ctx)
    request = run_request(ctx)
    from iobench.cli.bars import RunEvents
    from iobench.cli.run_output import print_interrupted, print_outcome
    from iobench.sessions.run import RunInterrupted, run_session

    try:
        outcome = run_session(request, RunEvents(quiet))
    except RunInterrupted as stopped:
        print_interrupted(stopped, request.place, min_au, wide)
        raise
    if outcome is not None:  # None: torchrun was launched, and its ranks print
        print_outcome(outcome, request.place, min_au, wide)


def run_request(ctx: typer.Context) -> RunRequest:
    """The one converter from `run`'s parsed options to its session's Request (checked here: a mistake is named
    before torch is imported)."""
    from iobench.cli.app import ARGV
    from iobench.plan.place import place_of
    from iobench.plan.selection import parse_pairs
    from iobench.results.store import check_writable
    from iobench.torchrun_env import launched_by_torchrun

    p = ctx.params
    nproc = p["nproc"]
    where = place_of(
        p,
        p["results"],
        nproc=nproc,
        flags=o.place_flags(ctx),
        cprofile=p["profile"],
        size=_size_of(p["size"], p["dataset"]),
        rank_timeout=p["rank_timeout"],
    )
    if nproc is None:
        check_writable(p["results"])
    pairs, notes = parse_pairs(p["format"], p["loader"], remote=where.object_storage)
    from iobench.plan.command_values import config_of, read_options_of, settings_of  # torch: after the refusals
    from iobench.plan.run_options import RUN, run_options_of

    what_if = p["what_if"]
    what_if_ms = step_times(what_if, nproc is not None or launched_by_torchrun()) if what_if else []
    timing = {k: p[k] for k in ("shuffle", "epochs", "warmup", "runs", "max_batches", "max_seconds", "step", "seed")}
    timing["block_size"] = p["block_shuffle"]
    read = read_options_of(p["format_option"] or [], pairs)
    settings = settings_of(p)
    options = {**timing, **run_options_of(p, RUN)}
    configs = tuple(config_of(f, ld, settings, read_options=read, **options) for f, ld in pairs)
    from iobench.sessions.run import RunRequest

    until = p["until_decided"]
    if until is not None and not (math.isfinite(until) and 0 < until <= MAX_UNTIL_MINUTES):
        raise IobenchError(f"--until-decided: minutes above 0 and at most {MAX_UNTIL_MINUTES:g}, got {until}")
    return RunRequest(
        configs,
        where,
        tuple(ARGV),
        notes=tuple(notes),
        nproc=nproc,
        loaders_named=p["loader"],
        estimate=not p["quiet"],
        what_if_ms=tuple(what_if_ms),
        until_decided_minutes=until,
    )


def ms_list(text: str) -> list[float]:
    """A comma list of step times in ms (`--what-if` of run and feed); ValueError where one is not a number, each
    command words its own refusal and bounds."""
    from iobench.choices import split_list

    return [float(x) for x in split_list(text, "--what-if step time")]


def step_times(text: str, ranks: bool) -> list[float]:
    """--what-if's step times in ms, checked."""
    if ranks:
        raise IobenchError("--what-if measures its checks in one process; run it without torchrun or --nproc")
    try:
        values = ms_list(text)
    except ValueError:
        raise IobenchError(f"--what-if takes step times in ms, e.g. 2.5,10; got {text!r}") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise IobenchError(f"--what-if step times must be >= 0 ms, got {text!r}")
    return values


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
