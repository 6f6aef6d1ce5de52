"""`tune`: search loader settings for this data and machine."""

from __future__ import annotations

import math
import shlex
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import err, say
from iobench.cli.options import OptStr
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import DEFAULT_LOADER

if TYPE_CHECKING:
    import torch

    from iobench.run.tune import TuneSearch
    from iobench.storage.remote import RemoteTarget


@app.command("tune")
@o.takes_run_options("tune", after="shuffle")
def tune_cmd(
    ctx: typer.Context,
    format: Annotated[
        OptStr, typer.Option("--format", help=f"The format to tune: one of {', '.join(FORMATS)}.")
    ] = None,
    dataset_factory: o.DatasetFactory = None,
    step: o.Step = "none",
    budget_minutes: Annotated[float, typer.Option(help="Time the search may take.")] = 5.0,
    rounds: Annotated[
        Optional[int],  # noqa: UP045 - typer reads the annotation at runtime
        typer.Option(
            min=1,
            help="At most this many rounds of the search (each halves the candidates), whatever time "
            "is left: a search that ends the same way on a busy machine.",
        ),
    ] = None,
    batch_size: o.List("--batch-size", "Batch size, or a comma list to search over (e.g. 256,1024).") = "1024",
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    shuffle: o.Shuffle = True,
    min_shuffle: Annotated[
        float,
        typer.Option(
            help="Recommend only settings whose delivered order scores at least this (spread and order, 1.0 = a "
            "uniform shuffle; docs/shuffle-quality.md): a format's own pipeline with a small buffer is fast "
            "because it hardly shuffles. 0: speed alone."
        ),
    ] = 0.9,
    remote: o.Remote = None,
    endpoint_url: o.EndpointUrl = None,
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
    fuse_chunk: o.FuseChunk = None,
    fuse_read_ahead: o.FuseReadAhead = None,
    results: Annotated[Path, typer.Option(help="JSONL file; a stopped search resumes from it.")] = Path(
        "results/tune.jsonl"
    ),
    check_paste: Annotated[
        bool,
        typer.Option(
            help="After the search, run the script tune pastes in a fresh process, as you would, and print its "
            "figure beside tune's with their ratio (a few epochs of the winner)."
        ),
    ] = True,
    quiet: o.Quiet = False,
    **options: object,  # the run options tune takes (iobench.plan.run_options), placed after --shuffle
) -> None:
    """Search loading settings (workers, prefetch, persistence, order, pinning; a format's own pipeline with
    its library knobs, weighed by shuffle quality) for your data and machine: a prepared --format, or your
    own Dataset (--dataset-factory module:function); --remote: workers and threads against object storage."""
    from iobench.choices import parse_ints
    from iobench.cli.run import remote_of
    from iobench.loaders.device import resolve_device
    from iobench.results.store import check_writable

    if (format is None) == (dataset_factory is None):
        raise IobenchError("tune needs --format FORMAT, or --dataset-factory module:function for your own Dataset")
    target = resolve_device(device)
    check_writable(results)
    if not (math.isfinite(budget_minutes) and budget_minutes > 0):
        raise IobenchError(f"--budget-minutes must be a number > 0, got {budget_minutes}")
    sizes = parse_ints(batch_size, "batch-size")
    if not 0 <= min_shuffle <= 1:
        raise IobenchError(f"--min-shuffle is a score between 0 and 1, got {min_shuffle}")
    searched = sizes if "," in batch_size else None
    if dataset_factory is not None:
        from iobench.cli.dataset_factory import factory_search

        search = factory_search(ctx, target, sizes[0], searched)
        return _search(search, target, budget_minutes, results, min_shuffle if shuffle else 0.0, quiet, check_paste,
                       rounds)  # fmt: skip
    network, fuse = remote_of(remote, latency_ms, connection_mb_per_s, None, endpoint_url, fuse_chunk, fuse_read_ahead)
    from iobench.cli.console import ConsoleEvents
    from iobench.run.preparing import dataset_for_run
    from iobench.run.serving import served
    from iobench.system.world import SINGLE

    fmt = format.lower()
    dataset_dir = dataset_for_run(SINGLE, data_dir, dataset, (fmt,), ConsoleEvents(quiet))
    with served(network, endpoint_url, dataset_dir, fuse) as where:
        search = _format_search(ctx, target, sizes[0], searched, dataset_dir, where)
        _search(search, target, budget_minutes, results, min_shuffle if shuffle else 0.0, quiet, check_paste, rounds)


def _search(search: TuneSearch, target: torch.device, budget_minutes: float, results: Path, floor: float,
            quiet: bool, check: bool = True, rounds: int | None = None) -> None:  # fmt: skip
    """The search (within most of the budget), the winner measured again in a fresh run (the rest of it), its ranking
    and recommendation, and the pasted script run as the user would run it."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from iobench.cli.bars import RoundBar
    from iobench.cli.render import print_paste_check, print_tune
    from iobench.run.tune import CONFIRM_SHARE, confirm, tune

    say(f"tuning {search.what} on {target}: {len(search.found)} candidate settings, at most {budget_minutes:g} min")
    columns = (TextColumn("{task.description:<60}", markup=False), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=quiet) as progress:
        task = progress.add_task("tune", total=budget_minutes * 60)
        bar = RoundBar(progress, task)
        # floor: --no-shuffle asked for storage order, and gets 0
        outcome = tune(search.found, search.trials, budget_minutes * 60 * (1 - CONFIRM_SHARE), results, bar, floor,
                       rounds)  # fmt: skip
        confirm(outcome, search.trials, results, bar)
    script = print_tune(outcome, results, search.script, search.command)
    if check and script is not None and outcome.best.confirmed is not None:
        from iobench.run.paste_check import check_paste

        epoch = outcome.best.confirmed.epochs.epoch_seconds_median
        say(f"checking the pasted script: `{shlex.join(['python', str(script)])}` in a fresh process ...")
        print_paste_check(check_paste(script, timeout_s=120 + 30 * epoch), outcome.best)


def _format_search(ctx: typer.Context, target: torch.device, batch: int, sizes: list[int] | None, dataset_dir: Path,
                   remote: RemoteTarget | None) -> TuneSearch:  # fmt: skip
    """A prepared format's candidates: the DataLoader (and tensorclass, torchdata.nodes where they apply); from
    object storage (`remote`), its workers and threads, each trial in a process of its own."""
    from functools import partial

    from iobench.cli.console import ConsoleEvents
    from iobench.cli.measuring import config_of
    from iobench.plan.paste import best_script, run_command
    from iobench.plan.resolve import RunTarget, settle_device
    from iobench.plan.run_options import TUNE, run_options_of
    from iobench.plan.selection import tuned_loaders
    from iobench.run.serving import limits_of
    from iobench.run.tune import FormatTrials, TuneSearch
    from iobench.run.tune_candidates import candidates
    from iobench.settings import LoaderSettings

    p = ctx.params
    fmt = p["format"].lower()
    base = config_of(fmt, DEFAULT_LOADER, LoaderSettings(batch_size=batch), shuffle=p["shuffle"], block_size=0)
    # the user's transform and step: workers pay off with a per-sample augmentation and not without
    base = replace(base, step=p["step"], **run_options_of(p, TUNE))
    found = candidates(base, fmt, target.type == "cuda", sizes, tuned_loaders(fmt, remote is not None),
                       remote=remote is not None)  # fmt: skip
    limits = limits_of(remote, dataset_dir, target, p["results"], ConsoleEvents())
    trials = FormatTrials(RunTarget(dataset_dir, target, remote), limits)
    if remote is None:
        script, command = partial(best_script, dataset_dir=dataset_dir, device=str(target)), None
    else:
        script, command = None, partial(run_command, place=_remote_flags(ctx), device=str(target))
    return TuneSearch(fmt, [settle_device(c, target) for c in found], trials, script, command)


# tune's options that point a run at the same data, store and profile (run has them under the same flags)
PLACE = ("remote", "endpoint_url", "latency_ms", "connection_mb_per_s", "fuse_chunk", "fuse_read_ahead", "data_dir",
         "dataset")  # fmt: skip


def _remote_flags(ctx: typer.Context) -> list[str]:
    """PLACE's options as given (defaults included), each under its flag."""
    from iobench.cli.dataset_factory import flag

    given = [(name, ctx.params[name]) for name in PLACE if ctx.params[name] is not None]
    return [part for name, value in given for part in (flag(ctx, name), str(value))]
