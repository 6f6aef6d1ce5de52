"""One registry of results-file kinds (`iobench.report.kinds`): each file is read as the kind its first record names,
and the command line asks the registry, never branching on a record's kind itself."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from iobench.report.kinds import KINDS, kind_of
from iobench.results.store import append_record
from tests.conftest import record_of
from tests.results.test_feed_record import planted

ROOT = Path(__file__).resolve().parents[2]


def test_each_file_is_read_as_its_first_records_kind(tmp_path):
    append_record(tmp_path / "runs.jsonl", record_of())
    (tmp_path / "feed.jsonl").write_text(json.dumps(planted({1: (0.9, 0.9)}).to_json()) + "\n")
    (tmp_path / "ck.jsonl").write_text(json.dumps({"kind": "checkpoint"}) + "\n")
    (tmp_path / "wl.jsonl").write_text(json.dumps({"kind": "checkpoint_workload"}) + "\n")
    names = [kind_of(tmp_path / f).name for f in ("runs.jsonl", "feed.jsonl", "ck.jsonl", "wl.jsonl")]
    assert names == ["run records", "feed answers", "checkpoint records", "checkpoint workload records"]
    assert [k.rerun for k in KINDS] == [False, False, False, True]


def test_the_command_line_names_no_record_kind():
    """`cli/reports.py` imports nothing of the records' kinds: what a kind does is the registry's."""
    tree = ast.parse((ROOT / "iobench" / "cli" / "reports.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.startswith("iobench.results.") and m != "iobench.results.store"}
    assert not {
        m for m in imported if m in ("iobench.report.checkpoints", "iobench.report.feed", "iobench.report.workload")
    }
