"""zarr: a Zarr v3 group with a `features` and a `labels` array, chunked along samples and sharded.

Written by zarr itself (`zarr.open_group(...).create_array(..., chunks=, shards=)`, its default zstd
compressor), a whole shard per write (a partial shard write re-reads and re-writes the shard). Chunks
hold `chunk_samples` samples, about 1 MiB (the Zarr user guide's "at least 1 MB uncompressed"); shards
hold `shard_chunks` chunks, so a large dataset is tens of files rather than thousands.

Read as its users read it: a batch is one orthogonal selection of its sorted indices (`array.oindex`),
each chunk decoded once per batch however many of its samples the batch takes, then put back in the
batch's order. Before the group is opened its metadata is checked: numeric dtypes only, no storage
transformers, and only the codecs the writer uses (numcodecs offers a pickle codec; a crafted zarr.json
could name it); no file of the store may be a link.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader, FormatWriter, NativeRead, StorageFormat
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec

CHUNK_BYTES = 2**20
SAFE_CODECS = {"bytes", "zstd", "blosc", "gzip", "crc32c", "transpose", "sharding_indexed"}


@dataclass(frozen=True)
class ZarrOptions:
    chunk_samples: int = 0  # 0: about 1 MiB of samples (resolved when writing)
    shard_chunks: int = 64

    def __post_init__(self) -> None:
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
        c = min(options.chunk_samples, n)
        shard = c * min(options.shard_chunks, -(-n // c))  # whole chunks (zarr requires it), the last one partial
        group = zarr.open_group(store=str(directory), mode="w", zarr_format=3)
        self.features = group.create_array(
            "features", shape=(n, *spec.shape), dtype=spec.dtype, chunks=(c, *spec.shape), shards=(shard, *spec.shape)
        )
        self.labels = group.create_array("labels", shape=(n,), dtype=LABEL_DTYPE, chunks=(min(n, 2**17),))
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


def check_store(directory: Path, spec: DatasetSpec) -> None:
    """What zarr would read, checked before it reads: metadata, codecs, dtypes, no links."""
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            if Path(root, name).is_symlink():
                raise ValueError(f"{Path(root, name)}: a link in the zarr store")
    for array, dtype, shape in (("features", spec.dtype, (spec.n_samples, *spec.shape)),
                                ("labels", "int64", (spec.n_samples,))):  # fmt: skip
        path = directory / array / "zarr.json"
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable ({exc})") from None
        if meta.get("data_type") != dtype or tuple(meta.get("shape", ())) != shape:
            raise ValueError(f"{path}: {meta.get('data_type')} {meta.get('shape')}; the spec says {dtype} {shape}")
        if meta.get("storage_transformers"):
            raise ValueError(f"{path}: storage transformers are not read")
        names = _codec_names(meta.get("codecs", []))
        if not names <= SAFE_CODECS:
            raise ValueError(f"{path}: codecs {sorted(names - SAFE_CODECS)} are not read (only {sorted(SAFE_CODECS)})")


def _codec_names(codecs: Any) -> set[str]:
    names = set()
    for codec in codecs if isinstance(codecs, list) else [codecs]:
        if not isinstance(codec, dict):
            names.add(str(codec))
            continue
        names.add(str(codec.get("name")))
        config = codec.get("configuration", {})
        if isinstance(config, dict):
            for key in ("codecs", "index_codecs"):
                names |= _codec_names(config.get(key, []))
    return names


def open_arrays(directory: Path, spec: DatasetSpec) -> tuple[Any, Any]:
    import zarr

    check_store(directory, spec)
    group = zarr.open_group(store=str(directory), mode="r", zarr_format=3)
    return group["features"], group["labels"]


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
        features, labels = open_arrays(self.directory, self.spec)
        return features, np.asarray(labels[:], dtype=LABEL_DTYPE)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        idx = np.array([self._check_index(int(i)) for i in indices], dtype=np.int64)
        return sorted_read(features, idx), labels[idx]

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self.handle
        return np.asarray(features[start:stop]), labels[start:stop]


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


def native_batches(reader: ZarrReader, read: NativeRead) -> Iterator:
    """Shuffled batches read as sorted orthogonal selections, in a DataLoader with the run's workers."""
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(_Batches(reader, read.transform), batch_size=read.batch_size, shuffle=read.shuffle,
                        collate_fn=_as_read, generator=torch.Generator().manual_seed(read.seed),
                        **read.dataloader_keywords)  # fmt: skip
    return iter(loader)


class ZarrFormat(StorageFormat):
    name = "zarr"
    options_type = ZarrOptions
    writer_type = ZarrWriter
    reader_type = ZarrReader

    def resolve_options(self, spec: DatasetSpec, options: ZarrOptions) -> ZarrOptions:
        if options.chunk_samples:
            return options
        return replace(options, chunk_samples=max(1, CHUNK_BYTES // max(1, spec.feature_bytes)))

    def check_layout(self, directory: Path, spec: DatasetSpec) -> None:
        check_store(directory, spec)

    def estimate_bytes(self, spec: DatasetSpec, options: ZarrOptions) -> int:
        return spec.payload_bytes + 2**20 + 4096 * (spec.n_samples // max(1, options.chunk_samples or 1) + 1)
