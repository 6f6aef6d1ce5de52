"""How well an epoch's delivery order is shuffled, against a uniform random permutation (1.0).

Shard formats (WebDataset, TFRecord, LitData chunks) buy sequential reads by shuffling shard order plus
a buffer, not globally; speed alone rewards the formats that shuffle least. Two figures, defined in
docs/shuffle-quality.md, score the order that was actually delivered:

- spread: the mean number of distinct regions of the dataset (BLOCKS equal runs of consecutive samples)
  each batch draws from, over what a uniform shuffle gives for that batch size. A sequential epoch
  draws from one or two regions per batch; a shard shuffle with a small buffer from a few.
- order: 1 - |correlation| between delivery position and storage position (Spearman's over a whole
  epoch). A sequential epoch keeps storage order (0); a uniform shuffle has none (near 1).

Both are computed on a bounded subset (256 batches, 65,536 deliveries, evenly spaced), so scoring an
epoch of millions of samples costs milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BLOCKS = 64  # regions the dataset is cut into for the spread; the same for every format, so comparable


@dataclass(frozen=True)
class ShuffleQuality:
    spread: float  # distinct regions per batch / a uniform shuffle's expectation (1.0 = as good)
    order: float  # 1 - |rank correlation of delivery and storage position| (1.0 = none left)


def block_of(n_samples: int) -> int:
    """Samples per region: BLOCKS equal runs of the dataset (the last may be shorter)."""
    return max(1, math.ceil(n_samples / BLOCKS))


def expected_distinct(n_samples: int, block: int, batch: int) -> float:
    """Distinct regions a batch of `batch` samples drawn uniformly without replacement touches."""
    batch = min(batch, n_samples)
    sizes = [block] * (n_samples // block) + ([n_samples % block] if n_samples % block else [])
    total = 0.0
    for k in set(sizes):
        if n_samples - k < batch:
            untouched = 0.0
        else:  # C(N - k, B) / C(N, B), in logs
            untouched = math.exp(
                math.lgamma(n_samples - k + 1)
                - math.lgamma(n_samples - k - batch + 1)
                - math.lgamma(n_samples + 1)
                + math.lgamma(n_samples - batch + 1)
            )
        total += sizes.count(k) * (1.0 - untouched)
    return total


MAX_BATCHES = 256  # batches the spread is averaged over (evenly spaced through the epoch)
MAX_POINTS = 1 << 16  # deliveries the correlation is computed on (evenly spaced): a bounded cost


def distinct_per_batch(delivered: np.ndarray, batch: int, block: int) -> float:
    """The mean number of distinct regions in up to MAX_BATCHES full batches spread through the epoch:
    one flag per (batch, region) set in a single scatter."""
    full = len(delivered) // batch
    if full == 0:
        return float(len(np.unique(delivered // block)))
    picked = np.unique(np.linspace(0, full - 1, min(full, MAX_BATCHES)).astype(np.int64))
    rows = delivered[: full * batch].reshape(full, batch)[picked]
    regions = rows // block
    seen = np.zeros((len(picked), int(regions.max()) + 1), dtype=bool)
    seen[np.repeat(np.arange(len(picked)), batch), regions.ravel()] = True
    return float(seen.sum(axis=1).mean())


def rank_correlation(delivered: np.ndarray) -> float:
    """The correlation between delivery position and sample index, on up to MAX_POINTS evenly spaced
    deliveries. Over a whole epoch (a permutation of 0..n-1) the indices are their own ranks, so this is
    Spearman's rho; on the spaced subset it estimates it within about 1/sqrt(MAX_POINTS)."""
    n = len(delivered)
    if n < 3:
        return 1.0
    step = max(1, n // MAX_POINTS)
    values = delivered[::step].astype(np.float64)
    positions = np.arange(len(values), dtype=np.float64)
    positions -= positions.mean()
    values -= values.mean()
    denominator = math.sqrt(float(positions @ positions) * float(values @ values))
    return float(positions @ values) / denominator if denominator else 1.0


def score(delivered: np.ndarray, n_samples: int, batch: int) -> ShuffleQuality:
    """Both figures for one epoch's delivered indices (all of them, or the prefix a partial epoch read)."""
    delivered = np.asarray(delivered, dtype=np.int64)
    block = block_of(n_samples)
    expected = expected_distinct(n_samples, block, batch)
    spread = distinct_per_batch(delivered, batch, block) / expected if expected else 1.0
    return ShuffleQuality(spread=spread, order=1.0 - abs(rank_correlation(delivered)))
