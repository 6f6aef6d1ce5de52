"""The loader registry: which loader reads which format, what it needs installed, which settings it honours
and what tune searches of it (`factory` builds one). Light on purpose: the command line lists loaders without
importing torch."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from iobench.choices import Choice
from iobench.errors import IobenchError
from iobench.formats import FIXED_LAYOUT, FORMATS, PIPELINE
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
    extra: str | None = None  # the pip extra (and module) it needs; `all` leaves such loaders out
    library: str | None = None  # the extra's library by name, for the line that refuses it when missing
    needs: str | None = None  # a capability a format must declare to be read (formats.PIPELINE, FIXED_LAYOUT)
    libraries: tuple[str, ...] = ()  # what it reads with beyond torch (distribution names), for records
    forks: bool = True  # --num-workers are processes forked from this one (False: threads of this process)
    # True: it builds its readers from the format's name and options where it reads (Ray's actors), not through the
    # reader it is given
    own_readers: bool = False
    # True: it measures the dataset held in the device's memory (on the CPU: in RAM), not a way from storage
    in_device_memory: bool = False
    needs_cuda: bool = False  # it reads into device memory: refused in one line without CUDA, left out of `all` there
    # under torchrun, how its ranks share an epoch: "sampler" (torch's DistributedSampler, whose tail
    # --distributed-sampler sets), "library" (the format's own pipeline splits it), "share" (a contiguous share of
    # the shared order), "" (one training process fed by a cluster: refused under torchrun)
    ranks: str = "share"
    # how it reaches object storage: "reader" (the format's reader of objects, else a FUSE mount), "library" (the
    # format's own pipeline's client, else a FUSE mount), "" (not at all)
    objects: str = ""
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
            return importlib.util.find_spec(self.extra) is not None
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

LOADERS: dict[LoaderName, LoaderKind] = {
    k.name: k
    for k in (
        LoaderKind(
            LoaderName.DATALOADER, None, "dataloader", "DataLoaderLoader",
            honours=BATCHES | WORKER_PROCESSES | {"fetch", "fetch_threads", "decode_on"},
            tuned=("prefetch_factor", "persistent_workers", "in_order", "pin_memory"),
            tuned_remote=("fetch_threads", "pin_memory"), tune_main_threads=True, ranks="sampler", objects="reader",
        ),
        # tensorclass loading is tensordict's memmap path.
        LoaderKind(
            LoaderName.TENSORCLASS, ("memmap",), "tensorclass", "TensorclassLoader",
            honours=BATCHES | WORKER_PROCESSES | {"readahead_mb"}, libraries=("tensordict",),
            tuned=("prefetch_factor", "persistent_workers", "pin_memory"), tune_main_threads=True,
        ),
        LoaderKind(
            LoaderName.GPU_RESIDENT, None, "resident", "ResidentLoader", honours=BATCHES,
            notes=(("num_workers", "it reads the dataset once; --num-workers does not apply"),),
            raw_batches="already on the device", in_device_memory=True,
        ),
        LoaderKind(
            LoaderName.RAY, None, "ray_actors", "RayLoader",
            honours=BATCHES | {"num_workers", "prefetch_factor", "ray_address"},
            notes=(("num_workers", "--num-workers is the number of Ray actors; give at least 1"),
                   ("persistent_workers", "actors live as long as the loader"),
                   ("in_order", "actors' batches are taken in order")),
            min_workers=1, extra="ray", library="Ray", libraries=("ray",), own_readers=True, ranks="",
            reads_beside_step=True,
        ),
        # concurrent preadv straight into buffers: formats whose samples lie at known offsets
        LoaderKind(
            LoaderName.DIRECT, None, "direct", "DirectLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers"},
            notes=tuple((name, "--num-workers is its reads in flight (0: 32) and it reads two batches ahead into "
                         "its own buffers") for name in ("prefetch_factor", "persistent_workers", "in_order",
                                                         "prefetch_thread")),
            raw_batches="the reference for the hardware", needs=FIXED_LAYOUT, cold_direct=True,
        ),
        # the whole dataset read once in large sequential reads, every batch then gathered in memory
        LoaderKind(
            LoaderName.PRELOAD, None, "preload", "PreloadLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers"},
            notes=tuple((name, "--num-workers is its read threads (0: 4); it reads the files once, then gathers "
                         "batches in memory") for name in ("prefetch_factor", "persistent_workers", "in_order",
                                                           "prefetch_thread")),
            raw_batches="gathered from the rows it holds", needs=FIXED_LAYOUT,
        ),
        # the features file read by cuFile straight into device memory, every batch then gathered there
        LoaderKind(
            LoaderName.DEVICE_READ, None, "device_read", "DeviceReadLoader", honours=BATCHES - {"prefetch_thread"},
            notes=(("num_workers", "cuFile reads the file in one call (kvikio's own threads); --num-workers does not "
                    "apply"), ("prefetch_thread", "it reads the dataset once, then gathers batches on the device")),
            raw_batches="already on the device", needs=FIXED_LAYOUT, needs_cuda=True,
        ),
        # NVIDIA DALI's image pipeline: its file reader, decoder ("mixed": nvJPEG after the copy) and crop
        LoaderKind(
            LoaderName.DALI, ("files",), "dali", "DaliLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers", "prefetch_factor"},
            notes=(("num_workers", "--num-workers is DALI's num_threads (0: 1)"),
                   ("prefetch_thread", "DALI prefetches (--prefetch-factor is its prefetch_queue_depth)")),
            raw_batches="DALI's own pipeline decodes and crops", extra="nvidia.dali", library="NVIDIA DALI",
            libraries=("nvidia-dali-cuda130",), forks=False, check="dali_refusal",
        ),
        # the format's own library pipeline (WebDataset's shard shuffle and buffer, ...)
        LoaderKind(
            LoaderName.NATIVE, None, "native", "NativeLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers", "in_order"},
            notes=(("persistent_workers", "its pipeline is built again each epoch"),
                   ("in_order", "its library's loader delivers batches as its pipeline orders them")),
            needs=PIPELINE, tuned=("prefetch_factor", "pin_memory"), tuned_remote=("prefetch_factor", "pin_memory"),
            ranks="library", objects="library",
        ),
        # torchdata.nodes: threads of this process instead of worker processes, over any format
        LoaderKind(
            LoaderName.NODES, None, "nodes", "NodesLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers"} | {"fetch", "decode_on"},
            notes=(("persistent_workers", "--num-workers are threads of this process"),
                   ("fetch_threads", "--num-workers are its threads")),
            extra="torchdata", library="torchdata", libraries=("torchdata",), forks=False,
            tuned=("prefetch_factor", "in_order", "pin_memory"), tuned_remote=("pin_memory", "fetch"),
            objects="reader",
        ),
        # SPDL: a pipeline of stages on a thread pool of this process, as its documentation builds one
        LoaderKind(
            LoaderName.SPDL, None, "spdl_pipeline", "SpdlLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers"} | {"fetch", "decode_on"},
            notes=(("persistent_workers", "--num-workers is its concurrency, threads of this process"),
                   ("fetch_threads", "--num-workers is its concurrency")),
            extra="spdl", library="spdl", libraries=("spdl-core", "spdl-io"), forks=False,
            tuned=("prefetch_factor", "in_order", "pin_memory"),
        ),
        # Ray Data: map_batches on an actor pool of the cluster, iter_torch_batches into this process
        LoaderKind(
            LoaderName.RAY_DATA, None, "ray_data", "RayDataLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers", "prefetch_factor", "in_order", "ray_address"},
            notes=(("num_workers", "--num-workers is the size of its actor pool; give at least 1"),
                   ("persistent_workers", "its actor pool lives as long as an epoch's execution"),
                   ("prefetch_thread", "iter_torch_batches already prefetches (--prefetch-factor)")),
            min_workers=1, extra="ray", library="Ray", libraries=("ray",), own_readers=True, ranks="",
            reads_beside_step=True,
        ),
    )
}  # fmt: skip
DEFAULT_LOADER = LoaderName.DATALOADER
CORE_LOADERS = tuple(k.name for k in LOADERS.values() if k.extra is None)


def check_reads(loader: LoaderName, fmt: str) -> None:
    if fmt not in LOADERS[loader].reads:
        raise unreadable(fmt, loader)


def unreadable(fmt: str, loader: LoaderName) -> IobenchError:
    return IobenchError(f"--loader {loader} does not read --format {fmt}; it reads {', '.join(LOADERS[loader].reads)}")


def kind_of(name: str) -> LoaderKind | None:
    """A record's loader (a string, as stored) as its registered kind; None for a name this release lacks."""
    try:
        return LOADERS[LoaderName(name)]
    except ValueError:
        return None
