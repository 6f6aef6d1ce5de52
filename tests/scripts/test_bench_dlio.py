"""`scripts/bench_dlio.py` past its --timeout (the eighth probe's P3): one line, and the DLIO it started (with what
that started) ended, not left under PID 1 after a `TimeoutExpired` traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from iobench.system.processes import process_alive
from tests.conftest import ROOT

pytestmark = pytest.mark.long


def test_a_dlio_past_the_timeout_is_stopped_with_its_children_in_one_line(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mpirun = bin_dir / "mpirun"
    mpirun.write_text('#!/bin/sh\nshift 3\nexec "$@"\n')  # --allow-run-as-root -np N, then DLIO's command
    marker = tmp_path / "dlio-child.pid"
    dlio = bin_dir / "dlio"
    dlio.write_text(f"#!/bin/sh\nsleep 1000 &\necho $! > {marker}\nwait\n")
    for f in (mpirun, dlio):
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    argv = [sys.executable, str(ROOT / "scripts" / "bench_dlio.py"), "--dlio", str(dlio), "--workload", "resnet50"]
    argv += ["--size", "16", "--timeout", "5", "--dir", str(tmp_path / "work")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == ["DLIO ran past --timeout 5 s (stopped, with everything it started)"], done.stderr
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid), "DLIO's child outlived the script"
