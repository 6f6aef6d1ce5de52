"""`run`: time loading from disk to the device."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from iobench.cli import option_groups as g
from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.dataset_factory import factory_of
from iobench.errors import IobenchError
from iobench.plan.place import PlaceValues
from iobench.settings import LoaderSettings

if TYPE_CHECKING:
    from iobench.sessions.run import RunRequest

MAX_UNTIL_MINUTES = 24 * 60.0  # --until-decided's bound where it is parsed: a day


@dataclass(frozen=True)
class RunAsked:
    """run's own options, declared once: typer reads each field as an option (`takes_group`), and the command gets
    them as this value."""

    format: o.Formats = None
    loader: o.Loaders = None
    dataset_factory: o.DatasetFactory = None
    size: o.RunSize = None
    shuffle: o.Shuffle = True
    block_shuffle: o.BlockShuffle = 0
    epochs: o.Epochs = 1
    warmup: o.Warmup = 1
    runs: o.Runs = 3
    until_decided: o.UntilDecided = None
    max_batches: o.MaxBatches = None
    max_seconds: o.MaxSeconds = None
    step: o.Step = "none"
    min_au: o.MinAu = None
    what_if: o.WhatIf = None
    seed: o.Seed = 0
    format_option: o.ReadOption = None
    profile: o.Profile = False
    results: o.Results = Path("results/results.jsonl")
    nproc: o.Nproc = None
    rank_timeout: o.RankTimeout = 1800.0
    wide: o.Wide = False
    quiet: o.Quiet = False


@app.command("run")
@g.takes_run_options("run", after="seed")
@g.takes_settings(after="shuffle")
@g.takes_place(after="size")
@g.takes_group(RunAsked, None, "asked", first=True)
def run_cmd(
    ctx: typer.Context,
    *,
    asked: RunAsked,
    place: PlaceValues,  # its options after --size
    settings: LoaderSettings,  # after --shuffle
    run_options: Mapping[str, Any],  # after --seed
) -> None:
    """Time loading from storage to the device: by default each core format through the DataLoader, and tensorclass.
    Under torchrun each rank reads its share; --dataset-factory times your Dataset; --remote reads object storage."""
    _check_share(asked.min_au)  # what can be refused without torch first: a mistake is named in a fraction of a second
    if asked.dataset_factory is not None:
        from iobench.cli.dataset_factory import run_factory_cmd

        given = factory_of(ctx, asked, settings, run_options)
        return run_factory_cmd(
            ctx, given, place.device, asked.results, min_au=asked.min_au, wide=asked.wide, quiet=asked.quiet
        )
    request = run_request(asked, place, settings, run_options)
    from iobench.cli.bars import RunEvents
    from iobench.cli.run_output import print_interrupted, print_outcome
    from iobench.sessions.run import RunInterrupted, run_session

    try:
        outcome = run_session(request, RunEvents(asked.quiet))
    except RunInterrupted as stopped:
        print_interrupted(stopped, request.place, asked.min_au, asked.wide)
        raise
    if outcome is not None:  # None: torchrun was launched, and its ranks print
        print_outcome(outcome, request.place, asked.min_au, asked.wide)


def run_request(
    asked: RunAsked, place: PlaceValues, settings: LoaderSettings, run_options: Mapping[str, Any]
) -> RunRequest:
    """The one converter from `run`'s parsed options to its session's Request (checked here: a mistake is named
    before torch is imported)."""
    from iobench.plan.place import place_of
    from iobench.plan.selection import parse_pairs
    from iobench.results.store import check_writable
    from iobench.torchrun_env import launched_by_torchrun

    where = place_of(
        place,
        asked.results,
        nproc=asked.nproc,
        cprofile=asked.profile,
        size=_size_of(asked.size, place.dataset),
        rank_timeout=asked.rank_timeout,
    )
    if asked.nproc is None:
        check_writable(asked.results)
    pairs, notes = parse_pairs(asked.format, asked.loader, remote=where.object_storage)
    from iobench.plan.command_values import config_of, read_options_of  # torch: after the refusals
    from iobench.plan.run_options import RUN, run_options_of

    what_if_ms = step_times(asked.what_if, asked.nproc is not None or launched_by_torchrun()) if asked.what_if else []
    timing = dict(
        shuffle=asked.shuffle,
        epochs=asked.epochs,
        warmup=asked.warmup,
        runs=asked.runs,
        max_batches=asked.max_batches,
        max_seconds=asked.max_seconds,
        step=asked.step,
        seed=asked.seed,
        block_size=asked.block_shuffle,
    )
    read = read_options_of(asked.format_option or [], pairs)
    options = {**timing, **run_options_of(run_options, RUN)}
    configs = tuple(config_of(f, ld, settings, read_options=read, **options) for f, ld in pairs)
    from iobench.sessions.run import RunRequest

    if asked.until_decided is not None and not (
        math.isfinite(asked.until_decided) and 0 < asked.until_decided <= MAX_UNTIL_MINUTES
    ):
        raise IobenchError(
            f"--until-decided: minutes above 0 and at most {MAX_UNTIL_MINUTES:g}, got {asked.until_decided}"
        )
    return RunRequest(
        configs=configs,
        place=where,
        notes=tuple(notes),
        nproc=asked.nproc,
        formats_named=asked.format,
        loaders_named=asked.loader,
        estimate=not asked.quiet,
        what_if_ms=tuple(what_if_ms),
        until_decided_minutes=asked.until_decided,
        printing=_printing(asked),
    )


def _printing(asked: RunAsked) -> tuple[str, ...]:
    """The options for what `run` prints, as each of --nproc's ranks is given them."""
    minimum = ("--min-au", repr(asked.min_au)) if asked.min_au is not None else ()
    return (*minimum, *(("--wide",) if asked.wide else ()), *(("--quiet",) if asked.quiet else ()))


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


def _size_of(text: str | None, dataset: str | None) -> int | None:
    from iobench.units import parse_size

    if text is None:
        return None
    if dataset is not None:
        raise IobenchError("--size and --dataset both name a dataset: give one")
    return parse_size(text)
