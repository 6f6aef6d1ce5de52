"""Nothing measured is lost and nothing prepared is destroyed: torn files, unwritable or full disks,
truncated data, --force that cannot finish, concurrent prepares."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from iobench.data.manifest import Manifest
from iobench.results.store import append_record, load_records
from tests.conftest import (
    ROOT,
    assert_one_line_error,
    descendants,
    invoke,
    prepare_with_limits,
    record_of,
    stored_records,
)

pytestmark = pytest.mark.hostile


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliability")
    prepare_with_limits(root, "600", "npy,lmdb,memmap")
    return root


def _run(cli, workspace, results, *extra):
    return cli(
        "run",
        "--data-dir",
        workspace / "data",
        "--format",
        "npy",
        "--device",
        "cpu",
        "--runs",
        "1",
        "--batch-size",
        "64",
        "-q",
        "--results",
        results,
        *extra,
    )


def test_a_torn_line_is_skipped_by_readers_and_never_glued_to_the_next_record(workspace, cli):
    results = workspace / "torn.jsonl"
    assert _run(cli, workspace, results).code == 0
    whole = results.read_text()
    results.write_text(whole + whole[: len(whole) // 2])  # a second record cut by a full disk
    assert _run(cli, workspace, results).code == 0
    lines = results.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["format"] == "npy", "the new record has a line of its own"
    loaded = load_records(results)
    assert len(loaded.records) == 2 and loaded.skipped == [
        f"{results}:2: not a whole JSON record (torn or edited); skipped"
    ]
    r = cli("report", results, "--out", workspace / "torn-report")
    assert r.code == 0 and f"{results}:2: not a whole JSON record" in r.err
    r = cli("compare", results, results)
    assert r.code == 0 and "1 matching configuration(s)" in r.out


def test_records_of_the_wrong_type_are_skipped_with_the_reason(tmp_path):
    path = tmp_path / "r.jsonl"
    append_record(path, record_of())
    with open(path, "a") as f:
        f.write("[1, 2]\nnull\n" + json.dumps({**record_of().to_json(), "epoch_seconds": "fast"}) + "\n")
    loaded = load_records(path)
    assert len(loaded.records) == 1
    assert [s.split(": ", 1)[1] for s in loaded.skipped] == [
        "not an iobench record (a record must be a JSON object, got list); skipped",
        "not an iobench record (a record must be a JSON object, got NoneType); skipped",
        "not an iobench record ('epoch_seconds' holds 'fast', not list[float]); skipped",
    ]


def test_results_that_cannot_be_written_are_refused_before_measuring(workspace, cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    started = time.monotonic()
    r = _run(cli, workspace, blocker / "r.jsonl")
    assert_one_line_error(r, "cannot create", "for the results")
    assert time.monotonic() - started < 10 and "measuring" not in r.err


def test_a_crafted_limits_file_is_refused_before_measuring(workspace, cli, tmp_path):
    results = tmp_path / "r.jsonl"
    (tmp_path / "limits.json").write_text(json.dumps({"vm:/dev/vda": {"hostname": "vm", "data_device": 7}}))
    assert_one_line_error(_run(cli, workspace, results), "limits.json", "'data_device' holds 7")
    assert not results.exists()


def test_a_record_that_cannot_be_saved_is_kept_elsewhere(workspace, cli, monkeypatch, tmp_path):
    """A full disk at the very end: the record goes to a rescue file, and the error says where."""
    import iobench.run.saving
    from iobench.errors import IobenchError

    results = tmp_path / "r.jsonl"
    real = iobench.run.saving.append_record

    def disk_full(path, record):
        if path == results:
            raise IobenchError(f"cannot write results to {path}: No space left on device")
        real(path, record)

    monkeypatch.setattr(iobench.run.saving, "append_record", disk_full)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the rescue file in this test's folder, not the user's
    shutil.copy(workspace / "limits.json", tmp_path / "limits.json")
    r = _run(cli, workspace, results)
    assert r.code == 2 and "No space left on device; the record was saved to" in r.err
    rescue = r.err.split("the record was saved to ")[1].split()[0]
    assert rescue.startswith(tempfile.gettempdir())
    (record,) = stored_records(Path(rescue))
    assert record["format"] == "npy" and record["samples_per_epoch"] == 600


def test_a_full_file_system_keeps_the_measurement(workspace, cli, tmp_path, monkeypatch):
    """The same on a real full file system (a 1 MiB tmpfs), where the machine lets us mount one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the rescue file in this test's folder
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        shutil.copy(workspace / "limits.json", mount / "limits.json")
        with open(mount / "filler", "wb", buffering=0) as f:  # fill it up
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        r = _run(cli, workspace, mount / "r.jsonl")
        assert r.code == 2 and "No space left on device" in r.err and "the record was saved to" in r.err, r.err
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture
def own_copy(workspace, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(workspace / "data", data)
    (dataset,) = data.iterdir()
    return dataset


def test_verify_changes_nothing_on_truncated_files(own_copy, cli):
    for fmt, name in (("memmap", "features.memmap"), ("lmdb", "data.mdb")):
        path = own_copy / fmt / name
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    sizes = {p: p.stat().st_size for p in own_copy.rglob("*") if p.is_file()}
    r = cli("verify", "--data-dir", own_copy, "-q")
    assert r.code == 1 and "memmap  FAILED" in r.out and "lmdb    FAILED" in r.out and "npy     OK" in r.out
    assert "content not decoded: files are missing or of the wrong size" in r.out
    assert {p: p.stat().st_size for p in own_copy.rglob("*") if p.is_file()} == sizes, "verify changed a file"


def test_force_keeps_the_old_dataset_when_the_new_one_does_not_fit(own_copy, cli):
    before = sorted(p.relative_to(own_copy) for p in own_copy.rglob("*"))
    r = cli("prepare", "--size", "1e12", "--data-dir", own_copy.parent, "--dataset", own_copy.name, "-q", "--force")
    assert_one_line_error(r, "not enough disk space")
    assert sorted(p.relative_to(own_copy) for p in own_copy.rglob("*")) == before
    assert set(Manifest.load(own_copy).formats) == {"npy", "lmdb", "memmap"}


def test_format_folders_without_a_manifest_are_recoverable_with_force(tmp_path, cli):
    """What an interrupt between a rename and the manifest left (before the manifest came first)."""
    dataset = tmp_path / "n300_128_float32_c1000_s0"
    (dataset / "npy").mkdir(parents=True)
    (dataset / "npy" / "features.npy").write_bytes(b"old")
    r = cli("prepare", "--size", "300", "--formats", "npy", "--data-dir", tmp_path, "-q")
    assert_one_line_error(r, "holds 'npy'", "use --force")
    r = cli("prepare", "--size", "300", "--formats", "npy", "--data-dir", tmp_path, "-q", "--force")
    assert r.code == 0, r.err
    assert cli("verify", "--data-dir", tmp_path, "-q").code == 0


@pytest.mark.long
@pytest.mark.slow
def test_two_prepares_of_one_dataset_do_not_both_run(tmp_path, cli):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "iobench", "prepare", "--size", "200000", "--formats", "npy,memmap"]
    first = subprocess.Popen(
        [*cmd, "--data-dir", str(tmp_path), "-q"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*/.partial-*")):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    r = cli("prepare", "--size", "200000", "--formats", "npy,memmap", "--data-dir", tmp_path, "-q", "--force")
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert_one_line_error(r, "another prepare is running on this dataset")
    assert cli("verify", "--data-dir", tmp_path, "-q").code == 0
    invoke("prepare", "--size", "200000", "--formats", "npy", "--data-dir", tmp_path, "-q", "--force")


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["prepare", "--size", "100", "--seed", str(10**20)], ["seed must be 0..2^63-1"]),
        (["prepare", "--size", "100", "--classes", str(10**20)], ["classes must be 1..2,147,483,648"]),
        (["run", "--num-workers", "100000", "--format", "npy"], ["far above", "the limit is"]),
        (["run", "--torch-threads", "100000", "--format", "npy"], ["--torch-threads 100000 is far above"]),  # N11
        (["run", "--max-seconds", "nan", "--format", "npy"], ["--max-seconds must be a number > 0"]),
        (["run", "--seed", "-1", "--format", "npy"], ["--seed must be >= 0"]),
        (["sweep", "--epochs", "0", "--format", "npy"], ["--epochs must be >= 1"]),
        (
            ["run", "--what-if", "2", "--nproc", "2", "--format", "npy"],
            ["--what-if measures its checks in one process"],
        ),
        (["run", "--what-if", "fast", "--format", "npy"], ["--what-if takes step times in ms"]),
        (["run", "--min-au", "90", "--format", "npy"], ["--min-au is a share between 0 and 1"]),
        (["tune", "--format", "npy", "--budget-minutes", "0"], ["--budget-minutes must be a number > 0"]),
        (["limits", "--probe-size", "1000T"], ["not enough disk space", "--probe-size"]),
    ],
)
def test_bad_values_are_one_line_and_leave_nothing(tmp_path, cli, args, fragments):
    target = tmp_path / "fresh"
    r = cli(*args, "--data-dir", target)
    assert_one_line_error(r, *fragments)
    assert not target.exists() or not any(target.iterdir()), list(target.iterdir())


def test_a_mistyped_data_dir_is_not_filled_with_a_default_dataset(tmp_path, cli):
    r = cli("run", "--data-dir", tmp_path / "dta", "--device", "cpu", "-q", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "no such folder; check --data-dir")
    assert not (tmp_path / "dta").exists()


def test_a_corrupt_lmdb_is_one_line_before_measuring(own_copy, cli, tmp_path):
    path = own_copy / "lmdb" / "data.mdb"
    data = bytearray(path.read_bytes())
    data[: 2 * 4096] = b"\xff" * (2 * 4096)  # both meta pages
    path.write_bytes(bytes(data))
    r = cli("run", "--data-dir", own_copy.parent, "--format", "lmdb", "--device", "cpu", "-q")
    assert_one_line_error(r, "lmdb in", "MDB_INVALID")


def test_paths_with_brackets_are_printed_as_they_are(tmp_path, cli):
    data = tmp_path / "runs[1]" / "data"
    r = cli("prepare", "--size", "100", "--formats", "npy", "--data-dir", data, "-q")
    assert r.code == 0 and "runs[1]/data" in r.out
    r = cli("info", "--data-dir", data)
    assert r.code == 0 and "runs[1]" in r.out


def test_a_prepared_dataset_is_readable_by_colleagues(tmp_path, cli):
    old = os.umask(0o022)
    try:
        assert cli("prepare", "--size", "100", "--data-dir", tmp_path, "-q").code == 0
    finally:
        os.umask(old)
    for path in tmp_path.rglob("*"):
        mode = path.stat().st_mode
        assert mode & 0o044 == 0o044, (path, oct(mode))  # group and others may read
        if path.is_dir():
            assert mode & 0o011 == 0o011, (path, oct(mode))  # and enter folders


def _run_with_two_workers(workspace, tmp_path) -> subprocess.Popen:
    """A long `iobench run` in a subprocess, returned once its two DataLoader workers are up."""
    cmd = [sys.executable, "-m", "iobench", "run", "--data-dir", str(workspace / "data"), "--format", "npy"]
    cmd += ["--num-workers", "2", "--step", "sleep:50", "--batch-size", "16", "--runs", "5", "--device", "cpu", "-q"]
    cmd += ["--results", str(tmp_path / "r.jsonl")]
    shutil.copy(workspace / "limits.json", tmp_path / "limits.json")
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(descendants(proc.pid)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.05)
    return proc


@pytest.mark.long
def test_sigterm_ends_a_run_and_its_workers(workspace, tmp_path):
    proc = _run_with_two_workers(workspace, tmp_path)
    workers = descendants(proc.pid)
    proc.terminate()
    proc.wait(timeout=30)
    assert proc.returncode == 143 and "interrupted" in proc.stderr.read()
    time.sleep(1)
    alive = [p for p in workers if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read()]
    assert alive == [], "workers outlived the run"


def _as_nobody(*args: str) -> subprocess.CompletedProcess:
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "iobench", *args]
    return subprocess.run(cmd, cwd="/", capture_output=True, text=True, timeout=300)


@pytest.mark.long
def test_unprivileged_cold_runs_refuse_drop_caches_and_fall_back_to_fadvise(workspace):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to become an unprivileged user (setpriv)")
    probe = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", "import iobench.cli"],
        cwd="/",
        capture_output=True,
    )
    if probe.returncode:
        pytest.skip("this checkout is not readable by an unprivileged user")
    shared = tempfile.mkdtemp(dir="/tmp", prefix="iobench-unprivileged-")
    try:
        os.chmod(shared, 0o777)
        shutil.copytree(workspace / "data", f"{shared}/data")
        shutil.copy(workspace / "limits.json", f"{shared}/limits.json")
        for path in [shared, *(str(p) for p in Path(shared).rglob("*"))]:
            os.chmod(path, 0o777 if os.path.isdir(path) else 0o666)
        common = ["--data-dir", f"{shared}/data", "--format", "npy", "--cache", "cold", "--device", "cpu", "-q"]
        common += ["--runs", "1", "--results", f"{shared}/r.jsonl"]
        r = _as_nobody("run", *common, "--eviction", "drop_caches")
        assert r.returncode == 2 and r.stderr.strip() == (
            "iobench: error: --eviction drop_caches needs root (sudo iobench ...); or use --eviction fadvise"
        ), r.stderr
        r = _as_nobody("run", *common)
        assert r.returncode == 0, r.stderr
        (record,) = stored_records(Path(shared) / "r.jsonl")
        assert record["eviction_method"] == "fadvise+prime+fadvise" and max(record["residency_before"]) < 0.05
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _open_files() -> list[str]:
    """What this process's descriptors point to; one closed meanwhile (a worker's queue, by its own thread, as
    the CI once saw between listing and reading) is not held."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
    return held


@pytest.mark.parametrize("loader", ["dataloader", "tensorclass", "gpu-resident"])
def test_closing_a_loader_twice_is_harmless(workspace, loader):
    from iobench.run.building import build_loader
    from tests.conftest import resolved_run

    (dataset,) = (workspace / "data").iterdir()
    workers = 1 if loader != "gpu-resident" else 0
    earlier = set(descendants(os.getpid()))  # processes of tests before this one (a forkserver): not the loader's
    built = build_loader(resolved_run(dataset, "memmap", loader, num_workers=workers))
    next(iter(built.epoch(0)))
    children = [p for p in descendants(os.getpid()) if p not in earlier]
    built.close()
    built.close()  # the second close finds nothing left to close, and says nothing
    memmap = str(dataset / "memmap")
    with open("/proc/self/maps") as maps:
        assert memmap not in maps.read(), "the dataset is still mapped after close()"
    assert not [p for p in _open_files() if p.startswith(memmap)], "a file of the dataset is still open after close()"
    time.sleep(0.5)
    alive = [p for p in children if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read()]
    assert alive == [], "the loader's workers outlived close()"


@pytest.mark.parametrize("formats", ["hdf5,npy", "lmdb,memmap"])
def test_writing_stops_before_the_disk_is_full(tmp_path, cli, monkeypatch, formats):
    """HDF5 crashes when a write meets a full disk: prepare stops, in one line, while room is left (here the file
    system reads nearly full from the start: a fake free-space reader, never the machine's free space, which another
    program changed between the test's reading and prepare's, so that prepare exited 0)."""
    import iobench.data.writing as writing

    monkeypatch.setattr(writing, "free_bytes", lambda path: writing.MIN_FREE_BYTES - 1)
    r = cli("prepare", "--size", "5000", "--formats", formats, "--data-dir", tmp_path, "-q")
    assert_one_line_error(r, "disk full while writing", "MiB left on the file system", "nothing was kept")
    assert list(tmp_path.iterdir()) == [], "the dataset folder this prepare created is removed again"


@pytest.mark.long
def test_a_killed_worker_ends_the_run_in_one_line(workspace, tmp_path):
    proc = _run_with_two_workers(workspace, tmp_path)
    os.kill(min(descendants(proc.pid)), 9)
    proc.wait(timeout=60)
    lines = [line for line in proc.stderr.read().splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("iobench: error: a DataLoader worker died during npy/dataloader"), lines[0]


def test_a_signal_after_the_work_is_done_prints_no_traceback():
    """A Ctrl-C that lands while the interpreter runs its exit callbacks (seen at 1 of 21 moments of
    the prepare test): the command is over, so it is ignored rather than raised inside a callback."""
    code = (
        "import atexit, os, signal, sys, time\n"
        "from iobench.cli import main\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.2)))\n"
        "sys.argv = ['iobench', '--version']\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("iobench ") and "Traceback" not in r.stderr, r.stderr


def test_a_workers_broken_descriptor_handover_is_dropped_and_nothing_else(monkeypatch):
    from iobench.loaders import dataloader

    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: seen.append(kind))
    dataloader.quiet_handovers(0)
    namespace: dict = {}
    source = "def _serve(kind):\n    raise kind('handshake')\n"
    exec(compile(source, "/usr/lib/python3.11/multiprocessing/resource_sharer.py", "exec"), namespace)
    for kind, thrower in [
        (ConnectionResetError, namespace["_serve"]),
        (EOFError, namespace["_serve"]),
        (ValueError, namespace["_serve"]),  # not a broken handshake
        (ConnectionResetError, lambda kind: (_ for _ in ()).throw(kind("elsewhere"))),  # not the sharer
    ]:
        try:
            thrower(kind)
        except BaseException:  # handed to the hook as the sharer's thread does
            sys.excepthook(*sys.exc_info())
    assert seen == [ValueError, ConnectionResetError]


def test_a_read_broken_by_a_killed_worker_is_reported_as_the_dead_worker():
    from iobench.run.failures import killed_child as _killed_child

    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    os.kill(child, 9)
    deadline = time.monotonic() + 10
    while (found := _killed_child()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert found == f"worker (pid {child}) was killed by SIGKILL"
    assert os.waitpid(child, 0)[0] == child  # left for its owner to reap
    assert _killed_child() is None


def test_a_broken_handover_waits_a_moment_for_the_worker_killed_behind_it():
    """The worker's socket can reset before the killed worker is a zombie (seen once in CI): the handover's error
    looks for the killed child during a moment; an error of the read itself is worded at once."""
    from iobench.run.failures import killed_child as _killed_child

    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    try:
        started = time.monotonic()
        assert _killed_child(0.2) is None and time.monotonic() - started >= 0.2, "alive: waited, found nothing"
        killer = threading.Timer(0.1, os.kill, (child, 9))
        killer.start()
        assert _killed_child() is None, "not yet killed"
        assert _killed_child(5.0) == f"worker (pid {child}) was killed by SIGKILL"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, 9)
        os.waitpid(child, 0)


def _files(folder: Path) -> dict[str, bytes]:
    """Every file below folder, byte for byte."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _corrupt_npz(path: Path, n: int) -> Path:
    """An archive that opens and whose header is right, but whose features fail their CRC when read."""
    import numpy as np

    np.savez(path, features=np.arange(n * 16, dtype=np.float32).reshape(n, 16), labels=np.zeros(n, dtype=np.int64))
    data = bytearray(path.read_bytes())
    data[data.index(b"features.npy") + 400] ^= 0xFF  # inside the member's data, past its .npy header
    path.write_bytes(bytes(data))
    return path


def test_a_failed_force_over_another_dataset_keeps_the_old_one_byte_for_byte(tmp_path, cli):
    """`prepare --from corrupt.npz --force` deleted every format first, then failed on a bad CRC."""
    data = tmp_path / "data"
    invoke(
        "prepare",
        "--size",
        "300",
        "--shape",
        "16",
        "--formats",
        "npy,hdf5,memmap",
        "--data-dir",
        data,
        "--dataset",
        "X",
        "-q",
    )
    before = _files(data / "X")
    r = cli(
        "prepare",
        "--from",
        _corrupt_npz(tmp_path / "corrupt.npz", 300),
        "--features-key",
        "features",
        "--labels-key",
        "labels",
        "--data-dir",
        data,
        "--dataset",
        "X",
        "--force",
        "-q",
    )
    assert_one_line_error(r, "--from", "X is unchanged")
    assert _files(data / "X") == before
    assert [p.name for p in data.iterdir()] == ["X"], "the dataset being built beside it is gone"
    assert cli("verify", "--data-dir", data, "-q").code == 0


@pytest.mark.long
def test_an_interrupted_force_over_another_dataset_keeps_the_old_one_byte_for_byte(tmp_path):
    """Ctrl-C two seconds into `prepare --force` over another spec left a manifest without formats."""
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy,memmap", "--data-dir", data, "--dataset", "X", "-q")
    before = _files(data / "X")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable,
        "-m",
        "iobench",
        "prepare",
        "--size",
        "400000",
        "--formats",
        "npy,memmap",
        "--data-dir",
        str(data),
        "--dataset",
        "X",
        "--force",
        "-q",
    ]
    forced = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(data.glob(".partial-dataset-*/.partial-*")):  # the new dataset's formats are being written
        assert forced.poll() is None and time.monotonic() < deadline, forced.stderr.read()
        time.sleep(0.005)
    forced.send_signal(signal.SIGINT)
    assert forced.wait(timeout=60) == 130, forced.stderr.read()
    assert _files(data / "X") == before
    assert [p.name for p in data.iterdir()] == ["X"], "the dataset being built beside it is gone"


def test_a_force_over_another_dataset_replaces_it_whole(tmp_path, cli):
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy,memmap", "--data-dir", data, "--dataset", "X", "-q")
    invoke("prepare", "--size", "200", "--formats", "npy", "--data-dir", data, "--dataset", "X", "--force", "-q")
    manifest = Manifest.load(data / "X")
    assert manifest.spec.n_samples == 200 and set(manifest.formats) == {"npy"}
    assert sorted(p.name for p in (data / "X").iterdir()) == ["manifest.json", "npy"]
    assert [p.name for p in data.iterdir()] == ["X"]
    assert cli("verify", "--data-dir", data, "-q").code == 0


def test_a_killed_force_leaves_a_partial_dataset_the_next_prepare_removes(tmp_path, cli):
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy", "--data-dir", data, "--dataset", "X", "-q")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = data / f".partial-dataset-{int(dead.stdout)}-abc"
    (stale / "npy").mkdir(parents=True)
    shutil.copy(data / "X" / "manifest.json", stale / "manifest.json")
    assert cli("info", "--data-dir", data).code == 0  # a partial dataset is not listed as one
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
    assert r.code == 0, r.err
    invoke("prepare", "--size", "300", "--formats", "hdf5", "--data-dir", data, "--dataset", "X", "-q")
    assert not stale.exists()


def _manifest_saves_failing_after(monkeypatch, good: int) -> None:
    """Every manifest save after the first `good` ones fails as a full disk does."""
    import errno

    saves = {"n": 0}
    real = Manifest.save

    def save(self, dataset_dir):
        saves["n"] += 1
        if saves["n"] > good:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, dataset_dir)

    monkeypatch.setattr(Manifest, "save", save)


def test_a_disk_full_when_listing_a_new_format_leaves_no_unlisted_folder(tmp_path, cli, monkeypatch):
    """ENOSPC from the manifest save after the rename was a traceback, and left a complete folder that the
    manifest did not list."""
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy", "--data-dir", data, "--dataset", "X", "-q")
    before = _files(data / "X")
    _manifest_saves_failing_after(monkeypatch, 0)
    r = cli("prepare", "--size", "300", "--formats", "memmap", "--data-dir", data, "--dataset", "X", "-q")
    assert_one_line_error(r, "disk full", "nothing was kept")
    assert _files(data / "X") == before and sorted(p.name for p in (data / "X").iterdir()) == ["manifest.json", "npy"]


@pytest.mark.parametrize("good", [0, 1], ids=["unlisting-fails", "listing-fails"])
def test_a_disk_full_when_listing_a_forced_format_keeps_the_old_one(tmp_path, cli, monkeypatch, good):
    data = tmp_path / "data"
    invoke("prepare", "--size", "300", "--formats", "npy,memmap", "--data-dir", data, "--dataset", "X", "-q")
    before = _files(data / "X")
    _manifest_saves_failing_after(monkeypatch, good)
    r = cli("prepare", "--size", "300", "--formats", "memmap", "--data-dir", data, "--dataset", "X", "--force", "-q")
    assert_one_line_error(r, "disk full")
    monkeypatch.undo()
    assert {k: v for k, v in _files(data / "X").items() if k != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"
    }
    if good == 0:  # the old entry was never removed
        assert _files(data / "X") == before and cli("verify", "--data-dir", data, "-q").code == 0


def test_an_interrupted_workers_descriptor_server_reports_nothing_and_everything_else_still_does():
    """Ctrl-C during a native pipeline with 2 workers printed a worker's resource_sharer traceback (its
    file-descriptor server lost the interrupted main process mid-handshake: 1 interrupt in 8 here)."""
    import multiprocessing.resource_sharer as resource_sharer

    from iobench.system.signals import quiet_interrupted_handover

    reported = []
    hook = quiet_interrupted_handover(lambda kind, value, tb: reported.append(kind))

    def raised(code: str, filename: str) -> tuple:
        try:
            exec(compile(code, filename, "exec"))
        except BaseException:
            return sys.exc_info()
        raise AssertionError("nothing raised")

    hook(*raised("raise ConnectionResetError(104, 'Connection reset by peer')", resource_sharer.__file__))
    hook(*raised("raise EOFError()", resource_sharer.__file__))
    assert reported == []
    hook(*raised("raise ConnectionResetError(104, 'elsewhere')", __file__))
    hook(*raised("raise ValueError('a real failure')", resource_sharer.__file__))
    assert reported == [ConnectionResetError, ValueError]


def test_an_interrupt_raised_inside_a_finaliser_stops_the_main_thread_instead_of_being_printed(monkeypatch):
    """Ctrl-C while the garbage collector ran a multiprocessing Connection's `__del__`: the handler's
    KeyboardInterrupt cannot leave a finaliser, Python printed it as "Exception ignored" with a traceback and went
    on writing (CI, prepare interrupted 0.02 s in). It is delivered to the main thread again; other reports pass."""
    from iobench.system.signals import redeliver_lost_interrupt

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", redeliver_lost_interrupt(lambda u: reported.append(u.exc_type)))

    class Finalised:
        def __init__(self, error: BaseException) -> None:
            self.error = error

        def __del__(self) -> None:
            raise self.error

    Finalised(ValueError("a real failure"))  # finalised at once: reported, nothing raised here
    assert reported == [ValueError]
    with pytest.raises(KeyboardInterrupt):
        Finalised(KeyboardInterrupt("signal 2"))
        for _ in range(1000):  # the interrupt lands at one of the next instructions of this thread
            time.sleep(0.001)
    assert reported == [ValueError]


def test_half_a_batch_from_a_killed_worker_is_the_workers_death_in_one_line(monkeypatch):
    """A worker killed while handing a batch over can leave the main process any error (half a pickle): CI once saw
    a 109-line traceback where the death of the worker is the one line to say."""
    import pickle

    from iobench.errors import RunFailed
    from iobench.plan.config import RunConfig
    from iobench.run import failures

    config = RunConfig(format="npy", loader="dataloader")
    monkeypatch.setattr(failures, "killed_child", lambda wait_s=0.0: "pid 7 killed by SIGKILL")
    said = failures.failure(pickle.UnpicklingError("pickle data was truncated"), config)
    assert isinstance(said, RunFailed) and str(said).startswith("a DataLoader worker died during npy/dataloader")
    monkeypatch.setattr(failures, "killed_child", lambda wait_s=0.0: None)
    with pytest.raises(pickle.UnpicklingError):  # no worker died: not the worker's line, the error itself
        failures.failure(pickle.UnpicklingError("pickle data was truncated"), config)
