"""The epoch clock (`iobench.measuring.clocks`): each stage's time where it was spent, the clock stopped by
--max-seconds, and the loader's epoch ended whatever way the epoch ends. A fake loader whose waits are known."""

from __future__ import annotations

import time

import pytest
import torch

from iobench.measuring.clocks import time_bare_epoch, time_epoch


class _Sleepy:
    """A loader of `batches` batches of 4 samples, each `wait` s to arrive; it counts its ended epochs."""

    device = torch.device("cpu")

    def __init__(self, batches: int, wait: float, fail_at: int | None = None) -> None:
        self.batches, self.wait, self.fail_at, self.ended = batches, wait, fail_at, 0

    def epoch(self, epoch: int):
        for k in range(self.batches):
            time.sleep(self.wait)
            if k == self.fail_at:
                raise OSError("disk gone")
            yield torch.zeros(4, 2), torch.zeros(4, dtype=torch.long)

    def to_device(self, batch):
        return batch

    def end_epoch(self) -> None:
        self.ended += 1


def test_the_wait_and_the_step_are_each_counted_where_they_were_spent():
    loader = _Sleepy(5, 0.02)
    timing = time_epoch(loader, 0, lambda b: time.sleep(0.01))
    assert (timing.batches, timing.samples, timing.partial, loader.ended) == (5, 20, False, 1)
    assert 0.09 <= timing.wait_seconds < timing.seconds and 0.045 <= timing.step_seconds < 0.2
    assert timing.wait_seconds + timing.step_seconds <= timing.seconds
    assert timing.first_batch_seconds < timing.seconds


def test_max_seconds_stops_the_clock_and_marks_the_epoch_partial():
    loader = _Sleepy(100, 0.01)
    timing = time_epoch(loader, 0, lambda b: None, max_seconds=0.05)
    assert timing.partial and 0 < timing.batches < 100 and loader.ended == 1


def test_a_failing_epoch_still_ends_the_loaders_epoch():
    loader = _Sleepy(5, 0.0, fail_at=2)
    with pytest.raises(OSError, match="disk gone"):
        time_epoch(loader, 0, lambda b: None)
    assert loader.ended == 1
    with pytest.raises(OSError, match="disk gone"):
        time_bare_epoch(loader, 0, lambda b: None)
    assert loader.ended == 2


def test_the_bare_epoch_times_the_same_work_without_bookkeeping():
    loader = _Sleepy(4, 0.02)
    seconds = time_bare_epoch(loader, 0, lambda b: None)
    assert 0.08 <= seconds < 1.0 and loader.ended == 1


SPIN = "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end: pass\n"


def _spin_step(seconds: float):
    def step(batch) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return step


def test_the_step_loops_wait_for_a_cpu_is_counted_where_a_rival_holds_its_core():
    """The loop's own thread's time runnable but not running (schedstat): next to nothing alone on its core, a large
    share of the epoch with a rival process pinned to the same core."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("this kernel keeps no schedstat")
    before = os.sched_getaffinity(0)
    core = min(before)
    os.sched_setaffinity(0, {core})
    try:
        alone = time_epoch(_Sleepy(4, 0.0), 0, _spin_step(0.05))
        rival = subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)])  # inherits the one core
        try:
            time.sleep(0.2)
            shared = time_epoch(_Sleepy(4, 0.0), 0, _spin_step(0.05))
        finally:
            rival.kill()
            rival.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert 0 <= alone.loop_wait_seconds < 0.25 * alone.seconds < alone.loop_cpu_seconds, alone  # it spun
    assert shared.loop_wait_seconds > 0.25 * shared.seconds > alone.loop_wait_seconds, (alone, shared)


class _Workers:
    """A DataLoader of 6 batches over one worker that spins `spin` s a sample: its worker's wait is what is asked."""

    device = torch.device("cpu")

    def __init__(self, spin: float) -> None:
        self.spin = spin

    def epoch(self, epoch: int):
        return iter(torch.utils.data.DataLoader(_Spinning(self.spin), batch_size=4, num_workers=1))

    def to_device(self, batch):
        return batch

    def end_epoch(self) -> None:
        pass


class _Spinning(torch.utils.data.Dataset):
    def __init__(self, spin: float) -> None:
        self.spin = spin

    def __len__(self) -> int:
        return 24

    def __getitem__(self, k: int):
        _spin_step(self.spin)(None)
        return torch.zeros(2), 0


def test_a_loader_workers_wait_for_a_cpu_is_counted_where_a_rival_holds_its_core():
    """The rank's loader workers' time runnable but not running, read as the epoch starts and before its workers stop:
    a small share alone on the core, a large one with a rival pinned there; 0 without workers."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/thread-self/schedstat"):
        pytest.skip("this kernel keeps no schedstat")
    assert time_epoch(_Sleepy(2, 0.0), 0, lambda b: None).worker_wait_seconds == 0.0
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        alone = time_epoch(_Workers(0.01), 0, lambda b: None)
        rival = subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)])  # inherits the one core
        try:
            time.sleep(0.2)
            shared = time_epoch(_Workers(0.01), 0, lambda b: None)
        finally:
            rival.kill()
            rival.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert 0 <= alone.worker_wait_seconds < 0.25 * alone.seconds, alone
    assert shared.worker_wait_seconds > 0.25 * shared.seconds > alone.worker_wait_seconds, (alone, shared)
