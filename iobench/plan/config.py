"""What a run measures, checked once: `RunConfig` (the user's choices) -> `resolve()` -> `ResolvedRun`
(iobench/plan/resolve.py).

A `RunConfig` that exists is consistent in itself (its constructor refuses knobs that do not go
together); `resolve()` adds what depends on the machine and the dataset (the device, pinning, the
prepared files, the ranks) and is the only place those are checked. The runner takes only a
`ResolvedRun`, so nothing downstream checks again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass, replace
from typing import Any

from iobench.choices import Choice, did_you_mean
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import DEFAULT_LOADER, LOADERS, LoaderName, check_installed, check_reads
from iobench.loaders.transforms import TransformOn
from iobench.plan.run_options import RUN_OPTIONS, Cache, RunOption, SamplerTail
from iobench.plan.timing import TIMING_OPTIONS, Timing, at_least
from iobench.settings import LoaderSettings, check_counts, check_workers


class Order(Choice):
    SHUFFLE = "shuffle"
    SEQUENTIAL = "sequential"
    BLOCK = "block"  # shuffled runs of block_size contiguous samples


def _option_field(o: RunOption) -> tuple[str, str, Any]:
    annotation = o.field_type or (o.kind.__name__ + (" | None" if o.default is None else ""))
    return o.name, annotation, field(default=o.value(o.default))


# A field per run option (iobench.plan.run_options), each at its declared default as RunConfig holds it; the cache
# and torch's threads are a Timing's
RunOptionFields = make_dataclass(
    "RunOptionFields",
    [_option_field(o) for o in RUN_OPTIONS.values() if o.name not in TIMING_OPTIONS],
    frozen=True,
    kw_only=True,
)
RunOptionFields.__doc__ = "The run options' fields of a RunConfig, made from their declarations."

__all__ = ["Cache", "Order", "RunConfig", "SamplerTail", "at_least", "order_of"]


@dataclass(frozen=True, kw_only=True)
class RunConfig(Timing, RunOptionFields):  # type: ignore[misc,valid-type]
    """One measured configuration of a prepared format, independent of where it runs (no dataset folder, no device):
    a Timing (epochs, runs, cache, ...) of a format read by a loader with its settings; its other run options
    (eviction, transform, ...) are fields made from `RUN_OPTIONS`."""

    format: str
    loader: LoaderName = DEFAULT_LOADER
    settings: LoaderSettings = field(default_factory=LoaderSettings)
    order: Order = Order.SHUFFLE
    block_size: int = 0
    max_batches: int | None = None
    # The read options of the format's own pipeline (--format-option, --loader native), sorted by name
    format_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()  # the Timing's checks: epochs, runs, cache, threads, step
        for option in RUN_OPTIONS.values():  # each as its declaration checks and holds it
            if option.name not in TIMING_OPTIONS:
                object.__setattr__(self, option.name, option.value(getattr(self, option.name)))
        object.__setattr__(self, "loader", LoaderName.parse(self.loader, "--loader"))
        object.__setattr__(self, "order", Order.parse(self.order, "--order"))
        _check(self)

    @property
    def shuffle(self) -> bool:
        return self.order is not Order.SEQUENTIAL

    @property
    def order_name(self) -> str:
        """The order as records name it: sequential, shuffle or block:N."""
        return f"block:{self.block_size}" if self.order is Order.BLOCK else self.order.value

    @property
    def label(self) -> str:
        return f"{self.format}/{self.loader}"

    def with_settings(self, **changes: object) -> RunConfig:
        return replace(self, settings=replace(self.settings, **changes))


def order_of(shuffle: bool, block_size: int) -> Order:
    """The command line's --shuffle/--no-shuffle and --block-shuffle N as one order."""
    if block_size and not shuffle:
        raise IobenchError("--block-shuffle needs --shuffle")
    if not shuffle:
        return Order.SEQUENTIAL
    return Order.BLOCK if block_size > 0 else Order.SHUFFLE


def _check(config: RunConfig) -> None:
    """Refuse knobs that do not go together, with the reason, before any work starts: the run's own here, a
    setting against the loader by what the loader declares it honours (`iobench.loaders.LoaderKind`)."""
    if config.format not in FORMATS:
        raise IobenchError(
            f"unknown format {config.format!r}{did_you_mean(config.format, list(FORMATS))}; choose "
            f"from {', '.join(FORMATS)}"
        )
    kind = LOADERS[config.loader]
    check_installed(config.loader)  # before its settings: `--loader ray` first complained about --num-workers
    check_reads(config.loader, config.format)
    _check_format_options(config)
    check_counts(config.settings)
    at_least(("--block-shuffle", config.block_size, 0))
    if (config.order is Order.BLOCK) != (config.block_size > 0):
        raise IobenchError("--block-shuffle N > 0 goes with the block order, and only with it")
    check_workers(config.settings)
    if (refusal := kind.refusal(config.settings)) is not None:
        raise IobenchError(refusal)
    if config.transform.startswith("cpu:") and config.transform_on is TransformOn.DEVICE:
        raise IobenchError("--transform cpu:US is a CPU cost per sample in the loader; use --transform-on host")
    if config.transform != "none" and config.transform_on is TransformOn.HOST and kind.raw_batches:
        raise IobenchError(
            f"--loader {config.loader} hands over raw batches ({kind.raw_batches}): use --transform-on device"
        )
    if config.max_batches is not None and config.max_batches < 1:
        raise IobenchError(f"--max-batches must be >= 1, got {config.max_batches}")


def _check_format_options(config: RunConfig) -> None:
    from iobench.data.format_options import check_read_options, settable_fields

    if not config.format_options:
        return
    native = LOADERS[config.loader].own_pipeline
    if not native and not settable_fields(config.format, reading=True, native=False):
        raise IobenchError(f"{config.label}: --format-option sets how a format's own pipeline reads (--loader native)")
    check_read_options(config.format, [k for k, _ in config.format_options], native)
