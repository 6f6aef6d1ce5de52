"""`--loader preload`: a dataset that fits in memory read once at the disk's sequential speed, then every batch
gathered in memory. What a user whose data fits should do instead of shuffled reads from storage: a cold shuffled
epoch through a memory map reached 0.40 of the disk on the H200 machine, 8 MiB O_DIRECT reads by 4 threads into
pinned memory 2,101 MB/s (the disk's own speed).

The read is inside the clock: a fresh loader's first epoch reads the files (`whole_read.WholeRead`; cold, O_DIRECT:
exactly the dataset's bytes, once) and hands its batches out only then; a loader's later epochs gather from memory.
As each piece arrives, its rows are put where the first epoch's order wants them (a scatter, overlapping the other
threads' reads), so that epoch's batches are views, not copies; a later epoch gathers each batch (one index_select)
into buffers that are reused (pinned on CUDA, each reused once its copy to the device is done).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.loaders.base import DeviceBatch, Loader, LoaderContext, ReadMethod
from iobench.loaders.order import indices_of
from iobench.loaders.resident import HEADROOM, available_bytes, free_words
from iobench.loaders.whole_read import READ_THREADS, RowsFile, WholeRead
from iobench.system.fsutil import open_regular

SLOTS = 3  # gather buffers: the batch in use, the one being copied to the device, the next


class PreloadLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, settings, device = ctx.reader, ctx.settings, ctx.device
        super().__init__(ctx.order, ctx.settings, ctx.device)
        layout = reader.fixed_layout()
        reader.close()
        if layout is None:
            raise IobenchError("--loader preload reads formats whose samples lie at known offsets (npy, memmap)")
        spec = self.spec = reader.spec
        need, have = spec.n_samples * (spec.feature_bytes + 8), available_bytes(torch.device("cpu"))
        if need > HEADROOM * have:
            raise IobenchError(
                f"--loader preload holds the dataset in memory: it needs {need / 1e9:.2f} GB and "
                f"{have / 1e9:.2f} GB are {free_words(torch.device('cpu'))}; read it with --loader "
                "direct or dataloader"
            )
        self.layout, self.cold = layout, ctx.cold
        self.pin = bool(settings.pin_memory) and device.type == "cuda"
        self.threads = settings.num_workers or READ_THREADS
        self.dtype = torch.from_numpy(np.empty(0, dtype=spec.np_dtype)).dtype
        self.data: torch.Tensor | None = None  # every row, where the first epoch's order put it
        self.labels: torch.Tensor | None = None
        self.position: np.ndarray | None = None  # row i of the file is data[position[i]]
        self.slots: list[torch.Tensor] = []
        self.copied: list[torch.cuda.Event | None] = [None] * SLOTS
        self.reading: WholeRead | None = None
        self.method: ReadMethod | None = None

    @property
    def read_method(self) -> ReadMethod | None:
        return self.method

    def _batches(self, epoch: int) -> Iterator[Any]:
        if self.data is None:
            return self._first(epoch)
        return self._gathered(list(self.order.batches(epoch)))

    def _first(self, epoch: int) -> Iterator[Any]:
        """The files read (inside the clock), each row put where this epoch's order wants it: batches are views. The
        reads start first; the order (a permutation of every row), where each row goes, and the labels are worked
        out while the first pieces are in flight: done before the reads, the disk stood idle for them (preload read
        0.89-0.93 of fio's rate under a throttle on an Intel host)."""
        ready = threading.Event()
        target: list[torch.Tensor] = []
        flat = self._allocate()

        def put(first: int, rows: torch.Tensor) -> None:
            while not ready.wait(0.05):  # the order is being worked out: this piece is read, and waits for it
                if reading.stopping:
                    return
            flat.index_copy_(0, target[0][first : first + len(rows)], rows)

        layout, spec = self.layout, self.spec
        rows = RowsFile(layout.features, layout.features_offset, spec.n_samples, spec.feature_bytes)
        reading = self.reading = WholeRead(rows, put, self.threads, direct=self.cold)
        self.method = ReadMethod.WHOLE_DIRECT if reading.direct else ReadMethod.WHOLE_CACHED
        try:
            reading.start()
            windows = list(self.order.batches(epoch))
            wanted = np.concatenate([indices_of(w) for w in windows]) if windows else np.empty(0, dtype=np.int64)
            position = self._positions(wanted)
            target.append(torch.from_numpy(position))
            ready.set()
            labels = self._labels(position)  # the labels file read beside the features' last pieces
            reading.wait()
        finally:
            self.reading = None
            reading.stop()
        self.labels, self.position = torch.from_numpy(labels), position
        assert self.data is not None
        return self._views(windows)

    def _views(self, windows: list[Any]) -> Iterator[Any]:
        assert self.data is not None and self.labels is not None
        start = 0
        for window in windows:
            stop = start + len(indices_of(window))
            yield self.data[start:stop], self.labels[start:stop], -1
            start = stop

    def _gathered(self, windows: list[Any]) -> Iterator[Any]:
        """A later epoch: each batch gathered from memory into a reused buffer."""
        assert self.data is not None and self.labels is not None and self.position is not None
        for count, window in enumerate(windows):
            rows = torch.from_numpy(self.position[indices_of(window)])
            slot = count % SLOTS
            event = self.copied[slot]
            if event is not None:
                event.synchronize()  # its copy to the device is done before it is overwritten
            out = self.slots[slot][: len(rows)]
            torch.index_select(self.data, 0, rows, out=out)
            yield out, self.labels.index_select(0, rows), slot

    def _allocate(self) -> torch.Tensor:
        """The rows' memory and the batch slots; the rows as bytes, for the scatter."""
        spec, n = self.spec, self.spec.n_samples
        try:
            data = torch.empty((n, *spec.shape), dtype=self.dtype, pin_memory=self.pin)
            self.slots = [
                torch.empty((self.order.batch_size, *spec.shape), dtype=self.dtype, pin_memory=self.pin)
                for _ in range(SLOTS)
            ]
        except RuntimeError as exc:  # pinned memory the driver would not give
            raise IobenchError(
                f"--loader preload: {n * spec.feature_bytes / 1e9:.2f} GB of "
                f"{'pinned ' if self.pin else ''}memory refused ({exc}); use --no-pin-memory or "
                "--loader direct"
            ) from None
        self.data = data
        return data.view(n, -1).view(torch.uint8)

    def _positions(self, wanted: np.ndarray) -> np.ndarray:
        """Where each row of the file goes: the rows this epoch wants first, in its order, the others after them."""
        n = self.spec.n_samples
        position = np.full(n, -1, dtype=np.int64)
        position[wanted] = np.arange(len(wanted))
        rest = position < 0
        position[rest] = np.arange(len(wanted), n)
        return position

    def _labels(self, position: np.ndarray) -> np.ndarray:
        layout, n = self.layout, self.spec.n_samples
        labels = np.empty(n, dtype=np.int64)
        with open(open_regular(layout.labels), "rb") as f:  # 8 bytes a sample: one read
            labels[position] = np.fromfile(f, dtype=np.int64, count=n, offset=layout.labels_offset)
        return labels

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor, int]) -> DeviceBatch:
        features, labels, slot = batch
        nb = self.settings.non_blocking
        moved = features.to(self.device, non_blocking=nb), labels.to(self.device, non_blocking=nb)
        if self.device.type == "cuda" and slot >= 0:
            event = torch.cuda.Event()
            event.record()
            self.copied[slot] = event
        return moved

    def _stop(self) -> bool:
        reading = self.reading
        return reading.stop() if reading is not None else True

    def _release(self) -> None:
        self.data = self.labels = self.position = None
        self.slots = []
