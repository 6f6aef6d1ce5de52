"""What a configuration's epoch times say of themselves, as pyperf's checks do: an outlier, a first epoch slow (a
cache warming), two groups (two regimes). Verdicts, so here in the judgement (they were in `results.stats`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

OUTLIER_Z = 3.5  # modified z-score (Iglewicz and Hoaglin) above which a value is an outlier
OUTLIER_MIN_N = 4  # with fewer values the MAD says nothing
OUTLIER_MIN_REL = 0.05  # and a value within 5% of the median is not worth a warning
FIRST_RUN_RATIO = 1.25  # a first run this much slower than the median of the rest is a caching effect
BIMODAL_GAP = 2.0  # sorted epoch times that jump by this factor fall into two groups


def outliers(values: Sequence[float], threshold: float = OUTLIER_Z) -> list[int]:
    """Indices whose modified z-score 0.6745 (x - median) / MAD exceeds the threshold and that lie
    more than 5% from the median (a tight series makes tiny deviations score high)."""
    if len(values) < OUTLIER_MIN_N:
        return []
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    far = [i for i, v in enumerate(values) if abs(v - median) > OUTLIER_MIN_REL * median]
    if mad == 0:
        return far
    return [i for i in far if abs(0.6745 * (values[i] - median) / mad) > threshold]


def first_run_slow(values: Sequence[float], ratio: float = FIRST_RUN_RATIO) -> bool:
    """The first timed epoch much slower than the median of the rest and apart from them by more than they spread
    among themselves: a cache warming. Epochs of 0.995, 0.062 and 1.308 s are not that (the third is the slowest): a
    machine shared with others; nor is a first epoch 1.3x the median of others that spread 1.0-1.25x (every default
    warm run was said to have "a caching effect")."""
    rest = values[1:]
    if len(rest) < 2:
        return False
    return values[0] > ratio * statistics.median(rest) and values[0] - max(rest) > max(rest) - min(rest)


def two_groups(values: Sequence[float]) -> tuple[list[float], list[float]] | None:
    """Epoch times that fall into a fast and a slow group (the largest step between sorted times is a factor of
    BIMODAL_GAP or more): two regimes, as when other programs take the cores for part of the run. None otherwise."""
    ordered = sorted(v for v in values if v > 0)
    if len(ordered) < 2:
        return None
    steps = [(b / a, k) for k, (a, b) in enumerate(zip(ordered, ordered[1:], strict=False), 1)]
    factor, at = max(steps)
    return (ordered[:at], ordered[at:]) if factor >= BIMODAL_GAP else None
