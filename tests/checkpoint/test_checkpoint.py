"""`iobench checkpoint`: every library's round trip is exact (bf16 weights, fp32 moments, a non-contiguous tensor, the
step and RNG state), a size that does not fit is one line, a cold restore reads the checkpoint's bytes from the disk,
every trial runs at the same torch threads and records them, and the command leaves nothing behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch

from iobench.checkpoint import save_modes, trial
from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.libraries import LIBRARIES, libraries_help
from iobench.checkpoint.request import CheckpointRequest, check_fits
from iobench.checkpoint.state import BYTES_PER_PARAM, StateSpec, differences, flat_tensors, make_state
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.sessions.checkpoint import checkpoint_session
from iobench.storage.checkpoints import CheckpointPlace
from iobench.storage.trial_targets import trial_target
from tests.conftest import assert_one_line_error
from tests.process_tree import Watched, off_loopback

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

SPEC = StateSpec(1_000_000)  # a layer of hidden size 256 and a part of the next: 14 MB
NEEDS = "is not installed (pip install 'iobench[checkpoint]')"
HERE = [
    pytest.param(n, marks=pytest.mark.skipif(not lib.installed, reason=f"{lib.needs} {NEEDS}"))
    for n, lib in LIBRARIES.items()
    if not lib.ceiling and not lib.needs_cuda and not lib.group
]


def session(tmp_path, **asked) -> object:
    base = {
        "specs": (StateSpec(200_000),),
        "libraries": ("torch",),
        "directory": tmp_path / "ck",
        "rounds": 1,
        "results": tmp_path / "r.jsonl",
        "device": "cpu",
    }
    request = CheckpointRequest(**{**base, **asked})
    return checkpoint_session(request, Events())


def test_the_state_is_fourteen_bytes_a_parameter_in_bf16_and_fp32():
    state = make_state(SPEC)
    tensors = flat_tensors(state)
    assert sum(t.numel() * t.element_size() for k, t in tensors.items() if k != "rng") == SPEC.state_bytes
    assert SPEC.state_bytes == BYTES_PER_PARAM * SPEC.params
    assert {t.dtype for k, t in tensors.items() if k.startswith("model.")} == {torch.bfloat16}
    assert {t.dtype for k, t in tensors.items() if k.startswith("optimizer.")} == {torch.float32}
    assert differences(make_state(SPEC), state) == [] and differences(make_state(StateSpec(1_000_000, seed=1)), state)


def test_the_state_is_made_without_freeing_a_temporary_tensor():
    """A freed temporary leaves a hole in the heap by chance, and the restore into the state read 10% apart by it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as made:
        state = make_state(SPEC)
    freed = [-e.cpu_memory_usage for e in made.events() if e.name == "[memory]" and e.cpu_memory_usage < 0]
    assert state["optimizer"]["exp_avg"] and max(freed, default=0) <= 64  # scalars only, no tensor of the state's


@pytest.mark.parametrize("name", HERE)
def test_every_library_restores_the_state_bit_for_bit(tmp_path, name):
    """fastsafetensors included (its CPU path, nogds): it reads the file safetensors' save wrote."""
    state = make_state(SPEC)
    weights = state["model"]["layers.0.w4"]  # 3.5h x h: its transpose is a view with other strides
    state["model"]["layers.0.w4"] = weights.t().contiguous().t()
    assert not state["model"]["layers.0.w4"].is_contiguous()
    place = CheckpointPlace(folder=str(tmp_path))
    pending = LIBRARIES[name].save(state, place)
    if pending is not None:  # dcp's async_save: its future
        pending.result()
    restored = LIBRARIES[name].restore(place, SPEC, None)
    assert differences(restored, state) == []
    assert restored["step"] == state["step"] and torch.equal(restored["rng"], state["rng"])


def test_the_help_lists_the_registry():
    assert all(f"{name} (" in libraries_help() for name in LIBRARIES)


def test_a_state_that_does_not_fit_is_refused_in_one_line():
    with pytest.raises(IobenchError, match=r"needs about .* GB of memory for torch and 1.1 GB is available"):
        check_fits(StateSpec(10**9), [LIBRARIES["torch"], LIBRARIES["raw"]], free=2**30)
    check_fits(StateSpec(10**6), [LIBRARIES["torch"]], free=2**30)  # 14 MB fits


def test_the_command_refuses_a_size_that_does_not_fit(cli, tmp_path):
    r = cli("checkpoint", "--params", "2e5,1e12", "--dir", tmp_path / "c", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "of memory for")
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()


@pytest.mark.long
def test_a_cold_restore_reads_the_checkpoints_bytes_from_the_disk(tmp_path):
    """Each record's restore read what its process had read from storage: cold, the checkpoint's bytes (within 2%);
    warm, nearly nothing; every restore checked exact. Everything iobench wrote under --dir is gone afterwards."""
    done = session(tmp_path, specs=(StateSpec(2_000_000),), libraries=("torch", "dcp"), save_modes=("safe",))
    for r in (r for r in done.trials if r.op == "restore"):
        if r.read_bytes is None:
            pytest.skip("no /proc/self/io here")
        if r.cache == "cold":
            assert r.resident_before < 0.05
            assert 0.98 * r.bytes_on_disk <= r.read_bytes <= 1.02 * r.bytes_on_disk, r
        else:
            assert r.resident_before >= 0.95 and r.read_bytes < 0.05 * r.bytes_on_disk, r
        assert r.exact is True and r.peak_rss_bytes > r.state_bytes
    assert [json.loads(line)["op"] for line in (tmp_path / "r.jsonl").read_text().splitlines()].count("save") == 2
    assert not (tmp_path / "ck").exists(), "the folder made for the checkpoints is removed with them"


@pytest.mark.long
def test_a_save_is_timed_first_and_steady_and_every_trial_has_the_threads_asked(tmp_path):
    """The trial's first save (a job's first checkpoint) and the steady one after it are both recorded; the torch
    threads asked are the ones every trial had, and the record says them."""
    done = session(tmp_path, libraries=("torch", "dcp"), torch_threads=1, save_modes=("inplace", "safe"))
    saves = [r for r in done.trials if r.op == "save"]
    assert len(saves) == 4 and {r.save_mode for r in saves} == {"inplace", "safe"}
    assert all(r.first_durable_seconds > 0 and r.durable_seconds >= r.seconds > 0 for r in saves)
    assert {r.environment.torch_threads for r in done.trials} == {1}


@pytest.mark.long
def test_ranks_record_the_same_threads_as_one_process(tmp_path):
    """--nproc 2 --torch-threads 1: each rank has the one thread a single process has (torchrun would have set 1 for
    the ranks whatever one process had); DCP's two ranks save and restore together, the slowest rank's seconds kept."""
    one = session(tmp_path / "a", libraries=("dcp",), torch_threads=1, nproc=1, caches=("cold",))
    two = session(tmp_path / "b", libraries=("dcp", "torch"), torch_threads=1, nproc=2, caches=("cold",))
    assert {r.environment.torch_threads for r in one.trials + two.trials} == {1}
    dcp = [r for r in two.trials if r.library == "dcp"]
    assert {r.ranks for r in dcp} == {2} and next(r for r in two.trials if r.library == "torch").ranks == 1
    assert all(r.exact for r in dcp if r.op == "restore")


def test_an_asynchronous_save_is_timed_until_it_returns_until_done_and_until_durable(tmp_path):
    """dcp's async_save returns before its writes are done: the trial records the three moments, in that order."""
    job = CheckpointJob("dcp-async", "save", SPEC, CheckpointPlace(folder=str(tmp_path)))
    saved = trial.save(job)
    assert 0 <= saved["seconds"] <= saved["done_seconds"] <= saved["durable_seconds"]
    place = save_modes.current(trial_target(job.place), job.place, job.save_mode)
    assert differences(LIBRARIES["dcp-async"].restore(place, SPEC, None), make_state(SPEC)) == []


def test_every_clock_of_a_trial_runs_with_the_harness_out_of_the_collector(tmp_path, monkeypatch):
    """Each save and restore runs with what existed before its clock frozen out of Python's collector (whether a full
    collection of the trial's heap fell inside a steady torch.save decided a 0.07 s gap against torch's own loop),
    and only while it runs."""
    import gc

    seen, torch_lib = [], LIBRARIES["torch"]

    class Watched:  # torch's calls, saying whether the collector had the harness frozen out when each ran
        modules, ceiling, before_restore, onto_device = (), False, None, None

        def save(self, state, place):
            seen.append(("save", gc.get_freeze_count() > 0))
            torch_lib.save(state, place)

        def restore(self, place, spec, prepared):
            seen.append(("restore", gc.get_freeze_count() > 0))
            return torch_lib.restore(place, spec, prepared)

    monkeypatch.setattr(trial, "loaded", lambda name: Watched())
    job = CheckpointJob("torch", "save", SPEC, CheckpointPlace(folder=str(tmp_path)))
    trial.save(job)
    assert trial.restore(job.with_(op="restore"))["exact"] is True
    assert seen == [("save", True), ("save", True), ("restore", True)] and gc.get_freeze_count() == 0


@pytest.mark.long
def test_the_command_prints_tables_against_size_and_an_answer(cli, tmp_path, quiet_machine):
    r = cli(
        "checkpoint",
        "--params",
        "2e5,3e5",
        "--rounds",
        "1",
        "--libraries",
        "torch,raw",
        "--dir",
        tmp_path / "c",
        "--results",
        tmp_path / "r.jsonl",
        "--kill-test",
        "2",
        "--kill-params",
        "1e5",
        "--device",
        "cpu",
        "--save-mode",
        "safe",
    )
    assert r.code == 0, r.err
    assert "answer: save with torch safe" in r.out and "raw (reference)" in r.out and "killed 2 times" in r.out
    assert "against size" in r.out and "2 of 2 kills left step N or N+1 intact" in r.out
    assert "about" in r.err and "left" in r.err  # the estimate and the time left
    assert not (tmp_path / "c").exists(), "the folder made for the checkpoints is removed with them"


def _own_weights() -> dict:
    g = torch.Generator().manual_seed(5)
    return {
        "embed.weight": torch.randn(300, 64, generator=g).half(),
        "layers.0.attn.weight": torch.randn(64, 64),
        "layers.0.norm.bias": torch.randn(64, generator=g).bfloat16(),
        "step": torch.tensor(3),
    }


@pytest.mark.long
@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_a_state_around_the_users_own_weights_round_trips(tmp_path, suffix):
    """--from: the file's floating-point tensors in their own dtypes (an int counter left out), fp32 optimizer groups
    beside them; each library restores that state bit for bit, and a trial's process rebuilds it from the spec."""
    own = tmp_path / f"model{suffix}"
    if suffix == ".pt":
        torch.save({"model": _own_weights(), "epoch": 4}, own)
    elif LIBRARIES["safetensors"].installed:
        from safetensors.torch import save_file

        save_file(_own_weights(), str(own))
    else:
        pytest.skip(f"safetensors {NEEDS}")
    spec = StateSpec.of_file(own)
    assert spec.layout == "from" and spec.params == 300 * 64 + 64 * 64 + 64
    assert spec.state_bytes == 300 * 64 * 14 + 64 * 64 * 16 + 64 * 14
    state = make_state(spec)
    assert state["model"]["embed.weight"].dtype == torch.float16 and "step" not in state["model"]
    assert torch.equal(state["model"]["layers.0.norm.bias"], _own_weights()["layers.0.norm.bias"])
    done = session(tmp_path, specs=(spec,), libraries=("torch", "dcp"), caches=("warm",), save_modes=("inplace",))
    assert [r.exact for r in done.trials if r.op == "restore"] == [True, True]
    assert {r.source for r in done.trials} == {own.name}
    assert spec.described == f"from {own.name}"  # the console's and the report's heading name the file (issue 80)


def test_a_file_that_is_not_plain_weights_is_refused_in_one_line(cli, tmp_path):
    """A .pt that needs code to load (an object of another class) is refused by torch.load(weights_only=True), and a
    file of another kind by its name, each in one line, before anything is written."""
    import argparse

    bad = tmp_path / "model.pt"  # the training arguments pickled beside the weights, as many scripts save them
    torch.save({"model": {"w": torch.zeros(4)}, "args": argparse.Namespace(lr=0.1)}, bad)
    r = cli("checkpoint", "--from", bad, "--dir", tmp_path / "c", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "weights_only=True")
    other = tmp_path / "model.txt"
    other.write_text("w")
    r = cli("checkpoint", "--from", other, "--dir", tmp_path / "c", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "a .safetensors file or a torch state dict")
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()


def test_a_restore_onto_a_device_copies_into_the_state_already_there():
    """--device: the restored tensors are copied into a state of the right shapes and dtypes made before the clock
    (here on the host: the copy is the same call on a GPU), which then holds the saved state bit for bit."""
    from iobench.checkpoint.state import make_state_shapes

    target = make_state_shapes(SPEC)
    before = target["model"]["layers.0.w0"]
    restored = trial._copied_into(target, make_state(SPEC))
    assert restored["model"]["layers.0.w0"] is before  # the model's own tensor, filled in place
    assert differences(restored, make_state(SPEC)) == []


def test_a_device_that_is_not_here_is_refused_in_one_line(cli, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    r = cli(
        "checkpoint", "--params", "2e5", "--device", "cuda", "--dir", tmp_path / "c", "--results", tmp_path / "r.jsonl"
    )
    assert_one_line_error(r, "no CUDA GPU is available")


def test_what_needs_cuda_or_a_local_folder_is_skipped_saying_why(tmp_path):
    """Pinned staging and GDS without a CUDA device, and a library with no way to object storage there, are each
    one line; what remains runs."""
    from iobench.checkpoint.request import usable

    asked = CheckpointRequest(specs=(SPEC,), libraries=("dcp-async-pinned", "fastsafetensors-gds", "torch"))
    libraries, skipped = usable(asked, "cpu")
    assert [lib.name for lib in libraries] == ["torch"]
    assert any("pinned staging needs a CUDA device" in s for s in skipped)
    remote = CheckpointRequest(specs=(SPEC,), libraries=("tensordict", "torch"), endpoint_url="http://127.0.0.1:1/b")
    libraries, skipped = usable(remote, "cpu")
    assert "torch" in [lib.name for lib in libraries] and any("local folder only" in s for s in skipped)


@pytest.mark.long
@pytest.mark.parametrize("stop", ["end", signal.SIGKILL])
def test_dcps_process_checkpointer_listens_on_loopback_and_dies_with_iobench(tmp_path, stop):
    """dcp-async-process: DCP's background process joins the trial's group through the store iobench hosts on
    127.0.0.1 (no store of its own on every interface), and nothing of it outlives iobench, ended or killed."""
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "checkpoint",
        "--params",
        "2e5",
        "--rounds",
        "2",
        "--libraries",
        "dcp-async-process",
        "--save-mode",
        "inplace",
        "--cache",
        "cold",
        "--device",
        "cpu",
        "--dir",
        str(tmp_path / "c"),
        "--results",
        str(tmp_path / "r.jsonl"),
        "-q",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = Watched(proc)
    watched.until(lambda w: len(w.seen) >= 3, timeout_s=180)  # the trial, its rank and DCP's process
    if stop == "end":
        while proc.poll() is None:
            watched.sample()
            time.sleep(0.02)
        assert proc.returncode == 0, proc.stderr.read()
    else:
        proc.send_signal(stop)
    proc.communicate(timeout=60)
    assert not off_loopback(watched.listened), watched.listened
    assert not watched.survivors(), watched.survivors()
