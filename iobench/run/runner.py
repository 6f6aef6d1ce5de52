"""One run: check the inputs, build the loader, warm up, time the epochs, build the record."""

from __future__ import annotations

import cProfile
import datetime as dt
import gc
import importlib.util
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from iobench.choices import parse_choices, split_list
from iobench.data.manifest import Manifest
from iobench.environment import environment
from iobench.errors import IobenchError, RunFailed
from iobench.formats import FORMATS
from iobench.results.store import epoch_metrics
from iobench.run.aggregate import RankMeasurements, combine
from iobench.run.cache import evict, resident_fraction
from iobench.run.clocks import EpochTiming, time_epoch
from iobench.run.device import resolve_device
from iobench.run.distributed import SINGLE, World
from iobench.run.limits import applicable_limit
from iobench.run.loaders.base import Loader, LoaderSettings
from iobench.run.loaders.order import DistributedSamplerOrder, EpochOrder
from iobench.run.steps import make_step
from iobench.run.sysmetrics import SystemCounters, peak_rss_bytes

LOADERS = ("dataloader", "tensorclass", "gpu-resident", "ray")
OPTIONAL_LOADERS = ("ray",)  # need an extra; `all` means the others unless one is named
CORE_LOADERS = tuple(ld for ld in LOADERS if ld not in OPTIONAL_LOADERS)
CACHE_MODES = ("cold", "warm", "as-is")
EVICTION_METHODS = ("auto", "drop_caches", "fadvise")
COLD_RESIDENCY_LIMIT = 0.05  # a cold epoch starting with more of the dataset cached is flagged
# Which formats each loader reads. tensorclass loading is tensordict's memmap path.
LOADER_FORMATS = {
    "dataloader": tuple(FORMATS),
    "tensorclass": ("memmap",),
    "gpu-resident": tuple(FORMATS),
    "ray": tuple(FORMATS),
}
DEFAULT_PAIRS = (
    ("npy", "dataloader"),
    ("hdf5", "dataloader"),
    ("lmdb", "dataloader"),
    ("memmap", "dataloader"),
    ("memmap", "tensorclass"),
)


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one measured configuration; recorded field by field."""

    dataset_dir: Path
    format: str
    loader: str
    settings: LoaderSettings
    device: str = "auto"
    shuffle: bool = True
    block_size: int = 0
    epochs: int = 1
    warmup: int = 1
    runs: int = 3
    max_batches: int | None = None
    max_seconds: float | None = None
    step: str = "none"
    seed: int = 0
    cache: str = "as-is"  # cold | warm | as-is
    eviction: str = "auto"  # auto (drop_caches when permitted) | drop_caches | fadvise


def check_config(config: RunConfig) -> None:
    """Refuse knobs that do not go together, with the reason, before any work starts."""
    s = config.settings
    if config.loader not in LOADERS:
        raise IobenchError(f"unknown loader {config.loader!r}; choose from {', '.join(LOADERS)}")
    if config.format not in LOADER_FORMATS[config.loader]:
        raise _unreadable(config.format, config.loader)
    for name, value, low in (
        ("--batch-size", s.batch_size, 1),
        ("--epochs", config.epochs, 1),
        ("--runs", config.runs, 1),
        ("--warmup", config.warmup, 0),
        ("--num-workers", s.num_workers, 0),
        ("--prefetch-thread", s.prefetch_thread, 0),
        ("--block-shuffle", config.block_size, 0),
        ("--readahead-mb", s.readahead_mb, 0),
    ):
        if value < low:
            raise IobenchError(f"{name} must be >= {low}, got {value}")
    if s.num_workers == 0 and s.prefetch_factor is not None:
        raise IobenchError("--prefetch-factor needs --num-workers > 0 (it counts batches per worker)")
    if s.num_workers == 0 and s.persistent_workers:
        raise IobenchError("--persistent-workers needs --num-workers > 0")
    if s.prefetch_factor is not None and s.prefetch_factor < 1:
        raise IobenchError(f"--prefetch-factor must be >= 1, got {s.prefetch_factor}")
    if s.fetch not in ("item", "batch"):
        raise IobenchError(f"--fetch must be item or batch, got {s.fetch!r}")
    if config.loader != "dataloader" and s.fetch == "item":
        raise IobenchError(
            f"--fetch item is the DataLoader's per-sample pattern; --loader {config.loader} "
            "always fetches whole batches"
        )
    if config.loader == "gpu-resident" and s.num_workers > 0:
        raise IobenchError("--loader gpu-resident reads the dataset once; --num-workers does not apply")
    if config.loader == "ray":
        _check_ray(s)
    elif s.ray_address is not None:
        raise IobenchError("--ray-address is for --loader ray")
    if config.block_size and not config.shuffle:
        raise IobenchError("--block-shuffle needs --shuffle")
    if config.cache not in CACHE_MODES:
        raise IobenchError(f"--cache must be one of {', '.join(CACHE_MODES)}, got {config.cache!r}")
    if config.eviction not in EVICTION_METHODS:
        raise IobenchError(f"--eviction must be one of {', '.join(EVICTION_METHODS)}, got {config.eviction!r}")
    if config.cache == "warm" and config.warmup < 1:
        raise IobenchError("--cache warm needs --warmup >= 1 (the untimed epoch is what warms the cache)")
    if config.max_batches is not None and config.max_batches < 1:
        raise IobenchError(f"--max-batches must be >= 1, got {config.max_batches}")
    if config.max_seconds is not None and config.max_seconds <= 0:
        raise IobenchError(f"--max-seconds must be > 0, got {config.max_seconds}")


def _check_ray(s: LoaderSettings) -> None:
    if s.num_workers < 1:
        raise IobenchError("--loader ray: --num-workers is the number of Ray actors; give at least 1")
    if s.persistent_workers:
        raise IobenchError("--loader ray: actors live as long as the loader; --persistent-workers does not apply")
    if importlib.util.find_spec("ray") is None:
        raise IobenchError("--loader ray needs Ray: pip install 'iobench[ray]'")


def _unreadable(fmt: str, loader: str) -> IobenchError:
    return IobenchError(f"--loader {loader} does not read --format {fmt}; it reads {', '.join(LOADER_FORMATS[loader])}")


def resolve(config: RunConfig, device: torch.device) -> RunConfig:
    """Fill in what 'auto' means on this machine (pinning: on for CUDA), refuse pinning without CUDA."""
    pin = config.settings.pin_memory
    if pin and device.type != "cuda":
        raise IobenchError("--pin-memory needs a CUDA device (pinned memory speeds host-to-GPU copies)")
    return with_settings(config, pin_memory=device.type == "cuda" if pin is None else pin)


def check_dataset(config: RunConfig) -> Manifest:
    """The format must be prepared and its files whole: a cheap size check names what is wrong."""
    manifest = Manifest.load(config.dataset_dir)
    entry = manifest.formats.get(config.format)
    if entry is None:
        prepared = ", ".join(manifest.formats) or "none"
        raise IobenchError(
            f"{config.format} is not prepared in {config.dataset_dir} (prepared: {prepared}); "
            f"run `iobench prepare --formats {config.format}`"
        )
    for f in entry.files:
        path = config.dataset_dir / entry.directory / f.path
        if not path.is_file():
            raise IobenchError(f"{path} is missing; run `iobench verify`, then `iobench prepare --force`")
        size = path.stat().st_size
        if size != f.bytes:
            raise IobenchError(
                f"{path} is truncated or altered ({size} bytes, manifest says {f.bytes}); run `iobench prepare --force`"
            )
    return manifest


def epoch_order(config: RunConfig, n_samples: int, world: World = SINGLE) -> EpochOrder | DistributedSamplerOrder:
    """This rank's batches: the DataLoader under torchrun takes torch's DistributedSampler, as training
    scripts do; the other loaders take a contiguous share of the epoch's shared order."""
    s = config.settings
    if world.size > 1 and config.loader == "dataloader":
        return DistributedSamplerOrder(
            n_samples, s.batch_size, config.shuffle, config.seed, config.max_batches, world.rank, world.size
        )
    return EpochOrder(
        n_samples,
        s.batch_size,
        config.shuffle,
        config.block_size,
        config.seed,
        config.max_batches,
        rank=world.rank,
        world=world.size,
    )


def build_loader(config: RunConfig, manifest: Manifest, device: torch.device, world: World = SINGLE) -> Loader:
    from iobench.run.loaders.dataloader import DataLoaderLoader
    from iobench.run.loaders.prefetch import PrefetchThread
    from iobench.run.loaders.resident import ResidentLoader
    from iobench.run.loaders.tensorclass import TensorclassLoader

    entry = manifest.formats[config.format]
    fmt = FORMATS[config.format]
    reader = fmt.reader(config.dataset_dir / entry.directory, manifest.spec, fmt.options_from_json(entry.options))
    reader.sequential = not config.shuffle
    order = epoch_order(config, manifest.spec.n_samples, world)
    if config.loader == "ray":
        from iobench.run.loaders.ray_actors import RayLoader

        loader: Loader = RayLoader(reader, order, config.settings, device, config.format, entry.options)
    else:
        kinds = {"dataloader": DataLoaderLoader, "tensorclass": TensorclassLoader, "gpu-resident": ResidentLoader}
        loader = kinds[config.loader](reader, order, config.settings, device)
    if config.settings.prefetch_thread:
        loader = PrefetchThread(loader, config.settings.prefetch_thread)
    return loader


def check_world(config: RunConfig, n_samples: int, world: World) -> None:
    if world.size <= 1:
        return
    if config.loader == "dataloader" and config.block_size:
        raise IobenchError("under torchrun the DataLoader uses DistributedSampler, which has no --block-shuffle")
    if config.loader == "ray":
        raise IobenchError("--loader ray is one training process fed by a Ray cluster; run it without torchrun")
    if n_samples < world.size:
        raise IobenchError(f"{n_samples} samples cannot be shared by {world.size} ranks")


def run(
    config: RunConfig,
    on_epoch=None,
    limits: dict | None = None,
    profile_dir: Path | None = None,
    world: World = SINGLE,
) -> dict:
    """Measure one configuration; returns its flat result record (the same on every rank).

    Cache control per timed epoch: `cold` closes the loader (nothing may stay mapped), evicts the
    format's files and checks residency with mincore() before building a fresh loader; `warm`
    follows at least one untimed epoch; `as-is` touches nothing. Residency and the bytes read from
    storage are recorded for every timed epoch, whatever the mode. Under torchrun one process per
    node evicts while the others wait, and every rank starts each timed epoch together.
    """
    check_config(config)
    device = resolve_device(config.device)
    config = resolve(config, device)
    manifest = check_dataset(config)
    spec = manifest.spec
    check_world(config, spec.n_samples, world)
    entry = manifest.formats[config.format]
    files = [config.dataset_dir / entry.directory / f.path for f in entry.files]
    step = make_step(config.step, spec.features_per_sample, spec.n_classes, device, config.seed)
    counters = SystemCounters(config.dataset_dir)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    timings: list[EpochTiming] = []
    setup: list[float] = []
    system: list[dict] = []
    resident_before: list[float] = []
    resident_after: list[float] = []
    methods: set[str] = set()
    profile_path = None
    epochs_per_run = config.warmup + config.epochs
    started = time.perf_counter()
    first = last = None
    for r in range(config.runs):
        loader = build_loader(config, manifest, device, world)
        try:
            setup.append(loader.setup_seconds())
            for e in range(epochs_per_run):
                epoch = r * epochs_per_run + e
                if e < config.warmup:
                    timing = _epoch(loader, epoch, step, config)
                    if on_epoch is not None:
                        on_epoch(r, e, True, timing)
                    continue
                if config.cache == "cold":
                    loader.close()
                    gc.collect()  # drop any mapping still referenced from a cycle
                    world.barrier()  # no rank on this node still maps the files
                    if world.is_node_main:
                        methods.add(evict(files, config.eviction))
                    world.barrier()
                resident_before.append(resident_fraction(files))
                if config.cache == "cold":
                    loader = build_loader(config, manifest, device, world)
                    setup.append(loader.setup_seconds())
                world.barrier()  # every rank starts the epoch together
                a = counters.snapshot(loader.process_ids())
                timing = _epoch(loader, epoch, step, config)
                world.barrier()  # the node's counters cover every rank's epoch
                b = counters.snapshot(loader.process_ids())
                first = first or a
                last = b
                system.append(counters.delta(a, b))
                resident_after.append(resident_fraction(files))
                timings.append(timing)
                if on_epoch is not None:
                    on_epoch(r, e, False, timing)
            if profile_dir is not None and r == config.runs - 1 and world.is_main:
                profile_path = _profile_epoch(loader, (r + 1) * epochs_per_run, step, config, profile_dir)
        finally:
            loader.close()
    cuda_memory = (
        (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))
        if device.type == "cuda"
        else (math.nan, math.nan)
    )
    total = counters.delta(first, last)
    measured = RankMeasurements(
        timings, system, resident_before, resident_after, setup, total, peak_rss_bytes(), cuda_memory
    )
    shard = epoch_order(config, spec.n_samples, world).SHARD if world.size > 1 else None
    combined = combine(measured, world, world.hostnames(), spec.sample_bytes, shard)
    record = {
        "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "dataset": config.dataset_dir.name,
        "data_dir": str(config.dataset_dir.parent),
        "n_samples": spec.n_samples,
        "sample_shape": list(spec.shape),
        "dtype": spec.dtype,
        "sample_bytes": spec.sample_bytes,
        "dataset_bytes": entry.bytes,
        **config_fields(config, device, world.size),
        "eviction_method": ",".join(sorted(methods)) if methods else None,
        "data_block_device": total["data_block_device"],
        "total_seconds": time.perf_counter() - started,
        "profile_path": str(profile_path) if profile_path else None,
        **combined.fields,
        **epoch_metrics(combined.timings, spec.sample_bytes),
    }
    before = record["residency_before"]
    record["cold_not_cold"] = config.cache == "cold" and any(x > COLD_RESIDENCY_LIMIT for x in before)
    # An epoch cut short by --max-batches or --max-seconds did not read the whole dataset.
    record["partial"] = record["partial"] or record["samples_per_epoch"] < spec.n_samples
    record.update(environment(config.dataset_dir, device))
    record.update(limit_fields(record, limits))
    return record


def config_fields(config: RunConfig, device: torch.device, world_size: int = 1) -> dict:
    """A resolved configuration as the record's fields (what sweeps compare to skip a run)."""
    return {
        "world_size": world_size,
        "format": config.format,
        "loader": config.loader,
        **asdict(config.settings),
        "order": EpochOrder(1, 1, config.shuffle, config.block_size).name,
        "shuffle": config.shuffle,
        "block_size": config.block_size,
        "epochs": config.epochs,
        "warmup": config.warmup,
        "runs": config.runs,
        "max_batches": config.max_batches,
        "max_seconds": config.max_seconds,
        "device": str(device),
        "step": config.step,
        "seed": config.seed,
        "cache": config.cache,
    }


def limit_fields(record: dict, limits: dict | None) -> dict:
    """% of limit: the run's MB/s over the ceiling that applies to it (None without limits)."""
    found = applicable_limit(record, limits) if limits else None
    if found is None:
        return {"limit_name": None, "limit_mb_per_s": None, "percent_of_limit": None}
    name, value = found
    return {"limit_name": name, "limit_mb_per_s": value, "percent_of_limit": 100 * record["mb_per_s"] / value}


def _profile_epoch(loader: Loader, epoch: int, step, config: RunConfig, directory: Path) -> Path:
    """One extra epoch under cProfile (and torch.profiler on CUDA); not part of the timings."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stamp}-{config.format}-{config.loader}.prof"
    profiler = cProfile.Profile()
    if loader.device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
            profiler.enable()
            _epoch(loader, epoch, step, config)
            profiler.disable()
        trace.export_chrome_trace(str(path.with_suffix(".trace.json")))
    else:
        profiler.enable()
        _epoch(loader, epoch, step, config)
        profiler.disable()
    profiler.dump_stats(path)
    return path


def _epoch(loader: Loader, epoch: int, step, config: RunConfig) -> EpochTiming:
    try:
        return time_epoch(loader, epoch, step, config.max_seconds)
    except RuntimeError as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "DataLoader worker" in text:
            raise RunFailed(f"a DataLoader worker died during {config.format}/{config.loader}: {text}") from None
        raise RunFailed(f"{config.format}/{config.loader} failed: {text}") from None
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise RunFailed(f"reading {config.format} failed: {type(exc).__name__}: {exc}") from None


def with_settings(config: RunConfig, **changes) -> RunConfig:
    return replace(config, settings=replace(config.settings, **changes))


def parse_loaders(text: str) -> tuple[str, ...]:
    """Loader names from a comma list; `all` leaves out the optional ones (ray) unless they are named."""
    chosen = parse_choices(text, LOADERS, "loader")
    named = split_list(text, "loader")
    return tuple(ld for ld in chosen if ld not in OPTIONAL_LOADERS or ld in named)


def parse_pairs(formats: str | None, loaders: str | None) -> tuple[list[tuple[str, str]], list[str]]:
    """(format, loader) pairs to run, and notes on the combinations skipped.

    With neither given: the standard comparison. Lists and 'all' expand to their product minus
    what does not go together (said in the notes); a single explicit pair that does not go
    together is an error.
    """
    if formats is None and loaders is None:
        return list(DEFAULT_PAIRS), []
    fmts = parse_choices(formats, tuple(FORMATS), "format") if formats is not None else None
    lds = parse_loaders(loaders) if loaders is not None else None
    if lds is None:  # formats chosen: the DataLoader on each, plus tensorclass where it applies
        return [(f, ld) for f in fmts for ld in ("dataloader", "tensorclass") if f in LOADER_FORMATS[ld]], []
    if fmts is None:
        fmts = tuple(FORMATS)
    pairs, skipped = [], []
    for f in fmts:
        for ld in lds:
            (pairs if f in LOADER_FORMATS[ld] else skipped).append((f, ld))
    if not pairs:
        raise _unreadable(*skipped[0])
    notes = [f"skipped {f}/{ld}: {ld} reads {', '.join(LOADER_FORMATS[ld])} only" for f, ld in skipped]
    return pairs, notes
