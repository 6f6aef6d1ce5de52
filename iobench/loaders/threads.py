"""Threads that read for one process: `--loader nodes`'s workers, and `--fetch-threads` inside each
DataLoader worker (PyTorch PR 158218: one worker waits on one request at a time, which high-latency storage
makes the whole cost; 32 threads there took an iteration from 1.3 s to 0.021 s)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from copy import copy as shallow_copy
from typing import Any, TypeVar

import numpy as np

from iobench.formats.base import FormatReader
from iobench.loaders.lifecycle import STOP_S, ReadGate, join_all, unstopped

T = TypeVar("T")


class ThreadReaders:
    """One copy of the reader per thread, each opening its own handles on first use; a reader whose library
    allows one opening per process (LMDB) is shared, and keeps a transaction per thread, as is one whose handles
    threads may share (`ReaderTraits.threads_share`: npy's mappings).

    Every read goes through `reading()` (the gate of `iobench.loaders.lifecycle`): `stop()` lets no read start
    (nor reopen a shared handle) and waits for those in flight, so the copies, and the shared reader its owner
    closes, are closed only after their threads are done with them."""

    def __init__(self, reader: FormatReader) -> None:
        self._reader = reader
        self._local = threading.local()
        self._copies: list[FormatReader] = []
        self._lock = threading.Lock()
        self.gate = ReadGate()

    def reading(self) -> Any:
        """A context for one read: refused once the readers are stopped, waited for by `stop`."""
        return self.gate.entered()

    def stop(self, timeout: float = STOP_S) -> bool:
        """No read starts from now on; True once none is in flight (False: one was still reading after `timeout`)."""
        return self.gate.shut(timeout)

    def restart(self) -> None:
        """Reads allowed again (a loader's next epoch, its threads new)."""
        self.gate.reopen()

    def reader(self) -> FormatReader:
        """This thread's reader, its handles open (call inside `reading()`)."""
        # Local handles are opened one thread at a time: the first reads would race to open the shared one, and
        # opening parses .npy headers (np.load), which CPython 3.11 cannot do in two threads at once. A reader of
        # objects (no local folder) opens in every thread at once, as its users' threads do: its opening waits on
        # requests (headers, labels: 16 threads opening in turn took 2.9 s under 30 ms), and the one header it
        # parses takes npy's own lock.
        # Once a thread has its reader it takes no lock: fetch threads ask for it for every sample they read.
        reader = getattr(self._local, "reader", None)
        if reader is not None:
            return reader
        if self._reader.traits.one_per_process or self._reader.traits.threads_share:
            with self._lock:
                _ = self._reader.handle
            self._local.reader = self._reader
            return self._reader
        copy = shallow_copy(self._reader)  # without its handles (FormatReader.__getstate__): opens its own
        with self._lock:
            self._copies.append(copy)
            if copy.directory is not None:  # local files: opened one thread at a time
                _ = copy.handle
        _ = copy.handle  # a reader of objects opens here, in every thread at once
        self._local.reader = copy
        return copy

    def close(self) -> bool:
        """Stop (if not yet), then close every thread's copy; False, closing nothing, while a read is still in
        flight after the stop's wait."""
        if not self.stop():
            return False
        with self._lock:
            copies, self._copies = self._copies, []
        for copy in copies:
            copy.close()
        self._local = threading.local()
        return True


def split(key: np.ndarray | slice, parts: int) -> list[np.ndarray | slice]:
    """A batch's indices (or its run of samples) in at most `parts` contiguous pieces, none empty, in order."""
    if isinstance(key, slice):
        bounds = np.linspace(key.start, key.stop, min(parts, key.stop - key.start) + 1).astype(int)
        return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return [p for p in np.array_split(key, min(parts, len(key))) if len(p)]


class FetchThreads:
    """`threads` threads of the process that reads (a DataLoader worker, or this process without workers)
    sharing each batch, every thread through its own reader. Built on first use in that process: a pool's
    threads do not survive a fork, and a worker process is a fork of this one."""

    def __init__(self, reader: FormatReader, threads: int) -> None:
        self._reader, self.threads = reader, threads
        self._pool: ThreadPoolExecutor | None = None
        self._readers: ThreadReaders | None = None
        self._pid: int | None = None

    def _started(self) -> tuple[ThreadPoolExecutor, ThreadReaders]:
        if self._pool is None or self._readers is None or self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="iobench-fetch")
            self._readers, self._pid = ThreadReaders(self._reader), os.getpid()
        return self._pool, self._readers

    def batch(self, key: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """The batch's features and labels in its order, its pieces read at once."""
        pool, readers = self._started()

        def read(part: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
            with readers.reading():
                reader = readers.reader()
                return reader.read_range(part.start, part.stop) if isinstance(part, slice) else reader.batch(part)

        done = list(pool.map(read, split(key, self.threads)))
        if len(done) == 1:
            return done[0]
        return np.concatenate([f for f, _ in done]), np.concatenate([lb for _, lb in done])

    def each(self, indices: list[int], read: Callable[[FormatReader, int], T]) -> list[T]:
        """read(reader, index) for every index, in their order, `threads` at once."""
        pool, readers = self._started()

        def one(index: int) -> T:
            with readers.reading():
                return read(readers.reader(), index)

        return list(pool.map(one, indices))

    def close(self) -> bool:
        """Ends the threads, then closes their readers (in the process that started them): at most `STOP_S` for a
        read still in flight (an interrupted batch), after which its reader is left open and that said. False then."""
        stopped = True
        if self._pool is not None and self._pid == os.getpid():
            threads = list(getattr(self._pool, "_threads", ()))
            self._pool.shutdown(wait=False, cancel_futures=True)
            if self._readers is not None:
                stopped = self._readers.close()
            if stopped and (alive := join_all(threads)):
                stopped = False
                unstopped(f"{len(alive)} fetch thread(s) did not stop within {STOP_S:g} s")
            elif not stopped:
                unstopped(f"a fetch thread was still reading after {STOP_S:g} s; its reader is left open")
        self._pool = self._readers = self._pid = None
        return stopped

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pool": None, "_readers": None, "_pid": None}
