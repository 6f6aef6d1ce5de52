"""What reaches the device is exactly the dataset: every sample once per epoch, values identical."""

import importlib.util
import pickle
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from iobench.data.dataset import generate
from iobench.data.manifest import Manifest
from iobench.errors import IobenchError, RunFailed
from iobench.formats import FORMATS
from iobench.formats.base import ReaderTraits
from iobench.loaders import LOADERS, LoaderName
from iobench.loaders.order import EpochOrder, as_slice
from iobench.measuring.clocks import time_bare_epoch, time_epoch
from iobench.plan.selection import parse_pairs
from iobench.run.building import build_loader
from tests.conftest import NEEDS_SPDL, NEEDS_TORCHDATA, format_param, resolved_run, run_config

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

N = 203  # not a multiple of the batch size: the last batch is short


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    from iobench.cli import main

    root = tmp_path_factory.mktemp("data")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "prepare",
                "--size",
                str(N),
                "--shape",
                "3,4",
                "--data-dir",
                str(root),
                "-q",
                "--lmdb-samples-per-record",
                "2",
                "--formats",
                "all",
            ]
        )
    assert exit_info.value.code == 0
    (d,) = root.iterdir()
    return d


@pytest.fixture(scope="module")
def expected(dataset_dir):
    spec = Manifest.load(dataset_dir).spec
    chunks = list(generate(spec))
    return np.concatenate([c.features for c in chunks]), np.concatenate([c.labels for c in chunks])


_config = resolved_run


def _collect(resolved):
    """Every batch of one epoch as it arrived on the device, by a step that keeps them."""
    loader = build_loader(resolved)
    arrived = []
    try:
        timing = time_epoch(loader, 0, lambda b: arrived.append((b[0].clone(), b[1].clone())))
    finally:
        loader.close()
    return arrived, timing


def _combo(fmt: str, loader: LoaderName) -> object:
    """A format whose library is not installed is skipped with the extra to install; so are nodes and spdl, and a
    loader that reads into device memory without CUDA."""
    param = format_param(fmt, loader.value)
    needs = {LoaderName.NODES: [NEEDS_TORCHDATA], LoaderName.SPDL: [NEEDS_SPDL]}.get(loader, [])
    if LOADERS[loader].needs_cuda:  # this suite runs on the CPU device; scripts/gpu_smoke.sh runs these on CUDA
        needs = [pytest.mark.skip(reason="reads into device memory: needs CUDA (scripts/gpu_smoke.sh)")]
    if loader is LoaderName.DALI:  # this suite's samples are float rows; DALI decodes images
        needs = [pytest.mark.skip(reason="DALI reads images: tests/loaders/test_dali.py")]
    return pytest.param(*param.values, marks=[*param.marks, *needs], id=param.id) if needs else param


RAY = (LoaderName.RAY, LoaderName.RAY_DATA)  # a cluster to start: tests.loaders.test_ray_actors.py
COMBOS = [_combo(f, ld) for ld in LoaderName if ld not in RAY for f in LOADERS[ld].reads]


@pytest.mark.parametrize(
    "order",
    [{"shuffle": False}, {"shuffle": True}, {"shuffle": True, "block_size": 5}],
    ids=["sequential", "shuffle", "block"],
)
@pytest.mark.parametrize("fmt, loader", COMBOS)
def test_every_sample_arrives_once_with_its_values(dataset_dir, expected, fmt, loader, order):
    features, labels = expected
    extra = {"fetch": "item"} if loader == "dataloader" and order.get("block_size") else {}
    arrived, timing = _collect(_config(dataset_dir, fmt, loader, **order, **extra))
    got_f = torch.cat([b[0] for b in arrived]).numpy()
    got_l = torch.cat([b[1] for b in arrived]).numpy()
    assert timing.samples == N and timing.batches == -(-N // 16)
    assert got_f.dtype == features.dtype and got_l.dtype == np.int64

    # Row-sort both sides: equal multisets of (features, label) rows, i.e. every sample exactly once.
    def rows(f, lb):
        return np.sort(
            np.concatenate([f.reshape(len(f), -1).view(np.uint32), lb[:, None].view(np.uint32)], axis=1)
            .view([("", np.uint32)] * (f[0].size + 2))
            .ravel()
        )

    assert np.array_equal(rows(got_f, got_l), rows(features, labels))
    if not order["shuffle"]:
        np.testing.assert_array_equal(got_f, features)
    else:
        assert not np.array_equal(got_f, features), "a shuffled epoch came back in order"


@pytest.mark.parametrize("fmt, loader", [("npy", "dataloader"), ("lmdb", "dataloader"), ("memmap", "tensorclass")])
def test_workers_deliver_the_exact_dataset(dataset_dir, expected, fmt, loader):
    features, _ = expected
    arrived, _ = _collect(_config(dataset_dir, fmt, loader, shuffle=False, num_workers=2, prefetch_factor=2))
    np.testing.assert_array_equal(torch.cat([b[0] for b in arrived]).numpy(), features)


DELIVERING = [
    pytest.param("npy", "dataloader", 1, id="npy-dataloader"),
    *(pytest.param(f, "dataloader", 3, id=f"{f}-dataloader-3-fetch-threads") for f in ("npy", "lmdb")),
    *(pytest.param(f, "nodes", 1, marks=NEEDS_TORCHDATA, id=f"{f}-nodes") for f in ("npy", "lmdb", "hdf5", "files")),
    *(pytest.param(f, "spdl", 1, marks=NEEDS_SPDL, id=f"{f}-spdl") for f in ("npy", "lmdb", "hdf5", "files")),
]


@pytest.mark.parametrize(("fmt", "kind", "threads"), DELIVERING)
@pytest.mark.parametrize("fetch", ["batch", "item"])
@pytest.mark.parametrize("in_order", [True, False])
def test_workers_deliver_every_sample_once_and_say_which(dataset_dir, expected, fmt, kind, threads, fetch, in_order):
    """Shuffled, two workers (DataLoader processes, with threads sharing each batch inside each one, or not;
    threads for nodes, each through its own reader, an LMDB transaction being one thread's), batches handed over in
    order or as they finish: every sample once with its own label, and the order the runner scores is the order
    that arrived, whether it is the sampler's (a DataLoader in order carries nothing) or carried with the batches
    (under the labels)."""
    features, labels = expected
    resolved = _config(
        dataset_dir, fmt, kind, num_workers=2, fetch=fetch, in_order=in_order, shuffle=True, fetch_threads=threads
    )
    loader = build_loader(resolved)
    try:
        for epoch in (0, 1):
            got = [(f.numpy(), lb.numpy()) for f, lb in loader.epoch(epoch)]
            delivered = loader.delivered(epoch, N)
            assert sorted(delivered.tolist()) == list(range(N)), "every sample exactly once"
            assert not np.array_equal(delivered, np.arange(N)), "a shuffled epoch"
            np.testing.assert_array_equal(np.concatenate([f for f, _ in got]), features[delivered])
            np.testing.assert_array_equal(np.concatenate([lb for _, lb in got]), labels[delivered])
            assert all(lb.dtype == np.int64 and lb.ndim == 1 for _, lb in got), "labels as the reader gave them"
            sizes = sorted(len(lb) for _, lb in got)  # out of order, the short batch may come first
            assert sizes == [N % 16] + [16] * (N // 16), "batches of the run's size"
    finally:
        loader.close()


def test_nodes_drop_only_torchdatas_join_of_its_own_thread(monkeypatch):
    """A cut epoch's pipeline may be finalised by one of its own threads (torchdata 0.11 joins them in
    `__del__`): that traceback is dropped, once-installed, and every other unraisable still reported."""
    import sys
    from types import SimpleNamespace

    from iobench.loaders import nodes as nodes_loader

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    nodes_loader._quiet_self_joins()
    nodes_loader._quiet_self_joins()

    def finaliser():
        pass

    finaliser.__module__ = "torchdata.nodes.map"
    join = RuntimeError("cannot join current thread")
    other = SimpleNamespace(exc_type=RuntimeError, exc_value=RuntimeError("boom"), object=finaliser)
    elsewhere = SimpleNamespace(exc_type=RuntimeError, exc_value=join, object=print)
    sys.unraisablehook(SimpleNamespace(exc_type=RuntimeError, exc_value=join, object=finaliser))
    sys.unraisablehook(other)
    sys.unraisablehook(elsewhere)
    assert reported == [other, elsewhere]


def test_nodes_without_torchdata_is_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchdata" else real(name, *a))
    with pytest.raises(IobenchError, match=r"pip install 'iobench\[torchdata\]'"):
        run_config("npy", "nodes")


@pytest.mark.parametrize("fmt", [format_param(f) for f in ("npy", "lmdb", "hdf5", "files", "zarr")])
@pytest.mark.parametrize("fetch", ["batch", "item"])
@pytest.mark.parametrize("shuffle", [False, True], ids=["sequential", "shuffle"])
def test_fetch_threads_without_workers_deliver_each_batch_whole_and_in_order(
    dataset_dir, expected, fmt, fetch, shuffle
):
    """This process's threads share each batch (a run of samples in order, an index array shuffled): the
    batches are the ones one thread reads, sample for sample, and closing ends the threads and their readers."""
    arrived, _ = _collect(_config(dataset_dir, fmt, "dataloader", fetch=fetch, shuffle=shuffle, fetch_threads=4))
    alone, _ = _collect(_config(dataset_dir, fmt, "dataloader", fetch=fetch, shuffle=shuffle))
    assert len(arrived) == len(alone) == -(-N // 16)
    for (fa, la), (fb, lb) in zip(arrived, alone, strict=True):
        assert torch.equal(fa, fb) and torch.equal(la, lb)
    if not shuffle:
        np.testing.assert_array_equal(torch.cat([b[0] for b in arrived]).numpy(), expected[0])


class _BarrierReader:
    """Every piece of a batch waits at one barrier: it passes only if the pieces are read at the same time."""

    traits = ReaderTraits()
    directory = None  # a reader of objects: each thread opens its own at once

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=30)
        self.threads: set[int] = set()
        self.closed: list[int] = []

    @property
    def handle(self) -> object:
        return self

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.threads.add(threading.get_ident())
        self.barrier.wait()
        return indices.astype(np.float32)[:, None], indices.astype(np.int64)

    def read_range(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self.batch(np.arange(start, stop))

    def close(self) -> None:
        self.closed.append(threading.get_ident())


def test_fetch_threads_read_the_pieces_of_a_batch_at_once_and_put_them_back_in_order():
    from iobench.loaders.threads import FetchThreads, split

    reader = _BarrierReader(3)
    threads = FetchThreads(reader, 3)
    try:
        indices = np.array([7, 1, 5, 0, 9, 2, 4])
        features, labels = threads.batch(indices)  # three pieces, each waiting for the other two
        np.testing.assert_array_equal(labels, indices)
        np.testing.assert_array_equal(features[:, 0], indices.astype(np.float32))
        _, labels = threads.batch(slice(10, 17))
        np.testing.assert_array_equal(labels, np.arange(10, 17))
        assert len(reader.threads) == 3 and threading.get_ident() not in reader.threads
        started = FetchThreads(SimpleNamespace(traits=ReaderTraits(), directory=None), 2)
        started._started()
        handed = pickle.loads(pickle.dumps(started))  # as a worker started by spawn gets it: without the pool
        assert handed.threads == 2 and handed._pool is None
        started.close()
    finally:
        threads.close()
    assert len(reader.closed) == 3, "each thread's reader is closed"
    assert [p.tolist() for p in split(np.array([3, 1]), 4)] == [[3], [1]], "never an empty piece"
    assert split(slice(0, 10), 3) == [slice(0, 3), slice(3, 6), slice(6, 10)]


@pytest.mark.parametrize("fmt, loader", [("hdf5", "dataloader"), ("memmap", "tensorclass")])
def test_prefetch_thread_delivers_the_exact_dataset(dataset_dir, expected, fmt, loader):
    features, _ = expected
    arrived, _ = _collect(_config(dataset_dir, fmt, loader, shuffle=False, prefetch_thread=3))
    np.testing.assert_array_equal(torch.cat([b[0] for b in arrived]).numpy(), features)


@pytest.mark.parametrize("fmt", [format_param(f) for f in LOADERS[LoaderName.DATALOADER].reads])
def test_item_fetch_matches_batch_fetch(dataset_dir, fmt):
    a, _ = _collect(_config(dataset_dir, fmt, "dataloader", fetch="item", seed=3))
    b, _ = _collect(_config(dataset_dir, fmt, "dataloader", fetch="batch", seed=3))
    for (fa, la), (fb, lb) in zip(a, b, strict=True):
        assert torch.equal(fa, fb) and torch.equal(la, lb)


def test_max_batches_and_timing_split(dataset_dir):
    arrived, timing = _collect(_config(dataset_dir, "npy", "dataloader", max_batches=3))
    assert len(arrived) == 3 == timing.batches and timing.samples == 48
    assert timing.seconds >= timing.wait_seconds + timing.h2d_seconds + timing.step_seconds > 0
    assert 0 < timing.first_batch_seconds <= timing.seconds


def test_bare_loop_sees_the_same_batches(dataset_dir):
    config = _config(dataset_dir, "memmap", "tensorclass", shuffle=False)
    loader = build_loader(config)
    seen = []
    try:
        assert time_bare_epoch(loader, 0, lambda b: seen.append(len(b[1]))) > 0
    finally:
        loader.close()
    assert sum(seen) == N


def test_epoch_order():
    order = EpochOrder(100, 8, shuffle=True, block_size=10, seed=1)
    idx = order.indices(0)
    assert sorted(idx.tolist()) == list(range(100))
    assert all(np.all(np.diff(idx[i : i + 10]) == 1) for i in range(0, 100, 10)), "blocks stay contiguous"
    assert not np.array_equal(order.indices(0), order.indices(1)), "each epoch has its own order"
    assert np.array_equal(order.indices(2), EpochOrder(100, 8, True, 10, 1).indices(2)), "and it is reproducible"
    assert as_slice(np.arange(5, 9)) == slice(5, 9)
    assert as_slice(np.array([5, 7, 6, 8])) is None


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"loader": "tensorclass", "fmt": "lmdb"}, "does not read"),
        ({"prefetch_factor": 4}, "--prefetch-factor needs --num-workers"),
        ({"persistent_workers": True}, "--persistent-workers needs"),
        ({"loader": "gpu-resident", "num_workers": 2}, "does not apply"),
        ({"loader": "tensorclass", "fmt": "memmap", "fetch": "item"}, "--fetch item"),
        ({"block_size": 4, "shuffle": False}, "--block-shuffle needs --shuffle"),
        ({"batch_size": 0}, "--batch-size"),
        ({"fetch_threads": 0}, "--fetch-threads must be >= 1"),
        ({"loader": "tensorclass", "fmt": "memmap", "fetch_threads": 4}, "not take --fetch-threads 4: it shares each"),
    ],
)
def test_knobs_that_do_not_go_together(kw, message):
    """Refused when the configuration is built, before any dataset or device is looked at."""
    fmt = kw.pop("fmt", "npy")
    loader = kw.pop("loader", "dataloader")
    with pytest.raises(IobenchError, match=message):
        run_config(fmt, loader, **kw)


def test_pin_memory_needs_cuda(dataset_dir):
    config = run_config("npy", "dataloader", pin_memory=True)  # consistent in itself
    with pytest.raises(IobenchError, match="--pin-memory needs a CUDA device"):
        _config(dataset_dir, "npy", "dataloader", pin_memory=True)
    assert config.settings.pin_memory is True


def test_resolve_decides_pinning_and_checks_the_dataset(dataset_dir, tmp_path):
    resolved = _config(dataset_dir, "npy", "dataloader")
    assert resolved.config.settings.pin_memory is False  # auto: off on the CPU
    assert resolved.recorded().settings.pin_memory is False and resolved.recorded().dataset == dataset_dir.name
    with pytest.raises(IobenchError, match="no prepared dataset here|not an iobench dataset|no such directory"):
        _config(tmp_path / "nothing", "npy", "dataloader")


def test_parse_pairs():
    pairs, notes = parse_pairs(None, None)
    assert ("memmap", "tensorclass") in pairs and len(pairs) == 5 and not notes
    assert parse_pairs("memmap", None)[0] == [("memmap", "dataloader"), ("memmap", "tensorclass")]
    pairs, notes = parse_pairs("all", "tensorclass,dataloader")
    assert ("lmdb", "tensorclass") not in pairs and any("lmdb/tensorclass" in n for n in notes)
    with pytest.raises(IobenchError, match="does not read"):
        parse_pairs("lmdb", "tensorclass")
    with pytest.raises(IobenchError, match="unknown loader 'spark'"):
        parse_pairs(None, "spark")


def test_from_object_storage_the_default_pairs_are_the_dataloader_and_each_formats_pipeline():
    """`run --remote s3-like --format all` was refused whole: tensorclass, a default pair, reads local files only."""
    pairs, notes = parse_pairs("all", None, remote=True)
    assert not notes and all(ld != "tensorclass" for _, ld in pairs)
    assert {f for f, ld in pairs if ld == "dataloader"} == set(FORMATS)
    assert ("litdata", "native") in pairs and ("webdataset", "native") in pairs and ("npy", "native") not in pairs
    plain, _ = parse_pairs(None, None, remote=True)
    assert plain and all(ld == "dataloader" for _, ld in plain) and ("memmap", "dataloader") in plain
    assert parse_pairs("memmap", "tensorclass", remote=True)[0] == [("memmap", "tensorclass")]  # named: as asked


def test_a_dying_worker_ends_the_run_with_a_clear_error(dataset_dir, monkeypatch):
    import os
    import signal

    from iobench.formats.npy import NpyReader
    from iobench.run.format_epochs import ConfigEpochs

    parent = os.getpid()
    real_batch = NpyReader.batch

    def dying_batch(self, indices):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_batch(self, indices)

    monkeypatch.setattr(NpyReader, "batch", dying_batch)
    config = _config(dataset_dir, "npy", "dataloader", num_workers=1)
    loader = build_loader(config)
    try:
        with pytest.raises(RunFailed, match="a DataLoader worker died during npy/dataloader"):
            ConfigEpochs(config.config).clock(loader, 0, lambda b: None)
    finally:
        loader.close()


def test_gpu_resident_refuses_what_does_not_fit(dataset_dir, monkeypatch):
    import iobench.loaders.resident as resident

    monkeypatch.setattr(resident, "available_bytes", lambda device: 1000)
    with pytest.raises(IobenchError, match="gpu-resident: the dataset needs"):
        build_loader(_config(dataset_dir, "npy", "gpu-resident"))


def test_max_seconds_marks_the_epoch_partial(dataset_dir):
    import time

    config = _config(dataset_dir, "npy", "dataloader", max_seconds=0.05)
    loader = build_loader(config)
    try:
        timing = time_epoch(loader, 0, lambda b: time.sleep(0.02), max_seconds=0.05)
    finally:
        loader.close()
    assert timing.partial and 0 < timing.batches < -(-N // 16)


@pytest.mark.parametrize("threads", [1, 3])
def test_direct_delivers_the_exact_dataset_with_any_number_of_reads_in_flight(dataset_dir, expected, threads):
    features, labels = expected
    for shuffle in (False, True):
        arrived, _ = _collect(_config(dataset_dir, "npy", "direct", shuffle=shuffle, num_workers=threads))
        got_f = torch.cat([b[0] for b in arrived]).numpy()
        got_l = torch.cat([b[1] for b in arrived]).numpy()
        assert len(got_f) == N
        if not shuffle:
            np.testing.assert_array_equal(got_f, features)
        np.testing.assert_array_equal(np.sort(got_l), np.sort(labels))
        # each sample's features arrive with its own label, whatever thread read them
        by_row = {row.tobytes(): int(label) for row, label in zip(features, labels, strict=True)}
        assert [by_row[row.tobytes()] for row in got_f] == got_l.tolist()


@pytest.mark.parametrize("fmt", ["npy", "memmap"])
@pytest.mark.parametrize("threads", [1, 3])
def test_direct_cold_shuffled_reads_bypass_the_cache_and_deliver_the_exact_dataset(dataset_dir, expected, fmt, threads):
    features, labels = expected
    resolved = _config(dataset_dir, fmt, "direct", shuffle=True, num_workers=threads, cache="cold")
    loader = build_loader(resolved)
    try:
        assert loader.read_method == "O_DIRECT + Linux AIO"  # 48-byte samples: some straddle a 4 KiB block
        arrived = []
        for epoch in (0, 1):  # buffers and staging reused across epochs; the last epoch is checked
            arrived.clear()
            time_epoch(loader, epoch, lambda b: arrived.append((b[0].clone(), b[1].clone())))
    finally:
        loader.close()
    got_f = torch.cat([b[0] for b in arrived]).numpy()
    got_l = torch.cat([b[1] for b in arrived]).numpy()
    by_row = {row.tobytes(): int(label) for row, label in zip(features, labels, strict=True)}
    assert sorted(by_row[row.tobytes()] for row in got_f) == sorted(labels.tolist())
    assert [by_row[row.tobytes()] for row in got_f] == got_l.tolist()
    assert len({row.tobytes() for row in got_f}) == len(np.unique(features, axis=0))


def test_direct_warm_reads_through_the_page_cache(dataset_dir):
    for shuffle in (True, False):
        loader = build_loader(_config(dataset_dir, "npy", "direct", shuffle=shuffle, cache="warm"))
        try:
            assert loader.read_method == "preadv threads through the page cache"
        finally:
            loader.close()


@pytest.mark.parametrize("fmt", ["npy", "memmap"])
@pytest.mark.parametrize("batch_size", [16, 203, 1024])
def test_direct_cold_sequential_reads_the_dataset_in_order_with_o_direct(dataset_dir, expected, fmt, batch_size):
    """npy's features start 128 bytes into the file and end inside a block: spans and the file's end."""
    features, labels = expected
    loader = build_loader(_config(dataset_dir, fmt, "direct", shuffle=False, cache="cold", batch_size=batch_size))
    try:
        assert loader.read_method == "O_DIRECT + Linux AIO"
        arrived = []
        time_epoch(loader, 0, lambda b: arrived.append((b[0].clone(), b[1].clone())))
    finally:
        loader.close()
    np.testing.assert_array_equal(torch.cat([b[0] for b in arrived]).numpy(), features)
    np.testing.assert_array_equal(torch.cat([b[1] for b in arrived]).numpy(), labels)


def test_direct_reads_only_fixed_layouts_and_has_no_worker_knobs():
    from iobench.plan.config import RunConfig
    from iobench.settings import LoaderSettings

    for fmt in ("hdf5", "lmdb"):
        with pytest.raises(IobenchError, match=f"--loader direct does not read --format {fmt}"):
            RunConfig(format=fmt, loader="direct")
    with pytest.raises(IobenchError, match="direct does not take --persistent-workers: --num-workers is its reads in"):
        RunConfig(format="npy", loader="direct", settings=LoaderSettings(num_workers=2, persistent_workers=True))
    with pytest.raises(IobenchError, match="--prefetch-thread"):  # it would queue views of reused buffers
        RunConfig(format="npy", loader="direct", settings=LoaderSettings(prefetch_thread=2))


def test_threads_share_a_reader_that_allows_it_and_copy_one_that_does_not(dataset_dir, expected):
    """npy's mappings are read by every thread through one reader (a copy each would map the files again and fault
    every page in anew); HDF5's handles are not shared between threads: each thread opens its own."""
    from iobench.loaders.threads import ThreadReaders

    spec = Manifest.load(dataset_dir).spec
    for fmt, shared in (("npy", True), ("hdf5", False)):
        readers = ThreadReaders(FORMATS[fmt].reader_type(dataset_dir / fmt, spec, None))
        got: list[object] = []
        threads = [threading.Thread(target=lambda r=readers, g=got: g.append(r.reader())) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            assert (got[0] is got[1]) is shared, fmt
            features, labels = got[1].batch(np.array([5, 2]))
            np.testing.assert_array_equal(features, expected[0][[5, 2]])
            np.testing.assert_array_equal(labels, expected[1][[5, 2]])
        finally:
            readers.close()
