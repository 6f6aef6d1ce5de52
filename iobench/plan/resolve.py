"""`resolve()`: a RunConfig checked against this machine, the prepared dataset and the ranks becomes a
`ResolvedRun`, the plan the runner executes. The only place those are checked: nothing downstream
checks again."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch

from iobench.data.format_options import written_options
from iobench.data.manifest import FormatEntry, Manifest
from iobench.data.prepare import check_dataset_name
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.formats.base import StorageFormat
from iobench.loaders import LOADERS, LoaderName, ObjectReach, RankShare
from iobench.loaders.order import DistributedSamplerOrder, EpochOrder
from iobench.loaders.transforms import TransformOn
from iobench.plan.config import Cache, RunConfig, SamplerTail
from iobench.plan.recorded import recorded_config
from iobench.plan.run_options import RUN_OPTIONS
from iobench.results.record import RecordedConfig
from iobench.settings import DecodeOn, batches_in_flight, check_batch_fetch, pinning_for
from iobench.storage import Storage
from iobench.storage.local import LocalStorage
from iobench.storage.local.confine import Confinement
from iobench.storage.remote import ObjectStorage, RemoteTarget
from iobench.system.environment import check_parallelism
from iobench.system.world import SINGLE, World


@dataclass(frozen=True)
class RunTarget:
    """Where configurations run: a prepared dataset and a device that exists here; with `remote`, the dataset's
    formats are read from that object store (the dataset a bucket, each format a prefix) instead of the folder."""

    dataset_dir: Path
    device: torch.device
    remote: RemoteTarget | None = None


@dataclass(frozen=True)
class ResolvedRun:
    """A configuration checked against the machine, the dataset and the ranks: ready to run."""

    config: RunConfig  # with every automatic setting decided (pinning)
    target: RunTarget
    world: World
    manifest: Manifest
    storage: Storage  # where the format's files are: cold, residency, counters, controls

    @property
    def dataset_dir(self) -> Path:
        return self.target.dataset_dir

    @property
    def device(self) -> torch.device:
        return self.target.device

    @property
    def entry(self) -> FormatEntry:
        """The format as prepared, with the run's read options (`--format-option`) over the recorded ones."""
        entry = self.manifest.formats[self.config.format]
        if not self.config.format_options:
            return entry
        return replace(entry, options={**entry.options, **dict(self.config.format_options)})

    @property
    def confinement(self) -> Confinement:
        """The throttle and the cache budget in bytes (a share is of this format's files): local storage's
        controls, as the record names them."""
        c = self.config
        budget = c.cache_budget.of(self.entry.bytes) if c.cache_budget is not None else None
        return Confinement(c.read_limit_mb_per_s, budget)

    @property
    def shard(self) -> str | None:
        """How ranks share an epoch, as records name it; None outside torchrun."""
        if self.world.size <= 1:
            return None
        if LOADERS[self.config.loader].ranks is RankShare.LIBRARY:
            return FORMATS[self.config.format].native_rank_split
        return self.epoch_order().SHARD

    def epoch_order(self) -> EpochOrder | DistributedSamplerOrder:
        """This rank's batches: the DataLoader under torchrun takes torch's DistributedSampler, as
        training scripts do; the other loaders take a contiguous share of the epoch's shared order."""
        c, w = self.config, self.world
        n, batch = self.manifest.spec.n_samples, c.settings.batch_size
        if w.size > 1 and LOADERS[c.loader].ranks is RankShare.SAMPLER:
            return DistributedSamplerOrder(
                n, batch, c.shuffle, c.seed, c.max_batches, w.rank, w.size, c.sampler_tail.value
            )
        return EpochOrder(n, batch, c.shuffle, c.block_size, c.seed, c.max_batches, rank=w.rank, world=w.size)

    def recorded(self) -> RecordedConfig:
        """The configuration as its record will store it (what sweeps compare to skip a run): the fields of
        RunConfig that RecordedConfig names as they are, the run options as declared, then where it ran and the
        fields stored in another form."""
        c = self.config
        same = {f.name: getattr(c, f.name) for f in fields(c) if f.name in PLAIN_FIELDS}
        return recorded_config(
            **same,
            loader=c.loader,
            settings=c.settings,
            shuffle=c.shuffle,
            order=c.order_name,
            options={name: getattr(c, name) for name in RUN_OPTIONS},
            dataset=self.dataset_dir.name,
            world_size=self.world.size,
            backend=self.world.backend,
            device=str(self.device),
            format_options=",".join(f"{k}={v}" for k, v in c.format_options),
            format_written=written_options(c.format, self.manifest.formats[c.format].options, self.manifest.spec),
            **_remote_fields(self.target.remote, self.storage),
        )


# RunConfig's fields a record stores as they are (the run options, the loader, settings and order have their own way)
PLAIN_FIELDS = frozenset(
    {"format", "block_size", "epochs", "warmup", "runs", "max_batches", "max_seconds", "step", "seed"}
)


def _remote_fields(remote: RemoteTarget | None, storage: Storage) -> dict:
    from iobench.storage.remote.bounds import read_timeout_s

    if remote is None:
        return {}
    profile, kind = remote.profile, storage.kind
    return {
        "storage": kind,
        "remote_profile": profile.name if profile else "external",
        "remote_latency_ms": profile.latency_ms if profile else None,
        "remote_connection_mb_per_s": profile.connection_mb_per_s if profile else None,
        "remote_fuse_chunk": remote.fuse.chunk if kind == "fuse" else None,
        "remote_fuse_read_ahead": storage.read_ahead if isinstance(storage, ObjectStorage) else None,
        "remote_timeout_s": read_timeout_s(),
        "remote_server": remote.server,
    }


def device_of(text: str) -> torch.device:
    """--device (auto, cpu, cuda, cuda:N) as a usable device here, or a one-line refusal."""
    from iobench.loaders.device import resolve_device

    return resolve_device(text)


def settle_device(config: RunConfig, device: torch.device) -> RunConfig:
    """What depends on this machine, before any dataset is looked at: pinning decided for the device
    (on for CUDA unless turned off; refused without CUDA), worker counts within reason for the cores."""
    check_parallelism(config.settings.num_workers, config.torch_threads)
    if LOADERS[config.loader].needs_cuda and device.type != "cuda":
        raise IobenchError(f"--loader {config.loader} reads into device memory: needs CUDA (--device {device})")
    return config.with_settings(pin_memory=pinning_for(config.settings.pin_memory, device.type == "cuda"))


def resolve(config: RunConfig, target: RunTarget, world: World = SINGLE) -> ResolvedRun:
    """Decide what 'auto' means here and check the config against the device, dataset and ranks."""
    config = settle_device(config, target.device)
    manifest = check_dataset(target.dataset_dir, config.format)
    config = fitted_batch(config, manifest.spec.n_samples // max(1, world.size))
    check_world(config, manifest, world)
    entry = manifest.formats[config.format]
    if target.remote is not None:
        storage: Storage = object_storage(config, target, entry, world)
        resolved = ResolvedRun(config, target, world, manifest, storage)
        FORMATS[config.format].options_from_json(resolved.entry.options)
        check_decode_on(resolved)
        return resolved
    check_local_read_options(config)
    budget = config.cache_budget.of(entry.bytes) if config.cache_budget is not None else None
    storage = LocalStorage(
        entry.file_paths(target.dataset_dir),
        entry.folder(target.dataset_dir),
        target.dataset_dir,
        eviction=config.eviction,
        confinement=Confinement(config.read_limit_mb_per_s, budget),
    )
    storage.check(cold=config.cache is Cache.COLD)
    resolved = ResolvedRun(config, target, world, manifest, storage)
    FORMATS[config.format].options_from_json(resolved.entry.options)  # a read option's value is checked here
    check_budget(resolved)
    check_decode_on(resolved)
    check_loader_reads(resolved)
    return resolved


def fitted_batch(config: RunConfig, samples: int) -> RunConfig:
    """The default batch larger than the samples a process reads in an epoch made every epoch one batch, which says
    little of a loader's steady state (a 500-sample dataset kept 1,024 and warned once per configuration): the largest
    power of two that gives the epoch 8 batches or more (`batch_notes` says so once). A batch size other than the
    default is the user's and is kept (the one-batch warning says what it means)."""
    from iobench.settings import SETTINGS

    default = SETTINGS["batch_size"].default
    if config.settings.batch_size != default or config.settings.batch_size <= samples or samples < 1:
        return config
    return config.with_settings(batch_size=1 << max(0, (max(1, samples // 8)).bit_length() - 1))


def check_loader_reads(resolved: ResolvedRun) -> None:
    """What a loader refuses of a prepared dataset (DALI: files of images only), before the dataset is opened."""
    c = resolved.config
    options = FORMATS[c.format].options_from_json(resolved.entry.options)
    if (why := LOADERS[c.loader].dataset_refusal(resolved.manifest.spec, options)) is not None:
        raise IobenchError(why)


def check_decode_on(resolved: ResolvedRun) -> None:
    """`--decode-on device` hands a batch's files over in one call and decodes them after the copy: the format must
    keep encoded images, the loader fetch whole batches, and a transform run where the decoded samples are."""
    c = resolved.config
    if c.settings.decode_on is not DecodeOn.DEVICE:
        return
    fmt = FORMATS[c.format]
    if (why := fmt.encoded_refusal(fmt.options_from_json(resolved.entry.options))) is not None:
        raise IobenchError(f"--decode-on device: {why}")
    check_batch_fetch(c.settings, "--decode-on device")
    if c.transform != "none" and c.transform_on is TransformOn.HOST:
        raise IobenchError("--decode-on device: the samples exist only after the copy: use --transform-on device")


def check_local_read_options(config: RunConfig) -> None:
    """A read option that only reading from object storage uses (a client, a cache budget) is refused for this
    machine's files: the run would record a setting that changed nothing."""
    from iobench.data.format_options import object_storage_fields

    only = object_storage_fields(config.format)
    if given := [k for k, _ in config.format_options if k in only]:
        raise IobenchError(
            f"{config.label}: --format-option {config.format}.{given[0]} sets how object storage is "
            "read: give --remote PROFILE or --endpoint-url"
        )


def reads_objects(fmt: StorageFormat, loader: LoaderName) -> bool:
    """Whether the loader reads the format's objects through the format's own remote path (its pipeline's, or
    its reader of objects'); otherwise through a FUSE mount."""
    reach = LOADERS[loader].objects
    if reach is ObjectReach.LIBRARY:
        return fmt.remote_pipeline
    reader = fmt.object_reader()
    return reach is ObjectReach.READER and reader is not None and not reader.traits.pipeline_only


def check_remote(config: RunConfig) -> None:
    """Refuse a configuration object storage cannot run, from the configuration alone (a sweep skips it)."""
    fmt = FORMATS[config.format]
    if not reads_objects(fmt, config.loader) and LOADERS[config.loader].objects is ObjectReach.NONE:
        # the others read through a FUSE mount of the bucket: a format's local files with its own library
        can = [
            k.name
            for k in LOADERS.values()
            if k.objects is ObjectReach.READER or (k.objects is ObjectReach.LIBRARY and fmt.has_pipeline)
        ]
        raise IobenchError(
            f"{config.label}: --remote reads {config.format} through --loader {' or '.join(can)} in this release"
        )
    refuse_local_controls(config.read_limit_mb_per_s, config.cache_budget)


def refuse_local_controls(read_limit: float | None, cache_budget: str | None) -> None:
    """A throttle or a page-cache budget shapes local storage only: object storage has its profile."""
    if read_limit is not None or cache_budget is not None:
        raise IobenchError("--read-limit and --cache-budget control local storage; --remote has its profile")


def object_storage(config: RunConfig, target: RunTarget, entry: FormatEntry, world: World) -> ObjectStorage:
    """The format's objects in the target's store, once the configuration can read them there: through the
    format's reader of objects where it has one (and the loader reads a reader), else through FUSE."""
    check_remote(config)
    fmt = FORMATS[config.format]
    # a library whose client takes no size bound reads only what iobench's own emulator serves (`served`)
    mounted = not reads_objects(fmt, config.loader) or (not fmt.own_client_bounded and target.remote.served is None)
    if world.size > 1 and mounted:  # ranks each reading through its own client (feed's) are measured; a mount is not
        raise IobenchError(
            f"{config.format} read by {config.loader} from object storage goes through a FUSE mount, which does not "
            "run under torchrun in this release; a format read by its own client does (npy)"
        )
    check_dataset_name(target.dataset_dir.name)  # a folder named by hand, or by an iobench before 0.3
    folder = entry.folder(target.dataset_dir)
    names = [p.relative_to(folder).as_posix() for p in entry.file_paths(target.dataset_dir)]
    sizes = {name: f.bytes for name, f in zip(names, entry.files, strict=True)}
    prefix = folder.relative_to(target.dataset_dir).as_posix()
    endpoint, dataset = target.remote.endpoint, target.dataset_dir.name
    bucket, keyed = endpoint.bucket_for(dataset), endpoint.prefix_for(dataset)
    where = (target.remote, bucket, keyed + ("" if prefix == "." else prefix), names, sizes)
    if mounted:
        from iobench.storage.remote.mount import MountedStorage, fuse_reason

        reason = fuse_reason()
        if reason is not None:
            raise IobenchError(
                f"{config.label}: {config.format} is read from object storage through FUSE here; {reason}"
            )
        storage = MountedStorage(*where, at_random=config.shuffle and not LOADERS[config.loader].own_pipeline)
    else:
        storage = ObjectStorage(*where)
    if target.remote.served is None:  # a store iobench does not run: what was uploaded there
        storage.check_stored(config.format)
    return storage


MIN_CACHE_BUDGET = 16 * 2**20  # read-ahead windows and the kernel's own allocations


def check_budget(resolved: ResolvedRun) -> None:
    """A budget must hold what the run keeps in flight: batches in workers' shared memory are charged
    to the group, and one that cannot be allocated is lost (the run hangs)."""
    budget = resolved.confinement.cache_budget_bytes
    if budget is None:
        return
    s, spec = resolved.config.settings, resolved.manifest.spec
    in_flight = batches_in_flight(s) * s.batch_size * spec.sample_bytes
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
        hint = (
            f"`--dataset {elsewhere[0]}` has it, or run `iobench prepare --formats {fmt}`"
            if elsewhere
            else f"run `iobench prepare --formats {fmt}`"
        )
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
        form = FORMATS[fmt]
        form.check_layout(entry.folder(dataset_dir), manifest.spec, form.options_from_json(entry.options))
    except (ValueError, OSError) as exc:
        raise IobenchError(f"{fmt} in {dataset_dir} is not what iobench writes: {exc}") from None
    return manifest


def check_world(config: RunConfig, manifest: Manifest, world: World) -> None:
    """What torchrun ranks cannot share."""
    if config.sampler_tail is not SamplerTail.TRIM and (
        world.size <= 1 or LOADERS[config.loader].ranks is not RankShare.SAMPLER
    ):
        raise IobenchError("--distributed-sampler is the DataLoader's DistributedSampler under --nproc or torchrun")
    if world.size <= 1:
        return
    if LOADERS[config.loader].ranks is RankShare.SAMPLER and config.block_size:
        raise IobenchError("under torchrun the DataLoader uses DistributedSampler, which has no --block-shuffle")
    if config.resume_check:
        raise IobenchError("--resume-check restores one process's pipeline; run it without --nproc or torchrun")
    if LOADERS[config.loader].ranks is RankShare.NONE:
        raise IobenchError(
            f"--loader {config.loader} is one training process fed by a Ray cluster; run it without torchrun"
        )
    if LOADERS[config.loader].ranks is RankShare.LIBRARY:
        fmt = FORMATS[config.format]
        if fmt.native_rank_split is None:
            splitting = [n for n in FORMATS.native if FORMATS[n].native_rank_split is not None]
            raise IobenchError(
                f"--loader native under torchrun: {config.format}'s library has no rank splitting of its own "
                f"({', '.join(splitting)} split by rank); use --loader dataloader (DistributedSampler)"
            )
        try:  # the format is prepared: check_dataset came first
            options = fmt.options_from_json(manifest.formats[config.format].options)
            fmt.check_native_world(manifest.spec, options, world.size, config.settings.batch_size)
        except ValueError as exc:
            raise IobenchError(f"--loader native under torchrun: {exc}") from None
    if manifest.spec.n_samples < world.size:
        raise IobenchError(f"{manifest.spec.n_samples} samples cannot be shared by {world.size} ranks")
    if config.read_limit_mb_per_s is not None or config.cache_budget is not None:
        raise IobenchError(
            "--read-limit and --cache-budget confine one process tree; under torchrun every rank would take "
            "the whole budget: start torchrun inside one cgroup instead (scripts/confine.sh)"
        )
