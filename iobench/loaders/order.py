"""The order in which an epoch visits samples: sequential, shuffled, or shuffled blocks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

Window = slice | np.ndarray  # a run of samples, or arbitrary sample indices


@dataclass(frozen=True)
class EpochOrder:
    """Batches of sample indices for each epoch; the same (seed, epoch) always gives the same order.

    block_size > 0 with shuffle keeps runs of block_size contiguous samples together and shuffles
    the runs: the access pattern of chunked shuffling, between sequential and fully random.
    """

    n_samples: int
    batch_size: int
    shuffle: bool = True
    block_size: int = 0
    seed: int = 0
    max_batches: int | None = None

    @property
    def name(self) -> str:
        if not self.shuffle:
            return "sequential"
        return f"block:{self.block_size}" if self.block_size > 0 else "shuffle"

    def indices(self, epoch: int) -> np.ndarray:
        n = self.n_samples
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        rng = np.random.default_rng([self.seed, epoch])
        if self.block_size <= 0:
            return rng.permutation(n).astype(np.int64)
        starts = np.arange(0, n, self.block_size, dtype=np.int64)
        rng.shuffle(starts)
        return np.concatenate([np.arange(s, min(s + self.block_size, n), dtype=np.int64) for s in starts])

    def batches(self, epoch: int) -> Iterator[Window]:
        """Each batch as a slice when it is one run of samples (always, unshuffled), else indices."""
        n, size = self.n_samples, self.batch_size
        starts = range(0, n, size)
        if self.max_batches is not None:
            starts = starts[: self.max_batches]
        if not self.shuffle:
            for start in starts:
                yield slice(start, min(start + size, n))
            return
        order = self.indices(epoch)
        for start in starts:
            batch = order[start : start + size]
            window = as_slice(batch) if self.block_size else None
            yield batch if window is None else window

    def n_batches(self) -> int:
        full = -(-self.n_samples // self.batch_size)
        return full if self.max_batches is None else min(full, self.max_batches)


def indices_of(window: Window) -> np.ndarray:
    if isinstance(window, slice):
        return np.arange(window.start, window.stop, dtype=np.int64)
    return window


def as_slice(indices: np.ndarray) -> slice | None:
    """The equivalent slice when indices are one increasing run (a view instead of a gather)."""
    if len(indices) and indices[-1] - indices[0] == len(indices) - 1 and (len(indices) < 3 or _is_run(indices)):
        return slice(int(indices[0]), int(indices[-1]) + 1)
    return None


def _is_run(indices: np.ndarray) -> bool:
    return bool(np.all(np.diff(indices) == 1))
