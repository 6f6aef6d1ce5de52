"""Whether a delivered order shuffles as well as asked: one threshold and one allowance for every command (tune's
--min-shuffle, its candidates' floor, the report's "uniform shuffle"), where there had been three (0.95 in the
report, 0.9 in tune, 0.9 less three standard deviations in tune's candidates). Light: --help reads the threshold."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iobench.results.record import RunRecord

# spread and order both at least this (1.0: a uniform shuffle's), give or take the scores' own noise (`allowance`)
UNIFORM_SHUFFLE = 0.9


def allowance(samples: int) -> float:
    """What a uniform shuffle's own score varies by at this size: 3 standard deviations of the rank correlation (0.17
    at 300 samples, 0.012 at 65,536 and more)."""
    from iobench.results.shuffle_quality import MAX_POINTS  # numpy: not on --help's path

    return 3 / math.sqrt(max(2, min(samples, MAX_POINTS)) - 1)


def score_of(r: RunRecord) -> float | None:
    """The worse of a record's delivered order's spread and order scores; None where unscored (a user's pipeline)."""
    e = r.epochs
    if e.shuffle_spread is None or e.shuffle_order is None:
        return None
    return min(e.shuffle_spread, e.shuffle_order)


def shuffles(r: RunRecord, floor: float = UNIFORM_SHUFFLE) -> bool:
    """The record's delivered order scores at least `floor`, within the allowance; unscored: not known to, False."""
    score = score_of(r)
    return score is not None and score >= floor - allowance(r.epochs.samples_per_epoch)
