"""Statistics of repeated measurements, and the warnings that make a figure suspect (as pyperf does)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

CV_LIMIT = 0.10  # coefficient of variation above which the spread is called large
OUTLIER_Z = 3.5  # modified z-score (Iglewicz and Hoaglin) above which a value is an outlier
OUTLIER_MIN_N = 4  # with fewer values the MAD says nothing
OUTLIER_MIN_REL = 0.05  # and a value within 5% of the median is not worth a warning
FIRST_RUN_RATIO = 1.25  # a first run this much slower than the median of the rest is a caching effect


def summary(values: Sequence[float]) -> dict:
    """Median, min, max, median absolute deviation and coefficient of variation."""
    median = statistics.median(values)
    mean = statistics.fmean(values)
    return {
        "median": median,
        "min": min(values),
        "max": max(values),
        "mad": statistics.median(abs(v - median) for v in values),
        "cv": statistics.pstdev(values) / mean if len(values) > 1 and mean > 0 else 0.0,
    }


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
    return len(values) >= 3 and values[0] > ratio * statistics.median(values[1:])


def warnings(name: str, seconds: Sequence[float]) -> list[str]:
    """What is suspect about a series of epoch times, each with what to do about it."""
    lines = []
    if not seconds:
        return lines
    s = summary(seconds)
    if s["cv"] > CV_LIMIT:
        lines.append(
            f"warning: {name}: epoch times vary by {s['cv']:.0%} (CV > {CV_LIMIT:.0%}); "
            "use more --runs, close other programs, or pin the benchmark to idle cores"
        )
    out = outliers(seconds)
    if out:
        listed = ", ".join(f"#{i + 1} ({seconds[i]:.3f} s)" for i in out)
        lines.append(
            f"warning: {name}: outlier epoch(s) {listed} against a median of {s['median']:.3f} s; "
            "something else used the machine: rerun, or raise --runs so the median absorbs it"
        )
    if first_run_slow(seconds):
        lines.append(
            f"warning: {name}: the first epoch ({seconds[0]:.3f} s) is much slower than the rest "
            f"(median {statistics.median(seconds[1:]):.3f} s): a caching effect; use --warmup or --cache"
        )
    return lines
