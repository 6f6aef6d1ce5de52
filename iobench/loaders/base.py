"""What every loader shares: what it is built from and the two stages the runner times separately."""

from __future__ import annotations

import contextlib
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
from iobench.settings import LoaderSettings

DeviceBatch = tuple[torch.Tensor, torch.Tensor]


class ReadMethod(Choice):
    """How a loader that can read either way (direct) read its epochs: the record's `read_method`."""

    DIRECT = "O_DIRECT + Linux AIO"
    THREADS = "preadv threads through the page cache"
    WHOLE_DIRECT = "the whole file in 8 MiB O_DIRECT reads"  # preload
    WHOLE_CACHED = "the whole file in 8 MiB reads through the page cache"
    DEVICE_KVIKIO_GDS = "the whole file into device memory by kvikio, GPUDirect Storage"  # device-read
    DEVICE_KVIKIO_COMPAT = "the whole file into device memory by kvikio's compatibility mode (a bounce buffer)"
    DEVICE_KVIKIO = "the whole file into device memory by kvikio"
    DEVICE_TORCH_GDS = "the whole file into device memory by torch's GdsFile (GPUDirect Storage)"


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
    # the resume check's loaders (`--resume-check`): the pipeline's stateful form where its library has one
    # (torchdata's StatefulDataLoader for a DataLoader), and every batch carrying its indices
    stateful: bool = False


class Loader(ABC):
    """Yields host batches for an epoch, then moves each to the device.

    The split lets the runner time 'waiting for the loader' and 'host-to-device' apart. The base owns the order in
    which a loader stops (`iobench.loaders.lifecycle`): `epoch()` ends the epoch before it, `end_epoch()` stops
    what an epoch started (its iterator closed, the library's threads stopped and waited for, bounded), and
    `close()` releases the readers only after that. A loader implements `_batches`, `_stop` (if it starts threads)
    and `_release`.
    """

    _in_flight: Iterator[Any] | None = None
    _closed = False

    def __init__(self, order: EpochOrder, settings: LoaderSettings, device: torch.device) -> None:
        self.order = order
        self.settings = settings
        self.device = device

    def epoch(self, epoch: int) -> Iterator[Any]:
        """Host batches of one epoch, in order.batches(epoch) order; the epoch before it is ended first."""
        self.end_epoch()
        batches = self._batches(epoch)
        self._in_flight = batches
        return batches

    @abstractmethod
    def _batches(self, epoch: int) -> Iterator[Any]:
        """The epoch's host batches (what `epoch` hands out)."""

    def end_epoch(self) -> bool:
        """The epoch in flight ended, broken off or interrupted: its iterator closed, then the threads it started
        stopped and joined (at most `lifecycle.STOP_S`). False when one of them still runs (said in one line)."""
        batches, self._in_flight = self._in_flight, None
        try:
            close = getattr(batches, "close", None)
            if close is not None:
                with contextlib.suppress(ValueError):  # "generator already executing": its thread is stopped below
                    close()
        finally:
            stopped = self._stop()
        return stopped

    def _stop(self) -> bool:
        """Stop the threads this loader's library runs for an epoch and wait for them, bounded; True when none is
        left reading. Nothing to stop by default (no threads of its own, or worker processes that end with their
        iterator)."""
        return True

    def close(self) -> None:
        """Release workers, handles and device memory (safe to call more than once), after the epoch in flight has
        stopped: a reader a thread still reads is left open, not closed under it."""
        if self.end_epoch() and not self._closed:
            self._closed = True
            self._release()

    @abstractmethod
    def _release(self) -> None:
        """Close what the loader holds (readers, files, buffers); its threads have stopped."""

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

    def state_dict(self) -> dict[str, Any] | None:
        """The pipeline's own state between two batches, as its library gives it to a checkpoint (torchdata's
        StatefulDataLoader and nodes, LitData's StreamingDataLoader); None where the library has none (the resume
        check records `resume_supported: false`). Built with `LoaderContext.stateful`."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The state the next `epoch()` resumes from, as its library restores it."""
        raise NotImplementedError(f"{type(self).__name__} has no state to restore")

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


class Resumable:
    """A loader whose library's loader checkpoints mid-epoch (`Loader.state_dict`): the state `load_state_dict` is
    given goes into the library's loader the next epoch builds (`_restored`), once."""

    _restore: dict[str, Any] | None = None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._restore = state

    def _restored(self, library_loader: Any) -> Any:
        """`library_loader`, with the state given to `load_state_dict` since the last epoch loaded into it."""
        if self._restore is not None:
            library_loader.load_state_dict(self._restore)
            self._restore = None
        return library_loader
