"""hdf5: one file `data.h5` with chunked datasets `features` (N, *shape) and `labels` (N,) int64."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader, FormatWriter, ReaderTraits, StorageFormat
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import check_regular

FILENAME = "data.h5"
COMPRESSIONS = ("none", "lzf", "gzip")
DEFAULT_CHUNK_BYTES = 64 * 2**10


@dataclass(frozen=True)
class Hdf5Options:
    """chunk_rows 0 means about 64 KiB of features per chunk."""

    chunk_rows: int = 0
    compression: str = "none"
    compression_level: int = 4

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise IobenchError(
                f"unknown HDF5 compression {self.compression!r}; choose one of {', '.join(COMPRESSIONS)}"
            )
        if self.chunk_rows < 0:
            raise IobenchError(f"HDF5 chunk rows must be >= 0, got {self.chunk_rows}")
        if not 0 <= self.compression_level <= 9:
            raise IobenchError(f"gzip level must be 0..9, got {self.compression_level}")

    def rows(self, spec: DatasetSpec) -> int:
        rows = self.chunk_rows or max(1, DEFAULT_CHUNK_BYTES // spec.feature_bytes)
        return min(rows, spec.n_samples)

    def filter_args(self) -> dict:
        if self.compression == "none":
            return {}
        if self.compression == "gzip":
            return {"compression": "gzip", "compression_opts": self.compression_level}
        return {"compression": "lzf"}


class Hdf5Writer(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: Hdf5Options) -> None:
        super().__init__(directory, spec, options)
        rows = options.rows(spec)
        self._file = h5py.File(directory / FILENAME, "w", libver="latest")
        self._features = self._file.create_dataset(
            "features",
            shape=(spec.n_samples, *spec.shape),
            dtype=spec.np_dtype,
            chunks=(rows, *spec.shape),
            **options.filter_args(),
        )
        self._labels = self._file.create_dataset(
            "labels", shape=(spec.n_samples,), dtype=LABEL_DTYPE, chunks=(rows,), **options.filter_args()
        )
        for key, value in spec.to_json().items():  # readable by h5py alone; the source as JSON text
            self._file.attrs[key] = json.dumps(value) if isinstance(value, dict) or value is None else value

    def write(self, chunk: Chunk) -> None:
        self._features[chunk.start : chunk.stop] = chunk.features
        self._labels[chunk.start : chunk.stop] = chunk.labels

    def close(self) -> None:
        self._file.close()


MAX_CHUNK_BYTES = 256 * 2**20  # a chunk is read whole: a declared larger one is refused, not allocated


def stored_inside(f: h5py.File, name: str) -> h5py.Dataset | None:
    """The dataset at `name` if every byte of it lives in this file; None if there is none.

    HDF5 can make a dataset read another file: an external link on the path, external raw storage
    (`external=[(path, offset, size)]`, any path, `..` included) or a virtual dataset mapping other
    files. Each is refused, so that reading a file never reads outside it. Soft links are refused
    too: a loop of them ends in a recursion error inside the library."""
    parts = [p for p in name.split("/") if p]
    group = f
    for i, part in enumerate(parts):
        link = group.get(part, getlink=True)
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            raise ValueError(f"{f.filename}: {'/'.join(parts[: i + 1])!r} is a {type(link).__name__}, not stored here")
        group = group[part]
    if not isinstance(group, h5py.Dataset):
        return None
    if group.external:
        raise ValueError(f"{f.filename}: {name!r} keeps its data in other files (external storage)")
    if group.is_virtual:
        raise ValueError(f"{f.filename}: {name!r} is a virtual dataset over other files")
    return group


def check_datasets(f: h5py.File, spec: DatasetSpec) -> tuple[h5py.Dataset, h5py.Dataset]:
    """Both datasets with the spec's shapes and dtypes and chunks of sane size, before any read
    (a tiny file can declare a billion values per row)."""
    out = []
    for name, shape, dtype in (
        ("features", (spec.n_samples, *spec.shape), spec.np_dtype),
        ("labels", (spec.n_samples,), np.dtype(LABEL_DTYPE)),
    ):
        d = stored_inside(f, name)
        if not isinstance(d, h5py.Dataset) or d.shape != shape or d.dtype != dtype:
            found = f"{d.dtype} {d.shape}" if isinstance(d, h5py.Dataset) else "nothing"
            raise ValueError(f"{FILENAME}: {name!r} holds {found}; the spec says {dtype} {shape}")
        if d.chunks is not None and int(np.prod(d.chunks)) * dtype.itemsize > MAX_CHUNK_BYTES:
            raise ValueError(f"{FILENAME}: {name!r} declares chunks of {d.chunks}, larger than iobench writes")
        out.append(d)
    return out[0], out[1]


class Hdf5Reader(FormatReader):
    def _open(self) -> tuple[h5py.File, h5py.Dataset, h5py.Dataset]:
        check_regular(self.directory / FILENAME)
        f = h5py.File(self.directory / FILENAME, "r")
        try:
            features, labels = check_datasets(f, self.spec)
        except BaseException:
            f.close()
            raise
        return f, features, labels

    def _close(self, handle: tuple[h5py.File, h5py.Dataset, h5py.Dataset]) -> None:
        handle[0].close()

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _f, features, labels = self.handle
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.spec.n_samples):
            raise IndexError(f"indices out of range for {self.spec.n_samples} samples")
        # One read per sample: h5py's fancy indexing (a point selection that wants sorted, unique
        # indices) measured about twice as slow for scattered batches.
        out_f, out_l = self._empty(len(indices))
        for j, i in enumerate(indices.tolist()):
            out_f[j] = features[i]
            out_l[j] = labels[i]
        return out_f, out_l

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        _f, features, labels = self.handle
        return features[start:stop], labels[start:stop]

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        """One sample as a `__getitem__` reads it (`--fetch item`): a read of its row and of its label."""
        _f, features, labels = self.handle
        i = self._check_index(int(index))
        return features[i], int(labels[i])


class Hdf5ObjectReader(Hdf5Reader):
    """h5py on an s3fs file object, as HDF5 is read from S3 (`h5py.File(fs.open("bucket/key"))`): every read
    HDF5 makes is a read of that object, which s3fs serves from a read-ahead block of its default size (one
    ranged GET per block it does not hold). The same checks as the local reader before any sample is read."""

    # s3fs's first block: the whole of a small object
    traits = ReaderTraits(open_reads_data=True, imports=("s3fs",))

    def _local_directory(self) -> Path | None:
        return None

    def _open(self) -> tuple[h5py.File, h5py.Dataset, h5py.Dataset]:
        from iobench.storage.remote.bounds import forget, refused

        storage = self.storage
        path = storage.fsspec_path(FILENAME)  # plain names only: s3fs reads `?` in a key as a version, and more
        forget()
        self._object = FailFast(storage.s3fs("HDF5").open(path, "rb"), storage.url(FILENAME))
        try:
            f = h5py.File(self._object, "r")
        except OSError as exc:  # h5py says "file signature not found" for a read its file object refused
            self._object.close()
            said = refused() or self._object.failure or f"{storage.url(FILENAME)}: not a readable HDF5 file ({exc})"
            raise ValueError(said) from None
        try:
            features, labels = check_datasets(f, self.spec)
        except BaseException:
            f.close()
            self._object.close()
            raise
        return f, features, labels

    def _close(self, handle: tuple[h5py.File, h5py.Dataset, h5py.Dataset]) -> None:
        super()._close(handle)
        self._object.close()


class FailFast:
    """A file object whose first failed read is its last: h5py tries one offset after another when a read fails
    (a store that stalls then costs a timeout per try, minutes in all); the failure is kept, said once."""

    def __init__(self, inner: Any, url: str) -> None:
        self.inner, self.url, self.failure = inner, url, None

    def _guarded(self, name: str, *args: Any) -> Any:
        if self.failure is not None:
            raise OSError(self.failure)
        try:
            return getattr(self.inner, name)(*args)
        except Exception as exc:
            from iobench.errors import reason

            self.failure = f"{self.url}: {reason(exc)}"
            raise OSError(self.failure) from None

    def read(self, *args: Any) -> bytes:
        return self._guarded("read", *args)

    def readinto(self, *args: Any) -> int:
        return self._guarded("readinto", *args)

    def seek(self, *args: Any) -> int:
        return self._guarded("seek", *args)

    def tell(self) -> int:
        return self.inner.tell()

    def close(self) -> None:
        self.inner.close()


class Hdf5Format(StorageFormat):
    name = "hdf5"
    libraries = ("h5py",)  # what reads it (distribution names), for the record's `packages`
    options_type = Hdf5Options
    writer_type = Hdf5Writer
    reader_type = Hdf5Reader

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return Hdf5ObjectReader

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Hdf5Options) -> None:
        try:
            check_regular(directory / FILENAME)
            with h5py.File(directory / FILENAME, "r") as f:
                check_datasets(f, spec)
        except OSError as exc:
            raise ValueError(f"{FILENAME}: not a readable HDF5 file ({exc})") from None

    def resolve_options(self, spec: DatasetSpec, options: Hdf5Options) -> Hdf5Options:
        return replace(options, chunk_rows=options.rows(spec))

    def estimate_bytes(self, spec: DatasetSpec, options: Hdf5Options) -> int:
        # Compression of random data gains nothing and may cost a little; chunk index per chunk.
        chunks = -(-spec.n_samples // options.rows(spec))
        return int(spec.payload_bytes * 1.01) + 2 * chunks * 64 + 2**20
