"""Linux AIO with O_DIRECT: what it reads is the file's bytes, errors are reported, nothing hangs."""

import os
import threading

import numpy as np
import pytest
import torch

from iobench.measuring.clocks import time_epoch
from iobench.run.building import build_loader
from iobench.storage.local import aio
from tests.conftest import resolved_run

pytestmark = pytest.mark.skipif(not aio.supported(), reason="Linux AIO is wired for x86_64 and aarch64 Linux")


def _direct_fd(path):
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        pytest.skip("this file system refuses O_DIRECT")


def _batch(fd, offsets, length):
    start, size, skip = aio.spans(np.asarray(offsets, dtype=np.int64), length)
    stride = aio.staging_stride(length)
    memory, view, address = aio.aligned_buffer(len(offsets) * stride)
    addresses = address + np.arange(len(offsets), dtype=np.uint64) * stride
    batch = aio.BatchRead(fd, start, size, addresses, skip + length)
    return batch, view.reshape(len(offsets), stride), skip, memory


@pytest.mark.parametrize("length", [48, 4096, 5000])
def test_queued_batches_read_the_files_bytes_with_fewer_reads_in_flight_than_a_batch(tmp_path, length):
    data = np.random.default_rng(length).integers(0, 256, 200_000, dtype=np.uint8)
    path = tmp_path / "data.bin"
    path.write_bytes(data.tobytes())
    fd = _direct_fd(path)
    reader = aio.AioReader(depth=4)
    rng = np.random.default_rng(1)
    try:
        batches = []
        for _ in range(3):  # submitted before any is waited for: the reader streams across them
            offsets = rng.integers(0, len(data) - length, 37)
            batch, rows, skip, memory = _batch(fd, offsets, length)
            batches.append((reader.submit(batch), rows, skip, offsets, memory))
        for batch, rows, skip, offsets, _memory in batches:
            batch.wait()
            for row, s, offset in zip(rows, skip.tolist(), offsets.tolist(), strict=True):
                np.testing.assert_array_equal(row[s : s + length], data[offset : offset + length])
    finally:
        reader.close()
        os.close(fd)


def test_a_read_past_the_end_of_the_file_is_an_error_not_a_short_sample(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(bytes(10_000))
    fd = _direct_fd(path)
    reader = aio.AioReader(depth=8)
    try:
        batch, *_ = _batch(fd, [0, 9_990], 48)  # the second sample would end 38 bytes past the end
        with pytest.raises(OSError, match="unexpected end of file at byte 10000"):
            reader.submit(batch).wait()
        good, rows, skip, _memory = _batch(fd, [100], 48)  # the reader goes on after an error
        reader.submit(good).wait()
        assert not rows[0, skip[0] : skip[0] + 48].any()
    finally:
        reader.close()
        os.close(fd)


def test_a_closed_reader_refuses_work_and_close_twice_is_harmless(tmp_path):
    reader = aio.AioReader(depth=2)
    reader.close()
    reader.close()
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(8192))
    fd = _direct_fd(path)
    try:
        with pytest.raises(OSError, match="stopped"):
            reader.submit(_batch(fd, [0], 16)[0])
    finally:
        os.close(fd)


def test_the_direct_loader_copies_samples_larger_than_a_block_out_of_staging(tmp_path):
    from iobench.cli import main

    with pytest.raises(SystemExit) as exit_info:  # 4,400-byte samples: one to three blocks each
        main(["prepare", "--size", "45", "--shape", "1100", "--data-dir", str(tmp_path), "-q", "--formats", "npy"])
    assert exit_info.value.code == 0
    (dataset,) = tmp_path.iterdir()
    features = np.load(dataset / "npy" / "features.npy")
    loader = build_loader(resolved_run(dataset, "npy", "direct", shuffle=True, cache="cold", batch_size=8))
    try:
        assert loader.read_method == "O_DIRECT + Linux AIO"
        arrived = []
        time_epoch(loader, 0, lambda b: arrived.append(b[0].clone()))
    finally:
        loader.close()
    got = torch.cat(arrived).numpy()
    assert sorted(row.tobytes() for row in got) == sorted(row.tobytes() for row in features)


def test_closing_with_reads_queued_returns_and_fails_what_was_never_read(tmp_path):
    path = tmp_path / "many.bin"
    path.write_bytes(bytes(4096 * 64))
    fd = _direct_fd(path)
    reader = aio.AioReader(depth=1)
    try:
        queued = [_batch(fd, list(range(0, 4096 * 64, 4096)), 4096) for _ in range(20)]
        for batch, *_ in queued:
            reader.submit(batch)
        reader.close()  # returns once the read in flight has landed
        outcomes = []
        for batch, *_ in queued:
            try:
                batch.wait()
                outcomes.append("read")
            except OSError as exc:
                assert "closed" in str(exc)
                outcomes.append("closed")
        assert outcomes[-1] == "closed"
    finally:
        os.close(fd)


def test_the_random_read_ceiling_uses_aio_for_depth_and_threads_without_it(tmp_path, monkeypatch):
    from iobench.storage.local import disk_limits as limits

    path = tmp_path / "probe.bin"
    path.write_bytes(bytes(4096 * 256))
    os.close(_direct_fd(path))  # skips where O_DIRECT is refused
    made = []
    real = aio.AioReader

    def counted(depth):
        made.append(depth)
        return real(depth)

    monkeypatch.setattr(aio, "AioReader", counted)
    assert limits.random_read_iops(path, 4096, 8, seconds=0.2) > 0
    assert made == [4, 4]  # two readers share the depth
    assert limits.random_read_iops(path, 4096, 1, seconds=0.2) > 0  # one in flight: a thread, as fio's psync
    assert made == [4, 4]

    def refused(depth):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(aio, "AioReader", refused)
    assert limits.random_read_iops(path, 4096, 8, seconds=0.2) > 0  # measured with threads instead


def test_a_reader_that_fails_inside_fails_its_batches_instead_of_leaving_them_waiting(tmp_path, monkeypatch):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(4096 * 8))
    fd = _direct_fd(path)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's traceback is expected
    reader = aio.AioReader(depth=4)
    monkeypatch.setattr(reader, "_reap", lambda events: 1 / 0)
    try:
        batch, *_ = _batch(fd, [0, 4096], 16)
        with pytest.raises(OSError, match="the AIO reader stopped: ZeroDivisionError"):
            reader.submit(batch).wait()
    finally:
        reader.close()
        os.close(fd)


@pytest.mark.parametrize("depth,shares", [(1, [1]), (2, [1, 1]), (7, [4, 3]), (32, [16, 16])])
def test_a_pool_splits_its_depth_and_deals_batches_round_robin(tmp_path, depth, shares):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(4096 * 16))
    fd = _direct_fd(path)
    pool = aio.AioPool(depth)
    try:
        assert [r.depth for r in pool.readers] == shares
        batches = [_batch(fd, [4096 * k], 4096) for k in range(5)]
        for batch, *_ in batches:
            pool.submit(batch)
        for batch, *_ in batches:
            batch.wait()
    finally:
        pool.close()
        os.close(fd)


def test_control_blocks_carry_each_reads_file_buffer_length_and_offset():
    offsets, lengths = np.array([0, 8192, 4096 * 1000], dtype=np.int64), np.array([4096, 8192, 4096])
    addresses = np.array([1 << 40, (1 << 40) + 4096, 12345 * 4096], dtype=np.uint64)
    batch = aio.BatchRead(7, offsets, lengths, addresses, lengths)
    iocbs = batch.iocbs  # written as 64-bit words, read back through struct iocb's fields
    assert iocbs["fildes"].tolist() == [7] * 3 and iocbs["opcode"].tolist() == [aio.IOCB_CMD_PREAD] * 3
    assert iocbs["buf"].tolist() == addresses.tolist() and iocbs["nbytes"].tolist() == lengths.tolist()
    assert iocbs["offset"].tolist() == offsets.tolist()
    assert not iocbs["reqprio"].any() and not iocbs["rw_flags"].any() and not iocbs["flags"].any()
    assert batch.pointers.tolist() == [iocbs.ctypes.data + 64 * k for k in range(3)]


@pytest.mark.parametrize("unit,width", [(512, 512), (16, 48), (8, 1000), (16, 4400)])
def test_copying_out_of_staging_gathers_or_slices_to_the_same_bytes(unit, width):
    from iobench.loaders.direct import _StagedBatch

    rng = np.random.default_rng(width)
    stride = aio.staging_stride(width)
    rows = rng.integers(0, 256, (9, stride), dtype=np.uint8)
    skip = rng.integers(0, aio.ALIGN // unit, 9) * unit
    out = np.zeros((9, width), dtype=np.uint8)
    done = aio.BatchRead(0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0))
    _StagedBatch(done, rows, skip, out, unit).result()  # 1 to 3 units: one gather; 125 or 275: slices
    for k in range(9):
        np.testing.assert_array_equal(out[k], rows[k, skip[k] : skip[k] + width])


@pytest.mark.long
@pytest.mark.parametrize("aio_here", [True, False])
def test_the_record_says_how_direct_read_and_warns_when_cold_epochs_went_through_the_cache(
    tmp_path, cli, monkeypatch, aio_here
):
    from tests.conftest import invoke, stored_records

    invoke("prepare", "--size", "300", "--shape", "3,4", "--data-dir", tmp_path, "-q", "--formats", "npy")
    os.close(_direct_fd(next(tmp_path.glob("*/npy/features.npy"))))  # skips where O_DIRECT is refused
    if not aio_here:  # as on a kernel or machine without AIO: cold epochs fall back to the page cache
        monkeypatch.setattr(aio, "supported", lambda: False)
    results = tmp_path / "r.jsonl"
    common = ["run", "--data-dir", tmp_path, "--format", "npy", "--loader", "direct", "--device", "cpu"]
    common += ["--runs", "1", "--epochs", "1", "--results", results]
    got = cli(*common, "--cache", "cold")
    assert got.code == 0, got.err
    assert cli(*common, "--cache", "warm", "-q").code == 0
    cold, warm = stored_records(results)
    assert cold["read_method"] == ("O_DIRECT + Linux AIO" if aio_here else "preadv threads through the page cache")
    assert warm["read_method"] == "preadv threads through the page cache"  # warm epochs read the cache
    assert ("cold epochs were read by preadv threads" in got.out + got.err) is not aio_here
