"""A format's own library pipeline (`--loader native`): WebDataset's shard shuffle and buffer, and so on.

The library decides the order, so every batch carries its samples' indices (the keys the writer stored)
and the loader keeps them: the delivered order is scored as delivered. Each format module provides
`native_batches(reader, read: NativeRead)`, an iterator of (features, labels, indices).
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError, RunFailed, reason
from iobench.formats.base import FormatReader, NativeRead
from iobench.loaders.base import Loader, LoaderContext, LoaderSettings
from iobench.loaders.dataloader import Carrying, carried_order


def dataloader_keywords(settings: LoaderSettings) -> dict[str, Any]:
    """The run's settings that a library's own DataLoader takes as they are (its pipeline owns the rest)."""
    extra = {"prefetch_factor": settings.prefetch_factor} if settings.num_workers and settings.prefetch_factor else {}
    return {"num_workers": settings.num_workers, "pin_memory": bool(settings.pin_memory), **extra}


def native_pipeline(reader: FormatReader) -> Callable[[FormatReader, NativeRead], Iterator[Any]]:
    """The `native_batches` of the reader's format module, or a one-line refusal."""
    batches = getattr(importlib.import_module(type(reader).__module__), "native_batches", None)
    if batches is None:
        raise IobenchError(f"{type(reader).__module__} has no pipeline of its own library (--loader native)")
    return batches


def native_read(batch_size: int, shuffle: bool, seed: int, epoch: int, keywords: dict[str, Any],
                transform: Any, rank: int = 0, world: int = 1) -> NativeRead:  # fmt: skip
    """One epoch's request: a new shuffle each epoch, the same for the same seed (on every rank, so that
    the library's split of it between ranks leaves none out)."""
    return NativeRead(batch_size, shuffle, seed * 1_000_003 + epoch, keywords, transform, rank, world)


# What the epoch's clock words itself (a worker that died among them); anything else a library raises on a
# dataset it cannot read (protobuf's DecodeError, struct.error, a TypeError deep inside) is one line here.
WORDED_BY_THE_RUNNER = (RuntimeError, OSError, EOFError, ValueError, KeyError, IndexError)


def _library(batches: Iterator[Any], name: str) -> Iterator[Any]:
    try:
        yield from batches
    except WORDED_BY_THE_RUNNER:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's own failure, on data it was handed
        raise RunFailed(f"{name}'s own pipeline failed: {reason(exc)}") from None


class NativeLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, transform = ctx.reader, ctx.transform
        super().__init__(ctx.order, ctx.settings, ctx.device)
        self.reader, self.transform = reader, transform
        self._batches = native_pipeline(reader)
        self._carried: list[torch.Tensor] = []

    def epoch(self, epoch: int) -> Iterator[Any]:
        self._carried = []
        o = self.order
        read = native_read(self.settings.batch_size, o.shuffle, o.seed, epoch, dataloader_keywords(self.settings),
                           self.transform, o.rank, o.world)  # fmt: skip
        batches = _library(self._batches(self.reader, read), type(self.reader).__module__.rpartition(".")[2])
        if self.order.max_batches is not None:
            batches = itertools.islice(batches, self.order.max_batches)
        return Carrying(batches, self._carried)

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return carried_order(self._carried, samples)

    def close(self) -> None:
        self.reader.close()
