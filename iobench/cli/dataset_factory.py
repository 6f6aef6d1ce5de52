"""`run` and `tune` with `--dataset-factory`: the command line's values checked and handed to
`iobench.run.dataset_factory`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from iobench.errors import IobenchError
from iobench.settings import TORCH_DATALOADER, LoaderSettings

if TYPE_CHECKING:
    from iobench.run.dataset_factory import FactoryRequest

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
    names = [p.name for p in ctx.command.params if p.name]
    return [name for name in names if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"]


def flag(ctx: typer.Context, name: str) -> str:
    option = next(p for p in ctx.command.params if p.name == name)
    return option.opts[0]


def refuse_others(ctx: typer.Context, applies: set[str]) -> None:
    """Options typed that a run of the user's own pipeline cannot honour, refused in one line."""
    if refused := [flag(ctx, name) for name in typed(ctx) if name not in applies]:
        verb = "does" if len(refused) == 1 else "do"
        raise IobenchError(f"--dataset-factory times your own pipeline: {', '.join(refused)} {verb} not apply")


def factory_of(
    ctx: typer.Context, asked: Any, settings: LoaderSettings, run_options: Mapping[str, Any]
) -> FactoryRunInput:
    """What `run --dataset-factory` times (`asked`: run's own options), the options a pipeline of the user's cannot
    honour refused here."""
    from iobench.run.dataset_factory import FactoryRequest

    refuse_others(ctx, APPLIES)
    request = FactoryRequest(
        factory=asked.dataset_factory,
        settings=settings,
        shuffle=asked.shuffle,
        epochs=asked.epochs,
        warmup=asked.warmup,
        runs=asked.runs,
        max_seconds=asked.max_seconds,
        step=asked.step,
        seed=asked.seed,
        cache=run_options["cache"],
        torch_threads=run_options["torch_threads"],
    )
    return FactoryRunInput(request, tuple(flag(ctx, n) for n in typed(ctx) if n in LOADER_OPTIONS))


@dataclass(frozen=True)
class FactoryRunInput:
    """The pipeline to time and the loader options typed beside it (refused where it builds its own DataLoader)."""

    factory: FactoryRequest
    loader_flags: tuple[str, ...]


def run_factory_cmd(
    ctx: typer.Context,
    given: FactoryRunInput,
    device: str,
    results: Path,
    *,
    min_au: float | None,
    wide: bool,
    quiet: bool,
) -> None:
    """Time the user's pipeline: one record, printed as `run` prints, appended to --results."""
    from iobench.cli.bars import RunEvents
    from iobench.cli.render import print_run
    from iobench.sessions.dataset_factory import FactoryRunRequest, factory_session

    request = FactoryRunRequest(
        factory=given.factory, device=device, results=Path(results), loader_flags=given.loader_flags
    )
    outcome = factory_session(request, RunEvents(quiet))
    print_run([outcome.record], outcome.label, request.results, min_au, wide=wide)


def factory_request(
    factory: str, batch: int, *, shuffle: bool, step: str, run_options: Mapping[str, Any]
) -> FactoryRequest:
    """tune over the user's Dataset: what a candidate starts from (its settings then searched)."""
    from iobench.run.dataset_factory import FactoryRequest

    return FactoryRequest(
        factory=factory,
        settings=LoaderSettings(batch_size=batch),
        shuffle=shuffle,
        step=step,
        cache=run_options["cache"],
        torch_threads=run_options["torch_threads"],
    )
