"""The answer of a checkpoint run rests on its kill test: a library and save mode whose kills ever lost the checkpoint
(a clean error loses step N too) or corrupted it is never named; the kill counts it rests on are said; a ranking
taken beside other programs is no answer; two libraries whose rounds overlap are not settled."""

from __future__ import annotations

from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointKills, CheckpointTrial
from iobench.results.checkpoint_summary import answer, kill_counts, rows_of
from iobench.results.record_base import HostLoad

QUIET = HostLoad(load_before=0.1, other_cpu_before=0.0, load_after=0.1, other_cpu_after=0.0)


def _trials(library: str, mode: str, durable: list[float], cold: list[float], host: HostLoad = QUIET) -> list:
    made = []
    for k, (d, c) in enumerate(zip(durable, cold, strict=True)):
        common = {"library": library, "params": 10**6, "state_bytes": 14 * 10**6, "bytes_on_disk": 14 * 10**6,
                  "trial": k, "save_mode": mode, "host": host}  # fmt: skip
        made.append(CheckpointTrial(op="save", seconds=d / 2, durable_seconds=d, first_durable_seconds=d * 1.5,
                                    **common))  # fmt: skip
        made.append(CheckpointTrial(op="restore", cache="cold", seconds=c, exact=True, **common))
    return made


def _kills(library: str, mode: str, **counts: int) -> CheckpointKills:
    full = {o: 0 for o in KILL_OUTCOMES} | {o.replace("_", " ").replace("N1", "N+1"): n for o, n in counts.items()}
    return CheckpointKills(library=library, save_mode=mode, params=10**6, kills=sum(full.values()), counts=full)


def test_a_library_whose_kills_lost_the_checkpoint_is_never_the_answer():
    """torch in place is fastest, but 9 of 10 kills left a clean error (step N gone too): the answer is the next one
    that never lost a step, it names the kills it rests on and what it left out."""
    trials = (_trials("torch", "inplace", [1.0, 1.0, 1.1], [1.0, 1.0, 1.1])
              + _trials("safetensors", "safe", [1.5, 1.5, 1.6], [1.2, 1.2, 1.3]))  # fmt: skip
    kills = kill_counts([_kills("torch", "inplace", N_intact=1, clean_error=9),
                         _kills("safetensors", "safe", N_intact=6, N1_intact=4)])  # fmt: skip
    said = answer(rows_of(trials), kills)
    assert said.startswith("answer: save with safetensors safe")
    assert "10 of 10 kills left step N or N+1 intact" in said
    assert "left out: torch inplace (9 of 10 kills lost the checkpoint)" in said
    assert "torch" not in said.split("left out")[0]
    only_lost = answer(rows_of(_trials("torch", "inplace", [1.0], [1.0])), kills)
    assert only_lost.startswith("answer: none: left out: torch inplace")


def test_silent_corruption_and_a_crashed_restore_are_losses_too():
    trials = _trials("tensordict", "inplace", [1.0], [1.0]) + _trials("dcp", "safe", [2.0], [2.0])
    for outcome in ("silent_corruption", "restore_crashed"):
        kills = kill_counts([_kills("tensordict", "inplace", N_intact=4, **{outcome: 1})])
        said = answer(rows_of(trials), kills)
        assert said.startswith("answer: save with dcp safe") and "not kill-tested" in said


def test_a_ranking_taken_beside_other_programs_is_no_answer():
    busy = HostLoad(load_before=4.0, other_cpu_before=1.6, load_after=4.0, other_cpu_after=1.7)
    said = answer(rows_of(_trials("torch", "safe", [1.0, 1.1], [1.0, 1.1], busy)), {})
    assert said.startswith("answer: none: other programs used 1.7 cores") and "fastest measured: torch safe" in said


def test_two_libraries_whose_rounds_overlap_are_not_settled():
    trials = (_trials("torch", "safe", [1.0, 1.3, 1.1], [1.0, 1.2, 1.0])
              + _trials("dcp", "safe", [1.2, 1.0, 1.4], [1.1, 1.3, 1.0]))  # fmt: skip
    said = answer(rows_of(trials), {})
    assert "not settled against" in said
    apart = _trials("torch", "safe", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) + _trials("dcp", "safe", [3.0] * 3, [3.0] * 3)
    assert "3.00x the next, dcp safe (their rounds apart)" in answer(rows_of(apart), {})


def test_the_steady_save_is_the_answers_and_the_first_is_said():
    said = answer(rows_of(_trials("torch", "safe", [1.0], [1.0])), {})
    assert "durable in 1.00 s (the steady save; the first in a process 1.50 s)" in said
