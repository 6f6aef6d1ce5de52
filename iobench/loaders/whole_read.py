"""A fixed-layout file's rows read once, whole, in large sequential reads: what a dataset that fits in memory should be
read with when its epoch is shuffled (`--loader preload`, and `gpu-resident` over npy and memmap).

A shuffled cold epoch through a memory map reaches 0.40 of the disk (page faults at random offsets, 4 KiB at a time);
the same file read in 8 MiB pieces by a few threads is read at the disk's sequential speed (fio's figure), and the
shuffle is then a gather in memory. Cold, the pieces are O_DIRECT reads into page-aligned staging buffers (no page
cache in between: exactly the file's bytes move, once); warm, or where O_DIRECT is refused (tmpfs), buffered reads
with the kernel's read-ahead asked for. Each piece read is handed to a `sink` with the rows it holds, in the thread
that read it: the copy out of the staging buffer (a torch op: the GIL is released) overlaps the other threads' reads.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from iobench.loaders.lifecycle import STOP_S, join_all, unstopped
from iobench.storage.local import aio
from iobench.system.fsutil import open_regular

PIECE_BYTES = 8 * 2**20  # one read: fio's large sequential block, what the H200 machine read 2,101 MB/s cold with
READ_THREADS = 4  # reads in flight (the same machine's figure was with 4)

# rows [first, first + len(rows)) of the file, as uint8 (rows, row bytes) viewing a staging buffer (valid only
# during the call)
Sink = Callable[[int, torch.Tensor], None]


@dataclass(frozen=True)
class RowsFile:
    """`rows` rows of `row` bytes each, from byte `offset` of `path` on."""

    path: os.PathLike | str
    offset: int
    rows: int
    row: int


class WholeRead:
    """Reads every row of a `RowsFile` once, in pieces of about PIECE_BYTES by `threads` threads, each piece handed to
    `sink`; `direct`: O_DIRECT (where the file system takes it). `run()` waits for it (interruptible); `stop()` ends
    it between pieces and joins its threads, bounded (`lifecycle.STOP_S`)."""

    def __init__(self, source: RowsFile, sink: Sink, threads: int = READ_THREADS, direct: bool = True) -> None:
        self.source, self.sink = source, sink
        self.threads = max(1, threads)
        per_piece = max(1, PIECE_BYTES // max(1, source.row))
        self.pieces = [(a, min(a + per_piece, source.rows)) for a in range(0, source.rows, per_piece)]
        self.fd = -1
        self.direct = False
        if direct and aio.supported():
            with contextlib.suppress(OSError):  # tmpfs refuses O_DIRECT: read through the cache
                self.fd, self.direct = open_regular(source.path, extra=os.O_DIRECT), True
        if self.fd < 0:
            self.fd = open_regular(source.path)
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._failed: BaseException | None = None
        self._workers: list[threading.Thread] = []
        self.bytes_read = 0

    def run(self) -> None:
        """Read it all; the first failure of a thread raised here, after every thread has ended."""
        self.start()
        self.wait()

    def start(self) -> None:
        """The reading threads started: the caller may work meanwhile (the epoch's order), then `wait`."""
        self._workers = [
            threading.Thread(target=self._work, name=f"iobench-whole-read-{k}", daemon=True)
            for k in range(min(self.threads, len(self.pieces)))
        ]
        for worker in self._workers:
            worker.start()

    @property
    def stopping(self) -> bool:
        """Whether it was told to stop (a sink waiting for the caller looks here)."""
        return self._stopping.is_set()

    def wait(self) -> None:
        """Until every piece is read (interruptible); the first failure of a thread raised here."""
        try:
            for worker in self._workers:
                while worker.is_alive():
                    worker.join(0.1)  # a signal reaches this thread between waits
        finally:
            self.stop()
        if self._failed is not None:
            raise self._failed

    def stop(self) -> bool:
        """No piece starts from now on; True once every thread has ended (at most STOP_S), then the file is closed."""
        self._stopping.set()
        alive = join_all(self._workers)
        if alive:
            unstopped(f"{len(alive)} whole-file read thread(s) did not stop within {STOP_S} s; its file is left open")
            return False
        with self._lock:  # stop() runs from run()'s end and from whoever stops it (Ctrl-C, a loader's close): once
            fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)
        return True

    def _work(self) -> None:
        src, extra = self.source, 2 * aio.ALIGN
        per_piece = self.pieces[0][1] - self.pieces[0][0]
        # its own staging memory, unmapped when the last view of it goes (a failure's traceback may hold one)
        _, staging, _ = aio.aligned_buffer(per_piece * src.row + extra)
        try:
            while not self._stopping.is_set():
                with self._lock:
                    if self._next >= len(self.pieces):
                        return
                    first, end = self.pieces[self._next]
                    self._next += 1
                self._piece(first, end, staging)
        except BaseException as exc:  # carried to run(), which raises it in the reading thread
            self._failed = self._failed or exc.with_traceback(None)
            self._stopping.set()

    def _piece(self, first: int, end: int, staging: np.ndarray) -> None:
        """Rows first..end: one read of the aligned span covering them (a block shared with the piece before is read
        by both: 4 KiB in 8 MiB), then handed to the sink."""
        src = self.source
        want_start, want = src.offset + first * src.row, (end - first) * src.row
        if self.direct:
            (start,), (length,), (skip,) = aio.spans(np.array([want_start]), want)
            start, length, skip = int(start), int(length), int(skip)
        else:
            start, length, skip = want_start, want, 0
        got = _read(self.fd, memoryview(staging)[:length], start, self.direct)
        with self._lock:
            self.bytes_read += got
        if got < skip + want:
            raise OSError(f"{src.path}: ends at byte {start + got}, before row {end} of {src.rows}")
        rows = torch.from_numpy(staging[skip : skip + want]).view(end - first, src.row)
        self.sink(first, rows)


def _read(fd: int, view: memoryview, offset: int, direct: bool) -> int:
    """preadv until the view is full or the file ends; O_DIRECT reads stay aligned (a short read is the end)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        done += n
        if n == 0 or (direct and done % aio.ALIGN):
            break
    return done
