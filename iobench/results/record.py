"""The result of one run as a typed, schema-versioned value, and the rules that read it.

On disk a record stays one flat JSON object (the keys of schema 1, so every results file written
before stays valid); in memory it is a `RunRecord` of parts. Reports, sweeps and comparisons take
records and never the runner. The identity of a configuration and the rule for which ceiling a run
is held to are defined here, once.
"""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Protocol

from iobench.choices import Choice
from iobench.results.checked import IN_PLACE, MAX_MEASURED, RecordError, mapping, numbers, parsed
from iobench.results.limits import LimitShare
from iobench.results.record_base import RecordBase, base_field_names, base_json, base_of
from iobench.results.record_parts import RankStats, SystemStats
from iobench.results.stats import summary
from iobench.settings import SETTINGS, LoaderSettings

# 1: records written before the version was stored (read with the defaults below); 3: `packages`. The history
# of every version is in docs/records.md.
SCHEMA_VERSION = 3


# The stored spellings of the choices the records' rules read (the plan's Cache.COLD and Order.SHUFFLE), named once
# here: tests/run/test_runner.py checks that they match.
STORED_COLD, STORED_SHUFFLE = "cold", "shuffle"


# the loaders' ReadMethod.THREADS, as the records store it (the warnings read it)
STORED_THREADS_READ = "preadv threads through the page cache"


class Timed(Protocol):
    """What the clock measured for one epoch, as the stats read it (`iobench.measuring.clocks.EpochTiming`)."""

    seconds: float
    first_batch_seconds: float
    batches: int
    samples: int
    wait_seconds: float
    h2d_seconds: float
    step_seconds: float
    partial: bool
    transform_seconds: float


@dataclass(frozen=True, kw_only=True)
class RecordedConfig:
    """The configuration as a record stores it; equal values measured the same thing."""

    dataset: str
    world_size: int = 1
    backend: str | None = None  # torchrun's process-group backend; None outside torchrun
    format: str
    loader: str
    # the loader settings (iobench.settings), a field of the record each where this one stands on disk
    settings: LoaderSettings = field(default_factory=LoaderSettings, metadata=IN_PLACE)
    order: str
    shuffle: bool
    block_size: int = 0
    epochs: int
    warmup: int
    runs: int
    max_batches: int | None = None
    max_seconds: float | None = None
    device: str
    step: str = "none"
    seed: int = 0
    cache: str
    read_limit_mb_per_s: float | None = None  # reads throttled to this (a cgroup), None: as the disk is
    cache_budget: str | None = None  # page cache capped (as given: 256M or 20%), None: all of RAM
    transform: str = "none"  # none | augment | cpu:US, per sample
    transform_on: str | None = None  # host (in the loader) or device (batched after the copy); None: no transform
    eviction: str = "auto"  # how cold epochs evict, as asked (records before it: auto)
    # --torch-threads as asked (None: torch's default); what the run had is the environment's torch_threads
    torch_threads_asked: int | None = None
    cpu_contention: int = 0  # rival processes busy beside the run
    sampler_tail: str = "trim"  # under torchrun, the DataLoader's DistributedSampler: trim, pad or drop (its drop_last)
    resume_check: bool = False  # the last timed epoch was interrupted and resumed after the clock (EpochStats)
    format_options: str = ""  # run --format-option: the format's read options set for this run (name=value,...)
    # how the format was written where `prepare`'s defaults for the spec would not have (its manifest's write
    # options, name=value,...; "" for the defaults, and in records made before 0.3): LitData's chunk size or
    # WebDataset's shard size change what a run reads as much as a read option does
    format_written: str = ""
    # Schema 3, run --remote: where the bytes were ("local"; "object", read by the format's reader of objects;
    # "fuse", its local reader over a FUSE mount of the bucket), and the network profile they came through
    # (its name; "external" for a store iobench did not start, whose latency it does not set)
    storage: str = "local"
    remote_profile: str | None = None
    remote_latency_ms: float | None = None
    remote_connection_mb_per_s: float | None = None
    remote_fuse_chunk: str | None = None  # storage "fuse": the mount's first GET of an object (rclone's size)
    remote_fuse_read_ahead: str | None = None  # storage "fuse": what the mount reads ahead of each open file
    # the most seconds a store could go without sending a byte before the request failed (0.3; None before)
    remote_timeout_s: float | None = None
    remote_server: str | None = None  # iobench's own server's settings a client sees (rclone's flags); None otherwise

    @property
    def cold(self) -> bool:
        """Every timed epoch started with the files evicted."""
        return self.cache == STORED_COLD

    @property
    def shuffled(self) -> bool:
        """A fresh random order per epoch (not sequential, not block-shuffled)."""
        return self.order == STORED_SHUFFLE

    def identity(self) -> tuple:
        """The one definition of 'the same configuration' (sweeps resume by it, reports keep the latest).

        Runs under torchrun (even one rank) and plain runs differ: torchrun may set one thread."""
        return tuple(getattr(self, f.name) for f in fields(self))

    @property
    def label(self) -> str:
        return f"{self.format}/{self.loader}"


@dataclass(frozen=True, kw_only=True)
class DatasetInfo:
    data_dir: str = ""
    n_samples: int
    sample_shape: list[int]
    dtype: str
    sample_bytes: int  # what a sample's read took: its features and label, or a files size distribution's mean file
    dataset_bytes: int
    workload: str | None = None  # tabular, image, small-image, tokens or custom (None: records before 0.2)
    source: str | None = None  # prepare --from: the source's path; None: generated
    # The format's write seconds from the manifest (prepare's figure: fsync and checksums included), so a
    # report can set speed beside write time; None in records made before it was kept.
    format_write_seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class EpochStats:
    """The timed epochs: median with min and max, and where each batch's time went."""

    epoch_seconds: list[float]
    epoch_seconds_median: float
    epoch_seconds_min: float
    epoch_seconds_max: float
    epoch_seconds_cv: float
    epoch_seconds_mad: float
    first_batch_seconds: list[float]
    first_batch_seconds_median: float
    samples_per_epoch: int
    batches_per_epoch: int
    samples_per_s: float
    mb_per_s: float
    wait_ms_per_batch: float
    h2d_ms_per_batch: float
    step_ms_per_batch: float
    partial: bool
    # Time in the step over epoch time, median over epochs (per rank under torchrun): the share of the
    # time the accelerator computes rather than waits for data. None without a step (schema 1 too).
    accelerator_utilisation: float | None = None
    # --transform: the batched transform on the device per batch, and what one sample costs on the
    # host (measured in the main process before the run, whichever side runs it).
    transform_ms_per_batch: float = 0.0
    transform_us_per_sample: float | None = None
    # How well the delivered order was shuffled (iobench.results.shuffle_quality), median over the timed
    # epochs: 1.0 is a uniform random permutation. None in records made before they were scored.
    shuffle_spread: float | None = None
    shuffle_order: float | None = None
    # --resume-check (iobench.run.resume_check), after the clock on the last timed epoch: whether the pipeline's
    # library has state to checkpoint mid-epoch, the longer of two resumes to its first batch, samples lost and
    # repeated against the uninterrupted epoch, whether the order was the same; why the check failed. None: unchecked.
    resume_supported: bool | None = None
    resume_seconds: float | None = None
    resume_lost_samples: int | None = None
    resume_repeated_samples: int | None = None
    resume_same_order: bool | None = None
    resume_error: str | None = None


@dataclass(frozen=True, kw_only=True)
class RunRecord(RecordBase):
    """One configuration's runs: the base every record shares (environment, load, time, schema) and what was run and
    timed."""

    config: RecordedConfig
    dataset: DatasetInfo
    epochs: EpochStats
    ranks: RankStats = field(default_factory=RankStats)
    system: SystemStats = field(default_factory=SystemStats)
    limit: LimitShare = field(default_factory=LimitShare)
    schema_version: int = SCHEMA_VERSION
    extra: dict = field(default_factory=dict)  # fields of other versions, kept as they were

    @property
    def storage(self) -> str:
        """Where the bytes were: local, or object storage (a format's reader of objects, or FUSE)."""
        return self.config.storage

    def identity(self) -> tuple:
        return self.config.identity()

    @property
    def label(self) -> str:
        return self.config.label

    def describe(self) -> str:
        """Names a record in warnings and reports: format/loader, cache and order."""
        return f"{self.config.label} {self.config.cache} {self.config.order}"

    def to_json(self) -> dict:
        """The flat object of schema 1, plus schema_version (and any fields of other versions kept)."""
        out: dict[str, Any] = {"schema_version": self.schema_version, "timestamp": self.timestamp}
        for part in (self.config, self.dataset, self.system, self.ranks, self.epochs):
            out.update(flat(part))
        out.update(base_json(self))
        out.update(flat(self.limit))
        for key in ("cuda_max_memory_allocated_bytes", "cuda_max_memory_reserved_bytes"):
            if out.get(key) is None:
                out.pop(key)
        return {**self.extra, **out}

    @classmethod
    def from_json(cls, data: object) -> RunRecord:
        """A stored record of any schema version; RecordError names what is wrong."""
        d = mapping(data, "record")
        version = d.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise RecordError(f"schema_version must be a whole number >= 1, got {version!r}")
        if version > SCHEMA_VERSION:
            raise RecordError(f"schema_version {version} is newer than this iobench reads ({SCHEMA_VERSION})")
        d = dict(d)
        if "epoch_seconds_mad" not in d and isinstance(d.get("epoch_seconds"), list) and d["epoch_seconds"]:
            d["epoch_seconds_mad"] = summary(numbers(d["epoch_seconds"], "epoch_seconds")).mad
        parts = {
            "config": RecordedConfig,
            "dataset": DatasetInfo,
            "epochs": EpochStats,
            "ranks": RankStats,
            "system": SystemStats,
            "limit": LimitShare,
        }
        required = {RecordedConfig: STORED_SETTINGS}
        built = {name: parsed(part, d, required.get(part, ())) for name, part in parts.items()}
        base = base_of(d)
        for part in (*built.values(), base["environment"], base["host"], base["waits"]):
            _check_finite(part)
        _check_measured(built["epochs"])
        _check_config(built["config"], built["dataset"])
        known = {f.name for part in parts.values() for f in fields(part)} | base_field_names() | set(SETTINGS)
        return cls(
            **built,
            **base,
            schema_version=version,
            extra={k: v for k, v in d.items() if k not in known},
        )


def flat(part: object) -> dict[str, Any]:
    """A part's fields as stored: a nested part's (the config's settings) in its place, a choice by its text."""
    out: dict[str, Any] = {}
    for f in fields(part):
        value = getattr(part, f.name)
        if f.metadata.get("in_place"):
            out.update(flat(value))
        else:
            out[f.name] = value.value if isinstance(value, Choice) else deepcopy(value)
    return out


def _check_finite(part: object) -> None:
    """No NaN or infinity anywhere: a report ranked `samples_per_s: NaN` fastest ("nanx the next")."""
    for f in fields(part):
        value = getattr(part, f.name)
        if is_dataclass(value):
            _check_finite(value)
            continue
        for x in value if isinstance(value, list) else value.values() if isinstance(value, dict) else [value]:
            if isinstance(x, float) and not math.isfinite(x):
                raise RecordError(f"{f.name!r} holds {x!r}, not a number")


STORED_SETTINGS = ("batch_size", "num_workers")  # in every record since the first

# What a real run's settings stay within: a record outside them was made by hand (negative batch sizes, 1e30
# samples and a million workers were ranked in a report)
SETTING_BOUNDS = {
    **{s.name: (s.minimum, s.recorded_at_most) for s in SETTINGS.values() if s.recorded_at_most is not None},
    "epochs": (0, 10**6),
    "warmup": (0, 10**6),
    "runs": (1, 10**6),
    "world_size": (1, 10**6),
}
MAX_SAMPLES = 10**13


def _check_config(config: RecordedConfig, dataset: DatasetInfo) -> None:
    for name, (least, most) in SETTING_BOUNDS.items():
        value = getattr(config.settings if name in SETTINGS else config, name)
        if not least <= value <= most:
            raise RecordError(f"{name!r} holds {value!r}, outside {least}..{most}")
    if not 1 <= dataset.n_samples <= MAX_SAMPLES or dataset.sample_bytes < 0:
        raise RecordError(f"'n_samples' holds {dataset.n_samples!r}, not a dataset's size")


def _check_measured(epochs: EpochStats) -> None:
    """Times and rates are >= 0 and finite: a report divides by them, sums them and plots them."""
    for f in fields(epochs):
        value = getattr(epochs, f.name)
        for x in value if isinstance(value, list) else [value]:
            if isinstance(x, (int, float)) and not isinstance(x, bool) and not 0 <= x <= MAX_MEASURED:
                raise RecordError(f"{f.name!r} holds {x!r}, not a measured time or rate")
