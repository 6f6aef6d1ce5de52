"""The vocabulary of a dataset: what it is (DatasetSpec), where it came from (SourceInfo), what its
samples hold (Content), and a chunk of it. No I/O and no generation here: the formats, the data side
and the measuring side all speak it, and it imports none of them.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from iobench.choices import Choice
from iobench.errors import IobenchError


class Content(Choice):
    RANDOM = "random"  # uniform values of the dtype: incompressible
    PHOTO = "photo"  # uint8 images, channels first (C,H,W) or (H,W)
    TOKENS = "tokens"  # integer ids below VOCABULARY


VOCABULARY = 50257  # GPT-2's: ids need 16 bits of each int32, as in real token datasets


def check_content(content: Content, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if content is Content.PHOTO and not (dtype == np.uint8 and image_layout(shape) is not None):
        raise IobenchError(f"photo content needs uint8 images (C,H,W with C 1, 3 or 4, or H,W), got {shape} {dtype}")
    if content is Content.TOKENS and dtype.kind not in "iu":
        raise IobenchError(f"token content needs an integer dtype, got {dtype}")
    if content is Content.TOKENS and np.iinfo(dtype).max < VOCABULARY - 1:
        raise IobenchError(f"token ids go up to {VOCABULARY - 1}; {dtype} cannot hold them")


def image_layout(shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(channels, height, width) of a channels-first or 2-d image shape; None for other shapes."""
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    if len(shape) == 3 and shape[0] in (1, 3, 4) and min(shape[1:]) >= 2:
        return shape[0], shape[1], shape[2]
    return None


@dataclass(frozen=True)
class SourceInfo:
    """Where a dataset came from: enough to open it again, and to notice that it changed."""

    kind: str  # npy, npz, hdf5, tensordict, images
    path: str  # absolute
    features: str = ""  # the key or dataset name inside the source ('' for npy and images)
    labels: str = ""  # a path (npy, hdf5 as FILE:NAME), a key (npz, tensordict), or '' for zeros
    bytes: int = 0  # size of the source (files summed for a folder)
    mtime: float = 0.0  # newest modification time
    image_shape: tuple[int, ...] = ()  # images: C,H,W they are resized and cropped to

    def to_json(self) -> dict:
        d = dict(vars(self))
        d["image_shape"] = list(self.image_shape)
        return d

    @classmethod
    def from_json(cls, d: dict) -> SourceInfo:
        return cls(**{**d, "image_shape": tuple(int(x) for x in d.get("image_shape", ()))})


SUPPORTED_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
LABEL_DTYPE = np.dtype("<i8")
# Generation chunks are about this many bytes; the chunk size depends only on the spec, so the
# generated content never depends on how a writer batches its writes.
GENERATION_CHUNK_BYTES = 32 * 2**20


MAX_CLASSES = 2**31  # labels are int64; more classes than this is a typo, not a dataset


def whole(value: object, what: str) -> int:
    """A whole number as a stored spec gives it (JSON): 2000.5 or "2000" is refused, not rounded."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return value


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
            # the source's name as a plain word: a newline, a space or a `#` in it would follow the dataset into
            # every one-line message, record and table
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.source.path).stem).strip("._") or "source"
            return f"{stem[:64]}_n{self.n_samples}_{shape}_{self.dtype}_c{self.n_classes}"
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
            n_samples=whole(d["n_samples"], "n_samples"),
            shape=tuple(whole(x, "shape") for x in d["shape"]),
            dtype=str(d["dtype"]),
            n_classes=whole(d["n_classes"], "n_classes"),
            seed=whole(d["seed"], "seed"),
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
