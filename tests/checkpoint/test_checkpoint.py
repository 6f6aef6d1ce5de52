"""`iobench checkpoint`: every library's round trip is exact (bf16 weights, fp32 moments, a non-contiguous tensor, the
step and RNG state), a size that does not fit is one line, a cold restore reads the checkpoint's bytes from the disk,
the kill test classifies planted torn and corrupted files, and the command leaves nothing behind."""

from __future__ import annotations

import json
import os

import pytest
import torch

from iobench.checkpoint import trial
from iobench.checkpoint.bench import CheckpointJob, check_fits, run_checkpoints
from iobench.checkpoint.libraries import LIBRARIES
from iobench.checkpoint.state import BYTES_PER_PARAM, StateSpec, differences, flat_tensors, make_state
from iobench.errors import IobenchError
from tests.conftest import assert_one_line_error

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

SPEC = StateSpec(1_000_000)  # a layer of hidden size 256 and a part of the next: 14 MB
NEEDS = "is not installed (pip install 'iobench[checkpoint]')"
INSTALLED = [pytest.param(n, marks=pytest.mark.skipif(not lib.installed, reason=f"{lib.needs} {NEEDS}"))
             for n, lib in LIBRARIES.items() if not lib.ceiling]  # fmt: skip


def test_the_state_is_fourteen_bytes_a_parameter_in_bf16_and_fp32():
    state = make_state(SPEC)
    tensors = flat_tensors(state)
    assert sum(t.numel() * t.element_size() for k, t in tensors.items() if k != "rng") == SPEC.state_bytes
    assert SPEC.state_bytes == BYTES_PER_PARAM * SPEC.params
    assert {t.dtype for k, t in tensors.items() if k.startswith("model.")} == {torch.bfloat16}
    assert {t.dtype for k, t in tensors.items() if k.startswith("optimizer.")} == {torch.float32}
    assert differences(make_state(SPEC), state) == [] and differences(make_state(StateSpec(1_000_000, seed=1)), state)


@pytest.mark.parametrize("name", INSTALLED)
def test_every_library_restores_the_state_bit_for_bit(tmp_path, name):
    state = make_state(SPEC)
    weights = state["model"]["layers.0.w4"]  # 3.5h x h: its transpose is a view with other strides
    state["model"]["layers.0.w4"] = weights.t().contiguous().t()
    assert not state["model"]["layers.0.w4"].is_contiguous()
    pending = LIBRARIES[name].save(state, tmp_path)
    if pending is not None:  # dcp's async_save: its future
        pending.result()
    restored = LIBRARIES[name].restore(tmp_path, SPEC, None)
    assert differences(restored, state) == []
    assert restored["step"] == state["step"] and torch.equal(restored["rng"], state["rng"])


def test_a_state_that_does_not_fit_is_refused_in_one_line():
    with pytest.raises(IobenchError, match=r"needs about .* GiB of memory for torch and 1.0 GiB is available"):
        check_fits(StateSpec(10**9), [LIBRARIES["torch"], LIBRARIES["raw"]], free=2**30)
    check_fits(StateSpec(10**6), [LIBRARIES["torch"]], free=2**30)  # 14 MB fits


def test_the_command_refuses_a_size_that_does_not_fit(cli, tmp_path):
    r = cli("checkpoint", "--params", "1e12", "--dir", tmp_path / "c", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "of memory for")
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()


def test_a_cold_restore_reads_the_checkpoints_bytes_from_the_disk(tmp_path):
    """Each record's restore read what its process had read from storage: cold, the checkpoint's bytes (within 2%);
    warm, nearly nothing. Everything iobench wrote under --dir is gone afterwards."""
    spec = StateSpec(2_000_000)  # 28 MB
    job = CheckpointJob(spec, ("torch", "dcp"), tmp_path / "ck", ("warm", "cold"), 1, tmp_path / "r.jsonl")
    records = run_checkpoints(job, lambda line: None)
    for r in (r for r in records if r.op == "restore"):
        if r.read_bytes is None:
            pytest.skip("no /proc/self/io here")
        if r.cache == "cold":
            assert r.resident_before < 0.05
            assert 0.98 * r.bytes_on_disk <= r.read_bytes <= 1.02 * r.bytes_on_disk, r
        else:
            assert r.read_bytes < 0.05 * r.bytes_on_disk, r
        assert r.exact is True and r.peak_rss_bytes > spec.state_bytes
    assert [json.loads(line)["op"] for line in (tmp_path / "r.jsonl").read_text().splitlines()].count("save") == 2
    assert not (tmp_path / "ck").exists(), "the folder made for the checkpoints is removed with them"


def test_the_kill_test_tells_a_torn_file_from_a_silently_corrupted_one(tmp_path):
    """A torch.save cut short is refused by torch.load (a clean error); safetensors' data with bytes changed loads
    without complaint (it keeps no checksum): silent corruption; a whole N+1 is N+1 intact."""
    spec = StateSpec(200_000)
    candidates = {"N": 1, "N+1": 2}
    torn = tmp_path / "torch"
    torn.mkdir()
    LIBRARIES["torch"].save(make_state(StateSpec(200_000, seed=2)), torn)
    with open(torn / "state.pt", "r+b") as f:
        f.truncate(os.path.getsize(torn / "state.pt") // 2)
    assert trial.classify("torch", spec, torn, candidates)["outcome"] == "clean error"
    if LIBRARIES["safetensors"].installed:
        bad = tmp_path / "safetensors"
        bad.mkdir()
        LIBRARIES["safetensors"].save(make_state(StateSpec(200_000, seed=1)), bad)
        with open(bad / "state.safetensors", "r+b") as f:
            f.seek(-64, os.SEEK_END)
            f.write(bytes(64))
        assert trial.classify("safetensors", spec, bad, candidates)["outcome"] == "silent corruption"
    whole = tmp_path / "whole"
    whole.mkdir()
    LIBRARIES["dcp"].save(make_state(StateSpec(200_000, seed=2)), whole)
    assert trial.classify("dcp", spec, whole, candidates)["outcome"] == "N+1 intact"


def test_the_command_prints_a_table_and_an_answer(cli, tmp_path):
    r = cli("checkpoint", "--params", "2e5", "--trials", "1", "--libraries", "torch,raw", "--dir", tmp_path / "c",
            "--results", tmp_path / "r.jsonl", "--kill-test", "2", "--kill-params", "1e5")  # fmt: skip
    assert r.code == 0, r.err
    assert "answer: save with torch" in r.out and "raw (reference)" in r.out and "killed 2 times" in r.out
    assert not (tmp_path / "c").exists(), "the folder made for the checkpoints is removed with them"


def test_an_asynchronous_save_is_timed_until_it_returns_until_done_and_until_durable(tmp_path):
    """dcp's async_save returns before its writes are done: the trial records the three moments, in that order."""
    folder = tmp_path / "async"
    folder.mkdir()
    saved = trial.save("dcp-async", SPEC, folder)
    assert 0 <= saved["seconds"] <= saved["done_seconds"] <= saved["durable_seconds"]
    assert differences(LIBRARIES["dcp-async"].restore(folder, SPEC, None), make_state(SPEC)) == []


def test_report_and_compare_read_the_checkpoint_records(cli, tmp_path):
    """The records of `iobench checkpoint` (trials and kill counts) make a report with the table, the kill counts and
    the answer, and `compare` of two such files matches each measurement; a torn line is skipped and named."""
    results = tmp_path / "r.jsonl"
    r = cli("checkpoint", "--params", "2e5", "--trials", "2", "--libraries", "torch,dcp-async,raw", "--dir",
            tmp_path / "c", "--results", results, "--kill-test", "1", "--kill-params", "1e5")  # fmt: skip
    assert r.code == 0, r.err
    kinds = [json.loads(line)["kind"] for line in results.read_text().splitlines()]
    assert kinds.count("checkpoint-kill") == 2 and kinds.count("checkpoint") == 2 * 3 * 3
    with open(results, "a") as f:
        f.write('{"kind": "checkpoint", "library": "torch", "params": 1\n')
    r = cli("report", results, "--out", tmp_path / "report")
    assert r.code == 0, r.err
    assert "not a whole JSON record" in r.err
    text = (tmp_path / "report" / "report.md").read_text()
    assert "answer: save with" in text and "| dcp-async |" in text and "raw (reference)" in text
    assert "What survives a kill" in text and "| torch | 1 |" in text
    assert (tmp_path / "report" / "results.csv").read_text().count("\n") == 1 + 2 * 3 * 3
    r = cli("compare", results, results)
    assert r.code == 0, r.err
    assert "torch" in r.out and "same (the rounds' ranges overlap)" in r.out and "9 matching" in r.out


def test_a_change_between_two_checkpoint_files_is_told_from_noise():
    from iobench.checkpoint.records import Change

    key = ("torch", 1, "llama", "restore", "cold", 1)
    assert Change(key, [1.0, 1.1, 1.2], [1.15, 1.3]).verdict.startswith("same")
    assert Change(key, [2.0, 2.1, 2.2], [1.0, 1.0, 1.1]).verdict == "2.10x as fast"
    assert Change(key, [1.0, 1.0, 1.1], [2.0, 2.1]).verdict == "2.05x as slow"


def _own_weights() -> dict:
    g = torch.Generator().manual_seed(5)
    return {"embed.weight": torch.randn(300, 64, generator=g).half(), "layers.0.attn.weight": torch.randn(64, 64),
            "layers.0.norm.bias": torch.randn(64, generator=g).bfloat16(), "step": torch.tensor(3)}  # fmt: skip


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
    job = CheckpointJob(spec, ("torch", "dcp"), tmp_path / "ck", ("warm",), 1, tmp_path / "r.jsonl")
    records = run_checkpoints(job, lambda line: None)
    assert [r.exact for r in records if r.op == "restore"] == [True, True]
    assert {r.source for r in records} == {own.name}


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
    from iobench.checkpoint.libraries import make_state_shapes

    target = make_state_shapes(SPEC)
    before = target["model"]["layers.0.w0"]
    restored = trial._copied_into(target, make_state(SPEC))
    assert restored["model"]["layers.0.w0"] is before  # the model's own tensor, filled in place
    assert differences(restored, make_state(SPEC)) == []


def test_a_device_that_is_not_here_is_refused_in_one_line(cli, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    r = cli("checkpoint", "--params", "2e5", "--device", "cuda", "--dir", tmp_path / "c", "--results",
            tmp_path / "r.jsonl")  # fmt: skip
    assert_one_line_error(r, "no CUDA device here")


def test_dcp_under_several_ranks_saves_and_restores_together(tmp_path):
    """--nproc 2: two ranks (gloo, the store on loopback) each hold the state and save it with DCP together; each
    restores it whole (the page cache shares what one rank read with the other); the record keeps the slowest rank's
    seconds and both ranks' reads."""
    job = CheckpointJob(SPEC, ("dcp", "torch"), tmp_path / "ck", ("cold",), 1, tmp_path / "r.jsonl", nproc=2)
    records = run_checkpoints(job, lambda line: None)
    dcp = [r for r in records if r.library == "dcp"]
    assert {r.ranks for r in dcp} == {2} and all(r.nproc == 2 for r in records)
    assert next(r for r in records if r.library == "torch").ranks == 1  # one process
    restore = next(r for r in dcp if r.op == "restore")
    assert restore.exact is True
    if restore.read_bytes is not None:  # cold: the ranks' reads together fetched the checkpoint from the disk
        assert 0.98 * restore.bytes_on_disk <= restore.read_bytes <= 2.02 * restore.bytes_on_disk


def test_a_hostile_results_file_is_told_from_checkpoint_records(tmp_path):
    """A line nested 200,000 deep (RecursionError in json) or torn is skipped while telling what a file holds."""
    from iobench.checkpoint.records import holds_checkpoints, load_checkpoints

    path = tmp_path / "r.jsonl"
    path.write_text("[" * 200_000 + "]" * 200_000 + "\n{torn\n" + json.dumps({"kind": "checkpoint-kill", "library": "x",
                    "params": 1, "kills": 1, "counts": {"N intact": 1}}) + "\n")  # fmt: skip
    assert holds_checkpoints(path)
    loaded = load_checkpoints(path)
    assert len(loaded.kills) == 1 and len(loaded.skipped) == 2
    assert not holds_checkpoints(tmp_path / "missing.jsonl")
