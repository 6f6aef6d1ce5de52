"""The pasted code's check (`tune`, `checkpoint --tune`): run from the text iobench holds, never re-read from the path
it wrote (the eighth probe's S1: a second user renamed their own script over root's `ck-tuned.py` between the write
and the run, and root ran it), tied to iobench, and nothing it starts outlives it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
import time

import pytest

from iobench.run.paste_check import check_paste
from iobench.system.fsutil import atomic_write_text
from iobench.system.processes import process_alive

FIGURE = re.compile(r"figure: ([0-9.]+) s")
NOBODY = 65534
OURS = 'print("figure: 1.5 s")\n'


def test_the_check_runs_the_text_it_holds_not_the_file(tmp_path):
    script = tmp_path / "ck-tuned.py"
    script.write_text('print("figure: 9.9 s")\n')  # what the path holds when the check runs
    check = check_paste(OURS, str(script), 60, FIGURE)
    assert check.figure == 1.5, check.said


@pytest.fixture
def reachable():
    """A folder the second user can reach (pytest's own are 0700), removed after."""
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="iobench-test-"))
    os.chmod(top, 0o755)
    yield top
    if os.path.isdir(top) and not os.path.islink(top):
        shutil.rmtree(top)


def test_another_user_racing_to_swap_the_file_never_runs(reachable):
    """As root, with the folder the second user's and that user renaming their own script over ours in a loop."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to act as a second user (setpriv)")
    tmp_path = reachable
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    pwned = folder / "PWNED"
    evil = f'open({str(pwned)!r}, "w").write("ran as uid=%d" % __import__("os").getuid())\nprint("figure: 0.001 s")\n'
    (tmp_path / "evil.py").write_text(evil)
    os.chmod(tmp_path / "evil.py", 0o644)
    script = folder / "ck-tuned.py"
    racer = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/bin/sh", "-c",
         f'cd {folder} && while :; do cp {tmp_path}/evil.py .x.py && mv -f .x.py ck-tuned.py; done'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not script.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        checks = []
        for _ in range(5):
            atomic_write_text(script, OURS)  # root's write, then at once the check
            checks.append(check_paste(OURS, str(script), 60, FIGURE))
    finally:
        os.killpg(racer.pid, 9)
        racer.wait()
    assert script.read_text() == evil, "the second user did swap the file (the race ran)"
    assert all(c.figure == 1.5 for c in checks), [c.said for c in checks]
    assert not pwned.exists(), pwned.read_text()


CHILD = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen(["sleep", "1000"])
    open(sys.argv[0] + ".pid", "w").write(str(child.pid))
    print("figure: 2.0 s")
""")


def test_what_the_checked_code_starts_does_not_outlive_it(tmp_path):
    """The eighth probe's P2 and P1: a child the code starts holds no pipe of the check's open and is ended with it."""
    name = str(tmp_path / "starts-a-child.py")
    started = time.monotonic()
    check = check_paste(CHILD, name, 60, FIGURE)
    assert check.figure == 2.0, check.said
    assert time.monotonic() - started < 30, "the check waited for its leftover child"
    pid = int((tmp_path / "starts-a-child.py.pid").read_text())
    deadline = time.monotonic() + 5
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid)


KILLED = textwrap.dedent("""
    import os, subprocess, sys, time
    from iobench.run.paste_check import check_paste
    child = "open(%r, 'w').write(str(subprocess.Popen(['sleep', '1000']).pid))" % (sys.argv[1],)
    check_paste("import subprocess, time\\n" + child + "\\ntime.sleep(1000)\\n", "held.py", 600)
""")


def test_the_check_ends_when_iobench_is_killed(tmp_path):
    """SIGKILL to the process that runs the check: the check and what it started end too (the probe's check ran on,
    saving checkpoints, under PID 1)."""
    from iobench.system.processes import python_code

    marker = tmp_path / "grandchild.pid"
    parent = subprocess.Popen([*python_code(KILLED), str(marker)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    pid = int(marker.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = process_alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the checked code's child outlived iobench"
