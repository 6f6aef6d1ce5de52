"""The interface every storage format implements: write the shared dataset, read it back.

Formats know how bytes are laid out on disk and nothing about loaders, timing or the CLI.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.storage import NO_HINTS, ReadHints, Storage
from iobench.storage.local import LocalStorage

# Metadata of an options field the writer arrives at (a shard count): recorded, never set by a user
# (`--format-option` refuses it).
DERIVED = {"derived": True}
# Metadata of an options field only the format's own pipeline reads (a shuffle buffer): written into the
# manifest with its default, and `run --format-option` may set it per run (`--loader native`).
READ = {"read": True}
# Metadata of a read option of a format's reader of object storage, which every loader reads through (the
# client that reads npy's objects by index): `run --format-option` sets it with any loader.
READ_ANY_LOADER = {"read": True, "any_loader": True}
# Metadata of a read option that only reading from object storage uses (a cache budget, a client): a run on
# this machine's files refuses it rather than record a setting that changed nothing.
OBJECT_STORAGE_ONLY = {"object_storage_only": True}


def read_option(default: Any, tune: tuple = ()) -> Any:
    """A READ field whose values `iobench tune` tries (the library's default first): a knob that trades
    speed against shuffle quality, or one the study found worth 10x."""
    return field(default=default, metadata={**READ, "tune": tune})


def tune_values(options_type: type) -> dict[str, tuple]:
    """The READ fields with values for `tune` to try, by name."""
    return {f.name: f.metadata["tune"] for f in fields(options_type) if f.metadata.get("tune")}


@dataclass(frozen=True)
class NoOptions:
    """For formats without tunables."""


class FormatWriter(ABC):
    """Receives the dataset's chunks in order, exactly once each."""

    def __init__(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        self.directory = directory
        self.spec = spec
        self.options = options

    @abstractmethod
    def write(self, chunk: Chunk) -> None:
        """Store samples [chunk.start, chunk.stop)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release every handle; the caller fsyncs and renames the directory."""

    def abort(self) -> None:
        """Writing failed or was interrupted (the directory will be removed): release what close would,
        without finishing the files (a writer with processes of its own stops them here)."""
        self.close()

    def digests(self) -> dict[str, str]:
        """SHA-256 of files written whole and in order, hashed on the way (path -> hex), saving a re-read."""
        return {}


class HashedFile:
    """A file written from its first byte to its last, SHA-256 hashed on the way."""

    def __init__(self, path: Path, mode: str = "wb") -> None:
        self.path = path
        self._file = open(path, mode)
        self._hash = hashlib.sha256()
        self._written = 0

    def write(self, data: np.ndarray | bytes) -> None:
        view = memoryview(np.ascontiguousarray(data) if isinstance(data, np.ndarray) else data)
        self._file.write(view)
        self._hash.update(view)
        self._written += view.nbytes

    def close(self) -> str | None:
        """The digest, or None when the file holds bytes that were not written through us."""
        self._file.close()
        return self._hash.hexdigest() if self._written == self.path.stat().st_size else None


class TwoFileWriter(FormatWriter):
    """Features and labels each appended to one file, front to back, hashed on the way."""

    def _start(self, features: HashedFile, labels: HashedFile) -> None:
        self._files = [features, labels]
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


@dataclass(frozen=True)
class FixedLayout:
    """Where a format keeps sample i without encoding: features at features_offset + i * feature_bytes,
    int64 labels at labels_offset + i * 8 (what the direct loader reads with plain preads)."""

    features: Path
    features_offset: int
    labels: Path
    labels_offset: int


@dataclass(frozen=True)
class NativeRead:
    """What `--loader native` asks of a format's own pipeline for one epoch (`StorageFormat.pipeline`)."""

    batch_size: int
    shuffle: bool
    seed: int
    num_workers: int = 0  # the run's workers: a pipeline may read differently with them (TFRecord's index)
    transform: Any = None  # iobench's Transform: per_sample(x) / per_samples(batch), or None
    # Under torchrun: this rank's share, split by the library's own means (`StorageFormat.native_rank_split`)
    rank: int = 0
    world: int = 1


@dataclass(frozen=True)
class Pipeline:
    """One epoch of a format's own library pipeline, as the format declares it. The loader
    (`iobench.loaders.native`) puts `dataset` in the library's loader with the run's settings (workers,
    pinning, prefetch), so that every format's pipeline gets them the same way and none is built twice."""

    dataset: Any
    batch_size: int | None  # None: the dataset yields whole batches itself (WebDataset's `.batched`)
    shuffle: bool = False  # the loader's sampler shuffles it (a map-style dataset), seeded by the run
    collate_fn: Callable[[Any], Any] | None = None
    loader_class: Callable[..., Any] | None = None  # None: torch's DataLoader; e.g. LitData's StreamingDataLoader
    seeded: bool = True  # the loader is handed a torch.Generator seeded with the epoch's seed
    # the loader's batch as (features, labels, indices); None: it is one already
    as_batch: Callable[[Any], tuple[Any, Any, Any]] | None = None
    release: Callable[[], None] | None = None  # what the epoch holds open (checked files, a library's cache)


@dataclass(frozen=True)
class ReaderTraits:
    """What the loaders and the run need to know of a reader beyond its methods; the defaults fit a reader of local
    files that each thread and forked worker may open for itself."""

    # its library refuses to open the same files twice in one process (LMDB): threads share this reader, which must
    # then be safe to call from several threads; False: each thread may read through its own copy (loaders.nodes)
    one_per_process: bool = False
    # its handles may be read from several threads at once (numpy's read-only mappings): threads share this reader,
    # as a thread pipeline's own loop shares one mapping (a copy per thread maps the files again, and each mapping
    # faults its pages in anew: SPDL with 2 threads at 0.84-0.91x of its own loop that way)
    threads_share: bool = False
    # False: its library's handles and runtime do not survive a fork (Lance's I/O threads: a forked child that
    # reopened it died now and then), so the DataLoader's forked workers refuse it and threads read it instead
    fork_safe: bool = True
    # a reader of objects that only hands the storage to the format's own pipeline (it reads no sample)
    pipeline_only: bool = False
    # opening it reads the data itself, not only what describes it (h5py on an s3fs file object fetches a 50 MiB
    # block, the whole of a small file): it opens inside the epoch's clock, as the library's own loop does
    open_reads_data: bool = False
    # what it imports when it opens (a reader of objects' client library), imported before the clock by
    # `import_libraries`, as a training script imports it at its top (s3fs: about 0.2 s)
    imports: tuple[str, ...] = ()


class FormatReader(ABC):
    """Random access to one prepared format, through its storage (`iobench.storage`).

    Handles open lazily in the process that reads and reopen after a fork, so a reader built in
    the parent can be handed to DataLoader workers. Returned arrays own their memory: no view
    keeps a mapping alive after close(). The hints say how it will be read: in order (`sequential`), and
    whether the cache can hold the files (`larger_than_memory`: read-ahead then evicts what a shuffled
    epoch still needs).
    """

    def __init__(self, where: Storage | Path, spec: DatasetSpec, options: Any, hints: ReadHints = NO_HINTS) -> None:
        self.storage = where if isinstance(where, Storage) else LocalStorage(None, Path(where))
        self.directory = self._local_directory()
        self.spec = spec
        self.options = options
        self.sequential, self.larger_than_memory = hints.sequential, hints.larger_than_memory
        self._handle: Any = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return self.spec.n_samples

    def _local_directory(self) -> Path | None:
        """The format's folder, absolute and resolved: a relative name (`pipe:x/ds`) is never handed to a library
        that parses it. A reader of objects has none."""
        return self.storage.local_folder().resolve()

    # How this reader may be used, in one place for a plug-in's author (`ReaderTraits`); a subclass changes what
    # differs with `dataclasses.replace(Parent.traits, ...)`
    traits: ClassVar[ReaderTraits] = ReaderTraits()

    @classmethod
    def clients(cls, options: Any) -> tuple[str, ...]:
        """The client libraries this reader reaches the storage through with these options (its `imports`
        unless an option picks the client)."""
        return cls.traits.imports

    def import_libraries(self) -> None:
        """`clients`, where installed (a missing one is said in one line when the reader opens)."""
        for name in self.clients(self.options):
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

    @property
    def handle(self) -> Any:
        if self._handle is None or self._pid != os.getpid():
            # After a fork the parent's handle is not ours to use or close: drop it and reopen.
            self._handle = self._open()
            self._pid = os.getpid()
        return self._handle

    def close(self) -> None:
        if self._handle is not None and self._pid == os.getpid():
            self._close(self._handle)
        self._handle = None
        self._pid = None

    def __enter__(self) -> FormatReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_handle"] = None
        state["_pid"] = None
        return state

    def _check_index(self, index: int) -> int:
        n = self.spec.n_samples
        if not -n <= index < n:
            raise IndexError(f"sample {index} out of range for {n} samples")
        return index % n

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        """One sample's features and label."""
        features, labels = self.batch(np.array([self._check_index(int(index))]))
        return features[0], int(labels[0])

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Samples [start, stop), the sequential pattern; formats override with a faster path."""
        return self.batch(np.arange(start, stop))

    def fixed_layout(self) -> FixedLayout | None:
        """The raw layout, checked, for formats whose samples lie at known offsets; None otherwise."""
        return None

    @abstractmethod
    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features (len(indices), *shape) and int64 labels for arbitrary indices, in that order."""

    def encoded_batch(self, indices: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """Each sample's stored file as it is (a JPEG, a PNG: read, not decoded) and the int64 labels, in order, for
        a format whose `StorageFormat.encoded_refusal` is None."""
        raise NotImplementedError(f"{type(self).__name__} hands over decoded samples only")

    @abstractmethod
    def _open(self) -> Any: ...

    def _close(self, handle: Any) -> None:
        """Release a handle opened by _open(); the default drops the reference."""
        del handle

    def _empty(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.empty((n, *self.spec.shape), dtype=self.spec.np_dtype),
            np.empty(n, dtype=LABEL_DTYPE),
        )


class StorageFormat(ABC):
    """A storage format: its name, its options, its writer and its reader."""

    name: ClassVar[str]
    options_type: ClassVar[type] = NoOptions
    python_bound_writer: ClassVar[bool] = False  # writing costs Python work a sample: its writer gets a process
    ignored_files: ClassVar[frozenset[str]] = frozenset()  # files a writer leaves that are not data (LMDB's lock)
    writer_type: ClassVar[type[FormatWriter]]
    reader_type: ClassVar[type[FormatReader]]
    # How its own pipeline (`--loader native`) splits an epoch between torchrun ranks, as records name it (e.g.
    # "webdataset split_by_node"); None: it has no way of its own, and is refused there.
    native_rank_split: ClassVar[str | None] = None
    # The libraries (distribution names) its writer, reader and pipeline read with: each record names their versions
    libraries: ClassVar[tuple[str, ...]] = ()
    # Its reader (and library) reads files by local path: other storage must offer one (a mount) or is refused.
    needs_local_path: ClassVar[bool] = True

    def options(self, **values: Any) -> Any:
        """Build this format's options, ignoring values left at None (their defaults apply)."""
        return self.options_type(**{k: v for k, v in values.items() if v is not None})

    def resolve_options(self, spec: DatasetSpec, options: Any) -> Any:
        """Options with every automatic value replaced by what is actually used (for the manifest)."""
        return options

    def options_from_json(self, data: dict) -> Any:
        return self.options_type(**data)

    def verify_options(self, options: Any) -> Any:
        """The options `verify` reads with, to compare what is read with the dataset's content (a format that reads
        differently each time, kept photos cropped at random, reads as prepare did)."""
        return options

    def options_to_json(self, options: Any) -> dict:
        return asdict(options)

    def write_share(self, directory: Path, spec: DatasetSpec, options: Any, chunks: Iterable[Chunk], stop: int) -> None:
        """Write samples up to `stop` from `chunks` in a process of its own (`python -m iobench.data.shares`),
        for a writer that shares the dataset between processes as its library does (LitData)."""
        raise NotImplementedError(f"{self.name} is written by one process")

    def check_layout(self, directory: Path, spec: DatasetSpec, options: Any) -> None:
        """Refuse (ValueError) what the writer would not have left with these options, before anything is mapped
        or allocated."""
        return None

    def pipeline(self, reader: FormatReader, read: NativeRead) -> Pipeline:
        """The library's own loading pipeline for one epoch (`--loader native`), for a format that has one: its
        batches carry their samples' indices, so that the delivered order can be scored."""
        raise NotImplementedError(f"{self.name} has no pipeline of its own library")

    @property
    def has_pipeline(self) -> bool:
        """Whether the format declares its library's own pipeline (overrides `pipeline`)."""
        return type(self).pipeline is not StorageFormat.pipeline

    # True: `pipeline`, given a reader of objects (`object_reader`), reads them through the library's own remote
    # path (LitData's s3:// URLs); False: `--remote --loader native` reads the format through a FUSE mount
    remote_pipeline: ClassVar[bool] = False
    # False: the library's own client (Lance's Rust object_store) takes times but no bound on an answer's size from
    # the manifest, so it reads only what iobench's own emulator serves (`--remote`); a store given by
    # `--endpoint-url` is read through a FUSE mount instead, whose client is bounded
    own_client_bounded: ClassVar[bool] = True

    def encoded_refusal(self, options: Any) -> str | None:
        """Why, with these options, its reader cannot hand a batch's samples over encoded, for a decoder after the
        copy (`--decode-on device`); None where it can (`FormatReader.encoded_batch`)."""
        return f"{self.name} stores decoded samples: nothing is left to decode"

    def check_native_world(self, spec: DatasetSpec, options: Any, world: int, batch_size: int) -> None:
        """Refuse (ValueError) a torchrun world the native pipeline cannot share (a rank left without data),
        before `--nproc` launches it."""
        return None

    def read_bytes(self, spec: DatasetSpec, options: Any) -> int:
        """A sample's read from the storage, on average (what MB/s counts): more than the sample where files pad it."""
        return spec.sample_bytes

    @abstractmethod
    def estimate_bytes(self, spec: DatasetSpec, options: Any) -> int:
        """An upper estimate of the bytes on disk, for the free-space check."""

    def writer(self, directory: Path, spec: DatasetSpec, options: Any) -> FormatWriter:
        return self.writer_type(directory, spec, options)

    def reader(
        self, where: Storage | Path, spec: DatasetSpec, options: Any, hints: ReadHints = NO_HINTS
    ) -> FormatReader:
        """A reader of the files `where` holds (a storage, or a folder of this machine)."""
        if isinstance(where, Storage) and where.kind == "object":
            remote = self.object_reader(options)
            if remote is None:
                raise ValueError(f"format {self.name} has no reader of object storage yet")
            return remote(where, spec, options, hints)
        if self.needs_local_path and isinstance(where, Storage):
            where.local_folder()  # a storage without one refuses here, naming itself
        return self.reader_type(where, spec, options, hints)

    def object_reader(self, options: Any = None) -> type[FormatReader] | None:
        """The reader of this format's objects in S3-compatible storage (`run --remote`), for these options where
        an option picks it; None: none yet."""
        return None
