"""Object storage's ceilings (`iobench limits --remote`): stored per store and profile, the rule a remote run's
record is held to, and a measurement against iobench's own server (skipped, with the reason, where the server's
programs are missing; `.ci/run` installs them)."""

from __future__ import annotations

import json
import re

import pytest

from iobench.errors import IobenchError
from iobench.measuring.limit_rule import ceiling, with_limits
from iobench.report.report import write_report
from iobench.results.checked import RecordError
from iobench.results.limits import LOOPBACK, MachineLimits, RemoteLimits, RemoteRates, remote_limits_key
from iobench.results.store import append_record, load_all_remote_limits, remote_limits_path
from tests.conftest import assert_one_line_error, invoke, record_of, stored_records

RATES = RemoteRates(
    gets_sample_1=30.0,
    gets_sample_n=480.0,
    gets_4k_1=31.0,
    gets_4k_n=470.0,
    first_byte_ms=31.0,
    mb_per_s_1=85.0,
    mb_per_s_n=900.0,
)
REMOTE = {
    "storage": "object",
    "remote_profile": "s3-like",
    "remote_latency_ms": 30.0,
    "remote_connection_mb_per_s": 90.0,
    "cache": "cold",
    "sample_bytes": 56,
    "hostname": "h",
}


def _limits(**changes) -> RemoteLimits:
    values = dict(
        measured_at="t",
        hostname="h",
        endpoint=LOOPBACK,
        profile="s3-like",
        latency_ms=30.0,
        connection_mb_per_s=90.0,
        connections=16,
        probe_object="d/npy/features.npy",
        probe_bytes=2**20,
        sample_bytes=56,
        shaped=RATES,
        unshaped=RATES,
    )
    return RemoteLimits(**{**values, **changes})


def test_remote_limits_are_stored_and_read_back_by_their_store_and_profile():
    limits = _limits()
    assert RemoteLimits.from_json(json.loads(json.dumps(limits.to_json()))) == limits
    assert limits.key == "h:loopback@30ms,90MB/s"
    assert remote_limits_key("h", LOOPBACK, 0.0, None) == "h:loopback@0ms,uncapped"
    assert remote_limits_key("h", "https://s3.example", None, None) == "h:https://s3.example"
    broken = limits.to_json() | {"shaped": {**limits.to_json()["shaped"], "mb_per_s_n": 0}}
    with pytest.raises(RecordError, match="must be positive"):
        RemoteLimits.from_json(broken)


def test_a_profile_asking_more_than_the_emulator_delivered_is_said():
    assert _limits().short_of_profile  # 16 x 90 MB/s asked, 900 delivered
    assert not _limits(connections=8).short_of_profile  # 720 asked
    assert not _limits(connection_mb_per_s=None).short_of_profile
    assert not _limits(endpoint="https://s3.example").short_of_profile  # a real store is what it is


def test_a_cold_remote_run_is_held_to_the_fastest_delivery_of_its_profile():
    limits = _limits()
    assert ceiling(record_of(**REMOTE), limits) == ("remote_large_object_16_connections", 900.0)
    # GETs of one sample each beat the bulk read only for large samples, and only at the size measured
    big = _limits(sample_bytes=4 * 2**20, shaped=RemoteRates(**{**RATES.__dict__, "gets_sample_n": 400.0}))
    assert ceiling(record_of(**{**REMOTE, "sample_bytes": 4 * 2**20}), big)[0] == "remote_sample_gets_16_connections"
    assert ceiling(record_of(**{**REMOTE, "sample_bytes": 2**20}), big)[0] == "remote_large_object_16_connections"
    share = with_limits(record_of(**REMOTE, mb_per_s=9.0), limits).limit
    assert share.percent_of_limit == pytest.approx(1.0)
    # a warm remote epoch may read a library's local cache; the wrong kind of limits holds nothing
    assert ceiling(record_of(**{**REMOTE, "cache": "warm"}), limits) is None
    assert ceiling(record_of(cache="cold"), limits) is None
    local = MachineLimits(hostname="h", data_device="/dev/x", storage_read_mb_per_s=1.0, page_cache_read_mb_per_s=1.0)
    assert ceiling(record_of(**REMOTE), local) is None


def test_the_report_finds_a_remote_records_ceiling_by_its_profile(tmp_path):
    results = tmp_path / "r.jsonl"
    append_record(results, record_of(**REMOTE, mb_per_s=90.0, data_block_device="http://127.0.0.1:1234"))
    remote_limits_path(results).write_text(json.dumps({_limits().key: _limits().to_json()}))
    report = write_report(results, tmp_path / "report")[0].read_text()
    assert "10% of the store's large-object GETs on 16 connection(s)" in report


def test_a_damaged_remote_limits_file_is_one_line(tmp_path):
    remote_limits_path(tmp_path / "r.jsonl").write_text("[1]")
    with pytest.raises(IobenchError, match=r"delete it and run `iobench limits --remote`"):
        load_all_remote_limits(tmp_path / "r.jsonl")


def test_remote_limits_refuse_what_they_cannot_measure_in_one_line(cli, tmp_path):
    both = cli("limits", "--remote", "s3-like", "--endpoint-url", "http://127.0.0.1:9", "--data-dir", tmp_path)
    assert_one_line_error(both, "--endpoint-url reads a store as it is")  # as run's, said in one place
    shaped = cli("limits", "--latency-ms", "5", "--data-dir", tmp_path)
    assert_one_line_error(shaped, "shape --remote: give --remote PROFILE too")
    empty = cli("limits", "--remote", "none", "--data-dir", tmp_path / "nothing", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(empty, "no prepared dataset")


def _server_missing() -> str | None:
    from tests.storage.test_emulator import _missing

    return _missing()


@pytest.mark.skipif(_server_missing() is not None, reason=_server_missing() or "")
def test_limits_remote_measures_the_profile_and_a_run_reports_its_share(cli, tmp_path):
    data, results = tmp_path / "data", tmp_path / "r.jsonl"
    invoke("prepare", "--size", 300, "--shape", "3,4", "--formats", "npy", "--data-dir", data, "-q")
    measured = cli(
        "limits",
        "--remote",
        "s3-like",
        "--latency-ms",
        "20",
        "--connections",
        "4",
        "--data-dir",
        data,
        "--results",
        results,
    )
    assert measured.code == 0, measured.err
    (limits,) = load_all_remote_limits(results).values()
    assert limits.key.endswith(":loopback@20ms,90MB/s") and limits.sample_bytes == 56
    # one connection waits the profile's first byte on every GET: 20 ms and the server's own time
    assert 20 <= limits.shaped.first_byte_ms < 40 and limits.unshaped is not None
    assert limits.unshaped.first_byte_ms < limits.shaped.first_byte_ms - 15
    assert limits.shaped.gets_4k_n > 2 * limits.shaped.gets_4k_1, "four connections in flight, not one"
    run = cli(
        "run",
        "--remote",
        "s3-like",
        "--latency-ms",
        "20",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "-q",
        "--cache",
        "cold",
        "--runs",
        1,
        "--device",
        "cpu",
        "--data-dir",
        data,
        "--results",
        results,
    )
    assert run.code == 0, run.err
    (record,) = stored_records(results)
    assert record["limit_name"] == "remote_large_object_4_connections"
    assert record["percent_of_limit"] == pytest.approx(100 * record["mb_per_s"] / limits.shaped.mb_per_s_n)
    other = cli(
        "run",
        "--remote",
        "express-like",
        "--format",
        "npy",
        "--loader",
        "dataloader",
        "-q",
        "--runs",
        1,
        "--device",
        "cpu",
        "--data-dir",
        data,
        "--results",
        tmp_path / "other.jsonl",
    )
    assert other.code == 0 and "iobench limits --remote express-like" in other.err
    assert stored_records(tmp_path / "other.jsonl")[0].get("percent_of_limit") is None


def test_an_endpoint_urls_path_names_the_bucket_and_anything_else_is_one_line(monkeypatch):
    """A bucket is named in the URL's path, as a path-style S3 URL names it; S3's legacy names (underscores, as
    `iobench serve` names a bucket after a dataset) are taken, anything else is one line."""
    from iobench.storage.remote.endpoint import endpoint_from_environment

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    plain = endpoint_from_environment("https://s3.eu-west-1.amazonaws.com/")
    assert (plain.url, plain.bucket) == ("https://s3.eu-west-1.amazonaws.com", None)
    named = endpoint_from_environment("http://127.0.0.1:9000/my-team.datasets/")
    assert (named.url, named.bucket) == ("http://127.0.0.1:9000", "my-team.datasets")
    served = endpoint_from_environment("http://127.0.0.1:9000/n4000_128_float32_c1000_s0")  # how serve names them
    assert served.bucket == "n4000_128_float32_c1000_s0"
    for url, message in [
        ("http://127.0.0.1:9000/bucket/deeper", "is not a bucket name"),
        ("http://127.0.0.1:9000/-bucket", "is not a bucket name"),
        ("http://127.0.0.1:9000/a%20b", "is not a bucket name"),
        ("http://127.0.0.1:9000/bucket?x=1", "a query or fragment"),
        ("http://127.0.0.1:9000/#bucket", "a query or fragment"),
        ("http://user:pw@127.0.0.1:9000/bucket", "no credentials"),
        ("ftp://127.0.0.1/bucket", "expected http(s)://host:port/bucket (port and bucket optional)"),
    ]:
        with pytest.raises(IobenchError, match=re.escape(message)):
            endpoint_from_environment(url)


@pytest.mark.parametrize(
    "port", ["99999", "-1", "+18555", "1_8555", "18555:80", "\uff11\uff18\uff15\uff15\uff15", "0", ""]
)
def test_a_port_that_is_not_one_is_one_line(monkeypatch, port):
    """The fourth probe: urllib took `+18555`, `1_8555` and full-width digits as ports, raised on `99999` and `-1`
    (a traceback), and `:0` became "nothing answers at 127.0.0.1:80"."""
    from iobench.storage.remote.endpoint import endpoint_from_environment

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with pytest.raises(IobenchError, match="is not a port"):
        endpoint_from_environment(f"http://127.0.0.1:{port}/bucket")


@pytest.mark.parametrize("url", ["http://[::1/b", "http://[::1", "http://]x[/b"])
def test_an_address_urllib_cannot_split_is_one_line(monkeypatch, url):
    """`--endpoint-url 'http://[::1/b'` ended in a traceback (ValueError: Invalid IPv6 URL)."""
    from iobench.storage.remote.endpoint import endpoint_from_environment

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with pytest.raises(IobenchError, match="--endpoint-url"):
        endpoint_from_environment(url)


def test_without_boto3_a_store_is_not_asked_what_it_holds_before_a_run(monkeypatch):
    """The check that a format was uploaded asks with boto3, which a machine carrying obstore alone lacks
    (scripts/gpu_wheels.sh): the run goes on, and a missing object is then the reader's one line."""
    import importlib.util

    from iobench.storage.remote import ObjectStorage, RemoteTarget
    from iobench.storage.remote.endpoint import Endpoint

    storage = ObjectStorage(
        RemoteTarget(Endpoint("http://127.0.0.1:9", "k", "s"), None), "b", "npy", ["x.npy"], {"x.npy": 128}
    )
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "boto3" else found(name, *a))
    storage.check_stored("npy")  # port 9 answers nothing: a request would fail here
