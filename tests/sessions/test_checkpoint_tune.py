"""`checkpoint --tune`: what it searches (the libraries it can hand over as code, each kill-tested, one process, a
local folder), its budget (rounds cut to fit, a refusal in one line where one round cannot), and the code it hands
over: the judgement's fastest safe choice, never a library and mode whose kills lost a checkpoint."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.checkpoint.defaults import TUNE_KILLS
from iobench.checkpoint.libraries import LIBRARIES
from iobench.checkpoint.request import CheckpointRequest, for_tune
from iobench.checkpoint.state import StateSpec
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.results.checkpoint_summary import kill_counts, rows_of
from iobench.sessions.checkpoint import _tuned, _within_budget
from iobench.storage.remote.profiles import PROFILES
from tests.results.test_checkpoint_summary import _kills, _trials


def _request(tmp_path, **asked) -> CheckpointRequest:
    base = {"specs": (StateSpec(100_000),), "libraries": tuple(LIBRARIES), "directory": tmp_path, "device": "cpu"}
    return CheckpointRequest(**{**base, "results": tmp_path / "r" / "checkpoints.jsonl", **asked})


def test_tune_searches_what_it_can_hand_over_each_kill_tested_locally_in_one_process(tmp_path):
    tuned, said = for_tune(_request(tmp_path))
    assert "raw" not in tuned.libraries and "dcp-async-process" not in tuned.libraries
    assert {"torch", "safetensors", "dcp", "dcp-threads", "dcp-async", "tensordict"} <= set(tuned.libraries)
    assert tuned.kill_test == TUNE_KILLS and any("dcp-async-process" in line for line in said)
    assert for_tune(_request(tmp_path, kill_test=40))[0].kill_test == 40
    for asked, why in (
        ({"nproc": 2}, "one process"),
        ({"endpoint_url": "http://127.0.0.1:9"}, "local folder"),
        ({"remote": next(iter(PROFILES.values()))}, "local folder"),
        ({"libraries": ("raw", "dcp-async-process")}, "names none of"),
    ):
        with pytest.raises(IobenchError, match=why):
            for_tune(_request(tmp_path, **asked))


def test_the_rounds_are_cut_to_fit_the_budget_and_one_round_over_it_is_refused(tmp_path):
    request, _ = for_tune(_request(tmp_path, specs=(StateSpec(10**8),), rounds=5, save_modes=("safe",)))
    libraries = [LIBRARIES[n] for n in request.libraries]
    kills = [(n, "safe") for n in request.libraries if LIBRARIES[n].killed]
    said: list[str] = []
    events = Events()
    events.say = said.append  # type: ignore[method-assign]
    full, _, estimate = _within_budget(replace(request, budget_minutes=10_000), libraries, kills, events)
    assert full.rounds == 5 and not said
    budget = sum(estimate.ahead) / 60 * 0.6
    cut, _, fitted = _within_budget(replace(request, budget_minutes=budget), libraries, kills, events)
    assert 1 <= cut.rounds < 5 and sum(fitted.ahead) <= budget * 60 and "round(s), not 5" in said[0]
    with pytest.raises(IobenchError, match="over --budget-minutes"):
        _within_budget(replace(request, budget_minutes=0.01), libraries, kills, events)


def test_the_code_handed_over_is_never_a_library_whose_kills_lost_a_checkpoint(tmp_path):
    """torch in place is fastest, but a kill lost it: the code is DCP's safe save (planted records), checked in a fresh
    process; where every choice lost a checkpoint, no code and why."""
    trials = _trials("torch", "inplace", [0.01, 0.01], [0.01, 0.01]) + _trials("torch", "safe", [0.02] * 2, [0.02] * 2)
    trials += _trials("dcp", "safe", [0.05, 0.05], [0.05, 0.05])
    lost = [
        _kills("torch", "inplace", N_intact=4, clean_error=1),
        _kills("torch", "safe", N_intact=3, silent_corruption=1),
    ]
    kills = kill_counts([*lost, _kills("dcp", "safe", N_intact=5)])
    request = _request(tmp_path, torch_threads=1, directory=tmp_path / "made" / "ck")  # made and removed by the run
    request.results.parent.mkdir()
    spec = StateSpec(100_000)
    tuned = _tuned(request, spec, rows_of(trials), kills, Events())
    assert tuned.row is not None and (tuned.row.library, tuned.row.save_mode) == ("dcp", "safe")
    assert tuned.script == request.results.with_name("checkpoints-tuned.py") and "dcp.save(" in tuned.text
    assert "5 of 5 kills left step N or N+1 intact" in tuned.text
    assert tuned.check is not None and tuned.check.figure is not None, tuned.check
    none = _tuned(request, spec, rows_of(trials[:4]), kills, Events())
    assert none.row is None and none.script is None and "kill" in none.why
