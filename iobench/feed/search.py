"""How many accelerators: the counts tried, doubling from one while every rank is fed, then halving the gap between
the largest fed and the smallest not fed until they are one apart (so N+1 is always measured where it could start).
Whether a count was fed is the judgement's (`iobench.judge.feed`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from iobench.judge.feed import FED, FEED_RULES, FeedPoint, feed_verdict
from iobench.progress import minutes

if TYPE_CHECKING:
    from iobench.feed.workloads import Workload


def search(
    measure: Callable[[int], FeedPoint], threshold: float, most: int, rules: str = FEED_RULES
) -> dict[int, FeedPoint]:
    """Every count measured by `measure(n)`, 1 <= n <= most; at most about 2 log2(most) of them."""
    points: dict[int, FeedPoint] = {}

    def fed(n: int) -> bool:
        if n not in points:
            points[n] = measure(n)
        return feed_verdict(points[n], threshold, rules) == FED

    if not fed(1):
        return points
    low, high = 1, None
    while high is None:
        n = min(low * 2, most)
        if n == low:
            return points  # fed at the most this machine can start
        if fed(n):
            low = n
        else:
            high = n
    while high - low > 1:
        mid = (low + high) // 2
        if fed(mid):
            low = mid
        else:
            high = mid
    return points


RANK_START_S = 8.0  # a count's ranks started, torch imported, the group joined: before its first epoch


def estimate_words(w: Workload, n_samples: int, most: int, epochs: int, searches: int = 1) -> str:
    """How long the search may take, from the step alone (a fed rank's epoch is its batches times the step; a starved
    one's is longer): the doubling's counts, then up to as many again halving between, each a warm-up and `epochs`
    epochs, and each --what-if a search of its own."""
    doubling = [min(2**k, most) for k in range(int(math.log2(most)) + 2)]
    counts = sorted(set(doubling))

    def seconds(n: int) -> float:
        return RANK_START_S + (epochs + 1) * math.ceil(n_samples / n / w.batch_size) * w.compute_s

    low = sum(seconds(n) for n in counts) * searches
    high = (low + sum(seconds(n) for n in counts[1:]) * searches) * 1.5  # halving between, and starved epochs
    return f"about {minutes(low)} to {minutes(high)} ({len(counts)} to {2 * len(counts) - 1} counts a search)"
