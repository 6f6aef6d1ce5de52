"""`tune`: search loader settings for this data and machine."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.options import OptStr
from iobench.errors import IobenchError
from iobench.judge.shuffle import UNIFORM_SHUFFLE
from iobench.plan.selection import FORMAT_NAMES


@app.command("tune")
@o.takes_run_options("tune", after="shuffle")
@o.takes_place(after="batch_size")
def tune_cmd(
    ctx: typer.Context,
    format: Annotated[
        OptStr, typer.Option("--format", help=f"The format to tune: one of {', '.join(FORMAT_NAMES)}.")
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
    shuffle: o.Shuffle = True,
    min_shuffle: Annotated[
        float,
        typer.Option(
            help="Recommend only settings whose delivered order scores at least this (spread and order, 1.0 = a "
            "uniform shuffle; docs/shuffle-quality.md): a format's own pipeline with a small buffer is fast "
            "because it hardly shuffles. 0: speed alone."
        ),
    ] = UNIFORM_SHUFFLE,
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
    **options: object,  # the place after --batch-size, the run options tune takes after --shuffle
) -> None:
    """Search loading settings (workers, prefetch, persistence, order, pinning; a format's own pipeline with
    its library knobs, weighed by shuffle quality) for your data and machine: a prepared --format, or your
    own Dataset (--dataset-factory module:function); --remote: workers and threads against object storage."""
    from iobench.choices import parse_ints
    from iobench.cli.bars import TuneEvents
    from iobench.cli.render import print_tune
    from iobench.plan.place import place_of
    from iobench.plan.resolve import device_of
    from iobench.results.store import check_writable
    from iobench.sessions.tune import TuneRequest, tune_session

    if (format is None) == (dataset_factory is None):
        raise IobenchError("tune needs --format FORMAT, or --dataset-factory module:function for your own Dataset")
    where = place_of(ctx.params, results, flags=o.place_flags(ctx)) if dataset_factory is None else None
    target = device_of(ctx.params["device"])
    check_writable(results)
    if not (math.isfinite(budget_minutes) and budget_minutes > 0):
        raise IobenchError(f"--budget-minutes must be a number > 0, got {budget_minutes}")
    sizes = parse_ints(batch_size, "batch-size")
    if not 0 <= min_shuffle <= 1:
        raise IobenchError(f"--min-shuffle is a score between 0 and 1, got {min_shuffle}")
    request = TuneRequest(
        where or place_of({}, results),
        target,
        sizes,
        "," in batch_size,
        budget_minutes,
        rounds,
        min_shuffle if shuffle else 0.0,
        check_paste,
    )
    request = _with_what(ctx, request, sizes[0])
    print_tune(tune_session(request, TuneEvents(quiet)), results)


def _with_what(ctx: typer.Context, request: object, batch: int) -> object:
    """The request with what is searched: the user's Dataset (its options checked), or a prepared format."""
    from dataclasses import replace

    p = ctx.params
    if p["dataset_factory"] is not None:
        from iobench.cli.dataset_factory import TUNE_APPLIES, factory_request, refuse_others

        refuse_others(ctx, TUNE_APPLIES)
        return replace(request, factory=factory_request(p, batch))
    from iobench.plan.run_options import TUNE, run_options_of
    from iobench.sessions.tune import format_base

    return replace(
        request, base=format_base(p["format"].lower(), batch, p["shuffle"], p["step"], run_options_of(p, TUNE))
    )
