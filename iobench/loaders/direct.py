"""The reference loader: each batch's reads issued concurrently, straight into reusable buffers.

Page faults on a mapping (tensorclass, a DataLoader over np.load's memmap) have one read
outstanding per thread and drag the kernel's read-around in with every 4 KiB they touch. This
loader is what the machine allows instead, `--num-workers` reads in flight (default 32: queue depth
32), two batches read ahead of the one in use, into buffers that are reused (pinned on CUDA) and
copied to the device once per batch:
- cold (`--cache cold`, with or without a budget): O_DIRECT reads submitted and reaped in batches by
  Linux AIO from two threads (`iobench/storage/local/aio.py`), as fio's libaio engine does: shuffled, one read
  of the 4 KiB blocks covering each sample; sequential, a batch's bytes in reads of up to 1 MiB. The
  page cache is bypassed: what an epoch over a dataset far larger than memory costs at best, and
  what DALI/kvikio do on GPUs;
- warm: through the page cache, by a pool of threads calling `os.preadv` (which releases the GIL):
  one read per sample with the kernel's read-ahead off (POSIX_FADV_RANDOM) when shuffled, a few
  large reads per batch with POSIX_FADV_SEQUENTIAL when sequential. Where O_DIRECT or AIO is not
  available (tmpfs, not Linux) cold epochs read this way too; the record's `read_method` says which.
Labels (8 bytes a sample) are read whole when the loader is built, as an index file would be; that
is setup time.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from iobench.errors import IobenchError
from iobench.loaders.base import DeviceBatch, Loader, LoaderContext, ReadMethod
from iobench.loaders.order import indices_of
from iobench.storage.local import aio
from iobench.system.fsutil import open_regular, pread_full

READS_IN_FLIGHT = 32
AHEAD = 2  # batches being read while the consumer uses one
CONTIGUOUS_READ = 2**20  # largest single read of a cold sequential batch (fio's usual 1 MiB)


class DirectLoader(Loader):
    def __init__(self, ctx: LoaderContext) -> None:
        reader, settings, device, cold = ctx.reader, ctx.settings, ctx.device, ctx.cold
        super().__init__(ctx.order, ctx.settings, ctx.device)
        layout = reader.fixed_layout()
        reader.close()
        if layout is None:
            raise IobenchError("--loader direct reads formats whose samples lie at known offsets (npy, memmap)")
        spec = reader.spec
        self.row, self.offset, self.shuffled = spec.feature_bytes, layout.features_offset, not reader.sequential
        t0 = time.perf_counter()
        self.fd: int | None = open_regular(layout.features)  # no link followed, no FIFO waited on
        with open(open_regular(layout.labels), "rb") as f:
            self.labels = np.fromfile(f, dtype=np.int64, count=spec.n_samples, offset=layout.labels_offset)
        self._setup = time.perf_counter() - t0
        self.threads = settings.num_workers or READS_IN_FLIGHT
        self.pool: ThreadPoolExecutor | None = ThreadPoolExecutor(self.threads, thread_name_prefix="iobench-direct")
        dtype = torch.from_numpy(np.empty(0, dtype=spec.np_dtype)).dtype
        pin = bool(settings.pin_memory) and device.type == "cuda"
        self.buffers = [
            torch.empty((settings.batch_size, *spec.shape), dtype=dtype, pin_memory=pin) for _ in range(AHEAD + 2)
        ]
        self.views = [memoryview(b.numpy()).cast("B") for b in self.buffers]
        self.copied: list[torch.cuda.Event | None] = [None] * len(self.buffers)
        self.aio: aio.AioPool | None = None
        self.direct_fd: int | None = None
        self.stride, self.unit, self.staging = 0, 1, []
        self.rows: list[tuple[np.ndarray, np.ndarray]] = []
        self.outs: list[np.ndarray] = []
        if cold:
            self._start_aio(layout.features, settings.batch_size)

    def _start_aio(self, path: Any, batch_size: int) -> None:
        """O_DIRECT reads through Linux AIO, with an aligned staging buffer per batch buffer."""
        if not aio.supported():
            return
        try:
            self.direct_fd = open_regular(path, extra=os.O_DIRECT)
            self.aio = aio.AioPool(self.threads)
        except OSError:  # tmpfs refuses O_DIRECT; a kernel may refuse AIO: read through the cache
            if self.direct_fd is not None:
                os.close(self.direct_fd)
                self.direct_fd = None
            return
        self.stride = aio.staging_stride(self.row)
        self.unit = math.gcd(self.offset, self.row, aio.ALIGN)  # every sample starts at a multiple of this
        size = max(batch_size * self.stride, batch_size * self.row + 2 * aio.ALIGN)  # scattered or contiguous
        self.staging = [aio.aligned_buffer(size) for _ in self.buffers]
        # Per slot, made once: a shuffled batch's staging rows and their addresses, and its samples' bytes.
        starts = np.arange(batch_size, dtype=np.uint64) * self.stride
        span = batch_size * self.stride
        self.rows = [(view[:span].reshape(batch_size, -1), at + starts) for _, view, at in self.staging]
        self.outs = [np.frombuffer(v, np.uint8)[: batch_size * self.row].reshape(batch_size, -1) for v in self.views]

    @property
    def read_method(self) -> ReadMethod:
        """How this loader reads here: a file system that refuses O_DIRECT (tmpfs) or a kernel without
        AIO leaves cold epochs to the page cache, which the record and a warning then say."""
        return ReadMethod.DIRECT if self.aio is not None else ReadMethod.THREADS

    def setup_seconds(self) -> float:
        return self._setup

    def _batches(self, epoch: int) -> Iterator[Any]:
        if self.fd is None or self.pool is None:
            raise IobenchError("the direct loader is closed")
        advice = os.POSIX_FADV_RANDOM if self.shuffled else os.POSIX_FADV_SEQUENTIAL
        os.posix_fadvise(self.fd, 0, 0, advice)
        windows = iter(self.order.batches(epoch))
        pending: deque[tuple[int, torch.Tensor, list[Future]]] = deque()
        count = 0
        for window in windows:
            pending.append(self._submit(window, count % len(self.buffers)))
            count += 1
            if len(pending) > AHEAD:
                yield self._ready(pending.popleft())
        while pending:
            yield self._ready(pending.popleft())

    def _ready(self, item: tuple[int, torch.Tensor, list[Future]]) -> tuple[torch.Tensor, torch.Tensor, int]:
        slot, labels, reads = item
        for read in reads:
            read.result()
        return self.buffers[slot][: len(labels)], labels, slot

    def _submit(self, window: Any, slot: int) -> tuple[int, torch.Tensor, list[Future] | list[_StagedBatch]]:
        """Start reading one batch into a free buffer (the one the consumer used AHEAD + 1 batches ago)."""
        event = self.copied[slot]
        if event is not None:
            event.synchronize()  # its last host-to-device copy must be done before we overwrite it
        if isinstance(window, slice):  # contiguous samples: a few large reads
            start, n = window.start, window.stop - window.start
            reads = [self._submit_contiguous(start, n, slot)] if self.aio else self._submit_range(start, n, slot)
            return slot, torch.from_numpy(self.labels[window]), reads
        indices = indices_of(window)
        reads = [self._submit_direct(indices, slot)] if self.aio else self._submit_gather(indices, slot)
        return slot, torch.from_numpy(self.labels[indices]), reads  # numpy's gather costs a third of torch's

    def _submit_range(self, start: int, n: int, slot: int) -> list[Future]:
        """Samples start..start+n through the page cache, split over the thread pool."""
        view, row = self.views[slot], self.row
        cuts = np.linspace(0, n, min(self.threads, n) + 1, dtype=np.int64)
        return [
            self.pool.submit(_read_into, self.fd, view[a * row : b * row], self.offset + (start + a) * row)
            for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
            if b > a
        ]

    def _submit_gather(self, indices: np.ndarray, slot: int) -> list[Future]:
        """One read per sample through the page cache, the samples split over the thread pool."""
        view, row = self.views[slot], self.row
        offsets = (self.offset + indices.astype(np.int64) * row).tolist()
        parts = np.array_split(np.arange(len(offsets)), min(self.threads, len(offsets)))
        return [self.pool.submit(_gather, self.fd, view, row, part.tolist(), offsets) for part in parts if len(part)]

    def _submit_direct(self, indices: np.ndarray, slot: int) -> _StagedBatch:
        """One aligned O_DIRECT read per sample into the slot's staging buffer, copied out when ready."""
        assert self.aio is not None and self.direct_fd is not None
        n = len(indices)
        start, length, skip = aio.spans(self.offset + indices.astype(np.int64) * self.row, self.row)
        rows, addresses = self.rows[slot]
        read = self.aio.submit(aio.BatchRead(self.direct_fd, start, length, addresses[:n], skip + self.row))
        return _StagedBatch(read, rows[:n], skip, self.outs[slot][:n], self.unit)

    def _submit_contiguous(self, first: int, n: int, slot: int) -> _StagedBatch:
        """Samples first..first+n as O_DIRECT reads of at most CONTIGUOUS_READ bytes, copied out in one piece."""
        assert self.aio is not None and self.direct_fd is not None
        (start,), (length,), (skip,) = aio.spans(np.array([self.offset + first * self.row]), n * self.row)
        pieces = np.arange(0, length, CONTIGUOUS_READ, dtype=np.int64)
        sizes = np.minimum(CONTIGUOUS_READ, length - pieces)
        _, staging, address = self.staging[slot]
        needed = sizes.copy()
        needed[-1] -= length - (skip + n * self.row)  # the file may end inside the last block
        targets = address + pieces.astype(np.uint64)
        read = self.aio.submit(aio.BatchRead(self.direct_fd, start + pieces, sizes, targets, needed))
        out = self.outs[slot][:n].reshape(1, n * self.row)  # the batch's bytes as one piece
        return _StagedBatch(read, staging[:length].reshape(1, length), np.array([skip]), out, self.unit)

    def to_device(self, batch: tuple[torch.Tensor, torch.Tensor, int]) -> DeviceBatch:
        features, labels, slot = batch
        nb = self.settings.non_blocking
        moved = features.to(self.device, non_blocking=nb), labels.to(self.device, non_blocking=nb)
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record()
            self.copied[slot] = event
        return moved

    def _release(self) -> None:
        if self.aio is not None:
            self.aio.close()
            self.aio = None
        if self.direct_fd is not None:
            os.close(self.direct_fd)
            self.direct_fd = None
        self.staging, self.rows, self.outs = [], [], []
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.buffers, self.views = [], []


class _StagedBatch:
    """A batch read into aligned staging rows; result() waits and copies each sample out of its row."""

    GATHER_UNITS = 64  # samples of at most this many units are gathered by one fancy index

    def __init__(self, read: aio.BatchRead, rows: np.ndarray, skip: np.ndarray, out: np.ndarray, unit: int) -> None:
        self.read, self.rows, self.skip, self.out, self.unit = read, rows, skip, out, unit

    def result(self) -> None:
        self.read.wait()
        n, width = self.out.shape
        units = width // self.unit
        if units <= self.GATHER_UNITS:
            # Every sample starts at a multiple of `unit` bytes (the gcd of header, sample size and
            # block): seen as items of that size, the copy-out is one gather (one item per 512-byte
            # sample) instead of a masked copy per distinct start.
            item = np.dtype(f"V{self.unit}")
            picks = (self.skip // self.unit)[:, None] + np.arange(units)
            self.out.view(item)[:] = self.rows.view(item)[np.arange(n)[:, None], picks]
            return
        for skip in np.unique(self.skip).tolist():  # large samples: one strided copy per distinct start
            rows = self.skip == skip
            self.out[rows] = self.rows[rows, skip : skip + width]


def _read_into(fd: int, view: memoryview, offset: int) -> None:
    if (done := pread_full(fd, view, offset)) < len(view):
        raise OSError(f"unexpected end of file at byte {offset + done}")


def _gather(fd: int, view: memoryview, row: int, positions: list[int], offsets: list[int]) -> None:
    """One read per sample: sample at offsets[p] into row p of the buffer."""
    for p in positions:
        if os.preadv(fd, [view[p * row : (p + 1) * row]], offsets[p]) != row:
            _read_into(fd, view[p * row : (p + 1) * row], offsets[p])
