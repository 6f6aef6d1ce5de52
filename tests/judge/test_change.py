"""Changes decided with their noise: intervals of the median of the runs, the drift between minutes that runs inside
one minute do not bound, and runs that saw other load (issue 79: noise is never called a change)."""

from __future__ import annotations

import math

import pytest

from iobench.judge.change import FASTER, NO_DIFFERENCE, NOT_COMPARABLE, RUN_DRIFT, SLOWER, compare_change
from iobench.judge.intervals import record_interval
from iobench.results.record import RunRecord
from tests.conftest import FLAT_RECORD


def record(seconds: list[float], busy: float | None = 0.0, **extra) -> RunRecord:
    n = FLAT_RECORD["samples_per_epoch"]
    return RunRecord.from_json(
        {
            **FLAT_RECORD,
            "epoch_seconds": seconds,
            "epoch_seconds_median": sorted(seconds)[len(seconds) // 2],
            "epoch_seconds_min": min(seconds),
            "epoch_seconds_max": max(seconds),
            "epochs": len(seconds),
            "samples_per_s": n / sorted(seconds)[len(seconds) // 2],
            "other_cpu_before": busy,
            "other_cpu_after": busy,
            **extra,
        }
    )


def runs_record(
    run_medians: list[float], per_run: int = 3, spread: float = 0.01, busy: float | None = 0.0, **extra
) -> RunRecord:
    """A record of len(run_medians) runs of `per_run` epochs each, each run's epochs within `spread` of its median
    (samples/s of a dataset of FLAT_RECORD's samples)."""
    n = FLAT_RECORD["samples_per_epoch"]
    seconds = [n / (m * f) for m in run_medians for f in (1 - spread, 1.0, 1 + spread)[:per_run]]
    return record(seconds, busy=busy, runs=len(run_medians), epochs=per_run, **extra)


def test_the_interval_is_the_medians_by_order_statistics():
    r = record([1.0, 1.1, 0.9, 1.05, 0.95, 1.2])
    i = record_interval(r)
    n = FLAT_RECORD["samples_per_epoch"]
    assert math.isclose(i.low, n / 1.2) and math.isclose(i.high, n / 0.9) and i.coverage > 0.95


def test_overlapping_runs_are_no_decidable_difference():
    """Back-to-back identical runs of a noisy machine were called -39.5% and +145.6%."""
    a, b = runs_record([1000.0, 1400.0, 800.0]), runs_record([1300.0, 700.0, 1100.0])
    change = compare_change(a, b)
    assert change.kind == NO_DIFFERENCE and "intervals overlap" in change.text and "not a verdict" in change.text


def test_separate_intervals_beyond_the_drift_are_a_change_with_its_size():
    a, b = runs_record([1000.0, 1010.0, 990.0]), runs_record([500.0, 505.0, 495.0])
    change = compare_change(a, b)
    assert change.kind == SLOWER and math.isclose(change.ratio, 0.5) and change.text == "-50.0%: slower"
    assert compare_change(b, a).kind == FASTER


def test_separate_intervals_within_the_drift_between_minutes_are_no_change():
    """Three runs inside one minute do not bound the next minute's drift: tight runs 10% apart (within RUN_DRIFT)
    are no decidable difference, and the line asks for interleaving."""
    a, b = runs_record([1000.0, 1002.0, 998.0]), runs_record([1100.0, 1102.0, 1098.0])
    change = compare_change(a, b)
    assert 1.1 < 1 + RUN_DRIFT and change.kind == NO_DIFFERENCE and "compare --rerun" in change.text


def test_runs_that_saw_different_load_are_not_comparable():
    quiet, loaded = runs_record([1000.0, 1010.0, 990.0]), runs_record([500.0, 505.0, 495.0], busy=1.9)
    change = compare_change(quiet, loaded)
    assert change.kind == NOT_COMPARABLE and "0.0 cores beside A, 1.9 beside B" in change.text
    assert "B/A 0.50x, not a verdict" in change.text
    assert compare_change(quiet, runs_record([500.0, 505.0, 495.0], busy=0.1)).kind == SLOWER  # both quiet


def test_beside_other_programs_nothing_is_a_change_however_far_apart():
    """Identical configurations a minute apart, both beside two busy cores, read +103.7% and +126.5%: beside other
    programs runs in one minute do not bound the next's, so no change is called, even a 2x one."""
    a = runs_record([1000.0, 980.0, 1010.0], busy=1.5)
    b = runs_record([2037.0, 2040.0, 2030.0], busy=1.6)
    change = compare_change(a, b)
    assert change.kind == NO_DIFFERENCE and change.ratio == pytest.approx(2.037, rel=0.01)
    assert "1.5 and 1.6 cores busy" in change.text and "%" not in change.text.split("(B/A")[0]


def test_one_run_has_no_interval_and_decides_nothing():
    assert compare_change(record([1.0]), record([2.0])).kind == NOT_COMPARABLE


def test_runs_are_the_units_of_the_interval():
    """Tight epochs within each run, runs far apart: the runs' interval is wide, and overlaps."""
    a = runs_record([1000.0, 700.0, 900.0], spread=0.001)
    b = runs_record([760.0, 980.0, 720.0], spread=0.001)
    assert compare_change(a, b).kind == NO_DIFFERENCE
    assert record_interval(a).low == pytest.approx(700.0, rel=1e-6) and record_interval(a).high == pytest.approx(1000.0)


def test_a_record_compared_with_itself_is_no_difference_however_busy_the_machine_was():
    busy = record([1.0, 1.6, 0.7], busy=1.9, timestamp="2026-11-26T09:00:00+00:00")
    change = compare_change(busy, busy)
    assert change.kind == NO_DIFFERENCE and "the very same runs" in change.text
    again = record([1.0, 1.6, 0.7], busy=1.9, timestamp="2026-11-26T09:05:00+00:00")
    assert compare_change(busy, again).kind == NO_DIFFERENCE
