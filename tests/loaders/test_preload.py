"""`--loader preload` and gpu-resident's load: the files read once, whole, in large reads inside the first epoch's
clock (cold: O_DIRECT, exactly the dataset's bytes), then every batch gathered in memory; what does not fit is refused
in one line, and a read stopped mid-way leaves no thread behind."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from iobench.data.dataset import generate
from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.loaders import whole_read
from iobench.loaders.whole_read import RowsFile, WholeRead
from iobench.measuring.clocks import time_epoch
from iobench.run.building import build_loader
from tests.conftest import invoke, resolved_run, stored_records

N = 2003  # rows of 48 bytes: pieces end inside rows and blocks


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("preload")
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", "npy,memmap,lmdb", "--data-dir", root, "-q")
    (d,) = root.iterdir()
    return d


@pytest.fixture(scope="module")
def expected(dataset_dir):
    chunks = list(generate(Manifest.load(dataset_dir).spec))
    return np.concatenate([c.features for c in chunks]), np.concatenate([c.labels for c in chunks])


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 4 KiB + a bit: many of them, each starting and ending inside a row and a block."""
    monkeypatch.setattr(whole_read, "PIECE_BYTES", 4096 + 480)


def _epochs(resolved, epochs=3):
    loader = build_loader(resolved)
    out = []
    try:
        for epoch in range(epochs):
            arrived = []
            time_epoch(loader, epoch, lambda b, arrived=arrived: arrived.append((b[0].clone(), b[1].clone())))
            out.append(arrived)
        method = loader.read_method
    finally:
        loader.close()
    return out, method


@pytest.mark.parametrize("fmt", ["npy", "memmap"])
@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize(
    "order",
    [{"shuffle": False}, {"shuffle": True}, {"shuffle": True, "max_batches": 5}],
    ids=["sequential", "shuffle", "short"],
)
def test_every_batch_is_the_orders_samples_the_first_epoch_and_after(
    dataset_dir, expected, small_pieces, fmt, cache, order
):
    features, labels = expected
    resolved = resolved_run(dataset_dir, fmt, "preload", cache=cache, num_workers=3, **order)
    epochs, method = _epochs(resolved)
    assert method == (
        "the whole file in 8 MiB O_DIRECT reads"
        if cache == "cold"
        else "the whole file in 8 MiB reads through the page cache"
    )
    for epoch, arrived in enumerate(epochs):  # the first epoch's views, then the later epochs' gathers
        wanted = np.concatenate(
            [np.arange(w.start, w.stop) if isinstance(w, slice) else w for w in resolved.epoch_order().batches(epoch)]
        )
        got_f = torch.cat([b[0] for b in arrived]).numpy()
        got_l = torch.cat([b[1] for b in arrived]).numpy()
        np.testing.assert_array_equal(got_f, features[wanted])
        np.testing.assert_array_equal(got_l, labels[wanted])
        assert len(wanted) == (5 * 16 if "max_batches" in order else N)
        if not order["shuffle"]:
            assert np.array_equal(wanted, np.arange(N))


def test_preload_reads_only_fixed_layouts_and_refuses_what_does_not_fit(dataset_dir, monkeypatch):
    import iobench.loaders.preload as preload

    with pytest.raises(IobenchError, match="does not read --format lmdb|reads formats whose samples"):
        build_loader(resolved_run(dataset_dir, "lmdb", "preload"))
    monkeypatch.setattr(preload, "available_bytes", lambda device: 1000)
    with pytest.raises(IobenchError, match="holds the dataset in memory: it needs") as refused:
        build_loader(resolved_run(dataset_dir, "npy", "preload"))
    assert "\n" not in str(refused.value)


def test_a_whole_read_stopped_mid_way_ends_its_threads_and_closes_its_file(dataset_dir, small_pieces):
    """Ctrl-C during the load: `run` is left, `stop` waits for the threads (bounded), then the file closes."""
    seen = []

    def slow(first: int, rows: torch.Tensor) -> None:
        seen.append(first)
        time.sleep(0.05)

    layout = resolved_run(dataset_dir, "npy", "preload")
    path = layout.dataset_dir / "npy" / "features.npy"
    reading = WholeRead(RowsFile(path, 128, N, 48), slow, threads=3, direct=True)
    stopper = threading.Timer(0.2, reading.stop)
    stopper.start()
    started = time.monotonic()
    reading.run()
    stopper.join()
    assert time.monotonic() - started < 1.0 and 0 < len(seen) < len(reading.pieces)
    assert not [t for t in threading.enumerate() if t.name.startswith("iobench-whole-read")]
    assert reading.fd == -1


def test_a_failing_piece_is_raised_where_the_read_was_asked_for(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"\0" * 1000)
    with pytest.raises(OSError, match="ends at byte"):
        WholeRead(RowsFile(path, 0, 100, 48), lambda first, rows: None, threads=2, direct=False).run()
    assert not [t for t in threading.enumerate() if t.name.startswith("iobench-whole-read")]


@pytest.mark.long
@pytest.mark.parametrize("loader", ["preload", "gpu-resident"])
def test_a_cold_epoch_reads_the_dataset_inside_its_clock_once(tmp_path, cli, loader):
    """The reads are counted per timed epoch (this process's own, /proc/self/io): each cold epoch of a fresh loader
    reads the dataset's bytes once, within 2%. gpu-resident read it before the clock (0 bytes in its epochs)."""
    invoke("prepare", "--size", "20000", "--shape", "256", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--data-dir",
        tmp_path / "data",
        "--format",
        "npy",
        "--loader",
        loader,
        "--cache",
        "cold",
        "--runs",
        1,
        "--epochs",
        2,
        "--device",
        "cpu",
        "--results",
        results,
        "-q",
    )
    assert r.code == 0, r.err
    (record,) = stored_records(results)
    assert record["read_method"] == "the whole file in 8 MiB O_DIRECT reads"
    for read in record["process_read_bytes"]:
        assert abs(read / record["dataset_bytes"] - 1) < 0.02, (read, record["dataset_bytes"])


@pytest.mark.long
@pytest.mark.slow
def test_a_memory_cgroup_smaller_than_the_dataset_is_refused_in_one_line(tmp_path):
    """In a 1.5 GB memory cgroup, preload of a 2.08 GB dataset was SIGKILLed by the OOM killer with no message: the
    process saw the machine's MemAvailable, not its cgroup's limit. The group here leaves room for iobench (measured
    by a run that holds nothing) and half the dataset."""
    import sys

    from tests.conftest import ROOT
    from tests.memory_cgroup import memory_home, run_in_memory_cgroup

    memory_home()  # skips here, with the reason, where no cgroup can be made
    invoke("prepare", "--size", "100000", "--shape", "128", "--formats", "npy", "--data-dir", tmp_path / "d", "-q")
    dataset = sum(p.stat().st_size for p in (tmp_path / "d").rglob("*.npy"))  # 52 MB
    common = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--format",
        "npy",
        "--data-dir",
        str(tmp_path / "d"),
        "--runs",
        "1",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--cache",
        "as-is",
        "--results",
        str(tmp_path / "r.jsonl"),
        "-q",
    ]
    peaks = []
    for _ in range(2):  # the first may measure this machine's limits, which the second finds stored
        done, peak = run_in_memory_cgroup([*common, "--loader", "dataloader", "--max-batches", "1"], 2**31, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        peaks.append(peak)
    baseline = min(peaks)
    done, _ = run_in_memory_cgroup([*common, "--loader", "preload"], baseline + dataset // 2, cwd=ROOT)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and lines[-1].startswith("iobench: error: --loader preload"), done.stderr[-2000:]
    assert "left under the memory cgroup" in lines[-1] and "Traceback" not in done.stderr
