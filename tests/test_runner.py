"""The runner alone, driven by a fake loader: how many loaders it builds, which epochs it times, what the
record says, for warm and cold runs (no dataset is read; cold eviction is recorded, not performed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iobench.run import runner
from iobench.run.loaders.base import Loader
from tests.conftest import invoke, resolved_run

N, BATCH = 64, 16


class FakeLoader(Loader):
    """Batches of zeros in the epoch order; counts what the runner asks of it."""

    built = 0
    closed = 0

    def __init__(self, resolved) -> None:
        super().__init__(resolved.epoch_order(), resolved.config.settings, torch.device("cpu"))
        FakeLoader.built += 1

    def epoch(self, epoch):
        for indices in self.order.batches(epoch):
            n = len(np.atleast_1d(indices)) if not isinstance(indices, range | slice) else BATCH
            yield torch.zeros(n, 3, 4), torch.zeros(n, dtype=torch.int64)

    def close(self) -> None:
        FakeLoader.closed += 1


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("runner")
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", "npy", "--data-dir", root, "-q")
    (d,) = root.iterdir()
    return d


@pytest.fixture
def fake(monkeypatch):
    FakeLoader.built = FakeLoader.closed = 0
    monkeypatch.setattr(runner, "build_loader", FakeLoader)
    evicted = []
    monkeypatch.setattr(runner, "evict", lambda files, how: evicted.append(how) or "fadvise")
    return evicted


@pytest.mark.parametrize("cache", ["warm", "cold"])
def test_the_runner_times_the_epochs_it_should_and_records_them(dataset_dir, fake, cache):
    resolved = resolved_run(dataset_dir, "npy", "dataloader", batch_size=BATCH, runs=2, warmup=1, epochs=3, cache=cache)
    seen = []
    record = runner.run(resolved, lambda r, e, warm, timing: seen.append((r, e, warm, timing.samples)))
    assert seen == [(r, e, e == 0, N) for r in range(2) for e in range(4)]
    e = record.epochs
    assert len(e.epoch_seconds) == 6 and e.samples_per_epoch == N and e.batches_per_epoch == N // BATCH
    assert len(record.system.residency_before) == 6 == len(record.system.residency_after)
    # a loader per run, plus a fresh one per cold timed epoch; every one of them closed
    assert FakeLoader.built == (2 + 6 if cache == "cold" else 2) == FakeLoader.closed
    assert fake == (["auto"] * 6 if cache == "cold" else [])  # --eviction as given; evict() resolves it
    assert record.system.eviction_method == ("fadvise" if cache == "cold" else None)
    assert record.config.cache == cache and record.config.runs == 2
