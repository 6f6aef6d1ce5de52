"""memmap: a (features, labels) TensorDict saved with tensordict's memmap to a real directory.

`TensorDict.load_memmap(dir)` opens it with tensordict alone; `Sample.from_tensordict` wraps it
in the tensorclass. It is saved as a plain TensorDict (not the tensorclass) so that loading needs
no iobench code: a saved tensorclass records its Python class and cannot load without it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from tensordict import TensorDict, tensorclass

from iobench.data.dataset import DatasetSpec
from iobench.formats.base import FormatReader, HashedFile, StorageFormat, TwoFileWriter

FEATURES = "features.memmap"
LABELS = "labels.memmap"


@tensorclass
class Sample:
    """A batch of samples as tensordict recommends: one tensorclass, indexed as a whole."""

    features: torch.Tensor
    labels: torch.Tensor


def _torch_dtype(spec: DatasetSpec) -> torch.dtype:
    return getattr(torch, spec.dtype)


class MemmapWriter(TwoFileWriter):
    """tensordict lays out the files and writes meta.json; the rows are filled with plain writes.

    Filling through the memory map would count every written page in the process' RSS (5 GB for
    --size 1e7); buffered writes keep it at one chunk.
    """

    def __init__(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        super().__init__(directory, spec, options)
        n = spec.n_samples
        # Expanded zero tensors: a template with the right shapes and dtypes that costs no memory.
        template = TensorDict(
            features=torch.zeros((), dtype=_torch_dtype(spec)).expand(n, *spec.shape),
            labels=torch.zeros((), dtype=torch.int64).expand(n),
            batch_size=[n],
        )
        mapped = template.memmap_like(prefix=directory)  # sparse files plus meta.json
        del mapped
        self._start(HashedFile(directory / FEATURES, "r+b"), HashedFile(directory / LABELS, "r+b"))


class MemmapReader(FormatReader):
    """Handle: the lazily mapped TensorDict, its tensorclass view, and plain fds for readahead hints."""

    def _open(self) -> tuple[TensorDict, Sample, list[BinaryIO]]:
        td = TensorDict.load_memmap(self.directory)
        # File objects rather than bare fds: they close themselves if the reader is dropped unclosed.
        files = [open(self.directory / name, "rb", buffering=0) for name in (FEATURES, LABELS)]
        # The same mapped memory seen as plain tensors: indexing a MemoryMappedTensor wraps every
        # result in the subclass, which at 1024-sample batches cost about a third of the time.
        plain = td.apply(lambda t: t.as_subclass(torch.Tensor))
        return td, Sample.from_tensordict(plain), files

    def _close(self, handle: tuple[TensorDict, Sample, list[BinaryIO]]) -> None:
        for f in handle[2]:
            f.close()

    def tensorclass(self) -> Sample:
        """The whole dataset as a tensorclass over the lazily mapped files."""
        return self.handle[1]

    def will_need(self, start: int, stop: int) -> None:
        """Ask the kernel to start reading samples [start, stop) now (asynchronous readahead)."""
        stop = min(stop, self.spec.n_samples)
        if stop <= start or not hasattr(os, "posix_fadvise"):
            return
        for f, row in zip(self.handle[2], (self.spec.feature_bytes, 8), strict=True):
            os.posix_fadvise(f.fileno(), start * row, (stop - start) * row, os.POSIX_FADV_WILLNEED)

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        data = self.handle[1]
        i = self._check_index(int(index))
        return data.features[i].clone().numpy(), int(data.labels[i])

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        td = self.handle[0][torch.as_tensor(indices, dtype=torch.int64)]
        return td["features"].numpy(), td["labels"].numpy()

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        td = self.handle[0]
        return td["features"][start:stop].clone().numpy(), td["labels"][start:stop].clone().numpy()


class MemmapFormat(StorageFormat):
    name = "memmap"
    writer_type = MemmapWriter
    reader_type = MemmapReader

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 3 * 4096
