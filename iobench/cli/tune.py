"""`tune`: search loader settings for this data and machine."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from iobench.cli import option_groups as g
from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.options import OptStr
from iobench.errors import IobenchError
from iobench.judge.shuffle import UNIFORM_SHUFFLE
from iobench.plan.place import PlaceValues
from iobench.plan.selection import FORMAT_NAMES


@dataclass(frozen=True)
class TuneAsked:
    """tune's own options, declared once: typer reads each field as an option (`takes_group`), and the command gets
    them as this value."""

    format: Annotated[
        OptStr, typer.Option("--format", help=f"The format to tune: one of {', '.join(FORMAT_NAMES)}.")
    ] = None
    dataset_factory: o.DatasetFactory = None
    step: o.Step = "none"
    budget_minutes: Annotated[float, typer.Option(help="Time the search may take.")] = 5.0
    rounds: Annotated[
        Optional[int],  # noqa: UP045 - typer reads the annotation at runtime
        typer.Option(
            min=1,
            help="At most this many rounds of the search (each halves the candidates), whatever time "
            "is left: a search that ends the same way on a busy machine.",
        ),
    ] = None
    batch_size: o.List("--batch-size", "Batch size, or a comma list to search over (e.g. 256,1024).") = "1024"
    shuffle: o.Shuffle = True
    min_shuffle: Annotated[
        float,
        typer.Option(
            help="Recommend only settings whose delivered order scores at least this (spread and order, 1.0 = a "
            "uniform shuffle; docs/shuffle-quality.md): a format's own pipeline with a small buffer is fast "
            "because it hardly shuffles. 0: speed alone.",
        ),
    ] = UNIFORM_SHUFFLE
    results: Annotated[Path, typer.Option(help="JSONL file; a stopped search resumes from it.")] = Path(
        "results/tune.jsonl"
    )
    check_paste: Annotated[
        bool,
        typer.Option(
            help="After the search, run the script tune pastes in a fresh process, as you would, and print its "
            "figure beside tune's with their ratio (a few epochs of the winner).",
        ),
    ] = True
    quiet: o.Quiet = False


@app.command("tune")
@g.takes_run_options("tune", after="shuffle")
@g.takes_place(after="batch_size")
@g.takes_group(TuneAsked, None, "asked", first=True)
def tune_cmd(ctx: typer.Context, *, asked: TuneAsked, place: PlaceValues, run_options: Mapping[str, Any]) -> None:
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

    if (asked.format is None) == (asked.dataset_factory is None):
        raise IobenchError("tune needs --format FORMAT, or --dataset-factory module:function for your own Dataset")
    # the user's Dataset has no data folder or object storage: only the device is the place's (others refused)
    where = place_of(place if asked.dataset_factory is None else PlaceValues(device=place.device), asked.results)
    device_of(place.device)  # a device this machine lacks refused before the search
    check_writable(asked.results)
    if not (math.isfinite(asked.budget_minutes) and asked.budget_minutes > 0):
        raise IobenchError(f"--budget-minutes must be a number > 0, got {asked.budget_minutes}")
    sizes = parse_ints(asked.batch_size, "batch-size")
    if not 0 <= asked.min_shuffle <= 1:
        raise IobenchError(f"--min-shuffle is a score between 0 and 1, got {asked.min_shuffle}")
    base, factory = None, None
    if asked.dataset_factory is not None:
        from iobench.cli.dataset_factory import TUNE_APPLIES, factory_request, refuse_others

        refuse_others(ctx, TUNE_APPLIES)
        factory = factory_request(
            asked.dataset_factory, sizes[0], shuffle=asked.shuffle, step=asked.step, run_options=run_options
        )
    else:
        from iobench.plan.run_options import TUNE, run_options_of
        from iobench.sessions.tune import format_base

        options = run_options_of(run_options, TUNE)
        base = format_base(asked.format.lower(), sizes[0], asked.shuffle, asked.step, options)  # type: ignore[union-attr]
    request = TuneRequest(
        place=where,
        batch_sizes=sizes,
        searched_sizes="," in asked.batch_size,
        budget_minutes=asked.budget_minutes,
        rounds=asked.rounds,
        min_shuffle=asked.min_shuffle if asked.shuffle else 0.0,
        check_paste=asked.check_paste,
        base=base,
        factory=factory,
    )
    print_tune(tune_session(request, TuneEvents(asked.quiet)), asked.results)
