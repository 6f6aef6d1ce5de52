"""A format's own library pipeline (`--loader native`): WebDataset's shard shuffle and buffer, and so on.

The format declares the pipeline (`StorageFormat.pipeline`: its dataset, the library's loader class, how its
batches read); this module puts it in that loader with the run's settings, once for every format. The
library decides the order, so every batch carries its samples' indices (the keys the writer stored) and the
loader keeps them: the delivered order is scored as delivered.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError, RunFailed, reason
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader, NativeRead, Pipeline, StorageFormat
from iobench.loaders.base import Loader, LoaderContext, Resumable
from iobench.loaders.dataloader import Carrying, carried_order, stateful_dataloader
from iobench.settings import dataloader_arguments


def format_of(name: str) -> StorageFormat:
    """The registered format `name` when it declares its library's pipeline; else a one-line refusal."""
    if name not in FORMATS or not FORMATS[name].has_pipeline:
        raise IobenchError(f"format {name!r} has no pipeline of its own library (--loader native)")
    return FORMATS[name]


def native_read(
    batch_size: int,
    shuffle: bool,
    seed: int,
    epoch: int,
    num_workers: int,
    transform: Any,
    rank: int = 0,
    world: int = 1,
) -> NativeRead:
    """One epoch's request: a new shuffle each epoch, the same for the same seed (on every rank, so that
    the library's split of it between ranks leaves none out)."""
    return NativeRead(batch_size, shuffle, seed * 1_000_003 + epoch, num_workers, transform, rank, world)


def epoch_batches(
    fmt: StorageFormat,
    reader: FormatReader,
    read: NativeRead,
    keywords: dict[str, Any],
    pipeline: Pipeline | None = None,
) -> Iterator[Any]:
    """The format's pipeline (built here unless given) in its library's loader with the run's keywords: (features,
    labels, indices) batches; what the pipeline holds open is released when the epoch ends or is cut short."""
    pipeline = fmt.pipeline(reader, read) if pipeline is None else pipeline
    return iterate(pipeline, library_loader(pipeline, read, keywords))


def iterate(pipeline: Pipeline, loader: Any) -> Iterator[Any]:
    """The library's loader iterated over the pipeline, which is released when the epoch ends or is cut short (or
    when its iterator cannot start)."""
    try:
        batches = iter(loader)  # workers start here, with what the pipeline opened
    except BaseException:
        _release_pipeline(pipeline)
        raise
    return _delivered(batches, pipeline)


def library_loader(p: Pipeline, read: NativeRead, keywords: dict[str, Any], stateful: bool = False) -> Any:
    """The pipeline's loader: its library's class, or torch's DataLoader (`stateful`: torchdata's StatefulDataLoader,
    which checkpoints a map-style or stateful iterable dataset, where installed) with the run's keywords."""
    arguments: dict[str, Any] = {"batch_size": p.batch_size, **keywords}
    if p.shuffle:
        arguments["shuffle"] = True
    if p.collate_fn is not None:
        arguments["collate_fn"] = p.collate_fn
    if p.seeded:
        arguments["generator"] = torch.Generator().manual_seed(read.seed)
    cls = p.loader_class or (stateful_dataloader() if stateful else None) or torch.utils.data.DataLoader
    return cls(p.dataset, **arguments)


def _delivered(batches: Iterator[Any], p: Pipeline) -> Iterator[Any]:
    try:
        yield from batches if p.as_batch is None else map(p.as_batch, batches)
    finally:  # the epoch's end, or an epoch cut short
        _release_pipeline(p)


def _release_pipeline(p: Pipeline) -> None:
    if p.release is not None:
        p.release()


# What the epoch's clock words itself (a worker that died among them); anything else a library raises on a
# dataset it cannot read (protobuf's DecodeError, struct.error, a TypeError deep inside) is one line here.
WORDED_BY_THE_RUNNER = (RuntimeError, OSError, EOFError, ValueError, KeyError, IndexError)


def _library(batches: Iterator[Any], name: str) -> Iterator[Any]:
    try:
        yield from batches
    except WORDED_BY_THE_RUNNER:
        raise
    except Exception as exc:  # the library's own failure, on data it was handed
        raise RunFailed(f"{name}'s own pipeline failed: {reason(exc)}") from None


class NativeLoader(Resumable, Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, transform = ctx.reader, ctx.transform
        super().__init__(ctx.order, ctx.settings, ctx.device)
        self.reader, self.transform = reader, transform
        self.format = format_of(ctx.format_name)
        self._carried: list[torch.Tensor] = []
        self._prepared: tuple[int, Pipeline] | None = None
        self.stateful = ctx.stateful
        self._loader: Any = None

    def _read(self, epoch: int) -> NativeRead:
        o = self.order
        return native_read(
            self.settings.batch_size,
            o.shuffle,
            o.seed,
            epoch,
            self.settings.num_workers,
            self.transform,
            o.rank,
            o.world,
        )

    def prepare(self, epoch: int) -> None:
        """The epoch's pipeline built before the clock, as its user's script builds it before the loop (LitData's
        `StreamingDataset` fetching its index, `load_dataset` resolving and opening its files): the epoch times
        the iteration, as the library's own loop does."""
        self._release_prepared()
        self._prepared = (epoch, self.format.pipeline(self.reader, self._read(epoch)))

    def _release_prepared(self) -> None:
        if self._prepared is not None:
            _release_pipeline(self._prepared[1])
            self._prepared = None

    def _batches(self, epoch: int) -> Iterator[Any]:
        self._carried = []
        read = self._read(epoch)
        if self._prepared is not None and self._prepared[0] == epoch:
            pipeline, self._prepared = self._prepared[1], None
        else:
            pipeline = self.format.pipeline(self.reader, read)
        try:
            self._loader = self._restored(
                library_loader(pipeline, read, dataloader_arguments(self.settings), self.stateful)
            )
        except BaseException:
            _release_pipeline(pipeline)
            raise
        batches = _library(iterate(pipeline, self._loader), self.format.name)
        if self.order.max_batches is not None:
            batches = itertools.islice(batches, self.order.max_batches)
        return Carrying(batches, self._carried)

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return carried_order(self._carried, samples)

    def state_dict(self) -> dict[str, Any] | None:
        """The library loader's (LitData's StreamingDataLoader; StatefulDataLoader for a pipeline in torch's); None
        where it has no state (WebDataset's WebLoader, TFRecord's, ...)."""
        return self._loader.state_dict() if self.stateful and hasattr(self._loader, "state_dict") else None

    def _release(self) -> None:
        self._release_prepared()
        self.reader.close()
