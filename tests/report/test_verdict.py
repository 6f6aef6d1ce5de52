"""Verdicts that decide with their noise: intervals of the median samples/s, ties, and runs that saw other load."""

from __future__ import annotations

import math

import pytest

from iobench.report.verdict import compare_verdict, interval, tied_with
from iobench.results.record import RunRecord
from tests.conftest import FLAT_RECORD


def record(seconds: list[float], busy: float | None = 0.0, **extra) -> RunRecord:
    n = FLAT_RECORD["samples_per_epoch"]
    return RunRecord.from_json({
        **FLAT_RECORD, "epoch_seconds": seconds, "epoch_seconds_median": sorted(seconds)[len(seconds) // 2],
        "epoch_seconds_min": min(seconds), "epoch_seconds_max": max(seconds), "epochs": len(seconds),
        "samples_per_s": n / sorted(seconds)[len(seconds) // 2], "other_cpu_before": busy, "other_cpu_after": busy,
        **extra,
    })  # fmt: skip


def test_the_interval_is_the_medians_by_order_statistics():
    r = record([1.0, 1.1, 0.9, 1.05, 0.95, 1.2])
    i = interval(r)
    n = FLAT_RECORD["samples_per_epoch"]
    assert math.isclose(i.low, n / 1.2) and math.isclose(i.high, n / 0.9) and i.coverage > 0.95


def test_overlapping_runs_are_no_change_and_tied():
    """Back-to-back identical runs of a noisy machine were called -39.5% and +145.6%: overlapping intervals are
    the same figure."""
    a, b = record([1.0, 1.4, 0.8]), record([1.3, 0.7, 1.1])
    assert compare_verdict(a, b).kind == "same" and compare_verdict(a, b).text.startswith("no change")
    assert tied_with(b, a)


def test_separate_intervals_are_a_change_with_its_size():
    a, b = record([1.0, 1.02, 0.99]), record([2.0, 2.05, 1.98])
    verdict = compare_verdict(a, b)
    assert verdict.kind == "change" and math.isclose(verdict.change, 1.0 / 2.0 - 1) and verdict.text == "-50.0%"
    assert not tied_with(b, a)


def test_runs_that_saw_different_load_are_not_comparable():
    """The same configuration quiet, then beside two busy processes: not a change, and the line says why."""
    quiet, loaded = record([1.0, 1.02, 0.99], busy=0.0), record([2.0, 2.05, 1.98], busy=1.9)
    verdict = compare_verdict(quiet, loaded)
    assert verdict.kind == "not comparable" and "0.0 cores beside A, 1.9 beside B" in verdict.text
    assert compare_verdict(quiet, record([2.0, 2.05, 1.98], busy=0.1)).kind == "change"  # both quiet


def test_one_epoch_has_no_interval_and_decides_nothing():
    assert compare_verdict(record([1.0]), record([2.0])).kind == "not comparable"


def runs_record(
    run_medians: list[float], per_run: int = 3, spread: float = 0.01, busy: float | None = 0.0
) -> RunRecord:
    """A record of len(run_medians) runs of `per_run` epochs each, each run's epochs within `spread` of its median
    (epoch seconds of a dataset of FLAT_RECORD's samples)."""
    n = FLAT_RECORD["samples_per_epoch"]
    seconds = [n / (m * f) for m in run_medians for f in (1 - spread, 1.0, 1 + spread)[:per_run]]
    return record(seconds, busy=busy, runs=len(run_medians), epochs=per_run)


def test_two_identical_runs_on_a_busy_machine_are_not_decidable():
    """Two identical runs 90 s apart, both beside other programs using 1.5-1.6 cores of 2, were called a -16.4% change:
    each record's epochs were tight, the drift between the runs was not in them. Run by run the same configuration
    varied by more than the difference: not decidable, the ratio shown as no verdict."""
    a = runs_record([1000.0, 820.0, 960.0], busy=1.5)
    b = runs_record([836.0, 700.0, 810.0], busy=1.6)
    verdict = compare_verdict(a, b)
    assert verdict.kind == "not decidable" and verdict.change is None and "%" not in verdict.text.split("(B/A")[0]
    assert "B/A 0.84x, not a verdict" in verdict.text and "1.5 and 1.6 cores busy" in verdict.text


def test_a_difference_beyond_a_busy_machines_own_variation_is_still_a_change():
    a = runs_record([1000.0, 980.0, 1010.0], busy=1.5)
    b = runs_record([500.0, 490.0, 505.0], busy=1.6)
    assert compare_verdict(a, b).kind == "change"


def test_runs_are_the_units_of_the_interval():
    """Tight epochs within each run, runs far apart: the runs' interval is wide, and overlaps."""
    a = runs_record([1000.0, 700.0, 900.0], spread=0.001)
    b = runs_record([760.0, 980.0, 720.0], spread=0.001)
    assert compare_verdict(a, b).kind == "same"
    from iobench.report.verdict import run_interval

    assert run_interval(a).low == pytest.approx(700.0, rel=1e-6) and run_interval(a).high == pytest.approx(1000.0)


def test_not_comparable_still_shows_the_ratio():
    verdict = compare_verdict(runs_record([1000.0, 990.0, 1010.0]), runs_record([500.0, 495.0, 505.0], busy=1.9))
    assert verdict.kind == "not comparable" and "B/A 0.50x, not a verdict" in verdict.text


def test_a_record_compared_with_itself_is_the_same_however_busy_the_machine_was():
    """`compare results.jsonl results.jsonl` of a run beside other programs said "not decidable": the same runs are
    the same figure, whatever the load they saw; two runs of their own (another timestamp) are judged by their noise."""
    busy = record([1.0, 1.6, 0.7], busy=1.9, timestamp="2026-11-26T09:00:00+00:00")
    verdict = compare_verdict(busy, busy)
    assert verdict.kind == "same" and "the very same runs" in verdict.text
    again = record([1.0, 1.6, 0.7], busy=1.9, timestamp="2026-11-26T09:05:00+00:00")
    assert compare_verdict(busy, again).kind == "not decidable"
