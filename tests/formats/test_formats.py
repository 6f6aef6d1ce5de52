"""Each format round-trips the dataset exactly, and opens with its own library alone."""

import json
import multiprocessing
import os
import pickle
import struct
import time

import h5py
import lmdb
import lz4.frame
import numpy as np
import pytest
from PIL import Image
from tensordict import TensorDict

from iobench.data.dataset import generate
from iobench.formats import FORMATS
from iobench.spec import DatasetSpec
from iobench.system.fsutil import make_partial_dir
from tests.conftest import every_format, format_param

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras

# every registered format with its default options, drawn from the registry (a new one is in the contract without
# being named here), then the options that change a layout
VARIANTS = [
    ("hdf5", {"compression": "lzf", "chunk_rows": 7}),
    ("hdf5", {"compression": "gzip", "compression_level": 1}),
    ("lmdb", {"samples_per_record": 7}),
    ("webdataset", {"shard_samples": 50}),  # several shards, PNG members for the uint8 image
    ("arrow", {"max_shard_size": "4KB"}),  # several Arrow files
    ("zarr", {"chunk_samples": 7, "shard_chunks": 3}),  # chunks and shards that do not divide the samples
    ("zarr", {"chunk_samples": 10, "shard_chunks": 64}),  # a shard longer than the dataset
    ("tfrecord", {"shard_samples": 50}),  # several shards, PNG records for the uint8 image
    ("litdata", {"chunk_bytes": "1KB"}),  # several chunks
]
CASES = [(name, {}) for name in FORMATS] + VARIANTS
SPECS = [DatasetSpec(301, shape=(16,), n_classes=5, seed=1), DatasetSpec(64, shape=(3, 4, 4), dtype="uint8", seed=2)]


def write(tmp_path, name, spec, **options):
    fmt = FORMATS[name]
    opts = fmt.resolve_options(spec, fmt.options(**options))
    directory = tmp_path / name
    directory.mkdir()
    writer = fmt.writer(directory, spec, opts)
    for chunk in generate(spec):
        writer.write(chunk)
    writer.close()
    return fmt.reader(directory, spec, opts)


def expected(spec):
    chunks = list(generate(spec))
    return np.concatenate([c.features for c in chunks]), np.concatenate([c.labels for c in chunks])


@pytest.mark.parametrize("spec", SPECS, ids=["f32", "u8-image"])
@pytest.mark.parametrize("name, options", [format_param(n, o) for n, o in CASES])
def test_round_trip_is_exact(tmp_path, small_chunks, name, options, spec):
    features, labels = expected(spec)
    with write(tmp_path, name, spec, **options) as reader:
        assert len(reader) == spec.n_samples
        f, lb = reader.read_range(0, spec.n_samples)
        np.testing.assert_array_equal(f, features)
        np.testing.assert_array_equal(lb, labels)
        f, lb = reader.read_range(5, 40)
        np.testing.assert_array_equal(f, features[5:40])
        idx = np.random.default_rng(0).integers(0, spec.n_samples, 50)
        idx[3] = idx[4]  # a duplicate, out of order
        f, lb = reader.batch(idx)
        np.testing.assert_array_equal(f, features[idx])
        np.testing.assert_array_equal(lb, labels[idx])
        assert f.dtype == spec.np_dtype and lb.dtype == np.int64
        x, y = reader.sample(spec.n_samples - 1)
        np.testing.assert_array_equal(x, features[-1])
        assert y == labels[-1]
        with pytest.raises(IndexError):
            reader.sample(spec.n_samples)


@pytest.mark.parametrize("name", every_format())
def test_reader_reopens_after_fork_and_leaks_nothing(tmp_path, name):
    spec = SPECS[0]
    features, _ = expected(spec)
    reader = write(tmp_path, name, spec)
    reader.sample(0)  # the parent opens its handle before forking, as a careless user would
    reader = pickle.loads(pickle.dumps(reader))  # DataLoader workers may get a pickled copy
    if reader.traits.fork_safe:  # else the DataLoader's forked workers refuse it (test_a_reader_not_fork_safe_...)
        got = _in_a_forked_child(_read_rows, reader, [3, 1, 2])
        np.testing.assert_array_equal(got, features[[3, 1, 2]])
    reader.sample(1)
    data_dir = str(tmp_path / name)
    if name not in ("zarr", "lance"):  # zarr and lance open a file for each read and hold nothing between reads
        assert data_dir in _open_paths(), "the test must see the reader's handle before close()"
    reader.close()
    # lance's reads run on its own runtime's threads, which let go of a file a moment after the read returns (1 of
    # 64 runs saw one still open at close()): a handle must be gone within a second, not at once
    deadline = time.monotonic() + (1.0 if name == "lance" else 0.0)
    while data_dir in _open_paths() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert data_dir not in _open_paths(), "a file handle or mapping of the data survived close()"


def _open_paths():
    """Every file this process holds open or mapped, as one string."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    with open("/proc/self/maps") as maps:
        return "\n".join(fds) + maps.read()


def _read_rows(reader, rows):
    return reader.batch(np.array(rows))[0]


def _in_a_forked_child(function, *args):
    """function(*args) in a forked process, its result sent back; the child is killed, not asked to end. A
    multiprocessing Pool's terminate() sends SIGTERM, which a library loaded earlier in this process (Ray's core)
    may have caught at C level: its forked worker then never ends and the suite hangs in the Pool's join."""
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_send, args=(theirs, function, args), daemon=True)
    child.start()
    theirs.close()
    try:
        assert ours.poll(60), "the forked child sent nothing in 60 s"
        return ours.recv()
    finally:
        child.kill()
        child.join(10)


def _send(connection, function, args):
    connection.send(function(*args))


def test_files_open_with_their_own_libraries(tmp_path):
    """No iobench code below: what users of numpy, h5py, lmdb+lz4 and tensordict would write."""
    spec = DatasetSpec(50, shape=(6,), seed=4)
    features, labels = expected(spec)
    for name in ("npy", "hdf5", "memmap"):
        write(tmp_path, name, spec).close()
    write(tmp_path, "lmdb", spec, samples_per_record=4).close()

    np.testing.assert_array_equal(np.load(tmp_path / "npy/features.npy", mmap_mode="r"), features)
    np.testing.assert_array_equal(np.load(tmp_path / "npy/labels.npy", mmap_mode="r"), labels)

    with h5py.File(tmp_path / "hdf5/data.h5", "r") as f:
        np.testing.assert_array_equal(f["features"][:], features)
        np.testing.assert_array_equal(f["labels"][:], labels)
        assert f.attrs["n_samples"] == 50

    td = TensorDict.load_memmap(tmp_path / "memmap")
    np.testing.assert_array_equal(td["features"].numpy(), features)
    np.testing.assert_array_equal(td["labels"].numpy(), labels)

    image = DatasetSpec(12, shape=(3, 8, 6), dtype="uint8", content="photo", seed=5)
    images, image_labels = expected(image)
    (tmp_path / "img").mkdir()
    write(tmp_path / "img", "files", image).close()
    write(tmp_path, "files", spec).close()
    for i in range(12):
        with Image.open(tmp_path / f"img/files/samples/0/{i:02d}.png") as png:
            np.testing.assert_array_equal(np.moveaxis(np.asarray(png), -1, 0), images[i])
    np.testing.assert_array_equal(np.load(tmp_path / "img/files/labels.npy"), image_labels)
    for i in (0, 49):
        np.testing.assert_array_equal(np.load(tmp_path / f"files/samples/0/{i:02d}.npy"), features[i])

    env = lmdb.open(str(tmp_path / "lmdb"), readonly=True, lock=False)
    with env.begin() as txn:
        meta = json.loads(txn.get(b"__iobench__"))
        per = meta["samples_per_record"]
        got_f, got_l = [], []
        for record in range(-(-50 // per)):
            raw = lz4.frame.decompress(txn.get(struct.pack(">Q", record)))
            n = len(raw) // (6 * 4 + 8)
            got_l.append(np.frombuffer(raw[: 8 * n], "<i8"))
            got_f.append(np.frombuffer(raw[8 * n :], "<f4").reshape(n, 6))
    env.close()
    np.testing.assert_array_equal(np.concatenate(got_f), features)
    np.testing.assert_array_equal(np.concatenate(got_l), labels)


def test_lmdb_map_size_is_computed_and_sufficient(tmp_path):
    spec = DatasetSpec(2000, shape=(300,))  # values too big for a leaf: overflow pages
    fmt = FORMATS["lmdb"]
    for per in (1, 3):
        opts = fmt.options(samples_per_record=per)
        (tmp_path / str(per)).mkdir()
        write(tmp_path / str(per), "lmdb", spec, samples_per_record=per).close()
        used = (tmp_path / str(per) / "lmdb" / "data.mdb").stat().st_size
        assert used <= fmt.estimate_bytes(spec, opts), "the disk estimate must not undershoot"


def test_partial_dir_name_marks_it_incomplete(tmp_path):
    p = make_partial_dir(tmp_path, "npy")
    assert p.name.startswith(".partial-npy-")
