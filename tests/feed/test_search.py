"""The count searched is the count a sweep of every count would find: for a planted machine whose answer is known
(ranks that each need a share of two cores a batch), the search's N is the largest count a sweep of 1..most judges
fed, N+1 is measured where it can start, and the search measures about 2 log2(most) counts, not most."""

from __future__ import annotations

import math

import pytest

from iobench.feed.search import search
from iobench.feed.workloads import WORKLOADS, custom
from iobench.judge.feed import FED, FeedPoint, feed_verdict

STEP, CORES = 0.1, 2.0


def planted(cpu_s: float):
    """n ranks each needing `cpu_s` of a core a batch on 2 cores, the batch read while the step runs: a batch every
    max(step, n * cpu_s / cores); AU the step's share of that (each rank, two epochs alike)."""

    def measure(n: int) -> FeedPoint:
        period = max(STEP, n * cpu_s / CORES)
        au = STEP / period
        return FeedPoint(n, tuple((au, au) for _ in range(n)), n * 100 / period, (period - STEP) * 1000)

    return measure


@pytest.mark.parametrize("cpu_s", [0.3, 0.2, 0.05, 0.021, 0.011, 0.0061, 0.001])
def test_the_search_finds_what_a_sweep_of_every_count_finds(cpu_s):
    most = 32
    measure = planted(cpu_s)
    swept = [n for n in range(1, most + 1) if feed_verdict(measure(n), 0.9) == FED]
    expected = max(swept) if swept else 0
    asked: list[int] = []
    points = search(lambda n: asked.append(n) or measure(n), 0.9, most)
    fed = [n for n, p in points.items() if feed_verdict(p, 0.9) == FED]
    assert (max(fed) if fed else 0) == expected
    assert expected == most or expected + 1 in points  # the first count not fed is measured beside N
    assert len(asked) == len(set(asked)) <= 2 * math.ceil(math.log2(most)) + 1


def test_the_published_workloads_demand_what_dlio_configs_imply():
    assert WORKLOADS["unet3d/h100"].demand_mb_per_s == pytest.approx(3177, rel=0.01)  # the 3.2 GB/s
    # MLPerf Storage v3.0's resnet50/h100 (batch 400, 0.224 s), not DLIO's repository's (64, 0.103 s: 71 MB/s)
    assert WORKLOADS["resnet50/h100"].demand_mb_per_s == pytest.approx(204.8, rel=0.01)
    assert WORKLOADS["retinanet/b200"].demand_mb_per_s == pytest.approx(163.0, rel=0.01)  # v3.0's, AU 0.85
    assert WORKLOADS["retinanet/h100"].au == 0.85 and WORKLOADS["unet3d/b200"].compute_s == 0.162
    assert all(w.source.startswith("mlcommons/storage configs/dlio/workload/") for w in WORKLOADS.values())
    assert custom(4096, 16, 20.0, 0.9, 2).demand_mb_per_s == pytest.approx(4096 * 16 / 0.02 / 1e6)


PLANT = '''
"""A slow loader shared by every rank: each batch's fetch holds one lock (a file beside this module) for HOLD_S, so
all ranks together get one batch every HOLD_S; the step sleeps STEP_S. Imported as the rank's --step, it patches the
rank's DataLoader before its first batch."""

import fcntl
import os
import time
from pathlib import Path

from torch.utils.data._utils import fetch

HOLD_S = STEP_S = 0.15
_LOCK = Path(__file__).with_name("plant.lock")
_real = fetch._MapDatasetFetcher.fetch


def _slow(self, index):
    fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        time.sleep(HOLD_S)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return _real(self, index)


fetch._MapDatasetFetcher.fetch = _slow


def step(features, labels):
    time.sleep(STEP_S)
'''


@pytest.mark.long
def test_the_search_over_real_ranks_agrees_with_a_sweep_of_nproc(tmp_path):
    """Real `run --nproc n` runs with a planted slow loader whose answer is known: the ranks share one batch every
    0.15 s and each needs one every 0.15 + 0.15 s, so two are fed at AU 0.5 and three get 0.33 (threshold 0.42). The
    search's N, and every count's verdict, are a sweep of 1..N+1's."""
    import subprocess

    from iobench.results.feed_record import point_of_run
    from iobench.results.store import read_records
    from iobench.system.processes import python_module
    from tests.conftest import invoke

    (tmp_path / "plant.py").write_text(PLANT)
    invoke("prepare", "--size", 144, "--shape", 64, "--formats", "npy", "--data-dir", tmp_path / "data", "-q")

    def measure(n: int) -> FeedPoint:
        results = tmp_path / "runs.jsonl"
        options = ("--format", "npy", "--num-workers", "0", "--batch-size", "8", "--step", "plant:step", "--runs", "1")
        options += ("--epochs", "2", "--warmup", "1", "--nproc", str(n), "--device", "cpu", "--cache", "warm")
        argv = python_module("iobench", "run", *options, "--data-dir", "data", "--results", str(results), "-q")
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return point_of_run(read_records(results)[-1], n)

    threshold = 0.42
    searched = search(measure, threshold, 3)
    n = max((k for k, p in searched.items() if feed_verdict(p, threshold) == FED), default=0)
    swept = {k: measure(k) for k in range(1, n + 2)}
    verdicts = {k: feed_verdict(p, threshold) for k, p in swept.items()}
    assert n == 2 and verdicts == {1: FED, 2: FED, 3: "starved"}, {k: p.rank_au for k, p in swept.items()}
    assert all(feed_verdict(searched[k], threshold) == verdicts[k] for k in searched)
