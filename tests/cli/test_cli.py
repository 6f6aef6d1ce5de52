"""prepare / verify / info end to end, corruption, bad input and interruption."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from iobench.formats import DEFAULT_FORMATS
from tests.conftest import ROOT, assert_one_line_error, every_format, run_subprocess

pytestmark = [pytest.mark.e2e, pytest.mark.extras]

SIZE = "2000"


@pytest.fixture
def prepared(tmp_path, cli):
    r = cli("prepare", "--size", SIZE, "--data-dir", tmp_path, "-q", "--lmdb-samples-per-record", "3")
    assert r.code == 0, r.err
    (dataset_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return dataset_dir


def test_prepare_verify_info(prepared, cli):
    r = cli("prepare", "--size", SIZE, "--data-dir", prepared.parent, "-q", "--formats", "files")  # the fifth
    assert r.code == 0, r.err
    manifest = json.loads((prepared / "manifest.json").read_text())
    assert set(manifest["formats"]) == {*DEFAULT_FORMATS, "files"}
    assert manifest["spec"]["n_samples"] == 2000
    for entry in manifest["formats"].values():
        assert entry["bytes"] == sum(f["bytes"] for f in entry["files"]) > 2000 * 520
        assert entry["write_seconds"] > 0 and all(len(f["sha256"]) == 64 for f in entry["files"])
    assert manifest["formats"]["lmdb"]["options"] == {"samples_per_record": 3}
    r = cli("verify", "--data-dir", prepared.parent, "-q")
    assert r.code == 0, r.out + r.err
    assert r.out.count(" OK") == 5
    r = cli("info", "--data-dir", prepared)
    assert r.code == 0 and "hdf5" in r.out and "samples_per_record=3" in r.out


@pytest.mark.parametrize("name", every_format())
def test_verify_catches_a_flipped_byte(prepared, cli, name):
    if name not in DEFAULT_FORMATS:  # written only when asked for
        assert cli("prepare", "--size", SIZE, "--data-dir", prepared.parent, "-q", "--formats", name).code == 0
    entry = json.loads((prepared / "manifest.json").read_text())["formats"][name]
    biggest = max(entry["files"], key=lambda f: f["bytes"])
    path = prepared / entry["directory"] / biggest["path"]
    with open(path, "r+b") as f:
        f.seek(biggest["bytes"] // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    r = cli("verify", "--data-dir", prepared, "-q")
    assert r.code == 1
    lines = {line.split()[0]: line for line in r.out.splitlines() if line.startswith("  ")}
    assert "FAILED" in lines[name] and biggest["path"] in lines[name]
    assert all("OK" in line for n, line in lines.items() if n != name)


def test_verify_reads_content_through_the_reader(prepared, cli):
    """A file replaced together with its manifest checksum still fails: the content is wrong."""
    manifest_path = prepared / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    path = prepared / "npy" / "labels.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(data)
    import hashlib

    for f in manifest["formats"]["npy"]["files"]:
        if f["path"] == "labels.npy":
            f["sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    r = cli("verify", "--data-dir", prepared, "-q")
    assert r.code == 1 and "content checksum mismatch" in r.out


def test_existing_dataset_needs_force(prepared, cli):
    before = (prepared / "manifest.json").read_text()
    r = cli("prepare", "--size", SIZE, "--data-dir", prepared.parent, "-q", "--formats", "npy")
    assert_one_line_error(r, "already prepared", "--force")
    assert (prepared / "manifest.json").read_text() == before
    r = cli("prepare", "--size", SIZE, "--data-dir", prepared.parent, "-q", "--formats", "npy,hdf5", "--force")
    assert r.code == 0, r.err
    assert cli("verify", "--data-dir", prepared, "-q").code == 0


def test_prepare_with_progress_bars(tmp_path, cli):
    r = cli("prepare", "--size", "3000", "--data-dir", tmp_path / "big", "--formats", "npy,hdf5")
    assert r.code == 0, r.err
    # not a terminal: each format's finished line, no bar redrawn into the captured output (issue 92)
    assert "preparing" in r.err and "hdf5 1.6 MB stored" in r.err and "MB/s" in r.err and "━" not in r.err
    assert "manifest:" in r.out
    small = cli("prepare", "--size", "300", "--data-dir", tmp_path / "small", "--formats", "npy,hdf5")
    assert small.code == 0 and "MB/s" in small.err
    assert "checksum" not in small.err, "no bar for the few bytes hashed after writing a small format"


def test_formats_can_be_added_one_at_a_time(tmp_path, cli):
    assert cli("prepare", "--size", "500", "--data-dir", tmp_path, "--formats", "npy", "-q").code == 0
    assert cli("prepare", "--size", "500", "--data-dir", tmp_path, "--formats", "lmdb", "-q").code == 0
    (d,) = tmp_path.iterdir()
    assert set(json.loads((d / "manifest.json").read_text())["formats"]) == {"npy", "lmdb"}


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--formats", "parquet"], ["unknown format 'parquet'"]),
        (["--size", "0"], ["size"]),
        (["--size", "-3"], ["size"]),
        (["--size", "lots"], ["cannot parse size"]),
        (["--shape", "3,0"], ["shape"]),
        (["--shape", "a,b"], ["shape"]),
        (["--dtype", "complex64"], ["dtype"]),
        (["--hdf5-compression", "zstd"], ["compression"]),
        (["--lmdb-samples-per-record", "0"], ["samples per record"]),
        (["--size", "1e13"], ["not enough disk space"]),
        (["--classes", "many"], ["classes"]),
    ],
)
def test_prepare_bad_input_is_one_line_and_leaves_nothing(tmp_path, cli, args, fragments):
    r = cli("prepare", "--size", "100", "--data-dir", tmp_path / "d", "-q", *args)
    assert_one_line_error(r, *fragments)
    leftovers = [p for p in (tmp_path / "d").rglob("*")] if (tmp_path / "d").exists() else []
    assert leftovers == [], leftovers


def test_unwritable_data_dir(tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert_one_line_error(cli("prepare", "--size", "10", "--data-dir", blocker / "sub", "-q"), "cannot create")


def test_directory_that_is_not_a_dataset(tmp_path, cli):
    assert_one_line_error(cli("verify", "--data-dir", tmp_path), "no prepared dataset")
    assert_one_line_error(cli("info", "--data-dir", tmp_path / "missing"), "no such directory")
    (tmp_path / "n10_128_float32_c1000_s0").mkdir()
    (tmp_path / "n10_128_float32_c1000_s0" / "photo.jpg").write_text("x")
    assert_one_line_error(cli("prepare", "--size", "10", "--data-dir", tmp_path, "-q"), "not an iobench dataset")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    assert_one_line_error(cli("verify", "--data-dir", tmp_path / "broken"), "unreadable manifest")


def _start_prepare(tmp_path, size, formats):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "iobench", "prepare", "--size", size, "--formats", formats]
    return subprocess.Popen(
        [*cmd, "--data-dir", str(tmp_path), "-q"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_interrupted_prepare_leaves_nothing_complete_looking(tmp_path, cli, sig):
    # npy is prepared first; a later prepare that adds lmdb is interrupted mid-write.
    assert cli("prepare", "--size", "300000", "--formats", "npy", "--data-dir", tmp_path, "-q").code == 0
    proc = _start_prepare(tmp_path, "300000", "lmdb,memmap")
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*/.partial-lmdb-*/data.mdb")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.005)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    stderr = proc.stderr.read()
    assert proc.returncode != 0
    (dataset_dir,) = tmp_path.iterdir()
    assert not (dataset_dir / "lmdb").exists()
    manifest = dataset_dir / "manifest.json"
    assert set(json.loads(manifest.read_text())["formats"]) == {"npy"}
    assert not (dataset_dir / "memmap").exists()
    partials = list(dataset_dir.glob(".partial-*"))
    if sig == signal.SIGKILL:
        assert partials, "the kill should have left the partial directory for the next run to remove"
        r = cli("verify", "--data-dir", dataset_dir, "-q")
        assert r.code == 0 and "npy     OK" in r.out and "left by an interrupted prepare" in r.out
    else:  # a catchable signal cleans up on the way out
        assert partials == [] and "interrupted" in stderr and "Traceback" not in stderr, (proc.returncode, stderr)
    assert cli("prepare", "--size", "300000", "--formats", "lmdb,memmap", "--data-dir", tmp_path, "-q").code == 0
    assert list(dataset_dir.glob(".partial-*")) == []


# From the first partial folder on: inside the fork of the LMDB writer, mid-write, around the renames.
MOMENTS = (0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1, 1.5, 2, 3, 4)


@pytest.mark.slow
@pytest.mark.long
def test_ctrl_c_at_any_moment_never_hangs_and_never_leaves_an_unrecoverable_folder(tmp_path, cli):
    """Each prepare is interrupted at another moment, in the same folder, and must end within the
    timeout (a deadlock would not); the next prepare must always be able to carry on from there."""
    outcomes = []
    for delay in MOMENTS:
        before = set(tmp_path.glob("*/.partial-*"))  # what an earlier interrupt left for this run to remove
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        cmd = [sys.executable, "-m", "iobench", "prepare", "--size", "40000", "--formats", "npy,lmdb,memmap"]
        proc = subprocess.Popen(
            [*cmd, "--data-dir", str(tmp_path), "-q", "--force"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not set(tmp_path.glob("*/.partial-*")) - before and proc.poll() is None:
            assert time.monotonic() < deadline, "prepare never started writing"
            time.sleep(0.0005)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"prepare hung after SIGINT {delay} s into writing")
        stderr = proc.stderr.read()
        # 0: done before the signal; 130: interrupted and cleaned up; -SIGINT: the signal came while the
        # interpreter was shutting down after the work was done (Python restores the default handler then).
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, stderr)
        assert "Traceback" not in stderr, (delay, stderr)
        outcomes.append(proc.returncode)
    assert outcomes.count(130) >= 10, outcomes  # most moments did interrupt the writing
    r = cli("prepare", "--size", "40000", "--formats", "npy,lmdb,memmap", "--data-dir", tmp_path, "-q", "--force")
    assert r.code == 0, r.err
    r = cli("verify", "--data-dir", tmp_path, "-q")
    assert r.code == 0 and r.out.count(" OK ") == 3 and "interrupted prepare" not in r.out, r.out


def test_module_entry_point_and_help():
    r = run_subprocess("--help")
    assert r.returncode == 0 and "prepare" in r.stdout and "verify" in r.stdout
    r = run_subprocess("prepare", "--help")
    assert r.returncode == 0 and "--size" in r.stdout and "--force" in r.stdout
    r = run_subprocess("prepare", "--no-such-option")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
