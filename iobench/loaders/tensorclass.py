"""tensordict's tensorclass memmap loading, done the way tensordict recommends.

The memmapped tensorclass is indexed with a whole batch (a slice when the batch is one run of
samples, which stays a view until it is copied), pinned when the device is CUDA, and moved with
non_blocking. With workers it runs inside a DataLoader, one __getitems__-style call per batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from formats.memmap import MemmapReader, Sample
from iobench.loaders.base import DeviceBatch, Loader, LoaderSettings
from iobench.loaders.dataloader import EpochBatchSampler, make_dataloader, passthrough
from iobench.loaders.order import EpochOrder, as_slice


class TensorclassBatches(Dataset):
    """Indexed by an array of sample indices, returns that batch as a materialised tensorclass."""

    def __init__(self, reader: MemmapReader, pin: bool) -> None:
        self.reader = reader
        self.pin = pin

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, indices: np.ndarray) -> Sample:
        data = self.reader.tensorclass()
        window = as_slice(indices)
        if window is not None:
            batch = data[window]  # a view of the memmap: the copy below is the read
            return batch.pin_memory() if self.pin else batch.clone()
        batch = data[torch.from_numpy(indices)]  # a gather: already a copy in RAM
        return batch.pin_memory() if self.pin else batch


class TensorclassLoader(Loader):
    def __init__(self, reader: MemmapReader, order: EpochOrder, settings: LoaderSettings, device: torch.device) -> None:
        super().__init__(order, settings, device)
        self.reader = reader
        self.workers = settings.num_workers > 0
        # Without workers the main process pins; with workers the DataLoader's pin thread does.
        self.batches = TensorclassBatches(reader, pin=settings.pin_memory and not self.workers)
        self.sampler = EpochBatchSampler(order, as_lists=False)
        self.loader = (
            make_dataloader(self.batches, settings, sampler=self.sampler, batch_size=None, collate_fn=passthrough)
            if self.workers
            else None
        )

    def epoch(self, epoch: int) -> Iterator[Any]:
        self.sampler.epoch = epoch
        if self.loader is not None:
            return iter(self.loader)
        return (self.batches[indices] for indices in self.order.batches(epoch))

    def to_device(self, batch: Sample) -> DeviceBatch:
        moved = batch.to(self.device, non_blocking=self.settings.non_blocking)
        return moved.features, moved.labels

    def close(self) -> None:
        self.loader = None
        self.reader.close()
