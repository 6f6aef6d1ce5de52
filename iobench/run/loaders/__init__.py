"""The loader registry: which loader reads which format, what it needs installed, how to build one."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import torch

from iobench.choices import Choice
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader
from iobench.run.loaders.base import Loader, LoaderSettings
from iobench.run.loaders.order import DistributedSamplerOrder, EpochOrder
from iobench.run.transforms import Transform


class LoaderName(Choice):
    DATALOADER = "dataloader"
    TENSORCLASS = "tensorclass"
    GPU_RESIDENT = "gpu-resident"
    RAY = "ray"
    DIRECT = "direct"


@dataclass(frozen=True)
class LoaderKind:
    """A loader: the formats it reads, its class (imported when built), an optional extra it needs."""

    name: LoaderName
    reads: tuple[str, ...]
    module: str
    cls: str
    extra: str | None = None  # the pip extra (and module) it needs; `all` leaves such loaders out


LOADERS: dict[LoaderName, LoaderKind] = {
    k.name: k
    for k in (
        LoaderKind(LoaderName.DATALOADER, tuple(FORMATS), "dataloader", "DataLoaderLoader"),
        # tensorclass loading is tensordict's memmap path.
        LoaderKind(LoaderName.TENSORCLASS, ("memmap",), "tensorclass", "TensorclassLoader"),
        LoaderKind(LoaderName.GPU_RESIDENT, tuple(FORMATS), "resident", "ResidentLoader"),
        LoaderKind(LoaderName.RAY, tuple(FORMATS), "ray_actors", "RayLoader", extra="ray"),
        # concurrent preadv straight into buffers: formats whose samples lie at known offsets
        LoaderKind(LoaderName.DIRECT, ("npy", "memmap"), "direct", "DirectLoader"),
    )
}
CORE_LOADERS = tuple(k.name for k in LOADERS.values() if k.extra is None)


def check_reads(loader: LoaderName, fmt: str) -> None:
    if fmt not in LOADERS[loader].reads:
        raise unreadable(fmt, loader)


def unreadable(fmt: str, loader: LoaderName) -> IobenchError:
    return IobenchError(f"--loader {loader} does not read --format {fmt}; it reads {', '.join(LOADERS[loader].reads)}")


def make_loader(
    name: LoaderName,
    reader: FormatReader,
    order: EpochOrder | DistributedSamplerOrder,
    settings: LoaderSettings,
    device: torch.device,
    format_options: dict,
    transform: Transform | None = None,
    cold: bool = False,
) -> Loader:
    """Build the named loader over a format reader (with the prefetch thread around it when asked);
    a host transform runs per sample where the loader reads (dataloader, tensorclass, ray); `cold`
    (every epoch starts uncached) lets the direct loader bypass the page cache."""
    kind = LOADERS[name]
    cls = getattr(importlib.import_module(f"{__name__}.{kind.module}"), kind.cls)
    extra = (reader_format(reader), format_options) if name is LoaderName.RAY else ()
    keywords: dict[str, Any] = {"transform": transform} if transform is not None else {}  # only these take one
    if name is LoaderName.DIRECT:
        keywords["cold"] = cold
    loader: Loader = cls(reader, order, settings, device, *extra, **keywords)
    if settings.prefetch_thread:
        from iobench.run.loaders.prefetch import PrefetchThread

        loader = PrefetchThread(loader, settings.prefetch_thread)
    return loader


def reader_format(reader: FormatReader) -> str:
    """The registered name of the format a reader reads (Ray actors rebuild the reader by name)."""
    for name, fmt in FORMATS.items():
        if isinstance(reader, fmt.reader_type):
            return name
    raise IobenchError(f"{type(reader).__name__} is not a registered format's reader")
