"""`feed`'s command line: every count and step refused in one line where it is parsed, before a dataset is made or a
rank started."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--what-if", "0"), "--what-if: 1 to 4 step times"),
        (("--what-if", "fast"), "--what-if: 1 to 4 step times"),
        (("--what-if", "10,20,30,40,50"), "--what-if: 1 to 4 step times"),
        (("--max-accelerators", "0"), "--max-accelerators"),
        (("--max-accelerators", "100000"), "--max-accelerators"),
        (("--epochs", "0"), "--epochs"),
        (("--workload", "custom", "--batch-size", "8"), "--workload custom needs --step-ms"),
        (("--workload", "resnet50", "--step-ms", "5"), "go with --workload custom"),
        (("--workload", "resnet50", "--accelerator", "b200"), "no published workload is that pair"),
        (("--cache", "lukewarm"), "--cache: warm or cold"),
        (("--loader", "dataloder"), "unknown loader 'dataloder', did you mean dataloader?"),
        (("--format", "nppy"), "unknown format 'nppy', did you mean npy?"),
        (("--workload", "resnet50", "--au", "0.1"), "--au go with --workload custom, not resnet50 (it has its own)"),
        (("--workload", "resnet"), "no published workload is that pair, did you mean resnet50?"),
        (("--size", "2e3x"), "--size: cannot parse size '2e3x'"),
        (("--size", "-5"), "--size must be positive"),
    ],
)
def test_a_bad_option_is_one_line_before_anything_is_made(cli, tmp_path, args, said):
    r = cli("feed", *args, "--data-dir", tmp_path / "data", "--results", tmp_path / "f.jsonl", "-q")
    assert r.code != 0 and said in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "data").exists() and not (tmp_path / "f.jsonl").exists()


def test_answers_and_runs_are_never_appended_to_a_file_of_another_kind(cli, tmp_path):
    """`report` and `compare` read a file by its first record's kind: feed's answers go to a file of their own, its
    runs to another."""
    from iobench.results.store import append_record
    from tests.conftest import record_of
    from tests.results.test_feed_record import planted

    append_record(tmp_path / "runs.jsonl", record_of())
    (tmp_path / "answers-runs.jsonl").write_text(json.dumps(planted({1: (0.9, 0.9)}).to_json()) + "\n")
    refusals = {
        "runs.jsonl": "holds run records; give a file of its own for feed records",
        "answers.jsonl": "holds feed records; give a file of its own for run records",  # its runs' file
    }
    for results, said in refusals.items():
        r = cli("feed", "--data-dir", tmp_path / "data", "--results", tmp_path / results, "-q")
        assert r.code != 0 and said in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "data").exists()


def test_the_accelerators_case_is_not_a_different_accelerator():
    from iobench.cli.feed import _workload

    assert _workload("ResNet50", "H100", None, None, None, None, None, None).accelerator == "h100"


def test_size_is_written_as_prepares(cli, tmp_path, monkeypatch):
    """feed's --size takes what prepare's takes (2e3, 20k): it refused `2e3` where `prepare --size` took `1e7`."""
    import iobench.sessions.feed as session

    asked = []

    def stop(request, events):
        asked.append(request.size)
        raise SystemExit(0)

    monkeypatch.setattr(session, "feed_session", stop)
    sizes = {"2e3": 2000, "20k": 20_000, "4096": 4096}
    for text in sizes:
        cli("feed", "--size", text, "--data-dir", tmp_path / "data", "--results", tmp_path / "f.jsonl", "-q")
    assert asked == list(sizes.values())


def test_check_rules_reads_stored_answers_and_measures_nothing(cli, tmp_path):
    """`feed --check-rules RESULTS`: each stored answer's MLPerf Storage rules, rule by rule; a file without feed
    answers is one line."""
    from tests.results.test_feed_record import planted

    results = tmp_path / "feed.jsonl"
    results.write_text(json.dumps(planted({1: (0.95, 0.94)}, workload="resnet50/h100").to_json()) + "\n")
    r = cli("feed", "--check-rules", results, "--data-dir", tmp_path / "data")
    assert r.code == 0, r.err
    assert "resnet50_h100.yaml @ac0424fa has batch 400, 224 ms" in r.out and "tfrecord through tensorflow" in r.out
    assert not (tmp_path / "data").exists()
    other = tmp_path / "runs.jsonl"
    other.write_text('{"kind": "run"}\n')
    bad = cli("feed", "--check-rules", other)
    assert bad.code != 0 and "no feed records" in bad.err and len(bad.err.strip().splitlines()) == 1, bad.err
