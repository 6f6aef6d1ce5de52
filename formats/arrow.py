"""arrow: a Hugging Face `datasets` dataset on disk (Arrow files, memory-mapped), as most people have one.

Written by the library: its ArrowWriter streams the shared chunks into one Arrow file (bounded memory,
as `Dataset.from_generator` does internally), then `Dataset.from_file(...).save_to_disk(max_shard_size=...)`
writes the dataset folder its users load (the staging file is removed; both steps are write time).
Samples are raw arrays (`List(length=...)` for vectors, `Array2D..5D` otherwise, the feature types
`datasets` documents for fixed-shape arrays) with an int64 label and the sample's index.

Read as its users read it: `load_from_disk(path).with_format("torch", ...)` in a DataLoader, which fetches a
batch with one `__getitems__` call (`ArrowFormat.pipeline`); iobench's own loaders read numpy batches by index.
`load_from_disk` opens the files that `state.json` names: iobench checks first that every name is a plain
file of the dataset folder (a crafted state.json could name any path), and reads no pickle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.arrow_ipc import check_stream
from iobench.formats.base import (
    READ,
    FormatReader,
    FormatWriter,
    NativeRead,
    Pipeline,
    StorageFormat,
)
from iobench.formats.object_readers import CacheFolderReader, PipelineOnlyReader
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import Pinned, parse_json, read_json

STAGING = "staging.arrow"


# save_to_disk's sizes as datasets parses them (its MB is 10^6 bytes; MiB 2^20), or a number of bytes
SHARD_SIZE = re.compile(r"\d+([KMGTP]i?B)?", re.IGNORECASE)


@dataclass(frozen=True)
class ArrowOptions:
    max_shard_size: str = "500MB"  # save_to_disk's default, in its units
    # streamed from object storage: IterableDataset.shuffle(buffer_size=N), its default (a local dataset is
    # shuffled by index, uniformly)
    shuffle_buffer: int = field(default=1_000, metadata=READ)

    def __post_init__(self) -> None:
        if not isinstance(self.shuffle_buffer, int) or isinstance(self.shuffle_buffer, bool) or self.shuffle_buffer < 1:
            raise IobenchError(f"arrow shuffle_buffer is a whole number >= 1, got {self.shuffle_buffer!r}")
        text = str(self.max_shard_size).strip()
        if not SHARD_SIZE.fullmatch(text) or int(re.match(r"\d+", text).group()) == 0:
            raise IobenchError(
                f"arrow max_shard_size is a size as datasets reads one (500MB, 64MiB or a number of "
                f"bytes), got {self.max_shard_size!r}"
            )

    @property
    def shard_size(self) -> int | str:
        """What save_to_disk is handed: a plain number as bytes (datasets refuses a number in a string)."""
        text = str(self.max_shard_size).strip()
        return int(text) if text.isdigit() else text


def features_of(spec: DatasetSpec) -> Any:
    import datasets

    dtype = spec.dtype
    if len(spec.shape) == 1:
        column = datasets.List(datasets.Value(dtype), length=spec.shape[0])
    elif 2 <= len(spec.shape) <= 5:
        column = getattr(datasets, f"Array{len(spec.shape)}D")(shape=tuple(spec.shape), dtype=dtype)
    else:
        raise IobenchError(f"arrow stores samples of 1 to 5 dimensions, not {spec.shape}")
    return datasets.Features({"features": column, "label": datasets.Value("int64"), "index": datasets.Value("int64")})


class ArrowWriter(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: ArrowOptions) -> None:
        super().__init__(directory, spec, options)
        from datasets.arrow_writer import ArrowWriter as LibraryWriter

        directory.mkdir(parents=True, exist_ok=True)
        self.staging = directory.parent / f"{directory.name}-{STAGING}"
        self.features = features_of(spec)
        self.sink = LibraryWriter(features=self.features, path=str(self.staging))

    def write(self, chunk: Chunk) -> None:
        n = len(chunk.labels)
        self.sink.write_batch(
            {
                "features": list(chunk.features),
                "label": np.asarray(chunk.labels, dtype=np.int64),
                "index": np.arange(chunk.start, chunk.start + n, dtype=np.int64),
            }
        )

    def close(self) -> None:
        import datasets

        datasets.disable_progress_bars()  # prepare shows its own progress; a second bar would garble it
        self.sink.finalize()
        self.sink.close()
        try:
            staged = datasets.Dataset.from_file(str(self.staging))
            staged.save_to_disk(str(self.directory), max_shard_size=self.options.shard_size)
            del staged
        finally:
            self.staging.unlink(missing_ok=True)


def check_state(directory: Path, state: bytes | None = None) -> list[str]:
    """The data files state.json names (its bytes when already read), each a plain .arrow file of this folder
    (load_from_disk opens them)."""
    state_path = directory / "state.json"
    try:
        loaded = read_json(state_path) if state is None else parse_json(state, state_path)
        names = [entry["filename"] for entry in loaded["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{state_path}: unreadable ({exc})") from None
    for name in names:
        path = directory / str(name)
        if not isinstance(name, str) or "/" in name or name.startswith(".") or not name.endswith(".arrow"):
            raise ValueError(f"{state_path}: data file {name!r} is not a plain .arrow file of {directory}")
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"{state_path}: data file {name!r} is missing or a link")
    return names


METADATA = ("state.json", "dataset_info.json")  # what load_from_disk reads besides the data files


def pin(directory: Path, spec: DatasetSpec) -> Pinned:
    """Every file `load_from_disk` will open, opened once and checked (formats.arrow_ipc): the folder it is
    handed holds only these. The data files are those the pinned state.json names, so what is checked is what
    the library maps."""
    pinned = Pinned(files={name: directory / name for name in METADATA})
    try:
        names = check_state(directory, pinned.read("state.json"))
        schema, rows = features_of(spec).arrow_schema, 0
        for name in names:
            try:
                rows += check_stream(pinned.add(name, directory / name), schema)
            except ValueError as exc:
                raise ValueError(f"{directory / name}: {exc}") from None
        if rows != spec.n_samples:
            raise ValueError(f"{directory}: {rows:,} rows in its data files; the spec says {spec.n_samples:,}")
        return pinned
    except BaseException:
        pinned.close()
        raise


def with_format(ds: Any, fmt: str, spec: DatasetSpec) -> Any:
    """numpy as it is; torch as datasets documents choosing a dtype (`with_format("torch", columns=..., dtype=...)`):
    its torch formatter turns every integer column into int64 and every float one into float32, so uint8 images
    crossed to the device 8x larger and float64 features lost precision. The labels and indices stay Python ints
    for the default collate (int64 tensors)."""
    if fmt != "torch":
        return ds.with_format(fmt)
    import torch

    return ds.with_format("torch", columns=["features"], output_all_columns=True, dtype=getattr(torch, spec.dtype))


def load(directory: Path, spec: DatasetSpec, fmt: str) -> tuple[Any, Pinned]:
    """The dataset as its users open it, from the pinned files (`pin`), and the Pinned to close with the
    dataset. `load_from_disk` parses its argument as an fsspec URL (`a::b` is a chain of two): it is handed
    the pinned folder."""
    import datasets

    pinned = pin(directory, spec)
    try:
        ds = datasets.load_from_disk(str(pinned.folder))
        if len(ds) != spec.n_samples or ds.features != features_of(spec):
            raise ValueError(
                f"{directory}: {len(ds)} rows of {ds.features}; the spec says {spec.n_samples} of {spec.shape}"
            )
        return with_format(ds, fmt, spec), pinned
    except BaseException:
        pinned.close()
        raise


class ArrowReader(FormatReader):
    def _open(self) -> tuple[Any, Pinned]:
        return load(self.directory, self.spec, "numpy")

    def _close(self, handle: tuple[Any, Pinned]) -> None:
        handle[1].close()

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = self.handle[0][[self._check_index(int(i)) for i in indices]]
        features = np.asarray(rows["features"], dtype=self.spec.np_dtype).reshape(len(indices), *self.spec.shape)
        return features, np.asarray(rows["label"], dtype=LABEL_DTYPE)

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self.handle[0][start:stop]
        features = np.asarray(rows["features"], dtype=self.spec.np_dtype).reshape(stop - start, *self.spec.shape)
        return features, np.asarray(rows["label"], dtype=LABEL_DTYPE)


class ArrowObjectReader(CacheFolderReader, PipelineOnlyReader):
    """The Arrow files in object storage, for the streaming pipeline only (`formats.arrow_remote`). datasets keeps
    lock files in the reader's cache folder (streaming keeps no data there)."""

    cache_kind = "hf-cache"
    traits = replace(PipelineOnlyReader.traits, imports=("datasets", "s3fs"))


class _Stacked:
    """Collate of streamed numpy rows into (features, labels, indices) tensors of the spec's dtype (datasets' torch
    format would widen uint8 features to int64), the run's transform on each sample, every index one of the
    dataset's (the delivered order is scored by them). Module level: workers pickle it."""

    def __init__(self, spec: DatasetSpec, transform: Any) -> None:
        self.n, self.transform = spec.n_samples, transform

    def __call__(self, rows: list[dict]) -> tuple[Any, Any, Any]:
        import torch

        indices = torch.tensor([row["index"] for row in rows], dtype=torch.int64)
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= self.n):
            raise ValueError(f"a streamed row's index is not one of the {self.n:,} samples")
        features = [torch.from_numpy(np.asarray(row["features"])) for row in rows]
        if self.transform is not None:
            features = [self.transform.sample(f) for f in features]
        labels = torch.tensor([row["label"] for row in rows], dtype=torch.int64)
        return torch.stack(features), labels, indices


class _Rows:
    """The torch-format dataset with the run's host transform on each sample (in the worker)."""

    def __init__(self, ds: Any, transform: Any) -> None:
        self.ds, self.transform = ds, transform

    def __len__(self) -> int:
        return len(self.ds)

    def __getitems__(self, keys: list[int]) -> list[dict]:
        rows = self.ds.__getitems__(keys)
        if self.transform is not None:
            for row in rows:
                row["features"] = self.transform.sample(row["features"])
        return rows


def _as_tuple(batch: dict) -> tuple[Any, Any, Any]:
    return batch["features"], batch["label"], batch["index"]


class ArrowFormat(StorageFormat):
    name = "arrow"
    libraries = ("datasets", "pyarrow", "fsspec")  # what reads it (distribution names), for the record's `packages`
    native_rank_split = "datasets split_dataset_by_node"
    options_type = ArrowOptions
    python_bound_writer = True
    writer_type = ArrowWriter
    reader_type = ArrowReader
    remote_pipeline = True  # load_dataset("arrow", data_files=[s3 URLs], streaming=True): its documented remote path

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return ArrowObjectReader

    def pipeline(self, reader: ArrowReader | ArrowObjectReader, read: NativeRead) -> Pipeline:
        """`load_from_disk(...).with_format("torch", ...)` in a DataLoader: one `__getitems__` per batch, default
        collate. The checked folder stays pinned until the epoch ends. From object storage: the files streamed,
        shuffled by the buffer, in a DataLoader that batches the streamed rows."""
        if isinstance(reader, ArrowObjectReader):
            from iobench.formats.arrow_remote import stream

            streamed = stream(reader.storage, features_of(reader.spec), reader.cache)
            if read.shuffle:
                streamed = streamed.shuffle(seed=read.seed, buffer_size=reader.options.shuffle_buffer)
            collate = _Stacked(reader.spec, read.transform)
            return Pipeline(streamed.with_format("numpy"), read.batch_size, collate_fn=collate, seeded=False)
        ds, pinned = load(reader.directory, reader.spec, "torch")
        try:
            if read.world > 1:  # the rank's contiguous shard, as datasets splits a map-style dataset between nodes
                from datasets.distributed import split_dataset_by_node

                ds = split_dataset_by_node(ds, rank=read.rank, world_size=read.world)
        except BaseException:
            pinned.close()
            raise
        data = _Rows(ds, read.transform) if read.transform is not None else ds
        return Pipeline(data, read.batch_size, shuffle=read.shuffle, as_batch=_as_tuple, release=pinned.close)

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        pin(directory, spec).close()

    def estimate_bytes(self, spec: DatasetSpec, options: ArrowOptions) -> int:
        # the staging file and the saved shards exist together for a moment
        return 2 * (spec.payload_bytes + 16 * spec.n_samples) + 2**20
