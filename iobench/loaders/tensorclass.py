"""tensordict's tensorclass memmap loading, done the way tensordict recommends.

The memmapped tensorclass is indexed with a whole batch (a slice when the batch is one run of
samples, which stays a view until it is copied), pinned when the device is CUDA, and moved with
non_blocking. With workers it runs inside a DataLoader, one __getitems__-style call per batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Dataset

from iobench.formats.memmap import MemmapReader, Sample
from iobench.loaders.base import DeviceBatch, Loader, LoaderContext
from iobench.loaders.dataloader import EpochBatchSampler, make_dataloader, passthrough
from iobench.loaders.order import Window
from iobench.loaders.transforms import Transform


class TensorclassBatches(Dataset):
    """Indexed by a window of samples, returns that batch as a materialised tensorclass.

    For a run of samples it also keeps the kernel reading `readahead_mb` MiB beyond it (posix_fadvise
    WILLNEED, topped up every half window), so a sequential epoch keeps the disk busy while the
    current batch is copied: mmap page faults alone read ahead far less.
    """

    def __init__(self, reader: MemmapReader, pin: bool, readahead_mb: int, transform: Transform | None = None) -> None:
        self.reader = reader
        self.pin = pin
        self.transform = transform
        self.ahead = readahead_mb * 2**20 // reader.spec.sample_bytes  # in samples
        self._hinted = (-1, 0)  # (pid, samples hinted up to)

    def __len__(self) -> int:
        return len(self.reader)

    def _hint(self, window: slice) -> None:
        pid, until = self._hinted
        if pid != os.getpid() or not window.start <= until <= window.stop + self.ahead:
            until = window.start  # new process, new epoch or a jump: start over from here
        if until - window.stop < self.ahead // 2:
            target = window.stop + self.ahead
            self.reader.will_need(max(until, window.start), target)
            until = target
        self._hinted = (os.getpid(), until)

    def __getitem__(self, window: Window) -> Sample:
        data = self.reader.tensorclass()
        if isinstance(window, slice):
            if self.ahead:
                self._hint(window)
            batch = data[window]  # a view of the memmap: the copy below is the read
            if self.transform is not None:
                return self._transformed(batch)
            return batch.pin_memory() if self.pin else batch.clone()
        batch = data[torch.from_numpy(window)]  # a gather: already a copy in RAM
        if self.transform is not None:
            return self._transformed(batch)
        return batch.pin_memory() if self.pin else batch

    def _transformed(self, batch: Sample) -> Sample:
        """Per sample, in whichever process reads (a worker or the main process), then pinned."""
        features = self.transform.per_samples(batch.features)
        out = Sample(features=features, labels=batch.labels.clone(), batch_size=batch.batch_size)
        return out.pin_memory() if self.pin else out


class TensorclassLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, order, settings, transform = ctx.reader, ctx.order, ctx.settings, ctx.transform
        super().__init__(ctx.order, ctx.settings, ctx.device)
        self.reader = reader
        self.workers = settings.num_workers > 0
        # Without workers the main process pins; with workers the DataLoader's pin thread does.
        self.batches = TensorclassBatches(
            reader,
            pin=settings.pin_memory and not self.workers,
            readahead_mb=settings.readahead_mb,
            transform=transform,
        )
        self.sampler = EpochBatchSampler(order, as_lists=False)
        self.loader = (
            make_dataloader(self.batches, settings, sampler=self.sampler, batch_size=None, collate_fn=passthrough)
            if self.workers
            else None
        )

    def _batches(self, epoch: int) -> Iterator[Any]:
        self.sampler.epoch = epoch
        if self.loader is not None:
            return iter(self.loader)
        return (self.batches[indices] for indices in self.order.batches(epoch))

    def to_device(self, batch: Sample) -> DeviceBatch:
        if self.device.type == "cpu":  # already materialised in RAM: .to("cpu") would be a no-op
            return batch.features, batch.labels
        moved = batch.to(self.device, non_blocking=self.settings.non_blocking)
        return moved.features, moved.labels

    def _release(self) -> None:
        self.loader = None
        self.reader.close()
