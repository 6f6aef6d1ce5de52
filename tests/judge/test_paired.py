"""Configurations measured in turn, judged in pairs (`iobench.judge.paired`) and the answer beside other programs
(`iobench.judge.answer`): a drift that falls on both cancels; a paired lead decides where each interval is wide; beside
other programs the paired ranking is the answer when the lead survives crediting each configuration it beat with the CPU
wait it had beyond the leader's, and a configuration it does not survive is named instead of a winner."""

from __future__ import annotations

from dataclasses import replace

from iobench.judge.answer import answer_for
from iobench.judge.paired import contention_of, credited_lead, paired_runs, wait_share
from iobench.results.record_base import Waits
from tests.conftest import record_of

N = 1000  # samples an epoch in the planted records


def _record(fmt: str, rates: list[float], share: float | None, session: str = "s1", others: float = 0.0):
    """A record of len(rates) runs of one epoch each, at these samples/s, whose processes waited `share` of their
    runnable time (None: not recorded), measured in turn in `session`."""
    seconds = [N / r for r in rates]
    waits = {}
    if share is not None:
        cpu = [1.0] * len(rates)
        waits = {
            "unit_wall_s": seconds,
            "unit_cpu_s": cpu,
            "unit_cpu_wait_s": [c * share / (1 - share) for c in cpu],
            "unit_others_cores": [others] * len(rates),
            "turn_session": session,
            "turn_positions": [0] * len(rates),
        }
    median = sorted(seconds)[len(seconds) // 2]
    return record_of(
        format=fmt,
        runs=len(rates),
        epochs=1,
        epoch_seconds=seconds,
        epoch_seconds_median=median,
        epoch_seconds_min=min(seconds),
        epoch_seconds_max=max(seconds),
        samples_per_epoch=N,
        samples_per_s=N / median,
        other_cpu_before=others,
        other_cpu_after=others,
        **waits,
    )


def test_a_drift_that_falls_on_both_cancels_in_the_pairs():
    """Each configuration's runs drift 2x over the rounds (their intervals overlap); within each round A is 1.2x B."""
    drift = [100.0, 140.0, 200.0, 120.0, 170.0, 110.0]
    a = _record("npy", [1.2 * d for d in drift], 0.02)
    b = _record("hdf5", drift, 0.02)
    paired = paired_runs(a, b)
    assert paired is not None and abs(paired.median - 1.2) < 1e-9 and paired.low > 1
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert not answer.interval.apart(answer.rival) and answer.settled and answer.winner is a
    assert "1.20x [1.20-1.20] paired over 6 rounds in turn" in answer.verdict()


def test_records_of_different_sessions_are_not_paired():
    a = _record("npy", [120.0, 130.0], 0.02, session="s1")
    b = _record("hdf5", [100.0, 110.0], 0.02, session="s2")
    assert paired_runs(a, b) is None


def test_beside_other_programs_the_paired_ranking_answers_when_contention_fell_alike():
    a = _record("npy", [120.0, 90.0, 150.0, 100.0, 130.0, 95.0], 0.33, others=1.8)
    b = _record("hdf5", [100.0, 75.0, 125.0, 83.0, 108.0, 79.0], 0.36, others=1.8)
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert answer.winner is a, answer.refused
    said = answer.verdict()
    assert "beside other programs using 1.8 cores" in said and "paired over 6 rounds in turn" in said
    assert "each waited for a CPU 33%-36% of its time" in said


def test_a_lead_that_does_not_survive_the_others_credit_is_named_and_no_winner_given():
    """memmap waited 65% against npy's 30%: quiet it could run up to 0.70/0.35 = 2x its figure, so npy's 1.2x paired
    lead does not survive; where the leader waited more, it is not credited, and its lead stands."""
    a = _record("npy", [120.0, 90.0, 150.0, 100.0, 130.0, 95.0], 0.30, others=1.8)
    b = _record("memmap", [100.0, 75.0, 125.0, 83.0, 108.0, 79.0], 0.65, others=1.8)
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert answer.winner is None
    assert "contention fell unevenly: memmap/dataloader" in answer.refused, answer.refused
    assert "waited for a CPU 65% of its time, the leader 30%" in answer.refused
    assert "the lead over it is 0.60x" in answer.refused, answer.refused  # 1.20 * 0.35 / 0.70
    leader = _record("npy", [120.0, 90.0, 150.0, 100.0, 130.0, 95.0], 0.65, others=1.8)
    stands = answer_for(
        "warm shuffle on cpu", [leader, _record("memmap", [100.0, 75.0, 125.0, 83.0, 108.0, 79.0], 0.3)]
    )
    assert stands.winner is leader, stands.refused


def test_a_lead_large_enough_survives_uneven_contention():
    """Shares 12 points apart (the spread that refused 3 of 12 trials of `run` beside two busy loops) with a 1.5x
    paired lead: credited, the lead is 1.5 * 0.52 / 0.64 = 1.22x, and the ranking is the answer."""
    a = _record("npy", [150.0, 112.5, 187.5, 125.0, 162.5, 118.5], 0.36, others=1.8)
    b = _record("memmap", [100.0, 75.0, 125.0, 83.3, 108.3, 79.0], 0.48, others=1.8)
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert answer.winner is a, answer.refused
    assert "each waited for a CPU 36%-48% of its time" in answer.verdict()
    assert abs(credited_lead(1.5, 0.36, 0.48) - 1.5 * 0.52 / 0.64) < 1e-9 and credited_lead(1.5, 0.48, 0.36) == 1.5


def test_records_with_workers_whose_exits_were_not_reported_give_no_share():
    """Before a DataLoader worker reported its totals as it exited, a meter missed most of its workers' time: such a
    record's share is not whole, and beside other programs the answer says so."""
    a = _record("npy", [120.0, 90.0, 150.0, 100.0, 130.0, 95.0], 0.30, others=1.8)
    b = _record("memmap", [100.0, 75.0, 125.0, 83.0, 108.0, 79.0], 0.30, others=1.8)
    b = replace(b, config=replace(b.config, settings=replace(b.config.settings, num_workers=2)))
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert answer.winner is None and "not recorded whole" in answer.refused, answer.refused
    reported = replace(b, waits=replace(b.waits, exits_reported=True))
    assert answer_for("warm shuffle on cpu", [a, reported]).winner is a


def test_beside_other_programs_without_a_paired_lead_there_is_no_answer():
    a = _record("npy", [120.0, 80.0, 150.0], 0.3, others=1.8)
    b = _record("hdf5", [100.0, 110.0, 125.0], 0.3, others=1.8)  # B wins round 2
    answer = answer_for("warm shuffle on cpu", [a, b])
    assert answer.winner is None and "the fastest is not ahead in every pair of runs" in answer.refused
    alone = [_record("npy", [120.0], None, others=1.8), _record("hdf5", [100.0], None, others=1.8)]
    unpaired = answer_for("warm shuffle on cpu", alone)
    assert unpaired.winner is None and "not taken in turn" in unpaired.refused


def test_the_wait_share_is_the_waits_over_the_runnable_time():
    waits = Waits(unit_cpu_s=[3.0, 1.0], unit_cpu_wait_s=[1.0, 3.0])
    assert wait_share(waits) == 0.5 and wait_share(Waits()) is None
    even = contention_of(_record("npy", [1.0], 0.3), [("b", _record("hdf5", [1.0], 0.35), 1.2)])
    assert even.recorded and even.hit is None
    from iobench.judge.paired import contention_among

    unpaired = contention_among(("npy", 0.3), [("hdf5", 0.3, 1.2), ("lmdb", 0.3, None)])
    assert unpaired.unpaired == "lmdb" and unpaired.hit is None  # not measured in turn: no lead to credit


def test_a_change_measured_in_turn_is_decided_by_its_pairs():
    """`paired_change` (compare --rerun): B 1.2x slower within each round is called though both drift 2x over the
    rounds; a ratio whose interval spans 1 is no change; fewer than PAIRS_NEEDED rounds cannot bound it at 95%."""
    from iobench.judge.change import FASTER, NO_DIFFERENCE, PAIRS_NEEDED, SLOWER, paired_change

    drift = [100.0, 140.0, 200.0, 120.0, 170.0, 110.0]
    a = _record("npy", drift, 0.02)
    slow = paired_change(a, _record("npy", [d / 1.2 for d in drift], 0.02))
    assert slow.kind == SLOWER and abs(slow.ratio - 1 / 1.2) < 1e-9 and "paired over 6 rounds" in slow.reason
    assert paired_change(a, _record("npy", [d * 1.2 for d in drift], 0.02)).kind == FASTER
    wobble = [1.05, 0.96, 1.02, 0.97, 1.04, 0.99]  # B/A on each side of 1
    same = paired_change(a, _record("npy", [d * w for d, w in zip(drift, wobble, strict=True)], 0.02))
    assert same.kind == NO_DIFFERENCE and "spans 1" in same.reason
    few = paired_change(_record("npy", drift[:3], 0.02), _record("npy", [d / 1.2 for d in drift[:3]], 0.02))
    assert few.kind == NO_DIFFERENCE and f"({PAIRS_NEEDED} or more)" in few.reason


def test_a_change_where_contention_fell_on_one_is_not_comparable():
    from iobench.judge.change import NOT_COMPARABLE, paired_change

    drift = [100.0, 140.0, 200.0, 120.0, 170.0, 110.0]
    uneven = paired_change(_record("npy", drift, 0.05, others=1.8), _record("npy", [d / 2 for d in drift], 0.6))
    assert uneven.kind == NOT_COMPARABLE, uneven  # A's 2x lead, credited: 2 * 0.40 / 0.95 = 0.84x
    assert "B waited for a CPU 60% of its time, the leader 5%" in uneven.reason and "0.84x" in uneven.reason
    survives = paired_change(_record("npy", drift, 0.05, others=1.8), _record("npy", [d / 2 for d in drift], 0.2))
    assert survives.kind == "slower", survives  # 2 * 0.80 / 0.95 = 1.68x


def test_records_not_measured_in_turn_are_compared_as_before():
    from iobench.judge.change import compare_change, paired_change

    a, b = _record("npy", [100.0] * 6, 0.02, "s1"), _record("npy", [50.0] * 6, 0.02, "s2")
    assert paired_change(a, b) == compare_change(a, b)


def test_a_paired_change_within_the_floor_is_no_change():
    """Two loaders of one configuration differ by a percent or so, consistently: six rounds all at 0.99 are no
    change (a record rerun against itself was called "slower" at B/A 0.96 and 0.99, quiet)."""
    from iobench.judge.change import NO_DIFFERENCE, PAIRED_FLOOR, paired_change

    drift = [100.0, 140.0, 200.0, 120.0, 170.0, 110.0]
    close = paired_change(_record("npy", drift, 0.02), _record("npy", [d * 0.99 for d in drift], 0.02))
    assert close.kind == NO_DIFFERENCE and f"within the {PAIRED_FLOOR:.0%}" in close.reason


def test_epochs_that_differ_by_less_than_the_timers_noise_are_not_told_apart():
    """A record against itself at 300 samples (epochs of 0.8 ms) was called 0.91x "slower" over 6 rounds in CI: epochs
    that differ by less than the noise floor (0.05 of a 50 ms epoch) are no change however tight the pairs; the same
    ratio over epochs 100x as long is a change."""
    from iobench.judge.change import NO_DIFFERENCE, SLOWER, paired_change

    drift = [1.00, 1.03, 0.98, 1.02, 0.99, 1.01]
    short = [N / 0.0008 * d for d in drift]  # 0.8 ms epochs
    slow = paired_change(_record("npy", short, 0.02), _record("npy", [r / 1.1 for r in short], 0.02))
    assert slow.kind == NO_DIFFERENCE and "timer and scheduling noise" in slow.reason, slow
    long = [r / 100 for r in short]  # 80 ms epochs
    assert paired_change(_record("npy", long, 0.02), _record("npy", [r / 1.1 for r in long], 0.02)).kind == SLOWER
