"""What every loader shares: its settings and the two stages the runner times separately."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from iobench.choices import Choice
from iobench.formats.base import FormatReader
from iobench.loaders.order import DistributedSamplerOrder, EpochOrder, indices_of
from iobench.loaders.transforms import Transform
from iobench.results.record import ReadMethod

DeviceBatch = tuple[torch.Tensor, torch.Tensor]


class Fetch(Choice):
    ITEM = "item"  # one __getitem__ per sample, default collate
    BATCH = "batch"  # one call per batch of indices


@dataclass(frozen=True, kw_only=True)
class LoaderSettings:
    """The knobs users turn; one frozen value per run, recorded with the result."""

    batch_size: int = 1024
    num_workers: int = 0
    prefetch_factor: int | None = None
    pin_memory: bool | None = None  # None: on when the device is CUDA
    non_blocking: bool = True
    persistent_workers: bool = False
    fetch: Fetch = Fetch.BATCH
    fetch_threads: int = 1  # DataLoader: threads sharing each batch inside each worker (1: the worker alone)
    prefetch_thread: int = 0  # batches a background thread keeps ready (0 = off)
    readahead_mb: int = 32  # tensorclass: MiB the kernel is asked to read ahead of a sequential run
    ray_address: str | None = None  # ray: the cluster to use (None: a local instance)
    in_order: bool = True  # False: workers' batches are yielded as they are ready (torch >= 2.6)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fetch", Fetch.parse(self.fetch, "--fetch"))


@dataclass(frozen=True)
class LoaderContext:
    """Everything a loader kind is built from, as one value: a new kind reads what it needs from it, and
    the factory builds every kind the same way (`cls(ctx)`)."""

    reader: FormatReader
    order: EpochOrder | DistributedSamplerOrder
    settings: LoaderSettings
    device: torch.device
    transform: Transform | None = None  # a host transform, run per sample where the loader reads
    cold: bool = False  # every epoch starts uncached: the direct loader bypasses the page cache
    format_name: str = ""  # the registered name and the options of the reader's format, as prepared:
    format_options: dict[str, Any] = field(default_factory=dict)  # Ray actors rebuild the reader from them


class Loader(ABC):
    """Yields host batches for an epoch, then moves each to the device.

    The split lets the runner time 'waiting for the loader' and 'host-to-device' apart.
    """

    def __init__(self, order: EpochOrder, settings: LoaderSettings, device: torch.device) -> None:
        self.order = order
        self.settings = settings
        self.device = device

    @abstractmethod
    def epoch(self, epoch: int) -> Iterator[Any]:
        """Host batches of one epoch, in order.batches(epoch) order."""

    def to_device(self, batch: Any) -> DeviceBatch:
        features, labels = batch
        nb = self.settings.non_blocking
        return features.to(self.device, non_blocking=nb), labels.to(self.device, non_blocking=nb)

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        """Sample indices in the order the epoch delivered its first `samples` samples. iobench's loaders
        deliver the order they were given (the exact-delivery tests check it); a loader whose library
        decides the order (a shuffle buffer) returns the indices it carried."""
        parts = [indices_of(b) for b in self.order.batches(epoch)]
        return np.concatenate(parts)[:samples] if parts else np.empty(0, dtype=np.int64)

    def setup_seconds(self) -> float:
        """One-off cost before the first epoch (e.g. loading everything to the device)."""
        return 0.0

    def prepare(self, epoch: int) -> None:
        """What a user's script does before its loop, done before the epoch's clock (the runner times it as setup):
        a pipeline built, a reader opened. Nothing by default."""
        return None

    def process_ids(self) -> list[int]:
        """Processes on this host that read for the loader but are not this process's children."""
        return []

    @property
    def read_method(self) -> ReadMethod | None:
        """How the loader reads where that depends on the machine (direct); None where it does not."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release workers, handles and device memory (safe to call more than once)."""
