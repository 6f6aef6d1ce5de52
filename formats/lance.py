"""lance: a Lance dataset (`pylance`), the columnar format built for random access ("100x faster than Parquet").

Written by the library: `lance.write_dataset` of the shared chunks as Arrow record batches, streamed (a thread pulls
them from a bounded queue, so memory stays at a few chunks), rows of `features` (a fixed-size list of the sample's
values), `label` and `index`; `max_rows_per_group` and `max_rows_per_file` are the spec's options, stated in the
manifest.

Read as its documentation reads it for PyTorch: a shuffled epoch by random access, `dataset.take(indices)` of each
shuffled batch (its documented path for random batches); an epoch in order through `lance.torch.data.LanceDataset`
with a `FullScanSampler` and its own read-ahead threads (`batch_readahead`). Lance runs its own I/O threads and is
not fork-safe (its documentation asks for spawn with DataLoader workers): its pipeline takes no workers, and a run
that asks for them is refused in one line. Every file of the dataset folder is checked (regular, not a link) and
every data file the manifest names must be one of the folder's own before the library opens it, through a name no
library can read as a URL (`iobench.system.fsutil.plain_alias`).
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import READ, FormatReader, FormatWriter, NativeRead, Pipeline, ReaderTraits, StorageFormat
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import PLAIN_PATH, plain_alias

QUEUED_CHUNKS = 2  # chunks waiting for lance's writer thread at most


@dataclass(frozen=True)
class LanceOptions:
    max_rows_per_group: int = 1024  # lance.write_dataset's default
    max_rows_per_file: int = 1024 * 1024  # its default
    batch_readahead: int = field(default=16, metadata=READ)  # LanceDataset's read-ahead batches (its default)

    def __post_init__(self) -> None:
        for name in ("max_rows_per_group", "max_rows_per_file", "batch_readahead"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise IobenchError(f"lance {name} is a whole number >= 1, got {value!r}")


def schema_of(spec: DatasetSpec) -> Any:
    import pyarrow as pa

    values = pa.from_numpy_dtype(spec.np_dtype)
    return pa.schema(
        [("features", pa.list_(values, spec.features_per_sample)), ("label", pa.int64()), ("index", pa.int64())]
    )


def _batch(chunk: Chunk, spec: DatasetSpec) -> Any:
    import pyarrow as pa

    flat = pa.array(np.ascontiguousarray(chunk.features).reshape(-1))
    features = pa.FixedSizeListArray.from_arrays(flat, spec.features_per_sample)
    labels = pa.array(chunk.labels.astype(np.int64))
    return pa.RecordBatch.from_arrays(
        [features, labels, pa.array(np.arange(chunk.start, chunk.stop))], schema=schema_of(spec)
    )


class LanceWriter(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: LanceOptions) -> None:
        super().__init__(directory, spec, options)
        self._queue: queue.Queue = queue.Queue(QUEUED_CHUNKS)
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._write, name="lance-writer", daemon=True)
        self._thread.start()

    def _batches(self) -> Any:
        while (batch := self._queue.get()) is not None:
            yield batch

    def _write(self) -> None:
        import lance
        import pyarrow as pa

        try:
            with ExitStack() as stack:
                reader = pa.RecordBatchReader.from_batches(schema_of(self.spec), self._batches())
                o, name = self.options, library_name(self.directory / "data.lance", stack)
                lance.write_dataset(
                    reader,
                    name,
                    mode="create",
                    max_rows_per_group=o.max_rows_per_group,
                    max_rows_per_file=o.max_rows_per_file,
                )
        except BaseException as exc:  # said by close(), in the writing process
            self._failed = exc
            while self._queue.get() is not None:  # never leave write() blocked on a full queue
                pass

    def write(self, chunk: Chunk) -> None:
        if self._failed is not None:
            raise IobenchError(f"writing lance failed: {type(self._failed).__name__}: {self._failed}")
        self._queue.put(_batch(chunk, self.spec))

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._failed is not None:
            raise IobenchError(f"writing lance failed: {type(self._failed).__name__}: {self._failed}")


def library_name(folder: Path, stack: ExitStack) -> str:
    """The folder's name for lance: its resolved path where nothing in it reads as a URL or a pattern, else a plain
    alias for as long as `stack` holds (a link in the path cost Lance's every `take` about 6%)."""
    resolved = folder.resolve()
    if PLAIN_PATH.fullmatch(str(resolved)):
        return str(resolved)
    return str(stack.enter_context(plain_alias(folder)))


def check_files(folder: Path) -> None:
    """Every entry of the dataset folder a plain file or folder of its own, no link, FIFO or device."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in (*dirs, *files):
            path = Path(root) / name
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise IobenchError(f"{path}: not a regular file or folder of the lance dataset")


def open_checked(directory: Path, spec: DatasetSpec, stack: ExitStack) -> Any:
    """The dataset opened through a plain name once its files are checked; its data files named by the manifest
    must be files of its own data folder, its rows and schema the spec's."""
    import lance

    folder = directory / "data.lance"
    if not folder.is_dir():
        raise IobenchError(f"{folder}: no lance dataset (prepare --formats lance)")
    check_files(folder)
    ds = lance.dataset(library_name(folder, stack))
    own = {p.name for p in (folder / "data").iterdir()} if (folder / "data").is_dir() else set()
    return check_opened(ds, spec, own, str(folder), "one of its own")


def check_opened(ds: Any, spec: DatasetSpec, own: set[str], where: str, whose: str) -> Any:
    """`ds` once every data file its manifest names is a plain name in `own` (the folder's `data/` files, or the
    format's objects), and its rows and schema are the spec's; else one line naming `where`."""
    for fragment in ds.get_fragments():
        for data_file in fragment.data_files():
            name = data_file.path
            if "/" in name or name not in own:
                raise IobenchError(f"{where}: its manifest names a data file {name!r} that is not {whose}")
    if ds.count_rows() != spec.n_samples or ds.schema.remove_metadata() != schema_of(spec):
        raise IobenchError(
            f"{where}: {ds.count_rows():,} rows of {fields_of(ds.schema)}; the spec says "
            f"{spec.n_samples:,} of {fields_of(schema_of(spec))}"
        )
    return ds


def fields_of(schema: Any) -> str:
    """An Arrow schema in one line (its own text spans a line per field and per metadata key)."""
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


class LanceReader(FormatReader):
    traits = ReaderTraits(fork_safe=False)  # its runtime's threads: its documentation asks for spawn with workers

    def _open(self) -> tuple[Any, ExitStack]:
        stack = ExitStack()
        try:
            return open_checked(self.directory, self.spec, stack), stack
        except BaseException:
            stack.close()
            raise

    def _close(self, handle: tuple[Any, ExitStack]) -> None:
        handle[1].close()

    def _arrays(self, table: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        values = table.column("features").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        features = np.array(values, dtype=self.spec.np_dtype).reshape(n, *self.spec.shape)  # its own memory
        return features, table.column("label").to_numpy().astype(LABEL_DTYPE)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = np.asarray(indices, dtype=np.int64)
        n = self.spec.n_samples
        if len(rows) and not (-n <= int(rows.min()) and int(rows.max()) < n):  # checked at once, not per row
            raise IndexError(f"a sample index out of range for {n} samples")
        if len(rows) and int(rows.min()) < 0:
            rows = rows % n
        return self._arrays(self.handle[0].take(rows.tolist(), columns=["features", "label"]), len(rows))

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        table = self.handle[0].to_table(columns=["features", "label"], offset=start, limit=stop - start)
        return self._arrays(table, stop - start)


class LanceObjectReader(LanceReader):
    """The dataset in object storage through Lance's own path, as its documentation opens one: `lance.dataset(
    "s3://bucket/prefix/data.lance", storage_options=...)`, its Rust object_store client given the endpoint's keys,
    region and URL (nothing from the environment) and iobench's times and tries. Before any sample is read, the
    objects it names are checked: every data file of its manifest a plain name among the format's objects (whose
    sizes the store's listing matched against the manifest), its rows and schema the spec's. Read only from a store
    iobench serves (`StorageFormat.own_client_bounded`)."""

    def _local_directory(self) -> Path | None:
        return None

    @classmethod
    def clients(cls, options: Any) -> tuple[str, ...]:
        return ("pylance",)  # its own client, for the record's packages

    def import_libraries(self) -> None:
        import lance  # noqa: F401 - before workers fork, not inside the epoch

    def _open(self) -> tuple[Any, ExitStack]:
        import lance

        from iobench.storage.remote import bounds

        storage = self.storage
        folder = storage.fsspec_path("data.lance")  # plain names only
        e = storage.target.endpoint
        times = bounds.obstore_client_options(e.url)
        # object_store's keys (it ignores a key it does not know: a store that stalls ended the open in 39 s with
        # read_timeout 3s and timeout 600s, checked by hand)
        options = {
            "access_key_id": e.access_key,
            "secret_access_key": e.secret_key,
            "region": e.region,
            "endpoint": e.url,
            "allow_http": str(times["allow_http"]).lower(),
            "virtual_hosted_style_request": "false",
            "connect_timeout": times["connect_timeout"],
            "read_timeout": times["read_timeout"],
            "timeout": times["timeout"],
            "client_max_retries": str(bounds.ATTEMPTS - 1),
        }
        ds = lance.dataset(f"s3://{folder}", storage_options=options)
        own = {name.removeprefix("data.lance/data/") for name in storage.files() if name.startswith("data.lance/data/")}
        check_opened(ds, self.spec, own, storage.where, "one of the format's objects")
        return ds, ExitStack()


class _Taken:
    """Random access as Lance documents it for shuffled batches: one `take` per batch of shuffled indices."""

    def __init__(self, reader: LanceReader, transform: Any) -> None:
        self.reader, self.transform = reader, transform

    def __len__(self) -> int:
        return self.reader.spec.n_samples

    def __getitems__(self, keys: list[int]) -> tuple[Any, Any, Any]:
        import torch

        rows = np.asarray(keys, dtype=np.int64)
        features, labels = self.reader.batch(rows)
        x = torch.from_numpy(features)
        if self.transform is not None:
            x = torch.stack([self.transform.sample(f) for f in x])
        return x, torch.from_numpy(labels), torch.from_numpy(rows)


def _one_batch(batch: Any) -> Any:
    return batch  # __getitems__ made it already


class _Scanned:
    """LanceDataset's batches (dicts of tensors) as (features, labels, indices) of the spec's shape."""

    def __init__(self, spec: DatasetSpec, transform: Any) -> None:
        self.shape, self.transform = spec.shape, transform

    def __call__(self, batch: dict) -> tuple[Any, Any, Any]:
        import torch

        features = batch["features"].reshape(-1, *self.shape)
        if self.transform is not None:
            features = torch.stack([self.transform.sample(f) for f in features])
        return features, batch["label"], batch["index"]


class LanceFormat(StorageFormat):
    name = "lance"
    libraries = ("pylance", "pyarrow")  # what reads it (distribution names), for the record's `packages`
    options_type = LanceOptions
    writer_type = LanceWriter
    reader_type = LanceReader
    remote_pipeline = True  # lance.dataset("s3://...", storage_options=...): its own client, not FUSE
    own_client_bounded = False  # object_store's answers have no size bound: a store iobench serves only

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return LanceObjectReader

    def pipeline(self, reader: LanceReader, read: NativeRead) -> Pipeline:
        """Shuffled: `take` of each shuffled batch in a DataLoader; in order: `LanceDataset` with a
        `FullScanSampler`, its own read-ahead threads yielding whole batches. No worker processes (not fork-safe)."""
        if read.num_workers:
            raise IobenchError(
                "lance is not fork-safe (its documentation asks for spawn): its pipeline reads with its "
                "own threads; drop --num-workers"
            )
        if read.shuffle:
            return Pipeline(_Taken(reader, read.transform), read.batch_size, shuffle=True, collate_fn=_one_batch)
        from lance.sampler import FullScanSampler
        from lance.torch.data import LanceDataset

        ds = reader.handle[0]
        scan = LanceDataset(
            ds,
            read.batch_size,
            columns=["features", "label", "index"],
            sampler=FullScanSampler(),
            batch_readahead=reader.options.batch_readahead,
            auto_detect_rank=False,
        )
        return Pipeline(scan, None, as_batch=_Scanned(reader.spec, read.transform), seeded=False)

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        with ExitStack() as stack:
            open_checked(directory, spec, stack)

    def estimate_bytes(self, spec: DatasetSpec, options: LanceOptions) -> int:
        return spec.payload_bytes + 16 * spec.n_samples + 2**20
