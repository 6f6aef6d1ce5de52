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
from zarr.storage import LocalStore, WrapperStore

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


def remote_store(storage: Any, client: str) -> Any:
    """zarr's own store of the storage's bucket, read-only: `ObjectStore` over obstore, or `FsspecStore` over an
    asynchronous s3fs file system (rooted at the bucket, a plain name: fsspec would read a pattern or a chain)."""
    if client == "fsspec":
        from zarr.storage import FsspecStore

        storage.fsspec_path()  # every part a plain name; the store is rooted at the bucket, as obstore's
        return FsspecStore(storage.s3fs("zarr's FsspecStore", asynchronous=True), read_only=True, path=storage.bucket)
    from zarr.storage import ObjectStore

    return ObjectStore(storage.store(), read_only=True)


def close_remote_store(store: Any) -> None:
    """An asynchronous s3fs file system's client closed on zarr's loop, where it was made (s3fs closes only a
    synchronous one itself; aiohttp otherwise warns of an unclosed session at exit)."""
    from zarr.core.sync import sync

    client = getattr(getattr(store, "fs", None), "_s3creator", None)
    if client is not None:
        sync(client.__aexit__(None, None, None))


def fetch(store: Any, keys: list[str]) -> list[bytes | None]:
    """The objects at `keys` through the store, requested together (one first-byte wait, not one each) on zarr's
    own event loop, where its store's client lives; None for a missing one."""
    from zarr.core.sync import sync

    async def all_of() -> list[Buffer | None]:
        return list(await asyncio.gather(*(store.get(key, default_buffer_prototype()) for key in keys)))

    return [None if b is None else b.to_bytes() for b in sync(all_of())]


def checked_remote_arrays(
    store: Any, prefix: str, metadata: dict[str, bytes], counted: bool = False
) -> tuple[Any, Any]:
    """The group under `prefix` of a remote zarr store, read-only, with the checked codec. `metadata` is the
    documents the caller fetched and checked, by key: zarr reads those bytes, never a second fetch (which a server
    could answer differently, and which costs a first byte's wait each). `counted`: each of zarr's reads is one
    request iobench counts (obstore's; s3fs's are counted by their client)."""
    return _checked_group(CheckedMetadataStore(store, metadata, counted), prefix)


class CheckedMetadataStore(WrapperStore):
    """A store whose metadata documents are the bytes already fetched and checked; every other key its own."""

    def __init__(self, store: Any, metadata: dict[str, bytes], counted: bool = False) -> None:
        super().__init__(store)
        self.metadata, self.counted = metadata, counted

    def _with_store(self, store: Any) -> CheckedMetadataStore:
        return type(self)(store, self.metadata, self.counted)

    async def get(
        self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        prototype = prototype or default_buffer_prototype()
        if key not in self.metadata:
            got = await self._store.get(key, prototype, byte_range)
            if self.counted:
                from iobench.storage.remote import client_counts

                client_counts.add("GET", 0 if got is None else len(got))
            return got
        data = self.metadata[key]
        start, end = _span(byte_range, len(data)) if byte_range is not None else (0, len(data))
        return prototype.buffer.from_bytes(data[start:end])


def _checked_group(store: Any, path: str = "") -> tuple[Any, Any]:
    with zarr.config.set({"codecs.zstd": CHECKED_ZSTD}):
        group = zarr.open_group(store=store, path=path, mode="r", zarr_format=3, use_consolidated=False)
        return group["features"], group["labels"]
