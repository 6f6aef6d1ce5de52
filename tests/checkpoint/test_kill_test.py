"""The kill test: planted torn and corrupted checkpoints are told apart (a clean error, silent corruption, N+1
intact), a safe save (step N+1 beside N, the pointer swapped last) never loses step N however it is killed, and the
counts become a record the answer reads."""

from __future__ import annotations

import os

import pytest

from iobench.checkpoint import processes, save_modes, trial
from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.kill_test import N_PLUS_1, N, _killed_save, kill_test
from iobench.checkpoint.libraries import LIBRARIES
from iobench.checkpoint.state import StateSpec, make_state
from iobench.errors import IobenchError
from iobench.storage.checkpoints import CheckpointPlace
from iobench.storage.trial_targets import trial_target

pytestmark = pytest.mark.extras
SPEC = StateSpec(200_000)


def _saved(library: str, folder, seed: int, mode: str = "inplace") -> CheckpointPlace:
    place = CheckpointPlace(folder=str(folder))
    target = save_modes.save_place(trial_target(place), place, mode)
    os.makedirs(target.folder, exist_ok=True)
    LIBRARIES[library].save(make_state(SPEC.with_seed(seed)), target)
    if mode == "safe":
        save_modes.publish(trial_target(place), place, target)
    return target


def _classify(library: str, folder, mode: str = "inplace") -> str:
    job = CheckpointJob(
        library, "classify", SPEC.with_seed(1), CheckpointPlace(folder=str(folder)), mode, candidates={"N": 1, "N+1": 2}
    )
    return trial.classify(job)["outcome"]


def test_a_torn_file_a_silently_corrupted_one_and_a_whole_one_are_told_apart(tmp_path):
    """A torch.save cut short is refused by torch.load (a clean error); safetensors' data with bytes changed loads
    without complaint (it keeps no checksum): silent corruption; a whole N+1 is N+1 intact."""
    torn = _saved("torch", tmp_path / "torch", 2)
    path = os.path.join(torn.folder, "state.pt")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    assert _classify("torch", tmp_path / "torch") == "clean error"
    if LIBRARIES["safetensors"].installed:
        bad = _saved("safetensors", tmp_path / "st", 1)
        with open(os.path.join(bad.folder, "state.safetensors"), "r+b") as f:
            f.seek(-64, os.SEEK_END)
            f.write(bytes(64))
        assert _classify("safetensors", tmp_path / "st") == "silent corruption"
    _saved("dcp", tmp_path / "dcp", 2)
    assert _classify("dcp", tmp_path / "dcp") == "N+1 intact"


def test_a_safe_save_leaves_step_n_until_the_pointer_moves(tmp_path):
    """Step N published, step N+1 written beside it but not published (a kill before the swap): N comes back; a
    pointer that names something else is a clean error, not a path followed."""
    _saved("torch", tmp_path, 1, "safe")
    place = CheckpointPlace(folder=str(tmp_path))
    half = save_modes.save_place(trial_target(place), place, "safe")
    assert half.folder.endswith("step-2")
    os.makedirs(half.folder)
    with open(os.path.join(half.folder, "state.pt"), "wb") as f:
        f.write(b"torn")
    assert _classify("torch", tmp_path, "safe") == "N intact"
    (tmp_path / "latest").write_text("../../etc")
    assert _classify("torch", tmp_path, "safe") == "clean error"


@pytest.mark.long
@pytest.mark.parametrize(("library", "mode"), [("torch", "safe"), ("dcp", "safe"), ("torch", "keep:2")])
def test_killed_safe_saves_never_lose_a_step(tmp_path, library, mode):
    """Kills at random moments of a safe or keep save: every restore finds step N or step N+1 whole."""
    (tmp_path / "k").mkdir()
    job = CheckpointJob(library, "save", SPEC, CheckpointPlace(folder=str(tmp_path / "k")), mode, torch_threads=1)
    counts = kill_test(job, 4, {}, seed=3)
    assert counts["N intact"] + counts["N+1 intact"] == 4, counts


@pytest.mark.long
def test_a_save_that_needs_a_group_is_killed_as_its_trial_runs_it(tmp_path):
    """dcp-async-process saves in a process group even alone: the killed save starts as its trial does (as ranks).
    Started alone it failed at once, so even a kill long after the save's own time read "N intact", every time."""
    (tmp_path / "k").mkdir()
    place = CheckpointPlace(folder=str(tmp_path / "k"))
    job = CheckpointJob("dcp-async-process", "save", SPEC.with_seed(N), place, saves=1, torch_threads=1, check=False)
    took = processes.trial(job, {})["durable_seconds"]  # step N, and the save's own time
    _killed_save(job.with_(spec=SPEC.with_seed(N_PLUS_1), announce=True), {}, after_s=3 * took + 1.0)
    assert _classify("dcp-async-process", tmp_path / "k") == "N+1 intact"


def test_a_save_that_fails_by_itself_is_said_not_counted_as_a_kill(tmp_path):
    (tmp_path / "k").write_text("a file where the checkpoint's folder goes")
    job = CheckpointJob("torch", "save", SPEC, CheckpointPlace(folder=str(tmp_path / "k")), saves=1, announce=True)
    with pytest.raises(IobenchError, match="torch's save ended before it began; nothing was killed"):
        _killed_save(job, {}, after_s=0.0)
