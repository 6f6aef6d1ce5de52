"""Rank coverage: what the ranks delivered together in an epoch (each rank's samples and batches, samples that
reached two ranks or none), scored after the clock and recorded; unequal batch counts are a warning."""

from __future__ import annotations

import numpy as np

from iobench.measuring.clocks import EpochTiming
from iobench.results.warnings import Kind, coverage_warnings
from iobench.run.runner import rank_coverage
from tests.conftest import prepare_with_limits, record_of, stored_records


class TwoRanks:
    """A world of two ranks in one process: rank 1's delivery is planted; the collectives combine both."""

    size = 2

    def __init__(self, other: np.ndarray, other_timing: EpochTiming) -> None:
        self.other, self.other_timing = other, other_timing

    def index_counts(self, indices: np.ndarray, n: int) -> np.ndarray:
        return np.bincount(np.concatenate([indices, self.other]), minlength=n)[:n]

    def gather(self, values: list[float]) -> list[list[float]]:
        return [values, [float(self.other_timing.samples), float(self.other_timing.batches)]]


def _timing(samples: int, batches: int) -> EpochTiming:
    return EpochTiming(1.0, 0.1, batches, samples, 0.5, 0.0, 0.0, False)


def test_a_pipeline_that_repeats_and_drops_samples_across_ranks_is_counted():
    mine = np.arange(0, 50)
    planted = np.concatenate([np.arange(40, 90), [89]])  # 40-49 repeated, 90-99 never, one sample twice in a rank
    coverage = rank_coverage(TwoRanks(planted, _timing(51, 4)), mine, 100, _timing(50, 4))
    assert coverage == {"rank_samples": [50, 51], "rank_batches": [4, 4], "duplicated_samples": 11,
                        "missing_samples": 10}  # fmt: skip


def test_unequal_batches_and_gaps_are_warnings_and_an_even_split_is_not():
    even = record_of(world_size=2, rank_samples=[50, 50], rank_batches=[4, 4], duplicated_samples=0,
                     missing_samples=0)  # fmt: skip
    assert coverage_warnings("x", even) == []
    uneven = record_of(world_size=2, rank_samples=[60, 40], rank_batches=[4, 3], duplicated_samples=0,
                       missing_samples=5)  # fmt: skip
    found = coverage_warnings("x", uneven)
    assert [w.kind for w in found] == [Kind.RANK_COVERAGE] * 2
    assert "4/3 batches" in found[0].finding and "DDP hangs" in found[0].advice and "5 never" in found[1].finding


def test_two_ranks_under_torchrun_record_their_coverage(tmp_path, cli):
    prepare_with_limits(tmp_path, "1000", "npy")
    results = tmp_path / "r.jsonl"
    r = cli("run", "--data-dir", tmp_path / "data", "--format", "npy", "--nproc", "2", "--batch-size", "64",
            "--runs", "1", "-q", "--results", results)  # fmt: skip
    assert r.code == 0, r.err
    record = stored_records(results)[-1]
    assert record["rank_samples"] == [500, 500] and record["rank_batches"] == [8, 8]
    assert record["duplicated_samples"] == 0 and record["missing_samples"] == 0
