"""Every record ever committed still reads: the study's figures rest on them, and a schema change that
stopped one loading would lose a result nobody can measure again on that machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iobench.results.checked import RecordError
from iobench.results.feed_record import FEED, FeedRecord
from iobench.results.record import SCHEMA_VERSION, RunRecord
from iobench.results.store import first_kind, load_records, parsed_file
from iobench.results.workload_record import WORKLOAD, WorkloadRecord
from tests.conftest import FLAT_RECORD, ROOT

COMMITTED = sorted((ROOT / "docs" / "study").rglob("*.jsonl"))


def test_the_study_commits_records():
    assert len(COMMITTED) >= 30 and sum(len(p.read_text().splitlines()) for p in COMMITTED) >= 1600


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT / "docs" / "study")))
def test_every_committed_record_loads_and_writes_back_what_it_read(path: Path):
    if first_kind(path) == FEED:  # feed's answers (their runs are in a file of their own)
        records, skipped = parsed_file(path, FeedRecord.from_json, "a feed record")
    elif first_kind(path) == WORKLOAD:  # checkpoint --workload's
        records, skipped = parsed_file(path, WorkloadRecord.from_json, "a checkpoint workload record")
    else:
        loaded = load_records(path)
        records, skipped = loaded.records, loaded.skipped
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert skipped == [] and len(records) == len(lines)
    for line, record in zip(lines, records, strict=True):
        stored = json.loads(line)
        again = record.to_json()
        assert {k: again[k] for k in stored} == stored  # nothing read is lost or changed on the way back


def test_a_schema_3_record_names_its_packages_and_an_older_one_reads_with_none():
    record = RunRecord.from_json({**FLAT_RECORD, "schema_version": 3, "packages": {"zarr": "3.1.6", "torch": "2.13"}})
    assert record.environment.packages == {"zarr": "3.1.6", "torch": "2.13"}
    assert RunRecord.from_json({**FLAT_RECORD, "schema_version": 2}).environment.packages == {}
    with pytest.raises(RecordError, match="packages"):
        RunRecord.from_json({**FLAT_RECORD, "packages": {"zarr": 3}})
    with pytest.raises(RecordError, match="newer than this iobench reads"):
        RunRecord.from_json({**FLAT_RECORD, "schema_version": SCHEMA_VERSION + 1})
