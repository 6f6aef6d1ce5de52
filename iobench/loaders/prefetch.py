"""A background thread that keeps K batches ready, already copied to the device on CUDA.

The BackgroundGenerator idea, done properly: the copy runs on a side stream and the consumer's
stream waits on an event, so the copy overlaps the step without racing it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.loaders.base import DeviceBatch, Loader, ReadMethod

_END = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class PrefetchThread(Loader):
    def __init__(self, inner: Loader, depth: int) -> None:
        super().__init__(inner.order, inner.settings, inner.device)
        self.inner = inner
        self.depth = depth
        self.cuda = inner.device.type == "cuda"

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return self.inner.delivered(epoch, samples)

    def setup_seconds(self) -> float:
        return self.inner.setup_seconds()

    def process_ids(self) -> list[int]:
        return self.inner.process_ids()

    @property
    def read_method(self) -> ReadMethod | None:
        return self.inner.read_method

    def epoch(self, epoch: int) -> Iterator[Any]:
        ready: queue.Queue = queue.Queue(self.depth)
        stop = threading.Event()
        thread = threading.Thread(target=self._work, args=(epoch, ready, stop), name="prefetch", daemon=True)
        thread.start()
        try:
            while (item := ready.get()) is not _END:
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            stop.set()
            while thread.is_alive():  # unblock a producer waiting on a full queue
                try:
                    ready.get_nowait()
                except queue.Empty:
                    thread.join(0.01)

    def _work(self, epoch: int, ready: queue.Queue, stop: threading.Event) -> None:
        try:
            stream = torch.cuda.Stream(self.device) if self.cuda else None
            for batch in self.inner.epoch(epoch):
                if stop.is_set():
                    return
                if stream is None:
                    ready.put((self.inner.to_device(batch), None))
                    continue
                with torch.cuda.stream(stream):
                    moved = self.inner.to_device(batch)
                    done = torch.cuda.Event()
                    done.record(stream)
                ready.put((moved, done))
            ready.put(_END)
        except BaseException as exc:
            ready.put(_Failure(exc))

    def to_device(self, batch: Any) -> DeviceBatch:
        moved, done = batch
        if done is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(done)
            for t in moved:  # the side stream's allocations are now used on this stream
                t.record_stream(current)
        return moved

    def close(self) -> None:
        self.inner.close()
