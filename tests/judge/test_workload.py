"""`checkpoint --workload`'s judgement (`iobench.judge.workload`) from a planted record: a checkpoint's duration is the
slowest rank's, its throughput the slowest rank's, as MLPerf Storage reports them (2.2.3); the rules say what a
CLOSED run would need; two records compare by the judgement, another layout is not comparable; the record reads back
as it was stored, and a record out of its bounds is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.judge.change import NO_DIFFERENCE, NOT_COMPARABLE
from iobench.judge.workload import READ, WRITE, answer, phase_of, workload_change, workload_rules_line
from iobench.results.checked import RecordError
from iobench.results.workload_record import WorkloadRecord


def _record(**changes) -> WorkloadRecord:
    base = WorkloadRecord(
        workload="llama3-8b",
        layers=1,
        layers_whole=32,
        layout_ranks=8,
        whole_bytes=112_000_000_000,
        cold="fadvise",
        source="mlcommons/storage configs/dlio/workload/llama3_8b.yaml @147ed5f4, Table 2",
        write_s=[[2.0, 4.0, 2.2], [1.0, 1.0, 1.1]],
        read_s=[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]],
        rank_bytes=[2_000_000_000, 1_000_000_000],
    )
    return replace(base, **changes)


def test_a_checkpoints_duration_and_throughput_are_the_slowest_ranks():
    w = phase_of(_record(), WRITE)
    assert w.seconds == [2.0, 4.0, 2.2]  # rank 0's, the slower each time
    # each rank's bytes over its own seconds, the slower of the two: 2/2 and 1/1; 2/4 and 1/1; 2/2.2 and 1/1.1
    assert w.rank_gb_per_s == [1.0, 0.5, pytest.approx(0.909, abs=1e-3)]
    assert w.together_gb_per_s == [1.5, 0.75, pytest.approx(1.364, abs=1e-3)]
    r = phase_of(_record(), READ)
    assert r.seconds == [2.0, 2.0, 2.0] and r.rank_gb_per_s == [0.5, 0.5, 0.5]


def test_the_answer_says_the_layout_written_and_the_rules_what_a_closed_run_needs():
    said = answer(_record())
    assert said.startswith("answer: llama3-8b: ranks 0-1 of its 8, 1 of its 32 layers, 3.00 GB a checkpoint")
    assert "write 3 checkpoints, fsynced: 2.20 s a checkpoint" in said and "read 3 checkpoints, cold (fadvise" in said
    rules = workload_rules_line(_record())
    assert rules.startswith("rules: not a CLOSED MLPerf Storage result")
    for broken in ("model: 1 of 32 layers", "ranks: 2 of the layout's 8", "checkpoints: 3 written", "runs: one run"):
        assert broken in rules
    assert "fsync" not in rules and "cache" not in rules


def test_two_records_compare_by_the_judgement_and_another_layout_is_not_comparable():
    assert workload_change(_record(), _record(), WRITE).kind == NO_DIFFERENCE
    other = workload_change(_record(), _record(layers=2), WRITE)
    assert other.kind == NOT_COMPARABLE and "another workload, layers or ranks" in other.reason


def test_the_record_reads_back_and_a_record_out_of_its_bounds_is_refused():
    r = _record()
    assert WorkloadRecord.from_json(r.to_json()) == r
    for bad in (
        {"layers": 33},
        {"write_s": [[1.0], [1.0, 2.0]]},
        {"read_s": [[-1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]},
        {"rank_bytes": [0, 1]},
        {"workload": "x" * 50},
    ):
        with pytest.raises(RecordError):
            WorkloadRecord.from_json({**r.to_json(), **bad})
