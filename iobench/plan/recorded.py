"""Every record's configuration built one way: a run's (`ResolvedRun.recorded`), tune's over a user's Dataset and
`iobench.measure`'s, so that equal values measured the same thing whichever path wrote them; and back, a record's
configuration as a run measures it again (`run_config_of`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from iobench.errors import IobenchError
from iobench.loaders import LOADERS, LoaderName
from iobench.plan.run_options import RUN_OPTIONS, recorded_options
from iobench.plan.timing import TIMING_OPTIONS
from iobench.results.record import RecordedConfig
from iobench.settings import LoaderSettings

if TYPE_CHECKING:
    from iobench.plan.config import RunConfig


def recorded_config(
    *,
    loader: str,
    settings: LoaderSettings,
    shuffle: bool,
    order: str | None = None,
    options: Mapping[str, Any] | None = None,
    **fields: Any,
) -> RecordedConfig:
    """The configuration as its record stores it: the settings with pinning decided (None, "on with CUDA", was
    settled before the run), the order (shuffle or sequential unless a block order is named), every run option as
    its declaration stores it (those a measurement does not have at their defaults), and the fields given."""
    return RecordedConfig(
        loader=str(loader),
        settings=replace(settings, pin_memory=bool(settings.pin_memory)),
        order=order if order is not None else "shuffle" if shuffle else "sequential",
        shuffle=shuffle,
        **recorded_options(options or {}),
        **fields,
    )


def run_config_of(recorded: RecordedConfig, runs: int | None = None) -> RunConfig:
    """The run configuration a record measured, to measure it again (`compare --rerun`): the inverse of
    `ResolvedRun.recorded` for a local, single-process run, each value checked as the command line's is. `runs`:
    this many runs instead of the record's."""
    from iobench.data.format_options import parse_format_options
    from iobench.plan.config import Order, RunConfig

    c = recorded
    if c.storage != "local" or c.world_size > 1:
        where = f"from {c.storage} storage" if c.storage != "local" else f"on {c.world_size} ranks"
        raise IobenchError(f"{c.label} was measured {where}: measure it again with `iobench run` as it was typed")
    order, _, block = c.order.partition(":")
    texts = [f"{c.format}.{part}" for part in c.format_options.split(",") if part]
    native = (c.format,) if LOADERS[LoaderName.parse(c.loader, "--loader")].own_pipeline else ()
    options = parse_format_options(texts, native, True, () if native else (c.format,)).get(c.format, {})
    held = {o.name: getattr(c, o.record_field) for o in RUN_OPTIONS.values() if o.name not in TIMING_OPTIONS}
    if held["transform_on"] is None:  # stored only with a transform
        held["transform_on"] = RUN_OPTIONS["transform_on"].default
    return RunConfig(
        format=c.format,
        loader=c.loader,
        settings=c.settings,
        order=Order.parse(order, "--order"),
        block_size=int(block or 0),
        epochs=c.epochs,
        warmup=c.warmup,
        runs=c.runs if runs is None else runs,
        max_batches=c.max_batches,
        max_seconds=c.max_seconds,
        step=c.step,
        seed=c.seed,
        cache=c.cache,
        torch_threads=c.torch_threads_asked,
        format_options=tuple(sorted(options.items())),
        **held,
    )
