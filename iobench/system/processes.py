"""Processes: whether one is still there (stale cgroups, probe files and Ray actors are judged by it), and the
command lines of the Python children iobench starts."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys

_EXITED = frozenset("ZXx")  # /proc/PID/stat states of a process that has exited


def process_alive(pid: int) -> bool:
    """The process exists and has not exited: a zombie (Z) or one its parent is reaping (X, dead: it follows Z)
    maps and holds nothing. Treating X as alive made a process seen exited (Z) look alive again a moment later."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in _EXITED
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


# A child Python started isolated (-I: no working directory or script folder on sys.path, no PYTHON*
# variables, no user site), then given this process's import path: it imports the iobench that is running,
# never one (or a numpy) that happens to lie in the working directory. Only the standard library is imported
# before the path is set.
_BOOT = (
    "import json, runpy, sys\n"
    "sys.path[:] = json.loads(sys.argv[1])\n"
    "module = sys.argv[2]\n"
    "sys.argv[:] = [module, *sys.argv[3:]]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def import_path() -> list[str]:
    """This process's sys.path with relative entries made absolute (a child may start elsewhere)."""
    return [os.path.abspath(p) if p else os.getcwd() for p in sys.path]


def python_module(module: str, *args: str, unbuffered: bool = False) -> list[str]:
    """argv of `python -m module args...` that imports what this process imports (see _BOOT)."""
    flags = ["-I", "-u"] if unbuffered else ["-I"]
    return [sys.executable, *flags, "-c", _BOOT, json.dumps(import_path()), module, *args]


def python_code(code: str) -> list[str]:
    """argv of `python -c code` that imports what this process imports."""
    return [sys.executable, "-I", "-c", f"import sys\nsys.path[:] = {json.dumps(import_path())}\n{code}"]


def _stat_field(pid: int, field: int) -> int | None:
    """A numeric field of /proc/PID/stat (numbered as proc(5) does, from 1), read after the command name (which may
    hold spaces and parentheses). None where there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[field - 3])
    except (OSError, IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks after boot (field 22): with the PID, it names one process, where a
    PID alone may have been reused. None where there is no such process."""
    return _stat_field(pid, 22)


def parent_of(pid: int) -> int | None:
    """The process's parent's PID (field 4; 1 once it is reparented to init). None where there is no such process."""
    return _stat_field(pid, 4)


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """This process gets `signum` when the process that started it ends, however it ends (Linux PR_SET_PDEATHSIG;
    nothing elsewhere). Call in the child: before exec for a server, first thing in a forked worker."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signum)  # 1: PR_SET_PDEATHSIG
