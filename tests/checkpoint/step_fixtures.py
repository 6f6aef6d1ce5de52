"""`checkpoint --step module:function` steps for the tests: a step that starts a child (the eighth probe's P2) and one
that ends the trial's process with os._exit(0) (T1)."""

from __future__ import annotations

import os
import subprocess

_started: list[int] = []


def starts_a_child(features: object, labels: object) -> None:
    if not _started:
        child = subprocess.Popen(["sleep", "1000"])
        _started.append(child.pid)
        with open(os.environ["IOBENCH_TEST_CHILD_PID"], "w") as f:
            f.write(str(child.pid))


def exits_at_once(features: object, labels: object) -> None:
    os._exit(0)
