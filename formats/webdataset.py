"""webdataset: POSIX tar shards written by webdataset's own ShardWriter, as its users store samples.

Each sample is a `<key>.png` (image-shaped uint8: what WebDataset image sets hold, lossless, by the same
encoder as the `files` format) or `<key>.npy` (other samples) with a `<key>.cls` label; the key is the
sample's zero-padded index, so the order a pipeline delivers can be scored. Shards hold `shard_samples`
samples (10,000: the count in webdataset's own ShardWriter example).

WebDataset has no random access: its users read shards in order, shuffling the shard order and mixing
samples in a buffer (`WebDatasetFormat.pipeline`, the documented pipeline). For `verify` and iobench's other
loaders the writer also keeps where each sample's member lies in its shard (`index.npy`: shard, offset,
size) and the labels (`labels.npy`); both are checked against the shards before any read.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import (
    DERIVED,
    READ,
    FormatReader,
    NativeRead,
    Pipeline,
    StorageFormat,
    read_option,
)
from iobench.formats.object_readers import PipelineOnlyReader
from iobench.formats.shards import (
    INDEX,
    LABELS,
    IndexedShardsReader,
    IndexedShardsWriter,
    Shards,
    WholeShardsPerRank,
    check_shard_count,
    decode,
    extension,
    load_npy,
    require_index,
)
from iobench.formats.tar_stream import BLOCK, CheckedTar, ShardError
from iobench.spec import LABEL_DTYPE, DatasetSpec
from iobench.system.fsutil import open_regular

SHARD = "shard-%06d.tar"


@dataclass(frozen=True)
class WebDatasetOptions:
    shard_samples: int = 10_000  # ShardWriter(maxcount=...) in webdataset's own example
    shuffle_buffer: int = read_option(1_000, tune=(1_000, 10_000))  # .shuffle(N): the buffer of its docs
    shard_shuffle: int = field(default=100, metadata=READ)  # WebDataset(shardshuffle=N): what its True means
    shards: int = field(default=0, metadata=DERIVED)  # written: the number of shards (resolved when writing)

    def __post_init__(self) -> None:
        for name in ("shard_samples", "shuffle_buffer", "shard_shuffle", "shards"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise IobenchError(f"webdataset {name} must be a whole number >= 0, got {value!r}")
        if self.shard_samples < 1:
            raise IobenchError("webdataset shard_samples must be >= 1")


def shard_count(spec: DatasetSpec, options: WebDatasetOptions) -> int:
    return -(-spec.n_samples // options.shard_samples)


def key_of(index: int, spec: DatasetSpec) -> str:
    return f"{index:0{len(str(spec.n_samples - 1))}d}"


class WebDatasetWriter(IndexedShardsWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: WebDatasetOptions) -> None:
        import webdataset as wds

        super().__init__(directory, spec, options)
        # shard_samples a shard, never cut by size: the shard count is declared before writing (`resolve_options`),
        # and ShardWriter's 3 GB cut added a shard the index did not know (28 samples of 147 MB: refused on read)
        self.sink = wds.ShardWriter(
            str(directory / SHARD), maxcount=options.shard_samples, maxsize=float("inf"), verbose=0, post=self._indexed
        )

    def _indexed(self, fname: str) -> None:
        """After each shard: where its members' data lie (the shard was just written, so it is cached)."""
        shard = int(Path(fname).stem.rsplit("-", 1)[1])
        with tarfile.open(fname) as tar:
            for member in tar:
                key, _, ext = member.name.rpartition(".")
                if ext == self.ext:
                    self.index[int(key)] = (shard, member.offset_data, member.size)

    def put(self, index: int, payload: bytes, label: int) -> None:
        self.sink.write({"__key__": key_of(index, self.spec), self.ext: payload, "cls": str(label).encode()})

    def finish_shards(self) -> None:
        self.sink.close()  # closes the last shard: its index is taken


class WebDatasetReader(IndexedShardsReader):
    """Random access through the index, for `verify` and iobench's loaders; decoding as the pipeline does."""

    def _open(self) -> tuple[np.ndarray, np.ndarray, Shards]:
        spec, options = self.spec, self.options
        index = load_npy(self.directory / INDEX, np.dtype(np.int64), (spec.n_samples, 3))
        labels = load_npy(self.directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))
        shards = Shards([])
        shards.fds = [open_regular(self.directory / (SHARD % k)) for k in range(options.shards)]
        fds = shards.fds
        sizes = np.array([os.fstat(fd).st_size for fd in fds], dtype=np.int64)
        bad = (index[:, 0] < 0) | (index[:, 0] >= len(fds)) | (index[:, 1] < 0) | (index[:, 2] <= 0)
        if bad.any() or (index[:, 1] + index[:, 2] > sizes[np.clip(index[:, 0], 0, len(fds) - 1)]).any():
            shards.close()
            raise ValueError(f"{self.directory / INDEX}: an entry points outside its shard")
        return index, labels, shards

    def parse(self, data: bytes, name: str) -> np.ndarray:
        return decode(data, self.spec, name)


# ---- webdataset's own pipeline ---------------------------------------------------------------------


def member_limit(spec: DatasetSpec) -> int:
    """The largest member a shard of this dataset holds: one encoded sample (PNG's or .npy's few bytes of
    framing over the raw size, with room to spare)."""
    return spec.sample_bytes + spec.sample_bytes // 50 + 2**16


class _OpenShards:
    """webdataset's opener stage, with the shard names its shard list yields opened here: each one a regular
    file of the dataset folder, its member headers checked as they are read (formats.tar_stream). webdataset's
    own opener reads a name as a URL (`pipe:` runs a shell, `#` and `?` cut the path) and opens it unchecked."""

    def __init__(self, directory: Path, spec: DatasetSpec) -> None:
        self.directory, self.limit = directory, member_limit(spec)

    def __call__(self, sources: Iterator[dict]) -> Iterator[dict]:
        for source in sources:
            name = source["url"]
            with CheckedTar(open_regular(self.directory / name), name, self.limit) as stream:
                yield dict(url=name, stream=stream)


class _FetchShards:
    """webdataset's opener over object storage as its users stream shards, one GET per shard through curl (what its
    `gopen` runs for a URL), with the shard list's names made into presigned URLs. The URL reaches curl on its
    standard input (`--config -`), never its command line (which every local user reads, and a presigned URL is a
    key for a week), and no error repeats it: a missing shard is one line naming the object and the HTTP status.
    curl is held to the storage's bounds (connect within 5 s, no 30 s without a byte, no more than the manifest's
    size) and its exit status is read when the shard is done: a refused or broken transfer ends the epoch."""

    def __init__(self, storage: Any, spec: DatasetSpec, urls: dict[str, str]) -> None:
        self.storage, self.limit, self.urls = storage, member_limit(spec), urls

    def __call__(self, sources: Iterator[dict]) -> Iterator[dict]:
        from iobench.storage.remote import client_counts

        for source in sources:
            name = source["url"]
            curl = self._fetch(name)
            try:
                size, first = self.storage.sizes.get(name), self._first(curl, name)
                with CheckedTar(os.dup(curl.stdout.fileno()), name, self.limit, size, first) as stream:
                    yield dict(url=name, stream=stream)
                curl.stdout.close()
                if curl.wait() != 0:
                    raise ShardError(f"{self.storage.url(name)}: {self._said(curl, name)}")
                client_counts.add("GET", stream.pos)  # the bytes the pipeline read of the transfer
            finally:
                if curl.poll() is None:
                    curl.kill()
                curl.wait()

    def _fetch(self, name: str) -> subprocess.Popen:
        from iobench.storage.remote import bounds

        size = self.storage.sizes.get(name)
        argv = [
            "curl",
            "--silent",
            "--show-error",
            "--fail",
            "--connect-timeout",
            f"{bounds.CONNECT_TIMEOUT_S:g}",
            "--speed-limit",
            "1",
            "--speed-time",
            f"{bounds.read_timeout_s():g}",
            *(["--max-filesize", str(size)] if size is not None else []),
            "--config",
            "-",
        ]
        try:
            curl = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise ShardError(
                "webdataset streams shards from object storage through curl, which is not on PATH"
            ) from None
        curl.stdin.write(f'url = "{self.urls[name]}"\n'.encode())
        curl.stdin.close()
        return curl

    def _first(self, curl: subprocess.Popen, name: str) -> bytes:
        """The shard's first block, or curl's one line where it ends without one (an HTTP 404 writes nothing: the
        tar reader would call it an empty file)."""
        first = b""
        while len(first) < BLOCK and (data := os.read(curl.stdout.fileno(), BLOCK - len(first))):
            first += data
        if len(first) < BLOCK and curl.wait() != 0:
            raise ShardError(f"{self.storage.url(name)}: {self._said(curl, name)}")
        return first

    def _said(self, curl: subprocess.Popen, name: str) -> str:
        """curl's last words, without the URL (it does not repeat it; a signed one is removed all the same)."""
        text = curl.stderr.read(4096).decode(errors="replace").replace(self.urls[name], self.storage.url(name))
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        last = re.sub(r"^curl: \(\d+\) ", "", lines[-1]) if lines else f"curl exit {curl.returncode}"
        return last.replace("The requested URL returned error:", "HTTP")


def signed_urls(storage: Any, names: list[str], seconds: int = 3600) -> dict[str, str]:
    """A GET URL per shard, presigned for an hour with the storage's keys (by boto3: obstore in the process that
    forks the workers would leave theirs waiting)."""
    client = storage.client()
    return {
        n: client.generate_presigned_url(
            "get_object", Params={"Bucket": storage.bucket, "Key": storage.key(n)}, ExpiresIn=seconds
        )
        for n in names
    }


class WebDatasetObjectReader(PipelineOnlyReader):
    """The shards in object storage, for webdataset's own pipeline only (it streams whole shards over HTTP)."""


def _failed(exn: Exception) -> bool:
    """webdataset's exception handler: re-raise as one line naming the shard and the sample (webdataset appends
    the stream and the URL to an exception's arguments, and wraps a decoder's in a DecodingError without a
    message but with the sample's key and shard)."""
    if type(exn).__name__ == "DecodingError" and exn.__cause__ is not None:
        cause = exn.__cause__
        where = f"{getattr(exn, 'url', None)}: sample {getattr(exn, 'key', None)}: "
    else:
        cause = exn
        shard = next((a for a in reversed(cause.args[1:]) if isinstance(a, str)), None)
        where = f"{shard}: " if shard and not isinstance(cause, ShardError) else ""
    first = str(cause.args[0]).split(" @ ")[0] if cause.args else ""
    kind = "" if isinstance(cause, (ShardError, ValueError)) else f"{type(cause).__name__}: "
    raise ShardError(f"{where}{kind}{first or type(cause).__name__}") from None


class _Decode:
    """webdataset's decode stage with this handler only: no default handlers, so no pickle, no gzip. A label
    is a class of the dataset, written as ShardWriter's `.cls` (decimal digits)."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.spec, self.ext = spec, extension(spec)

    def __call__(self, key: str, data: bytes) -> Any:
        ext = key.rpartition(".")[2]
        if ext == self.ext:
            return decode(data, self.spec, ext)
        if ext == "cls":
            if not (data.isdigit() and len(data) <= 19 and int(data) < self.spec.n_classes):
                raise ValueError(f"{key}: label {data[:24]!r} is not a class of the dataset")
            return int(data)
        return None


class _Collate:
    """A list of (features, label, key) as three tensors; the keys are the samples' indices, each one of the
    dataset's (the delivered order is scored by them)."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.n = spec.n_samples

    def __call__(self, samples: list[tuple[np.ndarray, int, str]]) -> tuple[Any, Any, Any]:
        import torch

        features, labels, keys = zip(*samples, strict=True)
        if not all(k.isdigit() and len(k) <= 19 and int(k) < self.n for k in keys):
            raise ValueError(f"a sample key that is not an index of the {self.n:,} samples: {keys}"[:200])
        return (
            torch.from_numpy(np.stack(features)),
            torch.tensor(labels, dtype=torch.int64),
            torch.tensor([int(k) for k in keys], dtype=torch.int64),
        )


class _PerSample:
    """The run's host transform on each sample, in the worker that decoded it (as `files` does)."""

    def __init__(self, transform: Any) -> None:
        self.transform = transform

    def __call__(self, sample: tuple[np.ndarray, int, str]) -> tuple[Any, int, str]:
        import torch

        features, label, key = sample
        return self.transform.sample(torch.from_numpy(np.ascontiguousarray(features))).numpy(), label, key


def pipeline(
    opener: Any,
    spec: DatasetSpec,
    options: WebDatasetOptions,
    batch: int,
    shuffle: bool,
    seed: int,
    transform: Any = None,
    world: int = 1,
):
    """The documented pipeline: shards (shuffled, deterministically per epoch), a shuffle buffer, decode,
    tuples, batches made in the workers. Built from the stages `wds.WebDataset(names, shardshuffle=N,
    detshuffle=True, seed=seed)` chains, in its order, with the shards opened by `opener` (`_OpenShards` for a
    folder, `_FetchShards` for object storage) instead of its URL opener. Under torchrun (`world` > 1)
    `split_by_node` gives each rank every world-th shard (its rank from torchrun's RANK, as webdataset reads
    it); webdataset splits before it shuffles shards, so a rank reads the same shards every epoch."""
    import webdataset as wds
    from webdataset.compat import FluidWrapper  # what wds.WebDataset is: a DataPipeline with the fluid methods
    from webdataset.filters import detshuffle, pipelinefilter
    from webdataset.tariterators import group_by_keys, tar_file_expander

    stages: list[Any] = [wds.SimpleShardList([SHARD % k for k in range(options.shards)])]  # a list: no braces
    if world > 1:
        stages.append(wds.split_by_node)
    stages.append(wds.split_by_worker)
    if shuffle:
        stages.append(detshuffle(options.shard_shuffle, seed=seed))
    stages += [
        opener,
        pipelinefilter(tar_file_expander)(handler=_failed),
        pipelinefilter(group_by_keys)(handler=_failed),
    ]
    ds = FluidWrapper(stages[0])
    for stage in stages[1:]:
        ds.append(stage)
    if shuffle and options.shuffle_buffer:
        ds = ds.shuffle(options.shuffle_buffer)
    ext = extension(spec)
    ds = ds.decode(_Decode(spec), pre=[], post=[], only=[ext, "cls"], handler=_failed)
    ds = ds.to_tuple(ext, "cls", "__key__", handler=_failed)
    if transform is not None:
        ds = ds.map(_PerSample(transform), handler=_failed)
    return ds.batched(batch, collation_fn=_Collate(spec), partial=True)


class WebDatasetFormat(WholeShardsPerRank, StorageFormat):
    name = "webdataset"
    libraries = ("webdataset", "pillow")  # what reads it (distribution names), for the record's `packages`
    options_type = WebDatasetOptions
    python_bound_writer = True
    writer_type = WebDatasetWriter
    reader_type = WebDatasetReader
    native_rank_split = "webdataset split_by_node"
    remote_pipeline = True  # shard URLs over HTTP, streamed by curl as its gopen does: its documented remote path

    def object_reader(self, options: Any = None) -> type[FormatReader]:
        return WebDatasetObjectReader

    def pipeline(self, reader: WebDatasetReader, read: NativeRead) -> Pipeline:
        """webdataset's pipeline, batching itself (batch_size=None in the DataLoader, as its README has it)."""
        names = [SHARD % k for k in range(reader.options.shards)]
        if isinstance(reader, WebDatasetObjectReader):
            opener: Any = _FetchShards(reader.storage, reader.spec, signed_urls(reader.storage, names))
        else:
            opener = _OpenShards(reader.directory, reader.spec)
        ds = pipeline(
            opener, reader.spec, reader.options, read.batch_size, read.shuffle, read.seed, read.transform, read.world
        )
        return Pipeline(ds, batch_size=None, seeded=False)

    def resolve_options(self, spec: DatasetSpec, options: WebDatasetOptions) -> WebDatasetOptions:
        from dataclasses import replace

        return replace(options, shards=shard_count(spec, options))

    def check_layout(self, directory: Path, spec: DatasetSpec, options: WebDatasetOptions) -> None:
        require_index(directory)
        check_shard_count(options.shards, shard_count(spec, options))

    def estimate_bytes(self, spec: DatasetSpec, options: WebDatasetOptions) -> int:
        # tar: a 512-byte header per member and the payload padded to 512; PNG may exceed raw slightly
        per_sample = 2 * 512 + 512 + -(-int(spec.sample_bytes * 1.01 + 128) // 512) * 512
        return spec.n_samples * (per_sample + 32) + 2 * 10240 * shard_count(spec, options)
