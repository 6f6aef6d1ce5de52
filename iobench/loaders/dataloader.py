"""torch.utils.data.DataLoader over any format's reader, fetching per item or per batch."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader
from iobench.loaders.base import Loader, LoaderContext, Resumable
from iobench.loaders.order import EpochOrder, indices_of
from iobench.loaders.threads import FetchThreads
from iobench.loaders.transforms import Transform
from iobench.settings import DecodeOn, Fetch, LoaderSettings, dataloader_arguments


class ReaderDataset(Dataset):
    """Map-style dataset over a format reader; the reader opens its files inside each worker.

    Indexed by an int it returns one sample (the classic pattern, default collate); indexed by an
    array of indices it returns a whole batch read in one call.
    """

    def __init__(
        self,
        reader: FormatReader,
        transform: Transform | None = None,
        carry: bool = False,
        threads: int = 1,
        encoded: bool = False,
    ) -> None:
        self.reader = reader
        self.transform = transform
        # --decode-on device: a batch is its files as they are (`iobench.loaders.encoded`), decoded after the copy
        self.encoded = encoded
        # Each batch also carries its sample indices (the delivered order is scored): a batch read in one
        # call stacks them under its int64 labels, one tensor, as a worker's extra tensor would cost a
        # shared-memory handover per batch (3-5% of a DataLoader's rows/s with 2 workers).
        self.carry = carry
        # --fetch-threads: each batch shared by threads of the process that reads it
        self.threads = FetchThreads(reader, threads) if threads > 1 else None

    def __len__(self) -> int:
        return len(self.reader)

    def _item(self, reader: FormatReader, index: int) -> Any:
        t = self.transform
        features, label = reader.sample(index)
        sample = torch.from_numpy(np.ascontiguousarray(features))
        item = (sample if t is None else t.sample(sample)), label
        return (*item, index) if self.carry else item

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """A batch's samples one `__getitem__` each (the DataLoader's per-sample pattern), by the fetch threads
        when there are some."""
        if self.threads is None:
            return [self._item(self.reader, index) for index in indices]
        return self.threads.each(indices, self._item)

    def __getitem__(self, index: Any) -> Any:
        t = self.transform
        if not isinstance(index, (slice, np.ndarray)):
            return self._item(self.reader, index)
        if self.encoded:
            return self._encoded(index)
        if self.threads is not None:
            features, labels = self.threads.batch(index)
        elif isinstance(index, slice):
            features, labels = self.reader.read_range(index.start, index.stop)
        else:
            features, labels = self.reader.batch(index)
        batch = torch.from_numpy(features)
        out = (batch if t is None else t.per_samples(batch)), torch.from_numpy(labels)
        if not self.carry:
            return out
        carried = torch.arange(index.start, index.stop) if isinstance(index, slice) else torch.from_numpy(index)
        return out[0], torch.stack((out[1], carried))

    def _encoded(self, index: slice | np.ndarray) -> Any:
        """The batch's files as they are, and its labels (carrying its indices where asked)."""
        from iobench.loaders.encoded import pack

        indices = np.arange(index.start, index.stop) if isinstance(index, slice) else index
        files, labels = self.reader.encoded_batch(indices)
        labels_t = torch.from_numpy(labels)
        return pack(files), (torch.stack((labels_t, torch.from_numpy(indices))) if self.carry else labels_t)


class EpochBatchSampler(Sampler):
    """Yields the batches of EpochOrder for the current epoch (set before each epoch)."""

    def __init__(self, order: EpochOrder, as_lists: bool) -> None:
        self.order = order
        self.as_lists = as_lists
        self.epoch = 0

    def __iter__(self) -> Iterator[Any]:
        for batch in self.order.batches(self.epoch):
            yield indices_of(batch).tolist() if self.as_lists else batch

    def __len__(self) -> int:
        return self.order.n_batches()


def passthrough(batch: Any) -> Any:
    """Collate for batches that are already batches (module-level so workers can pickle it)."""
    return batch


def _is_handover_drop(kind: type[BaseException], tb: TracebackType | None) -> bool:
    """A batch's file descriptor handover failing because the main process went away mid-handshake."""
    if not issubclass(kind, (ConnectionError, EOFError)):
        return False
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_serve" and code.co_filename.endswith("resource_sharer.py"):
            return True
        tb = tb.tb_next
    return False


def quiet_handovers(_worker_id: int) -> None:
    """Worker start: when the main process ends (a sibling worker was killed, Ctrl-C) while it is
    collecting a batch, the worker's descriptor-sharing thread prints a traceback of a broken
    handshake after iobench's one-line error. Only that exception is dropped; nothing else."""
    report = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if not _is_handover_drop(kind, tb):
            report(kind, value, tb)

    sys.excepthook = hook


def stateful_dataloader() -> type[DataLoader] | None:
    """torchdata's StatefulDataLoader, the DataLoader with `state_dict()` that PyTorch points to for resuming
    mid-epoch; None without torchdata."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError:
        return None
    return StatefulDataLoader


def make_dataloader(dataset: Dataset, settings: LoaderSettings, stateful: bool = False, **kw: Any) -> DataLoader:
    """torch's DataLoader with the run's settings (`iobench.settings.dataloader_arguments`); `stateful`: torchdata's
    StatefulDataLoader with the same ones, where installed."""
    extra: dict[str, Any] = {"worker_init_fn": quiet_handovers} if settings.num_workers > 0 else {}
    cls = (stateful_dataloader() if stateful else None) or DataLoader
    return cls(dataset, **dataloader_arguments(settings), **kw, **extra)


class Carrying:
    """A loader's iterator whose batches carry their indices: keeps them, yields (features, labels).

    A batch is (features, labels, indices), or (features, labels stacked over indices) as ReaderDataset
    returns a batch read in one call."""

    def __init__(self, batches: Iterator[Any], carried: list[torch.Tensor]) -> None:
        self.batches, self.carried = batches, carried

    def __iter__(self) -> Carrying:
        return self

    def __next__(self) -> tuple[Any, Any]:
        features, *rest = next(self.batches)
        labels, indices = rest if len(rest) == 2 else rest[0]
        self.carried.append(indices)
        return features, labels


def carried_order(carried: list[torch.Tensor], samples: int) -> np.ndarray:
    """The first `samples` indices that batches carried, in arrival order."""
    if not carried:
        return np.empty(0, dtype=np.int64)
    return torch.cat([c.reshape(-1) for c in carried]).numpy()[:samples]


class CarriedWhenNeeded:
    """A loader whose batches carry their sample indices only where they may arrive in another order than asked:
    handed over as they finish (`--no-in-order`), or from a restored pipeline, which skips those already delivered.
    In order they arrive as asked (the exact-delivery tests check it), and carrying costs a stack per batch."""

    _carried: list[torch.Tensor]

    def _carries(self, ctx: LoaderContext) -> bool:
        self._carry, self._carried = not ctx.settings.in_order or ctx.stateful, []
        return self._carry

    def _carrying(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The epoch's batches as (features, labels), what they carry kept when they carry it."""
        self._carried = []
        return Carrying(batches, self._carried) if self._carry else batches

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        """Where batches carry their indices, those indices in the order the batches arrived."""
        return carried_order(self._carried, samples) if self._carry else super().delivered(epoch, samples)  # type: ignore[misc]


class DataLoaderLoader(CarriedWhenNeeded, Resumable, Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, order, settings, transform = ctx.reader, ctx.order, ctx.settings, ctx.transform
        super().__init__(ctx.order, ctx.settings, ctx.device)
        if settings.num_workers and not reader.traits.fork_safe:
            raise IobenchError(
                f"{ctx.format_name} is not fork-safe: the DataLoader's workers are forked; drop "
                "--num-workers, or read with threads (--loader nodes or spdl)"
            )
        self.reader = reader
        item = settings.fetch is Fetch.ITEM
        self.sampler = EpochBatchSampler(order, as_lists=item)
        dataset = self.dataset = ReaderDataset(
            reader,
            transform,
            carry=self._carries(ctx),
            threads=settings.fetch_threads,
            encoded=settings.decode_on is DecodeOn.DEVICE,
        )
        if ctx.stateful and stateful_dataloader() is None:  # the resume check records this as its error
            raise IobenchError(
                "resuming a DataLoader mid-epoch takes torchdata's StatefulDataLoader: pip install 'iobench[torchdata]'"
            )
        if item:  # one __getitem__ per sample, default collate
            self.loader = make_dataloader(dataset, settings, ctx.stateful, batch_sampler=self.sampler)
        else:  # the dataset is indexed with a whole batch of indices
            self.loader = make_dataloader(
                dataset, settings, ctx.stateful, sampler=self.sampler, batch_size=None, collate_fn=passthrough
            )

    def prepare(self, epoch: int) -> None:
        """Without workers, the reader opened in this process before the clock, as a script opens its files before
        its loop (a reader of objects fetches a header and the labels); workers open theirs inside the epoch, and so
        does a reader whose opening reads the data itself (`open_reads_data`)."""
        traits = self.reader.traits
        if not self.settings.num_workers and not traits.pipeline_only and not traits.open_reads_data:
            self.reader.handle  # noqa: B018 - opens it

    def _batches(self, epoch: int) -> Iterator[Any]:
        self.sampler.epoch = epoch
        return self._carrying(iter(self._restored(self.loader)))

    def state_dict(self) -> dict[str, Any] | None:
        return self.loader.state_dict() if hasattr(self.loader, "state_dict") else None

    def _release(self) -> None:
        self.loader = None  # workers end with their iterator; closing twice is harmless
        # this process's fetch threads (without workers) stop before the reader they read closes; the workers' end
        # with them
        if self.dataset.threads is None or self.dataset.threads.close():
            self.reader.close()
