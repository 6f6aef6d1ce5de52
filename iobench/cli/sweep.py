"""`sweep`: a grid of configurations, resumable."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from iobench.cli import option_groups as g
from iobench.cli import options as o
from iobench.cli.app import app
from iobench.plan.place import PlaceValues


@app.command("sweep")
@g.takes_run_options("sweep", after="step")
@g.takes_settings(after="loader", sweep=True)
@g.takes_place(after="size")
def sweep_cmd(
    ctx: typer.Context,
    preset: o.Preset = None,
    format: o.List("--format", "Comma list or all.") = None,
    loader: o.List("--loader", "Comma list or all.") = None,
    size: o.List("--size", "Comma list of dataset sizes (prepared when missing, default spec otherwise).") = None,
    shuffle: o.Shuffle = True,
    epochs: o.Epochs = 1,
    warmup: o.Warmup = 1,
    runs: o.Runs = 5,
    max_seconds: o.MaxSeconds = None,
    step: o.Step = "none",
    results: Annotated[Path, typer.Option(help="JSONL file; configurations already in it are skipped.")] = Path(
        "results/results.jsonl"
    ),
    quiet: o.Quiet = False,
    *,
    place: PlaceValues,  # its options after --size
    settings: dict[str, str | None],  # each swept setting's comma list, after --loader
    run_options: Mapping[str, Any],  # after --step
) -> None:
    """Run a grid of configurations (resumable: what the results file holds is not run again).

    --remote reads object storage, each configuration in a process of its own."""
    import shlex

    from iobench.cli.bars import SweepEvents
    from iobench.cli.console import out
    from iobench.plan.command_values import config_of
    from iobench.plan.place import place_of
    from iobench.plan.run_options import SWEEP, run_options_of, swept_lists
    from iobench.plan.selection import DEFAULT_LOADER_NAME
    from iobench.results.store import check_writable
    from iobench.sessions.sweep import SweepRequest, sweep_session
    from iobench.settings import LoaderSettings

    where = place_of(place, results)
    check_writable(results)
    base = config_of(  # as-is: the grid's caches (warm unless --cache says) decide; a cold one needs no warm-up
        "memmap",
        DEFAULT_LOADER_NAME,
        LoaderSettings(),
        shuffle=shuffle,
        block_size=0,
        epochs=epochs,
        warmup=warmup,
        cache="as-is",
        runs=runs,
        max_seconds=max_seconds,
        step=step,
        **run_options_of(run_options, SWEEP),
    )
    swept_options = {o.name: run_options[o.name] for o in swept_lists()}  # --cache
    lists = dict(format=format, loader=loader, size=size, **swept_options, **settings)
    done = sweep_session(SweepRequest(base=base, preset=preset, lists=lists, place=where), SweepEvents(quiet))
    if done.records:
        report = shlex.join(["iobench", "report", str(results)])
        out.print(
            f"{len(done.records)} record(s) appended to {results}; `{report}` makes the report",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
