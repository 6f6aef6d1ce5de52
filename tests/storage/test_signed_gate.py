"""The stores iobench starts on loopback answer only the run's signed requests (the seventh probe's S1: moto's server
answered any local user). The gate's rule on botocore-signed requests, then, as another user of the machine
(`nobody`, setpriv), both servers: the checkpoint store (moto behind the gate and the shaper) and the read-only
emulator of `run --remote` and `serve` (rclone, which checks SigV4 itself), on every port each listens on."""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iobench.errors import IobenchError
from iobench.storage.remote.signed_gate import SignedOnly, signed_by

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("botocore") is None,
        reason="botocore is not installed (the gate signs with it; pip install 'iobench[checkpoint-s3]')",
    ),
    pytest.mark.extras,
]
ACCESS, SECRET = "IOBENCHABCDEF0123456789", "s" * 40
NOBODY = 65534


def _environ(
    method: str = "GET",
    uri: str = "/bucket/key?list-type=2",
    secret: str = SECRET,
    access: str = ACCESS,
    body: bytes = b"",
) -> dict:
    """A WSGI environment of a request botocore's S3 signer signed, as a server receives it."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method=method, url=f"http://127.0.0.1:9000{uri}", data=body)
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(request)
    path, _, query = uri.partition("?")
    environ = {"REQUEST_METHOD": method, "RAW_URI": uri, "PATH_INFO": path, "QUERY_STRING": query}
    for name, value in request.headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    environ.setdefault("HTTP_HOST", "127.0.0.1:9000")
    return environ


def test_a_request_signed_with_the_runs_keys_passes():
    assert signed_by(_environ(), ACCESS, SECRET) is None
    assert signed_by(_environ("PUT", "/bucket/a/b", body=b"x" * 100), ACCESS, SECRET) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e.pop("HTTP_AUTHORIZATION"), "not signed"),
        (lambda e: e.update(HTTP_AUTHORIZATION="AWS IOBENCHABCDEF0123456789:abc"), "not signed"),
        (lambda e: e.update(RAW_URI="/bucket/other?list-type=2"), "signature does not match"),
        (lambda e: e.update(REQUEST_METHOD="DELETE"), "signature does not match"),
        (lambda e: e.update(HTTP_X_AMZ_CONTENT_SHA256="0" * 64), "signature does not match"),
        (lambda e: e.pop("HTTP_X_AMZ_DATE"), "a signed header is missing"),
    ],
    ids=["unsigned", "sigv2", "another-path", "another-method", "another-payload", "no-date"],
)
def test_a_request_altered_or_unsigned_is_refused(change, reason):
    environ = _environ()
    change(environ)
    assert reason in (signed_by(environ, ACCESS, SECRET) or "passed")


def test_other_keys_and_stale_dates_are_refused():
    assert signed_by(_environ(secret="w" * 40), ACCESS, SECRET) == "signature does not match"
    assert signed_by(_environ(access="AKIAIOSFODNN7EXAMPLE"), ACCESS, SECRET) == "another access key"
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    assert signed_by(_environ(), ACCESS, SECRET, now=later) == "date out of range"  # a request replayed an hour on


def test_the_gate_answers_403_and_never_calls_the_store():
    called = []
    gate = SignedOnly(lambda environ, start: called.append(environ) or [b"ok"], ACCESS, SECRET)
    statuses = []
    unsigned = _environ()
    del unsigned["HTTP_AUTHORIZATION"]
    assert b"AccessDenied" in b"".join(gate(unsigned, lambda status, headers: statuses.append(status)))
    assert statuses == ["403 Forbidden"] and called == []
    assert gate(_environ(), lambda status, headers: statuses.append(status)) == [b"ok"] and len(called) == 1


# --- the servers, as another user of the machine --------------------------------------------------------------------

# Another user's requests: an unsigned list, get and put on every port, then the same signed with keys of their own.
PROBE = r"""
import json, sys, urllib.request, urllib.error
ports, bucket, key = json.loads(sys.argv[1])
out = []
for port in ports:
    base = f"http://127.0.0.1:{port}"
    for method, path, data in (("GET", f"/{bucket}?list-type=2", None), ("GET", f"/{bucket}/{key}", None),
                               ("PUT", f"/{bucket}/probe-was-here", b"x"), ("GET", "/moto-api/data.json", None)):
        request = urllib.request.Request(base + path, data=data, method=method)
        try:
            out.append([port, method, path, urllib.request.urlopen(request, timeout=10).status])
        except urllib.error.HTTPError as exc:
            out.append([port, method, path, exc.code])
        except OSError as exc:
            out.append([port, method, path, str(exc)])
print(json.dumps(out))
"""


def _as_nobody(code: str, *args: str) -> str:
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-I", "-c", code]
    done = subprocess.run([*argv, *args], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _listening_ports(pids: tuple[int, ...]) -> list[int]:
    """Every TCP port the store's processes (and nginx's workers) listen on, from `ss`."""
    done = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10, check=True)
    ports = set()
    for line in done.stdout.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return sorted(ports)


def _needs_another_user() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("ss") is None:
        pytest.skip("needs root to act as a second user (setpriv) and ss")


def _store_missing() -> str | None:
    from iobench.storage.remote.emulator import nginx_binary

    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("boto3") is None:
        return "moto's server is not installed (pip install 'iobench[checkpoint-s3]')"
    try:
        nginx_binary()
    except IobenchError as exc:
        return str(exc)
    return None


def _refused_everywhere(rows: list, ports: list[int]) -> None:
    assert {row[0] for row in rows} == set(ports) and len(ports) >= 2, rows  # the server's and the shaper's
    assert all(row[3] in (400, 403) for row in rows), rows


@pytest.mark.skipif(_store_missing() is not None, reason=_store_missing() or "")
def test_the_checkpoint_store_refuses_another_users_requests_on_every_port():
    """S1: the listing, the checkpoint, a write and moto's own API, unsigned or signed with other keys, from another
    user, on the shaper's port and moto's: refused; the run's own client still reads and writes."""
    from iobench.storage.remote.profiles import profile
    from iobench.storage.remote.writable_store import WritableStore, s3_client

    _needs_another_user()
    with WritableStore(profile("s3-like"), bucket="iobench-checkpoints") as endpoint:
        client = s3_client(endpoint)
        client.put_object(Bucket="iobench-checkpoints", Key="ck/state", Body=b"w" * 4096)
        ports = _listening_ports(_store_pids(endpoint))
        rows = json.loads(_as_nobody(PROBE, json.dumps([ports, "iobench-checkpoints", "ck/state"])))
        _refused_everywhere(rows, ports)
        for other in _wrongly_signed(endpoint, ports):
            with pytest.raises(Exception, match="AccessDenied|SignatureDoesNotMatch"):
                other.list_objects_v2(Bucket="iobench-checkpoints")
        listed = client.list_objects_v2(Bucket="iobench-checkpoints")["Contents"]
        assert [x["Key"] for x in listed] == ["ck/state"]  # nothing of the probe's was written


def _wrongly_signed(endpoint, ports: list[int]) -> list:
    """A boto3 client per port, with the run's access key and another secret: requests signed, but wrongly."""
    import boto3

    return [
        boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id=endpoint.access_key,
            aws_secret_access_key="w" * 40,
            region_name="us-east-1",
        )
        for port in ports
    ]


def _store_pids(endpoint) -> tuple[int, ...]:
    """The processes of this process's stores (each records them in its state folder's `pids`), nginx's workers
    included."""
    from iobench.system.private import state_root

    pids: list[int] = []
    for state in Path(state_root()).glob(f"s3-{os.getpid()}-*"):
        with open(state / "pids") as f:
            pids += [int(item.split(":")[0]) for item in f.read().split()]
    found = set(pids)
    for pid in pids:  # nginx's workers serve its port
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            found |= {int(c) for c in f.read().split()}
    return tuple(found)


def _emulator_missing() -> str | None:
    from iobench.storage.remote.emulator import nginx_binary, rclone_binary

    for check in (rclone_binary, nginx_binary):
        try:
            check()
        except IobenchError as exc:
            return str(exc)
    return None


@pytest.mark.skipif(_emulator_missing() is not None, reason=_emulator_missing() or "")
def test_the_read_only_store_of_run_remote_and_serve_refuses_another_users_requests(tmp_path):
    """`run --remote` and `serve` (rclone behind the shaper): unsigned and wrongly signed requests refused on both
    ports."""
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile

    _needs_another_user()
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "x.npy").write_bytes(b"secret" * 100)
    os.chmod(tmp_path, 0o755)
    with Emulator(tmp_path, profile("s3-like")) as endpoint:
        ports = _listening_ports(_store_pids(endpoint))
        rows = json.loads(_as_nobody(PROBE, json.dumps([ports, "ds", "x.npy"])))
        _refused_everywhere(rows, ports)
        for other in _wrongly_signed(endpoint, ports):
            with pytest.raises(Exception, match="AccessDenied|SignatureDoesNotMatch|Forbidden"):
                other.get_object(Bucket="ds", Key="x.npy")
