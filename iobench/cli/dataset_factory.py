"""`run` and `tune` with `--dataset-factory`: the command line's values checked and handed to
`iobench.run.dataset_factory`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iobench.errors import IobenchError
from iobench.settings import TORCH_DATALOADER

if TYPE_CHECKING:
    from iobench.sessions.dataset_factory import FactoryRunRequest

# What a run of the user's own pipeline takes from `run`'s options; the rest are about formats, datasets
# iobench prepared, the page cache or ranks, and are refused when typed.
APPLIES = {
    "dataset_factory",
    "device",
    "shuffle",
    "epochs",
    "warmup",
    "runs",
    "max_seconds",
    "step",
    "min_au",
    "seed",
    "cache",
    "torch_threads",
    "results",
    "quiet",
    "wide",
    *TORCH_DATALOADER,
}
TUNE_APPLIES = {
    "dataset_factory",
    "step",
    "budget_minutes",
    "rounds",
    "batch_size",
    "device",
    "shuffle",
    "cache",
    "torch_threads",
    "results",
    "quiet",
}
# what the factory's own DataLoader would set itself: refused beside one
LOADER_OPTIONS = (*(TORCH_DATALOADER - {"non_blocking"}), "shuffle")


def typed(ctx: typer.Context) -> list[str]:
    """The options given on the command line (not their defaults), by parameter name."""
    return [name for name in ctx.params if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"]


def flag(ctx: typer.Context, name: str) -> str:
    option = next(p for p in ctx.command.params if p.name == name)
    return option.opts[0]


def refuse_others(ctx: typer.Context, applies: set[str]) -> None:
    """Options typed that a run of the user's own pipeline cannot honour, refused in one line."""
    if refused := [flag(ctx, name) for name in typed(ctx) if name not in applies]:
        verb = "does" if len(refused) == 1 else "do"
        raise IobenchError(f"--dataset-factory times your own pipeline: {', '.join(refused)} {verb} not apply")


def run_factory_cmd(ctx: typer.Context) -> None:
    """Time the user's pipeline: one record, printed as `run` prints, appended to --results."""
    from iobench.cli.bars import RunEvents
    from iobench.cli.render import print_run
    from iobench.sessions.dataset_factory import factory_session

    request = factory_run_request(ctx)
    p = ctx.params
    outcome = factory_session(request, RunEvents(p["quiet"]))
    print_run([outcome.record], outcome.label, request.results, p["min_au"], wide=p["wide"])


def factory_run_request(ctx: typer.Context) -> FactoryRunRequest:
    """The one converter from `run --dataset-factory`'s parsed options to its session's Request (the options a
    pipeline of the user's cannot honour refused here)."""
    from iobench.plan.command_values import settings_of
    from iobench.run.dataset_factory import FactoryRequest
    from iobench.sessions.dataset_factory import FactoryRunRequest

    p, given = ctx.params, typed(ctx)
    refuse_others(ctx, APPLIES)
    timing = {k: p[k] for k in ("shuffle", "epochs", "warmup", "runs", "max_seconds", "step", "seed", "cache")}
    factory = FactoryRequest(
        factory=p["dataset_factory"], settings=settings_of(p), torch_threads=p["torch_threads"], **timing
    )
    flags = tuple(flag(ctx, n) for n in given if n in LOADER_OPTIONS)
    return FactoryRunRequest(factory, p["device"], Path(p["results"]), flags)


def factory_request(p: dict, batch: int) -> object:
    """tune over the user's Dataset: what a candidate starts from (its settings then searched)."""
    from iobench.run.dataset_factory import FactoryRequest
    from iobench.settings import LoaderSettings

    return FactoryRequest(
        factory=p["dataset_factory"],
        settings=LoaderSettings(batch_size=batch),
        shuffle=p["shuffle"],
        step=p["step"],
        cache=p["cache"],
        torch_threads=p["torch_threads"],
    )
