"""litdata: LitData's optimized chunks (`chunk-R-K.bin` beside an `index.json`), as `litdata.optimize` leaves them.

Written by the library's `BinaryWriter`, the writer `optimize` runs in each of its worker processes (the same
chunk files byte for byte and the same index for the same share of samples, checked once against `optimize`),
and like `optimize` with a process per core by default (`processes`): this process writes the first
contiguous share from the shared chunk stream, and each other process (`python -m iobench.data.shares`,
with `optimize`'s rank variables) regenerates or re-reads its own share from the same spec, as a forked
format writer does, and writes it here (`write_share`); LitData's `merge` then joins their indexes in
rank order, so sample i stays item i. One process below one chunk of samples (a process start costs more
than it brings). A chunk holds up to `chunk_bytes` (LitData's README writes "64MB"); one per process is
held in memory while it fills. Each sample is a dict of the raw array (LitData's numpy serializer), its
label and its index.

Read as its users read it: `StreamingDataset(dir, shuffle=True)` in a `StreamingDataLoader` (LitData shuffles
chunk order, then the samples within the chunks a worker holds, the same order for any number of workers);
iobench's own loaders read samples by index through `StreamingDataset.__getitem__`. Before the library opens
the folder, `index.json` is checked: only the serializers and the tree the writer uses (LitData also offers
a `pickle` serializer, which a crafted index could name), no compression or encryption, and every chunk a
plain file of the folder (a crafted name could point anywhere).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
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
    read_option,
)
from iobench.formats.litdata_remote import (
    INDEX,
    index_chunks,
    quiet_crash_reports,
    release,
)
from iobench.formats.object_readers import CacheFolderReader
from iobench.spec import Chunk, DatasetSpec
from iobench.system.fsutil import open_regular, pread_full, read_json
from iobench.system.processes import python_module

BOTO3_POOL = 10  # boto3's own max_pool_connections


@dataclass(frozen=True)
class LitDataOptions:
    chunk_bytes: str = "64MB"  # what LitData's README passes to optimize
    processes: int = 0  # writer processes, a contiguous share each (0: one per core, as optimize; resolved)
    # StreamingDataset's own knobs for --loader native (LitData's defaults): samples deserialised together
    # (auto, 0 = per item, N, all) and the in-chunk shuffle block (auto = 256, full, N)
    batch_decode: str = read_option("auto", tune=("auto", "0"))  # 0: 11x on 224 px images (the study)
    item_shuffle_window: str = read_option("auto", tune=("auto", "full"))  # full: a uniform shuffle
    # From object storage only (a local dataset is read in place), LitData's defaults: the cache folder's budget
    # (auto: 75% of free disk; smaller than the dataset, chunks are deleted once read and fetched again next
    # epoch) and the chunks each worker downloads ahead
    max_cache_size: str = field(default="auto", metadata={**READ, **OBJECT_STORAGE_ONLY})
    max_pre_download: int = field(default=2, metadata={**READ, **OBJECT_STORAGE_ONLY})
    # boto3's connection pool (its default, 10): on LitData's boto3 path a worker's chunk downloads share one client,
    # and LitData raises its chunks in flight to min(chunks, 32, 3 GiB / mean chunk), past the pool
    max_pool_connections: int = field(default=BOTO3_POOL, metadata={**READ, **OBJECT_STORAGE_ONLY})

    def __post_init__(self) -> None:
        from iobench.units import parse_bytes

        parse_bytes(self.chunk_bytes)  # a typo fails before any work
        if self.max_cache_size != "auto":
            parse_bytes(self.max_cache_size)
        for name in ("max_pre_download", "max_pool_connections"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise IobenchError(f"litdata {name} must be a whole number >= 1, got {value!r}")
        if not isinstance(self.processes, int) or isinstance(self.processes, bool) or self.processes < 0:
            raise IobenchError(f"litdata processes must be a whole number >= 0, got {self.processes!r}")
        # LitData reads an unknown word as its default: refuse it instead
        for name, words in (("batch_decode", ("auto", "all")), ("item_shuffle_window", ("auto", "full"))):
            value = getattr(self, name)
            if not (isinstance(value, str) and (value in words or value.isdigit())):
                raise IobenchError(f"litdata {name} is {', '.join(words)} or a whole number, got {value!r}")


def remote_knobs(options: LitDataOptions) -> dict[str, Any]:
    """StreamingDataset's cache knobs from the options (a size in bytes: LitData reads "MB" as 10^6, iobench as
    2^20), and boto3's pool where it is not boto3's own 10 (then handed to LitData's client by open_remote)."""
    from iobench.units import parse_bytes

    size = None if options.max_cache_size == "auto" else parse_bytes(options.max_cache_size)
    knobs: dict[str, Any] = {"max_cache_size": size, "max_pre_download": options.max_pre_download}
    if options.max_pool_connections != BOTO3_POOL:
        knobs["max_pool_connections"] = options.max_pool_connections
    return knobs


def share_bounds(n_samples: int, processes: int) -> list[int]:
    """The first sample of each writer process's contiguous share, and the end."""
    return [k * n_samples // processes for k in range(processes + 1)]


def binary_writer(directory: Path, options: LitDataOptions) -> Any:
    """The writer `optimize` runs in each worker; it names its chunks and index by optimize's rank variables."""
    from litdata.streaming.writer import BinaryWriter

    from iobench.units import parse_bytes

    return BinaryWriter(str(directory), chunk_bytes=parse_bytes(options.chunk_bytes))


def _add(sink: Any, chunk: Chunk, stop: int) -> None:
    """The chunk's samples below `stop`, each as LitData's users add a dict."""
    for k in range(max(0, min(len(chunk.labels), stop - chunk.start))):
        i = chunk.start + k
        sink.add_item(i, {"features": chunk.features[k], "label": int(chunk.labels[k]), "index": i})


class _Share:
    """One other writer process (`python -m iobench.data.shares`), its stderr kept for a one-line error."""

    def __init__(
        self, directory: Path, spec: DatasetSpec, options: LitDataOptions, rank: int, start: int, stop: int
    ) -> None:
        from iobench import spec as spec_module

        job = {
            "format": "litdata",
            "directory": str(directory),
            "spec": spec.to_json(),
            "options": asdict(options),
            "start": start,
            "stop": stop,
            "parent": os.getpid(),
            "chunk_bytes": spec_module.GENERATION_CHUNK_BYTES,
        }
        # the variables optimize sets in its workers: BinaryWriter names its chunks and index by the rank
        env = dict(
            os.environ,
            DATA_OPTIMIZER_GLOBAL_RANK=str(rank),
            DATA_OPTIMIZER_NUM_WORKERS=str(options.processes),
            DATA_OPTIMIZER_NUM_NODES="1",
        )
        self.rank, self.stderr = rank, tempfile.TemporaryFile()
        # the data layer's entry point, named rather than imported: it regenerates the share and calls
        # LitDataFormat.write_share
        command = python_module("iobench.data.shares", json.dumps(job))
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr
        )

    def wait(self) -> None:
        code = self.process.wait()
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        self.stderr.close()
        if code != 0:
            raise RuntimeError(f"litdata writer process {self.rank} failed: {lines[-1] if lines else f'exit {code}'}")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.stderr.close()


class LitDataWriter(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: LitDataOptions) -> None:
        super().__init__(directory, spec, options)
        directory.mkdir(parents=True, exist_ok=True)
        bounds = share_bounds(spec.n_samples, max(1, options.processes))
        self.stop = bounds[1]  # this process writes the first share from the stream
        self.shares: list[_Share] = []
        try:
            for rank in range(1, len(bounds) - 1):
                self.shares.append(_Share(directory, spec, options, rank, bounds[rank], bounds[rank + 1]))
            self.sink = binary_writer(directory, options)
        except BaseException:
            self.abort()
            raise

    def write(self, chunk: Chunk) -> None:
        _add(self.sink, chunk, self.stop)

    def close(self) -> None:
        self.sink.done()
        try:
            for share in self.shares:
                share.wait()
        except BaseException:
            self.abort()
            raise
        self.sink.merge(len(self.shares) + 1)

    def abort(self) -> None:
        for share in self.shares:
            if share.process.returncode is None:
                share.kill()


def check_index(directory: Path, spec: DatasetSpec) -> None:
    """What LitData would open and how it would decode it, checked before it does."""
    path = directory / INDEX
    try:
        index = read_json(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable ({exc})") from None
    for name, size, items in index_chunks(index, str(path), spec):
        chunk = directory / name
        if chunk.is_symlink() or not chunk.is_file():
            raise ValueError(f"{path}: chunk {name!r} is not a plain chunk file of {directory}")
        if chunk.stat().st_size != size:
            raise ValueError(f"{chunk}: {chunk.stat().st_size} bytes; the index says {size}")
        _check_offsets(chunk, items, size)


def _check_offsets(chunk: Path, items: int, size: int) -> None:
    """A chunk's header (its item count, then where each item starts and where the last ends, uint32) says what
    the index says, its items following each other from the header to the file's end; LitData trusts it."""
    header = 4 * (items + 2)
    fd = open_regular(chunk)
    try:
        data = bytearray(header)
        got = pread_full(fd, memoryview(data), 0)
    finally:
        os.close(fd)
    words = np.frombuffer(bytes(data[:got]), dtype="<u4")
    if got != header or words[0] != items:
        raise ValueError(f"{chunk}: its header does not hold the {items} items the index says")
    offsets = words[1:].astype(np.int64)
    if offsets[0] != header or offsets[-1] != size or (np.diff(offsets) < 0).any():
        raise ValueError(f"{chunk}: its items do not follow each other from its header to its end")


def open_dataset(directory: Path, spec: DatasetSpec, shuffle: bool = False, seed: int = 42, **options: Any):
    """The StreamingDataset its users open, after the checks."""
    from litdata import StreamingDataset

    check_index(directory, spec)
    quiet_crash_reports()
    return StreamingDataset(str(directory), shuffle=shuffle, seed=seed, **options)


class LitDataReader(FormatReader):
    def _close(self, handle: Any) -> None:
        release(handle)

    def _open(self) -> Any:
        # LitData decodes a window of ~256 samples around each one it is asked for ("auto"): right for
        # reading in order, 100x slower per sample for reading by random index (1.37 vs 0.013 ms)
        return open_dataset(self.directory, self.spec, batch_decode="auto" if self.sequential else False)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features, labels = self._empty(len(indices))
        ds = self.handle
        for k, i in enumerate(indices):
            index = self._check_index(int(i))
            try:
                item = ds[index]
                features[k] = item["features"]
                labels[k] = item["label"]
            except (struct.error, TypeError, ValueError) as exc:  # an item whose sizes lie: LitData's verdict
                raise ValueError(f"sample {index}: {type(exc).__name__}: {exc}") from None
        return features, labels


class LitDataObjectReader(CacheFolderReader, LitDataReader):
    """Samples by index through a StreamingDataset on the store's S3 URL: LitData downloads whole chunks into the
    reader's cache folder, so a warm epoch reads its local cache and a cold one, read by a fresh reader, starts
    from an empty one."""

    cache_kind = "litdata-cache"

    def _local_directory(self) -> Path | None:
        return None

    def _open(self) -> Any:
        from iobench.formats.litdata_remote import open_remote

        return open_remote(
            self.storage,
            self.spec,
            self.cache,
            batch_decode="auto" if self.sequential else False,
            **remote_knobs(self.options),
        )


class _PerSample:
    """The run's host transform on each sample, in the worker that read it (LitData's `transform` hook)."""

    def __init__(self, transform: Any) -> None:
        self.transform = transform

    def __call__(self, item: dict) -> dict:
        import torch

        item["features"] = self.transform.sample(torch.from_numpy(np.ascontiguousarray(item["features"])))
        return item


def _as_tuple(batch: dict) -> tuple[Any, Any, Any]:
    return batch["features"], batch["label"], batch["index"]


class LitDataFormat(StorageFormat):
    name = "litdata"
    libraries = ("litdata",)  # what reads it (distribution names), for the record's `packages`
    options_type = LitDataOptions
    python_bound_writer = True
    writer_type = LitDataWriter
    reader_type = LitDataReader
    native_rank_split = "litdata StreamingDataset by rank (drop_last)"
    remote_pipeline = True  # StreamingDataset("s3://...") is LitData's own way to object storage

    def pipeline(self, reader: LitDataReader, read: NativeRead) -> Pipeline:
        """`StreamingDataset` in a `StreamingDataLoader`. Under torchrun the dataset splits the epoch between
        ranks itself (it reads torch.distributed's world), with its default there, `drop_last`: each rank gets
        the same number of whole batches, and the samples beyond them are not read that epoch (the record's
        samples per epoch and a warning say how many)."""
        from litdata import StreamingDataLoader

        transform = _PerSample(read.transform) if read.transform is not None else None
        o = reader.options
        knobs = dict(transform=transform, batch_decode=o.batch_decode, item_shuffle_window=o.item_shuffle_window)
        if reader.directory is None:  # a reader of objects (litdata_remote)
            from iobench.formats.litdata_remote import open_remote

            knobs.update(remote_knobs(o))
            ds = open_remote(reader.storage, reader.spec, reader.cache, read.shuffle, read.seed, **knobs)
        else:
            ds = open_dataset(reader.directory, reader.spec, read.shuffle, read.seed, **knobs)
        found = ds.distributed_env
        if (found.world_size, found.global_rank) != (read.world, read.rank):
            release(ds)
            raise IobenchError(
                f"litdata sees rank {found.global_rank} of {found.world_size}; the run is rank "
                f"{read.rank} of {read.world}"
            )
        return Pipeline(
            ds,
            read.batch_size,
            loader_class=StreamingDataLoader,
            seeded=False,
            as_batch=_as_tuple,
            release=partial(release, ds),
        )

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return LitDataObjectReader

    def resolve_options(self, spec: DatasetSpec, options: LitDataOptions) -> LitDataOptions:
        if options.processes:
            return replace(options, processes=min(options.processes, spec.n_samples))
        from iobench.units import parse_bytes

        one_chunk = spec.payload_bytes <= parse_bytes(options.chunk_bytes)
        return replace(options, processes=1 if one_chunk else min(os.cpu_count() or 1, spec.n_samples))

    def write_share(
        self, directory: Path, spec: DatasetSpec, options: LitDataOptions, chunks: Iterable[Chunk], stop: int
    ) -> None:
        """One other writer process's share (LitDataWriter starts it): its BinaryWriter takes the rank from
        optimize's variables, and its index waits for the first process's merge."""
        sink = binary_writer(directory, options)
        for chunk in chunks:
            _add(sink, chunk, stop)
        sink.done()

    def check_native_world(self, spec: DatasetSpec, options: LitDataOptions, world: int, batch_size: int) -> None:
        if spec.n_samples // batch_size < world:  # every rank alike: LitData would give each one no batch
            raise ValueError(
                f"litdata deals each of {world} ranks whole batches of {batch_size}: "
                f"{spec.n_samples:,} samples give none; use a smaller --batch-size or fewer "
                "ranks"
            )

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        check_index(directory, spec)

    def estimate_bytes(self, spec: DatasetSpec, options: LitDataOptions) -> int:
        # per sample: an offset, three sizes, the serializer's dtype and shape header, two ints
        return spec.n_samples * (spec.feature_bytes + 4 + 12 + 8 + 4 * len(spec.shape) + 16) + 2**16
