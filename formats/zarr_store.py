"""zarr opened the way iobench opens data: through a store whose every read is a checked regular file, and a
zstd codec that never inflates a chunk beyond the size its array says it has.

zarr's LocalStore opens chunk files by path with a plain `open()`: a chunk swapped for a FIFO blocks its
reader thread forever (and Ctrl-C then waits on it), and a string root is parsed as a URL (`a::b` is an
fsspec chain). numcodecs' zstd allocates what a frame header declares: a 134 KB chunk declaring 4 GiB was
an OOM kill. Both are replaced through zarr's own extension points (a Store subclass; a codec class chosen
by `zarr.config`), only while iobench opens its arrays.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from numcodecs import zstd
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.codecs.zstd import ZstdCodec
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.storage import LocalStore

from iobench.system.fsutil import open_regular


def _get(path: Path, prototype: BufferPrototype, byte_range: ByteRequest | None) -> Buffer:
    """zarr's LocalStore read, with the file opened by `open_regular` (no link, no FIFO, no device)."""
    with os.fdopen(open_regular(path), "rb") as f:
        if byte_range is None:
            return prototype.buffer.from_bytes(f.read())
        size = f.seek(0, io.SEEK_END)
        start, end = _span(byte_range, size)
        f.seek(start)
        return prototype.buffer.from_bytes(f.read(end - start))


def _span(byte_range: ByteRequest, size: int) -> tuple[int, int]:
    """The [start, end) of an object of `size` bytes that a zarr byte request asks for."""
    if isinstance(byte_range, RangeByteRequest):
        return min(byte_range.start, size), min(byte_range.end, size)
    if isinstance(byte_range, OffsetByteRequest):
        return min(byte_range.offset, size), size
    if isinstance(byte_range, SuffixByteRequest):
        return max(0, size - byte_range.suffix), size
    raise TypeError(f"unexpected byte range {byte_range!r}")


class CheckedStore(LocalStore):
    """A read-only LocalStore whose reads go through `_get`; a missing chunk is the fill value, as in zarr."""

    async def get(
        self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        if not self._is_open:
            await self._open()
        try:
            return await asyncio.to_thread(_get, self.root / key, prototype or default_buffer_prototype(), byte_range)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(key, prototype, r) for key, r in key_ranges)))


class CheckedZstd(ZstdCodec):
    """zarr's zstd codec decoding into a buffer of the chunk's own size: numcodecs refuses a frame that
    declares more before it allocates anything."""

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: Any) -> Buffer:
        size = int(np.prod(chunk_spec.shape)) * chunk_spec.dtype.to_native_dtype().itemsize
        try:
            data = zstd.decompress(chunk_bytes.as_numpy_array(), bytearray(size))
        except (RuntimeError, ValueError) as exc:
            raise ValueError(f"a zstd chunk of {size:,} bytes: {exc}") from None
        return chunk_spec.prototype.buffer.from_bytes(data)


CHECKED_ZSTD = f"{CheckedZstd.__module__}.{CheckedZstd.__qualname__}"
zarr.registry.register_codec("zstd", CheckedZstd, qualname=CHECKED_ZSTD)


def checked_arrays(directory: Path) -> tuple[Any, Any]:
    """The group, read-only, through the checked store and codec; consolidated metadata is never read (the
    arrays' own metadata is what iobench checks)."""
    return _checked_group(CheckedStore(directory, read_only=True))


def checked_remote_arrays(store: Any, prefix: str, metadata: dict[str, bytes]) -> tuple[Any, Any]:
    """The group under `prefix` of an obstore store, read-only through zarr's ObjectStore, with the checked codec.
    `metadata` is the documents the caller fetched and checked, by key: zarr reads those bytes, never a second
    fetch (which a server could answer differently, and which costs a first byte's wait each)."""
    return _checked_group(_metadata_store(store, metadata), prefix)


def _metadata_store(store: Any, metadata: dict[str, bytes]) -> Any:
    from zarr.storage import ObjectStore

    class CheckedMetadataStore(ObjectStore):
        async def get(
            self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
        ) -> Buffer | None:
            if key not in metadata:
                return await super().get(key, prototype or default_buffer_prototype(), byte_range)
            data = metadata[key]
            start, end = _span(byte_range, len(data)) if byte_range is not None else (0, len(data))
            return (prototype or default_buffer_prototype()).buffer.from_bytes(data[start:end])

    return CheckedMetadataStore(store, read_only=True)


def _checked_group(store: Any, path: str = "") -> tuple[Any, Any]:
    with zarr.config.set({"codecs.zstd": CHECKED_ZSTD}):
        group = zarr.open_group(store=store, path=path, mode="r", zarr_format=3, use_consolidated=False)
        return group["features"], group["labels"]
