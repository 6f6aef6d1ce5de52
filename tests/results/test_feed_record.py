"""`feed`'s record: what `iobench feed` measured stored whole (the workload, every count with each rank's AU per
epoch) and read back checked: a damaged or crafted line is skipped with its reason, never a wrong answer."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from iobench.results.checked import RecordError
from iobench.results.feed_record import FeedPoint, FeedRecord, runs_path
from iobench.results.record_base import HostLoad

QUIET = HostLoad(load_before=0.1, other_cpu_before=0.0, load_after=0.1, other_cpu_after=0.0)


def planted(answers: dict[int, tuple[float, float]], others: float = 0.0, **more) -> FeedRecord:
    """A resnet50 answer whose count n had every rank at the two epochs' AU given; MB/s grows with the count."""
    points = [
        FeedPoint(
            n, tuple(epochs for _ in range(n)), 70.0 * n, 5.0, 0.4, "sequential", 800.0, 9.0 * n, "cold", 0.01, others
        )
        for n, epochs in sorted(answers.items())
    ]
    base = {
        "workload": "resnet50_h100",
        "accelerator": "h100",
        "sample_bytes": 114_660,
        "batch_size": 64,
        "compute_s": 0.103,
        "threshold": 0.9,
        "format": "npy",
        "loader": "dataloader",
        "dataset": "feed-resnet50-20000",
        "samples": 20_000,
        "cache": "cold",
        "most": 16,
        "why_most": "--max-accelerators 16",
        "points": points,
        "host": QUIET,
        "timestamp": "2026-11-28T07:00:00+00:00",
    }
    return FeedRecord(**{**base, **more})


def test_a_record_reads_back_as_it_was_written():
    record = planted({1: (0.95, 0.94), 2: (0.93, 0.92), 3: (0.85, 0.84)})
    again = FeedRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.point_map()[3].au == pytest.approx(0.845)
    assert again.demand_mb_per_s == pytest.approx(114_660 * 64 / 0.103 / 1e6)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["points"][0].update(rank_au=[[0.9], [0.9]]), "with 2 ranks"),
        (lambda d: d["points"][0].update(rank_au=[[1.5, 0.9]]), "not a fraction"),
        (lambda d: d["points"][0].update(mb_per_s=float("inf")), "not a measurement"),
        (lambda d: d["points"][0].update(mb_per_s="fast"), "'mb_per_s' holds"),
        (lambda d: d["points"].append(dict(d["points"][0])), "measured twice"),
        (lambda d: d.update(threshold=0), "threshold"),
        (lambda d: d.update(cache="lukewarm"), "'cache' holds"),
        (lambda d: d.update(schema_version=9), "schema_version"),
        (lambda d: d.update(points="none"), "'points' holds"),
        (lambda d: d.pop("workload"), "'workload' is missing"),
        (lambda d: d.update(format="npy\x1b[2J"), "not a name"),
    ],
)
def test_a_damaged_record_is_refused_with_its_reason(change, said):
    data = json.loads(json.dumps(planted({1: (0.95, 0.94)}).to_json()))
    change(data)
    with pytest.raises(RecordError, match=said):
        FeedRecord.from_json(data)


def test_the_runs_of_each_count_go_beside_the_answers():
    from pathlib import Path

    assert runs_path(Path("results/feed.jsonl")) == Path("results/feed-runs.jsonl")
    warm = replace(planted({1: (0.9, 0.9)}), cache="warm")
    assert warm.identity() == ("resnet50_h100", "npy", "dataloader", "warm", 0.103, "")


def test_an_answer_names_whose_workload_it_asked():
    """A named workload is MLPerf Storage's version's (stored, and in the report's title); answers made before the
    field read back with none, and are not claimed for the version."""
    from dataclasses import replace

    from iobench.feed.workloads import VERSION
    from iobench.report.feed import title_of

    record = replace(planted({1: (0.95, 0.94)}), workloads=VERSION)
    again = FeedRecord.from_json(record.to_json())
    assert again.workloads == VERSION and f"({VERSION}'s)" in title_of(again)
    old = {k: v for k, v in record.to_json().items() if k != "workloads"}
    assert FeedRecord.from_json(old).workloads == "" and VERSION not in title_of(FeedRecord.from_json(old))
