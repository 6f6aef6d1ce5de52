"""Ranks: shards that cover every sample once, one aggregated record, `--nproc`'s ranks on loopback that end with
iobench, and the multi-node script."""

from __future__ import annotations

import math
import os
import socket
import statistics
import subprocess
import sys

import numpy as np
import pytest
import torch

from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.loaders.order import DistributedSamplerOrder, EpochOrder, indices_of
from iobench.measuring.aggregate import RankMeasurements, combine
from iobench.measuring.clocks import EpochTiming
from iobench.measuring.limit_rule import ceiling, with_limits
from iobench.results.limits import MachineLimits
from iobench.run.launch import rank_argv, shown
from iobench.system.world import World, launched_by_torchrun, rank_device
from tests.conftest import ROOT, console_script, invoke, planted, record_of, stored_records
from tests.process_tree import Watched, off_loopback
from tests.rank_delivery import combinations

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

N = 203  # odd: the two ranks' shares differ by one sample, and DistributedSampler would pad one


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    invoke("prepare", "--size", N, "--shape", "3,4", "--data-dir", root / "data", "-q", "--formats", "all")
    invoke("limits", "--data-dir", root / "data", "--results", root / "r.jsonl", "--probe-size", "16M")
    (d,) = (root / "data").iterdir()
    return d


def _torchrun(*args, nproc: int = 2, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, **kwargs)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_rank_shares_cover_every_sample_once(world, shuffle):
    for order in (
        *(EpochOrder(N, 16, shuffle, rank=r, world=world) for r in range(world)),
        *(EpochOrder(N, 16, shuffle, block_size=5, rank=r, world=world) for r in range(world) if shuffle),
        *(DistributedSamplerOrder(N, 16, shuffle, rank=r, world=world) for r in range(world)),
    ):
        assert sum(1 for _ in order.batches(3)) == order.n_batches()
    for kind in (EpochOrder, DistributedSamplerOrder):
        shares = [
            np.concatenate([indices_of(b) for b in kind(N, 16, shuffle, rank=r, world=world).batches(3)])
            for r in range(world)
        ]
        assert sorted(np.concatenate(shares).tolist()) == list(range(N)), kind
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_distributed_sampler_order_is_torchs_without_the_padding():
    from torch.utils.data import DistributedSampler

    for rank in range(2):
        sampler = DistributedSampler(range(N), num_replicas=2, rank=rank, shuffle=True, seed=7)
        sampler.set_epoch(4)
        ours = DistributedSamplerOrder(N, 16, True, seed=7, rank=rank, world=2).indices(4)
        theirs = list(sampler)
        assert ours.tolist() == theirs[: len(ours)]
        assert len(theirs) - len(ours) == (1 if rank == 1 else 0)  # torch repeats one sample on rank 1


def test_a_sequential_rank_reads_one_contiguous_run():
    batches = list(EpochOrder(N, 16, False, rank=1, world=2).batches(0))
    assert all(isinstance(b, slice) for b in batches)
    assert batches[0].start == N // 2 and batches[-1].stop == N


@pytest.mark.long
def test_two_gloo_ranks_deliver_every_sample_exactly_once(dataset_dir, tmp_path):
    """Every (format, loader, order) through torchrun and gloo: the ranks' deliveries are the dataset."""
    _torchrun("-m", "tests.rank_delivery", str(dataset_dir), str(tmp_path))
    names = [name for name, _ in combinations(dataset_dir)]
    assert len(list(tmp_path.glob("*.npy"))) == len(names) * 2 * 2
    for name in names:
        for epoch in (0, 1):
            shares = [np.load(tmp_path / f"{name}-e{epoch}-r{rank}.npy") for rank in (0, 1)]
            assert all(len(s) in (N // 2, N // 2 + 1) for s in shares), (name, [len(s) for s in shares])
            assert sorted(np.concatenate(shares).tolist()) == list(range(N)), name
    # shuffled epochs differ, and the two ranks of one epoch read different samples
    e0, e1 = (np.load(tmp_path / f"npy-dataloader-shuffle-e{e}-r0.npy") for e in (0, 1))
    assert e0.tolist() != e1.tolist()


def _check_aggregated(record: dict, world: int, nodes: int) -> None:
    assert record["world_size"] == world and record["nodes"] == nodes and record["backend"] == "gloo"
    assert record["samples_per_epoch"] == N and not record["partial"]
    ranks = record["rank_epoch_seconds"]
    assert len(ranks) == world and all(len(r) == len(record["epoch_seconds"]) for r in ranks)
    assert record["epoch_seconds"] == [max(col) for col in zip(*ranks, strict=True)]
    assert record["samples_per_s"] == pytest.approx(N / record["epoch_seconds_median"])
    ratios = [max(col) / min(col) for col in zip(*ranks, strict=True)]
    assert record["straggler_ratio"] == pytest.approx(statistics.median(ratios)) and record["straggler_ratio"] >= 1
    assert record["rank_mb_per_s_min"] <= record["rank_mb_per_s_max"]
    assert record["torch_threads"] >= 1


@pytest.mark.long
def test_torchrun_writes_one_aggregated_record(dataset_dir, tmp_path):
    results = dataset_dir.parent.parent / "torchrun.jsonl"
    r = _torchrun(
        "-m",
        "iobench",
        "run",
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--device",
        "cpu",
        "--data-dir",
        dataset_dir.parent,
        "--results",
        results,
        "--runs",
        "2",
        "--cache",
        "cold",
        "-q",
    )
    (record,) = stored_records(results)
    _check_aggregated(record, world=2, nodes=1)
    assert record["shard"] == "contiguous" and record["cache"] == "cold"
    assert record["residency_before"] == [0.0, 0.0] and record["eviction_method"]
    # the table's title wraps to the table's width wherever the CPU's name puts the break ("Intel(R) Xeon(R)
    # Processor" split "2 processes on | 1 node(s)"): read as words
    assert "2 processes on 1 node(s)" in " ".join(r.stdout.replace("│", " ").split()), r.stdout
    assert r.stdout.count("record(s) appended") == 1


@pytest.mark.long
def test_nproc_launches_torchrun_with_the_distributed_sampler(dataset_dir):
    results = dataset_dir.parent.parent / "nproc.jsonl"
    env = dict(os.environ, COLUMNS="200", OMP_NUM_THREADS="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--nproc",
            "2",
            "--format",
            "npy",
            "--loader",
            "dataloader",
            "--device",
            "cpu",
            "--data-dir",
            str(dataset_dir.parent),
            "--results",
            str(results),
            "--runs",
            "2",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "launching: 2 ranks on this machine (their store a file of this user's): iobench run" in r.stderr
    (record,) = stored_records(results)
    _check_aggregated(record, world=2, nodes=1)
    assert record["shard"] == "distributed-sampler"


@pytest.mark.long
def test_nproc_ranks_and_rivals_import_the_running_iobench_not_the_working_directorys(dataset_dir, tmp_path):
    """a folder `iobench/` in the working directory ran its code in every torchrun process."""
    marker = planted(tmp_path)
    results = dataset_dir.parent.parent / "planted.jsonl"  # beside the module's limits
    env = dict(os.environ, COLUMNS="200", OMP_NUM_THREADS="1")
    r = subprocess.run(
        [
            console_script(),
            "run",
            "--nproc",
            "2",
            "--format",
            "npy",
            "--loader",
            "dataloader",
            "--device",
            "cpu",
            "--data-dir",
            str(dataset_dir.parent),
            "--results",
            str(results),
            "--runs",
            "1",
            "--cpu-contention",
            "1",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists(), f"planted code ran: {marker.read_text()}"
    (record,) = stored_records(results)
    assert record["world_size"] == 2


@pytest.mark.long
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_nproc_listens_on_loopback_only_and_no_rank_outlives_iobench(dataset_dir, tmp_path, sig):
    """Under torchrun --standalone the rendezvous store listened on `*:PORT`, and a stopped iobench left its ranks
    running. iobench's PID alone is signalled, not its group: no rank or worker of a rank is left, every socket the
    tree listened on was on loopback, and iobench said it stopped."""
    import signal

    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--nproc",
            "2",
            "--format",
            "npy",
            "--loader",
            "dataloader",
            "--num-workers",
            "1",
            "--device",
            "cpu",
            "--data-dir",
            str(dataset_dir.parent),
            "--batch-size",
            "4",
            "--results",
            str(tmp_path / "r.jsonl"),
            "--runs",
            "50",
            "--step",
            "sleep:50",
            "-q",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    watched = Watched(proc)
    # a rank: the step in its arguments, without --nproc (iobench's own has both)
    ranks = lambda w: [p for p in w.seen if "\0sleep:50\0" in (c := _cmdline(p)) and "--nproc" not in c]  # noqa: E731
    watched.until(lambda w: len(ranks(w)) == 2 and len({pid for pid, _, _ in w.listened}) >= 3)
    watched.until(lambda w: len(w.seen) >= 4)  # each rank's DataLoader worker
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert not off_loopback(watched.listened), watched.listened
    assert not watched.survivors(), err[-2000:]
    if sig != "SIGKILL":
        assert proc.returncode == 128 + getattr(signal, sig) and "interrupted" in err, err[-2000:]
        assert "Traceback" not in err, err[-3000:]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().rstrip("\0")
    except OSError:
        return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.long
def test_multinode_script_joins_two_nodes_on_loopback(dataset_dir):
    """Two torchrun agents, one 'node' each, meet through c10d rendezvous on 127.0.0.1."""
    results = dataset_dir.parent.parent / "multinode.jsonl"
    env = dict(
        os.environ,
        NNODES="2",
        NPROC_PER_NODE="1",
        RDZV_ENDPOINT=f"127.0.0.1:{_free_port()}",
        JOB_ID="iobench-test",
        PYTHON=sys.executable,
        OMP_NUM_THREADS="1",
        COLUMNS="200",
    )
    args = [
        "bash",
        str(ROOT / "scripts" / "launch_multinode.sh"),
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--device",
        "cpu",
        "--data-dir",
        str(dataset_dir.parent),
        "--results",
        str(results),
        "--runs",
        "2",
        "-q",
    ]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    nodes = [subprocess.Popen(args, env=env, cwd=ROOT, **pipes) for _ in range(2)]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], [err[-2000:] for _, err in outputs]
    (record,) = stored_records(results)
    _check_aggregated(record, world=2, nodes=2)


def test_nproc_refusals_are_one_line(dataset_dir, cli):
    common = ["--data-dir", dataset_dir.parent, "--results", dataset_dir.parent / "x.jsonl", "-q"]
    r = cli("run", "--nproc", "2", "--format", "npy", "--loader", "dataloader", "--block-shuffle", "4", *common)
    assert r.code == 2 and "DistributedSampler" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("run", "--nproc", "2", "--device", "cuda:1", "--format", "npy", *common)
    assert r.code == 2 and "cuda:LOCAL_RANK" in r.err
    r = cli("run", "--nproc", "0", "--format", "npy", *common)
    assert r.code == 2 and "Invalid value for '--nproc'" in r.err and "greater than or equal to 1" in r.err


@pytest.mark.skipif(not FORMATS.installed("zarr"), reason="zarr is not installed (pip install 'iobench[zarr]')")
def test_a_native_pipeline_without_rank_splitting_is_refused_under_torchrun(dataset_dir, cli):
    common = ["--data-dir", dataset_dir.parent, "--results", dataset_dir.parent / "x.jsonl", "-q"]
    r = cli("run", "--nproc", "2", "--format", "zarr", "--loader", "native", *common)
    assert r.code == 2 and "no rank splitting of its own" in r.err and len(r.err.strip().splitlines()) == 1


SPLITTING = [f for f in ("webdataset", "arrow", "tfrecord", "litdata") if FORMATS.installed(f)]
# LitData under torchrun keeps its default drop_last: each rank the same whole batches (16 samples each)
LITDATA_DELIVERED = 2 * (N // 16 // 2) * 16


@pytest.fixture(scope="module")
def sharded_dir(tmp_path_factory):
    """The formats whose own pipelines split ranks, in shards of about 50 samples (4-5 of them)."""
    if not SPLITTING:
        pytest.skip("none of webdataset, datasets, tfrecord, litdata is installed (pip install 'iobench[formats]')")
    root = tmp_path_factory.mktemp("sharded")
    shards = ["--format-option", "webdataset.shard_samples=50", "--format-option", "tfrecord.shard_samples=50"]
    formats = ["--formats", ",".join(SPLITTING)]
    invoke("prepare", "--size", N, "--shape", "3,4", "--data-dir", root, "-q", *formats, *shards)
    (d,) = root.iterdir()
    return d


def test_the_libraries_own_rank_splitting_delivers_every_sample_once(sharded_dir, tmp_path):
    """WebDataset's split_by_node, datasets' split_dataset_by_node and TFRecord's shards by rank, in order,
    shuffled and with workers: the two ranks together read the dataset exactly once per epoch. LitData's
    StreamingDataset drops what does not fill a whole batch on every rank: never a sample twice."""
    _torchrun("-m", "tests.rank_delivery", str(sharded_dir), str(tmp_path), "native")
    from tests.rank_delivery import native_combinations

    names = [name for name, _ in native_combinations(sharded_dir)]
    assert {n.split("-")[0] for n in names} == set(SPLITTING)
    for name in names:
        for epoch in (0, 1):
            shares = [np.load(tmp_path / f"{name}-e{epoch}-r{rank}.npy") for rank in (0, 1)]
            assert all(len(s) for s in shares), (name, "a rank read nothing")
            got = sorted(np.concatenate(shares).tolist())
            if name.startswith("litdata"):
                assert len(got) == LITDATA_DELIVERED and len(set(got)) == len(got) and got[0] >= 0, name
                assert [len(s) for s in shares] == [LITDATA_DELIVERED // 2] * 2, name
            else:
                assert got == list(range(N)), name


def test_a_native_run_under_torchrun_records_the_librarys_split(sharded_dir):
    results = sharded_dir.parent / "native.jsonl"
    fmt = SPLITTING[0]
    _torchrun(
        "-m",
        "iobench",
        "run",
        "--format",
        fmt,
        "--loader",
        "native",
        "--device",
        "cpu",
        "--data-dir",
        sharded_dir.parent,
        "--results",
        results,
        "--runs",
        "1",
        "-q",
    )
    (record,) = stored_records(results)
    assert record["world_size"] == 2 and record["samples_per_epoch"] == N
    assert record["shard"] == FORMATS[fmt].native_rank_split


@pytest.mark.skipif(
    not FORMATS.installed("litdata"), reason="litdata is not installed (pip install 'iobench[litdata]')"
)
def test_litdatas_dropped_samples_under_torchrun_are_recorded_and_warned(sharded_dir):
    results = sharded_dir.parent / "litdata.jsonl"
    r = _torchrun(
        "-m",
        "iobench",
        "run",
        "--format",
        "litdata",
        "--loader",
        "native",
        "--device",
        "cpu",
        "--data-dir",
        sharded_dir.parent,
        "--results",
        results,
        "--runs",
        "1",
        "--batch-size",
        "16",
    )
    (record,) = stored_records(results)
    assert record["samples_per_epoch"] == LITDATA_DELIVERED
    assert record["shard"] == FORMATS["litdata"].native_rank_split
    held, dropped = f"{N:,}", N - LITDATA_DELIVERED
    warned = f"delivered {LITDATA_DELIVERED:,} samples per epoch of the {held} the dataset holds ({dropped} dropped"
    assert warned in " ".join((r.stdout + r.stderr).split()), r.stderr[-2000:]


def test_a_native_pipeline_with_fewer_shards_than_ranks_is_refused(dataset_dir, cli):
    """The module's dataset has one shard per format (10,000 samples a shard)."""
    if "webdataset" not in SPLITTING:
        pytest.skip("webdataset is not installed (pip install 'iobench[webdataset]')")
    common = ["--data-dir", dataset_dir.parent, "--results", dataset_dir.parent / "y.jsonl", "-q"]
    r = cli("run", "--nproc", "2", "--format", "webdataset", "--loader", "native", *common)
    assert r.code == 2 and "1 shard(s) cannot be shared by 2 ranks" in r.err and len(r.err.strip().splitlines()) == 1


def test_ranks_run_the_running_iobench_with_the_arguments_given():
    argv = ["run", "--format", "npy", "--quiet"]
    args = rank_argv(argv)
    assert args[0] == sys.executable and args[-5:] == ["iobench", "run", "--format", "npy", "--quiet"]
    assert (
        shown(argv, 4)
        == "4 ranks on this machine (their store a file of this user's): iobench run --format npy --quiet"
    )
    assert not launched_by_torchrun({"RANK": "0", "WORLD_SIZE": "2"})
    assert launched_by_torchrun({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})


def test_rank_devices():
    assert rank_device("cpu", 3) == "cpu"
    with pytest.raises(IobenchError, match="cuda:LOCAL_RANK"):
        rank_device("cuda:0", 1)
    if torch.cuda.is_available():
        assert rank_device("cuda", 0) == "cuda:0"
    else:
        assert rank_device("auto", 1) == "cpu"
        with pytest.raises(IobenchError, match="no CUDA GPU"):
            rank_device("cuda", 0)


class FakeWorld(World):
    """Two ranks whose rows are given: combine() as rank 0 sees it after all_gather."""

    def gather(self, values):
        return [values, self.other]  # type: ignore[attr-defined]


def _measured(seconds: list[float], samples: int, node_main_reads: float | None, rss: int) -> RankMeasurements:
    timings = [EpochTiming(s, s / 10, 4, samples, s / 2, 0.0, 0.0, False) for s in seconds]
    system = [{"device_read_bytes": node_main_reads, "process_read_bytes": 1000} for _ in seconds]
    total = {"cpu_utilisation": 0.5, "cpu_iowait": 0.1}
    peak = {"peak_rss_bytes": rss, "peak_rss_children_bytes": 0}
    return RankMeasurements(
        timings, system, [0.0] * len(seconds), [1.0] * len(seconds), [0.5], total, peak, (math.nan, math.nan)
    )


def test_combine_takes_the_slowest_rank_and_sums_samples():
    from iobench.measuring.aggregate import _row

    rank1 = World(rank=1, size=2, local_rank=1, local_size=2, backend="gloo")
    other = _row(_measured([2.0, 4.0], 100, 5000.0, 300), rank1)  # not node main: its disk reads are not counted
    world = FakeWorld(rank=0, size=2, local_rank=0, local_size=2, backend="gloo")
    object.__setattr__(world, "other", other)
    combined = combine(_measured([1.0, 3.0], 101, 7000.0, 200), world, ["a", "a"], 512, "contiguous")
    assert [t.seconds for t in combined.timings] == [2.0, 4.0]
    assert [t.samples for t in combined.timings] == [201, 201] and combined.timings[0].batches == 8
    ranks, system = combined.ranks, combined.system
    assert ranks.nodes == 1 and ranks.hosts == ["a"] and ranks.shard == "contiguous"
    assert ranks.rank_epoch_seconds == [[1.0, 3.0], [2.0, 4.0]]
    assert ranks.straggler_ratio == pytest.approx(statistics.median([2.0, 4 / 3]))
    assert ranks.rank_samples_per_s == pytest.approx([statistics.median([101, 101 / 3]), statistics.median([50, 25])])
    assert system.device_read_bytes == [7000, 7000] and system.process_read_bytes == [2000, 2000]
    assert system.peak_rss_bytes == 300 and system.cpu_utilisation == 0.5 and system.setup_seconds == [0.5]
    assert system.cuda_max_memory_allocated_bytes is None  # CPU ranks report no CUDA peaks


def test_limits_scale_with_nodes_and_ranks():
    limits = MachineLimits(
        hostname="h",
        data_device="/dev/x",
        storage_read_mb_per_s=1000.0,
        page_cache_read_mb_per_s=5000.0,
        h2d_pinned_mb_per_s=2000.0,
    )
    one = {"loader": "tensorclass", "format": "memmap", "cache": "cold", "device": "cpu"}
    assert ceiling(record_of(**one), limits) == ("storage_read_mb_per_s", 1000.0)
    assert ceiling(record_of(**one, nodes=2, world_size=4), limits) == ("storage_read_mb_per_s", 2000.0)
    gpu = {**one, "cache": "warm", "device": "cuda:0", "pin_memory": True}
    assert ceiling(record_of(**gpu), limits) == ("h2d_pinned_mb_per_s", 2000.0)
    assert ceiling(record_of(**gpu, world_size=2), limits) == ("h2d_pinned_mb_per_s", 4000.0)
    assert ceiling(record_of(**gpu, world_size=3), limits) == ("page_cache_read_mb_per_s", 5000.0)
    assert ceiling(record_of(**{**gpu, "loader": "gpu-resident"}), limits) is None
    share = with_limits(record_of(**one, mb_per_s=250.0), limits).limit
    assert (share.limit_name, share.percent_of_limit) == ("storage_read_mb_per_s", 25.0)


def test_records_from_before_world_size_count_as_one_process():
    assert record_of().identity() == record_of(world_size=1).identity()
    assert record_of().identity() != record_of(world_size=2).identity()
    assert record_of().identity() != record_of(backend="gloo").identity(), "torchrun and plain runs differ"


def test_single_world_needs_no_process_group():
    world = World()
    world.barrier()
    assert world.gather([1.0, 2.0]) == [[1.0, 2.0]] and world.all_true(True) and not world.all_true(False)
    assert len(world.hostnames()) == 1 and world.nodes == 1 and world.is_main and world.is_node_main


def test_reports_keep_torchrun_and_plain_runs_apart():
    from iobench.plan.labels import settings_label
    from iobench.results.store import latest_per_config

    base = {"format": "npy", "loader": "dataloader", "batch_size": 1024, "num_workers": 0, "fetch": "batch"}
    plain = record_of(**base, world_size=1, backend=None, torch_threads=2)
    one = record_of(**base, world_size=1, backend="gloo", torch_threads=1, nodes=1)
    two = record_of(**base, world_size=2, backend="gloo", torch_threads=1, nodes=2)
    later = record_of(**base, world_size=2, backend="gloo", torch_threads=1, nodes=2, timestamp="later")
    assert latest_per_config([plain, one, two, later]) == [plain, one, later]
    assert settings_label(plain) == "bs=1024 w=0 fetch=batch"
    assert settings_label(one) == "ranks=1 bs=1024 w=0 threads=1 fetch=batch"
    assert settings_label(two).startswith("ranks=2/2n ")


def test_other_commands_refuse_to_run_under_torchrun(cli, monkeypatch, tmp_path):
    for name, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    r = cli("prepare", "--size", "100", "--data-dir", tmp_path, "-q")
    assert r.code == 2 and "rank 1: `iobench prepare` does not run under torchrun" in r.err
    assert not any(tmp_path.iterdir())


RANK_STEPS = """
import os, time
def fails(features, labels):
    if os.environ.get("RANK") == "1":
        raise ValueError("rank 1's model is broken")
def hangs(features, labels):
    if os.environ.get("RANK") == "1":
        time.sleep(3600)
"""


@pytest.mark.long
@pytest.mark.parametrize("step", ["fails", "hangs"])
def test_a_rank_that_fails_or_hangs_ends_the_nproc_run_in_a_line_per_rank(dataset_dir, tmp_path, step):
    """One rank failing printed rank 0's 60-line gloo traceback ("Connection closed by peer") beside iobench's line;
    a step hung on one rank held the run until SIGTERM. Each rank says one line; --rank-timeout bounds the wait."""
    import time

    (tmp_path / "rank_steps.py").write_text(RANK_STEPS)
    started = time.monotonic()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--nproc",
            "2",
            "--format",
            "npy",
            "--loader",
            "dataloader",
            "--device",
            "cpu",
            "--data-dir",
            str(dataset_dir.parent),
            "--results",
            str(dataset_dir.parents[1] / "r.jsonl"),
            "-q",
            "--runs",
            "1",
            "--step",
            f"rank_steps:{step}",
            "--rank-timeout",
            "15",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [line for line in r.stderr.splitlines() if line.startswith("iobench:")]
    assert lines[-1].startswith("iobench: error: ranks: rank"), lines
    assert not [line for line in r.stderr.splitlines() if line.startswith(("E1", "[rank"))], r.stderr[-3000:]
    if step == "fails":
        assert "iobench: error: rank 1: the step rank_steps:fails raised at batch 1" in r.stderr, lines
        assert "iobench: error: rank 0: another rank ended mid-run" in r.stderr
    else:
        assert "iobench: error: rank 0: the other ranks did not arrive within 15 s" in r.stderr
        assert time.monotonic() - started < 120
