"""The shared dataset generated deterministically in bounded memory (what it is: `iobench.spec`).

Every format is written from the same generated chunks, so all formats hold identical content and
one content checksum describes them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np

from iobench.data.content import features as content_of
from iobench.data.sources import source_chunks
from iobench.spec import LABEL_DTYPE, Chunk, DatasetSpec


def generate(spec: DatasetSpec, start: int = 0, stop: int | None = None) -> Iterator[Chunk]:
    """Yield the dataset in chunks of `spec.chunk_rows`; memory stays bounded by one chunk.

    Each generation chunk has its own RNG stream seeded by (seed, chunk index), so any range can be
    regenerated without generating what comes before it.
    """
    stop = spec.n_samples if stop is None else stop
    if spec.source is not None:
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
