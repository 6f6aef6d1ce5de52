"""`checkpoint --workload` end to end: the refusals in one line before anything is allocated (an unknown workload,
options it does not take, a count out of its bounds, a disk too small for the checkpoints), and, long, one of MLPerf's
workloads written and read by two ranks of its layout: the record's bytes are the layout's, its answer and rules are
printed, `report` and `compare` read it, and nothing is left under --dir."""

from __future__ import annotations

import json

import pytest

from iobench.checkpoint.llama3 import WORKLOADS, rank_files, scaled
from tests.conftest import assert_one_line_error

pytestmark = pytest.mark.e2e


def test_what_the_workload_does_not_take_is_refused_in_one_line(tmp_path, cli):
    where = ("--dir", tmp_path / "ck", "--results", tmp_path / "w.jsonl")
    assert_one_line_error(cli("checkpoint", "--workload", "llama3-9b", *where), "did you mean llama3-8b")
    assert_one_line_error(cli("checkpoint", "--workload", "llama3-8b", "--libraries", "torch", *where), "--libraries")
    assert_one_line_error(cli("checkpoint", "--workload", "llama3-8b", "--device", "cpu", *where), "drop --device")
    assert_one_line_error(cli("checkpoint", "--workload", "llama3-8b", "--nproc", "9", *where), "give 1 to 8")
    assert_one_line_error(cli("checkpoint", "--workload", "llama3-8b", "--scale", "0", *where), "--scale")
    assert_one_line_error(cli("checkpoint", "--scale", "0.5", *where), "--scale goes with --workload")
    assert not (tmp_path / "ck").exists() and not (tmp_path / "w.jsonl").exists()


def test_a_disk_too_small_for_the_checkpoints_is_refused_before_a_byte(tmp_path, cli, monkeypatch):
    import iobench.system.fsutil as fsutil

    monkeypatch.setattr(fsutil, "free_bytes", lambda path: 10**9)
    r = cli("checkpoint", "--workload", "llama3-70b", "--scale", "0.0125", "--dir", tmp_path / "ck")
    assert_one_line_error(r, "10 checkpoints of", "1.0 GB free", "--scale")
    assert not (tmp_path / "ck").exists()


def test_rank_0s_line_after_each_checkpoint_is_said_once_as_it_comes():
    """Each finished line once, a line still being written left for the next tick, the result line not a progress."""
    from iobench.sessions.checkpoint_workload import Progress

    said: list[str] = []

    class Say:
        def say(self, text: str) -> None:
            said.append(text)

    progress = Progress(2 * 10**9, Say())  # type: ignore[arg-type]
    first = '{"progress": "written", "k": 1, "of": 2, "seconds": 4.0}\n'
    progress.new_lines(first + '{"progress": "writ')
    progress.new_lines(first)
    assert said == ["  checkpoint 1 of 2 written in 4.00 s (0.50 GB/s, rank 0's clock)"]
    progress.new_lines(first + '{"progress": "read", "k": 1, "of": 2, "seconds": 1.0}\n{"write_s": [[1.0]]}\n')
    assert said[1:] == ["  checkpoint 1 of 2 read in 1.00 s (2.00 GB/s, rank 0's clock)"]


@pytest.mark.long
def test_two_ranks_write_and_read_their_shards_and_report_reads_the_record(tmp_path, cli):
    """llama3-70b with one of its 80 layers: 0.6 GB a rank (its optimizer share dominates), 2 checkpoints."""
    results = tmp_path / "w.jsonl"
    args = ("--workload", "llama3-70b", "--scale", "0.0125", "--nproc", "2", "--rounds", "2")
    r = cli("checkpoint", *args, "--dir", tmp_path / "ck", "--results", results, "-q")
    assert r.code == 0, r.err
    assert "answer: llama3-70b: ranks 0-1 of its 64, 1 of its 80 layers" in r.out
    assert "rules: not a CLOSED MLPerf Storage result" in r.out
    (stored,) = [json.loads(line) for line in results.read_text().splitlines()]
    kept = scaled(WORKLOADS["llama3-70b"], 0.0125)
    assert stored["rank_bytes"] == [sum(f.nbytes for f in rank_files(kept, k)) for k in (0, 1)]
    assert len(stored["write_s"]) == 2 and all(len(x) == 2 for x in stored["write_s"] + stored["read_s"])
    assert not (tmp_path / "ck").exists()  # its work folder removed, and --dir, which it made
    assert cli("report", results, "--out", tmp_path / "rep").code == 0
    assert "llama3-70b" in (tmp_path / "rep" / "report.md").read_text()
    assert "no decidable difference" in cli("compare", results, results).out
