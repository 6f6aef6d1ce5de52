"""memmap: a (features, labels) TensorDict saved with tensordict's memmap to a real directory.

`TensorDict.load_memmap(dir)` opens it with tensordict alone; `Sample.from_tensordict` wraps it
in the tensorclass. It is saved as a plain TensorDict (not the tensorclass) so that loading needs
no iobench code: a saved tensorclass records its Python class and cannot load without it.

iobench itself never calls `load_memmap` on a dataset: tensordict unpickles non-tensor entries
listed in meta.json, and a dataset may come from someone else. The reader maps exactly the two
files it wrote, with the dtype and shape of the manifest's spec, after checking that the folder
holds nothing else and that meta.json describes those two tensors and nothing more.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from tensordict import MemoryMappedTensor, TensorDict, tensorclass

from iobench.formats.base import FixedLayout, FormatReader, HashedFile, StorageFormat, TwoFileWriter
from iobench.formats.npy import RangedNpyReader
from iobench.spec import DatasetSpec
from iobench.system.fsutil import read_json

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


META = "meta.json"
EXPECTED_FILES = frozenset({META, FEATURES, LABELS})
_META_KEYS = frozenset({"features", "labels", "shape", "device", "_type", "_format_version", "_class"})


def check_layout(directory: Path, spec: DatasetSpec) -> None:
    """Refuse (ValueError, one line) a memmap folder that is not exactly what the writer leaves:
    no other file or folder (a pickled entry would be one), meta.json naming only our two tensors
    with the spec's shapes and dtypes, and files of exactly the size those need."""
    found = {p.name for p in directory.iterdir()}
    if found != EXPECTED_FILES:
        strays = sorted(found - EXPECTED_FILES) or sorted(EXPECTED_FILES - found)
        raise ValueError(
            f"{directory} holds {strays[0]!r}: a memmap dataset holds only {', '.join(sorted(EXPECTED_FILES))}"
        )
    try:
        meta = read_json(directory / META)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{directory / META} is not readable JSON ({exc})") from None
    if not isinstance(meta, dict) or set(meta) - _META_KEYS:
        extra = sorted(set(meta) - _META_KEYS) if isinstance(meta, dict) else ["(not an object)"]
        raise ValueError(f"{directory / META} lists {extra[0]!r}: only features and labels are accepted")
    expected = {
        "features": ([spec.n_samples, *spec.shape], f"torch.{spec.dtype}", spec.n_samples * spec.feature_bytes),
        "labels": ([spec.n_samples], "torch.int64", spec.n_samples * 8),
    }
    for key, (shape, dtype, nbytes) in expected.items():
        entry = meta.get(key)
        if not isinstance(entry, dict) or entry.get("shape") != shape or entry.get("dtype") != dtype:
            raise ValueError(f"{directory / META}: {key} is not a {dtype} tensor of shape {shape}")
        size = (directory / f"{key}.memmap").stat().st_size
        if size != nbytes:
            raise ValueError(f"{directory / key}.memmap holds {size} bytes, the spec needs {nbytes}")


class MemmapReader(FormatReader):
    """Handle: the lazily mapped TensorDict, its tensorclass view, and plain fds for readahead hints."""

    def _open(self) -> tuple[TensorDict, Sample, list[BinaryIO]]:
        check_layout(self.directory, self.spec)
        n = self.spec.n_samples
        # mode="r": a read-only (copy-on-write) mapping; nothing the reader does reaches the files.
        td = TensorDict(
            features=MemoryMappedTensor.from_filename(
                self.directory / FEATURES, _torch_dtype(self.spec), (n, *self.spec.shape), mode="r"
            ),
            labels=MemoryMappedTensor.from_filename(self.directory / LABELS, torch.int64, (n,), mode="r"),
            batch_size=[n],
        )
        # File objects rather than bare fds: they close themselves if the reader is dropped unclosed.
        files = [open(self.directory / name, "rb", buffering=0) for name in (FEATURES, LABELS)]
        # The same mapped memory seen as plain tensors: indexing a MemoryMappedTensor wraps every
        # result in the subclass, which at 1024-sample batches cost about a third of the time.
        plain = td.apply(lambda t: t.as_subclass(torch.Tensor))
        return td, Sample.from_tensordict(plain), files

    def _close(self, handle: tuple[TensorDict, Sample, list[BinaryIO]]) -> None:
        for f in handle[2]:
            f.close()

    def fixed_layout(self) -> FixedLayout:
        check_layout(self.directory, self.spec)
        return FixedLayout(self.directory / FEATURES, 0, self.directory / LABELS, 0)

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


class RangedMemmapReader(RangedNpyReader):
    """memmap's two raw files in object storage, read as npy's are (ranged GETs, no cache): no header, so each
    object must hold exactly the spec's rows. meta.json is not read (it is checked when prepared and verified)."""

    FEATURES, LABELS = FEATURES, LABELS

    def _checked(self, store: Any, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> int:
        import obstore

        size, expected = obstore.head(store, self.storage.key(name))["size"], int(np.prod(shape)) * dtype.itemsize
        if size != expected:
            raise ValueError(f"{self.storage.url(name)} holds {size} bytes; the spec needs {expected}")
        return 0


class MemmapFormat(StorageFormat):
    name = "memmap"
    libraries = ("tensordict",)  # what reads it (distribution names), for the record's `packages`
    writer_type = MemmapWriter
    reader_type = MemmapReader

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return RangedMemmapReader

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        check_layout(directory, spec)

    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        return spec.payload_bytes + 3 * 4096
