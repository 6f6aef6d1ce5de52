"""`compare --rerun A B` (`iobench.sessions.rerun`): the configurations two files recorded, measured again in turn
and judged by their pairs; a record's configuration comes back as the run it was (`plan.recorded.run_config_of`)."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from iobench.judge.change import NO_DIFFERENCE, SLOWER
from iobench.plan.recorded import run_config_of
from iobench.results.store import load_records
from tests.conftest import assert_one_line_error, invoke, stored_records


@pytest.fixture
def data(tmp_path):
    invoke("prepare", "--size", 300, "--shape", 4, "--formats", "npy,memmap", "--data-dir", tmp_path / "data", "-q")
    return tmp_path / "data"


def _run(cli, data, results, *more):
    r = cli("run", "--data-dir", data, "--runs", 2, "--batch-size", 64, "-q", "--results", results, *more)
    assert r.code == 0, r.err
    return results


def test_a_record_measures_again_as_it_was_recorded(data, cli, tmp_path):
    """Every field of the record's configuration comes back: measured again from `run_config_of`, the new record's
    configuration is the old one's, field for field, but for the rounds asked."""
    from iobench.events import Events
    from iobench.plan.place import RunPlace
    from iobench.sessions.run import RunRequest, run_session

    path = _run(
        cli,
        data,
        tmp_path / "a.jsonl",
        "--format",
        "npy",
        "--block-shuffle",
        16,
        "--step",
        "sleep:0.1",
        "--transform",
        "cpu:5",
        "--seed",
        3,
        "--torch-threads",
        1,
        "--epochs",
        2,
        "--max-batches",
        3,
    )
    record = load_records(path).records[0]
    config = run_config_of(record.config, runs=1)
    assert config.runs == 1 and config.step == "sleep:0.1" and config.transform == "cpu:5" and config.block_size == 16
    place = RunPlace(data, record.config.dataset, record.config.device, tmp_path / "again.jsonl")
    outcome = run_session(RunRequest((config,), place, estimate=False), Events())
    assert outcome is not None
    again = outcome.records[0].config
    assert replace(again, runs=record.config.runs) == record.config
    differing = [f.name for f in fields(again) if getattr(again, f.name) != getattr(record.config, f.name)]
    assert differing == ["runs"]


@pytest.mark.long
def test_rerun_measures_both_in_turn_and_judges_by_the_pairs(data, cli, tmp_path):
    a = _run(cli, data, tmp_path / "a.jsonl", "--format", "npy")
    b = _run(cli, data, tmp_path / "b.jsonl", "--format", "npy", "--step", "sleep:20")  # a planted slow step
    results = tmp_path / "again.jsonl"
    r = cli("compare", a, b, "--rerun", "--results", results)
    assert r.code == 0, r.err
    assert SLOWER in r.out and "paired over 6 rounds in turn" in r.out and "B: step=sleep:20" in r.out, r.out
    new = stored_records(results)
    assert len(new) == 2 and [x["runs"] for x in new] == [6, 6]
    assert new[0]["turn_session"] == new[1]["turn_session"] and len(new[0]["turn_positions"]) == 6
    same = cli("compare", a, a, "--rerun", "--results", results)  # one configuration against itself
    assert same.code == 0 and SLOWER not in same.out and "faster" not in same.out, same.out
    assert NO_DIFFERENCE in same.out or "not comparable" in same.out, same.out


def test_rerun_refusals_are_one_line(data, cli, tmp_path):
    a = _run(cli, data, tmp_path / "a.jsonl", "--format", "npy,memmap")
    b = _run(cli, data, tmp_path / "b.jsonl", "--format", "npy", "--batch-size", 32)
    assert_one_line_error(cli("compare", a, b, "--rerun", "--runs", 3), "--runs must be 6..100")
    assert_one_line_error(cli("compare", a, b, "--rerun"), "have none in common")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert_one_line_error(cli("compare", empty, b, "--rerun"), "holds no run record")
