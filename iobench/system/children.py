"""A child iobench starts and waits for (a checkpoint trial, the pasted code's check): in a session of its own, tied
to iobench (it ends when iobench ends, however iobench ends), its output read until it exits. When it exits, runs past
its time or is interrupted, its whole process group is ended: nothing it started outlives it. The eighth probe's
`--step` that started `sleep 1000` held the trial's pipes for the whole trial timeout and then ran on under PID 1; the
pasted code's check ran on, saving checkpoints, after iobench was SIGKILLed."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from iobench.system.processes import die_with_parent
from iobench.system.ranks import child_env, tie_to_parent

AFTER_EXIT_S = 2.0  # output still read after the child exited (its group ended): what it wrote last
POLL_S = 0.1


@dataclass(frozen=True)
class ChildExit:
    code: int  # the exit status; negative: ended by that signal
    stdout: str
    stderr: str
    first_line_at: float | None = None  # when its first line of output came (time.time())


def end_group(pgid: int) -> None:
    """SIGKILL to every process left in the group (none: nothing)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_child(
    argv: Sequence[str],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    stdin_text: str | None = None,
    cwd: str | None = None,
) -> ChildExit:
    """`argv` in a session of its own, tied to this process (`child_env`), `stdin_text` on its standard input (an
    unnamed file: nothing on disk another user could change), its output captured; its group ended when it exits.
    `subprocess.TimeoutExpired` past `timeout_s` (the group ended first)."""
    stdin: int | object = subprocess.DEVNULL
    if stdin_text is not None:
        stdin = tempfile.TemporaryFile()
        stdin.write(stdin_text.encode())  # type: ignore[attr-defined]
        stdin.seek(0)  # type: ignore[attr-defined]
    try:
        with subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(env),
            cwd=cwd,
            start_new_session=True,
        ) as proc:
            try:
                out, err, first_line_at = _read_until_exit(proc, timeout_s)
            finally:
                end_group(proc.pid)
                proc.kill()
                proc.wait()
    finally:
        if stdin_text is not None:
            stdin.close()  # type: ignore[attr-defined]
    return ChildExit(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), first_line_at)


def _read_until_exit(proc: subprocess.Popen, timeout_s: float) -> tuple[bytes, bytes, float | None]:
    """Both pipes read until the child has exited and its group is ended (what it left holding them gone), and when
    the first line of stdout came (a restart prints its line as its first step is done)."""
    out, err, first_line_at = bytearray(), bytearray(), None
    deadline = time.monotonic() + timeout_s
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        selector.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                end_group(proc.pid)  # what it started and left running: the pipes close with them
            if exited_at is not None and now - exited_at > AFTER_EXIT_S:
                break  # a process that left the group (setsid) still holds a pipe: not waited for
            if now >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            for key, _ in selector.select(timeout=min(POLL_S, deadline - now)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if key.data is out and first_line_at is None and b"\n" in chunk:
                    first_line_at = time.time()
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    return bytes(out), bytes(err), first_line_at


def tied(signum: int = signal.SIGKILL) -> None:
    """First thing in a child `run_child` (or `Ranks`) started: it ends with iobench (`tie_to_parent`), and its group
    ends with it (`end_group_with_me`)."""
    tie_to_parent(signum)
    end_group_with_me()


def end_group_with_me() -> None:
    """In a process that leads its own group: a watcher forked beside it ends the whole group when this process ends,
    however it ends (SIGKILL included), so that what it started (a user's step's `sleep`, a worker) does not outlive it.
    Nothing where this process does not lead its group (never another's group)."""
    leader = os.getpid()
    if os.getpgid(0) != leader:
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    if os.fork() != 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        return
    try:  # the watcher: no pipe of the leader's held open, then wait for the leader's end
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 65536)
        die_with_parent(signal.SIGUSR1)
        if os.getppid() == leader:
            signal.sigwait({signal.SIGUSR1})
        end_group(leader)
    finally:
        os._exit(0)
