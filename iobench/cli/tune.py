"""`tune`: search loader settings for this data and machine."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import err, say
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import LOADERS, LoaderName


@app.command("tune")
def tune_cmd(
    format: Annotated[str, typer.Option("--format", help=f"The format to tune: one of {', '.join(FORMATS)}.")],
    step: o.Step = "none",
    budget_minutes: Annotated[float, typer.Option(help="Time the search may take.")] = 5.0,
    batch_size: o.List("--batch-size", "Batch size, or a comma list to search over (e.g. 256,1024).") = "1024",
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    device: o.Device = "auto",
    shuffle: o.Shuffle = True,
    cache: o.Cache = "warm",
    torch_threads: o.TorchThreads = None,
    transform: o.Transform = "none",
    transform_on: o.TransformOn = "host",
    results: Annotated[Path, typer.Option(help="JSONL file; a stopped search resumes from it.")] = Path(
        "results/tune.jsonl"
    ),
    quiet: o.Quiet = False,
) -> None:
    """Search DataLoader settings (workers, prefetch, persistence, order, pinning) for your data and machine."""
    from dataclasses import replace

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from iobench.choices import parse_ints
    from iobench.cli.console import ConsoleEvents
    from iobench.cli.measuring import RoundBar, config_of
    from iobench.cli.render import print_tune
    from iobench.loaders.base import LoaderSettings
    from iobench.loaders.device import resolve_device
    from iobench.measuring.distributed import SINGLE
    from iobench.measuring.limits import stored_or_measured
    from iobench.plan.resolve import RunTarget
    from iobench.results.store import check_writable
    from iobench.run.session import dataset_for_run
    from iobench.run.tune import candidates, tune

    target = resolve_device(device)
    check_writable(results)
    if not (math.isfinite(budget_minutes) and budget_minutes > 0):
        raise IobenchError(f"--budget-minutes must be a number > 0, got {budget_minutes}")
    sizes = parse_ints(batch_size, "batch-size")
    base = config_of(format.lower(), "dataloader", LoaderSettings(batch_size=sizes[0]), shuffle=shuffle, block_size=0)
    # the user's transform and step: workers pay off with a per-sample augmentation and not without
    base = replace(
        base, step=step, cache=cache, torch_threads=torch_threads, transform=transform, transform_on=transform_on
    )
    fmt = base.format
    dataset_dir = dataset_for_run(SINGLE, data_dir, dataset, (fmt,), ConsoleEvents(quiet))
    threads = LOADERS[LoaderName.NODES].installed  # torchdata.nodes' threads against worker processes
    found = candidates(
        base, fmt, target.type == "cuda", sizes if "," in batch_size else None, fmt == "memmap", threads=threads
    )
    limits = stored_or_measured(results, dataset_dir, target, ConsoleEvents())
    say(f"tuning {fmt} on {target}: {len(found)} candidate settings, at most {budget_minutes:g} min")
    columns = (TextColumn("{task.description:<60}", markup=False), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=quiet) as progress:
        task = progress.add_task("tune", total=budget_minutes * 60)
        bar = RoundBar(progress, task)
        outcome = tune(found, RunTarget(dataset_dir, target), budget_minutes * 60, results, limits, bar)
    print_tune(outcome, results, dataset_dir, str(target))
