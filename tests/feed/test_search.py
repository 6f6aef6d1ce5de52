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
    assert WORKLOADS["resnet50/h100"].demand_mb_per_s == pytest.approx(71.2, rel=0.01)
    assert all(w.source.startswith("argonne-lcf/dlio_benchmark") for w in WORKLOADS.values())
    assert custom(4096, 16, 20.0, 0.9, 2).demand_mb_per_s == pytest.approx(4096 * 16 / 0.02 / 1e6)
