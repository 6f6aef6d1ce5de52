"""`harness_out_of_the_collector`: what exists before the clock is frozen out of the collector while it runs, and
handed back after, also when the timed work fails."""

from __future__ import annotations

import gc

import pytest

from iobench.measuring.collector import harness_out_of_the_collector


def test_what_exists_before_the_clock_is_frozen_while_it_runs_and_handed_back():
    before = gc.get_freeze_count()
    with harness_out_of_the_collector():
        assert gc.get_freeze_count() > before
    assert gc.get_freeze_count() == before
    with pytest.raises(RuntimeError), harness_out_of_the_collector():
        raise RuntimeError("the timed work failed")
    assert gc.get_freeze_count() == before
