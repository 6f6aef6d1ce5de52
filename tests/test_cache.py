"""Cold is verified, not assumed: eviction, residency, and what a cold or warm run read from storage."""

import os

import pytest

from iobench.errors import IobenchError
from iobench.storage.local.page_cache import evict, resident_fraction
from tests.conftest import assert_one_line_error, prepare_with_limits, stored_records


def _file(tmp_path, mib=8):
    path = tmp_path / "blob.bin"
    with open(path, "wb") as f:
        f.write(os.urandom(mib * 2**20))
        f.flush()
        os.fsync(f.fileno())
    return path


def test_fadvise_eviction_empties_and_a_read_fills(tmp_path):
    path = _file(tmp_path)
    path.read_bytes()
    assert resident_fraction([path]) > 0.95
    assert evict([path], "fadvise") == "fadvise"
    assert resident_fraction([path]) < 0.05
    path.read_bytes()
    assert resident_fraction([path]) > 0.95


def test_mapped_pages_survive_fadvise(tmp_path):
    """Why every mapping must be closed before a cold epoch: the kernel keeps mapped pages."""
    import mmap

    path = _file(tmp_path, 2)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        for i in range(0, len(m), 4096):
            m[i]
        evict([path], "fadvise")
        assert resident_fraction([path]) > 0.9
    evict([path], "fadvise")
    assert resident_fraction([path]) < 0.05


def test_auto_eviction_uses_drop_caches_only_when_permitted(tmp_path):
    path = _file(tmp_path, 1)
    method = evict([path], "auto")
    assert method == ("drop_caches" if os.geteuid() == 0 else "fadvise")
    assert resident_fraction([path]) < 0.05
    if os.geteuid() != 0:
        with pytest.raises(IobenchError, match="root"):
            evict([path], "drop_caches")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    prepare_with_limits(root, "20000", "npy,memmap")
    return root


@pytest.mark.parametrize("eviction", ["fadvise", "auto"])
@pytest.mark.parametrize("fmt, loader, workers", [("memmap", "tensorclass", "0"), ("npy", "dataloader", "2")])
def test_cold_run_reads_the_dataset_and_warm_reads_nothing(prepared, cli, eviction, fmt, loader, workers):
    results = prepared / f"{fmt}-{eviction}.jsonl"
    common = [
        "run",
        "--data-dir",
        prepared / "data",
        "--format",
        fmt,
        "--loader",
        loader,
        "--device",
        "cpu",
        "--runs",
        "1",
        "--epochs",
        "2",
        "--no-shuffle",
        "--num-workers",
        workers,
        "--results",
        results,
        "-q",
    ]
    assert cli(*common, "--cache", "cold", "--eviction", eviction, "--warmup", "0").code == 0
    assert cli(*common, "--cache", "warm").code == 0
    cold, warm = stored_records(results)
    size = cold["dataset_bytes"]
    assert cold["cache"] == "cold" and warm["cache"] == "warm"
    first = "fadvise" if eviction == "fadvise" or os.geteuid() != 0 else "drop_caches"  # as root: the whole cache
    assert cold["eviction_method"] == f"{first}+prime+fadvise"  # then the program read back, then the data alone
    assert all(x < 0.05 for x in cold["residency_before"]) and not cold["cold_not_cold"]
    assert all(x > 0.95 for x in warm["residency_before"])
    assert all(x > 0.95 for x in cold["residency_after"]), "a full epoch leaves the dataset cached"
    # cold means the dataset is cold, not iobench: every cold epoch (the first one without a warm-up too, where
    # lazily imported code and worker start-up run first) reads the dataset's bytes and nothing else, within 2%
    for read in cold["process_read_bytes"]:  # this process and its workers
        assert 0.98 * size <= read <= 1.02 * size, (read, size)
    for read in warm["process_read_bytes"]:
        assert read < 0.1 * size, (read, size)
    if cold["device_read_bytes"][0] is not None:  # the kernel's own count for the data's device
        assert all(0.98 * size <= x <= 1.02 * size for x in cold["device_read_bytes"]), cold["device_read_bytes"]
    for field in (
        "cpu_utilisation",
        "cpu_iowait",
        "peak_rss_bytes",
        "peak_rss_children_bytes",
        "data_block_device",
        "percent_of_limit",
        "limit_name",
    ):
        assert field in cold, field
    assert cold["limit_name"] == "storage_read_mb_per_s" and warm["limit_name"] == "page_cache_read_mb_per_s"


def test_warm_needs_a_warmup_epoch(prepared, cli):
    for cache in (["--cache", "warm"], []):  # warm is the default
        r = cli("run", "--data-dir", prepared / "data", *cache, "--warmup", "0", "--device", "cpu", "-q")
        assert_one_line_error(r, "--cache warm (the default) needs --warmup >= 1", "--cache as-is")


def test_profile_writes_a_cprofile(prepared, cli):
    results = prepared / "profiled.jsonl"
    r = cli(
        "run",
        "--data-dir",
        prepared / "data",
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--profile",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(results)
    import pstats

    stats = pstats.Stats(record["profile_path"])
    assert stats.total_calls > 0 and "cumulative" in r.out
