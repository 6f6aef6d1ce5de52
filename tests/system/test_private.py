"""iobench's own folder in a shared temp folder: used only once it is checked to be this user's (a directory, not
a link, mode 0700), files created there never through an existing name, and what a killed process left told apart
by PID and start time. "Another user" is a process running as `nobody` (setpriv), as the fourth probe had it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from iobench.errors import IobenchError
from iobench.system import ownership, private
from iobench.system.processes import start_time

NOBODY = 65534


def as_nobody(code: str) -> None:
    """Run Python code as another user of the machine (it must succeed)."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-I", "-c", code]
    done = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def shared_tmp(monkeypatch):
    """A temp folder every user may create names in, as /tmp is (sticky, 1777), set as this process's TMPDIR."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to act as a second user (setpriv)")
    folder = tempfile.mkdtemp(dir="/tmp", prefix="iobench-shared-")
    os.chmod(folder, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def test_the_state_root_is_made_private(shared_tmp):
    root = private.state_root()
    st = os.lstat(root)
    assert root.parent == shared_tmp and st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700


def test_a_state_root_another_user_made_is_refused(shared_tmp):
    """(a) another user made the folder first, with a `pids` file naming a process of root's: refused, nothing
    signalled."""
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        root = shared_tmp / f"iobench-{os.geteuid()}"
        as_nobody(
            f"import os; os.mkdir({str(root)!r}, 0o700); os.mkdir({str(root / 's3-1-1-x')!r}); "
            f"open({str(root / 's3-1-1-x' / 'pids')!r}, 'w').write('{sleeper.pid}:{start_time(sleeper.pid)}')"
        )
        with pytest.raises(IobenchError, match="belongs to uid 65534"):
            private.private_dir("s3")
        from iobench.storage.remote.emulator import new_state

        with pytest.raises(IobenchError, match="not iobench's own folder"):
            new_state()
        assert sleeper.poll() is None, "root's process was killed on another user's word"
    finally:
        sleeper.kill()


def test_a_state_root_that_is_a_link_is_refused(shared_tmp):
    """(c) the root made a link to another folder: serve wrote there and removed its sub-folders."""
    elsewhere = shared_tmp / "elsewhere"
    as_nobody(
        f"import os; os.mkdir({str(elsewhere)!r}, 0o777); os.mkdir({str(elsewhere / 's3-1-1-keep')!r}); "
        f"os.symlink({str(elsewhere)!r}, {str(shared_tmp / f'iobench-{os.geteuid()}')!r})"
    )
    with pytest.raises(IobenchError, match="it is a link"):
        private.private_dir("s3")
    assert (elsewhere / "s3-1-1-keep").is_dir()


def test_a_state_root_others_may_enter_is_refused(shared_tmp):
    root = private.state_root()
    os.chmod(root, 0o755)
    with pytest.raises(IobenchError, match="mode is 0755"):
        private.state_root()


def test_another_user_cannot_plant_names_inside(shared_tmp):
    """(b) another user swapped the fresh state folder for one holding `nginx.conf -> victim`: inside a folder
    of mode 0700 nobody else creates a name, and a file made there never goes through an existing name."""
    state = private.private_dir("s3")
    plant = f"os.symlink('/etc/passwd', {str(state / 'nginx.conf')!r})"
    as_nobody(
        f"import os\ntry:\n    {plant}\nexcept PermissionError:\n    pass\nelse:\n    raise SystemExit('planted')"
    )
    victim = shared_tmp / "victim"
    victim.write_text("root's")
    os.symlink(victim, state / "nginx.conf")
    with pytest.raises(FileExistsError):
        private.create_exclusive(state / "nginx.conf", b"nginx configuration")
    assert victim.read_text() == "root's"


def test_a_record_that_cannot_be_saved_never_follows_a_planted_link(shared_tmp, monkeypatch):
    """(d) links planted at every name the rescue file could take: the record goes to a new file of iobench's own
    folder, the victim is untouched."""
    from iobench.events import QUIET
    from iobench.results.record import RunRecord
    from iobench.run import saving as measuring

    victim = shared_tmp / "victim"
    victim.write_text("root's")
    for pid in range(os.getpid() - 5, os.getpid() + 5):
        as_nobody(f"import os; os.symlink({str(victim)!r}, {str(shared_tmp / f'iobench-unsaved-{pid}.jsonl')!r})")

    def refuse(path, record):
        raise IobenchError(f"cannot write results to {path}: a FIFO")

    monkeypatch.setattr(measuring, "append_record", refuse)
    record = RunRecord.from_json(_any_record())
    with pytest.raises(IobenchError):
        measuring.save(shared_tmp / "r.jsonl", record, QUIET)
    assert victim.read_text() == "root's"
    (rescued,) = private.state_root().glob("unsaved-*.jsonl")
    assert rescued.stat().st_nlink == 1 and not rescued.is_symlink() and '"format"' in rescued.read_text()


def _any_record() -> dict:
    """A committed record of the study (the schema's own reader takes it)."""
    import json

    study = Path(__file__).resolve().parents[2] / "docs" / "study"
    for path in sorted(study.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                return json.loads(line)
    pytest.skip("no committed record to copy")


def test_stale_folders_are_told_apart_by_their_marker(shared_tmp):
    """A folder whose marker's PID now names another process (reused) or none is stale; one of a live process, one
    with no marker (a name alone proves nothing) and one made in another PID namespace or on another host are not."""
    from dataclasses import replace

    from iobench.system.ownership import Owner, mark

    root = private.state_root()
    me = Owner.this_process()
    mine = private.private_dir("pinned")
    planted = {
        "reused": replace(me, start=me.start + 1),
        "gone": replace(me, pid=999999999, start=5),
        "other-namespace": replace(me, pid=999999999, start=5, pid_ns="pid:[1]"),
        "other-host": replace(me, pid=999999999, start=5, host=me.host + "-b"),
    }
    for name, owner in planted.items():
        (root / f"pinned-{name}").mkdir()
        mark(root / f"pinned-{name}", owner)
    (root / "pinned-999999999-5-unmarked").mkdir()
    assert sorted(private.stale_dirs("pinned")) == [root / "pinned-gone", root / "pinned-reused"]
    private.remove_stale("pinned")
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("pinned-")) == sorted(
        [mine.name, "pinned-999999999-5-unmarked", "pinned-other-host", "pinned-other-namespace"]
    )


@pytest.mark.long
def test_what_a_killed_run_pinned_is_removed_by_the_next(tmp_path):
    """SIGKILL left `iobench-pinned-*` folders in TMPDIR forever; they live in iobench's own folder now, named by
    their process, and the next reader's start removes those of processes that are gone."""
    from tests.conftest import ROOT, invoke

    invoke("prepare", "--size", 2000, "--shape", 16, "--formats", "lmdb", "--data-dir", tmp_path / "data", "-q")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    argv = [
        sys.executable,
        "-m",
        "iobench",
        "run",
        "--format",
        "lmdb",
        "--device",
        "cpu",
        "--runs",
        "50",
        "--batch-size",
        "16",
        "--data-dir",
        str(tmp_path / "data"),
        "--results",
        str(tmp_path / "r.jsonl"),
        "-q",
    ]
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    root = tmp_path / f"iobench-{os.geteuid()}"
    deadline = time.monotonic() + 60
    while True:  # stopped while it holds a marked pinned folder: between its runs it closes one, opens the next
        assert proc.poll() is None and time.monotonic() < deadline, "the run pinned nothing"
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)  # the signal is delivered before the folder is looked at
        if any(ownership.owner_of(p) for p in root.glob(f"pinned-{proc.pid}-*")):
            break
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert list(root.glob(f"pinned-{proc.pid}-*"))
    again = subprocess.run(
        [*argv[: argv.index("--runs") + 1], "1", *argv[argv.index("--runs") + 2 :]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert not list(root.glob(f"pinned-{proc.pid}-*"))
