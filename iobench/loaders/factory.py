"""Building a loader by name over a format reader."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader
from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.base import Loader, LoaderSettings
from iobench.loaders.order import DistributedSamplerOrder, EpochOrder
from iobench.loaders.transforms import Transform


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
    cls = getattr(importlib.import_module(f"iobench.loaders.{kind.module}"), kind.cls)
    extra = (reader_format(reader), format_options) if name is LoaderName.RAY else ()
    keywords: dict[str, Any] = {"transform": transform} if transform is not None else {}  # only these take one
    if name is LoaderName.DIRECT:
        keywords["cold"] = cold
    loader: Loader = cls(reader, order, settings, device, *extra, **keywords)
    if settings.prefetch_thread:
        from iobench.loaders.prefetch import PrefetchThread

        loader = PrefetchThread(loader, settings.prefetch_thread)
    return loader


def reader_format(reader: FormatReader) -> str:
    """The registered name of the format a reader reads (Ray actors rebuild the reader by name)."""
    for name, fmt in FORMATS.items():
        if isinstance(reader, fmt.reader_type):
            return name
    raise IobenchError(f"{type(reader).__name__} is not a registered format's reader")
