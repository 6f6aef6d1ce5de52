"""zarr: a Zarr v3 group with a `features` and a `labels` array, chunked along samples and sharded.

Written by zarr itself (`zarr.open_group(...).create_array(..., chunks=, shards=)`, its default zstd
compressor), a whole shard per write (a partial shard write re-reads and re-writes the shard). Chunks
hold `chunk_samples` samples, about 1 MiB (the Zarr user guide's "at least 1 MB uncompressed"); shards
hold `shard_chunks` chunks, so a large dataset is tens of files rather than thousands.

Read as its users read it: a batch is one orthogonal selection of its sorted indices (`array.oindex`),
each chunk decoded once per batch however many of its samples the batch takes, then put back in the
batch's order. Before the group is opened its metadata is checked against what the writer leaves: the
dtype, the shape, the very chunk grid of the manifest's options, only the codecs the writer uses (numcodecs
offers a pickle codec; a crafted zarr.json could name it), no consolidated metadata (zarr would read it
instead of the arrays' own); every chunk file present, none a link. zarr then reads through a store that
opens only regular files and a zstd codec that never inflates a chunk past its size (formats.zarr_store).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import (
    OBJECT_STORAGE_ONLY,
    READ,
    FormatReader,
    FormatWriter,
    NativeRead,
    Pipeline,
    StorageFormat,
)
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import read_json

CHUNK_BYTES = 2**20
REMOTE_STORES = ("obstore", "fsspec")


@dataclass(frozen=True)
class ZarrOptions:
    chunk_samples: int = 0  # 0: about 1 MiB of samples (resolved when writing)
    shard_chunks: int = 64
    # zarr's store over object storage: "obstore" (ObjectStore) or "fsspec" (FsspecStore over s3fs)
    remote_store: str = field(default="obstore", metadata={**READ, **OBJECT_STORAGE_ONLY})

    def __post_init__(self) -> None:
        if self.remote_store not in REMOTE_STORES:
            raise IobenchError(f"zarr remote_store is one of {', '.join(REMOTE_STORES)}, got {self.remote_store!r}")
        for name in ("chunk_samples", "shard_chunks"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise IobenchError(f"zarr {name} must be a whole number >= 0, got {value!r}")
        if self.shard_chunks < 1:
            raise IobenchError("zarr shard_chunks must be >= 1")


class ZarrWriter(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: ZarrOptions) -> None:
        super().__init__(directory, spec, options)
        import zarr

        n = spec.n_samples
        c, shard = shard_layout(spec, options)  # whole chunks (zarr requires it), the last one partial
        group = zarr.open_group(store=str(directory), mode="w", zarr_format=3)
        self.features = group.create_array(
            "features", shape=(n, *spec.shape), dtype=spec.dtype, chunks=(c, *spec.shape), shards=(shard, *spec.shape)
        )
        self.labels = group.create_array("labels", shape=(n,), dtype=LABEL_DTYPE, chunks=(min(n, LABEL_CHUNK),))
        self.shard = shard
        self.pending: list[Chunk] = []
        self.start = 0  # first sample not yet written

    def write(self, chunk: Chunk) -> None:
        self.pending.append(chunk)
        held = sum(len(c.labels) for c in self.pending)
        if held >= self.shard:
            self._flush(whole_shards_only=True)

    def _flush(self, whole_shards_only: bool) -> None:
        features = np.concatenate([c.features for c in self.pending])
        labels = np.concatenate([c.labels for c in self.pending])
        take = len(labels) // self.shard * self.shard if whole_shards_only else len(labels)
        if take:
            self.features[self.start : self.start + take] = features[:take]
            self.labels[self.start : self.start + take] = labels[:take]
        rest = Chunk(self.start + take, features[take:], labels[take:]) if take < len(labels) else None
        self.start += take
        self.pending = [rest] if rest is not None else []

    def close(self) -> None:
        if self.pending:
            self._flush(whole_shards_only=False)


def check_store(directory: Path, spec: DatasetSpec, options: ZarrOptions | None = None, chunks: bool = True) -> None:
    """What zarr would read, checked before it reads: the group (no consolidated metadata, which zarr would
    read instead of the arrays' own), each array's dtype, shape, grid and codecs as the writer leaves them
    (with `options`, the very grid of its chunk sizes), every chunk the grid names a plain file (`chunks`:
    False for the metadata alone, fetched from object storage), no links."""
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            if Path(root, name).is_symlink():
                raise ValueError(f"{Path(root, name)}: a link in the zarr store")
    group = _metadata(directory / "zarr.json")
    if group.get("node_type") != "group" or group.get("zarr_format") != 3:
        raise ValueError(f"{directory / 'zarr.json'}: not a zarr v3 group")
    if group.get("consolidated_metadata") is not None:
        raise ValueError(f"{directory / 'zarr.json'}: consolidated metadata is not read (the writer leaves none)")
    n, shape = spec.n_samples, tuple(spec.shape)
    meta = _array(directory, "features", spec.dtype, (n, *shape))
    shard, codecs = _grid(meta, directory / "features", shape), meta.get("codecs")
    if not (
        isinstance(codecs, list)
        and len(codecs) == 1
        and isinstance(codecs[0], dict)
        and codecs[0].get("name") == "sharding_indexed"
    ):
        raise ValueError(f"{directory / 'features/zarr.json'}: not one sharding codec, as the writer uses")
    config = codecs[0].get("configuration") or {}
    chunk = _samples(config.get("chunk_shape"), shape, directory / "features")
    if shard % chunk:
        raise ValueError(f"{directory / 'features/zarr.json'}: shards of {shard} samples in chunks of {chunk}")
    _codecs(config.get("codecs"), DATA_CODECS, directory / "features")
    _codecs(config.get("index_codecs"), INDEX_CODECS, directory / "features")
    if chunk * spec.feature_bytes > MAX_CHUNK_BYTES:
        raise ValueError(f"{directory / 'features/zarr.json'}: chunks of {chunk * spec.feature_bytes:,} bytes")
    if options is not None and (chunk, shard) != shard_layout(spec, options):
        raise ValueError(
            f"{directory / 'features/zarr.json'}: chunks of {chunk} and shards of {shard} samples; "
            f"the manifest's options give {shard_layout(spec, options)}"
        )
    labels = _array(directory, "labels", "int64", (n,))
    label_chunk = _grid(labels, directory / "labels", ())
    if label_chunk != min(n, LABEL_CHUNK):
        raise ValueError(f"{directory / 'labels/zarr.json'}: chunks of {label_chunk}, not {min(n, LABEL_CHUNK)}")
    _codecs(labels.get("codecs"), DATA_CODECS, directory / "labels")
    zeros = "/0" * len(shape)
    for array, size, suffix in (("features", shard, zeros), ("labels", label_chunk, "")) if chunks else ():
        for k in range(-(-n // size)):
            path = directory / array / "c" / f"{k}{suffix}"
            if not path.is_file():
                raise ValueError(f"{path}: a chunk of the grid is missing")


MAX_CHUNK_BYTES = 2**30  # decoded; the writer's are about 1 MiB (CHUNK_BYTES) unless chunk_samples says more
LABEL_CHUNK = 2**17
DATA_CODECS = {"bytes", "zstd"}  # what zarr writes by default, and so the writer
INDEX_CODECS = {"bytes", "crc32c"}


def shard_layout(spec: DatasetSpec, options: ZarrOptions) -> tuple[int, int]:
    """(samples per chunk, samples per shard) as the writer lays them out."""
    n = spec.n_samples
    c = min(options.chunk_samples, n)
    return c, c * min(options.shard_chunks, -(-n // c))


def _metadata(path: Path) -> dict:
    try:
        meta = read_json(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object")
    return meta


def _array(directory: Path, name: str, dtype: str, shape: tuple[int, ...]) -> dict:
    path = directory / name / "zarr.json"
    meta = _metadata(path)
    if meta.get("node_type") != "array" or meta.get("data_type") != dtype or tuple(meta.get("shape", ())) != shape:
        raise ValueError(f"{path}: {meta.get('data_type')} {meta.get('shape')}; the spec says {dtype} {shape}")
    if meta.get("storage_transformers"):
        raise ValueError(f"{path}: storage transformers are not read")
    if meta.get("chunk_key_encoding") != {"name": "default", "configuration": {"separator": "/"}}:
        raise ValueError(f"{path}: chunk keys {meta.get('chunk_key_encoding')} are not the writer's")
    return meta


def _grid(meta: dict, where: Path, sample_shape: tuple[int, ...]) -> int:
    """Samples per chunk of a regular grid over whole samples."""
    grid = meta.get("chunk_grid")
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        raise ValueError(f"{where / 'zarr.json'}: not a regular chunk grid")
    return _samples((grid.get("configuration") or {}).get("chunk_shape"), sample_shape, where)


def _samples(chunk_shape: Any, sample_shape: tuple[int, ...], where: Path) -> int:
    ok = isinstance(chunk_shape, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in chunk_shape)
    if not ok or tuple(chunk_shape[1:]) != sample_shape or chunk_shape[0] < 1:
        raise ValueError(f"{where / 'zarr.json'}: chunks of {chunk_shape} are not whole samples of {sample_shape}")
    return chunk_shape[0]


def _codecs(codecs: Any, allowed: set[str], where: Path) -> None:
    names = {c.get("name") if isinstance(c, dict) else c for c in codecs} if isinstance(codecs, list) else {None}
    if not names <= allowed:
        raise ValueError(
            f"{where / 'zarr.json'}: codecs {sorted(map(str, names - allowed))} are not read (only {sorted(allowed)})"
        )


def open_arrays(directory: Path, spec: DatasetSpec, options: ZarrOptions | None = None) -> tuple[Any, Any]:
    from iobench.formats.zarr_store import checked_arrays

    check_store(directory, spec, options)
    return checked_arrays(directory)


def sorted_read(features: Any, indices: np.ndarray) -> np.ndarray:
    """A batch in one orthogonal selection of its sorted indices, back in the batch's order; a run of
    consecutive indices (a sequential epoch) as the slice zarr reads a range with (an integer selection of
    the same 256 images is 25x slower here)."""
    order = np.argsort(indices, kind="stable")
    ordered = np.asarray(indices)[order]
    if len(ordered) and (np.diff(ordered) == 1).all():
        data = np.asarray(features[int(ordered[0]) : int(ordered[-1]) + 1])
    else:
        data = features.oindex[ordered]
    out = np.empty_like(data)
    out[order] = data
    return out


class ZarrReader(FormatReader):
    def _open(self) -> tuple[Any, np.ndarray]:
        features, labels = open_arrays(self.directory, self.spec, self.options)
        return features, np.asarray(labels[:], dtype=LABEL_DTYPE)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        idx = np.array([self._check_index(int(i)) for i in indices], dtype=np.int64)
        return sorted_read(features, idx), labels[idx]

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        return np.asarray(features[start:stop]), labels[start:stop]


METADATA = ("zarr.json", "features/zarr.json", "labels/zarr.json")


class ZarrObjectReader(ZarrReader):
    """The group in object storage through one of zarr's own stores (`remote_store`: `ObjectStore` over obstore, or
    `FsspecStore` over s3fs), read-only, with the checked zstd codec; its three metadata documents are fetched through
    that store and checked as a local store's are before zarr opens the group."""

    def _local_directory(self) -> Path | None:
        return None

    @classmethod
    def clients(cls, options: ZarrOptions) -> tuple[str, ...]:
        return ("s3fs",) if options.remote_store == "fsspec" else ()

    def _open(self) -> tuple[Any, np.ndarray]:
        from iobench.formats.zarr_store import checked_remote_arrays, close_remote_store, remote_store

        store = remote_store(self.storage, self.options.remote_store)
        try:
            checked = self._checked_metadata(store)
            counted = self.options.remote_store != "fsspec"  # obstore's requests: no client of ours sees them
            features, labels = checked_remote_arrays(store, self.storage.prefix, checked, counted)
            handle = features, np.asarray(labels[:], dtype=LABEL_DTYPE)
        except BaseException:
            close_remote_store(store)
            raise
        self._store = store
        return handle

    def _checked_metadata(self, store: Any) -> dict[str, bytes]:
        """The group's and arrays' metadata through `store`, checked as a local store's: by key."""
        from iobench.formats.zarr_store import fetch
        from iobench.storage.remote.client_errors import worded

        with worded(self.storage.url("")):
            fetched = fetch(store, [self.storage.key(name) for name in METADATA])
        with tempfile.TemporaryDirectory(prefix="iobench-zarr-metadata-") as folder:
            for name, data in zip(METADATA, fetched, strict=True):
                if data is None:
                    raise ValueError(f"{self.storage.url(name)}: missing (not a zarr group)")
                if len(data) > 2**20:
                    raise ValueError(f"{self.storage.url(name)}: {len(data):,} bytes is not zarr metadata")
                path = Path(folder, name)
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(data)
            check_store(Path(folder), self.spec, self.options, chunks=False)
        return {self.storage.key(name): data for name, data in zip(METADATA, fetched, strict=True)}

    def _close(self, handle: tuple[Any, np.ndarray]) -> None:
        from iobench.formats.zarr_store import close_remote_store

        close_remote_store(self._store)


class _Batches:
    """Map-style: indexed with a batch of indices, it reads them the zarr way (in a worker)."""

    def __init__(self, reader: ZarrReader, transform: Any) -> None:
        self.reader, self.transform = reader, transform

    def __len__(self) -> int:
        return len(self.reader)

    def __getitems__(self, keys: list[int]) -> tuple[Any, Any, Any]:
        import torch

        idx = np.asarray(keys, dtype=np.int64)
        features, labels = self.reader.batch(idx)
        batch = torch.from_numpy(features)
        if self.transform is not None:
            batch = self.transform.per_samples(batch)
        return batch, torch.from_numpy(labels), torch.from_numpy(idx)


def _as_read(batch: Any) -> Any:
    """Collate for `_Batches`, whose items are whole batches already (module level: workers pickle it)."""
    return batch


class ZarrFormat(StorageFormat):
    name = "zarr"
    libraries = ("zarr", "numcodecs")  # what reads it (distribution names), for the record's `packages`
    options_type = ZarrOptions
    writer_type = ZarrWriter
    reader_type = ZarrReader
    remote_pipeline = True  # its batches read through the reader: zarr's ObjectStore over object storage

    def pipeline(self, reader: ZarrReader, read: NativeRead) -> Pipeline:
        """Shuffled batches read as sorted orthogonal selections, in a DataLoader with the run's workers."""
        return Pipeline(_Batches(reader, read.transform), read.batch_size, shuffle=read.shuffle, collate_fn=_as_read)

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return ZarrObjectReader

    def resolve_options(self, spec: DatasetSpec, options: ZarrOptions) -> ZarrOptions:
        if options.chunk_samples:
            return options
        return replace(options, chunk_samples=max(1, CHUNK_BYTES // max(1, spec.feature_bytes)))

    def check_layout(self, directory: Path, spec: DatasetSpec, options: ZarrOptions) -> None:
        check_store(directory, spec, options)

    def estimate_bytes(self, spec: DatasetSpec, options: ZarrOptions) -> int:
        return spec.payload_bytes + 2**20 + 4096 * (spec.n_samples // max(1, options.chunk_samples or 1) + 1)
