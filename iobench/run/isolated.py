"""One configuration measured in a process of its own: `tune --remote`'s trials. obstore's runtime does not
survive a fork, so a process that has read object storage may not fork DataLoader workers; a search runs
candidates with and without workers in any order, so each starts from a process that has read nothing (a fork
of a server process that only imported iobench and torch).

Python 3.11's forkserver starts as `python -c ...` without `-I` and ignores the parent's sys.path: its first
entry is the working directory, so a `numpy.py` there ran in every trial (the fourth probe). It is started here
with PYTHONSAFEPATH (no such entry, Python >= 3.11) from an empty folder of iobench's own (where older Pythons
find nothing to import), and each trial sets its import path to the running iobench's before it imports more."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from iobench.errors import IobenchError
from iobench.plan.resolve import ResolvedRun
from iobench.results.record import RunRecord
from iobench.system.processes import die_with_parent

STOP_WAIT_S = 5.0  # how long a trial's process has to end after SIGTERM before it is killed


def _measure(resolved: ResolvedRun, limits: Any, out: Connection, path: list[str], cwd: str) -> None:
    """In the trial's process: its record as JSON, or its error as one line."""
    sys.path[:] = path  # the running iobench's, every entry absolute: never the working directory
    os.chdir(cwd)
    from iobench.run.runner import run

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the search's, which then stops this process
    signal.signal(signal.SIGTERM, _leave)  # stopped: its mounts and workers are released on the way out
    # a search killed outright (SIGKILL) leaves this process measuring for nobody, then failing to hand over its
    # record with a traceback: it ends with the forkserver, which ends with the search
    die_with_parent()
    # A forkserver's child starts its own processes through the forkserver too: its DataLoader workers would be
    # fresh interpreters (a slower start than `iobench run`'s forks, and without what the reader set up in this
    # process, such as LitData's chunks through boto3). This process has read nothing yet: fork, as `run` does.
    multiprocessing.set_start_method("fork", force=True)
    try:
        _answer(out, ("record", run(resolved, limits).to_json()))
    except IobenchError as exc:
        _answer(out, ("error", str(exc)))
    except Exception as exc:  # said in one line in the search's process
        _answer(out, ("error", f"{type(exc).__name__}: {exc}"))
    finally:
        out.close()


def _answer(out: Connection, message: tuple[str, Any]) -> None:
    """To the search, which may be gone (killed outright: its server went with it, which is why this trial
    failed): then there is nobody to tell, and nothing to print."""
    try:
        out.send(message)
    except OSError:
        pass


def _leave(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def run_isolated(resolved: ResolvedRun, limits: Any) -> RunRecord:
    """`run(resolved, limits)` in a fresh process; its error is raised here in one line, and the process is
    stopped on every exit (Ctrl-C included)."""
    from iobench.system.processes import import_path

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["iobench.run.runner"])
    with _safe_start():
        multiprocessing.forkserver.ensure_running()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(
        target=_measure, args=(resolved, limits, send, import_path(), os.getcwd()), name="iobench-trial"
    )
    process.start()
    send.close()
    answered = False
    try:
        try:
            kind, payload = receive.recv()
        except EOFError:
            process.join(STOP_WAIT_S)
            raise IobenchError(f"a trial's process ended without a record (exit code {process.exitcode})") from None
        answered = True
        if kind == "error":
            raise IobenchError(payload)
        return RunRecord.from_json(payload)
    finally:
        receive.close()
        if answered:
            process.join(STOP_WAIT_S)  # it ends by itself once it has answered
        for stop in (process.terminate, process.kill):
            if process.is_alive():
                stop()
                process.join(STOP_WAIT_S)


def _remove_marked_empty(folder: Path) -> None:
    """The forkserver's folder at this process's exit: its marker and the folder, when nothing else is in it (a
    long pytest session left one per process in the state folder)."""
    from iobench.system.ownership import MARKER

    with contextlib.suppress(OSError):
        if sorted(os.listdir(folder)) == [MARKER]:
            os.unlink(folder / MARKER)
            os.rmdir(folder)


@contextlib.contextmanager
def _safe_start() -> Iterator[None]:
    """While the forkserver starts: PYTHONSAFEPATH set and an empty private folder as the working directory (kept:
    the forkserver imports its preload after it has started, and torch's libraries do not load from a folder that
    is gone; removed, still empty, when this process exits, and by iobench's next start if it was killed)."""
    import atexit

    from iobench.system.private import private_dir

    cwd, before = os.getcwd(), os.environ.get("PYTHONSAFEPATH")
    empty = private_dir("forkserver")
    atexit.register(_remove_marked_empty, empty)
    os.environ["PYTHONSAFEPATH"] = "1"
    os.chdir(empty)
    try:
        yield
    finally:
        os.chdir(cwd)
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before
