"""npy: `features.npy` (N, *shape) and `labels.npy` (N,) int64, opened with np.load(mmap_mode="r").

From object storage, by index: iobench's reference reader (ranged GETs through obstore, no cache), or with
`--format-option npy.remote_reader=s3fs` the way its users read it, an s3fs file object seeked to each sample, its
reads served from s3fs's read-ahead blocks (`npy.s3fs_block`, s3fs's default 50 MiB)."""

from __future__ import annotations

import asyncio
import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import (
    OBJECT_STORAGE_ONLY,
    READ_ANY_LOADER,
    FixedLayout,
    FormatReader,
    HashedFile,
    ReaderTraits,
    StorageFormat,
    TwoFileWriter,
)
from iobench.spec import LABEL_DTYPE, DatasetSpec
from iobench.system.fsutil import open_regular

FEATURES = "features.npy"
LABELS = "labels.npy"
REMOTE_READERS = ("ranges", "s3fs")
# Ranged GETs one batch keeps in flight (`npy.remote_in_flight`). obstore's own get_ranges merges ranges less than
# 1 MiB apart (a shuffled batch of 1,024 rows read 51 MB of a 52 MB object: 96 bytes moved per byte delivered) and
# sends at most 10 at once (unmerged, 1,024 ranges of 30 ms would take 3 s): the reference asks each run of samples
# as one range, IN_FLIGHT at a time.
IN_FLIGHT = 64
S3FS_BLOCK = "50M"  # s3fs's default_block_size (50 * 2**20)


@dataclass(frozen=True)
class NpyOptions:
    # how object storage is read by index: "ranges" (iobench's reference, ranged GETs through obstore) or "s3fs"
    # (an s3fs file object, as users do), and the s3fs file's block: what each read outside it fetches
    remote_reader: str = field(default="ranges", metadata={**READ_ANY_LOADER, **OBJECT_STORAGE_ONLY})
    s3fs_block: str = field(default=S3FS_BLOCK, metadata={**READ_ANY_LOADER, **OBJECT_STORAGE_ONLY})
    # the ranged reader's GETs in flight per batch: the connections one reader keeps open to the store
    remote_in_flight: int = field(default=IN_FLIGHT, metadata={**READ_ANY_LOADER, **OBJECT_STORAGE_ONLY})

    def __post_init__(self) -> None:
        from iobench.units import parse_bytes

        if self.remote_reader not in REMOTE_READERS:
            raise IobenchError(f"npy remote_reader is one of {', '.join(REMOTE_READERS)}, got {self.remote_reader!r}")
        if parse_bytes(self.s3fs_block) < 1:
            raise IobenchError(f"npy s3fs_block is a size of at least one byte, got {self.s3fs_block!r}")
        if self.remote_in_flight < 1:
            raise IobenchError(f"npy remote_in_flight is at least 1, got {self.remote_in_flight}")
        if self.remote_in_flight != IN_FLIGHT and self.remote_reader != "ranges":
            raise IobenchError(
                "npy remote_in_flight is the ranged reader's; s3fs's file object reads one block at a time"
            )


def npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A .npy (2.0) header for a C-ordered array of dtype and shape; the data follows it."""
    header = io.BytesIO()
    fields = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_2_0(header, fields)
    return header.getvalue()


class NpyWriter(TwoFileWriter):
    """Writes the header, then appends raw rows: no memory map, so RSS stays at one chunk."""

    def __init__(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        super().__init__(directory, spec, options)
        files = []
        for name, dtype, shape in (
            (FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape)),
            (LABELS, LABEL_DTYPE, (spec.n_samples,)),
        ):
            files.append(HashedFile(directory / name))
            files[-1].write(npy_header(dtype, shape))
        self._start(*files)


# numpy parses a header with ast.literal_eval, and CPython 3.11's AST construction keeps its recursion depth
# per interpreter: two threads parsing at once can fail with "SystemError: AST constructor recursion depth
# mismatch" (seen with --loader nodes reading .npy members from two threads). One parse at a time.
HEADER_LOCK = threading.Lock()


def read_header(f: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy whose first byte f is at; leaves f at the data.
    The header is a Python literal parsed by numpy's safe parser, never unpickled."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    with HEADER_LOCK:
        shape, fortran, dtype = read(f, max_header_size=10_000)
    return tuple(shape), fortran, dtype


def check_header(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> int:
    """The header must declare the spec's dtype and shape, and the file hold exactly that much data
    (a header can declare anything; this is read before any mapping). Returns where the data starts."""
    with open(open_regular(path), "rb") as f:  # a link or a FIFO planted in a dataset is refused here
        return checked_header(path.name, f, os.fstat(f.fileno()).st_size, dtype, shape)


def checked_header(name: str, f: BinaryIO, size: int, dtype: np.dtype, shape: tuple[int, ...]) -> int:
    """`check_header` of a stream at the file's start (a local file, or an object's first bytes) and the
    file's size."""
    try:
        found_shape, fortran, found_dtype = read_header(f)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{name}: not a readable .npy header ({exc})") from None
    offset = f.tell()
    if tuple(found_shape) != shape or found_dtype != dtype or fortran or found_dtype.hasobject:
        raise ValueError(f"{name} declares {found_dtype} {tuple(found_shape)}; the spec says {dtype} {shape}")
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if size != expected:
        raise ValueError(f"{name} holds {size} bytes; its header needs {expected}")
    return offset


class NpyReader(FormatReader):
    traits = ReaderTraits(threads_share=True)  # numpy's read-only mappings

    def _open(self) -> tuple[np.ndarray, np.ndarray]:
        spec = self.spec
        check_header(self.directory / FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape))
        check_header(self.directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))
        return (
            np.load(self.directory / FEATURES, mmap_mode="r", allow_pickle=False),
            np.load(self.directory / LABELS, mmap_mode="r", allow_pickle=False),
        )

    def _close(self, handle: tuple[np.ndarray, np.ndarray]) -> None:
        for arr in handle:
            arr._mmap.close()

    def fixed_layout(self) -> FixedLayout:
        spec, features, labels = self.spec, self.directory / FEATURES, self.directory / LABELS
        start = check_header(features, spec.np_dtype, (spec.n_samples, *spec.shape))
        return FixedLayout(features, start, labels, check_header(labels, np.dtype(LABEL_DTYPE), (spec.n_samples,)))

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        features, labels = self.handle
        i = self._check_index(int(index))
        return np.array(features[i]), int(labels[i])

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        return features[indices], labels[indices]

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        return np.array(features[start:stop]), np.array(labels[start:stop])


HEADER_BYTES = 4096  # a .npy header is at most this (numpy writes 64-byte-aligned headers of a few hundred)


async def _ranges(store: Any, key: str, starts: list[int], stops: list[int], in_flight: int) -> list[Any]:
    import obstore

    from iobench.storage.remote import client_counts

    gate = asyncio.Semaphore(in_flight)

    async def one(start: int, stop: int) -> Any:
        async with gate:
            got = await obstore.get_range_async(store, key, start=start, end=stop)
            client_counts.add("GET", len(got))
            return got

    return await asyncio.gather(*(one(a, b) for a, b in zip(starts, stops, strict=True)))


class RangedNpyReader(FormatReader):
    """npy in object storage, read the way a remote reference loader reads it: the headers checked from the objects'
    first bytes, the labels read whole once, and each batch's samples fetched as byte ranges of the features object
    (obstore), each run of consecutive samples as one range, `in_flight` ranges at a time. No cache: every epoch
    reads from the store."""

    def _local_directory(self) -> None:
        return None  # nothing local: the storage addresses the objects

    FEATURES, LABELS = FEATURES, LABELS  # the objects; a format with the same fixed layout names its own

    def _open(self) -> tuple[Any, int, np.ndarray]:
        from iobench.storage.remote.client_errors import worded  # light: only a remote read loads it

        with worded(self.storage.url(self.FEATURES)):
            return self._opened()

    def _opened(self) -> tuple[Any, int, np.ndarray]:
        import obstore

        from iobench.storage.remote import client_counts

        spec, store = self.spec, self.storage.store()
        offset = self._checked(store, self.FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape))
        label_offset = self._checked(store, self.LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))
        raw = obstore.get_range(store, self.storage.key(self.LABELS), start=label_offset, length=spec.n_samples * 8)
        client_counts.add("GET", len(raw))
        return store, offset, np.frombuffer(bytes(raw), dtype=LABEL_DTYPE)

    def _checked(self, store: Any, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> int:
        """Where the data starts in the object, once its header says the spec's dtype and shape and its size
        holds exactly that."""
        import obstore

        from iobench.storage.remote import client_counts

        key = self.storage.key(name)
        size = obstore.head(store, key)["size"]
        first = bytes(obstore.get_range(store, key, start=0, length=min(HEADER_BYTES, size)))
        client_counts.add("HEAD")
        client_counts.add("GET", len(first))
        return checked_header(self.storage.url(name), io.BytesIO(first), size, dtype, shape)

    def _close(self, handle: Any) -> None:
        return None

    @property
    def in_flight(self) -> int:
        """Ranges asked at once: npy's option, or the reference's default for a format without it (memmap)."""
        return self.options.remote_in_flight if isinstance(self.options, NpyOptions) else IN_FLIGHT

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        store, offset, labels = self.handle
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size == 0:
            return self._empty(0)
        if indices.min() < 0 or indices.max() >= self.spec.n_samples:
            raise IndexError(f"sample index out of range for {self.spec.n_samples} samples")
        row = self.spec.feature_bytes
        order = np.argsort(indices, kind="stable")
        wanted = indices[order]
        begins = np.flatnonzero(np.diff(wanted, prepend=-2) != 1)  # runs of consecutive samples: one range each
        ends = np.append(begins[1:], len(wanted)) - 1
        starts = (offset + wanted[begins] * row).tolist()
        stops = (offset + (wanted[ends] + 1) * row).tolist()
        from iobench.storage.remote.client_errors import worded  # light: only a remote read loads it

        with worded(self.storage.url(self.FEATURES)):
            parts = asyncio.run(_ranges(store, self.storage.key(self.FEATURES), starts, stops, self.in_flight))
        read = np.frombuffer(b"".join(bytes(p) for p in parts), dtype=self.spec.np_dtype)
        features = np.empty((len(indices), *self.spec.shape), dtype=self.spec.np_dtype)
        features[order] = read.reshape(len(indices), *self.spec.shape)
        return features, labels[indices].copy()

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        features, labels = self.batch(np.array([self._check_index(int(index))]))
        return features[0], int(labels[0])

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self.batch(np.arange(start, stop))


class S3fsNpyReader(RangedNpyReader):
    """npy in object storage read as its users read it with s3fs: the labels read whole when it opens, then one s3fs
    file object of the features (its read-ahead cache of `s3fs_block` bytes; a read outside it fetches the next block
    from there), opened and its header checked at the first batch, seeked to each sample in the batch's order as a
    Dataset's `__getitem__` does. Opening it reads no features: a script reads the labels before its loop and its
    first `__getitem__` opens the features, whose first block (50 MiB by default) is the whole of a small file."""

    traits = ReaderTraits(imports=("s3fs",))

    def _opened(self) -> list[Any]:
        spec, storage = self.spec, self.storage
        fs = storage.s3fs("npy with remote_reader=s3fs")
        with fs.open(storage.fsspec_path(LABELS), "rb") as f:
            checked_header(storage.url(LABELS), f, f.size, np.dtype(LABEL_DTYPE), (spec.n_samples,))
            labels = np.frombuffer(f.read(spec.n_samples * 8), dtype=LABEL_DTYPE)
        # the file system, the features' file object and offset once opened, the labels, a row's bytes, dtype, shape
        return [fs, None, 0, labels, spec.feature_bytes, spec.np_dtype, spec.shape]

    def _features(self) -> tuple[Any, int]:
        from iobench.units import parse_bytes

        handle, spec, storage = self.handle, self.spec, self.storage
        if handle[1] is None:
            features = handle[0].open(
                storage.fsspec_path(FEATURES), "rb", block_size=parse_bytes(self.options.s3fs_block)
            )
            try:
                handle[2] = checked_header(
                    storage.url(FEATURES), features, features.size, spec.np_dtype, (spec.n_samples, *spec.shape)
                )
            except BaseException:
                features.close()
                raise
            handle[1] = features
        return handle[1], handle[2]

    def _close(self, handle: Any) -> None:
        if handle[1] is not None:
            handle[1].close()

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        """One sample as a `__getitem__` reads it: a seek and a read of its row (what it needs kept in the handle:
        a `__getitem__` of a user's Dataset does no more per sample)."""
        handle = self.handle
        if handle[1] is None:
            self._features()
        _fs, f, offset, labels, row, dtype, shape = handle
        i = self._check_index(int(index))
        f.seek(offset + i * row)
        data = f.read(row)
        if len(data) != row:
            raise ValueError(f"{self.storage.url(FEATURES)}: {len(data)} bytes of sample {i}, not {row}")
        return np.frombuffer(data, dtype=dtype).reshape(shape), int(labels[i])

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f, offset = self._features()
        labels = self.handle[3]
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= self.spec.n_samples):
            raise IndexError(f"sample index out of range for {self.spec.n_samples} samples")
        row, spec = self.spec.feature_bytes, self.spec
        features = np.empty((len(indices), *spec.shape), dtype=spec.np_dtype)
        for j, i in enumerate(indices.tolist()):
            f.seek(offset + i * row)
            data = f.read(row)
            if len(data) != row:
                raise ValueError(f"{self.storage.url(FEATURES)}: {len(data)} bytes of sample {i}, not {row}")
            features[j] = np.frombuffer(data, dtype=spec.np_dtype).reshape(spec.shape)
        return features, labels[indices].copy()


class NpyFormat(StorageFormat):
    name = "npy"
    libraries = ("numpy",)  # what reads it (distribution names), for the record's `packages`
    options_type = NpyOptions
    writer_type = NpyWriter
    reader_type = NpyReader

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return S3fsNpyReader if getattr(options, "remote_reader", None) == "s3fs" else RangedNpyReader

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        check_header(directory / FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape))
        check_header(directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 2 * 4096
