"""The resume check (`--resume-check`): an epoch interrupted twice and restored from the pipeline's own state in a
fresh loader each time; the record says what was lost, repeated or reordered, and which pipelines have no state."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from iobench.formats import FORMATS
from iobench.judge.warnings import Kind, resume_warnings
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.order import indices_of
from iobench.run import building, runner
from iobench.run.resume_check import checkpointed, cuts, resume_check
from tests.conftest import NEEDS_TORCHDATA, format_param, invoke, record_of, resolved_run, stored_records

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

N = 203  # 13 batches of 16, the last short


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    formats = ",".join(f for f in ("npy", "litdata", "arrow") if FORMATS.installed(f))  # the README's venv: npy
    invoke("prepare", "--size", N, "--shape", "3,4", "--data-dir", root, "-q", "--formats", formats)
    (d,) = root.iterdir()
    return d


class Planted(Loader):
    """Reads the epoch's batches in order; its state says `skew` batches more (or fewer) than it delivered, so a
    resumed epoch loses (or repeats) that many batches."""

    skew = 0

    def __init__(self, ctx: LoaderContext) -> None:
        super().__init__(ctx.order, ctx.settings, ctx.device)
        self.reader, self.start, self.done = ctx.reader, 0, 0
        self.carried: list[np.ndarray] = []

    def _batches(self, epoch: int) -> Iterator[Any]:
        self.carried = []
        for k, window in enumerate(list(self.order.batches(epoch))[self.start :]):
            self.done = self.start + k + 1
            indices = indices_of(window)
            self.carried.append(indices)
            features, labels = self.reader.batch(indices)
            yield torch.from_numpy(features), torch.from_numpy(labels)

    def delivered(self, epoch: int, samples: int) -> np.ndarray:
        return np.concatenate(self.carried)[:samples]

    def state_dict(self) -> dict[str, Any]:
        return {"batches": torch.tensor(self.done + self.skew)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.start = int(state["batches"])

    def _release(self) -> None:
        self.reader.close()


@pytest.fixture
def planted(monkeypatch):
    """The check's loaders (stateful) are Planted ones; the timed epochs' are the run's own."""
    real = building.make_loader

    def make(name, ctx):
        return Planted(ctx) if ctx.stateful else real(name, ctx)

    monkeypatch.setattr(building, "make_loader", make)
    return Planted


def test_the_cuts_are_half_and_three_quarters_of_the_batches():
    assert cuts(13) == [6, 9] and cuts(4) == [2, 3] and cuts(3) == [1, 2] and cuts(2) == [1] and cuts(1) == []


def test_a_state_goes_through_a_checkpoint_with_weights_only():
    state = {"n": 3, "nested": {"t": torch.arange(4)}, "names": ["a"]}
    back = checkpointed(state)
    assert back["n"] == 3 and back["names"] == ["a"] and torch.equal(back["nested"]["t"], torch.arange(4))


@pytest.mark.parametrize(
    "skew, lost, repeated", [(0, 0, 0), (-1, 0, 32), (1, 32, 0)], ids=["exact", "repeats", "loses"]
)
def test_a_planted_pipeline_that_repeats_or_loses_on_resume_is_recorded_so(dataset_dir, planted, skew, lost, repeated):
    """Two resumes, each one batch (16 samples) off when skewed: the record counts them, the order differs, and
    the report warns."""
    planted.skew = skew
    record = runner.run(resolved_run(dataset_dir, "npy", "dataloader", runs=1, epochs=1, resume_check=True))
    e = record.epochs
    assert e.resume_supported is True and e.resume_error is None
    assert (e.resume_lost_samples, e.resume_repeated_samples) == (lost, repeated)
    assert e.resume_same_order is (skew == 0) and e.resume_seconds is not None and e.resume_seconds > 0
    warned = resume_warnings("x", record)
    assert [w.kind for w in warned] == ([] if skew == 0 else [Kind.RESUME])
    stored = record.to_json()
    assert stored["resume_lost_samples"] == lost and stored["resume_repeated_samples"] == repeated


def test_a_pipeline_without_state_is_recorded_as_such_not_skipped(dataset_dir):
    """The direct loader reads by itself: no library state to restore."""
    record = runner.run(resolved_run(dataset_dir, "npy", "direct", runs=1, epochs=1, resume_check=True))
    e = record.epochs
    assert e.resume_supported is False and e.resume_lost_samples is None and e.resume_error is None


def test_a_failing_resume_is_recorded_with_the_timed_figures_kept(dataset_dir, planted, monkeypatch):
    def broken(self, state):
        raise ValueError("state from another epoch")

    monkeypatch.setattr(planted, "load_state_dict", broken)
    record = runner.run(resolved_run(dataset_dir, "npy", "dataloader", runs=1, epochs=1, resume_check=True))
    assert record.epochs.resume_error == "resume 1 of 2 failed: ValueError: state from another epoch"
    assert record.epochs.samples_per_s > 0
    (warning,) = resume_warnings("x", record)
    assert "resuming mid-epoch failed" in warning.finding


def test_an_epoch_of_one_batch_says_whether_it_has_state_and_that_nothing_was_interrupted(dataset_dir, planted):
    one = resolved_run(dataset_dir, "npy", "dataloader", batch_size=4096, runs=1, epochs=1, resume_check=True)
    assert resume_check(one, 1, building.build_loader).resume_error == "the epoch is one batch: nothing to interrupt"


def test_an_epoch_of_one_batch_without_state_is_unsupported_not_an_error(dataset_dir):
    direct = resolved_run(dataset_dir, "npy", "direct", batch_size=1024, runs=1, epochs=1, resume_check=True)
    assert resume_check(direct, 1, building.build_loader).resume_supported is False


def test_without_torchdata_a_dataloader_resume_says_what_to_install(dataset_dir, monkeypatch):
    from iobench.loaders import dataloader

    monkeypatch.setattr(dataloader, "stateful_dataloader", lambda: None)
    resolved = resolved_run(dataset_dir, "npy", "dataloader", runs=1, epochs=1, resume_check=True)
    result = resume_check(resolved, 1, building.build_loader)
    assert result.resume_supported is True and "pip install 'iobench[torchdata]'" in result.resume_error


def test_an_unchecked_run_records_nothing_and_is_not_warned_about():
    record = record_of()
    assert record.epochs.resume_supported is None and resume_warnings("x", record) == []


RESUMABLE = [
    pytest.param("npy", "dataloader", 0, marks=NEEDS_TORCHDATA, id="npy-dataloader"),
    pytest.param("npy", "dataloader", 2, marks=NEEDS_TORCHDATA, id="npy-dataloader-2-workers"),
    pytest.param("npy", "nodes", 2, marks=NEEDS_TORCHDATA, id="npy-nodes"),
    *(
        pytest.param(f, "native", 0, marks=[*format_param(f).marks, NEEDS_TORCHDATA], id=f"{f}-native")
        for f in ("litdata", "arrow")
    ),
]


@pytest.mark.parametrize("fmt, loader, workers", RESUMABLE)
def test_the_libraries_state_resumes_an_epoch_exactly(dataset_dir, fmt, loader, workers):
    """StatefulDataLoader (the DataLoader paths, arrow's map-style dataset), nodes' Loader and LitData's
    StreamingDataLoader, shuffled: resumed twice, every sample once and in the order it would have had."""
    resolved = resolved_run(dataset_dir, fmt, loader, num_workers=workers, runs=1, epochs=1, resume_check=True)
    result = resume_check(resolved, 1, building.build_loader)
    assert result.resume_error is None and result.resume_supported is True
    assert (result.resume_lost_samples, result.resume_repeated_samples) == (0, 0)
    assert result.resume_same_order is True


def test_the_command_line_records_the_four_fields_and_refuses_ranks(dataset_dir, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--format",
        "npy",
        "--loader",
        "direct",
        "--resume-check",
        "--runs",
        "1",
        "--device",
        "cpu",
        "--batch-size",
        "16",
        "--data-dir",
        dataset_dir.parent,
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (stored,) = stored_records(results)
    assert stored["resume_supported"] is False
    assert {"resume_seconds", "resume_lost_samples", "resume_repeated_samples", "resume_same_order"} <= set(stored)
    r = cli(
        "run",
        "--format",
        "npy",
        "--resume-check",
        "--nproc",
        "2",
        "--device",
        "cpu",
        "--data-dir",
        dataset_dir.parent,
        "--results",
        results,
        "-q",
    )
    assert r.code == 2 and "--resume-check restores one process's pipeline" in r.err, r.err
