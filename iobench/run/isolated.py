"""One configuration measured in a process of its own: `tune --remote`'s trials. obstore's runtime does not
survive a fork, so a process that has read object storage may not fork DataLoader workers; a search runs
candidates with and without workers in any order, so each starts from a process that has read nothing (a fork
of a server process that only imported iobench and torch)."""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.connection import Connection
from typing import Any

from iobench.errors import IobenchError
from iobench.plan.resolve import ResolvedRun
from iobench.results.record import RunRecord

STOP_WAIT_S = 5.0  # how long a trial's process has to end after SIGTERM before it is killed


def _measure(resolved: ResolvedRun, limits: Any, out: Connection) -> None:
    """In the trial's process: its record as JSON, or its error as one line."""
    from iobench.run.runner import run

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the search's, which then stops this process
    signal.signal(signal.SIGTERM, _leave)  # stopped: its mounts and workers are released on the way out
    # A forkserver's child starts its own processes through the forkserver too: its DataLoader workers would be
    # fresh interpreters (a slower start than `iobench run`'s forks, and without what the reader set up in this
    # process, such as LitData's chunks through boto3). This process has read nothing yet: fork, as `run` does.
    multiprocessing.set_start_method("fork", force=True)
    try:
        out.send(("record", run(resolved, limits).to_json()))
    except IobenchError as exc:
        out.send(("error", str(exc)))
    except Exception as exc:  # noqa: BLE001 - said in one line in the search's process
        out.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        out.close()


def _leave(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def run_isolated(resolved: ResolvedRun, limits: Any) -> RunRecord:
    """`run(resolved, limits)` in a fresh process; its error is raised here in one line, and the process is
    stopped on every exit (Ctrl-C included)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["iobench.run.runner"])
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_measure, args=(resolved, limits, send), name="iobench-trial")
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
