"""How many accelerators: the counts tried, doubling from one while every rank is fed, then halving the gap between
the largest fed and the smallest not fed until they are one apart (so N+1 is always measured where it could start).
Whether a count was fed is the judgement's (`iobench.judge.feed`)."""

from __future__ import annotations

from collections.abc import Callable

from iobench.judge.feed import FED, FEED_RULES, FeedPoint, feed_verdict


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
