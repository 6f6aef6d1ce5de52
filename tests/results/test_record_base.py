"""A run record and a checkpoint record share one base (schema version, time, environment with the torch threads,
the machine's load around it), stored flat as a run record of schema 1 stored it; a checkpoint record of schema 1
(no version, `load_before` alone) reads as it was."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from iobench.results.checked import RecordError
from iobench.results.checkpoint_record import CheckpointKills, CheckpointTrial, checkpoint_record
from iobench.results.record import RunRecord
from iobench.results.record_base import RecordBase, base_field_names
from iobench.results.record_parts import Environment
from tests.conftest import ROOT

BASE = {"schema_version", "timestamp", "environment", "host", "waits"}


def _run_record() -> RunRecord:
    line = (ROOT / "tests" / "fixtures" / "records-schema2.jsonl").read_text().splitlines()[0]
    return RunRecord.from_json(json.loads(line))


def test_both_records_are_built_on_one_base_and_store_it_alike():
    trial = CheckpointTrial(
        library="torch",
        op="save",
        params=10**6,
        state_bytes=14 * 10**6,
        bytes_on_disk=1,
        seconds=1.0,
        environment=Environment(torch_threads=1, cpu_model="AMD EPYC"),
        timestamp="2026-11-26T00:00:00+00:00",
    )
    run = _run_record()
    assert isinstance(trial, RecordBase) and isinstance(run, RecordBase)
    assert {f.name for f in fields(RecordBase)} == BASE
    stored_run, stored_trial = run.to_json(), trial.to_json()
    for name in base_field_names():
        assert name in stored_run and name in stored_trial, name
    back = CheckpointTrial.from_json(json.loads(json.dumps(stored_trial)))
    assert back == trial and back.environment.torch_threads == 1
    assert RunRecord.from_json(json.loads(json.dumps(stored_run))).environment == run.environment


def test_a_checkpoint_record_of_schema_1_reads_as_it_was():
    old = {
        "kind": "checkpoint",
        "library": "dcp",
        "op": "restore",
        "cache": "cold",
        "params": 10**6,
        "state_bytes": 14 * 10**6,
        "bytes_on_disk": 14 * 10**6,
        "seconds": 0.5,
        "load_before": 1.5,
        "timestamp": "2026-10-01T00:00:00+00:00",
    }
    record = checkpoint_record(old)
    assert record.schema_version == 1 and record.host.load_before == 1.5 and record.save_mode == "inplace"
    kills = checkpoint_record(
        {
            "kind": "checkpoint-kill",
            "library": "torch",
            "params": 10**6,
            "kills": 2,
            "counts": {"N intact": 1, "clean error": 1},
        }
    )
    assert isinstance(kills, CheckpointKills) and kills.lost == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schema_version", 99),
        ("save_mode", "yolo"),
        ("target", "moon"),
        ("torch_threads", "many"),
        ("other_cpu_before", -1),
    ],
)
def test_a_record_with_a_wrong_base_or_mode_is_refused(field, value):
    good = {
        "kind": "checkpoint",
        "library": "dcp",
        "op": "save",
        "params": 10**6,
        "state_bytes": 1,
        "bytes_on_disk": 1,
        "seconds": 0.5,
    }
    checkpoint_record(good)
    with pytest.raises(RecordError):
        checkpoint_record({**good, field: value})
