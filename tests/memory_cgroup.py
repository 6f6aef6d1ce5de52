"""A command run inside a fresh memory cgroup of its own (root only; v1 `memory.limit_in_bytes` or v2 `memory.max`):
what a job scheduler or a container does to a training job. Tests that need one skip, saying why, elsewhere."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from iobench.storage.local import cgroups


def memory_home() -> tuple[Path, int]:
    """Where a memory cgroup can be made here, and its version; the test skips (with the reason) where none can."""
    if os.geteuid() != 0:
        pytest.skip("a memory cgroup needs root")
    v1, v2 = cgroups.mounts()
    if "memory" in v1 and os.access(v1["memory"], os.W_OK):
        return v1["memory"], 1
    if v2 is not None and "memory" in (v2 / "cgroup.subtree_control").read_text().split():
        return v2, 2
    pytest.skip("no memory cgroup controller to make a group in")


def run_in_memory_cgroup(argv: list[str], limit_bytes: int, **kwargs) -> tuple[subprocess.CompletedProcess, int]:
    """`argv` in a new memory cgroup limited to `limit_bytes`: its result, and the most memory the group held."""
    home, version = memory_home()
    group = home / f"iobench-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / ("memory.limit_in_bytes" if version == 1 else "memory.max")).write_text(str(limit_bytes))
        enter = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'
        done = subprocess.run(["sh", "-c", enter, "sh", *argv], capture_output=True, text=True, **kwargs)
        peak_file = "memory.max_usage_in_bytes" if version == 1 else "memory.peak"
        peak = int((group / peak_file).read_text()) if (group / peak_file).exists() else 0
        return done, peak
    finally:
        for _ in range(50):  # its processes are gone: the group can go (v1 may take a moment to uncharge)
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
