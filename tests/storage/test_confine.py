"""--read-limit and --cache-budget: parsed and refused in one line, and, where this machine lets us
create cgroups (root, cgroup v1 or a delegated v2), shown to work by the kernel's own counts."""

import os
from pathlib import Path

import pytest

from iobench.errors import IobenchError
from iobench.measuring.limit_rule import ceiling
from iobench.results.limits import MachineLimits
from iobench.storage.local import cgroups, confine
from iobench.storage.local.cache_governor import HEADROOM
from iobench.storage.local.confine import CacheBudget, Confinement, confined
from tests.conftest import assert_one_line_error, prepare_with_limits, record_of, stored_records


def test_budgets_are_sizes_or_shares_of_the_dataset():
    assert CacheBudget("256M").of(10**12) == 256 * 2**20
    assert CacheBudget("1.5G").of(1) == int(1.5 * 2**30)
    assert CacheBudget("20%").of(1000) == 200
    assert CacheBudget("100%").of(1000) == 1000
    for bad in ("0", "-5M", "20 apples", "0%", "150%", "%", ""):
        with pytest.raises(IobenchError, match="--cache-budget"):
            CacheBudget(bad)
    for bad in (0, -1, float("inf"), float("nan"), 1e308, 1e-300):  # 1e308 overflowed the cgroup file's integer,
        with pytest.raises(IobenchError, match="--read-limit"):  # 1e-300 rounded to 0: no limit at all
            Confinement(read_limit_mb_per_s=bad)


def test_bad_knobs_are_one_line_before_any_work(cli, tmp_path):
    r = cli("run", "--data-dir", tmp_path / "none", "--format", "npy", "--cache-budget", "lots")
    assert_one_line_error(r, "--cache-budget 'lots'")
    for value in ("0", "1e308"):  # 1e308 was OverflowError in confine._throttle
        r = cli("run", "--data-dir", tmp_path / "none", "--format", "npy", "--read-limit", value)
        assert_one_line_error(r, "--read-limit")
    assert not (tmp_path / "none").exists()


def test_without_a_cgroup_to_create_the_run_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(cgroups, "mounts", lambda: ({"memory": tmp_path / "absent"}, None))
    monkeypatch.setattr(cgroups, "own_paths", lambda: {"memory": "/"})
    with pytest.raises(IobenchError, match="need permission to create a cgroup in .*absent.*confine.sh"):
        with confined(Confinement(cache_budget_bytes=2**20), tmp_path):
            pass
    # refused before any work as well (resolve and limits call this first)
    with pytest.raises(IobenchError, match="need permission to create a cgroup in .*absent"):
        confine.check_can_confine(Confinement(cache_budget_bytes=2**20), tmp_path)
    confine.check_can_confine(Confinement(), tmp_path)  # nothing asked, nothing needed
    monkeypatch.setattr(cgroups, "mounts", lambda: ({}, None))
    with pytest.raises(IobenchError, match="no memory cgroup controller"):
        with confined(Confinement(cache_budget_bytes=2**20), tmp_path):
            pass


def test_a_throttle_needs_a_block_device():
    with pytest.raises(IobenchError, match="not on a block device"):
        confine.disk_of(Path("/proc/self"))


def test_the_governor_stops_before_its_group_is_removed():
    """A governor polling a removed group reads ENOENT/ENODEV and reports a broken budget (CI saw it)."""
    order = []

    class Step:
        def __init__(self, name):
            self.name, self.peak_cache = name, 7

        def leave(self):
            order.append(f"leave {self.name}")

        def stop(self):
            order.append("stop governor")

        def done(self):
            order.append("janitor done")

    applied = confine.Applied()
    confine._release([Step("blkio"), Step("memory")], Step("governor"), Step("janitor"), applied)
    assert order == ["stop governor", "leave memory", "leave blkio", "janitor done"]
    assert applied.peak_cache_bytes == 7


def _cgroups_here(controller: str) -> bool:
    v1, _v2 = cgroups.mounts()
    return os.geteuid() == 0 and controller in v1 and os.access(v1[controller], os.W_OK)


def _own_cgroups() -> str:
    return Path("/proc/self/cgroup").read_text()


@pytest.fixture(scope="module")
def confined_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("confine")
    prepare_with_limits(root, "20000", "npy,memmap")  # 10.4 MB per format
    return root


@pytest.fixture(scope="module")
def budget_data(tmp_path_factory):
    """156 MB per format: a budget of a quarter (39 MB) stays well above the disk's read-ahead window
    (a budget near it thrashes: read-ahead pages are evicted before they are used)."""
    root = tmp_path_factory.mktemp("budget")
    prepare_with_limits(root, "300000", "memmap")
    return root


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.skipif(not _cgroups_here("memory"), reason="needs root and a cgroup v1 memory hierarchy")
def test_a_cache_budget_caps_the_page_cache_of_the_run_and_its_workers(budget_data, cli):
    before = _own_cgroups()
    results = budget_data / "budget.jsonl"
    for loader, workers in (("tensorclass", "0"), ("dataloader", "2")):
        r = cli(
            "run",
            "--data-dir",
            budget_data / "data",
            "--format",
            "memmap",
            "--loader",
            loader,
            "--cache",
            "cold",
            "--cache-budget",
            "25%",
            "--no-shuffle",
            "--runs",
            "2",
            "--num-workers",
            workers,
            "-q",
            "--device",
            "cpu",
            "--results",
            results,
        )
        assert r.code == 0, r.err
    size = 300000 * 520
    records = stored_records(results)
    assert [x["loader"] for x in records] == ["tensorclass", "dataloader"]
    for x in records:
        budget = x["cache_budget_bytes"]
        assert x["cache_budget"] == "25%" and budget == pytest.approx(0.25 * x["dataset_bytes"], abs=1)
        assert "memory" in x["confinement_method"]
        # the group never held much more file cache than the budget: the headroom, and anonymous memory
        # freed between two 10 ms adjustments, are all it can borrow (156 MB unbudgeted)
        assert x["cache_peak_bytes"] <= budget + HEADROOM + 8 * 2**20, (x["cache_peak_bytes"], budget)
        # an epoch reads the whole dataset and leaves about the budget of it cached
        assert all(r <= 0.4 for r in x["residency_after"]), x["residency_after"]
        if x["device_read_bytes"][0] is not None:
            assert all(b >= 0.9 * size for b in x["device_read_bytes"]), x["device_read_bytes"]
    assert _own_cgroups() == before, "the process did not leave the run's cgroup"
    memory_root = cgroups.mounts()[0]["memory"]
    assert not list(memory_root.rglob(f"iobench-{os.getpid()}")), "the run's cgroup was left behind"


@pytest.mark.long
@pytest.mark.skipif(not _cgroups_here("blkio"), reason="needs root and a cgroup v1 blkio hierarchy")
def test_a_read_limit_throttles_cold_reads_and_names_its_own_limits(confined_data, cli):
    results = confined_data / "throttle.jsonl"
    data = confined_data / "data"
    r = cli("limits", "--data-dir", data, "--results", results, "--probe-size", "16M", "--read-limit", "20")
    assert r.code == 0 and "reads throttled to 20 MB/s" in r.out, r.err
    r = cli(
        "run",
        "--data-dir",
        confined_data / "data",
        "--format",
        "npy",
        "--cache",
        "cold",
        "--no-shuffle",
        "--read-limit",
        "20",
        "--runs",
        "2",
        "-q",
        "--device",
        "cpu",
        "--results",
        results,
    )
    assert r.code == 0, r.err
    (x,) = stored_records(results)
    assert x["read_limit_mb_per_s"] == 20 and "blkio" in x["confinement_method"]
    # 10.4 MB cannot arrive much faster than the throttle: blkio lets the first time slice through at
    # full speed, which over a 0.5 s epoch gave 25.8-26.8 MB/s in 4 of 12 runs (old and new code alike);
    # unthrottled, this disk reads hundreds of MB/s. Only the ceiling is held: how far below it a run lands depends on
    # what else the machine does (a floor is a timing by another name)
    assert x["mb_per_s"] <= 20 * 1.5, x["mb_per_s"]
    stored = (confined_data / "limits.json").read_text()
    assert "@20MB/s" in stored, "limits under the throttle are stored apart from the disk's own"
    assert x["limit_name"] == "storage_read_mb_per_s" and x["limit_mb_per_s"] <= 20 * 1.15


def test_each_access_pattern_is_held_to_its_own_ceiling():
    limits = MachineLimits(
        hostname="h",
        data_device="/dev/x",
        storage_read_mb_per_s=1000.0,
        page_cache_read_mb_per_s=5000.0,
        random_read_4k_qd32_iops=50_000.0,
        random_read_block_bytes=4096,
        memory_gather_mb_per_s=3000.0,
        gather_sample_bytes=520,
    )
    base = {"loader": "dataloader", "format": "npy", "device": "cpu", "sample_bytes": 520}
    assert ceiling(record_of(**base, cache="warm", order="sequential"), limits)[0] == "page_cache_read_mb_per_s"
    assert ceiling(record_of(**base, cache="warm", order="shuffle"), limits) == ("memory_gather_mb_per_s", 3000.0)
    assert ceiling(record_of(**base, cache="cold", order="sequential"), limits)[0] == "storage_read_mb_per_s"
    # cold shuffled with all of RAM: reading the file in sequence (1000 MB/s) beats 50k random reads (26 MB/s)
    assert ceiling(record_of(**base, cache="cold", order="shuffle"), limits)[0] == "storage_read_mb_per_s"
    # under a budget the dataset cannot be cached: one random read per sample
    budgeted = ceiling(record_of(**base, cache="cold", order="shuffle", cache_budget="20%"), limits)
    assert budgeted == ("random_read_qd32_samples", pytest.approx(50_000 * 520 / 1e6))
    # limits measured for another sample size give no gather ceiling for this one
    other = ceiling(record_of(**{**base, "sample_bytes": 4000}, cache="warm", order="shuffle"), limits)
    assert other[0] == "page_cache_read_mb_per_s"
