"""lmdb: one LMDB environment, records of lz4-frame-compressed raw bytes (never pickle).

Layout (also stored as JSON under the key `__iobench__`):
- key: the record index as 8 bytes, unsigned big-endian, so keys sort in sample order;
- value: lz4.frame.compress(labels || features) for the record's n samples (n = samples_per_record,
  fewer in the last record), labels as n little-endian int64, features as n C-order samples of the
  dataset dtype, little-endian. Sample i lives in record i // samples_per_record.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import lmdb
import lz4.frame
import numpy as np

from iobench.errors import IobenchError
from iobench.formats.base import FormatReader, FormatWriter, ReaderTraits, StorageFormat
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec
from iobench.system.fsutil import Pinned, parse_json

META_KEY = b"__iobench__"
DATA = "data.mdb"  # the one file of a read-only environment opened without its lock file
PAGE = 4096
_KEY = struct.Struct(">Q")


@dataclass(frozen=True)
class LmdbOptions:
    samples_per_record: int = 1

    def __post_init__(self) -> None:
        if self.samples_per_record < 1:
            raise IobenchError(f"LMDB samples per record must be >= 1, got {self.samples_per_record}")


def record_key(record: int) -> bytes:
    return _KEY.pack(record)


def encode_record(features: np.ndarray, labels: np.ndarray) -> bytes:
    return lz4.frame.compress(
        np.ascontiguousarray(labels, dtype=LABEL_DTYPE).tobytes() + np.ascontiguousarray(features).tobytes()
    )


def decode_record(value: bytes, spec: DatasetSpec, max_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A record's labels and features. The size the frame declares is checked against what a record
    of at most max_samples can hold before anything is allocated, and decompression stops there:
    a record that lies (an lz4 bomb) costs at most one record's memory."""
    limit = max_samples * spec.sample_bytes
    try:
        declared = lz4.frame.get_frame_info(value)["content_size"]
    except (RuntimeError, ValueError, KeyError) as exc:
        raise ValueError(f"LMDB record is not an lz4 frame ({exc})") from None
    if declared <= 0 or declared > limit or declared % spec.sample_bytes:
        raise ValueError(f"LMDB record declares {declared} bytes; a record holds at most {limit}, in whole samples")
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        raw = decompressor.decompress(value, max_length=limit + 1)
    except RuntimeError as exc:
        raise ValueError(f"LMDB record does not decompress ({exc})") from None
    if len(raw) != declared or not decompressor.eof:
        raise ValueError(f"LMDB record decompresses to more or less than the {declared} bytes it declares")
    n, rest = divmod(len(raw), spec.sample_bytes)
    if rest:
        raise ValueError(f"LMDB record of {len(raw)} bytes is not a whole number of samples")
    labels = np.frombuffer(raw, dtype=LABEL_DTYPE, count=n)
    features = np.frombuffer(raw, dtype=spec.np_dtype, offset=8 * n).reshape(n, *spec.shape)
    return features, labels


def _record_value_bound(n_bytes: int) -> int:
    """Worst-case lz4 frame size for n_bytes of input (incompressible data, all headers)."""
    return n_bytes + n_bytes // 255 + 64 + 4 * (n_bytes // 65536 + 1)


def _records_bytes(spec: DatasetSpec, options: LmdbOptions, fill: float) -> int:
    """Bytes LMDB needs for all records at a given leaf-page fill factor."""
    r = options.samples_per_record
    n_records = -(-spec.n_samples // r)
    value = _record_value_bound(r * spec.sample_bytes)
    node = 8 + 8 + value  # node header + key + value
    if node > (PAGE - 16) // 2 - 2:  # too large for a leaf: overflow pages, 16-byte node stays in leaf
        per_record = -(-(16 + value) // PAGE) * PAGE + 24 / fill
    else:
        per_record = (node + node % 2 + 2) / fill
    leaves = n_records * per_record
    return int(leaves * 1.02) + 64 * PAGE  # branch pages, meta pages, slack


class LmdbWriter(FormatWriter):
    def __init__(self, directory: Path, spec: DatasetSpec, options: LmdbOptions) -> None:
        super().__init__(directory, spec, options)
        # Appending in key order fills pages completely; half-full pages are the worst case.
        self._map_size = _records_bytes(spec, options, fill=0.5)
        self._env = lmdb.open(
            str(directory),
            map_size=self._map_size,
            subdir=True,
            lock=False,
            sync=False,
            metasync=False,
            meminit=False,
            readahead=False,
        )
        self._next_record = 0
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    def write(self, chunk: Chunk) -> None:
        self._pending.append((chunk.features, chunk.labels))
        self._pending_rows += len(chunk.labels)
        r = self.options.samples_per_record
        whole = (self._pending_rows // r) * r
        if whole:
            self._flush(whole)

    def _flush(self, rows: int) -> None:
        features = np.concatenate([f for f, _ in self._pending]) if len(self._pending) > 1 else self._pending[0][0]
        labels = np.concatenate([lb for _, lb in self._pending]) if len(self._pending) > 1 else self._pending[0][1]
        self._put(features[:rows], labels[:rows])
        self._pending = [(features[rows:], labels[rows:])] if rows < len(labels) else []
        self._pending_rows = len(labels) - rows

    def _put(self, features: np.ndarray, labels: np.ndarray) -> None:
        r = self.options.samples_per_record
        first = self._next_record
        if r == 1:
            # One row per record: label bytes then feature bytes, built for all rows at once.
            n, size = len(labels), self.spec.sample_bytes
            rows = np.empty((n, size), dtype=np.uint8)
            rows[:, :8] = np.ascontiguousarray(labels, dtype=LABEL_DTYPE).view(np.uint8).reshape(-1, 8)
            rows[:, 8:] = np.ascontiguousarray(features).reshape(n, -1).view(np.uint8)
            flat = memoryview(rows).cast("B")
            values = list(map(lz4.frame.compress, [flat[i : i + size] for i in range(0, n * size, size)]))
        else:
            values = [encode_record(features[a : a + r], labels[a : a + r]) for a in range(0, len(labels), r)]
        items = list(zip(map(_KEY.pack, range(first, first + len(values))), values, strict=True))
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    txn.cursor().putmulti(items, append=True)
                break
            except lmdb.MapFullError:
                # The estimate should prevent this; grow rather than fail a long prepare.
                self._map_size *= 2
                self._env.set_mapsize(self._map_size)
        self._next_record += len(values)

    def close(self) -> None:
        if self._pending_rows:
            self._flush(self._pending_rows)
        meta = {
            "format": "iobench-lmdb",
            "version": 1,
            "spec": self.spec.to_json(),
            "samples_per_record": self.options.samples_per_record,
            "records": self._next_record,
            "key": "record index, 8-byte unsigned big-endian",
            "value": "lz4.frame(labels <i8[n] || features <dtype>[n, *shape], C order)",
        }
        with self._env.begin(write=True) as txn:
            txn.put(META_KEY, json.dumps(meta).encode())
        self._env.sync(True)
        self._env.close()


@contextmanager
def lmdb_verdict(what: str) -> Iterator[None]:
    """lmdb.Error (a corrupt or foreign file) as a ValueError: a verdict about the data, in one line."""
    try:
        yield
    except lmdb.Error as exc:
        raise ValueError(f"{what}: {exc}") from None


class _Handle:
    """The environment (py-lmdb refuses a second one for the same files in one process) and a read
    transaction per thread that reads (LMDB ties a transaction to one thread at a time)."""

    def __init__(self, env: lmdb.Environment, pinned: Pinned) -> None:
        self.env, self.pinned = env, pinned
        self.txns: dict[int, lmdb.Transaction] = {}
        self.lock = threading.Lock()

    def txn(self) -> lmdb.Transaction:
        me = threading.get_ident()
        with self.lock:
            if me not in self.txns:
                self.txns[me] = self.env.begin(buffers=True)
            return self.txns[me]


def open_env(directory: Path, readahead: bool = True) -> tuple[lmdb.Environment, Pinned]:
    """The environment, read-only, and the Pinned to close after it. LMDB opens data.mdb by name: it is handed
    a folder holding only the checked file (a FIFO swapped in for it would block its open() forever)."""
    pinned = Pinned(files={DATA: directory / DATA})
    try:
        with lmdb_verdict(f"LMDB cannot open {directory.name}"):
            env = lmdb.open(
                str(pinned.folder), readonly=True, lock=False, readahead=readahead, subdir=True, max_readers=1
            )
        return env, pinned
    except BaseException:
        pinned.close()
        raise


class LmdbReader(FormatReader):
    traits = ReaderTraits(one_per_process=True)

    def _open(self) -> _Handle:
        # OS read-ahead (py-lmdb's default): LMDB advises turning it off for random reads of a database
        # larger than RAM, where it evicts pages still to be read. When the files fit in the page cache a
        # shuffled epoch reads them all anyway, and read-ahead was 2.6-14x faster cold here (rows, small and
        # 224 px images; with it off each 150 KB record was paged in 4 KiB at a time).
        readahead = self.sequential or not self.larger_than_memory
        return _Handle(*open_env(self.directory, readahead=readahead))

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with lmdb_verdict("LMDB read failed"):
            return self._batch(indices)

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        with lmdb_verdict("LMDB read failed"):
            return self._read_range(start, stop)

    def _close(self, handle: _Handle) -> None:
        with handle.lock:
            txns, handle.txns = list(handle.txns.values()), {}
        for txn in txns:
            txn.abort()
        handle.env.close()
        handle.pinned.close()

    def _record(self, txn: lmdb.Transaction, record: int) -> tuple[np.ndarray, np.ndarray]:
        value = txn.get(record_key(record))
        if value is None:
            raise KeyError(f"LMDB record {record} is missing")
        return decode_record(value, self.spec, self.options.samples_per_record)

    def _batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        txn = self.handle.txn()
        indices = np.asarray(indices, dtype=np.int64)
        n = self.spec.n_samples
        if len(indices) and (indices.min() < 0 or indices.max() >= n):
            raise IndexError(f"indices out of range for {n} samples")
        out_f, out_l = self._empty(len(indices))
        r = self.options.samples_per_record
        if r == 1:
            for j, i in enumerate(indices.tolist()):
                f, lb = self._record(txn, i)
                out_f[j] = f[0]
                out_l[j] = lb[0]
            return out_f, out_l
        records = indices // r
        for record in np.unique(records).tolist():
            f, lb = self._record(txn, record)
            where = np.flatnonzero(records == record)
            offsets = indices[where] - record * r
            out_f[where] = f[offsets]
            out_l[where] = lb[offsets]
        return out_f, out_l

    def _read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk the records in key order with one cursor instead of one lookup per sample."""
        txn = self.handle.txn()
        if not 0 <= start <= stop <= self.spec.n_samples:
            raise IndexError(f"range {start}..{stop} out of range for {self.spec.n_samples} samples")
        out_f, out_l = self._empty(stop - start)
        r = self.options.samples_per_record
        record = start // r
        cursor = txn.cursor()
        if stop > start and not cursor.set_key(record_key(record)):
            raise KeyError(f"LMDB record {record} is missing")
        filled = 0
        while filled < stop - start:
            if cursor.key() != record_key(record):
                raise KeyError(f"LMDB record {record} is missing")
            features, labels = decode_record(cursor.value(), self.spec, self.options.samples_per_record)
            lo = start + filled - record * r
            take = min(len(labels) - lo, stop - start - filled)
            if take <= 0:
                raise ValueError(f"LMDB record {record} holds {len(labels)} samples, expected more")
            out_f[filled : filled + take] = features[lo : lo + take]
            out_l[filled : filled + take] = labels[lo : lo + take]
            filled += take
            record += 1
            cursor.next()
        return out_f, out_l


class LmdbFormat(StorageFormat):
    name = "lmdb"
    libraries = ("lmdb", "lz4")  # what reads it (distribution names), for the record's `packages`
    options_type = LmdbOptions
    python_bound_writer = True
    writer_type = LmdbWriter
    reader_type = LmdbReader

    def check_layout(self, directory: Path, spec: DatasetSpec, options: LmdbOptions) -> None:
        """The environment opens and its layout record describes this spec."""
        env, pinned = open_env(directory)
        try:
            with env.begin() as txn:
                raw = txn.get(META_KEY)
        finally:
            env.close()
            pinned.close()
        try:
            meta = parse_json(raw, META_KEY.decode()) if raw is not None else None
        except ValueError:
            meta = None
        if not isinstance(meta, dict) or meta.get("spec") != spec.to_json():
            raise ValueError(f"{directory.name}: the LMDB layout record does not describe this dataset")

    def estimate_bytes(self, spec: DatasetSpec, options: LmdbOptions) -> int:
        return _records_bytes(spec, options, fill=1.0)
