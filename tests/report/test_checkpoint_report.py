"""`report` and `compare` of checkpoint records: the report's tables (per size, against size, kill counts) and its
answer; `compare` of two checkpoint files and of two run files decide through one verdict function, and two files
measured at different loads are not comparable."""

from __future__ import annotations

import json

import pytest

from iobench.judge import change as judged
from iobench.results.checkpoint_record import KILL_OUTCOMES, CheckpointKills
from tests.results.test_checkpoint_summary import QUIET, _trials
from tests.results.test_record_base import _run_record


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))


def _kills() -> CheckpointKills:
    counts = dict.fromkeys(KILL_OUTCOMES, 0) | {"N intact": 3, "N+1 intact": 1}
    return CheckpointKills(library="torch", save_mode="safe", params=10**6, kills=4, counts=counts)


def test_the_report_holds_each_size_against_size_the_kills_and_the_answer(cli, tmp_path):
    from dataclasses import replace

    small = _trials("torch", "safe", [1.0, 1.1], [1.0, 1.1]) + _trials("dcp", "safe", [2.0, 2.1], [2.0, 2.1])
    large = [replace(r, params=4 * 10**6, state_bytes=56 * 10**6) for r in small]
    _write(tmp_path / "r.jsonl", [*small, *large, _kills()])
    r = cli("report", tmp_path / "r.jsonl", "--out", tmp_path / "out")
    assert r.code == 0, r.err
    text = (tmp_path / "out" / "report.md").read_text()
    assert text.count("answer: save with torch safe") == 2 and "4 of 4 kills left step N or N+1 intact" in text
    assert "## Against size" in text and "0.01 GiB durable" in text and "| torch | safe | 4 | 3 | 1 |" in text
    assert (tmp_path / "out" / "results.csv").read_text().count("\n") == 1 + len(small) * 2


def test_compare_of_checkpoints_and_of_runs_go_through_one_verdict(cli, tmp_path, monkeypatch):
    seen = []
    real = judged.change_of

    def spy(*args, **kwargs):
        seen.append(args[-1].rate)
        return real(*args, **kwargs)

    monkeypatch.setattr(judged, "change_of", spy)
    monkeypatch.setattr("iobench.report.checkpoints.change_of", spy)
    _write(tmp_path / "a.jsonl", _trials("torch", "safe", [1.0, 1.1, 1.0], [1.0, 1.1, 1.0]))
    _write(tmp_path / "b.jsonl", _trials("torch", "safe", [2.0, 2.1, 2.0], [1.0, 1.1, 1.0]))
    r = cli("compare", tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert r.code == 0, r.err
    assert "no decidable difference: their intervals overlap" in r.out and "2 matching" in r.out
    assert "-50.0%" in r.out and "slower" in r.out  # the save: 1.0 s against 2.0 s, beyond the disk drift
    _write(tmp_path / "runs.jsonl", [_run_record()])
    assert cli("compare", tmp_path / "runs.jsonl", tmp_path / "runs.jsonl").code == 0
    _write(tmp_path / "runs2.jsonl", [_run_record()])
    from dataclasses import replace

    changed = replace(_run_record(), timestamp="2026-11-26T00:00:00+00:00")
    _write(tmp_path / "runs2.jsonl", [changed])
    assert cli("compare", tmp_path / "runs.jsonl", tmp_path / "runs2.jsonl").code == 0
    assert "GB/s" in seen and "samples/s" in seen


def test_checkpoint_files_measured_at_different_loads_are_not_comparable(cli, tmp_path):
    from iobench.results.record_base import HostLoad

    busy = HostLoad(load_before=4.0, other_cpu_before=1.6, load_after=4.0, other_cpu_after=1.6)
    _write(tmp_path / "a.jsonl", _trials("safetensors", "safe", [1.0, 1.1, 1.0], [1.0, 1.1, 1.0], QUIET))
    _write(tmp_path / "b.jsonl", _trials("safetensors", "safe", [0.2, 0.2, 0.3], [0.2, 0.2, 0.2], busy))
    r = cli("compare", tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert r.code == 0, r.err
    assert r.out.count("not comparable: other programs used 0.0 cores beside A, 1.6 beside B") == 2


@pytest.mark.parametrize("rate", ["GB/s"])
def test_the_verdict_words_name_rounds_for_checkpoints(rate):
    from iobench.judge.change import ROUND_UNITS

    said = judged.change_of([1.0], [2.0], None, None, ROUND_UNITS)
    assert ROUND_UNITS.rate == rate and "one round has no interval (use --rounds 3 or more)" in said.text


def test_the_heading_of_a_state_from_the_users_file_names_the_file(cli, tmp_path):
    """`## 0.93 GB state (57,987,072 parameters, from)`: the file's name was missing (issue 80)."""
    from dataclasses import replace

    own = [replace(r, layout="from", source="model.pt") for r in _trials("torch", "safe", [1.0, 1.1], [1.0, 1.1])]
    _write(tmp_path / "r.jsonl", own)
    assert cli("report", tmp_path / "r.jsonl", "--out", tmp_path / "out").code == 0
    assert "parameters, from model.pt)" in (tmp_path / "out" / "report.md").read_text()
