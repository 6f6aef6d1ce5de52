"""The run options users set beside the loader settings (`iobench.settings`), each declared once with what its
consumers need: its option and help (the signatures of `run`, `sweep` and `tune`, which commands take it), how the
command line's value is checked and held (`RunConfig`'s field, made from this declaration), how a record stores it
(`RecordedConfig`'s field) and its part of a configuration's label in tables. A new run option is one entry here,
its record field, and the code that honours it.

Light on purpose: the command line's `--help` reads these without importing numpy or torch; each check imports
what it needs when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from iobench.choices import Choice
from iobench.errors import IobenchError
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


RUN, SWEEP, TUNE, CHECKPOINT = "run", "sweep", "tune", "checkpoint"
# where an option's part of a label is shown: among the settings, in the cache column, as the transform (its cost
# beside it)
SETTINGS_LABEL, CACHE_LABEL, TRANSFORM_LABEL = "settings", "cache", "transform"


def _same(value: Any) -> Any:
    return value


def _none(config: Any) -> None:
    return None


@dataclass(frozen=True)
class RunOption:
    """One run option; `name` is its `RunConfig` field and the command's parameter."""

    name: str
    kind: type  # what the command line passes: str, int, float or bool
    default: Any  # as the command line gives it
    help: str
    commands: frozenset[str]  # of RUN, SWEEP, TUNE, CHECKPOINT: the commands that take it as a value
    flag: str = ""  # the option as typed where it is not the name with dashes (--read-limit, --distributed-sampler)
    field_type: str = ""  # RunConfig's annotation ("": the kind, optional when the default is None)
    value: Callable[[Any], Any] = _same  # the command line's value as RunConfig holds it, checked (IobenchError)
    record: str = ""  # the RecordedConfig field that stores it ("": the name)
    # how the record stores it, from the run options' values by name (a choice by its text)
    stored: Callable[[Mapping[str, Any]], Any] | None = None
    # its part of a configuration's label in tables, from a RecordedConfig (None where it says nothing: a default),
    # and where that part is shown: among the settings, in the cache column, or as the transform
    label: Callable[[Any], str | None] = _none
    shown: str = "settings"
    # what it says of a workload in a sentence ("reads throttled to 400 MB/s"); None: not part of the workload
    words: Callable[[Any], str | None] | None = None
    # sweep's option: a comma list of its values ("": sweep takes it as a value, or not at all)
    sweep_list: str = ""

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def record_field(self) -> str:
        return self.record or self.name

    def stored_from(self, values: Mapping[str, Any]) -> Any:
        if self.stored is not None:
            return self.stored(values)
        value = values[self.name]
        return value.value if isinstance(value, Choice) else value


def _cache(text: Any) -> Cache:
    return Cache.parse(text, "--cache")


def _eviction(text: Any) -> Any:
    from iobench.storage.local.page_cache import Eviction

    return Eviction.parse(text, "--eviction")


def _read_limit(value: float | None) -> float | None:
    from iobench.storage.local.confine import check_read_limit

    return check_read_limit(value)


def _cache_budget(text: Any) -> Any:
    from iobench.storage.local.confine import CacheBudget

    return CacheBudget(text) if isinstance(text, str) else text


def _transform(text: Any) -> str:
    from iobench.loaders.transforms import parse_transform

    return parse_transform(text)


def _transform_on(text: Any) -> Any:
    from iobench.loaders.transforms import TransformOn

    return TransformOn.parse(text, "--transform-on")


def _torch_threads(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise IobenchError(f"--torch-threads must be >= 1, got {value}")
    return value


def _cpu_contention(value: int) -> int:
    if not 0 <= value <= MAX_RIVALS:
        raise IobenchError(f"--cpu-contention must be 0..{MAX_RIVALS} processes, got {value}")
    return value


def _sampler_tail(text: Any) -> SamplerTail:
    return SamplerTail.parse(text, "--distributed-sampler")


# fmt: off
RUN_OPTIONS: dict[str, RunOption] = {
    o.name: o
    for o in (
        RunOption(
            "cache", str, "warm", "warm: timed after an untimed epoch (the default: a stable first result); cold: "
            "evict the dataset before every timed epoch (checked with mincore); as-is: touch nothing.",
            frozenset({RUN, TUNE}), field_type="Cache", value=_cache, label=lambda c: c.cache, shown=CACHE_LABEL,
            sweep_list="Comma list of cold, warm, as-is (checkpoint's restores: warm, cold; both by default)."),
        RunOption(
            "eviction", str, "auto", "How cold evicts: auto (fadvise: the dataset's files alone, as root too), "
            "drop_caches or fadvise. drop_caches (root) drops the dataset's metadata too, and iobench's own code: an "
            "untimed pass of two batches then reads that back and the dataset's files are evicted alone, so a cold "
            "epoch reads the dataset and nothing else.", frozenset({RUN}), field_type="Eviction", value=_eviction,
            label=lambda c: f"evict={c.eviction}" if c.eviction != "auto" else None, shown=CACHE_LABEL),
        RunOption(
            "read_limit_mb_per_s", float, None, "Throttle every read of the run (workers included) to this many MB/s "
            "with a block-I/O cgroup: slower storage, and a ceiling that holds still on a shared disk. Needs root.",
            frozenset({RUN, SWEEP}), flag="--read-limit", value=_read_limit, shown=CACHE_LABEL,
            label=lambda c: f"read<={c.read_limit_mb_per_s:g}MB/s" if c.read_limit_mb_per_s is not None else None,
            words=lambda c: f"reads throttled to {c.read_limit_mb_per_s:g} MB/s" if c.read_limit_mb_per_s else None),
        RunOption(
            "cache_budget", str, None, "Cap the run's page cache (256M, 1.5G, or 20% of the format's files) with a "
            "memory cgroup: a dataset 5x the budget behaves like one 5x the RAM. Needs root.",
            frozenset({RUN, SWEEP}), field_type="CacheBudget | None", value=_cache_budget,
            stored=lambda v: v["cache_budget"].text if v["cache_budget"] is not None else None, shown=CACHE_LABEL,
            label=lambda c: f"budget={c.cache_budget}" if c.cache_budget is not None else None,
            words=lambda c: f"page cache capped at {c.cache_budget}" if c.cache_budget else None),
        RunOption(
            "transform", str, "none", "Preprocessing per sample, the same for every format and loader: none, "
            "augment (images: crop, flip, normalise; other samples: gain, noise, standardise) or cpu:US (a fixed CPU "
            "cost in microseconds).", frozenset({RUN, SWEEP, TUNE}), value=_transform,
            label=lambda c: f"{c.transform}@{c.transform_on}" if c.transform != "none" else None,  # with its side
            shown=TRANSFORM_LABEL,
            words=lambda c: f"{c.transform} on the {c.transform_on}" if c.transform != "none" else None),
        RunOption(
            "transform_on", str, "host", "host: per sample where the loader reads (workers, actors, main process); "
            "device: batched after the copy, as tensordict's recipe does (on a CPU-only machine, the same cores).",
            frozenset({RUN, SWEEP, TUNE}), field_type="TransformOn", value=_transform_on,
            stored=lambda v: str(v["transform_on"]) if v["transform"] != "none" else None,
            label=lambda c: None),  # said in the transform's part: augment@host
        RunOption(
            "torch_threads", int, None, "torch intra-op threads of the main process during the run, or of every "
            "checkpoint trial and rank (default: torch's, one per core: what a job has unless it sets them; "
            "recorded). On shared cores torch's threaded paths slow down sharply; 1 is what torchrun sets per rank.",
            frozenset({RUN, SWEEP, TUNE, CHECKPOINT}), value=_torch_threads, record="torch_threads_asked",
            # under torchrun the label shows the threads every rank had
            label=lambda c: f"threads={c.torch_threads_asked}" if c.torch_threads_asked is not None
            and not c.backend else None),
        RunOption(
            "cpu_contention", int, 0, "Start N rival processes (a single-threaded matrix multiply each, as a "
            "training step on another core) beside the run and stop them after it: the run as it behaves on shared "
            "cores.", frozenset({RUN, SWEEP}), value=_cpu_contention,
            label=lambda c: f"rivals={c.cpu_contention}" if c.cpu_contention else None),
        RunOption(
            "resume_check", bool, False, "After the timed epochs, interrupt the last one at half and three quarters, "
            "restore the pipeline's own state_dict() in a fresh loader each time (StatefulDataLoader for the "
            "DataLoader paths, nodes, LitData) and record the samples lost and repeated, whether the order held and "
            "the time to the first batch (resume_* in the record; costs about 2.5 more epochs, untimed).",
            frozenset({RUN}), flag="--resume-check", label=lambda c: "resume-check" if c.resume_check else None),
        RunOption(
            "sampler_tail", str, "trim", "Under --nproc or torchrun, the DataLoader's DistributedSampler: trim "
            "(every sample once; the shares may differ by one, and so may the batch counts), pad (torch's default, "
            "drop_last=False: samples repeated so every rank gets as many) or drop (drop_last=True: the last samples "
            "left out). Rank coverage is in the record.", frozenset({RUN}), flag="--distributed-sampler",
            field_type="SamplerTail", value=_sampler_tail,
            label=lambda c: f"sampler={c.sampler_tail}" if c.backend and c.sampler_tail != "trim" else None),
    )
}
# fmt: on


def taken_by(command: str) -> list[RunOption]:
    """The run options a command takes as values, in their declared order."""
    return [o for o in RUN_OPTIONS.values() if command in o.commands]


def run_options_of(params: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The run options among a command's values (its parameters are named as the options' fields)."""
    return {o.name: params[o.name] for o in taken_by(command)}


def recorded_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every run option as a record stores it, from the values given by name (checked as RunConfig holds them);
    those not given at their defaults (a measurement that has no such option, iobench.measure's)."""
    held = {o.name: values[o.name] if o.name in values else o.value(o.default) for o in RUN_OPTIONS.values()}
    return {o.record_field: o.stored_from(held) for o in RUN_OPTIONS.values()}


def option_labels(config: Any, shown: str = SETTINGS_LABEL) -> list[str]:
    """The run options' parts of a configuration's label (a RecordedConfig) shown in `shown`, in their declared
    order."""
    return [part for o in RUN_OPTIONS.values() if o.shown == shown and (part := o.label(config))]


def option_words(config: Any) -> list[str]:
    """What the run options say of a configuration's workload, in words (a RecordedConfig), in their order."""
    return [said for o in RUN_OPTIONS.values() if o.words is not None and (said := o.words(config))]


def swept_lists() -> list[RunOption]:
    """The run options sweep takes as a comma list of values."""
    return [o for o in RUN_OPTIONS.values() if o.sweep_list]
