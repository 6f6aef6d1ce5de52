"""prepare --format-option FORMAT.NAME=VALUE: any field of a format's options from the command line, typed by
the dataclass, recorded in the manifest; every mistake is one line before anything is written."""

from __future__ import annotations

import importlib.util

import pytest

from iobench.data.manifest import Manifest
from iobench.errors import IobenchError
from iobench.results.record import RunRecord
from tests.conftest import assert_one_line_error, format_param, invoke, needs_module, stored_records

# it needs an optional library (skipped, saying which, without it); CI's extras step runs it: pytest -m extras
pytestmark = pytest.mark.extras


def test_options_reach_the_writer_and_the_manifest(tmp_path, cli):
    r = cli(
        "prepare",
        "--size",
        "100",
        "--formats",
        "hdf5,lmdb",
        "--data-dir",
        tmp_path,
        "-q",
        "--format-option",
        "lmdb.samples_per_record=8",
        "--format-option",
        "HDF5.chunk_rows=16",
        "--format-option",
        "hdf5.compression = lzf",
    )
    assert r.code == 0, r.err
    (dataset,) = tmp_path.iterdir()
    formats = Manifest.load(dataset).formats
    assert formats["lmdb"].options["samples_per_record"] == 8
    assert (formats["hdf5"].options["chunk_rows"], formats["hdf5"].options["compression"]) == (16, "lzf")
    import h5py

    with h5py.File(dataset / "hdf5" / "data.h5") as f:
        assert f["features"].chunks[0] == 16 and f["features"].compression == "lzf"


@pytest.mark.parametrize("name", [format_param("webdataset")])
def test_a_shard_size_sets_the_shard_count(tmp_path, cli, name):
    r = cli(
        "prepare",
        "--size",
        "100",
        "--formats",
        name,
        "--data-dir",
        tmp_path,
        "-q",
        "--format-option",
        "webdataset.shard_samples=30",
    )
    assert r.code == 0, r.err
    (dataset,) = tmp_path.iterdir()
    options = Manifest.load(dataset).formats[name].options
    assert (options["shard_samples"], options["shards"]) == (30, 4)
    assert len(list((dataset / name).glob("*.tar"))) == 4


@pytest.mark.parametrize(
    "option, fragments",
    [
        ("lmdb.samples_per_record", ["write FORMAT.NAME=VALUE"]),
        ("samples_per_record=2", ["write FORMAT.NAME=VALUE"]),
        ("hdf5.chunk_rows=4", ["hdf5 is not among the formats written (lmdb)"]),
        ("lmdb.shard_samples=4", ["lmdb has no option 'shard_samples'", "samples_per_record"]),
        ("lmdb.samples_per_record=many", ["'many' is not an integer"]),
        ("lmdb.samples_per_record=0", ["must be >= 1"]),
    ],
)
def test_a_wrong_option_is_one_line_and_writes_nothing(tmp_path, cli, option, fragments):
    out = tmp_path / "data"
    r = cli("prepare", "--size", "50", "--formats", "lmdb", "--data-dir", out, "-q", "--format-option", option)
    assert_one_line_error(r, *fragments)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("name", [format_param("tfrecord")])
def test_a_derived_field_is_the_writers(tmp_path, cli, name):
    r = cli(
        "prepare",
        "--size",
        "50",
        "--formats",
        name,
        "--data-dir",
        tmp_path,
        "-q",
        "--format-option",
        "tfrecord.shards=3",
    )
    assert_one_line_error(r, "tfrecord has no option 'shards'", "shard_samples, shuffle_queue")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """200 samples in 4 webdataset shards (skips without webdataset)."""
    from iobench.formats import FORMATS

    if not FORMATS.installed("webdataset"):
        pytest.skip("webdataset is not installed (pip install 'iobench[webdataset]')")
    root = tmp_path_factory.mktemp("shards")
    invoke(
        "prepare",
        "--size",
        "200",
        "--formats",
        "webdataset",
        "--data-dir",
        root,
        "-q",
        "--format-option",
        "webdataset.shard_samples=50",
    )
    return root


def native_run(cli, root, results, *options):
    args = [f"--format-option={o}" for o in options]
    r = cli(
        "run",
        "--format",
        "webdataset",
        "--loader",
        "native",
        "--data-dir",
        root,
        "--results",
        results,
        "--runs",
        "1",
        "--batch-size",
        "20",
        "--device",
        "cpu",
        "-q",
        *args,
    )
    assert r.code == 0, r.err
    return stored_records(results)[-1]


def test_a_read_option_changes_how_the_pipeline_shuffles_and_is_recorded(shards, tmp_path, cli):
    results = tmp_path / "r.jsonl"
    unshuffled = native_run(cli, shards, results, "webdataset.shuffle_buffer=0", "webdataset.shard_shuffle=0")
    default = native_run(cli, shards, results)
    assert unshuffled["format_options"] == "shard_shuffle=0,shuffle_buffer=0" and default["format_options"] == ""
    assert unshuffled["shuffle_order"] < 0.1 < 0.5 < default["shuffle_order"], (unshuffled, default)
    assert RunRecord.from_json(unshuffled).identity() != RunRecord.from_json(default).identity()
    report = cli("report", results, "--out", tmp_path / "report")
    assert report.code == 0 and "shard_shuffle=0,shuffle_buffer=0" in (tmp_path / "report/report.md").read_text()


@pytest.mark.parametrize(
    "options, loader, fragments",
    [
        (["webdataset.shard_samples=5"], "native", ["fixed when the format is written", "shuffle_buffer"]),
        (["webdataset.shuffle_buffer=-1"], "native", ["shuffle_buffer must be a whole number >= 0"]),
        (["webdataset.shuffle_buffer=5"], "dataloader", ["not among the formats read natively", "none"]),
    ],
)
def test_a_read_option_that_cannot_apply_is_one_line(shards, tmp_path, cli, options, loader, fragments):
    args = [f"--format-option={o}" for o in options]
    r = cli(
        "run",
        "--format",
        "webdataset",
        "--loader",
        loader,
        "--data-dir",
        shards,
        "--results",
        tmp_path / "r.jsonl",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        *args,
    )
    assert_one_line_error(r, *fragments)
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("name", [format_param("litdata")])
def test_litdata_knobs_are_checked_before_litdata_reads_an_unknown_word_as_its_default(tmp_path, cli, name):
    r = cli(
        "prepare",
        "--size",
        "50",
        "--formats",
        name,
        "--data-dir",
        tmp_path / "data",
        "-q",
        "--format-option",
        "litdata.batch_decode=sometimes",
    )
    assert_one_line_error(r, "litdata batch_decode is auto, all or a whole number, got 'sometimes'")
    knobs = ("--format-option", "litdata.item_shuffle_window=full", "--format-option", "litdata.batch_decode=0")
    r = cli("prepare", "--size", "50", "--formats", name, "--data-dir", tmp_path / "data", "-q", *knobs)
    assert r.code == 0, r.err
    (dataset,) = (tmp_path / "data").iterdir()
    options = Manifest.load(dataset).formats[name].options
    assert (options["batch_decode"], options["item_shuffle_window"]) == ("0", "full")


def test_litdata_cache_knobs_are_checked_and_handed_to_litdata_in_bytes():
    from iobench.formats.litdata import LitDataOptions, remote_knobs

    assert remote_knobs(LitDataOptions()) == {"max_cache_size": None, "max_pre_download": 2}, "LitData's defaults"
    assert remote_knobs(LitDataOptions(max_cache_size="64M", max_pre_download=1)) == {
        "max_cache_size": 64 * 2**20,
        "max_pre_download": 1,
    }
    assert remote_knobs(LitDataOptions(max_pool_connections=32))["max_pool_connections"] == 32
    for bad in (
        {"max_cache_size": "lots"},
        {"max_pre_download": 0},
        {"max_pre_download": True},
        {"max_pool_connections": 0},
    ):
        with pytest.raises(IobenchError):
            LitDataOptions(**bad)


def test_litdatas_pool_reaches_its_boto3_client_with_its_own_retries(monkeypatch, tmp_path):
    """A `config` in storage_options replaces LitData's whole botocore config: it is always given, with the
    storage's bounds (a connection within 5 s, a byte within 30 s, 3 attempts in LitData's adaptive mode), and the
    pool where one is asked for."""
    needs_module("litdata")
    import litdata

    from iobench.formats.litdata_remote import open_remote
    from iobench.storage.remote import RemoteTarget
    from iobench.storage.remote.endpoint import Endpoint

    handed = []

    class Opened(Exception):
        pass

    def streaming_dataset(url, **kwargs):
        handed.append(kwargs["storage_options"])
        raise Opened

    monkeypatch.setattr(litdata, "StreamingDataset", streaming_dataset)
    storage = type("Storage", (), {"bucket": "b", "prefix": "litdata", "bound": lambda self, bucket, key: None})()
    storage.target = RemoteTarget(Endpoint("https://store.example", "k", "s", "us-east-1"), None)
    for pool in (None, 32):
        with pytest.raises(Opened):
            open_remote(storage, None, tmp_path, **({} if pool is None else {"max_pool_connections": pool}))
    for given in handed:
        config = given["config"]
        assert config.retries == {"max_attempts": 3, "mode": "adaptive"}
        assert (config.connect_timeout, config.read_timeout) == (5.0, 30.0)
    assert handed[0]["config"].max_pool_connections in (None, 10) and handed[1]["config"].max_pool_connections == 32


def test_zarr_reads_object_storage_through_one_of_its_two_stores_and_records_that_client():
    from iobench.formats.zarr import ZarrObjectReader, ZarrOptions

    assert ZarrObjectReader.clients(ZarrOptions()) == (), "obstore: the storage's own client"
    assert ZarrObjectReader.clients(ZarrOptions(remote_store="fsspec")) == ("s3fs",)
    with pytest.raises(IobenchError, match="remote_store is one of obstore, fsspec, got 'http'"):
        ZarrOptions(remote_store="http")


def test_npy_read_options_apply_to_any_loader_and_others_stay_the_pipelines():
    from iobench.data.format_options import parse_format_options, settable_fields
    from iobench.plan.command_values import config_of
    from iobench.plan.config import RunConfig
    from iobench.settings import LoaderSettings

    assert settable_fields("npy", reading=True, native=False) == {
        "remote_reader": str,
        "s3fs_block": str,
        "remote_in_flight": int,
    }
    assert settable_fields("hdf5", reading=True, native=False) == {}
    given = ["npy.remote_reader=s3fs", "npy.s3fs_block=1M"]
    read = parse_format_options(given, (), True, by_index=("npy",))
    config = config_of("npy", "dataloader", LoaderSettings(batch_size=8), shuffle=True, block_size=0, read_options=read)
    assert config.format_options == (("remote_reader", "s3fs"), ("s3fs_block", "1M")), "a by-index loader takes them"
    with pytest.raises(IobenchError, match="sets how a format's own pipeline reads"):
        RunConfig(format="hdf5", loader="dataloader", format_options=(("chunk_rows", 5),))
    with pytest.raises(IobenchError, match="npy has no read option 'shuffle_buffer'"):
        RunConfig(format="npy", loader="dataloader", format_options=(("shuffle_buffer", 5),))
    with pytest.raises(
        IobenchError,
        match="webdataset is not among the formats read natively .* or with read options for any loader \\(npy\\)",
    ):
        parse_format_options(["webdataset.shuffle_buffer=5"], (), True, by_index=("npy",))


def test_npy_remote_reader_is_checked_and_picks_the_reader_of_objects():
    from iobench.formats import FORMATS
    from iobench.formats.npy import NpyOptions, RangedNpyReader, S3fsNpyReader

    npy = FORMATS["npy"]
    assert npy.object_reader(NpyOptions()) is RangedNpyReader and npy.object_reader() is RangedNpyReader
    assert npy.object_reader(NpyOptions(remote_reader="s3fs")) is S3fsNpyReader
    assert S3fsNpyReader.clients(NpyOptions(remote_reader="s3fs")) == ("s3fs",)
    assert npy.options_from_json({}) == NpyOptions(), "a manifest written before the options: the defaults"
    with pytest.raises(IobenchError, match="remote_reader is one of ranges, s3fs, got 'curl'"):
        NpyOptions(remote_reader="curl")
    with pytest.raises(IobenchError):
        NpyOptions(s3fs_block="big")
    with pytest.raises(IobenchError, match="remote_in_flight is at least 1, got 0"):
        NpyOptions(remote_in_flight=0)
    with pytest.raises(IobenchError, match="remote_in_flight is the ranged reader's"):
        NpyOptions(remote_reader="s3fs", remote_in_flight=8)


@pytest.mark.skipif(
    importlib.util.find_spec("obstore") is None, reason="obstore is not installed (pip install 'iobench[remote]')"
)
@pytest.mark.parametrize("in_flight", [1, 3])
def test_the_ranged_reader_keeps_at_most_remote_in_flight_gets_open(monkeypatch, in_flight):
    import asyncio

    import obstore

    from iobench.formats import npy

    open_now, most = 0, 0

    async def get_range_async(store, key, start, end):
        nonlocal open_now, most
        open_now += 1
        most = max(most, open_now)
        await asyncio.sleep(0.01)  # every request is still open when the next could start
        open_now -= 1
        return bytes(end - start)

    monkeypatch.setattr(obstore, "get_range_async", get_range_async)
    parts = asyncio.run(npy._ranges(None, "k", list(range(0, 80, 8)), list(range(4, 84, 8)), in_flight))
    assert [len(p) for p in parts] == [4] * 10 and most == in_flight


def test_an_object_storage_option_on_local_files_is_one_line_and_measures_nothing(tmp_path, cli):
    invoke("prepare", "--size", "50", "--formats", "npy", "--data-dir", tmp_path / "data", "-q")
    r = cli(
        "run",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--data-dir",
        tmp_path / "data",
        "--results",
        tmp_path / "r.jsonl",
        "--runs",
        "1",
        "--device",
        "cpu",
        "-q",
        "--format-option",
        "npy.remote_reader=s3fs",
    )
    assert_one_line_error(r, "npy.remote_reader sets how object storage is read", "--remote PROFILE or --endpoint-url")
    assert not (tmp_path / "r.jsonl").exists()


def test_a_format_written_otherwise_is_another_configuration_and_says_how(tmp_path, cli):
    """Two datasets of one spec (one folder name) in two data folders, LMDB written with 1 and 4 samples per record:
    the second is not skipped as 'already measured' by a sweep into the same results, and each record says how its
    format was written ("" for prepare's defaults, which a shard count or an 'auto' resolved does not change)."""
    from iobench.data.format_options import written_options

    default, custom, results = tmp_path / "default", tmp_path / "custom", tmp_path / "r.jsonl"
    invoke("prepare", "--size", 64, "--shape", "4", "--formats", "lmdb,hdf5", "--data-dir", default, "-q")
    invoke(
        "prepare",
        "--size",
        64,
        "--shape",
        "4",
        "--formats",
        "lmdb",
        "--data-dir",
        custom,
        "-q",
        "--format-option",
        "lmdb.samples_per_record=4",
    )
    (written,) = custom.iterdir()
    (plain,) = default.iterdir()
    assert plain.name == written.name
    manifest = Manifest.load(plain)
    assert {f: written_options(f, e.options, manifest.spec) for f, e in manifest.formats.items()} == {
        "lmdb": "",
        "hdf5": "",
    }
    for folder in (default, custom):
        r = cli(
            "sweep",
            "--format",
            "lmdb",
            "--loader",
            "dataloader",
            "--runs",
            1,
            "--cache",
            "as-is",
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            folder,
            "--results",
            results,
        )
        assert r.code == 0, r.err
    records = stored_records(results)
    assert [x["format_written"] for x in records] == ["", "samples_per_record=4"]
    assert [x["samples_per_epoch"] for x in records] == [64, 64]
    again = cli(
        "sweep",
        "--format",
        "lmdb",
        "--loader",
        "dataloader",
        "--runs",
        1,
        "--cache",
        "as-is",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        custom,
        "--results",
        results,
    )
    assert again.code == 0 and len(stored_records(results)) == 2  # that one is measured already
    from iobench.plan.labels import settings_label

    labels = [settings_label(RunRecord.from_json(x)) for x in records]
    assert "written" not in labels[0] and labels[1].endswith("written(samples_per_record=4)"), labels
