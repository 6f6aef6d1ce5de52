"""Every command iobench suggests runs as printed: `run --dataset-factory` ended with "`iobench tune --format
factory` searches its settings", which ended in `KeyError: 'factory'` and a traceback. Each answer path's output is
searched for `iobench ...` in backticks and each command found is run from where the user was (tune with a small
--budget-minutes appended, so that the test ends in seconds: the rest as printed)."""

from __future__ import annotations

import re
import shlex
import textwrap

import pytest

from tests.conftest import invoke

SUGGESTED = re.compile(r"`(iobench [^`]+)`")
PIPELINE = """
import torch
from torch.utils.data import Dataset

class Rows(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.full((4,), float(i)), i % 3

def make():
    return Rows()

def step(features, labels):
    pass
"""


@pytest.fixture
def place(tmp_path, monkeypatch, quiet_machine):
    """The user's folder, on a machine the runs take as quiet: beside other programs an answer names no configuration
    and suggests nothing (tests/report/test_answer.py), and the commands suggested are what this test runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suggest_pipeline.py").write_text(textwrap.dedent(PIPELINE))
    invoke("prepare", "--size", 512, "--shape", 4, "--formats", "npy,memmap", "--data-dir", tmp_path / "mine", "-q")
    invoke("prepare", "--size", 600, "--shape", 4, "--formats", "npy", "--data-dir", tmp_path / "mine", "-q")
    return tmp_path


ANSWER_PATHS = {
    "one configuration": [
        "run",
        "--data-dir",
        "mine",
        "--dataset",
        "n512_4_float32_c1000_s0",
        "--format",
        "npy",
        "--loader",
        "dataloader",
    ],
    "several configurations": [
        "run",
        "--data-dir",
        "mine",
        "--dataset",
        "n512_4_float32_c1000_s0",
        "--format",
        "npy,memmap",
        "--step",
        "suggest_pipeline:step",
    ],
    "by size": ["run", "--data-dir", "mine", "--size", "600", "--format", "npy", "--no-shuffle"],
    "a user's pipeline": ["run", "--dataset-factory", "suggest_pipeline:make", "--step", "suggest_pipeline:step"],
}


@pytest.mark.long
@pytest.mark.parametrize("path", list(ANSWER_PATHS))
def test_every_command_an_answer_suggests_runs_as_printed(place, cli, path):
    r = cli(*ANSWER_PATHS[path], "--runs", 2, "--results", place / "r.jsonl")
    assert r.code == 0, r.err
    suggested = SUGGESTED.findall(r.out + r.err)
    assert suggested, r.out
    for command in suggested:
        args = shlex.split(command)[1:]
        if args[0] == "tune":
            args += ["--budget-minutes", "0.1", "--results", str(place / "tune.jsonl"), "-q"]
        done = cli(*args)
        assert done.code == 0 and "Traceback" not in done.err, (command, done.err[-2000:])
