"""What a run measures, checked once: `RunConfig` (the user's choices) -> `resolve()` -> `ResolvedRun`
(iobench/plan/resolve.py).

A `RunConfig` that exists is consistent in itself (its constructor refuses knobs that do not go
together); `resolve()` adds what depends on the machine and the dataset (the device, pinning, the
prepared files, the ranks) and is the only place those are checked. The runner takes only a
`ResolvedRun`, so nothing downstream checks again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from iobench.choices import Choice, did_you_mean
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import DEFAULT_LOADER, LOADERS, LoaderName, check_reads
from iobench.loaders.transforms import TransformOn, parse_transform
from iobench.measuring.steps import parse_step
from iobench.settings import LoaderSettings, check_counts, check_workers
from iobench.storage.local.confine import CacheBudget, check_read_limit
from iobench.storage.local.page_cache import Eviction
from iobench.system.contention import MAX_RIVALS


class Cache(Choice):
    COLD = "cold"  # nothing of the dataset nearer than its storage before every timed epoch (Storage.make_cold)
    WARM = "warm"  # after an untimed epoch
    AS_IS = "as-is"  # touch nothing


class SamplerTail(Choice):
    """Under torchrun, what the DataLoader's DistributedSampler does with samples the ranks do not divide."""

    TRIM = "trim"  # iobench's: the sampler's padding trimmed, every sample once, shares may differ by one
    PAD = "pad"  # torch's default (drop_last=False): samples repeated so every rank gets as many
    DROP = "drop"  # drop_last=True: the last samples left out


class Order(Choice):
    SHUFFLE = "shuffle"
    SEQUENTIAL = "sequential"
    BLOCK = "block"  # shuffled runs of block_size contiguous samples


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One measured configuration, independent of where it runs (no dataset folder, no device)."""

    format: str
    loader: LoaderName = DEFAULT_LOADER
    settings: LoaderSettings = field(default_factory=LoaderSettings)
    order: Order = Order.SHUFFLE
    block_size: int = 0
    epochs: int = 1
    warmup: int = 1
    runs: int = 3
    max_batches: int | None = None
    max_seconds: float | None = None
    step: str = "none"
    seed: int = 0
    cache: Cache = Cache.WARM  # timed epochs follow an untimed one: a stable first result
    eviction: Eviction = Eviction.AUTO
    read_limit_mb_per_s: float | None = None  # reads throttled by a cgroup (iobench.storage.local.confine)
    cache_budget: CacheBudget | None = None  # page cache capped by a memory cgroup
    transform: str = "none"  # none | augment | cpu:US (iobench.loaders.transforms)
    transform_on: TransformOn = TransformOn.HOST  # per sample in the loader, or batched after the copy
    torch_threads: int | None = None  # the main process's intra-op threads; None: torch's default
    cpu_contention: int = 0  # rival processes kept busy beside the run (iobench.system.contention)
    sampler_tail: SamplerTail = SamplerTail.TRIM  # under torchrun, the DataLoader's DistributedSampler
    resume_check: bool = False  # after the clock: interrupt and resume the last timed epoch (iobench.run.resume_check)
    # The read options of the format's own pipeline (--format-option, --loader native), sorted by name
    format_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.cache_budget, str):
            object.__setattr__(self, "cache_budget", CacheBudget(self.cache_budget))
        check_read_limit(self.read_limit_mb_per_s)
        object.__setattr__(self, "loader", LoaderName.parse(self.loader, "--loader"))
        object.__setattr__(self, "order", Order.parse(self.order, "--order"))
        object.__setattr__(self, "cache", Cache.parse(self.cache, "--cache"))
        object.__setattr__(self, "eviction", Eviction.parse(self.eviction, "--eviction"))
        object.__setattr__(self, "sampler_tail", SamplerTail.parse(self.sampler_tail, "--distributed-sampler"))
        object.__setattr__(self, "step", parse_step(self.step))
        object.__setattr__(self, "transform", parse_transform(self.transform))
        object.__setattr__(self, "transform_on", TransformOn.parse(self.transform_on, "--transform-on"))
        if self.torch_threads is not None and self.torch_threads < 1:
            raise IobenchError(f"--torch-threads must be >= 1, got {self.torch_threads}")
        if not 0 <= self.cpu_contention <= MAX_RIVALS:
            raise IobenchError(f"--cpu-contention must be 0..{MAX_RIVALS} processes, got {self.cpu_contention}")
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
        raise IobenchError(f"unknown format {config.format!r}{did_you_mean(config.format, list(FORMATS))}; choose "
                           f"from {', '.join(FORMATS)}")  # fmt: skip
    check_reads(config.loader, config.format)
    _check_format_options(config)
    check_counts(config.settings)
    at_least(
        ("--epochs", config.epochs, 1),
        ("--runs", config.runs, 1),
        ("--warmup", config.warmup, 0),
        ("--block-shuffle", config.block_size, 0),
        ("--seed", config.seed, 0),
    )
    if (config.order is Order.BLOCK) != (config.block_size > 0):
        raise IobenchError("--block-shuffle N > 0 goes with the block order, and only with it")
    kind = LOADERS[config.loader]
    check_workers(config.settings)
    if (refusal := kind.refusal(config.settings)) is not None:
        raise IobenchError(refusal)
    if config.transform.startswith("cpu:") and config.transform_on is TransformOn.DEVICE:
        raise IobenchError("--transform cpu:US is a CPU cost per sample in the loader; use --transform-on host")
    if config.transform != "none" and config.transform_on is TransformOn.HOST and kind.raw_batches:
        raise IobenchError(f"--loader {config.loader} hands over raw batches ({kind.raw_batches}): use "
                           "--transform-on device")  # fmt: skip
    if not kind.installed:
        raise IobenchError(f"--loader {config.loader} needs {kind.library}: pip install 'iobench[{kind.extra}]'")
    if config.cache is Cache.WARM and config.warmup < 1:
        raise IobenchError(
            "--cache warm (the default) needs --warmup >= 1: the untimed epoch is what warms the cache; "
            "for no warm-up say --cache as-is or --cache cold"
        )
    if config.max_batches is not None and config.max_batches < 1:
        raise IobenchError(f"--max-batches must be >= 1, got {config.max_batches}")
    if config.max_seconds is not None and not (math.isfinite(config.max_seconds) and config.max_seconds > 0):
        raise IobenchError(f"--max-seconds must be a number > 0, got {config.max_seconds}")


def at_least(*checks: tuple[str, int, int]) -> None:
    """(option, value, lowest allowed) for each count a command line gives: the first too low is refused."""
    for name, value, low in checks:
        if value < low:
            raise IobenchError(f"{name} must be >= {low}, got {value}")


def _check_format_options(config: RunConfig) -> None:
    from iobench.data.format_options import check_read_options, settable_fields

    if not config.format_options:
        return
    native = LOADERS[config.loader].own_pipeline
    if not native and not settable_fields(config.format, reading=True, native=False):
        raise IobenchError(f"{config.label}: --format-option sets how a format's own pipeline reads (--loader native)")
    check_read_options(config.format, [k for k, _ in config.format_options], native)
