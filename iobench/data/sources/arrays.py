"""`X.npy` (labels `--labels Y.npy`) and `D.npz --features-key x --labels-key y`: read with plain reads
and streamed out of the archive, never mapped or loaded whole."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from iobench.data.sources.base import SourceKind
from iobench.formats.npy import read_header
from iobench.spec import SourceInfo
from iobench.system.fsutil import check_regular, open_regular, pread_full


class RawRows:
    """Rows of a C-ordered array in a file, read with plain reads: a memory map of the source would
    count every page read in the process's RSS (a 2 GB source: 2 GB of RSS)."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        # Read-only, no link followed, no FIFO waited on: closed by reading.__exit__.
        self.file = open(open_regular(path), "rb")  # noqa: SIM115
        self.offset, self.shape, self.dtype, self.ndim = offset, shape, np.dtype(dtype), len(shape)
        self.row_bytes = int(np.prod(shape[1:], dtype=object)) * self.dtype.itemsize
        if os.fstat(self.file.fileno()).st_size < offset + shape[0] * self.row_bytes:
            self.file.close()
            raise ValueError(f"{path.name} is shorter than its {shape} {self.dtype} need")

    @classmethod
    def of_npy(cls, path: Path) -> RawRows:
        with open(open_regular(path), "rb") as f:
            shape, fortran, dtype = read_header(f)
            offset = f.tell()
        if fortran or dtype.hasobject or not shape:
            raise ValueError(f"{path.name}: features must be C-ordered numbers, one sample per row")
        return cls(path, offset, tuple(shape), dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        out = np.empty((stop - start, *self.shape[1:]), dtype=self.dtype)
        view = memoryview(out).cast("B")
        if pread_full(self.file.fileno(), view, self.offset + start * self.row_bytes) < len(view):
            raise ValueError("the source file ended early")
        return out

    def close(self) -> None:
        self.file.close()


class NpzMember:
    """One array of an .npz, read front to back out of the archive (stored or deflated) without
    loading it whole; slices must come in increasing order, as the writers read them."""

    def __init__(self, path: Path, key: str) -> None:
        check_regular(path)
        self.zip = zipfile.ZipFile(path)
        name = f"{key}.npy"
        if name not in self.zip.namelist():
            keys = [n.removesuffix(".npy") for n in self.zip.namelist()]
            raise KeyError(f"no array {key!r} in the archive (it holds {', '.join(keys)})")
        self.stream = self.zip.open(name)
        shape, fortran, self.dtype = read_header(self.stream)
        if fortran or self.dtype.hasobject or not shape:
            raise ValueError(f"array {key!r} must be C-ordered numbers, one sample per row")
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.position = 0

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        if start < self.position:
            raise ValueError("an .npz member is read in order")
        skip = (start - self.position) * self.row_bytes
        while skip > 0:  # in pieces: a skip is not a reason to hold gigabytes
            skipped = len(self.stream.read(min(skip, 2**24)))
            if not skipped:
                break
            skip -= skipped
        data = self.stream.read((stop - start) * self.row_bytes)
        self.position = stop
        if len(data) != (stop - start) * self.row_bytes:
            raise ValueError("the archive member is shorter than its header says")
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, *self.shape[1:])


class NpySource(SourceKind):
    name = "npy"
    suffixes = (".npy",)
    takes_labels_file = True

    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        features = RawRows.of_npy(Path(info.path))
        closing.append(features)
        labels = RawRows.of_npy(Path(info.labels)) if info.labels else None
        if labels is not None:
            closing.append(labels)
        return features, labels


class NpzSource(SourceKind):
    name = "npz"
    suffixes = (".npz",)

    def keys(
        self, path: Path, inner: str, features_key: str | None, labels_key: str | None, text: str
    ) -> tuple[str, str]:
        labels = labels_key or ""
        if labels_key is None and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:  # the default key when the archive has it; zeros otherwise
                labels = "labels" if "labels.npy" in archive.namelist() else ""
        return features_key or "features", labels

    def open(self, info: SourceInfo, closing: list[Any]) -> tuple[Any, Any]:
        path = Path(info.path)
        features = NpzMember(path, info.features)
        # Streamed like the features, after its declared length is checked (a 1 MB member may
        # declare 2^40 labels, or inflate to gigabytes).
        labels = NpzMember(path, info.labels) if info.labels else None
        return features, labels
