"""What a measurement's processes waited for (`iobench.system.waits`): a thread spinning beside planted busy loops
waits for a CPU a share of its runnable time that no quiet moment shows; its children are counted (DataLoader workers
that live less than a poll too), rivals started on purpose are not; and every run record carries each run's figures."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

import torch

from iobench.system.waits import WaitMeter, tree

SPIN = "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end: pass\n"


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _share(figures) -> float:
    return figures.wait_s / (figures.cpu_s + figures.wait_s)


def test_a_runs_wait_share_rises_beside_planted_busy_loops():
    with WaitMeter() as quiet:
        _spin(1.0)
    loops = [subprocess.Popen([sys.executable, "-c", SPIN.format(s=30)]) for _ in range((os.cpu_count() or 2) + 1)]
    try:
        time.sleep(0.3)
        with WaitMeter(exclude=tuple(p.pid for p in loops)) as busy:
            _spin(1.5)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert busy.figures.cpu_s < 1.5 * busy.figures.wall_s, "the rivals were left out of the tree's CPU"
    assert _share(busy.figures) > 0.25 and _share(busy.figures) > _share(quiet.figures), (quiet.figures, busy.figures)
    assert busy.figures.others_cores is not None and busy.figures.others_cores > 0.5


def test_a_child_that_exits_during_the_measurement_is_counted():
    with WaitMeter(poll_s=0.05) as meter:
        subprocess.run([sys.executable, "-c", SPIN.format(s=0.6)], check=True)
    assert meter.figures.cpu_s > 0.4, meter.figures  # the child's CPU, read before it exited


def test_the_tree_is_this_process_and_its_descendants():
    child = subprocess.Popen(["sleep", "30"])
    try:
        found = tree(os.getpid())
        assert found[0] == os.getpid() and child.pid in found
        assert child.pid not in tree(os.getpid(), exclude=(child.pid,))
    finally:
        child.kill()
        child.wait()


class _Busy(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> torch.Tensor:
        _spin(0.002)
        return torch.zeros(4)


def _cpu_used() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def test_dataloader_workers_that_live_less_than_a_poll_are_counted():
    """Two workers an epoch, each epoch shorter than the poll: before exit reports the meter saw a quarter of the
    CPU they used (getrusage counts every reaped child)."""
    before = _cpu_used()
    with WaitMeter(poll_s=5.0) as meter:  # no reading between enter and exit: only the workers' reports count them
        for _ in range(2):
            for _ in torch.utils.data.DataLoader(_Busy(), batch_size=64, num_workers=2):
                pass
    used = _cpu_used() - before
    assert used > 0.8, used  # 1,024 items of 2 ms each
    assert meter.figures.cpu_s > 0.8 * used, (meter.figures, used)


RANK = "import subprocess, sys\nfor _ in range(6):\n    subprocess.run([sys.executable, '-c', {spin!r}], check=True)\n"


def test_a_childs_children_that_exit_between_readings_are_counted_once_it_is_reaped():
    """A rank (an exec'd child) whose own children live less than a poll: their CPU comes back through getrusage
    once the rank is reaped, so it is not charged to other programs."""
    before = _cpu_used()
    with WaitMeter(poll_s=5.0) as meter:
        subprocess.run([sys.executable, "-c", RANK.format(spin=SPIN.format(s=0.15))], check=True)
    used = _cpu_used() - before
    assert used > 0.8, used
    assert meter.figures.cpu_s > 0.9 * used, (meter.figures, used)


def _spin_then_wait(go) -> None:  # a module-level target: multiprocessing's fork child runs it
    _spin(0.5)
    go.wait(30)
    _spin(0.2)


def test_a_child_started_before_the_meter_counts_only_what_it_used_inside():
    """A worker that spun 0.5 s before the meter began and 0.2 s inside it, then exited and was reaped: getrusage
    counts its whole life, so what it had used before the meter must come off that bound too (it had counted 0.7 s)."""
    import multiprocessing

    with WaitMeter():
        pass  # the exit reports' pipe exists before the fork: the child reports as it exits
    go = multiprocessing.get_context("fork").Event()
    child = multiprocessing.get_context("fork").Process(target=_spin_then_wait, args=(go,))
    child.start()
    time.sleep(0.8)  # the child's first 0.5 s spun before the meter
    with WaitMeter(poll_s=5.0) as meter:
        go.set()
        child.join(30)
    assert child.exitcode == 0
    assert 0.1 < meter.figures.cpu_s < 0.45, meter.figures
