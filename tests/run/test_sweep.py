"""A sweep's configurations of several runs each are measured round by round (A, B, A, B ...), each round in a fresh
order, as `iobench run` takes its own: their records share a turn session and hold each one's place in every round,
so the judgement pairs them round by round (`iobench.judge.paired`)."""

from __future__ import annotations

import pytest

from iobench.judge.paired import in_turn
from iobench.results.store import load_records
from tests.conftest import invoke

pytestmark = pytest.mark.e2e


def test_a_sweeps_configurations_are_taken_in_turn_and_pair(tmp_path, cli):
    invoke("prepare", "--size", "300", "--format", "npy", "--data-dir", tmp_path / "data", "-q")
    grid = "--format npy --loader dataloader --batch-size 32,64 --runs 3 --epochs 1 --device cpu -q".split()
    r = cli("sweep", *grid, "--data-dir", tmp_path / "data", "--results", tmp_path / "r.jsonl")
    assert r.code == 0, r.err
    a, b = load_records(tmp_path / "r.jsonl").records
    assert in_turn(a, b), (a.waits, b.waits)
    assert len(a.waits.turn_positions) == len(b.waits.turn_positions) == 3
    assert all({pa, pb} == {0, 1} for pa, pb in zip(a.waits.turn_positions, b.waits.turn_positions, strict=True))


def test_one_run_each_is_measured_one_configuration_after_the_other():
    from types import SimpleNamespace

    from iobench.run.sweep import in_turn as sweep_in_turn

    def of(runs: int):
        return SimpleNamespace(config=SimpleNamespace(runs=runs))

    assert sweep_in_turn([of(3), of(2)]) and not sweep_in_turn([of(1), of(3)]) and not sweep_in_turn([of(3)])
