"""What the shard formats (webdataset, tfrecord) share: each sample stored as one encoded blob (PNG for
image-shaped uint8, .npy otherwise), and beside the shards an index of where each blob lies (`index.npy`:
shard, offset, size) and the labels (`labels.npy`), both checked before any read, giving the random
access that `verify` and iobench's loaders need and the libraries do not offer."""

from __future__ import annotations

import functools
import io
import os
from abc import abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from iobench.formats.base import FormatReader, FormatWriter, HashedFile
from iobench.formats.files_layout import decode_image, png_axes
from iobench.formats.npy import npy_header, read_header
from iobench.formats.png import encode_png
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import open_regular, pread_full

INDEX, LABELS = "index.npy", "labels.npy"


class WholeShardsPerRank:
    """A format whose own pipeline gives each torchrun rank whole shards (`--loader native`): fewer shards
    than ranks would leave a rank without data. Mixed in before StorageFormat."""

    name: str

    def check_native_world(self, spec: DatasetSpec, options: Any, world: int, batch_size: int) -> None:
        if options.shards < world:
            raise ValueError(
                f"{options.shards} shard(s) cannot be shared by {world} ranks (each rank reads whole "
                f"shards): prepare with a smaller {self.name}.shard_samples"
            )


def extension(spec: DatasetSpec) -> str:
    return "png" if spec.dtype == "uint8" and png_axes(spec.shape) else "npy"


def npy_bytes(sample: np.ndarray) -> bytes:
    return npy_header(sample.dtype, sample.shape) + np.ascontiguousarray(sample).tobytes()


def write_npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(npy_header(array.dtype, array.shape))
        f.write(array.tobytes())


def load_npy(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    with open(open_regular(path), "rb") as f:
        found_shape, fortran, found_dtype = read_header(f)
        if fortran or found_dtype != dtype or tuple(found_shape) != shape:
            raise ValueError(f"{path}: a {found_dtype} array of {tuple(found_shape)}; expected {dtype} {shape}")
        data = np.frombuffer(f.read(), dtype=dtype)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: truncated")
    return data.reshape(shape)


def decode(data: bytes, spec: DatasetSpec, name: str) -> np.ndarray:
    """One sample's member: PNG with its header checked before decoding, or .npy without pickle."""
    if extension(spec) == "png":
        return decode_image(io.BytesIO(data), spec, png_axes(spec.shape), name)
    header = written_header(spec.dtype, tuple(spec.shape))
    if data.startswith(header):  # byte for byte the writer's header: it declares the spec's array
        offset, dtype = len(header), spec.np_dtype
    else:  # another writer's header (numpy's 1.0 layout, other padding): parsed and checked
        stream = io.BytesIO(data)
        shape, fortran, dtype = read_header(stream)
        if fortran or dtype != spec.np_dtype or tuple(shape) != tuple(spec.shape):
            raise ValueError(f"{name}: a {dtype} array of {tuple(shape)}; the spec says {spec.shape} {spec.dtype}")
        offset = stream.tell()
    values = np.frombuffer(data, dtype=dtype, offset=offset)
    if values.size != int(np.prod(spec.shape)):
        raise ValueError(f"{name}: truncated")
    return values.reshape(spec.shape)


@functools.lru_cache(maxsize=16)
def written_header(dtype: str, shape: tuple[int, ...]) -> bytes:
    """The .npy header the shard writers put before each sample of this dtype and shape."""
    return npy_header(np.dtype(dtype), shape)


def check_shard_count(recorded: int, derived: int) -> None:
    """The manifest's shard count is the one the writer derives from the spec and its options."""
    if recorded != derived:
        raise ValueError(f"the manifest says {recorded} shard(s); the writer makes {derived} of this dataset")


def require_index(directory: Path) -> None:
    for name in (INDEX, LABELS):
        if not (directory / name).is_file():
            raise ValueError(f"{directory / name} is missing")


class Shards:
    """The shards' descriptors: closed with the handle, or when a dropped reader is collected."""

    _close_fd = staticmethod(os.close)  # held here: at interpreter exit `os` may already be torn down

    def __init__(self, fds: list[int]) -> None:
        self.fds = fds

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            self._close_fd(fd)

    def __del__(self) -> None:
        self.close()


class IndexedShardsWriter(FormatWriter):
    """Encodes each sample as one blob and keeps `index.npy` (shard, offset, size per sample) and
    `labels.npy` beside the shards; a subclass stores each blob as its library does (`put`) and fills
    `self.index` with where it went, then closes its last shard (`finish_shards`)."""

    def __init__(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        super().__init__(directory, spec, options)
        directory.mkdir(parents=True, exist_ok=True)
        self.ext = extension(spec)
        self.index = np.zeros((spec.n_samples, 3), dtype=np.int64)  # shard, offset, size
        self.labels = HashedFile(directory / LABELS)
        self.labels.write(npy_header(np.dtype(LABEL_DTYPE), (spec.n_samples,)))

    @abstractmethod
    def put(self, index: int, payload: bytes, label: int) -> None:
        """Store sample `index`'s blob and label in the current shard."""

    @abstractmethod
    def finish_shards(self) -> None:
        """Close the last shard (and whatever the library writes beside it)."""

    def write(self, chunk: Chunk) -> None:
        if self.ext == "png":
            data = encode_png(chunk.features, png_axes(self.spec.shape))
        else:
            data = [npy_bytes(x) for x in chunk.features]
        for i, (payload, label) in enumerate(zip(data, chunk.labels, strict=True)):
            self.put(chunk.start + i, payload, int(label))
        self.labels.write(np.ascontiguousarray(chunk.labels, dtype=LABEL_DTYPE))

    def close(self) -> None:
        self.finish_shards()
        self.labels.close()
        write_npy(self.directory / INDEX, self.index)


class IndexedShardsReader(FormatReader):
    """Random access through the index; a subclass opens (index, labels, Shards) with its own checks and
    parses one blob as its library stores it."""

    @abstractmethod
    def parse(self, data: bytes, name: str) -> np.ndarray:
        """One sample from the bytes the index points at."""

    def _close(self, handle: Any) -> None:
        handle[2].close()

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index, labels, shards = self.handle
        features, out_labels = self._empty(len(indices))
        for row, i in enumerate(indices):
            shard, offset, size = (int(x) for x in index[self._check_index(int(i))])
            data = bytearray(size)
            if pread_full(shards.fds[shard], memoryview(data), offset) != size:
                raise ValueError(f"sample {int(i)}: its shard is shorter than the index says")
            features[row] = self.parse(bytes(data), f"sample {int(i)}")
        out_labels[:] = labels[np.asarray(indices, dtype=np.int64)]
        return features, out_labels
