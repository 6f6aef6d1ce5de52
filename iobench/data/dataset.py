"""The shared dataset: a frozen spec and deterministic, bounded-memory generation.

Every format is written from the same generated chunks, so all formats hold identical content and
one content checksum describes them all.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from iobench.data.content import Content, check_content
from iobench.data.content import features as content_of
from iobench.data.source_info import SourceInfo
from iobench.errors import IobenchError

DEFAULT_SIZE = 10**6  # samples in the default dataset: about 520 MB per format
SUPPORTED_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
LABEL_DTYPE = np.dtype("<i8")
# Generation chunks are about this many bytes; the chunk size depends only on the spec, so the
# generated content never depends on how a writer batches its writes.
GENERATION_CHUNK_BYTES = 32 * 2**20
_SIZE_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


MAX_CLASSES = 2**31  # labels are int64; more classes than this is a typo, not a dataset


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset is: enough to regenerate it bit for bit."""

    n_samples: int
    shape: tuple[int, ...] = (128,)
    dtype: str = "float32"
    n_classes: int = 1000
    seed: int = 0
    content: Content = Content.RANDOM  # what generated features look like (iobench.data.content)
    source: SourceInfo | None = None  # prepare --from: read from there instead of generated

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", Content.parse(self.content, "content"))
        if self.n_samples <= 0:
            raise IobenchError(f"size must be positive, got {self.n_samples}")
        if not self.shape or any(d <= 0 for d in self.shape):
            raise IobenchError(f"shape must be positive integers, got {self.shape}")
        if self.dtype not in SUPPORTED_DTYPES:
            raise IobenchError(f"unsupported dtype {self.dtype!r}; choose one of {', '.join(SUPPORTED_DTYPES)}")
        if not 0 < self.n_classes <= MAX_CLASSES:
            raise IobenchError(f"classes must be 1..{MAX_CLASSES:,} (labels are int64), got {self.n_classes}")
        if not 0 <= self.seed < 2**63:
            raise IobenchError(f"seed must be 0..2^63-1 (HDF5 and JSON store it as int64), got {self.seed}")
        check_content(self.content, self.shape, self.np_dtype)

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype).newbyteorder("<")

    @property
    def features_per_sample(self) -> int:
        return math.prod(self.shape)

    @property
    def feature_bytes(self) -> int:
        """Bytes of one sample's features."""
        return self.features_per_sample * self.np_dtype.itemsize

    @property
    def sample_bytes(self) -> int:
        """Bytes of one sample: features plus its int64 label."""
        return self.feature_bytes + LABEL_DTYPE.itemsize

    @property
    def payload_bytes(self) -> int:
        """Bytes of the whole dataset's content, without any format overhead."""
        return self.n_samples * self.sample_bytes

    @property
    def chunk_rows(self) -> int:
        return max(1, GENERATION_CHUNK_BYTES // self.sample_bytes)

    @property
    def name(self) -> str:
        """Default directory name: unique per spec, readable at a glance."""
        shape = "x".join(str(d) for d in self.shape)
        content = "" if self.content is Content.RANDOM else f"_{self.content}"
        if self.source is not None:
            return f"{Path(self.source.path).stem}_n{self.n_samples}_{shape}_{self.dtype}_c{self.n_classes}"
        return f"n{self.n_samples}_{shape}_{self.dtype}{content}_c{self.n_classes}_s{self.seed}"

    def to_json(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["content"] = str(self.content)
        d["source"] = None if self.source is None else self.source.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict) -> DatasetSpec:
        return cls(
            n_samples=int(d["n_samples"]),
            shape=tuple(int(x) for x in d["shape"]),
            dtype=str(d["dtype"]),
            n_classes=int(d["n_classes"]),
            seed=int(d["seed"]),
            content=str(d.get("content", Content.RANDOM)),  # manifests before 0.2 hold random content
            source=SourceInfo.from_json(d["source"]) if d.get("source") else None,
        )


@dataclass(frozen=True)
class Chunk:
    """Samples [start, start + len(labels)) of the dataset."""

    start: int
    features: np.ndarray
    labels: np.ndarray

    @property
    def stop(self) -> int:
        return self.start + len(self.labels)

    @property
    def nbytes(self) -> int:
        return self.features.nbytes + self.labels.nbytes


def parse_size(text: str) -> int:
    """Accept 1e7, 10000000, 10_000_000 and 10M (k/M/G/T are powers of 1000)."""
    s = str(text).strip().replace("_", "")
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([kKmMgGtT]?)", s)
    if not m:
        raise IobenchError(f"cannot parse size {text!r}: use e.g. 1e7, 10000000, 10_000_000 or 10M")
    try:
        value = float(m.group(1)) * _SIZE_SUFFIXES[m.group(2).lower()]
    except ValueError:
        raise IobenchError(f"cannot parse size {text!r}: use e.g. 1e7, 10000000, 10_000_000 or 10M") from None
    if not math.isfinite(value) or value != int(value):
        raise IobenchError(f"size must be a whole number of samples, got {text!r}")
    if value <= 0:
        raise IobenchError(f"size must be positive, got {text!r}")
    return int(value)


def parse_bytes(text: str) -> int:
    """Sizes in bytes with binary suffixes: 1G = 2**30, 256M, 64K, or a plain number."""
    s = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    try:
        value = float(s[:-1]) * units[s[-1]] if s and s[-1] in units else float(s)
    except ValueError:
        raise IobenchError(f"cannot parse size {text!r}: use e.g. 1G, 256M or 1048576") from None
    if not math.isfinite(value) or value <= 0:
        raise IobenchError(f"size must be positive, got {text!r}")
    return int(value)


def parse_shape(text: str) -> tuple[int, ...]:
    """Accept 128, 3,32,32 or 3x32x32."""
    parts = re.split(r"\s*[,x]\s*", str(text).strip())
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise IobenchError(f"cannot parse shape {text!r}: use e.g. 128 or 3,32,32") from None
    if not shape or any(d <= 0 for d in shape):
        raise IobenchError(f"shape must be positive integers, got {text!r}")
    return shape


def generate(spec: DatasetSpec, start: int = 0, stop: int | None = None) -> Iterator[Chunk]:
    """Yield the dataset in chunks of `spec.chunk_rows`; memory stays bounded by one chunk.

    Each generation chunk has its own RNG stream seeded by (seed, chunk index), so any range can be
    regenerated without generating what comes before it.
    """
    stop = spec.n_samples if stop is None else stop
    if spec.source is not None:
        from iobench.data.sources import source_chunks

        for first, features, labels in source_chunks(spec.source, spec.chunk_rows, start, stop):
            yield Chunk(first, features, labels)
        return
    rows = spec.chunk_rows
    for index in range(start // rows, -(-stop // rows)):
        lo = index * rows
        hi = min(lo + rows, spec.n_samples)
        rng = np.random.default_rng([spec.seed, index])
        labels = rng.integers(0, spec.n_classes, size=hi - lo, dtype=LABEL_DTYPE)
        features = content_of(spec.content, rng, (hi - lo, *spec.shape), spec.np_dtype)
        a, b = max(lo, start), min(hi, stop)
        yield Chunk(a, features[a - lo : b - lo], labels[a - lo : b - lo])


class ContentHasher:
    """SHA-256 of the features and of the labels, in sample order, as raw little-endian bytes."""

    algorithm = "sha256"

    def __init__(self) -> None:
        self._features = hashlib.sha256()
        self._labels = hashlib.sha256()

    def update(self, features: np.ndarray, labels: np.ndarray) -> None:
        self._features.update(np.ascontiguousarray(features).data)
        self._labels.update(np.ascontiguousarray(labels).data)

    def digest(self) -> dict[str, str]:
        return {
            "algorithm": self.algorithm,
            "features": self._features.hexdigest(),
            "labels": self._labels.hexdigest(),
        }
