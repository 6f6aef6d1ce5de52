"""tfrecord: TFRecord shards of `tf.train.Example`s written by the `tfrecord` package's own TFRecordWriter
(no TensorFlow), as MLPerf Storage's image workloads store them.

Each Example holds `image` (bytes: a PNG for image-shaped uint8 samples, as TFRecord image sets hold
JPEG/PNG; an .npy otherwise, as in the `webdataset` format), `label` and `index` (the sample's position,
so the order a pipeline delivers can be scored; 8 little-endian bytes, since the package turns every int
feature into a numpy array, which cost 3% of a small-image epoch: datasets written before keep an int).
Shards hold about `shard_samples` samples (10,000, as the webdataset format), spread evenly so that no
shard holds a single record (tfrecord reads a one-line index file as no index). Beside each shard the
library's text index (`shard-K.index`: offset and size per record), and for `verify` and iobench's other
loaders `index.npy` (shard, offset, size) and `labels.npy`.

The `tfrecord` package trusts a record's length field (it grows a buffer to 1.5x the declared length)
and its index files, so opening the reader (which the native pipeline does first) checks every record's
framing and both indexes against the shards before anything is read (`check_shards`): the records follow
each other from offset 0 to the end of the file, each length field matching the index, and the text
indexes saying the same as `index.npy`.
"""

from __future__ import annotations

import mmap
import os
import struct
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import DERIVED, NativeRead, Pipeline, StorageFormat, read_option
from iobench.formats.shards import (
    INDEX,
    LABELS,
    IndexedShardsReader,
    IndexedShardsWriter,
    Shards,
    WholeShardsPerRank,
    check_shard_count,
    decode,
    load_npy,
    require_index,
)
from iobench.spec import LABEL_DTYPE, DatasetSpec
from iobench.system.fsutil import Pinned, open_regular

SHARD, SHARD_INDEX = "shard-%06d.tfrecord", "shard-%06d.index"
FRAMING = 16  # length (8) and its masked CRC (4) before the data, the data's masked CRC (4) after
INDEX_BYTES = 8  # the index feature: int64, little-endian
MAX_INDEX_BYTES = 64  # one line of a text index: two decimal numbers


@dataclass(frozen=True)
class TFRecordOptions:
    shard_samples: int = 10_000  # about this many records per shard, as the webdataset format
    shuffle_queue: int = read_option(1_024, tune=(1_024, 10_000))  # TFRecordDataset(shuffle_queue_size=...)
    shards: int = field(default=0, metadata=DERIVED)  # written: the number of shards (resolved when writing)
    index_bytes: bool = field(default=False, metadata=DERIVED)  # written: index as bytes (False: written before)

    def __post_init__(self) -> None:
        for name in ("shard_samples", "shuffle_queue", "shards"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise IobenchError(f"tfrecord {name} must be a whole number >= 0, got {value!r}")
        if not isinstance(self.index_bytes, bool):
            raise IobenchError(f"tfrecord index_bytes must be true or false, got {self.index_bytes!r}")
        if self.shard_samples < 2:
            raise IobenchError("tfrecord shard_samples must be >= 2 (tfrecord misreads a one-record index)")


def shard_count(spec: DatasetSpec, options: TFRecordOptions) -> int:
    return max(1, min(-(-spec.n_samples // options.shard_samples), spec.n_samples // 2))


def shard_bounds(spec: DatasetSpec, shards: int) -> list[int]:
    """The first sample of each shard and the end: even shares, so none holds a lone record."""
    return [k * spec.n_samples // shards for k in range(shards + 1)]


class TFRecordWriter(IndexedShardsWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: TFRecordOptions) -> None:
        import tfrecord

        super().__init__(directory, spec, options)
        self._writer_type = tfrecord.TFRecordWriter
        self.bounds = shard_bounds(spec, options.shards)
        self.shard, self.sink = -1, None

    def _roll(self) -> None:
        self.finish_shards()
        self.shard += 1
        self.sink = self._writer_type(str(self.directory / (SHARD % self.shard)))

    def finish_shards(self) -> None:
        """Close the current shard and write its text index (offset and size of each record)."""
        if self.sink is None:
            return
        self.sink.close()
        rows = self.index[self.bounds[self.shard] : self.bounds[self.shard + 1]]
        text = "".join(f"{offset} {size}\n" for _, offset, size in rows)
        (self.directory / (SHARD_INDEX % self.shard)).write_text(text)
        self.sink = None

    def put(self, index: int, payload: bytes, label: int) -> None:
        if self.sink is None or index == self.bounds[self.shard + 1]:
            self._roll()
        offset = self.sink.file.tell()
        key = (index.to_bytes(INDEX_BYTES, "little"), "byte")
        self.sink.write({"image": (payload, "byte"), "label": (label, "int"), "index": key})
        self.index[index] = (self.shard, offset, self.sink.file.tell() - offset)


def check_shards(directory: Path, spec: DatasetSpec, options: TFRecordOptions) -> np.ndarray:
    """index.npy checked against every shard's framing and its text index; ValueError names what is wrong.
    Vectorised (a record's check was 2.4 us in a loop: 2.4% of a small-image run's first epoch)."""
    index = load_npy(directory / INDEX, np.dtype(np.int64), (spec.n_samples, 3))
    bounds = shard_bounds(spec, options.shards)
    for k in range(options.shards):
        rows = index[bounds[k] : bounds[k + 1]]
        name = directory / (SHARD % k)
        fd = open_regular(name)
        try:
            end = os.fstat(fd).st_size
            expected = np.concatenate([[0], np.cumsum(rows[:, 2])[:-1]]) if len(rows) else np.empty(0)
            if (rows[:, 0] != k).any() or (rows[:, 1] != expected).any() or int(rows[:, 2].sum()) != end:
                raise ValueError(f"{name}: its records do not follow each other as {INDEX} says")
            if (rows[:, 2] <= FRAMING).any():
                raise ValueError(f"{name}: a record is cut short")
            if (_length_fields(fd, rows[:, 1]) != rows[:, 2] - FRAMING).any():
                raise ValueError(f"{name}: a record declares another length than its index")
        finally:
            os.close(fd)
        _check_text_index(directory / (SHARD_INDEX % k), rows)
    return index


def _length_fields(fd: int, offsets: np.ndarray) -> np.ndarray:
    """Each record's length field (8 bytes, little-endian, at its offset), gathered at once; the offsets
    were checked to lie inside the file. Unmapped before returning (a cold run maps nothing)."""
    if len(offsets) == 0:
        return np.empty(0, dtype=np.int64)
    with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
        data = np.frombuffer(mapped, dtype=np.uint8)
        fields = data[offsets[:, None] + np.arange(8)].view("<u8").ravel().astype(np.int64)
        del data  # the view must go before the mapping closes
    return fields


def _check_text_index(path: Path, rows: np.ndarray) -> None:
    """The library seeks by this file: it must say what index.npy says, line for line."""
    with open(open_regular(path), "rb") as f:
        text = f.read(MAX_INDEX_BYTES * len(rows) + 1)
    if len(text) > MAX_INDEX_BYTES * len(rows):
        raise ValueError(f"{path}: longer than {len(rows)} index lines")
    lines = text.decode("ascii", errors="replace").splitlines()
    if lines != [f"{offset} {size}" for offset, size in rows[:, 1:].tolist()]:
        raise ValueError(f"{path}: does not match {INDEX}")


def masked_crc(data: bytes) -> bytes:
    """TFRecord's checksum: CRC-32C, rotated and offset (as the package's writer computes it)."""
    import crc32c

    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")


def parse_record(data: bytes, spec: DatasetSpec, name: str) -> np.ndarray:
    """One framed record, its two CRCs checked (the package's reader skips them; TensorFlow checks them), its
    Example parsed by protobuf (data, never code) and its image decoded."""
    from google.protobuf.message import DecodeError
    from tfrecord import example_pb2

    (length,) = struct.unpack("<Q", data[:8])
    if length != len(data) - FRAMING:
        raise ValueError(f"{name}: the record's length field does not match its index")
    if masked_crc(data[:8]) != data[8:12] or masked_crc(data[12 : 12 + length]) != data[12 + length :]:
        raise ValueError(f"{name}: the record's CRC does not match its bytes")
    example = example_pb2.Example()
    try:
        example.ParseFromString(data[12 : 12 + length])
    except DecodeError as exc:
        raise ValueError(f"{name}: not a tf.train.Example ({exc})") from None
    images = example.features.feature["image"].bytes_list.value
    if len(images) != 1:
        raise ValueError(f"{name}: an Example without one image")
    return decode(images[0], spec, name)


class TFRecordReader(IndexedShardsReader):
    """Random access through index.npy, for `verify` and iobench's loaders; decoding as the pipeline does."""

    def _open(self) -> tuple[np.ndarray, np.ndarray, Shards]:
        spec, options = self.spec, self.options
        index = check_shards(self.directory, spec, options)
        labels = load_npy(self.directory / LABELS, np.dtype(LABEL_DTYPE), (spec.n_samples,))
        shards = Shards([open_regular(self.directory / (SHARD % k)) for k in range(options.shards)])
        return index, labels, shards

    def parse(self, data: bytes, name: str) -> np.ndarray:
        return parse_record(data, self.spec, name)


# ---- the tfrecord package's own pipeline ------------------------------------------------------------


def description(options: TFRecordOptions) -> dict[str, str]:
    """The features the pipeline parses: the index as bytes where it was written so."""
    return {"image": "byte", "label": "int", "index": "byte" if options.index_bytes else "int"}


def record_index(value: Any) -> int:
    """A parsed Example's index: 8 bytes, or (written before) the package's int64 array."""
    if isinstance(value, bytes):
        if len(value) != INDEX_BYTES:
            raise ValueError(f"an Example's index holds {len(value)} bytes, not {INDEX_BYTES}")
        return int.from_bytes(value, "little")
    return int(value[0])


class _Decode:
    """MultiTFRecordDataset's transform: the example's image decoded (and the run's host transform); its index
    one of the dataset's (the delivered order is scored by it) and its label one of its classes."""

    def __init__(self, spec: DatasetSpec, transform: Any) -> None:
        self.spec, self.transform = spec, transform

    def __call__(self, example: dict) -> tuple[Any, tuple[int, int]]:
        index = record_index(example["index"])
        label = example["label"]
        if not 0 <= index < self.spec.n_samples:
            raise ValueError(f"an Example's index {index} is not one of the {self.spec.n_samples:,} samples")
        if len(label) != 1 or not 0 <= int(label[0]) < self.spec.n_classes:
            raise ValueError(f"sample {index}: label {label[:4]} is not a class of the dataset")
        features = decode(example["image"], self.spec, f"sample {index}")
        if self.transform is not None:
            import torch

            features = self.transform.sample(torch.from_numpy(np.ascontiguousarray(features)))
        return features, (int(label[0]), index)


def _collate(batch: list) -> tuple[Any, Any]:
    """The features through torch's default collate, as the package's users batch them; the label and the
    index carried for the shuffle score as one tensor built from Python ints (collating a small array per
    sample cost 1.2% of a small-image epoch, and two tensors would be one more handover per worker batch)."""
    import torch
    from torch.utils.data import default_collate

    with warnings.catch_warnings():  # decoded images are read-only arrays; the batch is a copy nothing writes
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        features = default_collate([features for features, _ in batch])
    return features, torch.tensor([pair for _, pair in batch])


def _split_pairs(batch: tuple[Any, Any]) -> tuple[Any, Any, Any]:
    """(features, labels, indices) from a collated batch of (features, (label, index)) pairs."""
    features, pairs = batch
    return features, pairs[:, 0], pairs[:, 1]


class TFRecordFormat(WholeShardsPerRank, StorageFormat):
    name = "tfrecord"
    libraries = ("tfrecord", "protobuf", "pillow")  # what reads it (distribution names), for the record's `packages`
    options_type = TFRecordOptions
    python_bound_writer = True
    writer_type = TFRecordWriter
    reader_type = TFRecordReader
    native_rank_split = "tfrecord shards by rank"

    def pipeline(self, reader: TFRecordReader, read: NativeRead) -> Pipeline:
        """The README's pipelines. Shuffled: MultiTFRecordDataset over the shards (finite, each weighted by its
        records) with its shuffle queue. In order: each shard's TFRecordDataset in turn (without an index when
        no workers share it: with one, the package starts a file at a random record). The package draws from
        numpy's global generator: seeded here (and per worker by torch from the DataLoader's generator).

        The package opens shards and indexes by name (and builds the names with `str.format`): it is handed
        names of files opened and checked here (`Pinned`), never the dataset's paths."""
        import torch
        from tfrecord.torch.dataset import MultiTFRecordDataset, TFRecordDataset

        reader.handle  # noqa: B018 - opening the reader checks every shard once, before the package reads one
        np.random.seed(read.seed % 2**32)
        directory, decode_one = reader.directory, _Decode(reader.spec, read.transform)
        parsed = description(reader.options)
        # under torchrun each rank reads every world-th shard (the package has no rank splitting of its own)
        shards = range(read.rank, reader.options.shards, read.world)
        names = [name % k for k in shards for name in (SHARD, SHARD_INDEX)]
        pinned = Pinned(files={name: directory / name for name in names})
        try:
            if read.shuffle:
                bounds = shard_bounds(reader.spec, reader.options.shards)
                splits = {f"{k:06d}": bounds[k + 1] - bounds[k] for k in shards}
                ds: Any = MultiTFRecordDataset(
                    pinned.pattern("shard-{}.tfrecord"),
                    pinned.pattern("shard-{}.index"),
                    splits,
                    description=parsed,
                    shuffle_queue_size=reader.options.shuffle_queue,
                    transform=decode_one,
                    infinite=False,
                )
            else:
                indexed = read.num_workers > 0
                ds = torch.utils.data.ChainDataset(
                    [
                        TFRecordDataset(
                            pinned.path(SHARD % k),
                            pinned.path(SHARD_INDEX % k) if indexed else None,
                            description=parsed,
                            transform=decode_one,
                        )
                        for k in shards
                    ]
                )
        except BaseException:
            pinned.close()
            raise
        return Pipeline(ds, read.batch_size, collate_fn=_collate, as_batch=_split_pairs, release=pinned.close)

    def resolve_options(self, spec: DatasetSpec, options: TFRecordOptions) -> TFRecordOptions:
        return replace(options, shards=shard_count(spec, options), index_bytes=True)

    def check_layout(self, directory: Path, spec: DatasetSpec, options: TFRecordOptions) -> None:
        require_index(directory)
        check_shard_count(options.shards, shard_count(spec, options))
        check_shards(directory, spec, options)

    def estimate_bytes(self, spec: DatasetSpec, options: TFRecordOptions) -> int:
        # per record: framing, the Example's keys and varints, the payload (PNG may exceed raw slightly)
        per_sample = FRAMING + 96 + int(spec.sample_bytes * 1.01 + 128)
        return spec.n_samples * (per_sample + 24 + MAX_INDEX_BYTES) + 2**16 * shard_count(spec, options)
