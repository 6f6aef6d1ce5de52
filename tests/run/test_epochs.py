"""The one epoch loop (`iobench.run.epochs.EpochLoop`): what it calls, in which order, and how a failure reads."""

from __future__ import annotations

import pytest
import torch

from iobench.errors import RunFailed
from iobench.measuring.user_loader import UserLoader
from iobench.run.epochs import EpochLoop

CPU = torch.device("cpu")


class Recorded(EpochLoop):
    """A subject that notes each hook the loop calls."""

    def __init__(self, cold: bool = False, fail_at: int | None = None) -> None:
        self.cold, self.fail_at, self.calls, self.built = cold, fail_at, [], 0

    def build(self) -> UserLoader:
        self.built += 1
        self.calls.append("build")
        fail_at = self.fail_at

        class Batches:
            def __iter__(self):
                for k in range(3):
                    if fail_at is not None and k == fail_at:
                        raise OSError("the disk went away")
                    yield torch.ones(4, 2), torch.zeros(4, dtype=torch.long)

        return UserLoader(Batches(), CPU)

    def make_cold(self, epoch: int) -> None:
        self.calls.append(f"cold {epoch}")

    def starting(self, epoch: int) -> None:
        self.calls.append(f"starting {epoch}")

    def started(self, loader, epoch: int) -> None:
        self.calls.append(f"started {epoch}")

    def ended(self, loader, epoch: int, timing) -> None:
        self.calls.append(f"ended {epoch} {timing.samples}")

    def run_done(self, loader, run: int, next_epoch: int) -> None:
        self.calls.append(f"done {run} {next_epoch}")


def test_warm_runs_build_once_per_run_and_time_only_the_timed_epochs():
    subject = Recorded()
    timings = subject.run(2, 1, 2, lambda batch: None)
    assert [t.samples for t in timings] == [12] * 4 and subject.built == 2
    assert subject.calls == [
        "build",
        "starting 1",
        "started 1",
        "ended 1 12",
        "starting 2",
        "started 2",
        "ended 2 12",
        "done 0 3",
        "build",
        "starting 4",
        "started 4",
        "ended 4 12",
        "starting 5",
        "started 5",
        "ended 5 12",
        "done 1 6",
    ]


def test_a_cold_epoch_evicts_with_the_loader_closed_then_builds_a_fresh_one():
    subject = Recorded(cold=True)
    subject.run(1, 1, 1, lambda batch: None)
    assert subject.calls == ["build", "cold 1", "starting 1", "build", "started 1", "ended 1 12", "done 0 2"]


def test_a_failure_inside_an_epoch_is_the_subjects_one_line():
    with pytest.raises(RunFailed, match="epoch 0 failed: OSError: the disk went away"):
        Recorded(fail_at=1).run(1, 1, 1, lambda batch: None)


def test_the_harness_is_out_of_the_collector_only_while_an_epoch_is_timed():
    import gc

    frozen = []
    subject = Recorded()
    subject.run(1, 1, 1, lambda batch: frozen.append(gc.get_freeze_count() > 0))
    assert frozen == [False] * 3 + [True] * 3 and gc.get_freeze_count() == 0
