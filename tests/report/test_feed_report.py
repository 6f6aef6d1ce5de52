"""`report` and `compare` of feed records: the report's counts and answer are the judgement's, decided again from
the stored values; `compare` prints the judgement's change of N; a damaged line is skipped and named."""

from __future__ import annotations

import json
from dataclasses import replace

from iobench.judge.feed import record_answer
from tests.results.test_feed_record import planted


def _write(path, records, extra: str = "") -> None:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records) + extra)


def test_the_report_holds_each_answer_decided_again_from_its_counts(cli, tmp_path):
    npy = planted({1: (0.95, 0.94), 2: (0.93, 0.92), 3: (0.85, 0.84)})
    files = replace(npy, format="files", points=planted({1: (0.6, 0.62)}).points)
    _write(tmp_path / "feed.jsonl", [npy, files], extra='{"kind": "feed", "points": 3}\n')
    r = cli("report", tmp_path / "feed.jsonl", "--out", tmp_path / "out")
    assert r.code == 0, r.err
    text = (tmp_path / "out" / "report.md").read_text()
    assert record_answer(npy).line.startswith("answer: 2 h100") and record_answer(npy).line in text
    assert record_answer(files).line.startswith("answer: 0.61 of one h100") and record_answer(files).line in text
    assert "| 3 | 0.845 | - | starved |" in text and "| 2 | 0.925 | - | fed |" in text  # no DLIO figures planted
    # the sample's size as read, said as such: feed says the workload's data alone (114,660 bytes and a label)
    assert f"Batch {npy.batch_size} of {npy.sample_bytes:,} bytes a sample as read (its data and label)" in text
    assert "feed.jsonl:3: not a feed record" in r.err  # the damaged line, named
    assert (tmp_path / "out" / "results.csv").read_text().count("\n") == 1 + 3 + 1


def test_compare_prints_the_judgements_change_of_n(cli, tmp_path):
    before = planted({1: (0.95, 0.95), 2: (0.94, 0.94), 4: (0.93, 0.92), 8: (0.6, 0.61), 6: (0.7, 0.71), 5: (0.8, 0.8)})
    after = planted({1: (0.95, 0.95), 2: (0.93, 0.94), 4: (0.61, 0.62), 3: (0.7, 0.72)})
    other = replace(after, loader="spdl")
    _write(tmp_path / "a.jsonl", [before])
    _write(tmp_path / "b.jsonl", [after, other])
    r = cli("compare", tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert r.code == 0, r.err
    assert "fewer accelerators: 4 -> 2" in r.out and "1 matching question(s); 0 only in A, 1 only in B" in r.out
    same = cli("compare", tmp_path / "b.jsonl", tmp_path / "b.jsonl")
    assert same.code == 0 and same.out.count("both answer 2") == 2
    _write(tmp_path / "c.jsonl", [replace(before, workload="unet3d_h100")])
    none = cli("compare", tmp_path / "a.jsonl", tmp_path / "c.jsonl")
    assert none.code == 2 and "no feed question in common (1 in A, 1 in B)" in none.err
