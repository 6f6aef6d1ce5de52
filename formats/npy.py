"""npy: `features.npy` (N, *shape) and `labels.npy` (N,) int64, opened with np.load(mmap_mode="r")."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from iobench.formats.base import FixedLayout, FormatReader, HashedFile, StorageFormat, TwoFileWriter
from iobench.spec import LABEL_DTYPE, DatasetSpec
from iobench.system.fsutil import open_regular

FEATURES = "features.npy"
LABELS = "labels.npy"


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
        try:
            header = read_header(f)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{path.name}: not a readable .npy header ({exc})") from None
        offset = f.tell()
        size = os.fstat(f.fileno()).st_size
    found_shape, fortran, found_dtype = header
    if tuple(found_shape) != shape or found_dtype != dtype or fortran or found_dtype.hasobject:
        raise ValueError(f"{path.name} declares {found_dtype} {tuple(found_shape)}; the spec says {dtype} {shape}")
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if size != expected:
        raise ValueError(f"{path.name} holds {size} bytes; its header needs {expected}")
    return offset


class NpyReader(FormatReader):
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


class NpyFormat(StorageFormat):
    name = "npy"
    libraries = ("numpy",)  # what reads it (distribution names), for the record's `packages`
    writer_type = NpyWriter
    reader_type = NpyReader

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        check_header(directory / FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape))
        check_header(directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 2 * 4096
