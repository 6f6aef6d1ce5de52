"""The step each batch meets on the device: the stand-ins, and the user's own (`--step module:function`,
`iobench.measure(step=function)`), whose failure is one line naming it."""

from __future__ import annotations

import pytest
import torch

from iobench.errors import IobenchError
from iobench.measuring.steps import StepFailed, make_step, parse_step


@pytest.fixture
def own_module(tmp_path, monkeypatch):
    (tmp_path / "mytrain.py").write_text(
        "calls = []\n"
        "def step(features, labels):\n"
        "    calls.append((tuple(features.shape), tuple(labels.shape)))\n"
        "def broken(features, labels):\n"
        "    raise ValueError('shape mismatch in my model')\n"
        "def quits_later(features, labels):\n"
        "    calls.append(0)\n"
        "    if len(calls) > 10:\n"
        "        import sys\n"
        "        sys.exit(0)\n"
    )
    monkeypatch.chdir(tmp_path)
    yield "mytrain"
    import sys

    sys.modules.pop("mytrain", None)


def test_a_module_function_is_a_step_called_with_the_batch(own_module):
    assert parse_step("mytrain:step") == "mytrain:step"
    step = make_step("mytrain:step", 4, 10, torch.device("cpu"), 0)
    step((torch.zeros(3, 4), torch.zeros(3, dtype=torch.int64)))
    import mytrain

    assert mytrain.calls == [((3, 4), (3,))]


def test_a_step_that_raises_is_one_line_naming_it(own_module):
    step = make_step("mytrain:broken", 4, 10, torch.device("cpu"), 0)
    with pytest.raises(StepFailed, match=r"^the step mytrain:broken raised at batch 1: ValueError: shape mismatch"):
        step((torch.zeros(3, 4), torch.zeros(3, dtype=torch.int64)))


@pytest.mark.parametrize(
    "text", ["sleep:x", "mytrain:1step", "a-b:step", "nope", "sleep:1e12", "sleep:5:1e12", "sleep:inf"]
)
def test_what_is_not_a_step_is_refused_before_any_work(text):
    with pytest.raises(IobenchError, match="unknown step"):
        parse_step(text)


def test_measure_takes_a_function_as_its_step():
    import iobench

    seen = []
    batches = [(torch.zeros(8, 4), torch.zeros(8, dtype=torch.int64))] * 5
    m = iobench.measure(batches, step=lambda f, y: seen.append(len(f)), epochs=2, warmup=1)
    assert len(seen) == 15 and m.step.endswith("<lambda>") and m.stats.accelerator_utilisation is not None


def test_run_times_the_users_step_and_says_when_it_raises(own_module, tmp_path, cli):
    from tests.conftest import invoke, stored_records

    invoke("prepare", "--size", 300, "--shape", 4, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    common = [
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--runs",
        1,
        "--batch-size",
        64,
        "--device",
        "cpu",
        "--results",
        tmp_path / "r.jsonl",
        "-q",
    ]
    r = cli(*common, "--step", "mytrain:step")
    assert r.code == 0, r.err
    (record,) = stored_records(tmp_path / "r.jsonl")
    assert record["step"] == "mytrain:step" and record["accelerator_utilisation"] is not None
    r = cli(*common, "--step", "mytrain:broken")
    assert r.code == 1 and r.err.strip() == (
        "iobench: error: the step mytrain:broken raised at batch 1: ValueError: shape mismatch in my model"
    )


def test_a_step_that_calls_sys_exit_is_a_failure_and_the_finished_records_are_kept(own_module, tmp_path, cli):
    """A step calling sys.exit(0) ended the run with rc 0, no message and no record: the configurations after it were
    silently unmeasured. The first configuration ends (10 batches: a warm-up and a timed epoch of 5), the second's
    first batch exits."""
    from tests.conftest import invoke, stored_records

    invoke("prepare", "--size", 300, "--shape", 4, "--formats", "npy,memmap", "--data-dir", tmp_path / "data", "-q")
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy,memmap",
        "--loader",
        "dataloader",
        "--runs",
        1,
        "--batch-size",
        64,
        "--device",
        "cpu",
        "--results",
        tmp_path / "r.jsonl",
        "-q",
        "--step",
        "mytrain:quits_later",
    )
    assert r.code == 1, r.err
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert lines[-1] == "iobench: error: the step mytrain:quits_later called sys.exit(0) at batch 1", r.err
    assert len(stored_records(tmp_path / "r.jsonl")) == 1
