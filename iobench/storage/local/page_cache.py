"""Page-cache control for cold runs: drop a dataset's pages and check their residency.

Root uses /proc/sys/vm/drop_caches; anyone else fsyncs and asks the kernel to drop each file's
clean pages with posix_fadvise(DONTNEED), which only works for files nobody has mapped.
Residency is measured with mincore() on a fresh read-only mapping.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from iobench.choices import Choice
from iobench.errors import IobenchError
from iobench.system.fsutil import open_regular

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Eviction(Choice):
    """How cold evicts the files (`--eviction`)."""

    AUTO = "auto"  # fadvise: the dataset's files alone (cold means the dataset is cold, not iobench)
    DROP_CACHES = "drop_caches"
    FADVISE = "fadvise"


def evict(paths: Iterable[Path], method: str = "auto") -> str:
    """Evict the files' pages; returns the method used ('drop_caches' or 'fadvise').

    auto is fadvise: the files alone. drop_caches (root) takes iobench's own code and libraries too, which the program
    then reads back (a 520 MB cold command read 590-750 MB that way, 529 MB with fadvise); it evicts nothing of the
    files that fadvise leaves (pages another process maps survive both), only their metadata besides.
    """
    paths = list(paths)
    if method == "drop_caches":
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return "drop_caches"
        except OSError as exc:
            raise IobenchError(
                f"cannot drop caches ({exc.strerror}): run as root (sudo iobench ...) or use --eviction fadvise"
            ) from None
    _fadvise(paths)
    return "fadvise"


def _fadvise(paths: list[Path]) -> None:
    for path in paths:
        fd = open_regular(path)  # never waits on a FIFO swapped in for a data file
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_fraction(paths: Iterable[Path]) -> float:
    """Share of the files' pages in the page cache, by mincore() (0.0 to 1.0)."""
    resident = total = 0
    for path in paths:
        size = path.stat().st_size
        if size == 0:
            continue
        pages = -(-size // _PAGE)
        total += pages
        resident += _resident_pages(path, size, pages)
    return resident / total if total else 0.0


def _resident_pages(path: Path, size: int, pages: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, ctypes.c_size_t(size), mmap.PROT_READ, mmap.MAP_SHARED, fd, ctypes.c_long(0))
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed", str(path))
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed", str(path))
            return int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())  # bit 0: page resident
        finally:
            _libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))
    finally:
        os.close(fd)
