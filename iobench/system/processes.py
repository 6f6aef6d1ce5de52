"""Whether a process is still there: stale cgroups, probe files and Ray actors are judged by it."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has exited: it maps and holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        if os.path.isdir("/proc"):
            return False
    try:  # no /proc (not Linux): ask the kernel by signal 0
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
