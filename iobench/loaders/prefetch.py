"""A background thread that keeps K batches ready, already copied to the device on CUDA.

The BackgroundGenerator idea, done properly: the copy runs on a side stream and the consumer's
stream waits on an event, so the copy overlaps the step without racing it. The thread iterates the inner loader's
epoch: ending the epoch stops and joins it (bounded) before the inner loader's epoch is ended and its readers closed.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from iobench.loaders.base import DeviceBatch, Loader, ReadMethod
from iobench.loaders.lifecycle import STOP_S, unstopped

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
        self._worker: tuple[threading.Thread, threading.Event, queue.Queue] | None = None

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return self.inner.delivered(epoch, samples)

    def setup_seconds(self) -> float:
        return self.inner.setup_seconds()

    def process_ids(self) -> list[int]:
        return self.inner.process_ids()

    @property
    def read_method(self) -> ReadMethod | None:
        return self.inner.read_method

    def _batches(self, epoch: int) -> Iterator[Any]:
        ready: queue.Queue = queue.Queue(self.depth)
        stop = threading.Event()
        thread = threading.Thread(target=self._work, args=(epoch, ready, stop), name="prefetch", daemon=True)
        self._worker = (thread, stop, ready)
        thread.start()
        return self._taken(ready, stop)

    @staticmethod
    def _taken(ready: queue.Queue, stop: threading.Event) -> Iterator[Any]:
        try:
            while (item := ready.get()) is not _END:
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            stop.set()

    def _stop(self) -> bool:
        """The thread told to stop and joined (a producer waiting on a full queue is unblocked), at most `STOP_S`;
        then the inner loader's epoch, which the thread iterated, is ended."""
        worker, self._worker = self._worker, None
        if worker is not None:
            thread, stop, ready = worker
            stop.set()
            deadline = time.monotonic() + STOP_S
            while thread.is_alive() and time.monotonic() < deadline:
                try:
                    ready.get_nowait()
                except queue.Empty:
                    thread.join(0.01)
            if thread.is_alive():
                unstopped(f"the prefetch thread did not stop within {STOP_S:g} s; the loader's readers are left open")
                return False
        return self.inner.end_epoch()

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

    def _release(self) -> None:
        self.inner.close()
