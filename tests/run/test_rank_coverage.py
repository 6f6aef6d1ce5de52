"""Rank coverage: what the ranks delivered together in an epoch (each rank's samples and batches, samples that
reached two ranks or none), scored after the clock and recorded; unequal batch counts are a warning."""

from __future__ import annotations

import numpy as np
import pytest

from iobench.judge.warnings import Kind, coverage_warnings
from iobench.measuring.clocks import EpochTiming
from iobench.results.record import RunRecord
from iobench.run.format_epochs import rank_coverage
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
    assert coverage == {
        "rank_samples": [50, 51],
        "rank_batches": [4, 4],
        "duplicated_samples": 11,
        "missing_samples": 10,
    }


def test_unequal_batches_and_gaps_are_warnings_and_an_even_split_is_not():
    even = record_of(world_size=2, rank_samples=[50, 50], rank_batches=[4, 4], duplicated_samples=0, missing_samples=0)
    assert coverage_warnings("x", even) == []
    uneven = record_of(
        world_size=2, rank_samples=[60, 40], rank_batches=[4, 3], duplicated_samples=0, missing_samples=5
    )
    found = coverage_warnings("x", uneven)
    assert [w.kind for w in found] == [Kind.RANK_COVERAGE] * 2
    assert "4/3 batches" in found[0].finding and "DDP hangs" in found[0].advice and "5 never" in found[1].finding


@pytest.mark.long
def test_two_ranks_under_torchrun_record_their_coverage(tmp_path, cli):
    prepare_with_limits(tmp_path, "1000", "npy")
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy",
        "--nproc",
        "2",
        "--batch-size",
        "64",
        "--runs",
        "1",
        "-q",
        "--results",
        results,
    )
    assert r.code == 0, r.err
    record = stored_records(results)[-1]
    assert record["rank_samples"] == [500, 500] and record["rank_batches"] == [8, 8]
    assert record["duplicated_samples"] == 0 and record["missing_samples"] == 0


def test_the_distributed_sampler_trims_pads_or_drops_the_tail_as_asked():
    """100 samples on 3 ranks: trimmed, every sample once in shares of 34/33/33; padded (torch's default), 34 each
    with 2 samples twice; dropped (drop_last=True), 33 each with 1 sample never."""
    from iobench.loaders.order import DistributedSamplerOrder

    def ranks(tail: str) -> list[np.ndarray]:
        return [DistributedSamplerOrder(100, 16, True, 0, None, r, 3, tail).indices(1) for r in range(3)]

    for tail, shares, twice, never in (
        ("trim", [34, 33, 33], 0, 0),
        ("pad", [34, 34, 34], 2, 0),
        ("drop", [33, 33, 33], 0, 1),
    ):
        got = ranks(tail)
        counts = np.bincount(np.concatenate(got), minlength=100)
        assert [len(g) for g in got] == shares, tail
        assert int(np.maximum(counts - 1, 0).sum()) == twice and int((counts == 0).sum()) == never, tail
        order = DistributedSamplerOrder(100, 16, True, 0, None, 0, 3, tail)
        assert sum(len(b) for b in order.batches(1)) == shares[0] and order.n_batches() == -(-shares[0] // 16)


@pytest.mark.long
def test_a_padding_sampler_on_three_ranks_records_its_repeats(tmp_path, cli):
    prepare_with_limits(tmp_path, "1000", "npy")
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy",
        "--nproc",
        "3",
        "--batch-size",
        "64",
        "--distributed-sampler",
        "pad",
        "--runs",
        "1",
        "-q",
        "--results",
        results,
    )
    assert r.code == 0, r.err
    record = stored_records(results)[-1]
    assert record["sampler_tail"] == "pad" and record["rank_samples"] == [334, 334, 334]
    assert record["duplicated_samples"] == 2 and record["missing_samples"] == 0
    (warning,) = coverage_warnings("x", RunRecord.from_json(record))  # the ranks' console is torchrun's
    assert "2 samples arrived more than once and 0 never" in warning.finding


def test_the_sampler_tail_names_its_configuration_in_the_tables():
    from iobench.plan.labels import settings_label

    padded = record_of(world_size=3, backend="gloo", sampler_tail="pad")
    assert "sampler=pad" in settings_label(padded) and "sampler=pad" in settings_label(padded, measured=False)
    assert "sampler" not in settings_label(record_of(world_size=3, backend="gloo"))


def test_the_sampler_tail_is_refused_where_there_is_no_distributed_sampler(tmp_path, cli):
    prepare_with_limits(tmp_path, "100", "npy")
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy",
        "--distributed-sampler",
        "drop",
        "-q",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 2 and "--distributed-sampler is the DataLoader's DistributedSampler" in r.err, r.err
