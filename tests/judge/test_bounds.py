"""What binds (`iobench.judge.bounds`): the stage that took most of a batch's time, and the stage that would set the
period of a loader reading beside the step; feed's bound is tested with feed's answer (tests/judge/test_feed.py)."""

from __future__ import annotations

import pytest

from iobench.judge.bounds import WAITED, largest_stage, paced_bound


def test_the_largest_stage_and_its_share_or_none_where_nothing_was_measured():
    assert largest_stage({"loader": 3.0, "step": 1.0}) == ("loader", pytest.approx(0.75))
    assert largest_stage({"loader": 0.0, "step": 0.0}) is None


def test_a_loader_reading_beside_binds_where_the_run_waited_for_it_and_the_device_would_not_cover_it():
    period = 10.0
    waited = (WAITED + 0.01) * period
    assert paced_bound("step", waited, period, 5.0, 12.0, 10.0).startswith("loader")
    assert paced_bound("step", waited, period, 11.0, 12.0, 10.0) == "step"  # the device's side sets the period
    assert paced_bound("step", 0.0, period, 5.0, 10.0, 10.0) == "step"
    assert paced_bound("host-to-device", 0.0, period, 5.0, 12.0, 10.0) == "host-to-device (or the loader)"
