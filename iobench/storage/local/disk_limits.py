"""Local storage's own ceilings: how fast the disk under a folder reads, each way a loader can read it.
Sequential (O_DIRECT at several shapes, and buffered after eviction with the kernel's read-ahead) and random
reads at queue depth 1 and 32 (Linux AIO, as fio's libaio engine). Each figure is the best of the methods
tried, and the method string names them all: a ceiling a loader can beat is a slow implementation."""

from __future__ import annotations

import collections
import contextlib
import math
import mmap
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from iobench.storage.local import aio
from iobench.storage.local.page_cache import evict

BLOCK = 8 * 2**20
IN_FLIGHT = 4
RANDOM_SECONDS = 3.0  # per random-read measurement


def _in_threads(count: int, block: int, reads: Callable[[int, mmap.mmap], None]) -> float:
    """Seconds for `count` threads to run reads(k, buffer), each with a page-aligned buffer of
    `block` bytes (as O_DIRECT requires); os.preadv releases the GIL, so the reads overlap."""
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        buf = mmap.mmap(-1, block)
        try:
            reads(k, buf)
        except BaseException as exc:
            errors.append(exc)
        finally:
            buf.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


DIRECT_SHAPES = ((BLOCK, IN_FLIGHT), (BLOCK, 16), (2**20, 32))  # O_DIRECT (read size, reads in flight)
BUFFERED_CHUNKS = (2**20, BLOCK)  # buffered read sizes after eviction, read-ahead on


def storage_read_mb_per_s(path: Path) -> tuple[float, str]:
    """Sequential reads from storage by the fastest of several ways: O_DIRECT at three read sizes and
    depths, and buffered reads of the evicted file with the kernel's read-ahead (1 MiB and 8 MiB, the
    second with WILLNEED ahead), which is how a loader's sequential cold epoch reads. On a virtual disk
    none wins every minute (loaders read cold at 1.1-1.3x what O_DIRECT 8 MiB x 4 alone had measured)."""
    tried: dict[str, float] = {}
    for block, depth in DIRECT_SHAPES:
        rate, method = direct_read_mb_per_s(path, block, depth)
        if method != "O_DIRECT":
            return rate, method
        tried[f"O_DIRECT {block // 2**20} MiB x {depth}"] = rate
    for chunk in BUFFERED_CHUNKS:
        tried[f"buffered {chunk // 2**20} MiB after eviction"] = buffered_cold_read_mb_per_s(path, chunk)
    best = max(tried, key=tried.__getitem__)
    others = "; ".join(f"{name}: {rate:,.0f} MB/s" for name, rate in tried.items() if name != best)
    return tried[best], f"{best} (also {others})"


def buffered_cold_read_mb_per_s(path: Path, chunk: int = 2**20) -> float:
    """One sequential pass through the page cache over the evicted file, read-ahead on; reads of 8 MiB
    and more also ask the kernel for the next 64 MiB ahead (WILLNEED), as the tensorclass loader does."""
    evict([path], "fadvise")
    buf = bytearray(chunk)
    ahead = 64 * 2**20 if chunk >= BLOCK else 0
    with open(path, "rb", buffering=0) as f:
        advise = hasattr(os, "posix_fadvise")
        if advise:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        n = hinted = 0
        t0 = time.perf_counter()
        while True:
            if advise and ahead and hinted - n < ahead // 2:
                os.posix_fadvise(f.fileno(), hinted, ahead, os.POSIX_FADV_WILLNEED)
                hinted += ahead
            k = f.readinto(buf)
            if not k:
                break
            n += k
        seconds = time.perf_counter() - t0
    evict([path], "fadvise")  # leave it as the other measurements expect: cold
    return n / 1e6 / seconds


def direct_read_mb_per_s(path: Path, block: int = BLOCK, depth: int = IN_FLIGHT) -> tuple[float, str]:
    """Sequential read bandwidth bypassing the page cache, `depth` reads of `block` bytes in flight;
    falls back to a cold buffered read."""
    size = path.stat().st_size
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        method = "O_DIRECT"
    except OSError:  # e.g. tmpfs
        evict([path], "fadvise")
        fd = os.open(path, os.O_RDONLY)
        method = "buffered after eviction"
    offsets = list(range(0, size, block))

    def reads(k: int, buf: mmap.mmap) -> None:
        for off in offsets[k::depth]:
            os.preadv(fd, [buf], off)

    try:
        seconds = _in_threads(depth, block, reads)
    finally:
        os.close(fd)
    return size / 1e6 / seconds, method


def random_read_iops(path: Path, block: int, depth: int, seconds: float = RANDOM_SECONDS) -> float:
    """Reads of `block` bytes at random aligned offsets with `depth` in flight, O_DIRECT, for `seconds`
    or as many reads as the file has blocks, whichever ends first: what a shuffled cold epoch could
    reach. Several in flight are kept by Linux AIO (two reader threads), as fio's libaio engine and the
    direct loader do (threads calling preadv cost more CPU per read than a 2-core machine has: the
    direct loader outran that ceiling); one in flight, or without AIO, by threads calling preadv, as
    fio's psync engine with numjobs=depth."""
    size = path.stat().st_size
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:  # tmpfs: no storage to measure below the page cache
        return math.nan
    slots = size // block
    deadline = time.perf_counter() + seconds
    try:
        if depth > 1 and aio.supported():
            with contextlib.suppress(OSError):  # a kernel without AIO: measure with threads
                return _aio_random_reads(fd, slots, block, depth, deadline)
        return _threaded_random_reads(fd, slots, block, depth, deadline)
    finally:
        os.close(fd)


def _aio_random_reads(fd: int, slots: int, block: int, depth: int, deadline: float) -> float:
    reader = aio.AioPool(depth)
    batch, queued = depth * 4, 4
    _memory, _view, address = aio.aligned_buffer(queued * batch * block)
    rng = np.random.default_rng(0)
    lengths = np.full(batch, block, dtype=np.int64)
    pending: collections.deque[aio.BatchRead] = collections.deque()
    submitted = done = 0
    limit = max(batch, slots)  # at most the file's size in all: a small probe measures briefly
    t0 = time.perf_counter()
    try:
        while True:
            while len(pending) < queued and time.perf_counter() < deadline and submitted < limit:
                targets = address + (submitted // batch % queued) * batch * block
                targets += np.arange(batch, dtype=np.uint64) * block
                offsets = rng.integers(0, slots, batch) * block
                pending.append(reader.submit(aio.BatchRead(fd, offsets, lengths, targets, lengths)))
                submitted += batch
            if not pending:
                break
            pending.popleft().wait()
            done += batch
        return done / (time.perf_counter() - t0)
    finally:
        reader.close()


def _threaded_random_reads(fd: int, slots: int, block: int, depth: int, deadline: float) -> float:
    done = [0] * depth
    share = max(16, slots // depth)

    def reads(k: int, buf: mmap.mmap) -> None:
        rng = random.Random(k)
        while time.perf_counter() < deadline and done[k] < share:
            for _ in range(16):
                os.preadv(fd, [buf], rng.randrange(slots) * block)
            done[k] += 16

    elapsed = _in_threads(depth, block, reads)
    return sum(done) / elapsed
