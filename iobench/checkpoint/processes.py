"""A trial run in a fresh process that imports the running iobench and dies with this one, or in N ranks
(`iobench.system.ranks`: their store a file of this user's) for a library that saves with ranks or needs a process
group; its JSON line, or its failure in one line."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from iobench.checkpoint.job import CheckpointJob
from iobench.checkpoint.libraries import LIBRARIES
from iobench.checkpoint.state import StateSpec
from iobench.errors import IobenchError
from iobench.system.children import end_group, run_child
from iobench.system.fsutil import free_bytes
from iobench.system.processes import python_module
from iobench.system.ranks import Ranks, child_env, run_ranks

TRIAL_MODULE = "iobench.checkpoint.trial"
FULL_DISK_BYTES = 64 * 2**20  # less free than this after a failed save: the disk filled


def trial_argv(job: CheckpointJob) -> list[str]:
    return python_module(TRIAL_MODULE, json.dumps(job.to_json()))


def as_ranks(job: CheckpointJob) -> bool:
    """Whether the job runs as ranks: more than one, or a library that needs a process group even alone."""
    return job.nproc > 1 or LIBRARIES[job.library].group


def _tcp(job: CheckpointJob) -> bool:
    """Whether its ranks join through a TCP store (DCP's checkpoint process needs one) rather than a file."""
    return LIBRARIES[job.library].group


def in_a_process(job: CheckpointJob, timeout_s: float, env: Mapping[str, str]) -> subprocess.CompletedProcess:
    """The job in a fresh process, or in `job.nproc` ranks (rank 0's output, or the first failed rank's)."""
    argv = trial_argv(job)
    if as_ranks(job):
        try:
            exits = run_ranks(
                argv, job.nproc, capture=True, timeout_s=timeout_s, env=child_env(None, **env), tcp_store=_tcp(job)
            )
        except TimeoutError:
            raise subprocess.TimeoutExpired(argv, timeout_s) from None
        shown = next((e for e in exits if e.code != 0), exits[0])
        return subprocess.CompletedProcess(argv, shown.code, shown.stdout, shown.stderr)
    done = run_child(argv, timeout_s, env=child_env(None, **env))  # its group ended with it
    completed = subprocess.CompletedProcess(argv, done.code, done.stdout, done.stderr)
    completed.first_line_at = done.first_line_at  # type: ignore[attr-defined]  # a restart's whole ends at its line
    return completed


class Started:
    """The job started as `in_a_process` starts it (alone, or as ranks), for the kill test: rank 0's output read as
    it comes, and every process of it SIGKILLed at once by `kill` (or on leaving the block). A save that needs a
    group, started alone, failed at once (DCP's process checkpointer): its kills measured nothing."""

    def __init__(self, job: CheckpointJob, env: Mapping[str, str]) -> None:
        argv, env = trial_argv(job), child_env(None, **env)
        self._ranks = Ranks(argv, job.nproc, env=env, pipe=True, tcp_store=_tcp(job)) if as_ranks(job) else None
        self._procs = (
            self._ranks.procs
            if self._ranks is not None
            else [
                subprocess.Popen(
                    argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True
                )
            ]
        )

    def readline(self) -> str:
        return self._procs[0].stdout.readline().decode(errors="replace")

    def failed(self) -> bool:
        """Some process of it has already exited with a failure (before any kill)."""
        return any(p.poll() not in (None, 0) for p in self._procs)

    def kill(self) -> None:
        if self._ranks is not None:
            self._ranks.stop(wait_s=5.0, first=signal.SIGKILL)
            self._ranks.close()
            return
        proc = self._procs[0]
        proc.kill()
        proc.wait()
        end_group(proc.pid)  # what it started, if its watcher has not ended it yet
        proc.stdout.close()

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def trial(job: CheckpointJob, env: Mapping[str, str], disk: Path | None = None) -> dict:
    """One save or restore in a fresh process; its JSON line, or the failure in one line (a full disk under `disk`
    said as such: the libraries speak of SIGBUS or "unexpected pos")."""
    free_before = free_bytes(disk) if disk is not None else None
    timeout_s = timeout_of(job.spec, job.saves if job.op == "save" else 1)
    try:
        done = in_a_process(job, timeout_s, env)
    except subprocess.TimeoutExpired:
        raise IobenchError(f"checkpoint: {job.library} {job.op} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        why = lines[-1][:300] if lines else f"exit status {done.returncode}"
        if disk is not None and job.op == "save" and (left := free_bytes(disk)) < FULL_DISK_BYTES:
            why = (
                f"the disk is full ({free_before / 1e6:,.0f} MB free under --dir before the save, {left / 1e6:,.0f}"
                f" MB after; the library said: {why})"
            )
        raise IobenchError(f"checkpoint: {job.library} {job.op} failed: {why}")
    measured = last_result(done.stdout, f"checkpoint: {job.library} {job.op}")
    if (line_at := getattr(done, "first_line_at", None)) is not None:
        measured["line_at"] = line_at
    return measured


def last_result(stdout: str, what: str) -> dict:
    """A child's result, its last line of output: one JSON object (a step or an import that ended the process with
    os._exit(0) left none)."""
    lines = stdout.strip().splitlines()
    try:
        measured = json.loads(lines[-1]) if lines else None
    except ValueError:
        measured = None
    if not isinstance(measured, dict):
        said = f"; its last line: {lines[-1][:200]!r}" if lines else ""
        raise IobenchError(f"{what} ended (exit status 0) without its result{said}")
    return measured


def timeout_of(spec: StateSpec, saves: int = 1) -> float:
    return 120 + saves * spec.state_bytes / 20e6  # a disk of 20 MB/s would still finish
