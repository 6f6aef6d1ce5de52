"""Ranks on this machine: N processes of one command joined by a store that no other user can reach, and that end
with the process that started them, however it ends.

The store is a file in a private folder of iobench's (`private_dir`: 0700, marked as the launcher's, and removed by
the next launch where the launcher was killed): torch's FileStore. torch's TCPStore has no authentication: on
127.0.0.1 another local user's raw client read and wrote its keys during a feed count, and by overwriting a rank's
gloo address broke the group (the eighth probe). A trial of `dcp-async-process` alone still needs
a TCP store (DCP's checkpoint process joins through MASTER_ADDR and MASTER_PORT): `tcp_store=True` hosts one on
127.0.0.1 as before, and says so (`TCP_STORE_EXPOSURE`). gloo's own sockets listen on 127.0.0.1 at ports the kernel
picks: another local user can connect to them (as to any loopback port) and disturb a collective, though the addresses
and sequence numbers that pair ranks are in the store, which they cannot read.

torchrun (`--standalone`, or given `--rdzv-endpoint 127.0.0.1:PORT` or `--master-addr 127.0.0.1`) hosts its store on
every interface (`*:PORT` in `ss -ltnp`, torch 2.13: the TCP store binds the wildcard address whatever host it is
given), and its workers outlive a SIGKILLed launcher. So iobench starts its local ranks itself, with what torchrun gives
a worker: the store is hosted here on a socket bound to 127.0.0.1 (`TCPStore(master_listen_fd=...)`), every rank joins
it as a client (`TORCHELASTIC_USE_AGENT_STORE`, as torchrun's own workers do), gloo's sockets are on the loopback
interface (`GLOO_SOCKET_IFNAME=lo`), and OMP_NUM_THREADS is 1 unless set (torchrun's default). Each rank runs in a
session of its own (a terminal's Ctrl-C reaches this process, which stops them), whose group a stop signals whole
(the rank's DataLoader workers included); each rank dies with its parent (`tie_to_parent`: PR_SET_PDEATHSIG, then a
check that the parent is still the one that started it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from iobench.system.private import private_dir
from iobench.system.processes import die_with_parent, start_time

LOOPBACK = "127.0.0.1"
STORE_FILE = "IOBENCH_RANK_STORE"  # the FileStore every rank joins (a path in this user's 0700 folder)
TCP_STORE_EXPOSURE = (
    "dcp-async-process's checkpoint process joins its ranks through torch's TCPStore on 127.0.0.1, which has no "
    "authentication: while its trials run, another user of this machine can read and change the store's keys"
)
LIFELINE = "IOBENCH_LIFELINE"  # "<pid>:<start time>" of the process that started this one
STOP_WAIT_S = 10.0  # after SIGTERM to the ranks' group, before SIGKILL
MAX_RANKS = 256  # `--nproc`'s bound where it is parsed (the memory check refuses what does not fit long before)
# a rank's own memory before it holds any data: Python, torch, gloo and the library imported. The seventh probe read
# 3.9 GB across 6 DCP ranks of a 1e4-parameter state (Intel); 290 MB peak RSS a rank here (AMD, 2 ranks): the larger
RANK_FIXED_BYTES = 650 * 10**6
POLL_S = 0.05


@dataclass(frozen=True)
class RankExit:
    rank: int
    code: int  # the exit status; negative: ended by that signal
    stdout: str = ""
    stderr: str = ""


def lifeline_value(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_time(pid) or 0}"


def tie_to_parent(signum: int = signal.SIGTERM) -> None:
    """In a child iobench started (a rank, a trial): get `signum` when the parent ends, and end now if it already
    has (it may have died between the fork and this call). Nothing outside such a child (no `IOBENCH_LIFELINE`);
    the variable is taken out of the environment, so that this process's own children are not tied by it."""
    value = os.environ.pop(LIFELINE, "")
    pid, _, start = value.partition(":")
    if not (pid.isdigit() and start.isdigit()):
        return
    die_with_parent(signum)
    if os.getppid() != int(pid) or start_time(int(pid)) != int(start):
        os._exit(128 + signum)


def started_as_ranks(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is a rank `Ranks` started (it joins the group through the store it was given)."""
    return STORE_FILE in env or (env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and "MASTER_PORT" in env)


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child that dies with this process (`tie_to_parent` reads it)."""
    env = dict(os.environ if base is None else base)
    env[LIFELINE] = lifeline_value()
    env.update(extra)
    return env


def loopback_listener() -> socket.socket:
    """A listening TCP socket on 127.0.0.1, on a port the kernel chose free."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, 0))
    sock.listen(128)
    return sock


def rank_env(rank: int, nproc: int, store: str | int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """What torchrun sets for a worker on one node; `store`: the FileStore's path, or a TCP store's port on loopback
    (`TCP_STORE_EXPOSURE`). gloo's sockets on loopback."""
    env = child_env(base)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0",
        GROUP_WORLD_SIZE="1",
        ROLE_RANK=str(rank),
        ROLE_WORLD_SIZE=str(nproc),
        ROLE_NAME="default",
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
        GLOO_SOCKET_IFNAME="lo",
    )
    for name in (STORE_FILE, "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"):
        env.pop(name, None)  # an inherited store is never this group's
    if isinstance(store, str):
        env[STORE_FILE] = store
    else:
        env.update(MASTER_ADDR=LOOPBACK, MASTER_PORT=str(store), TORCHELASTIC_USE_AGENT_STORE="True")
    return env


def _tcp_store(nproc: int) -> tuple[Any, int]:
    """torch's TCPStore hosted in this process on a socket bound to 127.0.0.1 (see `TCP_STORE_EXPOSURE`)."""
    import datetime as dt

    import torch.distributed as dist

    listener = loopback_listener()
    port = listener.getsockname()[1]
    try:
        store = dist.TCPStore(
            LOOPBACK,
            port,
            nproc,
            True,
            dt.timedelta(seconds=300),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=listener.fileno(),
        )
    except BaseException:
        listener.close()
        raise
    listener.detach()  # the store's server owns the socket now, and closes it
    return store, port


class Ranks:
    """N processes of `argv`, each in a session of its own, joined by a store file of this process's (or, with
    `tcp_store`, a TCP store on loopback that lives in this process). `wait` returns each rank's exit; the first rank
    to fail stops the others (as torchrun does); an interrupt here stops them all before it propagates. Use as a
    context manager: leaving it ends every rank still running, and their group."""

    def __init__(
        self,
        argv: Sequence[str],
        nproc: int,
        *,
        env: Mapping[str, str] | None = None,
        capture: bool = False,
        pipe: bool = False,
        tcp_store: bool = False,
    ) -> None:
        """`capture`: each rank's output kept for `wait`'s answer; `pipe`: rank 0's standard output readable as it
        comes (`procs[0].stdout`, bytes), the rest of every rank's output dropped; `tcp_store`: the ranks join a TCP
        store on loopback rather than a file of this user's (see the module's docstring)."""
        self.nproc = nproc
        self._store: Any = None
        self._folder: str | None = None
        if tcp_store:
            self._store, store = _tcp_store(nproc)
        else:
            # 0700, this user's alone, marked as this process's: one a killed launcher left is removed by the next
            self._folder = str(private_dir("ranks"))
            store = os.path.join(self._folder, "store")
        self._outputs: list[tuple[IO[bytes], IO[bytes]] | None] = []
        self.procs: list[subprocess.Popen] = []
        try:
            for rank in range(nproc):
                files = (tempfile.TemporaryFile(), tempfile.TemporaryFile()) if capture else None
                self._outputs.append(files)
                if pipe:
                    out, err = (subprocess.PIPE if rank == 0 else subprocess.DEVNULL), subprocess.DEVNULL
                else:
                    out, err = (files[0], files[1]) if files else (None, None)
                self.procs.append(
                    subprocess.Popen(
                        list(argv),
                        env=rank_env(rank, nproc, store, env),
                        start_new_session=True,
                        stdout=out,
                        stderr=err,
                    )
                )
        except BaseException:
            self.stop()
            raise

    def wait(self, timeout_s: float | None = None, tick: Callable[[], None] | None = None) -> list[RankExit]:
        """Every rank's exit; the first failure stops the others. TimeoutError past `timeout_s` (the ranks stopped).
        `tick`, where given, is called between polls (what a caller says as the ranks go: `output_so_far`)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                codes = [p.poll() for p in self.procs]
                if all(c is not None for c in codes):
                    break
                if any(c not in (None, 0) for c in codes):
                    self.stop()
                    break
                if deadline is not None and time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"{self.nproc} ranks ran past {timeout_s:.0f} s")
                if tick is not None:
                    tick()
                time.sleep(POLL_S)
        except BaseException:
            self.stop()
            raise
        return [RankExit(rank, p.returncode, *self._read(rank)) for rank, p in enumerate(self.procs)]

    def output_so_far(self, rank: int) -> str:
        """What a captured rank has written to its standard output so far ("" where it is not captured)."""
        files = self._outputs[rank] if rank < len(self._outputs) else None
        if files is None:
            return ""
        fd = files[0].fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def _read(self, rank: int) -> tuple[str, str]:
        files = self._outputs[rank] if rank < len(self._outputs) else None
        if files is None:
            return "", ""
        texts = []
        for f in files:
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
        return texts[0], texts[1]

    def stop(self, wait_s: float = STOP_WAIT_S, first: signal.Signals = signal.SIGTERM) -> None:
        """`first` (SIGTERM; SIGKILL for a crash) to every rank's group, SIGKILL to what is left after `wait_s`; every
        rank reaped."""
        for sig, wait in ((first, wait_s), (signal.SIGKILL, 5.0)):
            if not self._left():
                return
            for pgid in self._left():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self._left():
                time.sleep(POLL_S)

    def _left(self) -> list[int]:
        """The groups of ranks with anything left in them: the rank, or a DataLoader worker of a rank that exited."""
        left = []
        for p in self.procs:
            if p.poll() is None:
                left.append(p.pid)
                continue
            try:
                os.killpg(p.pid, 0)
            except (ProcessLookupError, PermissionError):
                continue
            left.append(p.pid)
        return left

    def close(self) -> None:
        self.stop()
        for p in self.procs:
            if p.stdout is not None:
                p.stdout.close()
        for files in self._outputs:
            for f in files or ():
                f.close()
        self._outputs = []
        self._store = None  # the server stops with its last reference
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)  # iobench's private folder (0700): nobody else's
            self._folder = None

    def __enter__(self) -> Ranks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_ranks(
    argv: Sequence[str],
    nproc: int,
    *,
    env: Mapping[str, str] | None = None,
    capture: bool = False,
    timeout_s: float | None = None,
    tcp_store: bool = False,
) -> list[RankExit]:
    """`argv` as N ranks on this machine (see `Ranks`), until every one has exited."""
    with Ranks(argv, nproc, env=env, capture=capture, tcp_store=tcp_store) as ranks:
        return ranks.wait(timeout_s)
