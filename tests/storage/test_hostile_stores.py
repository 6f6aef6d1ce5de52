"""The fourth probe's stores that stall or lie (tests/hostile_store.py, in front of a real S3 server): every remote
read has a time bound and a size bound from the manifest, SIGTERM ends a run promptly, and what the store did is
one line naming the object, never a hang, an exhausted memory, a traceback or a signed URL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iobench.storage.remote.profiles import profile
from tests.conftest import ROOT, descendants, format_param, invoke, needs_module
from tests.hostile_store import HostileStore, Rule
from tests.storage.test_emulator import _missing

pytestmark = [
    pytest.mark.hostile,
    pytest.mark.skipif(_missing() is not None, reason=_missing() or ""),
    pytest.mark.extras,
]
N = 400
BUCKET = "dset"
_PEAK = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A dataset in every format with a remote path here, served by iobench's emulator (no shaping)."""
    from iobench.formats import FORMATS
    from iobench.storage.remote.emulator import Emulator

    data = tmp_path_factory.mktemp("hostile-stores") / "data"
    wanted = [f for f in ("npy", "hdf5", "lmdb", "webdataset", "arrow", "litdata", "files") if FORMATS.installed(f)]
    invoke(
        "prepare",
        "--size",
        N,
        "--shape",
        "4,4,3",
        "--dtype",
        "uint8",
        "--formats",
        ",".join(wanted),
        "--data-dir",
        data,
        "--dataset",
        BUCKET,
        "-q",
    )
    with Emulator(data, profile("none")) as endpoint:
        yield data, endpoint


def run(
    served, store: HostileStore, fmt: str, loader: str, timeout_s: float | None = 2.0, peak: bool = False, **popen
) -> subprocess.Popen:
    data, endpoint = served
    env = {**os.environ, **endpoint.environment(), "AWS_ENDPOINT_URL": store.url, "COLUMNS": "200"}
    env.pop("IOBENCH_REMOTE_TIMEOUT_S", None)
    if timeout_s is not None:
        env["IOBENCH_REMOTE_TIMEOUT_S"] = str(timeout_s)
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--endpoint-url",
        f"{store.url}/{BUCKET}",
        "--format",
        fmt,
        "--loader",
        loader,
        "--runs",
        "1",
        "--epochs",
        "1",
        "--warmup",
        "0",
        "--cache",
        "cold",
        "--device",
        "cpu",
        "-q",
        "--data-dir",
        str(data),
        "--results",
        str(data.parent / f"{fmt}.jsonl"),
    ]
    if peak:
        argv = [sys.executable, "-c", _PEAK, *argv]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def one_line(proc: subprocess.Popen, timeout: float) -> tuple[str, float, str]:
    """The run's one error line (it must fail in one line within `timeout`), the seconds it took, all it said."""
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running after {timeout:g} s: {proc.communicate()[1][-2000:]}")
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("iobench: error:")]
    assert proc.returncode in (1, 2) and len(errors) == 1, err[-3000:]
    assert "Traceback" not in err and "X-Amz" not in err and "Signature" not in err, err[-3000:]
    return errors[0], time.monotonic() - started, err


def upstream(served) -> str:
    return served[1].url.removeprefix("http://")


@pytest.mark.parametrize(
    ("fmt", "loader", "key"),
    [
        format_param("npy", "dataloader", "npy/features"),  # obstore's ranged GETs
        format_param("hdf5", "dataloader", "hdf5/"),  # s3fs
        format_param("webdataset", "native", "webdataset/shard"),  # curl
        format_param("lmdb", "dataloader", "lmdb/data"),  # FUSE (rclone mount)
    ],
)
@pytest.mark.parametrize("mode", ["stall", "drip"])
def test_a_store_that_stalls_or_drips_ends_the_run_in_one_line(served, fmt, loader, key, mode):
    """curl ran with no time limit (90 s on one byte every 5 s), obstore ignored SIGTERM for 3 minutes, a FUSE
    read sat in D state for 6.5 minutes. With a 2 s bound: one line well inside a minute."""
    if fmt == "lmdb":
        from iobench.storage.remote.mount import fuse_reason

        if fuse_reason():
            pytest.skip(fuse_reason())
    with HostileStore(upstream(served), [Rule(mode, "GET", key)], drip_s=4.0) as store:
        line, took, _ = one_line(run(served, store, fmt, loader), timeout=90)
    assert fmt in line or BUCKET in line, line
    assert took < 60, (took, line)


def test_sigterm_ends_a_run_stuck_in_a_library_promptly(served):
    """a read of a store that accepts and never answers, with the default 30 s bound: SIGTERM after 3 s ends the
    run within the watch's grace (10 s), saying so, the emulator it did not start left alone."""
    with HostileStore(upstream(served), [Rule("stall", "GET", "npy/features")]) as store:
        proc = run(served, store, "npy", "dataloader", timeout_s=None)
        deadline = time.monotonic() + 60
        while not any("npy/features" in s for s in store.seen):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
            time.sleep(0.1)
        time.sleep(3)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("SIGTERM did not end the run within 30 s")
    assert time.monotonic() - started < 15, err
    assert proc.returncode in (130, 143) and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("fmt", "loader", "key"),
    [
        format_param("litdata", "native", "litdata/chunk"),  # LitData's own boto3 client
        format_param("files", "dataloader", "files/"),  # s3torchconnector, a GET per sample
    ],
)
def test_a_stalled_store_holds_litdatas_pipeline_and_files_to_the_bound(served, fmt, loader, key):
    """LitData's own pipeline (RetriesExceededError after 125 s) and one file per sample through s3torchconnector
    (S3Exception after 102 s) did not honour IOBENCH_REMOTE_TIMEOUT_S=5: one line within twice the bound's tries."""
    with HostileStore(upstream(served), [Rule("stall", "GET", key)]) as store:
        line, took, _ = one_line(run(served, store, fmt, loader, timeout_s=5), timeout=120)
    assert fmt in line or BUCKET in line, line
    assert took < 45, (took, line)


def test_sigterm_while_litdata_opens_from_a_stalled_store_is_an_interruption(served):
    """SIGTERM while LitData waited for its index exited 1 with "Index file not found at /tmp/tmpXXXX/index.json": the
    data blamed for an interruption, in a folder of LitData's in the shared /tmp. rc 143 (SIGTERM), and no folder of
    LitData's left in the temp folder."""
    import tempfile

    needs_module("litdata")
    before = set(os.listdir(tempfile.gettempdir()))
    with HostileStore(upstream(served), [Rule("stall", "GET", "litdata/index.json")]) as store:
        proc = run(served, store, "litdata", "native", timeout_s=None)
        deadline = time.monotonic() + 60
        while not any("litdata/index.json" in s for s in store.seen):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
            time.sleep(0.1)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("SIGTERM did not end the run within 30 s")
    assert proc.returncode == 143 and "Traceback" not in err and "not found" not in err, err[-2000:]
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("tmp")}
    assert not left, left


@pytest.mark.parametrize(("fmt", "loader"), [format_param("hdf5", "dataloader"), format_param("arrow", "native")])
@pytest.mark.parametrize("mode", ["announce", "endless"])
def test_a_store_that_announces_100_gib_or_streams_without_end_is_refused_within_memory(served, fmt, loader, mode):
    """Arrow (through datasets) and HDF5 (through s3fs) ran out of a 3 GiB bound in 15-19 s. The size an answer
    announces is held to the manifest's before its body is read."""
    with HostileStore(upstream(served), [Rule(mode, "*", f"{fmt}/")]) as store:
        line, _, err = one_line(run(served, store, fmt, loader, peak=True), timeout=120)
    peak = int(err.rstrip().splitlines()[-1])
    assert ("announced 107,374,182,400 bytes" in line) if mode == "announce" else ("without a length" in line), line
    assert peak < 2 * 2**30, f"{peak:,} bytes at the peak"


def test_a_listing_that_announces_100_gib_is_refused_before_any_library_reads(served):
    with HostileStore(upstream(served), [Rule("big-list", "GET", "list-type")]) as store:
        line, _, _ = one_line(run(served, store, "npy", "dataloader"), timeout=60)
        assert not [s for s in store.seen if "npy/features" in s and "list-type" not in s]
    assert "holds 107,374,182,400 bytes, not the" in line, line


def test_a_missing_shard_names_the_object_and_status_and_no_signed_url_is_on_a_command_line(served):
    """a shard missing from the store ended in a traceback printing the presigned URL (a key for 7 days), said
    "empty file" for an HTTP 404, and the URL stood on curl's command line while it downloaded."""
    needs_module("webdataset")
    with HostileStore(upstream(served), [Rule("drip", "GET", "webdataset/shard")], drip_s=0.2) as store:
        proc = run(served, store, "webdataset", "native")
        deadline = time.monotonic() + 60
        while not any("webdataset/shard" in s for s in store.seen):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
            time.sleep(0.05)
        time.sleep(0.5)
        # The run's own processes may not carry a signature; no process on the machine may carry its key (a CI
        # runner's command line may quote this file, so "Signature=" alone is looked for in the run's tree only).
        ours = descendants(proc.pid) | {proc.pid}
        commands, everyone = [], []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    command = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                everyone.append(command)
                if int(entry.name) in ours:
                    commands.append(command)
        proc.kill()
        proc.communicate()
    assert any(c.startswith(b"curl\0") for c in commands), "no download was under way"
    assert not [c for c in commands if b"X-Amz-Signature" in c or b"Signature=" in c]
    assert not [c for c in everyone if served[1].access_key.encode() in c]
    with HostileStore(upstream(served), [Rule("missing", "GET", "webdataset/shard")]) as store:
        line, _, _ = one_line(run(served, store, "webdataset", "native"), timeout=90)
    assert f"s3://{BUCKET}/webdataset/shard-000000.tar: HTTP 404" in line, line


def test_a_store_that_answers_a_range_without_its_content_range_is_one_line(served):
    """obstore refuses a 200 to a range request ("non-partial response"): one line naming the object (s3fs takes
    the same answer, whose bytes are the range's, and reads right)."""
    with HostileStore(upstream(served), [Rule("no-range", "GET", "npy/")]) as store:
        line, _, _ = one_line(run(served, store, "npy", "dataloader"), timeout=90)
    assert f"s3://{BUCKET}/npy/" in line, line
