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


def test_auto_eviction_evicts_the_files_alone_and_drop_caches_only_when_asked(tmp_path):
    """auto dropped the whole page cache as root: iobench's own code then had to be read back (a cold command read
    590-750 MB for a 520 MB dataset). It is fadvise, root or not."""
    path = _file(tmp_path, 1)
    method = evict([path], "auto")
    assert method == "fadvise"
    assert resident_fraction([path]) < 0.05
    if os.geteuid() != 0:
        with pytest.raises(IobenchError, match="root"):
            evict([path], "drop_caches")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache")
    prepare_with_limits(root, "20000", "npy,memmap")
    return root


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="drop_caches needs root")


@pytest.mark.long
@pytest.mark.parametrize("eviction", ["fadvise", "auto", pytest.param("drop_caches", marks=ROOT_ONLY)])
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
    # the files alone (drop_caches, asked: the whole cache), then the program read back on a twin, then the data alone
    first = "drop_caches" if eviction == "drop_caches" else "fadvise"
    assert cold["eviction_method"] == f"{first}+prime+fadvise"
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
        # machine-wide (/proc/diskstats counts every program on the device): its lower bound says the dataset came
        # from the disk; the upper bound is the processes' own count above, which another program cannot move
        assert all(x >= 0.98 * size for x in cold["device_read_bytes"]), cold["device_read_bytes"]
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


_COMMAND_READS = """
import atexit, sys
def said():
    with open("/proc/self/io") as f:
        read = next(int(line.split()[1]) for line in f if line.startswith("read_bytes"))
    print("COMMAND_READ_BYTES", read, file=sys.stderr, flush=True)
atexit.register(said)
from iobench.cli import main
main(sys.argv[1:])
"""


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("fmt, loader", [("memmap", "tensorclass"), ("npy", "dataloader")])
def test_a_cold_command_reads_the_dataset_once_per_timed_epoch(tmp_path, fmt, loader):
    """Around one cold command the kernel counted 2.01x the dataset: the untimed pass after the eviction drew shuffled
    batches, and the disk's read-ahead pulled in much of the file. The whole command, by this process's own count
    (/proc/self/io: other programs on the machine do not count), reads at most 1.05x what its timed epochs read, on a
    dataset of the issue's size (520 MB: the program's own first reads, a few MB, are within the 5%)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    prepare_with_limits(tmp_path, "1e6", fmt)  # the machine's limits are measured beforehand: they read a data file
    common = ["--format", fmt, "--loader", loader, "--data-dir", str(tmp_path / "data"), "--device", "cpu", "-q"]
    # the program's own files read in first (an earlier test's drop_caches, or another program's, evicts torch's
    # libraries: reading them back is not this command reading its dataset twice)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            *common,
            "--runs",
            "1",
            "--max-batches",
            "2",
            "--results",
            str(tmp_path / "warm.jsonl"),
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _COMMAND_READS,
            "run",
            "--format",
            fmt,
            "--loader",
            loader,
            "--cache",
            "cold",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--epochs",
            "2",
            "--data-dir",
            str(tmp_path / "data"),
            "--device",
            "cpu",
            "--results",
            str(tmp_path / "r.jsonl"),
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    read = int(done.stderr.split("COMMAND_READ_BYTES")[1].split()[0])
    (record,) = stored_records(tmp_path / "r.jsonl")
    epochs = sum(record["process_read_bytes"])
    assert epochs >= 1.9 * record["dataset_bytes"], "each cold epoch read the dataset"
    assert read <= 1.05 * epochs, (read, epochs, record["residency_before"])
