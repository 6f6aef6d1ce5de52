"""What tune may say of its leader and its nearest rival: named by what sets them apart (issue 79: "not decided:
hdf5/dataloader and hdf5/dataloader are 0.4% apart"), settled only when tight and apart."""

from __future__ import annotations

from iobench.judge.intervals import interval_of
from iobench.judge.search import Contender, deciding_budget, differing, near, settled


def test_two_candidates_are_named_by_the_settings_that_differ():
    a, b = "hdf5/dataloader bs=1024 w=2 fetch=batch", "hdf5/dataloader bs=1024 w=0 fetch=batch"
    assert differing(a, b) == ("hdf5/dataloader w=2", "hdf5/dataloader w=0")
    assert differing("npy/dataloader bs=16", "memmap/tensorclass bs=16") == ("npy/dataloader", "memmap/tensorclass")
    best = Contender(a, interval_of([100.0, 110.0, 90.0, 105.0]), 4, 0.5)  # 0.4% apart, each spread 20%
    rival = Contender(b, interval_of([99.6, 109.5, 90.5, 104.0]), 4, 0.5)
    said = deciding_budget(best, rival)
    assert said.startswith("not decided: hdf5/dataloader w=2 and hdf5/dataloader w=0 are 0.") and "w=0" in said


def test_a_gap_wide_enough_is_a_budget_of_epochs():
    best = Contender("npy/dataloader w=2", interval_of([100.0, 110.0, 90.0]), 3, 0.5)
    rival = Contender("npy/dataloader w=0", interval_of([80.0, 95.0, 70.0]), 3, 0.5)
    assert deciding_budget(best, rival).startswith("to decide between npy/dataloader w=2 and npy/dataloader w=0:")


def test_settled_needs_tight_and_apart_and_near_needs_an_interval():
    leader, rival = interval_of([100.0, 101.0, 100.5]), interval_of([90.0, 91.0, 90.5])
    assert settled(leader, rival, tight=0.03) and not settled(leader, interval_of([99.0, 101.0, 100.0]), 0.03)
    assert not settled(interval_of([80.0, 120.0, 100.0]), rival, tight=0.03)  # apart, but not tight
    assert near(leader, interval_of([99.0, 101.0])) and not near(leader, interval_of([99.0]))


def test_tunes_last_words_are_the_judgements():
    """Why the search stopped, an epoch too short to rank by, and a faster candidate below the shuffle floor: decided
    here; the last said only where its interval is apart from the best's (a bare larger median was said before)."""
    from iobench.judge.intervals import interval_of
    from iobench.judge.search import STOP_APART, STOP_BUDGET, Contender, faster_elsewhere, stopped_words, too_short

    assert "apart from the next's" in stopped_words(STOP_APART, near=False)
    assert "still overlapping" in stopped_words(STOP_BUDGET, near=True)
    assert too_short(0.003) is not None and "3 ms" in too_short(0.003) and too_short(0.2) is None
    best = Contender("a", interval_of([100.0, 101.0, 102.0, 100.5, 101.5, 100.2]), 6, 1.0)
    close = Contender("b", interval_of([101.0, 102.0, 100.0, 103.0, 101.2, 99.0]), 6, 1.0)
    far = Contender("c", interval_of([150.0, 151.0, 149.0, 150.5, 152.0, 148.0]), 6, 1.0)
    assert faster_elsewhere(best, far) == "fastest at any shuffle" and faster_elsewhere(far, best) is None
    assert faster_elsewhere(best, close) == "measured faster at any shuffle, not told apart from the best"
