"""A row's standing against the fastest says why it cannot be told apart: `≈ 35.20x: intervals overlap under load`
where `run` printed `35.20x tied` (issue 79)."""

from __future__ import annotations

from iobench.judge.labels import CANNOT_TELL, vs_fastest
from tests.judge.test_change import runs_record


def test_a_row_apart_from_the_fastest_shows_its_ratio_alone():
    fast, slow = runs_record([2000.0, 2010.0, 1990.0]), runs_record([1000.0, 1010.0, 990.0])
    assert vs_fastest([fast, slow]) == ["1.00x", "2.00x"]


def test_overlapping_intervals_are_marked_with_why():
    a, b = runs_record([2000.0, 1500.0, 1000.0]), runs_record([1900.0, 1400.0, 1100.0])
    cells = vs_fastest([a, b])
    assert cells[0] == "1.00x" and cells[1].startswith(CANNOT_TELL) and cells[1].endswith(": intervals overlap")


def test_under_load_the_mark_says_so_however_far_the_medians_are():
    """35x apart at the median, intervals that overlap only because other programs made them enormous."""
    a = runs_record([35000.0, 100.0, 36000.0], busy=2.1)
    b = runs_record([1000.0, 30000.0, 900.0], busy=2.1)
    cells = vs_fastest([a, b])
    assert cells[1].endswith("intervals overlap under load") and "tied" not in " ".join(cells)


def test_one_run_has_no_interval_and_no_mark():
    a, b = runs_record([2000.0], per_run=1), runs_record([1900.0], per_run=1)
    assert vs_fastest([a, b])[1] == "1.05x"
