"""A prepared dataset may come from someone else: it is data, never code, and it points nowhere else."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil

import h5py
import lmdb
import lz4.frame
import numpy as np
import pytest

from iobench.formats.lmdb import record_key
from tests.conftest import assert_one_line_error, invoke

pytestmark = pytest.mark.hostile

N = 120


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    invoke("prepare", "--size", N, "--shape", "3,4", "--data-dir", root / "data", "-q")
    (dataset,) = (root / "data").iterdir()
    return dataset


@pytest.fixture
def dataset(clean, tmp_path):
    """A private copy of the clean dataset, to be made hostile."""
    copy = tmp_path / "data" / clean.name
    shutil.copytree(clean, copy)
    return copy


def _rewrite_manifest(dataset, fmt, **changes):
    """The manifest made to vouch for whatever the folder now holds (a hostile dataset controls it)."""
    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    entry = manifest["formats"][fmt]
    entry.update(changes)
    for f in entry["files"]:
        p = dataset / entry["directory"] / f["path"]
        if p.is_file():
            f["bytes"] = p.stat().st_size
            f["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    path.write_text(json.dumps(manifest))


class _Marker:
    """Unpickling this creates a file: the proof that code from the dataset ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _plant_pickle(folder, marker):
    """What tensordict's load_memmap would unpickle: a NonTensorData entry in meta.json."""
    meta = json.loads((folder / "meta.json").read_text())
    meta["extra"] = {"type": "NonTensorData"}
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "extra").mkdir()
    (folder / "extra" / "meta.json").write_text(
        json.dumps({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_metadata": None})
    )
    (folder / "extra" / "other.pickle").write_bytes(pickle.dumps(_Marker(marker)))


def test_the_planted_pickle_is_a_real_exploit(dataset, tmp_path):
    """The check below means something only if tensordict itself would run the planted code."""
    from tensordict import TensorDict

    marker = tmp_path / "ran-by-tensordict"
    _plant_pickle(dataset / "memmap", marker)
    try:
        TensorDict.load_memmap(dataset / "memmap")
    except Exception:
        pass
    assert marker.exists()


@pytest.mark.parametrize("command", ["verify", "run"])
def test_a_planted_pickle_never_runs(dataset, tmp_path, cli, command):
    marker = tmp_path / "ran"
    _plant_pickle(dataset / "memmap", marker)
    _rewrite_manifest(dataset, "memmap")
    args = ["--data-dir", dataset.parent, "-q"]
    if command == "run":
        args += ["--format", "memmap", "--loader", "tensorclass", "--device", "cpu", "--results", tmp_path / "r.jsonl"]
        r = cli("run", *args)
        assert_one_line_error(r, "memmap", "holds 'extra'")
    else:
        r = cli("verify", *args)
        assert r.code == 1 and "memmap  FAILED" in r.out and "holds 'extra'" in r.out
    assert not marker.exists(), "code from the dataset ran"


def test_extra_entries_in_meta_json_are_refused(dataset, tmp_path, cli):
    meta_path = dataset / "memmap" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["other"] = {"device": "cpu", "shape": [N], "dtype": "torch.int64", "is_nested": False}
    meta_path.write_text(json.dumps(meta))
    _rewrite_manifest(dataset, "memmap")
    r = cli("run", "--data-dir", dataset.parent, "--format", "memmap", "--device", "cpu", "-q")
    assert_one_line_error(r, "lists 'other'")


@pytest.mark.parametrize("directory", ["../victim", "/tmp", "..", "a/../../victim"])
def test_force_never_deletes_outside_the_dataset(dataset, tmp_path, cli, directory):
    victim = dataset.parent.parent / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["formats"]["npy"]["directory"] = directory
    manifest["spec"]["seed"] = 99  # a different dataset: --force would replace it
    path.write_text(json.dumps(manifest))
    r = cli("prepare", "--size", N, "--shape", "3,4", "--data-dir", dataset.parent, "-q", "--force")
    assert_one_line_error(r, "unreadable manifest", "not a plain name")
    assert (victim / "precious").read_text() == "keep me"
    assert os.path.isdir("/tmp")


@pytest.mark.parametrize("file_path", ["../../../etc/hostname", "/etc/hostname", "sub/../../x"])
def test_file_paths_must_stay_inside(dataset, cli, tmp_path, file_path):
    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["formats"]["npy"]["files"][0]["path"] = file_path
    path.write_text(json.dumps(manifest))
    for args in (["verify"], ["run", "--format", "npy", "--device", "cpu", "--results", tmp_path / "r.jsonl"]):
        r = cli(*args, "--data-dir", dataset.parent, "-q")
        assert_one_line_error(r, "unreadable manifest", "not a relative path inside the dataset folder")
        assert "bytes" not in r.err.split("manifest")[-1], "no size of the outside file is reported"


def test_a_link_out_of_the_dataset_is_refused(dataset, tmp_path, cli):
    outside = tmp_path / "outside.npy"
    shutil.copy(dataset / "npy" / "features.npy", outside)
    (dataset / "npy" / "features.npy").unlink()
    (dataset / "npy" / "features.npy").symlink_to(outside)
    r = cli("run", "--data-dir", dataset.parent, "--format", "npy", "--device", "cpu", "-q")
    assert_one_line_error(r, "leads outside the dataset folder")
    r = cli("verify", "--data-dir", dataset.parent, "-q")
    assert r.code == 1 and "leads outside the dataset folder" in r.out


def _replace_lmdb_record(dataset, value):
    env = lmdb.open(str(dataset / "lmdb"), subdir=True, map_size=2**30)
    with env.begin(write=True) as txn:
        txn.put(record_key(5), value)
    env.sync(True)
    env.close()
    (dataset / "lmdb" / "lock.mdb").unlink(missing_ok=True)
    _rewrite_manifest(dataset, "lmdb")


@pytest.mark.parametrize("kind", ["real", "declared"])
def test_an_lz4_bomb_is_refused_before_it_is_unpacked(dataset, tmp_path, cli, kind):
    if kind == "real":  # 2 MB that decompresses to 520 MB
        value = lz4.frame.compress(bytes(520 * 10**6))
    else:  # a valid frame header that declares 2^40 bytes
        compressor = lz4.frame.LZ4FrameCompressor()
        value = compressor.begin(source_size=2**40) + compressor.compress(bytes(56))  # no end mark: lz4 checks
        assert lz4.frame.get_frame_info(value)["content_size"] == 2**40
    _replace_lmdb_record(dataset, value)
    results = tmp_path / "r.jsonl"
    r = cli("run", "--data-dir", dataset.parent, "--format", "lmdb", "--device", "cpu", "-q", "--results", results)
    assert r.code == 1 and "LMDB record" in r.err and "Traceback" not in r.err, r.err
    declared = 520 * 10**6 if kind == "real" else 2**40
    assert f"declares {declared} bytes" in r.err


def test_an_hdf5_file_that_declares_huge_rows_is_refused(dataset, cli, tmp_path):
    path = dataset / "hdf5" / "data.h5"
    path.unlink()
    with h5py.File(path, "w") as f:  # a few KB declaring 10^9 values per row
        f.create_dataset("features", shape=(N, 10**9), dtype="float32", chunks=(1, 2**20))
        f.create_dataset("labels", shape=(N,), dtype="int64")
    assert path.stat().st_size < 100_000
    _rewrite_manifest(dataset, "hdf5")
    r = cli("run", "--data-dir", dataset.parent, "--format", "hdf5", "--device", "cpu", "-q")
    assert_one_line_error(r, "'features' holds float32 (120, 1000000000)")


def test_an_npy_header_that_lies_is_refused(dataset, cli):
    path = dataset / "npy" / "features.npy"
    data = np.load(path)
    np.save(path, data.reshape(N, 12).astype(np.float64))  # another dtype and shape than the spec
    _rewrite_manifest(dataset, "npy")
    r = cli("run", "--data-dir", dataset.parent, "--format", "npy", "--device", "cpu", "-q")
    assert_one_line_error(r, "features.npy declares float64 (120, 12)")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    data = root / "data"
    invoke("prepare", "--size", 30, "--shape", "3,8,8", "--dtype", "uint8", "--formats", "files", "--data-dir", data)
    invoke("limits", "--data-dir", data, "--results", root / "r.jsonl", "--probe-size", "16M")
    (dataset,) = data.iterdir()
    return dataset


def _results(images):
    """Results beside the limits measured once for the module (a run measures them when missing)."""
    return ["--results", images.parent.parent / "r.jsonl"]


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header declares width x height RGB pixels, with one row of pixel data."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = zlib.compress(bytes(1 + 3 * width))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", row) + chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(60_000, 60_000), (8, 9)])
def test_a_png_of_another_size_is_refused_before_it_is_decoded(images, tmp_path, cli, size):
    dataset = tmp_path / "data" / images.name
    shutil.copytree(images, dataset)
    sample = dataset / "files" / "samples" / "0" / "07.png"
    # 3.6 gigapixels that would decode to 10.8 GB: the header says so, and it is refused before any pixel is
    # read (so one row of pixel data is enough; building the image itself took 15 GB and minutes)
    sample.write_bytes(_png_header(*size))
    _rewrite_manifest(dataset, "files")
    r = cli("run", "--data-dir", dataset.parent, "--format", "files", "--device", "cpu", "-q", *_results(images))
    assert r.code == 1 and "07.png" in r.err and "Traceback" not in r.err, r.err
    # Pillow refuses a header over twice its pixel limit itself; a smaller lie meets iobench's check
    assert ("decompression bomb" if size[0] > 10_000 else f"a RGB image of {size}") in r.err


def test_a_sample_that_is_a_link_is_not_followed(images, tmp_path, cli):
    dataset = tmp_path / "data" / images.name
    shutil.copytree(images, dataset)
    sample = dataset / "files" / "samples" / "0" / "03.png"
    outside = tmp_path / "secret.png"
    shutil.copy(sample, outside)
    sample.unlink()
    sample.symlink_to(outside)
    r = cli("run", "--data-dir", dataset.parent, "--format", "files", "--device", "cpu", "-q", *_results(images))
    assert r.code != 0 and "Traceback" not in r.err, r.err
    r = cli("verify", "--data-dir", dataset.parent, "-q")
    assert r.code == 1


DEEP = "[" * 200_000 + "]" * 200_000  # 200,000 levels: RecursionError in Python's json


def test_a_manifest_nested_too_deep_is_one_line_and_skipped_beside_a_good_dataset(clean, tmp_path, cli):
    """a manifest.json 200,000 levels deep was a RecursionError in run, verify and info, and broke `info`
    and the automatic dataset choice even with a good dataset beside it."""
    data = tmp_path / "data"
    shutil.copytree(clean, data / clean.name)
    (data / "bad").mkdir()
    (data / "bad" / "manifest.json").write_text(DEEP)
    r = cli("info", "--data-dir", data)
    assert r.code == 0 and clean.name in r.out and "skipped" in r.err and "nested too deeply" in r.err, r.err
    r = cli(
        "run",
        "--data-dir",
        data,
        "--format",
        "npy",
        "--device",
        "cpu",
        "--runs",
        "1",
        "-q",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert r.code == 0 and "skipped" in r.err and "nested too deeply" in r.err and "Traceback" not in r.err, r.err
    r = cli("verify", "--data-dir", data, "-q")
    assert r.code == 1 and "nested too deeply" in r.out and "Traceback" not in r.out + r.err
    assert_one_line_error(cli("info", "--data-dir", data, "--dataset", "bad"), "nested too deeply")


def test_memmaps_meta_json_nested_too_deep_is_one_line(dataset, tmp_path, cli):
    (dataset / "memmap" / "meta.json").write_text(DEEP)
    _rewrite_manifest(dataset, "memmap")
    r = cli(
        "run",
        "--data-dir",
        dataset.parent,
        "--format",
        "memmap",
        "--loader",
        "tensorclass",
        "--device",
        "cpu",
        "-q",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(r, "nested too deeply")


@pytest.mark.parametrize("value", [2000.5, "120", True])
def test_a_manifest_count_that_is_not_a_whole_number_is_refused(dataset, cli, value):
    """`n_samples: 2000.5` was accepted (read as 2000)."""
    path = dataset / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["spec"]["n_samples"] = value
    path.write_text(json.dumps(manifest))
    assert_one_line_error(
        cli("info", "--data-dir", dataset.parent, "--dataset", dataset.name), "n_samples must be a whole number"
    )
