"""The loader registry: which loader reads which format, what it needs installed, which settings it honours
and what tune searches of it (`factory` builds one). Light on purpose: the command line lists loaders without
importing torch."""

from __future__ import annotations

from iobench.errors import IobenchError
from iobench.formats import FIXED_LAYOUT, PIPELINE
from iobench.loaders.kind import BATCHES, NOTES, WORKER_PROCESSES, LoaderKind, LoaderName, ObjectReach, RankShare

LOADERS: dict[LoaderName, LoaderKind] = {
    k.name: k
    for k in (
        LoaderKind(
            LoaderName.DATALOADER,
            None,
            "dataloader",
            "DataLoaderLoader",
            honours=BATCHES | WORKER_PROCESSES | {"fetch", "fetch_threads", "decode_on"},
            tuned=("prefetch_factor", "persistent_workers", "in_order", "pin_memory"),
            tuned_remote=("fetch_threads", "pin_memory"),
            tune_main_threads=True,
            ranks=RankShare.SAMPLER,
            objects=ObjectReach.READER,
        ),
        # tensorclass loading is tensordict's memmap path.
        LoaderKind(
            LoaderName.TENSORCLASS,
            ("memmap",),
            "tensorclass",
            "TensorclassLoader",
            honours=BATCHES | WORKER_PROCESSES | {"readahead_mb"},
            libraries=("tensordict",),
            tuned=("prefetch_factor", "persistent_workers", "pin_memory"),
            tune_main_threads=True,
        ),
        LoaderKind(
            LoaderName.GPU_RESIDENT,
            None,
            "resident",
            "ResidentLoader",
            honours=BATCHES,
            notes=(("num_workers", "it reads the dataset once; --num-workers does not apply"),),
            raw_batches="already on the device",
            in_device_memory=True,
        ),
        LoaderKind(
            LoaderName.RAY,
            None,
            "ray_actors",
            "RayLoader",
            honours=BATCHES | {"num_workers", "prefetch_factor", "ray_address"},
            notes=(
                ("num_workers", "--num-workers is the number of Ray actors; give at least 1"),
                ("persistent_workers", "actors live as long as the loader"),
                ("in_order", "actors' batches are taken in order"),
            ),
            min_workers=1,
            extra="ray",
            library="Ray",
            libraries=("ray",),
            own_readers=True,
            ranks=RankShare.NONE,
            reads_beside_step=True,
        ),
        # concurrent preadv straight into buffers: formats whose samples lie at known offsets
        LoaderKind(
            LoaderName.DIRECT,
            None,
            "direct",
            "DirectLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers"},
            notes=tuple(
                (
                    name,
                    "--num-workers is its reads in flight (0: 32) and it reads two batches ahead into its own buffers",
                )
                for name in ("prefetch_factor", "persistent_workers", "in_order", "prefetch_thread")
            ),
            raw_batches="the reference for the hardware",
            needs=FIXED_LAYOUT,
            cold_direct=True,
        ),
        # the whole dataset read once in large sequential reads, every batch then gathered in memory
        LoaderKind(
            LoaderName.PRELOAD,
            None,
            "preload",
            "PreloadLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers"},
            notes=tuple(
                (
                    name,
                    "--num-workers is its read threads (0: 4); it reads the files once, then gathers batches in memory",
                )
                for name in ("prefetch_factor", "persistent_workers", "in_order", "prefetch_thread")
            ),
            raw_batches="gathered from the rows it holds",
            needs=FIXED_LAYOUT,
            holds_dataset=True,
        ),
        # the features file read by cuFile straight into device memory, every batch then gathered there
        LoaderKind(
            LoaderName.DEVICE_READ,
            None,
            "device_read",
            "DeviceReadLoader",
            honours=BATCHES - {"prefetch_thread"},
            notes=(
                (
                    "num_workers",
                    "cuFile reads the file in one call (kvikio's own threads); --num-workers does not apply",
                ),
                ("prefetch_thread", "it reads the dataset once, then gathers batches on the device"),
            ),
            raw_batches="already on the device",
            needs=FIXED_LAYOUT,
            needs_cuda=True,
            holds_dataset=True,
        ),
        # NVIDIA DALI's image pipeline: its file reader, decoder ("mixed": nvJPEG after the copy) and crop
        LoaderKind(
            LoaderName.DALI,
            ("files",),
            "dali",
            "DaliLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers", "prefetch_factor"},
            notes=(
                ("num_workers", "--num-workers is DALI's num_threads (0: 1)"),
                ("prefetch_thread", "DALI prefetches (--prefetch-factor is its prefetch_queue_depth)"),
            ),
            raw_batches="DALI's own pipeline decodes and crops",
            extra="dali",
            imports="nvidia.dali",
            library="NVIDIA DALI",
            libraries=("nvidia-dali-cuda130",),
            forks=False,
            check="dali_refusal",
        ),
        # the format's own library pipeline (WebDataset's shard shuffle and buffer, ...)
        LoaderKind(
            LoaderName.NATIVE,
            None,
            "native",
            "NativeLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers", "in_order"},
            notes=(
                ("persistent_workers", "its pipeline is built again each epoch"),
                ("in_order", "its library's loader delivers batches as its pipeline orders them"),
            ),
            needs=PIPELINE,
            tuned=("prefetch_factor", "pin_memory"),
            tuned_remote=("prefetch_factor", "pin_memory"),
            ranks=RankShare.LIBRARY,
            objects=ObjectReach.LIBRARY,
        ),
        # torchdata.nodes: threads of this process instead of worker processes, over any format
        LoaderKind(
            LoaderName.NODES,
            None,
            "nodes",
            "NodesLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers"} | {"fetch", "decode_on"},
            notes=(
                ("persistent_workers", "--num-workers are threads of this process"),
                ("fetch_threads", "--num-workers are its threads"),
            ),
            extra="torchdata",
            library="torchdata",
            libraries=("torchdata",),
            forks=False,
            tuned=("prefetch_factor", "in_order", "pin_memory"),
            tuned_remote=("pin_memory", "fetch"),
            objects=ObjectReach.READER,
        ),
        # SPDL: a pipeline of stages on a thread pool of this process, as its documentation builds one
        LoaderKind(
            LoaderName.SPDL,
            None,
            "spdl_pipeline",
            "SpdlLoader",
            honours=BATCHES | WORKER_PROCESSES - {"persistent_workers"} | {"fetch", "decode_on"},
            notes=(
                ("persistent_workers", "--num-workers is its concurrency, threads of this process"),
                ("fetch_threads", "--num-workers is its concurrency"),
            ),
            extra="spdl",
            library="spdl",
            libraries=("spdl-core", "spdl-io"),
            forks=False,
            tuned=("prefetch_factor", "in_order", "pin_memory"),
        ),
        # Ray Data: map_batches on an actor pool of the cluster, iter_torch_batches into this process
        LoaderKind(
            LoaderName.RAY_DATA,
            None,
            "ray_data",
            "RayDataLoader",
            honours=BATCHES - {"prefetch_thread"} | {"num_workers", "prefetch_factor", "in_order", "ray_address"},
            notes=(
                ("num_workers", "--num-workers is the size of its actor pool; give at least 1"),
                ("persistent_workers", "its actor pool lives as long as an epoch's execution"),
                ("prefetch_thread", "iter_torch_batches already prefetches (--prefetch-factor)"),
            ),
            min_workers=1,
            extra="ray",
            library="Ray",
            libraries=("ray",),
            own_readers=True,
            ranks=RankShare.NONE,
            reads_beside_step=True,
        ),
    )
}
DEFAULT_LOADER = LoaderName.DATALOADER
CORE_LOADERS = tuple(k.name for k in LOADERS.values() if k.extra is None)


def check_reads(loader: LoaderName, fmt: str) -> None:
    if fmt not in LOADERS[loader].reads:
        raise unreadable(fmt, loader)


def unreadable(fmt: str, loader: LoaderName) -> IobenchError:
    return IobenchError(f"--loader {loader} does not read --format {fmt}; it reads {', '.join(LOADERS[loader].reads)}")


def check_installed(loader: LoaderName) -> None:
    """A loader whose extra is missing, refused in one line naming the extra (found, not imported: no torch yet)."""
    kind = LOADERS[loader]
    if not kind.installed:
        raise IobenchError(f"--loader {loader} needs {kind.library}: pip install 'iobench[{kind.extra}]'")


def kind_of(name: str) -> LoaderKind | None:
    """A record's loader (a string, as stored) as its registered kind; None for a name this release lacks."""
    try:
        return LOADERS[LoaderName(name)]
    except ValueError:
        return None


__all__ = [
    "BATCHES",
    "CORE_LOADERS",
    "DEFAULT_LOADER",
    "LOADERS",
    "NOTES",
    "WORKER_PROCESSES",
    "LoaderKind",
    "LoaderName",
    "ObjectReach",
    "RankShare",
    "check_installed",
    "check_reads",
    "kind_of",
    "unreadable",
]
