"""The loader settings users turn, each declared once with what every consumer needs: its flag and help (the
options of `run`, `sweep` and `tune`), how a comma list of it parses (sweep), whether it needs worker processes,
its DataLoader keyword, its label in tables, the values tune searches. `LoaderSettings` is made from them (a field
per setting, so the record has one too), and each loader declares which it honours (`iobench.loaders.LOADERS`): a
new DataLoader knob is one entry here and, for the loaders that take it, their declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Optional

from iobench.choices import Choice, parse_bools, parse_choices, parse_ints
from iobench.errors import IobenchError


class Fetch(Choice):
    ITEM = "item"  # one __getitem__ per sample, default collate
    BATCH = "batch"  # one call per batch of indices


class DecodeOn(Choice):
    HOST = "host"  # where the loader reads (its workers, threads or the main process)
    DEVICE = "device"  # after the copy, the batch in one call (nvJPEG on CUDA): the loader hands over the files


def _none(value: Any) -> None:
    return None


@dataclass(frozen=True)
class Setting:
    """One knob; `name` is its LoaderSettings field, its record key and (with dashes) its option."""

    name: str
    kind: type  # int, bool, str or a Choice
    default: Any
    help: str
    flag: str = ""  # typer's declaration of a boolean ("--pin-memory/--no-pin-memory")
    optional: bool = False  # None is a value (torch's default, or decided by the device)
    minimum: int | None = None  # the least a count may be
    recorded_at_most: int | None = None  # the most a real run's record holds (more was written by hand)
    needs_workers: bool = False  # a value other than the default needs --num-workers > 0
    dataloader: str | None = None  # torch's DataLoader keyword, where the DataLoader takes it
    label: Callable[[Any], str | None] = _none  # its part of a configuration's name in tables (None: none)
    sweep: str = ""  # sweep's help for a comma list of it ("": sweep does not take it)
    tune: tuple = ()  # the values tune searches, on CUDA where `tune_cpu` differs ((): not searched)
    tune_cpu: tuple | None = None  # the values tune searches without CUDA (None: `tune`)
    tune_remote: tuple = ()  # the values tune searches against object storage where they differ (): `tune`)
    preset: tuple = ()  # the values `sweep --preset settings` crosses ((): held at its default)
    auto_cuda: bool = False  # None means on with CUDA, off without (pinning)
    refused_elsewhere: bool = True  # False: a loader that does not honour it reads without it, unrefused

    @property
    def option(self) -> str:
        """The option as users type it: --batch-size."""
        return "--" + self.name.replace("_", "-")

    def parse_list(self, text: str) -> list[Any]:
        """A sweep's comma list of this setting's values."""
        what = self.option.removeprefix("--")
        if self.kind is bool:
            return parse_bools(text, what)
        if self.kind is int:
            return parse_ints(text, what, allow_default=self.optional)
        if issubclass(self.kind, Choice):
            return list(parse_choices(text, tuple(c.value for c in self.kind), what))
        return [x.strip() for x in text.split(",") if x.strip()]

    def is_set(self, value: Any) -> bool:
        """Whether a run's value differs from the default (what a loader must honour to take it)."""
        return value != self.default

    def shown(self, value: Any) -> str:
        """The value as typed on a command line: --no-in-order, --fetch item, --prefetch-factor 4."""
        if self.kind is bool:
            on, _, off = self.flag.partition("/")
            return on if value else off
        return f"{self.option} {value}"

    def searched(self, cuda: bool, remote: bool = False) -> tuple:
        """The values tune tries of it."""
        if remote and self.tune_remote:
            return self.tune_remote
        return self.tune if cuda or self.tune_cpu is None else self.tune_cpu

    def preset_values(self, cuda: bool) -> list:
        """The values the settings preset crosses of it: pinning on only with CUDA."""
        return [v for v in self.preset if cuda or not (self.auto_cuda and v)]


def _flag(text: str) -> Callable[[Any], str | None]:
    return lambda value: text if value else None


# fmt: off
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("batch_size", int, 1024, "Samples per batch.", minimum=1, recorded_at_most=2**31,
                label=lambda v: f"bs={v}", sweep="Comma list, e.g. 256,1024,4096."),
        Setting("num_workers", int, 0, "DataLoader worker processes, nodes' threads (0: load in the main process).",
                minimum=0, recorded_at_most=4096, dataloader="num_workers", label=lambda v: f"w={v}",
                sweep="Comma list, e.g. 0,4,8.", preset=(0, 4, 8)),
        Setting("prefetch_factor", int, None, "Batches each worker loads ahead (needs --num-workers > 0; default: "
                "torch's, 2).", optional=True, minimum=1, needs_workers=True, dataloader="prefetch_factor",
                label=lambda v: f"pf={v}" if v else None, sweep="Comma list, e.g. 2,8.", tune=(None, 4),
                preset=(None, 2, 8)),
        Setting("pin_memory", bool, None, "Pin host batches (default: on for CUDA, off for CPU).",
                flag="--pin-memory/--no-pin-memory", optional=True, dataloader="pin_memory", label=_flag("pin"),
                sweep="Comma list of on, off.", tune=(True, False), tune_cpu=(False,), preset=(True, False),
                auto_cuda=True),
        Setting("non_blocking", bool, True, "Asynchronous host-to-device copies.", flag="--non-blocking/--blocking",
                sweep="Comma list of on, off.", preset=(True, False)),
        Setting("persistent_workers", bool, False, "Keep workers between epochs.", needs_workers=True,
                flag="--persistent-workers/--no-persistent-workers", dataloader="persistent_workers",
                label=_flag("persistent"), tune=(False, True)),
        Setting("fetch", Fetch, Fetch.BATCH, "DataLoader: item (one __getitem__ per sample) or batch.",
                sweep="Comma list of item, batch.", tune_remote=(Fetch.BATCH, Fetch.ITEM)),
        Setting("fetch_threads", int, 1, "DataLoader: threads sharing each batch inside each worker (1: the worker "
                "alone); for storage where one request at a time leaves the worker waiting.", minimum=1,
                recorded_at_most=4096, label=lambda v: f"fetch-threads={v}" if v > 1 else None,
                sweep="Comma list, e.g. 1,4,16 (--loader dataloader).", tune_remote=(1, 4, 16)),
        Setting("prefetch_thread", int, 0, "A background thread keeps K batches ready (0: off).", minimum=0,
                label=lambda v: f"thread={v}" if v else None, sweep="Comma list, e.g. 0,4."),
        Setting("readahead_mb", int, 32, "tensorclass: MiB the kernel is asked to read ahead of sequential batches "
                "(0: off).", minimum=0, refused_elsewhere=False),
        Setting("ray_address", str, None, "ray: address of a Ray cluster (default: start a local instance); see "
                "`ray start`.", optional=True),
        Setting("in_order", bool, True, "Workers' batches in sampler order, or as they are ready.", needs_workers=True,
                flag="--in-order/--no-in-order", dataloader="in_order", label=lambda v: None if v else "unordered",
                tune=(True, False)),
        Setting("decode_on", DecodeOn, DecodeOn.HOST, "files of images: decode where the loader reads (host), or "
                "after the copy, the batch in one call (device: nvJPEG on CUDA; PNG, and a machine without CUDA, on "
                "the host there).", label=lambda v: "decode@device" if v is DecodeOn.DEVICE else None,
                sweep="Comma list of host, device."),
    )
}
# fmt: on
# What torch's own DataLoader over a user's Dataset takes of them: its keywords, the batch and the copy
TORCH_DATALOADER = frozenset({"batch_size", "non_blocking", *(s.name for s in SETTINGS.values() if s.dataloader)})
# Orders other than the declaration's, kept as tables, pasted scripts and tune have always written them
LABEL_ORDER = (
    "batch_size",
    "num_workers",
    "prefetch_factor",
    "pin_memory",
    "prefetch_thread",
    "fetch_threads",
    "persistent_workers",
    "in_order",
)
ARGUMENT_ORDER = ("num_workers", "prefetch_factor", "persistent_workers", "in_order", "pin_memory")
COMMAND_ORDER = ("fetch", "fetch_threads", "prefetch_factor", "persistent_workers", "in_order", "pin_memory")


def ordered(first: tuple[str, ...]) -> list[str]:
    """Every setting: those named first in their order (as tables and scripts have always written them), then the
    rest as declared, so that a new setting is never left out."""
    return [*first, *(name for name in SETTINGS if name not in first)]


# The settings figure of a report: samples/s over two settings, a panel per pair of two more
HEATMAP_AXES = ("num_workers", "prefetch_factor")
HEATMAP_PANELS = ("pin_memory", "non_blocking")


def _post_init(self: Any) -> None:
    object.__setattr__(self, "fetch", Fetch.parse(self.fetch, "--fetch"))
    object.__setattr__(self, "decode_on", DecodeOn.parse(self.decode_on, "--decode-on"))


# The knobs of one run, one frozen value, recorded with its result: a field per declared setting.
LoaderSettings = make_dataclass(
    "LoaderSettings",
    [(s.name, Optional[s.kind] if s.optional else s.kind, field(default=s.default)) for s in SETTINGS.values()],  # noqa: UP045
    frozen=True,
    kw_only=True,
    namespace={
        "__post_init__": _post_init,
        "__module__": __name__,
        "__doc__": "The knobs users turn, one frozen value per run: a field per declared setting.",
    },
)


def check_counts(values: Any) -> None:
    """Every count at or above its least: the first too low is one line."""
    for s in SETTINGS.values():
        value = getattr(values, s.name)
        if s.minimum is not None and value is not None and value < s.minimum:
            raise IobenchError(f"{s.option} must be >= {s.minimum}, got {value}")


def check_workers(values: Any) -> None:
    """A setting that counts or keeps worker processes, given without any; one torch's DataLoader lacks."""
    for s in SETTINGS.values():
        value = getattr(values, s.name)
        if s.needs_workers and s.is_set(value) and not values.num_workers:
            raise IobenchError(f"{s.shown(value) if s.kind is bool else s.option} needs --num-workers > 0")
    missing = [s for s in SETTINGS.values() if s.dataloader and s.is_set(getattr(values, s.name))]
    if missing:
        import inspect

        import torch
        from torch.utils.data import DataLoader

        known = inspect.signature(DataLoader).parameters
        for s in missing:
            if s.dataloader not in known:
                raise IobenchError(
                    f"{s.shown(getattr(values, s.name))} needs a torch whose DataLoader has "
                    f"{s.dataloader} (this is {torch.__version__})"
                )


def refused(values: Any, honours: Iterable[str], loader: str, notes: dict[str, str]) -> str | None:
    """The first setting the run sets that the loader does not honour, as one line; None if it takes them all."""
    for s in SETTINGS.values():
        value = getattr(values, s.name)
        if s.name not in honours and s.refused_elsewhere and s.is_set(value):
            note = notes.get(s.name)
            return f"--loader {loader} does not take {s.shown(value)}" + (f": {note}" if note else "")
    return None


def dataloader_arguments(values: Any) -> dict[str, Any]:
    """torch's DataLoader keywords of these settings, once for every caller (the DataLoader loader, a format's
    own pipeline, a user's Dataset, tune's pasted scripts): those that count or keep workers only with workers
    and when set, pinning as a bool."""
    out: dict[str, Any] = {}
    for name in ordered(ARGUMENT_ORDER):
        if not SETTINGS[name].dataloader:
            continue
        s = SETTINGS[name]
        value = getattr(values, name)
        if s.needs_workers and (not values.num_workers or not s.is_set(value)):
            continue
        out[s.dataloader] = bool(value) if s.kind is bool else value
    return out


def read_back(loader: Any) -> dict[str, Any]:
    """The settings a DataLoader built elsewhere has (a user's own), by its keywords: those that need workers at
    their defaults without any, those its torch lacks left out."""
    out = {}
    for s in SETTINGS.values():
        if s.dataloader and hasattr(loader, s.dataloader):
            value = getattr(loader, s.dataloader)
            out[s.name] = value if loader.num_workers or not s.needs_workers else s.default
    return out


def settings_parts(values: Any) -> list[str]:
    """A run's settings in a few characters each (bs=1024 w=0 pf=4 pin ...), as tables name a configuration."""
    shown = (SETTINGS[name].label(getattr(values, name)) for name in ordered(LABEL_ORDER))
    return [p for p in shown if p]


def command_flags(values: Any, cuda: bool) -> list[str]:
    """The options `iobench run` needs to measure these settings again beyond --batch-size and --num-workers: the
    ones not at what their default comes to on this device."""
    names = [n for n in ordered(COMMAND_ORDER) if n not in LABEL_ORDER[:2]]
    out: list[str] = []
    for name in names:
        s, value = SETTINGS[name], getattr(values, name)
        # pinning: on is said; off only where the device would pin by default
        changed = (bool(value) or (cuda and value is False)) if s.auto_cuda else value != s.default
        if changed:
            out += s.shown(value).split(" ", 1)
    return out


def held_fixed(values: Any) -> str:
    """What a settings heatmap holds fixed beside its axes and panels, as its title says it."""
    return (
        f"fetch {values.fetch} x{values.fetch_threads}, persistent {values.persistent_workers}, "
        f"in order {values.in_order}"
    )


def batches_ahead(values: Any) -> int:
    """Batches each reader keeps loaded ahead: --prefetch-factor, torch's default 2 without one."""
    return values.prefetch_factor or 2


def batches_in_flight(values: Any) -> int:
    """The batches a run keeps loaded ahead at most: each reader's prefetch (torch's 2 by default), plus two."""
    return max(1, values.num_workers) * batches_ahead(values) + 2


def pinning_for(pin: bool | None, cuda: bool) -> bool:
    """--pin-memory decided for the device: on with CUDA unless turned off; asked for without CUDA, refused."""
    if pin and not cuda:
        raise IobenchError("--pin-memory needs a CUDA device (pinned memory speeds host-to-GPU copies)")
    return cuda if pin is None else pin


def loading(values: Any, threads: bool) -> str:
    """What loads, as tune's table says it: '2 processes' (workers, or the main process), '2 threads' (`threads`:
    a loader whose workers are threads), '2 processes x 16 threads' (threads inside each worker)."""
    n = max(1, values.num_workers)
    if threads:
        return f"{n} thread{'s' * (n > 1)}"
    inside = getattr(values, "fetch_threads", 1)
    return f"{n} process{'es' * (n > 1)}" + (f" x {inside} threads" if inside > 1 else "")


def swept() -> list[Setting]:
    """The settings sweep takes a comma list of."""
    return [s for s in SETTINGS.values() if s.sweep]


def check_batch_fetch(values: Any, what: str) -> None:
    """`what` hands over a batch's files in one call: whole batches fetched by one thread (not a sample per call,
    nor a batch shared by --fetch-threads)."""
    from iobench.errors import IobenchError

    if values.fetch is Fetch.ITEM:
        raise IobenchError(f"{what} hands over a batch's files in one call: use --fetch batch")
    if values.fetch_threads > 1:
        raise IobenchError(f"{what} reads a batch's files in one call: drop --fetch-threads")
