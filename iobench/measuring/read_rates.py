"""How fast this machine moves data once it is in memory, each way a loader can: copies out of the page
cache, gathers of samples from memory, and CUDA copies (the storage's own reads are its storage's
`probe_ceilings`). Each figure is the best of the methods tried, and the method string names them all: a
ceiling a loader can beat is a slow implementation."""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from iobench.storage.local.disk_limits import BLOCK

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
