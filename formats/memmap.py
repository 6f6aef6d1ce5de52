"""memmap: a (features, labels) TensorDict saved with tensordict's memmap to a real directory.

`TensorDict.load_memmap(dir)` opens it with tensordict alone; `Sample.from_tensordict` wraps it
in the tensorclass. It is saved as a plain TensorDict (not the tensorclass) so that loading needs
no iobench code: a saved tensorclass records its Python class and cannot load without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, tensorclass

from formats.base import FormatReader, FormatWriter, HashedFile, StorageFormat
from iobench.dataset import Chunk, DatasetSpec

FEATURES = "features.memmap"
LABELS = "labels.memmap"


@tensorclass
class Sample:
    """A batch of samples as tensordict recommends: one tensorclass, indexed as a whole."""

    features: torch.Tensor
    labels: torch.Tensor


def _torch_dtype(spec: DatasetSpec) -> torch.dtype:
    return getattr(torch, spec.dtype)


class MemmapWriter(FormatWriter):
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
        self._files = [HashedFile(directory / FEATURES, "r+b"), HashedFile(directory / LABELS, "r+b")]
        self._digests: dict[str, str] = {}

    def write(self, chunk: Chunk) -> None:
        self._files[0].write(chunk.features)
        self._files[1].write(chunk.labels)

    def close(self) -> None:
        for f in self._files:
            if (digest := f.close()) is not None:
                self._digests[f.path.name] = digest

    def digests(self) -> dict[str, str]:
        return self._digests


class MemmapReader(FormatReader):
    def _open(self) -> TensorDict:
        return TensorDict.load_memmap(self.directory)

    def tensorclass(self) -> Sample:
        """The whole dataset as a lazily mapped tensorclass."""
        return Sample.from_tensordict(self.handle)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        td = self.handle[torch.as_tensor(indices, dtype=torch.int64)]
        return td["features"].numpy(), td["labels"].numpy()

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        td = self.handle
        return td["features"][start:stop].clone().numpy(), td["labels"][start:stop].clone().numpy()


class MemmapFormat(StorageFormat):
    name = "memmap"
    summary = "TensorDict memmap directory (meta.json + raw .memmap files)"
    writer_type = MemmapWriter
    reader_type = MemmapReader

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 3 * 4096
