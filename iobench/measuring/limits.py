"""The physical ceilings of this machine, which no loader can beat.

- storage: sequential reads of a large file on the data directory's file system with O_DIRECT,
  8 MiB blocks, 4 in flight (what fio would call a sequential read job); the largest prepared
  data file when there is one, else a probe file written for the purpose;
- page cache: the same file read again with every page cached (a copy out of the page cache);
- host-to-device from pageable and from pinned memory, and device-to-device copies (CUDA only).
Stored as JSON beside the results, one entry per (host, data device), so every run can report
its MB/s as a share of the ceiling that applies to it (the rule: `RunRecord.ceiling`).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import math
import mmap
import os
import platform
import random
import threading
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import torch

from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.results.machine_limits import PAGE, MachineLimits, limits_key, read_block
from iobench.results.store import limits_path, load_all_limits
from iobench.spec import DatasetSpec
from iobench.system import aio
from iobench.system.confine import Confinement, check_can_confine, confined
from iobench.system.environment import mount_of
from iobench.system.fsutil import PARTIAL_PREFIX, atomic_write_json, free_bytes, remove_stale_probes
from iobench.system.page_cache import evict
from iobench.units import DEFAULT_SIZE

BLOCK = 8 * 2**20
IN_FLIGHT = 4
DEFAULT_PROBE_BYTES = 2**30
PROBE_MARGIN = 1.05  # leave 5% of the probe's size free, as prepare does
RANDOM_SECONDS = 3.0  # per random-read measurement


def _key(data_dir: Path, read_limit: float | None) -> str:
    _fs, source = mount_of(data_dir)
    return limits_key(platform.node(), source, read_limit)


def load_limits(results: Path, data_dir: Path, read_limit: float | None = None) -> MachineLimits | None:
    return load_all_limits(results).get(_key(data_dir, read_limit))


def save_limits(results: Path, data_dir: Path, limits: MachineLimits) -> Path:
    path = limits_path(results)
    try:
        stored = load_all_limits(results)
    except IobenchError:
        stored = {}  # a broken file is replaced by the fresh measurement
    stored[_key(data_dir, limits.read_limit_mb_per_s)] = limits
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {k: v.to_json() for k, v in stored.items()})
    except OSError as exc:
        raise IobenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


METHOD_OF = {"storage_read_mb_per_s": "storage_read_method", "memory_gather_mb_per_s": "memory_gather_method"}


def best_of(old: MachineLimits, new: MachineLimits) -> MachineLimits:
    """Each ceiling at the best of two measurements of the same machine (with the method that got it):
    a ceiling is what the machine can do, and a slow minute of a shared disk is not that."""
    before = old.measured_at.removesuffix(", best of each")
    changes: dict = {"measured_at": f"{before} and {new.measured_at}, best of each"}
    for f in fields(new):
        if not f.name.endswith(("_mb_per_s", "_iops")) or f.name == "read_limit_mb_per_s":
            continue
        a, b = getattr(old, f.name), getattr(new, f.name)
        if a is not None and (b is None or a > b):
            changes[f.name] = a
            if f.name in METHOD_OF:
                changes[METHOD_OF[f.name]] = getattr(old, METHOD_OF[f.name])
    return replace(new, **changes)


def stored_or_measured(
    results: Path,
    data_dir: Path,
    device: torch.device,
    announce: Callable[[], None] | None = None,
    read_limit: float | None = None,
) -> MachineLimits:
    """The limits stored beside the results for this host, disk and throttle, measured and stored if none."""
    limits = load_limits(results, data_dir, read_limit)
    if limits is None:
        limits = measure_limits(data_dir, device, announce=announce, read_limit=read_limit)
        save_limits(results, data_dir, limits)
    return limits


def write_probe(path: Path, nbytes: int) -> None:
    """A file of incompressible bytes (whole blocks), fsynced: its pages are clean and can be evicted."""
    block = os.urandom(BLOCK)
    with open(path, "wb", buffering=0) as f:
        for _ in range(nbytes // BLOCK):
            f.write(block)
        os.fsync(f.fileno())


def _probe_source(data_dir: Path, probe_bytes: int) -> Path | None:
    """The prepared data file to read instead of a probe, or None after checking that a probe file fits,
    with room to spare."""
    existing = _largest_data_file(data_dir, probe_bytes // 2)
    if existing is not None:
        return existing
    free = free_bytes(data_dir)
    if probe_bytes * PROBE_MARGIN > free:
        raise IobenchError(
            f"not enough disk space in {data_dir} for a {probe_bytes / 2**20:,.0f} MiB probe file "
            f"({free / 2**20:,.0f} MiB free); give `iobench limits` a smaller --probe-size"
        )
    return None


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


LARGE_ROW = 64 * 2**10  # rows this large are copied one by one as well: per-row overhead no longer matters


def memory_gather_mb_per_s(
    path: Path, sample_bytes: int, batch: int = 1024, nbytes: int = 256 * 2**20
) -> tuple[float, str]:
    """Gathering random samples of sample_bytes from a resident array (the warm shuffled bound), in
    delivered MB/s over 1024-sample batches from the first 256 MiB of the file, by the fastest of the
    ways a loader gathers: torch's index_select, numpy's take of whole rows into a preallocated batch,
    numpy's fancy index, and (rows of 64 KiB or more) a copy per row. One slow method made a ceiling
    that the npy loader (numpy's fancy index) beat by 1.4-2.1x."""
    rows = min(nbytes, path.stat().st_size) // sample_bytes
    batch = max(1, min(batch, rows))
    raw = np.fromfile(path, dtype=np.uint8, count=rows * sample_bytes).reshape(rows, sample_bytes)
    item = np.dtype((np.void, sample_bytes))
    items = raw.view(item).reshape(rows)
    tensor = torch.from_numpy(raw)
    out_rows = np.empty((batch, sample_bytes), dtype=np.uint8)
    out_items = out_rows.view(item).reshape(batch)

    def row_copies(idx: np.ndarray) -> None:
        for j, i in enumerate(idx.tolist()):
            out_rows[j] = raw[i]

    methods: dict[str, Callable[[np.ndarray], object]] = {
        "torch index_select": lambda idx: tensor.index_select(0, torch.from_numpy(idx)),
        "numpy take into a preallocated batch": lambda idx: np.take(items, idx, out=out_items),
        "numpy fancy index": lambda idx: raw[idx],
    }
    if sample_bytes >= LARGE_ROW:
        methods["a copy per row"] = row_copies
    rng = np.random.default_rng(0)
    best, best_method = 0.0, ""
    for name, gather in methods.items():
        for _ in range(3):
            order = rng.permutation(rows)
            t0 = time.perf_counter()
            for start in range(0, rows - batch + 1, batch):
                gather(order[start : start + batch])
            rate = (rows // batch) * batch * sample_bytes / 1e6 / (time.perf_counter() - t0)
            if rate > best:
                best, best_method = rate, name
    return best, best_method


def page_cache_mb_per_s(path: Path) -> float:
    """Copying an entirely cached file into user memory (the best a warm sequential epoch can do), by the
    faster of read() into a buffer and a copy out of a memory map (a loader slicing a memmap does the
    latter, without the system call per block: it beat the read() figure by 8%)."""
    buf = bytearray(BLOCK)
    size = path.stat().st_size
    best = 0.0
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
        for _ in range(3):
            f.seek(0)
            t0 = time.perf_counter()
            n = 0
            while k := f.readinto(buf):
                n += k
            best = max(best, n / 1e6 / (time.perf_counter() - t0))
        if size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                best = max(best, _mapped_copy_mb_per_s(mapped, buf, size))
    return best


def _mapped_copy_mb_per_s(mapped: mmap.mmap, buf: bytearray, size: int) -> float:
    """Best of three passes copying a mapped file into buf (its views end with this call, so the map
    can close)."""
    source = np.frombuffer(mapped, dtype=np.uint8)
    target = np.frombuffer(buf, dtype=np.uint8)
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for start in range(0, size, BLOCK):
            piece = source[start : start + BLOCK]
            target[: len(piece)] = piece
        best = max(best, size / 1e6 / (time.perf_counter() - t0))
    return best


def _cuda_copy_mb_per_s(src: torch.Tensor, dst: torch.Tensor, repeats: int = 5) -> float:
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        best = max(best, src.numel() * src.element_size() / 1e6 / (start.elapsed_time(end) / 1000))
    return best


def cuda_limits(device: torch.device, nbytes: int = 256 * 2**20) -> dict:
    n = nbytes // 4
    on_device = torch.empty(n, dtype=torch.float32, device=device)
    pageable = torch.ones(n, dtype=torch.float32)
    pinned = pageable.pin_memory()
    other = torch.empty_like(on_device)
    out = {
        "h2d_pageable_mb_per_s": _cuda_copy_mb_per_s(pageable, on_device),
        "h2d_pinned_mb_per_s": _cuda_copy_mb_per_s(pinned, on_device),
        # A device copy reads and writes each byte; count the bytes copied, like the others.
        "d2d_mb_per_s": _cuda_copy_mb_per_s(on_device, other),
        "cuda_device": torch.cuda.get_device_name(device),
    }
    del on_device, pageable, pinned, other
    torch.cuda.empty_cache()
    return out


def _sample_bytes(data_file: Path | None) -> int:
    """The sample size of the dataset the data file belongs to (the default dataset's for a probe)."""
    if data_file is not None:
        try:
            return Manifest.load(data_file.parent.parent).spec.sample_bytes
        except IobenchError:
            pass
    return DatasetSpec(DEFAULT_SIZE).sample_bytes


def _largest_data_file(data_dir: Path, at_least: int) -> Path | None:
    """The largest prepared data file under data_dir (what runs read), if one is big enough."""
    best = None
    for manifest in [data_dir / "manifest.json", *data_dir.glob("*/manifest.json")]:
        if not manifest.is_file():
            continue
        for path in manifest.parent.glob("*/*"):
            if path.is_file() and not path.name.startswith(".") and path.stat().st_size >= at_least:
                if best is None or path.stat().st_size > best.stat().st_size:
                    best = path
    return best


def measure_limits(
    data_dir: Path,
    device: torch.device,
    probe_bytes: int = DEFAULT_PROBE_BYTES,
    announce: Callable[[], None] | None = None,
    read_limit: float | None = None,
) -> MachineLimits:
    """Read a large file on the data directory's file system cold (O_DIRECT) and warm.

    The file is the largest prepared data file when one holds at least half of probe_bytes (on a
    virtual machine a freshly written probe may still sit in the host's cache and read faster than
    the data really does); otherwise a probe file of probe_bytes is written, read and deleted.
    """
    if probe_bytes < BLOCK:
        raise IobenchError(f"the probe file must be at least {BLOCK // 2**20} MiB")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IobenchError(f"cannot create {data_dir}: {exc.strerror or exc}") from None
    check_can_confine(Confinement(read_limit_mb_per_s=read_limit), data_dir)
    remove_stale_probes(data_dir)
    existing = _probe_source(data_dir, probe_bytes)
    if existing is None and not os.access(data_dir, os.W_OK | os.X_OK):
        raise IobenchError(
            f"{data_dir} is not writable: the limits need a probe file there, or a prepared dataset to read; "
            "measure them once with `iobench limits --data-dir` on a writable folder of the same disk"
        )
    if announce is not None:
        announce()
    probe = existing or data_dir / f"{PARTIAL_PREFIX}limits-probe-{os.getpid()}.bin"
    try:
        if existing is None:
            write_probe(probe, probe_bytes)
        evict([probe], "fadvise")  # an unmapped, fsynced file: fadvise is enough, no root needed
        sample_bytes = _sample_bytes(existing)
        block = read_block(sample_bytes)
        with confined(Confinement(read_limit_mb_per_s=read_limit), data_dir):
            storage, method = storage_read_mb_per_s(probe)
            random_iops = {(b, q): random_read_iops(probe, b, q) for b in dict.fromkeys((PAGE, block)) for q in (1, 32)}
        random_iops = {k: None if math.isnan(v) else v for k, v in random_iops.items()}  # tmpfs: no storage
        cache = page_cache_mb_per_s(probe)
        gather, gather_method = memory_gather_mb_per_s(probe, sample_bytes)
    except OSError as exc:
        raise IobenchError(f"cannot measure the limits in {data_dir}: {exc.strerror or exc}") from None
    finally:
        if existing is None:
            with contextlib.suppress(OSError):  # never a new error over the one that ended the probe
                probe.unlink()
    fstype, source = mount_of(data_dir)
    return MachineLimits(
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        hostname=platform.node(),
        data_dir=str(data_dir),
        data_filesystem=fstype,
        data_device=source,
        probe_file=str(probe) if existing is not None else "a fresh probe file",
        probe_bytes=probe.stat().st_size if existing is not None else probe_bytes,
        storage_read_mb_per_s=storage,
        storage_read_method=method,
        page_cache_read_mb_per_s=cache,
        read_limit_mb_per_s=read_limit,
        random_read_4k_qd1_iops=random_iops[PAGE, 1],
        random_read_4k_qd32_iops=random_iops[PAGE, 32],
        random_read_block_bytes=block,
        random_read_block_qd1_iops=random_iops[block, 1],
        random_read_block_qd32_iops=random_iops[block, 32],
        memory_gather_mb_per_s=gather,
        memory_gather_method=gather_method,
        gather_sample_bytes=sample_bytes,
        **(cuda_limits(device) if device.type == "cuda" else {}),
    )
