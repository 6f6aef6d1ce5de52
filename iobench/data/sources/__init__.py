"""`prepare --from`: the user's own data as the shared dataset, read in chunks (never whole).

A source is opened and checked completely (readable, a supported dtype, one shape, labels of the
same length, integer labels >= 0) before anything is written; afterwards it is read front to back,
chunk by chunk, by every format writer that needs it. A source is data: never opened writable, read
with pickle refused, and never a way to read another file (links inside a TensorDict folder or an
image folder, HDF5 external storage, external links and virtual datasets are refused).

Each kind is one module here (`arrays`: .npy and .npz, `hdf5`, `tensordict`, `images`), registered in
SOURCES in the order they are tried: a folder with a meta.json is a TensorDict, any other an image folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from iobench.data.sources.arrays import NpySource, NpzSource
from iobench.data.sources.base import SourceKind
from iobench.data.sources.hdf5 import Hdf5Source
from iobench.data.sources.images import ImageFolderSource
from iobench.data.sources.tensordict import TensorDictSource
from iobench.errors import IobenchError, one_line
from iobench.spec import LABEL_DTYPE, SUPPORTED_DTYPES, SourceInfo

SOURCES: dict[str, SourceKind] = {
    kind.name: kind for kind in (NpySource(), NpzSource(), Hdf5Source(), TensorDictSource(), ImageFolderSource())
}


@dataclass
class Opened:
    """A source, checked: its size, shape, dtype and number of classes, and a way to read it in order."""

    info: SourceInfo
    n_samples: int
    shape: tuple[int, ...]
    dtype: str
    n_classes: int
    said: str = ""  # how the source's sample shape was chosen, where the user did not give it


def kind_of(path: Path, text: str) -> SourceKind:
    for kind in SOURCES.values():
        if kind.matches(path):
            return kind
    raise IobenchError(
        f"--from {text}: unsupported source; give .npy, .npz, .h5:NAME, a TensorDict folder or an image folder"
    )


def open_source(
    text: str,
    labels: str | None = None,
    features_key: str | None = None,
    labels_key: str | None = None,
    shape: tuple[int, ...] | None = None,
) -> Opened:
    """Check a source completely; one line naming it when it cannot be used."""
    path_text, _, inner = text.partition(":") if not Path(text).exists() else (text, "", "")
    path = Path(path_text).expanduser().resolve()
    if not path.exists():
        raise IobenchError(f"--from {text}: no such file or folder")
    if not os.access(path, os.R_OK):
        raise IobenchError(f"--from {text}: not readable")
    kind = kind_of(path, text)
    given = shape is not None
    shape = kind.shape_of(path, shape, text)
    said = "" if given or shape is None else kind.shape_words(path, shape)
    feat, lab = kind.keys(path, inner, features_key, labels_key, text)
    if labels is not None:
        if not kind.takes_labels_file:
            raise IobenchError(f"--labels is for .npy and .h5 sources; for {kind.name} use --labels-key")
        label_path, colon, name = labels.partition(":") if kind.name == "hdf5" else (labels, "", "")
        lab = str(Path(label_path).expanduser().resolve()) + colon + name  # the writers may run elsewhere
    size, mtime = kind.footprint(path, feat, lab)
    info = SourceInfo(kind.name, str(path), feat, lab, size, mtime, tuple(shape or ()))
    return replace(check(info, text), said=said)


def check(info: SourceInfo, text: str) -> Opened:
    try:
        with reading(info) as (features, labels, n, shape, dtype):
            dtype_name = _dtype_name(dtype, text)
            if labels is None:
                n_classes = 1
            else:
                n_classes = _check_labels(labels, n, text)
            return Opened(info, n, tuple(shape), dtype_name, n_classes)
    except IobenchError:
        raise
    except RecursionError:
        raise IobenchError(f"--from {text}: cannot read it (nested too deep)") from None
    except Exception as exc:  # OSError, ValueError, BadZipFile, zlib.error, NotImplementedError (PPMd), ...
        raise IobenchError(f"--from {text}: cannot read it ({type(exc).__name__}: {one_line(exc)})") from None


def _dtype_name(dtype: np.dtype, text: str) -> str:
    name = np.dtype(dtype).name  # byte order aside: >f4 is float32 too
    if name not in SUPPORTED_DTYPES:
        raise IobenchError(
            f"--from {text}: features of dtype {dtype} are not supported ({', '.join(SUPPORTED_DTYPES)})"
        )
    return name


def _check_labels(labels: Any, n: int, text: str) -> int:
    if len(labels) != n:
        raise IobenchError(f"--from {text}: {n:,} samples but {len(labels):,} labels")
    if not np.issubdtype(np.dtype(labels.dtype), np.integer):
        raise IobenchError(f"--from {text}: labels must be integers, got {labels.dtype}")
    low, high = 0, -1
    step = 2**22
    for start in range(0, n, step):
        part = np.asarray(labels[start : start + step])
        if part.ndim != 1:
            raise IobenchError(f"--from {text}: labels must be one integer per sample, got shape {labels.shape}")
        low, high = min(low, int(part.min())), max(high, int(part.max()))
    if low < 0:
        raise IobenchError(f"--from {text}: labels must be >= 0 (class indices), found {low}")
    return max(1, high + 1)


class reading:  # noqa: N801 - used as a context manager, like open()
    """(features, labels or None, n, shape, dtype) of a source, open while inside."""

    def __init__(self, info: SourceInfo) -> None:
        self.info = info
        self._close: list[Any] = []

    def __enter__(self) -> tuple[Any, Any, int, tuple[int, ...], np.dtype]:
        if self.info.kind not in SOURCES:
            raise ValueError(f"a source of kind {self.info.kind!r} is not one iobench reads")
        features, labels = SOURCES[self.info.kind].open(self.info, self._close)
        if features.ndim < 2 or len(features) == 0:
            raise ValueError(f"features must be one sample per row, got shape {features.shape}")
        return features, labels, len(features), tuple(features.shape[1:]), features.dtype

    def __exit__(self, *exc: object) -> None:
        for f in self._close:
            f.close()


def source_chunks(info: SourceInfo, rows: int, start: int, stop: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(first sample, features, int64 labels) in order, rows at a time, from start to stop."""
    with reading(info) as (features, labels, n, shape, dtype):
        for lo in range(start, stop, rows):
            hi = min(lo + rows, stop)
            f = np.ascontiguousarray(features[lo:hi]).astype(np.dtype(dtype).newbyteorder("<"), copy=False)
            lab = np.zeros(hi - lo, LABEL_DTYPE) if labels is None else np.asarray(labels[lo:hi]).astype(LABEL_DTYPE)
            yield lo, f, lab
