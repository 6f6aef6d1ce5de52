"""The checkpoint session's time left: what the steps ahead cost as measured, by kind (issue 80: one pace for all said
"about 8 min" of a session that took 17, "about 49 min left" ten minutes into one estimated at 38)."""

from __future__ import annotations

from iobench.checkpoint.plan import TimeLeft


def test_a_step_of_a_kind_measured_costs_what_it_measured():
    est = TimeLeft([5.0, 5.0, 5.0, 1.0, 1.0], ["trial:a", "trial:a", "trial:a", "kill:t inplace", "kill:t inplace"])
    assert est.finished(20.0) == "about 42 s left"  # two more a-steps at 20 s each; the kills as estimated
    est.finished(22.0)
    est.finished(18.0)
    assert est.seconds_left() == 2 * 1.0  # kills are their own family: no kill measured, their estimate as it is
    est.finished(30.0)
    assert est.seconds_left() == 30.0  # the second kill of the same test costs what the first did
    assert est.finished(29.0) == ""


def test_without_kinds_it_is_one_family():
    est = TimeLeft([10.0, 10.0])
    assert est.finished(10.0) == "about 10 s left"


def test_the_estimate_says_what_its_time_goes_to():
    """--tune's "about 21 min" at 1e6 and 1e7 parameters alike: said with its parts (saves, restores, kill tests, each
    a fresh process) and each save mode's share, so the user sees what to drop to fit a budget."""
    from types import SimpleNamespace

    from iobench.checkpoint.plan import Step, estimate_of
    from iobench.checkpoint.save_modes import INPLACE, SAFE
    from iobench.checkpoint.state import StateSpec

    spec = StateSpec(1_000_000)
    request = SimpleNamespace(kill_spec=None, specs=[spec], kill_test=2)
    steps = [Step(spec, 0, lib, "save", mode) for lib in ("torch", "dcp") for mode in (INPLACE, SAFE)]
    steps += [Step(spec, 0, lib, "restore", SAFE, "warm") for lib in ("torch", "dcp")]
    estimate = estimate_of(steps, request, [("torch", "safe")])  # type: ignore[arg-type]
    said = estimate.parts_words()
    assert said.startswith("4 saves ") and ", 2 restores " in said and ", 2 kill tests " in said, said
    assert "fresh process, about 4 s" in said and "by save mode: inplace " in said and ", safe " in said, said
