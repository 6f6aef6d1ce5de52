"""Statistics of repeated measurements (the tests that make a figure suspect: `iobench.judge.epoch_times`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CV_LIMIT = 0.10  # coefficient of variation above which the spread is called large


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    mad: float  # median absolute deviation
    cv: float  # coefficient of variation (population standard deviation over the mean)


def summary(values: Sequence[float]) -> Summary:
    median = statistics.median(values)
    mean = statistics.fmean(values)
    return Summary(
        median=median,
        min=min(values),
        max=max(values),
        mad=statistics.median(abs(v - median) for v in values),
        cv=statistics.pstdev(values) / mean if len(values) > 1 and mean > 0 else 0.0,
    )
