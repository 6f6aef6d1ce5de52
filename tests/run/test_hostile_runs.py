"""`run`, `limits`, `doctor`, `report` and `compare` against the second hostile probe: budgeted runs end
promptly, a finished measurement is never lost to a stored figure, FIFOs and swapped folders are not
followed, hostile records are skipped and named, and nothing is left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from iobench.errors import RunFailed
from iobench.formats.files_layout import sample_path
from iobench.measuring.limit_rule import with_limits
from iobench.storage.local import cgroups
from tests.conftest import (
    FLAT_RECORD,
    ROOT,
    assert_one_line_error,
    console_script,
    descendants,
    invoke,
    planted,
    prepare_with_limits,
    resolved_run,
    run_beside_a_fifo,
    stored_records,
)

pytestmark = pytest.mark.hostile


def _cgroups_here(controller: str) -> bool:
    v1, _v2 = cgroups.mounts()
    return os.geteuid() == 0 and controller in v1 and os.access(v1[controller], os.W_OK)


needs_memory_cgroup = pytest.mark.skipif(
    not _cgroups_here("memory"), reason="needs root and a cgroup v1 memory hierarchy"
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-runs")
    prepare_with_limits(root, "2000", "npy,memmap,files")
    (dataset,) = (root / "data").iterdir()
    return root, dataset


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---- budgeted runs: Ctrl-C, a dead governor, budgets too small, another run's group ----------------


def _budgeted_run(root: Path, tmp_path: Path, *extra: str) -> subprocess.Popen:
    """A long budgeted run with two workers, returned once its workers, governor and janitor are up. Its
    temporary files go to tmp_path/tmp, so that what it leaves is told from other processes' in /tmp."""
    shutil.copy(root / "limits.json", tmp_path / "limits.json")
    cmd = [sys.executable, "-m", "iobench", "run", "--data-dir", str(root / "data"), "--format", "npy"]
    cmd += ["--no-shuffle", "--num-workers", "2", "--cache-budget", "64M", "--step", "sleep:50", "--batch-size", "16"]
    cmd += ["--epochs", "3", "--runs", "1", "--device", "cpu", "-q", "--results", str(tmp_path / "r.jsonl"), *extra]
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 90
    while len(descendants(proc.pid)) < 4:  # two workers, the governor and the janitor
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "timeout"
        time.sleep(0.05)
    time.sleep(1)
    return proc


def _governor_of(proc: subprocess.Popen) -> int:
    for pid in descendants(proc.pid):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"cache_governor" in f.read():
                return pid
    raise AssertionError("no governor below the run")


def _pymp(tmp_path: Path) -> set[str]:
    """multiprocessing's folders in the run's TMPDIR (its workers' descriptor servers make one each)."""
    return {p.name for p in (tmp_path / "tmp").glob("pymp-*")}


@pytest.mark.long
@needs_memory_cgroup
def test_ctrl_c_ends_a_budgeted_run_with_workers_at_once(workspace, tmp_path):
    """forked workers held the governor's stdin: a 60 s stall, then a TimeoutExpired traceback."""
    root, _ = workspace
    proc = _budgeted_run(root, tmp_path)
    deadline = time.monotonic() + 30
    while not _pymp(tmp_path):  # the check below would pass if the workers had not made theirs yet
        assert time.monotonic() < deadline, "the workers made no folder in the run's TMPDIR"
        time.sleep(0.05)
    governor = _governor_of(proc)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    err = proc.stderr.read()
    assert time.monotonic() - t0 < 15, err
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err, err
    assert not os.path.exists(f"/proc/{governor}") or "zombie" in Path(f"/proc/{governor}/status").read_text()
    # a worker removes its folder as it exits, which under load may follow the run's own end (CI, two busy loops:
    # one left after a fixed 0.5 s wait); gone within 5 s, or left
    deadline = time.monotonic() + 5
    while _pymp(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _pymp(tmp_path) == set(), "multiprocessing's temporary folders were left"


@pytest.mark.long
@needs_memory_cgroup
def test_a_killed_governor_fails_the_run_instead_of_claiming_the_budget_held(workspace, tmp_path):
    """rc 0, cache_peak_bytes 0, the limit frozen and the group's OOM killer off."""
    root, _ = workspace
    proc = _budgeted_run(root, tmp_path)
    os.kill(_governor_of(proc), signal.SIGKILL)
    proc.wait(timeout=120)
    err = proc.stderr.read()
    assert proc.returncode == 2 and "governor process ended early" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "r.jsonl").exists() or stored_records(tmp_path / "r.jsonl") == []


def test_a_budget_below_what_the_run_keeps_in_flight_is_refused_before_measuring(workspace, cli, tmp_path):
    """a 1M budget with two workers lost a batch to ENOMEM and hung for more than 100 s."""
    root, _ = workspace
    shutil.copy(root / "limits.json", tmp_path / "limits.json")
    r = cli(
        "run",
        "--data-dir",
        root / "data",
        "--format",
        "npy",
        "--num-workers",
        "2",
        "--cache-budget",
        "1M",
        "--results",
        tmp_path / "r.jsonl",
    )
    assert_one_line_error(r, "below what this run keeps in flight")
    assert not (tmp_path / "r.jsonl").exists()


def test_a_budget_without_a_unit_or_on_tmpfs_is_refused(workspace, cli, tmp_path, monkeypatch):
    root, _ = workspace
    r = cli("run", "--data-dir", root / "data", "--format", "npy", "--cache-budget", "20")
    assert_one_line_error(r, "give a unit")  # it meant 20 bytes
    monkeypatch.setattr("iobench.storage.local.folder.mount_of", lambda path: ("tmpfs", "tmpfs"))
    shutil.copy(root / "limits.json", tmp_path / "limits.json")
    r = cli(
        "run", "--data-dir", root / "data", "--format", "npy", "--cache-budget", "1G", "--results", tmp_path / "r.jsonl"
    )
    assert_one_line_error(r, "files are memory, not cache")


@pytest.mark.long
@needs_memory_cgroup
@pytest.mark.skipif(not _cgroups_here("blkio"), reason="needs root and a cgroup v1 blkio hierarchy")
def test_a_killed_runs_groups_and_throttle_are_removed_without_another_run(workspace, tmp_path):
    """after SIGKILL, the memory and blkio groups (the throttle rule still set) stayed until the next
    confined run."""
    root, _ = workspace
    proc = _budgeted_run(root, tmp_path, "--read-limit", "400")
    groups = [cgroups.home_of(c)[0] / f"iobench-{proc.pid}" for c in ("blkio", "memory")]
    assert all(g.is_dir() for g in groups)
    assert "400000000" in (groups[0] / "blkio.throttle.read_bps_device").read_text()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 60
    while any(g.exists() for g in groups):
        assert time.monotonic() < deadline, [g for g in groups if g.exists()]
        time.sleep(0.2)


def test_stale_groups_are_removed_only_when_their_run_is_gone(tmp_path):
    """one run's cleanup removed another's group before it had entered it."""
    live = tmp_path / f"iobench-{os.getppid()}"
    dead = tmp_path / f"iobench-{_dead_pid()}"
    live.mkdir()
    dead.mkdir()
    group = cgroups.Group(tmp_path)
    assert live.is_dir() and not dead.exists() and group.path.is_dir()


# ---- a stored ceiling of 0, and a probe nothing removed -------------------------------------------


@pytest.mark.parametrize("value", [0, -3.5])
def test_a_ceiling_that_is_not_a_positive_rate_is_refused_before_measuring(workspace, cli, tmp_path, value):
    """a 0 ceiling measured, then crashed in with_limits (record never appended); a negative one
    gave -3157% of the limit."""
    root, _ = workspace
    stored = json.loads((root / "limits.json").read_text())
    for entry in stored.values():
        entry["page_cache_read_mb_per_s"] = value
    (tmp_path / "limits.json").write_text(json.dumps(stored))
    r = cli("run", "--data-dir", root / "data", "--format", "npy", "--results", tmp_path / "r.jsonl", "--runs", "1")
    assert_one_line_error(r, "page_cache_read_mb_per_s", "positive rate")


def test_a_record_never_divides_by_a_ceiling_of_zero():
    from dataclasses import replace

    from iobench.results.limits import MachineLimits
    from tests.conftest import record_of

    limits = MachineLimits(hostname="h", data_device="d", storage_read_mb_per_s=1.0, page_cache_read_mb_per_s=1.0)
    object.__setattr__(limits, "page_cache_read_mb_per_s", 0.0)  # as a stale object could hold
    record = record_of()
    assert replace(with_limits(record, limits)).limit.percent_of_limit is None


def test_a_probe_left_by_a_killed_limits_is_removed_by_the_next_and_named_by_verify(workspace, tmp_path, cli):
    """a 1 GiB .partial-limits-probe-PID.bin that nothing removed, called an interrupted prepare."""
    root, dataset = workspace
    data = tmp_path / "data"
    shutil.copytree(root / "data", data)
    (copy,) = data.iterdir()
    stale = data / f".partial-limits-probe-{_dead_pid()}.bin"
    stale.write_bytes(bytes(4096))
    inside = copy / f".partial-doctor-{_dead_pid()}.bin"
    inside.write_bytes(bytes(4096))
    r = cli("verify", "--data-dir", data, "--dataset", copy.name)
    assert "probe file of an interrupted" in r.out + r.err and "interrupted prepare" not in r.out + r.err
    invoke("limits", "--data-dir", data, "--results", tmp_path / "r.jsonl", "--probe-size", "16M")
    assert not stale.exists()


# ---- read-only folders and doctor's arguments -----------------------------------------------------


@pytest.mark.parametrize("idle", ["nan", "inf", "-1"])
def test_doctor_refuses_idle_times_that_are_not_times(cli, tmp_path, idle):
    r = cli("doctor", "--data-dir", tmp_path, "--idle-seconds", idle)
    assert_one_line_error(r, "--idle-seconds")


def test_doctor_names_a_missing_data_dir_instead_of_creating_it(cli, tmp_path):
    r = cli("doctor", "--data-dir", tmp_path / "typo", "--idle-seconds", "0")
    assert_one_line_error(r, "no such folder")
    assert not (tmp_path / "typo").exists()


@pytest.fixture
def read_only_copy(workspace, tmp_path):
    """The dataset folder bind-mounted read-only (root only: root writes through file modes)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to bind-mount a read-only folder")
    root, _ = workspace
    target = tmp_path / "ro"
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(root / "data"), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount --bind failed: {mounted.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True)
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)


def test_a_read_only_data_dir_is_read_by_run_and_named_by_doctor(read_only_copy, cli, tmp_path):
    """`run` with no stored limits and `doctor` ended in an EROFS traceback from the probe's cleanup; the limits now
    live in the user's cache, so a read-only dataset (a shared one) is measured where it is."""
    r = cli("run", "--data-dir", read_only_copy, "--format", "npy", "--results", tmp_path / "r.jsonl", "--runs", "1")
    assert r.code == 0 and "Traceback" not in r.err, r.out + r.err
    assert len(stored_records(tmp_path / "r.jsonl")) == 1
    r = cli("doctor", "--data-dir", read_only_copy, "--idle-seconds", "0", "--device", "cpu")
    assert r.code == 0 and "Traceback" not in r.err and "not writable" in r.out, r.out + r.err


# ---- FIFOs and a sample folder swapped for a link -------------------------------------------------


def _returns_within(seconds: float, fn, fifo: Path):
    """fn() in a thread; a regression that blocks on the FIFO is released by opening its other end."""
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    blocked = thread.is_alive()
    if blocked:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(10)
    assert not blocked, "blocked on open() of a FIFO"
    return result


@pytest.fixture
def own_copy(workspace, tmp_path):
    root, dataset = workspace
    copy = tmp_path / dataset.name
    shutil.copytree(dataset, copy, symlinks=True)
    return copy


def _files_reader(dataset: Path):
    from iobench.data.manifest import Manifest
    from iobench.formats import FORMATS

    spec = Manifest.load(dataset).spec
    options = FORMATS["files"].resolve_options(spec, FORMATS["files"].options())
    return FORMATS["files"].reader(dataset / "files", spec, options), spec, options


def test_a_sample_replaced_by_a_fifo_is_refused_not_waited_on(own_copy):
    """open() of a FIFO planted as a sample after the start-of-run checks blocked forever."""
    reader, spec, options = _files_reader(own_copy)
    sample = own_copy / "files" / sample_path(5, spec, options.encoding)
    sample.unlink()
    os.mkfifo(sample)
    result = _returns_within(10, lambda: reader.batch(np.array([5])), sample)
    assert isinstance(result.get("error"), OSError), result
    reader.close()


def test_the_direct_loader_refuses_a_fifo_in_place_of_its_file(own_copy):
    from iobench.run.building import build_loader

    resolved = resolved_run(own_copy, "npy", "direct")
    features = own_copy / "npy" / "features.npy"
    features.unlink()
    os.mkfifo(features)
    result = _returns_within(10, lambda: build_loader(resolved), features)
    error = result.get("error")
    assert isinstance(error, RunFailed) and "not a regular file" in str(error), result


def test_a_sample_folder_swapped_for_a_link_mid_run_is_not_followed(own_copy, tmp_path):
    """O_NOFOLLOW covered only the last component: 1,010 opens outside the dataset, rc 0."""
    reader, spec, options = _files_reader(own_copy)
    first = reader.batch(np.arange(10))[0]
    folder = (own_copy / "files" / sample_path(0, spec, options.encoding)).parent
    outside = tmp_path / "outside"
    shutil.copytree(folder, outside)
    shutil.rmtree(folder)
    folder.symlink_to(outside)  # same bytes outside: only following the link would make reads succeed
    with pytest.raises(OSError):
        reader.batch(np.arange(10))
    reader.close()
    assert first.shape[0] == 10


# ---- hostile records: report, compare, tune, sweep resume -----------------------------------------


def _hostile_lines() -> list[str]:
    good = json.dumps(FLAT_RECORD)
    return [
        good,
        good.replace('"batch_size": 16', '"batch_size": ' + "9" * 5000),  # int() refuses > 4,300 digits
        "[" * 200_000 + "]" * 200_000,  # nesting deeper than the recursion limit
        json.dumps({**FLAT_RECORD, "epoch_seconds_median": 1e308, "epoch_seconds": [1e308] * 3}),
        json.dumps({**FLAT_RECORD, "mb_per_s": -5.0}),
        json.dumps({**FLAT_RECORD, "dataset": "a | b <script>alert(1)</script>\nsecond line", "batch_size": 32}),
        # the fourth probe: NaN ranked fastest ("nanx the next"), and settings no run has
        json.dumps({**FLAT_RECORD, "samples_per_s": float("nan")}),
        json.dumps({**FLAT_RECORD, "batch_size": -16}),
        json.dumps({**FLAT_RECORD, "n_samples": 1e30}),
        json.dumps({**FLAT_RECORD, "n_samples": 10**30}),
        json.dumps({**FLAT_RECORD, "num_workers": 10**6}),
        json.dumps(
            {**FLAT_RECORD, "dataset": "![x](http://example.com/x.png) [click](http://example.com)", "batch_size": 64}
        ),
    ]


def test_hostile_records_are_skipped_and_named_by_report(tmp_path, cli):
    """a 5,000-digit integer or deep nesting killed report, compare, tune and sweep resume;
    1e308 seconds raised OverflowError, negative MB/s a matplotlib ValueError."""
    results = tmp_path / "r.jsonl"
    results.write_text("\n".join(_hostile_lines()) + "\n")
    r = cli("report", results, "--out", tmp_path / "report")
    assert r.code == 0, r.err
    assert "Traceback" not in r.err
    skipped = [line for line in r.err.splitlines() if "skipped" in line]
    assert [line.split("r.jsonl:")[1].split(":")[0] for line in skipped] == ["2", "3", "4", "5", *"7 8 9 10 11".split()]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "<script>" not in report and "a \\| b &lt;script&gt;" in report
    assert not re.search(r"(?<!\\)\]\(http", report) and "!\\[x\\]" in report, "a link or an image"
    assert "nan" not in report.lower().replace("nano", "")
    table_rows = [line for line in report.splitlines() if line.startswith(("| n100", "| a ", "| !"))]
    assert len(table_rows) == 3 and all(row.count(" | ") == table_rows[0].count(" | ") for row in table_rows)


def test_compare_survives_hostile_records_and_a_zero_baseline(tmp_path, cli):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    zero = {**FLAT_RECORD, "samples_per_epoch": 0, "samples_per_s": 0.0, "mb_per_s": 0.0}
    a.write_text("\n".join([*_hostile_lines()[1:], json.dumps(zero)]) + "\n")
    b.write_text(json.dumps(FLAT_RECORD) + "\n")
    r = cli("compare", a, b)
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "A is 0" in r.out


def test_hostile_limits_are_one_line(tmp_path, cli, workspace):
    root, _ = workspace
    (tmp_path / "limits.json").write_text("[" * 200_000 + "]" * 200_000)
    r = cli("run", "--data-dir", root / "data", "--format", "npy", "--results", tmp_path / "r.jsonl")
    assert_one_line_error(r, "limits.json", "nested too deep")


def test_a_workers_traceback_becomes_one_line_with_its_reason(monkeypatch):
    """A worker's exception arrives with its whole traceback; the one-line error keeps the reason."""
    from iobench.errors import RunFailed
    from iobench.run import epochs, format_epochs
    from tests.conftest import run_config

    text = (
        "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
        '  File "worker.py", line 1, in fetch\n    raise ValueError\nValueError: record 5 is corrupt\n'
    )

    def broken(*args, **kwargs):
        raise RuntimeError(text)

    monkeypatch.setattr(epochs, "time_epoch", broken)
    with pytest.raises(RunFailed) as info:
        format_epochs.ConfigEpochs(run_config("lmdb", "dataloader")).clock(None, 0, None)
    message = str(info.value)
    assert "\n" not in message and "record 5 is corrupt" in message and "worker process 0" in message


def test_a_governor_whose_run_was_killed_ends_without_a_traceback(tmp_path):
    """after SIGKILL of the run, the governor's last line met a closed pipe: a BrokenPipe traceback."""
    for name, value in (("memory.usage_in_bytes", "1000"), ("memory.limit_in_bytes", "1000")):
        (tmp_path / name).write_text(value)
    (tmp_path / "memory.stat").write_text("active_file 0\ninactive_file 0\n")
    read_end, write_end = os.pipe()
    governor = subprocess.Popen(
        [sys.executable, "-m", "iobench.storage.local.cache_governor", str(tmp_path), "1", "100"],
        stdin=subprocess.PIPE,
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    os.close(write_end)
    line = b""
    while not line.endswith(b"\n"):  # print may write "ready" and its newline apart (PYTHONUNBUFFERED)
        part = os.read(read_end, 6)
        assert part, f"the governor ended before its line: {line!r}"
        line += part
    assert line == b"ready\n"
    os.close(read_end)  # the run is gone
    governor.stdin.write(b"stop\n")
    governor.stdin.close()
    assert governor.wait(timeout=30) == 0
    assert governor.stderr.read() == b""
    assert (tmp_path / "memory.limit_in_bytes").read_text() == "-1", "the limit was lifted"


@pytest.mark.long
@needs_memory_cgroup
def test_the_cache_budgets_governor_imports_the_running_iobench(workspace, tmp_path):
    """the governor was started as `python -m iobench.storage.local.cache_governor` from the working directory."""
    root, _ = workspace
    marker = planted(tmp_path)
    r = subprocess.run(
        [
            console_script(),
            "run",
            "--data-dir",
            root / "data",
            "--format",
            "npy",
            "--cache-budget",
            "64M",
            "--runs",
            "1",
            "--device",
            "cpu",
            "--results",
            root / "planted.jsonl",
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert not marker.exists(), f"planted code ran: {marker.read_text()}"


CORE_DATA_FILE = {
    "npy": "npy/features.npy",
    "memmap": "memmap/features.memmap",
    "hdf5": "hdf5/data.h5",
    "lmdb": "lmdb/data.mdb",
    "files": "files/labels.npy",
}


@pytest.mark.long
@pytest.mark.parametrize(
    ("fmt", "loader"),
    [
        ("npy", "direct"),
        ("memmap", "direct"),
        ("npy", "dataloader"),
        ("hdf5", "dataloader"),
        ("lmdb", "dataloader"),
        ("memmap", "tensorclass"),
        ("files", "dataloader"),
    ],
)
def test_a_core_data_file_swapped_for_a_fifo_mid_run_is_one_line_not_a_hang(workspace, tmp_path, fmt, loader):
    """with --loader direct --cache cold the refusal escaped as a traceback; LMDB's open() and unprivileged
    eviction waited on the FIFO forever."""
    from iobench.errors import IobenchError

    root, dataset = workspace
    copy = tmp_path / "data" / dataset.name
    shutil.copytree(dataset, copy)
    if fmt in ("hdf5", "lmdb"):
        invoke("prepare", "--size", "2000", "--formats", fmt, "--data-dir", copy.parent, "-q")
    resolved = resolved_run(copy, fmt, loader, cache="cold", eviction="fadvise", runs=1, warmup=0)
    error = run_beside_a_fifo(resolved, copy / CORE_DATA_FILE[fmt])
    assert isinstance(error, IobenchError), error
    assert "\n" not in str(error)
