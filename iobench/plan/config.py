"""What a run measures, checked once: `RunConfig` (the user's choices) -> `resolve()` -> `ResolvedRun`.

A `RunConfig` that exists is consistent in itself (its constructor refuses knobs that do not go
together); `resolve()` adds what depends on the machine and the dataset (the device, pinning, the
prepared files, the ranks) and is the only place those are checked. The runner takes only a
`ResolvedRun`, so nothing downstream checks again.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from iobench.choices import Choice
from iobench.data.manifest import FormatEntry, Manifest
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders import LOADERS, LoaderName, check_reads
from iobench.loaders.base import Fetch, LoaderSettings
from iobench.loaders.order import DistributedSamplerOrder, EpochOrder
from iobench.loaders.transforms import TransformOn, parse_transform
from iobench.measuring.distributed import SINGLE, World
from iobench.measuring.steps import parse_step
from iobench.results.record import RecordedConfig
from iobench.system.confine import CacheBudget, Confinement, check_can_confine, check_read_limit
from iobench.system.contention import MAX_RIVALS


class Cache(Choice):
    COLD = "cold"  # evict the dataset before every timed epoch
    WARM = "warm"  # after an untimed epoch
    AS_IS = "as-is"  # touch nothing


class Eviction(Choice):
    AUTO = "auto"  # drop_caches when permitted, else fadvise
    DROP_CACHES = "drop_caches"
    FADVISE = "fadvise"


class Order(Choice):
    SHUFFLE = "shuffle"
    SEQUENTIAL = "sequential"
    BLOCK = "block"  # shuffled runs of block_size contiguous samples


COLD_RESIDENCY_LIMIT = 0.05  # a cold epoch starting with more of the dataset cached is flagged


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One measured configuration, independent of where it runs (no dataset folder, no device)."""

    format: str
    loader: LoaderName = LoaderName.DATALOADER
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
    read_limit_mb_per_s: float | None = None  # reads throttled by a cgroup (iobench.system.confine)
    cache_budget: CacheBudget | None = None  # page cache capped by a memory cgroup
    transform: str = "none"  # none | augment | cpu:US (iobench.loaders.transforms)
    transform_on: TransformOn = TransformOn.HOST  # per sample in the loader, or batched after the copy
    torch_threads: int | None = None  # the main process's intra-op threads; None: torch's default
    cpu_contention: int = 0  # rival processes kept busy beside the run (iobench.system.contention)

    def __post_init__(self) -> None:
        if isinstance(self.cache_budget, str):
            object.__setattr__(self, "cache_budget", CacheBudget(self.cache_budget))
        check_read_limit(self.read_limit_mb_per_s)
        object.__setattr__(self, "loader", LoaderName.parse(self.loader, "--loader"))
        object.__setattr__(self, "order", Order.parse(self.order, "--order"))
        object.__setattr__(self, "cache", Cache.parse(self.cache, "--cache"))
        object.__setattr__(self, "eviction", Eviction.parse(self.eviction, "--eviction"))
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
    """Refuse knobs that do not go together, with the reason, before any work starts."""
    s = config.settings
    if config.format not in FORMATS:
        raise IobenchError(f"unknown format {config.format!r}; choose from {', '.join(FORMATS)}")
    check_reads(config.loader, config.format)
    for name, value, low in (
        ("--batch-size", s.batch_size, 1),
        ("--epochs", config.epochs, 1),
        ("--runs", config.runs, 1),
        ("--warmup", config.warmup, 0),
        ("--num-workers", s.num_workers, 0),
        ("--prefetch-thread", s.prefetch_thread, 0),
        ("--block-shuffle", config.block_size, 0),
        ("--readahead-mb", s.readahead_mb, 0),
        ("--seed", config.seed, 0),
    ):
        if value < low:
            raise IobenchError(f"{name} must be >= {low}, got {value}")
    if (config.order is Order.BLOCK) != (config.block_size > 0):
        raise IobenchError("--block-shuffle N > 0 goes with the block order, and only with it")
    if s.num_workers == 0 and s.prefetch_factor is not None:
        raise IobenchError("--prefetch-factor needs --num-workers > 0 (it counts batches per worker)")
    if s.num_workers == 0 and s.persistent_workers:
        raise IobenchError("--persistent-workers needs --num-workers > 0")
    if not s.in_order and (s.num_workers == 0 or config.loader is LoaderName.RAY):
        raise IobenchError("--no-in-order needs DataLoader workers (--num-workers > 0)")
    if not s.in_order and "in_order" not in inspect.signature(DataLoader).parameters:
        raise IobenchError(f"--no-in-order needs a torch whose DataLoader has in_order (this is {torch.__version__})")
    if s.prefetch_factor is not None and s.prefetch_factor < 1:
        raise IobenchError(f"--prefetch-factor must be >= 1, got {s.prefetch_factor}")
    if config.loader is not LoaderName.DATALOADER and s.fetch is Fetch.ITEM:
        raise IobenchError(
            f"--fetch item is the DataLoader's per-sample pattern; --loader {config.loader} "
            "always fetches whole batches"
        )
    if config.loader is LoaderName.GPU_RESIDENT and s.num_workers > 0:
        raise IobenchError("--loader gpu-resident reads the dataset once; --num-workers does not apply")
    direct_knobs = s.persistent_workers or s.prefetch_factor is not None or not s.in_order or s.prefetch_thread
    if config.loader is LoaderName.DIRECT and direct_knobs:
        raise IobenchError(
            "--loader direct: --num-workers is its reads in flight (0: 32) and it reads two batches ahead "
            "into its own buffers; --persistent-workers, --prefetch-factor, --prefetch-thread and --no-in-order "
            "do not apply"
        )
    if config.transform.startswith("cpu:") and config.transform_on is TransformOn.DEVICE:
        raise IobenchError("--transform cpu:US is a CPU cost per sample in the loader; use --transform-on host")
    if (
        config.transform != "none"
        and config.transform_on is TransformOn.HOST
        and config.loader in (LoaderName.GPU_RESIDENT, LoaderName.DIRECT)
    ):
        raise IobenchError(
            f"--loader {config.loader} hands over raw batches (gpu-resident: already on the device; direct: the "
            "reference for the hardware): use --transform-on device"
        )
    if config.loader is LoaderName.RAY:
        _check_ray(s)
    elif s.ray_address is not None:
        raise IobenchError("--ray-address is for --loader ray")
    if config.cache is Cache.WARM and config.warmup < 1:
        raise IobenchError(
            "--cache warm (the default) needs --warmup >= 1: the untimed epoch is what warms the cache; "
            "for no warm-up say --cache as-is or --cache cold"
        )
    if config.max_batches is not None and config.max_batches < 1:
        raise IobenchError(f"--max-batches must be >= 1, got {config.max_batches}")
    if config.max_seconds is not None and not (math.isfinite(config.max_seconds) and config.max_seconds > 0):
        raise IobenchError(f"--max-seconds must be a number > 0, got {config.max_seconds}")


def _check_ray(s: LoaderSettings) -> None:
    if s.num_workers < 1:
        raise IobenchError("--loader ray: --num-workers is the number of Ray actors; give at least 1")
    if s.persistent_workers:
        raise IobenchError("--loader ray: actors live as long as the loader; --persistent-workers does not apply")
    if importlib.util.find_spec(LOADERS[LoaderName.RAY].extra or "ray") is None:
        raise IobenchError("--loader ray needs Ray: pip install 'iobench[ray]'")


@dataclass(frozen=True)
class RunTarget:
    """Where configurations run: a prepared dataset and a device that exists here."""

    dataset_dir: Path
    device: torch.device


@dataclass(frozen=True)
class ResolvedRun:
    """A configuration checked against the machine, the dataset and the ranks: ready to run."""

    config: RunConfig  # with every automatic setting decided (pinning)
    target: RunTarget
    world: World
    manifest: Manifest

    @property
    def dataset_dir(self) -> Path:
        return self.target.dataset_dir

    @property
    def device(self) -> torch.device:
        return self.target.device

    @property
    def entry(self) -> FormatEntry:
        return self.manifest.formats[self.config.format]

    @property
    def files(self) -> list[Path]:
        return self.entry.file_paths(self.dataset_dir)

    @property
    def confinement(self) -> Confinement:
        """The throttle and the cache budget in bytes (a share is of this format's files)."""
        c = self.config
        budget = c.cache_budget.of(self.entry.bytes) if c.cache_budget is not None else None
        return Confinement(c.read_limit_mb_per_s, budget)

    def epoch_order(self) -> EpochOrder | DistributedSamplerOrder:
        """This rank's batches: the DataLoader under torchrun takes torch's DistributedSampler, as
        training scripts do; the other loaders take a contiguous share of the epoch's shared order."""
        c, w = self.config, self.world
        n, batch = self.manifest.spec.n_samples, c.settings.batch_size
        if w.size > 1 and c.loader is LoaderName.DATALOADER:
            return DistributedSamplerOrder(n, batch, c.shuffle, c.seed, c.max_batches, w.rank, w.size)
        return EpochOrder(n, batch, c.shuffle, c.block_size, c.seed, c.max_batches, rank=w.rank, world=w.size)

    def recorded(self) -> RecordedConfig:
        """The configuration as its record will store it (what sweeps compare to skip a run)."""
        c, s = self.config, self.config.settings
        return RecordedConfig(
            dataset=self.dataset_dir.name,
            world_size=self.world.size,
            backend=self.world.backend,
            format=c.format,
            loader=c.loader.value,
            batch_size=s.batch_size,
            num_workers=s.num_workers,
            prefetch_factor=s.prefetch_factor,
            pin_memory=bool(s.pin_memory),
            non_blocking=s.non_blocking,
            persistent_workers=s.persistent_workers,
            fetch=s.fetch.value,
            prefetch_thread=s.prefetch_thread,
            readahead_mb=s.readahead_mb,
            ray_address=s.ray_address,
            in_order=s.in_order,
            order=c.order_name,
            shuffle=c.shuffle,
            block_size=c.block_size,
            epochs=c.epochs,
            warmup=c.warmup,
            runs=c.runs,
            max_batches=c.max_batches,
            max_seconds=c.max_seconds,
            device=str(self.device),
            step=c.step,
            seed=c.seed,
            cache=c.cache.value,
            read_limit_mb_per_s=c.read_limit_mb_per_s,
            cache_budget=c.cache_budget.text if c.cache_budget is not None else None,
            transform=c.transform,
            transform_on=c.transform_on.value if c.transform != "none" else None,
            eviction=c.eviction.value,
            torch_threads_asked=c.torch_threads,
            cpu_contention=c.cpu_contention,
        )


def settle_device(config: RunConfig, device: torch.device) -> RunConfig:
    """What depends on this machine, before any dataset is looked at: pinning decided for the device
    (on for CUDA unless turned off; refused without CUDA), worker counts within reason for the cores."""
    if config.settings.num_workers > max_workers():
        raise IobenchError(
            f"--num-workers {config.settings.num_workers} is far above this machine's {os.cpu_count()} cores; "
            f"the limit is {max_workers()} (8 per core)"
        )
    pin = config.settings.pin_memory
    if pin and device.type != "cuda":
        raise IobenchError("--pin-memory needs a CUDA device (pinned memory speeds host-to-GPU copies)")
    return config.with_settings(pin_memory=device.type == "cuda" if pin is None else pin)


def can_drop_caches() -> bool:
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def max_workers() -> int:
    """Worker processes (or Ray actors) beyond this only thrash: 8 per core, and at least 8."""
    return max(8, 8 * (os.cpu_count() or 1))


def resolve(config: RunConfig, target: RunTarget, world: World = SINGLE) -> ResolvedRun:
    """Decide what 'auto' means here and check the config against the device, dataset and ranks."""
    config = settle_device(config, target.device)
    if config.cache is Cache.COLD and config.eviction is Eviction.DROP_CACHES and not can_drop_caches():
        raise IobenchError("--eviction drop_caches needs root (sudo iobench ...); or use --eviction fadvise")
    manifest = check_dataset(target.dataset_dir, config.format)
    check_world(config, manifest.spec.n_samples, world)
    resolved = ResolvedRun(config, target, world, manifest)
    check_budget(resolved)
    check_can_confine(resolved.confinement, target.dataset_dir)
    return resolved


MIN_CACHE_BUDGET = 16 * 2**20  # read-ahead windows and the kernel's own allocations


def check_budget(resolved: ResolvedRun) -> None:
    """A budget must hold what the run keeps in flight: batches in workers' shared memory are charged
    to the group, and one that cannot be allocated is lost (the run hangs). On tmpfs the files are
    memory, not cache: a budget would be recorded as held while capping nothing."""
    budget = resolved.confinement.cache_budget_bytes
    if budget is None:
        return
    from iobench.system.environment import mount_of

    fstype, _ = mount_of(resolved.dataset_dir)
    if fstype in ("tmpfs", "ramfs"):
        raise IobenchError(f"--cache-budget: {resolved.dataset_dir} is on {fstype}, whose files are memory, not cache")
    s, spec = resolved.config.settings, resolved.manifest.spec
    in_flight = (max(1, s.num_workers) * (s.prefetch_factor or 2) + 2) * s.batch_size * spec.sample_bytes
    need = MIN_CACHE_BUDGET + 2 * in_flight
    if budget < need:
        raise IobenchError(
            f"--cache-budget {budget / 2**20:,.1f} MiB is below what this run keeps in flight "
            f"({need / 2**20:,.0f} MiB for {max(1, s.num_workers)} reader(s) of batch {s.batch_size}); "
            "give a larger budget or smaller batches"
        )


def check_dataset(dataset_dir: Path, fmt: str) -> Manifest:
    """The format must be prepared and its files whole: a cheap size check names what is wrong."""
    manifest = Manifest.load(dataset_dir)
    entry = manifest.formats.get(fmt)
    if entry is None:
        from iobench.data.manifest import datasets_with

        prepared = ", ".join(manifest.formats) or "none"
        elsewhere = datasets_with(dataset_dir.parent, fmt)
        hint = (f"`--dataset {elsewhere[0]}` has it, or run `iobench prepare --formats {fmt}`" if elsewhere
                else f"run `iobench prepare --formats {fmt}`")  # fmt: skip
        raise IobenchError(f"{fmt} is not prepared in {dataset_dir} (prepared: {prepared}); {hint}")
    for f, path in zip(entry.files, entry.file_paths(dataset_dir), strict=True):
        if not path.is_file():
            raise IobenchError(f"{path} is missing; run `iobench verify`, then `iobench prepare --force`")
        size = path.stat().st_size
        if size != f.bytes:
            raise IobenchError(
                f"{path} is truncated or altered ({size} bytes, manifest says {f.bytes}); run `iobench prepare --force`"
            )
    try:
        FORMATS[fmt].check_layout(entry.folder(dataset_dir), manifest.spec)
    except (ValueError, OSError) as exc:
        raise IobenchError(f"{fmt} in {dataset_dir} is not what iobench writes: {exc}") from None
    return manifest


def check_world(config: RunConfig, n_samples: int, world: World) -> None:
    """What torchrun ranks cannot share."""
    if world.size <= 1:
        return
    if config.loader is LoaderName.DATALOADER and config.block_size:
        raise IobenchError("under torchrun the DataLoader uses DistributedSampler, which has no --block-shuffle")
    if config.loader is LoaderName.RAY:
        raise IobenchError("--loader ray is one training process fed by a Ray cluster; run it without torchrun")
    if config.loader is LoaderName.NATIVE:
        raise IobenchError(
            "--loader native under torchrun: the libraries' own rank splitting (WebDataset's split_by_node, "
            "a DistributedSampler over Arrow and Zarr) is not wired yet; use --loader dataloader"
        )
    if n_samples < world.size:
        raise IobenchError(f"{n_samples} samples cannot be shared by {world.size} ranks")
    if config.read_limit_mb_per_s is not None or config.cache_budget is not None:
        raise IobenchError(
            "--read-limit and --cache-budget confine one process tree; under torchrun every rank would take "
            "the whole budget: start torchrun inside one cgroup instead (scripts/confine.sh)"
        )
