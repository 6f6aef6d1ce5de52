"""npy: `features.npy` (N, *shape) and `labels.npy` (N,) int64, opened with np.load(mmap_mode="r")."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from iobench.data.dataset import LABEL_DTYPE, DatasetSpec
from iobench.formats.base import FormatReader, HashedFile, StorageFormat, TwoFileWriter

FEATURES = "features.npy"
LABELS = "labels.npy"


def _header(dtype: np.dtype, shape: tuple[int, ...]) -> dict:
    return {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}


class NpyWriter(TwoFileWriter):
    """Writes the header, then appends raw rows: no memory map, so RSS stays at one chunk."""

    def __init__(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        super().__init__(directory, spec, options)
        files = []
        for name, dtype, shape in (
            (FEATURES, spec.np_dtype, (spec.n_samples, *spec.shape)),
            (LABELS, LABEL_DTYPE, (spec.n_samples,)),
        ):
            header = io.BytesIO()
            np.lib.format.write_array_header_2_0(header, _header(dtype, shape))
            files.append(HashedFile(directory / name))
            files[-1].write(header.getvalue())
        self._start(*files)


class NpyReader(FormatReader):
    def _open(self) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.load(self.directory / FEATURES, mmap_mode="r"),
            np.load(self.directory / LABELS, mmap_mode="r"),
        )

    def _close(self, handle: tuple[np.ndarray, np.ndarray]) -> None:
        for arr in handle:
            arr._mmap.close()

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
    writer_type = NpyWriter
    reader_type = NpyReader

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 2 * 4096
