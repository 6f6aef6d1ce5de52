"""What a loader is, as the registry (`iobench.loaders.LOADERS`) declares it: its name, the formats it reads, the
settings it honours and its capabilities, which the rest of iobench reads instead of comparing loader names."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from iobench.choices import Choice
from iobench.formats import FORMATS, PIPELINE
from iobench.settings import refused


class LoaderName(Choice):
    DATALOADER = "dataloader"
    TENSORCLASS = "tensorclass"
    GPU_RESIDENT = "gpu-resident"
    RAY = "ray"
    DIRECT = "direct"
    NATIVE = "native"
    NODES = "nodes"
    SPDL = "spdl"
    RAY_DATA = "ray-data"
    PRELOAD = "preload"
    DEVICE_READ = "device-read"
    DALI = "dali"


# What every loader takes: the batch and how it moves to the device. The rest a loader declares as it honours it.
BATCHES = frozenset({"batch_size", "pin_memory", "non_blocking", "prefetch_thread"})
WORKER_PROCESSES = frozenset({"num_workers", "prefetch_factor", "persistent_workers", "in_order"})


class RankShare(Choice):
    """Under torchrun, how a loader's ranks share an epoch."""

    SAMPLER = "sampler"  # torch's DistributedSampler, whose tail --distributed-sampler sets
    LIBRARY = "library"  # the format's own pipeline splits it
    SHARE = "share"  # a contiguous share of the shared order
    NONE = "none"  # one training process fed by a cluster: refused under torchrun


class ObjectReach(Choice):
    """How a loader reaches object storage."""

    READER = "reader"  # the format's reader of objects, else a FUSE mount
    LIBRARY = "library"  # the format's own pipeline's client, else a FUSE mount
    NONE = "none"  # not at all


@dataclass(frozen=True)
class LoaderKind:
    """A loader: the formats it reads, its class (imported when built), an optional extra it needs, and the
    settings it honours (`iobench.settings`): a run that sets one it does not is refused, with the loader's note
    on that setting."""

    name: LoaderName
    only: tuple[str, ...] | None  # the formats it reads; None: every registered one, plug-ins included
    module: str
    cls: str
    honours: frozenset[str] = BATCHES | WORKER_PROCESSES
    notes: tuple[tuple[str, str], ...] = ()  # (setting, why this loader does not take it)
    min_workers: int = 0  # the least --num-workers it runs with
    raw_batches: str = ""  # why it hands over batches as read, so a host transform cannot run in it ("": it can)
    extra: str | None = None  # the pip extra it needs (pyproject's optional-dependencies); `all` leaves it out
    library: str | None = None  # the extra's library by name, for the line that refuses it when missing
    imports: str | None = None  # the module that says the extra is installed, where it is not named as the extra
    needs: str | None = None  # a capability a format must declare to be read (formats.PIPELINE, FIXED_LAYOUT)
    libraries: tuple[str, ...] = ()  # what it reads with beyond torch (distribution names), for records
    forks: bool = True  # --num-workers are processes forked from this one (False: threads of this process)
    # True: it builds its readers from the format's name and options where it reads (Ray's actors), not through the
    # reader it is given
    own_readers: bool = False
    # True: it measures the dataset held in the device's memory (on the CPU: in RAM), not a way from storage
    in_device_memory: bool = False
    # True: it reads the whole dataset into memory once, then gathers every batch there (preload, device-read)
    holds_dataset: bool = False
    needs_cuda: bool = False  # it reads into device memory: refused in one line without CUDA, left out of `all` there
    ranks: RankShare = RankShare.SHARE  # under torchrun, how its ranks share an epoch
    objects: ObjectReach = ObjectReach.NONE  # how it reaches object storage
    reads_beside_step: bool = False  # it reads while the step runs even with no workers or prefetch thread (Ray's)
    cold_direct: bool = False  # cold epochs bypass the page cache with O_DIRECT (read_method says when they could not)
    check: str | None = None  # a function of its module that refuses a dataset it cannot read, before it is opened
    # tune's search: the settings it tries of this loader, in this order (on local files, against object storage),
    # and whether with no workers it tries one torch thread (loading in this process, they compete for the cores)
    tuned: tuple[str, ...] = ()
    tuned_remote: tuple[str, ...] = ()
    tune_main_threads: bool = False

    @property
    def installed(self) -> bool:
        """Whether what it needs can be imported (found, not imported: listing stays light)."""
        if self.extra is None:
            return True
        try:  # a dotted name (nvidia.dali) whose parent package is missing raises instead of answering None
            return importlib.util.find_spec(self.imports or self.extra) is not None
        except ModuleNotFoundError:
            return False

    @property
    def own_pipeline(self) -> bool:
        """It reads through each format's own library pipeline (what --format-option's read options set)."""
        return self.needs == PIPELINE

    def dataset_refusal(self, spec: Any, options: Any) -> str | None:
        """Why it cannot read this prepared dataset (DALI: files of images only), from its module's `check`;
        None if it can or it does not say."""
        if self.check is None:
            return None
        import importlib

        return getattr(importlib.import_module(f"iobench.loaders.{self.module}"), self.check)(spec, options)

    @property
    def reads(self) -> tuple[str, ...]:
        named = tuple(FORMATS) if self.only is None else self.only
        return named if self.needs is None else tuple(n for n in named if FORMATS.capable(n, self.needs))

    def refusal(self, settings: Any) -> str | None:
        """Why this loader cannot run these settings, in one line; None if it can."""
        notes = {**NOTES, **dict(self.notes)}
        if settings.num_workers < self.min_workers:
            return f"--loader {self.name}: {notes['num_workers']}"
        return refused(settings, self.honours, self.name.value, notes)


# Why a loader does not take a setting, unless its declaration says otherwise
NOTES = {
    "fetch_threads": "it shares each batch among threads inside each DataLoader worker (--loader dataloader)",
    "fetch": "item is the DataLoader's per-sample pattern; this loader always fetches whole batches",
    "ray_address": "it is the Ray cluster of --loader ray and ray-data",
    "decode_on": "it does not hand a batch's files over undecoded (--loader dataloader, nodes and spdl do)",
}
