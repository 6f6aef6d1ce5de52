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

    With world > 1 this rank visits its contiguous share of the epoch's order (every rank computes
    the same order from the shared seed): a sequential epoch stays one run per rank.
    """

    n_samples: int
    batch_size: int
    shuffle: bool = True
    block_size: int = 0
    seed: int = 0
    max_batches: int | None = None
    rank: int = 0
    world: int = 1

    SHARD = "contiguous"  # how ranks share an epoch, as records name it

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

    def shard(self) -> range:
        """Positions of this rank's share in the epoch's order."""
        n = self.n_samples
        return range(n * self.rank // self.world, n * (self.rank + 1) // self.world)

    def batches(self, epoch: int) -> Iterator[Window]:
        """Each batch as a slice when it is one run of samples (always, unshuffled), else indices."""
        share, size = self.shard(), self.batch_size
        starts = range(share.start, share.stop, size)
        if self.max_batches is not None:
            starts = starts[: self.max_batches]
        if not self.shuffle:
            for start in starts:
                yield slice(start, min(start + size, share.stop))
            return
        order = self.indices(epoch)
        for start in starts:
            batch = order[start : min(start + size, share.stop)]
            window = as_slice(batch) if self.block_size else None
            yield batch if window is None else window

    def n_batches(self) -> int:
        full = -(-len(self.shard()) // self.batch_size)
        return full if self.max_batches is None else min(full, self.max_batches)


@dataclass(frozen=True)
class DistributedSamplerOrder:
    """This rank's batches as torch's DistributedSampler deals them; `tail` says what becomes of the samples that do
    not divide between the ranks.

    DistributedSampler repeats up to world-1 samples so every rank gets as many (`pad`, torch's default,
    `drop_last=False`) or leaves the last ones out (`drop`, `drop_last=True`). The repeats sit at the end of the short
    ranks' lists, so trimming each list to its rank's true share (`trim`, iobench's default) keeps the sampler's
    order and assignment while every sample is read exactly once per epoch.
    """

    n_samples: int
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    max_batches: int | None = None
    rank: int = 0
    world: int = 1
    tail: str = "trim"  # trim | pad | drop (SamplerTail)

    SHARD = "distributed-sampler"  # how ranks share an epoch, as records name it

    def indices(self, epoch: int) -> np.ndarray:
        from torch.utils.data import DistributedSampler

        sampler = DistributedSampler(
            range(self.n_samples),
            num_replicas=self.world,
            rank=self.rank,
            shuffle=self.shuffle,
            seed=self.seed,
            drop_last=self.tail == "drop",
        )
        sampler.set_epoch(epoch)
        return np.fromiter(sampler, dtype=np.int64, count=self._share())

    def _share(self) -> int:
        if self.tail == "trim":
            return len(range(self.rank, self.n_samples, self.world))
        if self.tail == "drop":
            return self.n_samples // self.world
        return -(-self.n_samples // self.world)

    def batches(self, epoch: int) -> Iterator[Window]:
        order, size = self.indices(epoch), self.batch_size
        starts = range(0, len(order), size)
        if self.max_batches is not None:
            starts = starts[: self.max_batches]
        for start in starts:
            yield order[start : start + size]

    def n_batches(self) -> int:
        full = -(-self._share() // self.batch_size)
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
