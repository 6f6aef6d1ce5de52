"""What a command leaves running and where it listens, read from /proc: the listening TCP sockets of a set of
processes with their addresses, and a command's process tree watched until it ends or is killed."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import time
from dataclasses import dataclass, field

from iobench.system.processes import process_alive, start_time
from tests.conftest import descendants

LISTEN = "0A"
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")


def _address(hex_address: str) -> str:
    """/proc/net/tcp's little-endian hex address, as text."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = struct.unpack("<4I", raw)  # four host-order 32-bit words
    return socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))


def listening_inodes() -> dict[int, tuple[str, int]]:
    """Every listening TCP socket of the machine: inode -> (address, port)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == LISTEN:
                        address, port = parts[1].split(":")
                        found[int(parts[9])] = (_address(address), int(port, 16))
        except OSError:
            continue
    return found


def listeners(pids: set[int]) -> set[tuple[int, str, int]]:
    """(pid, address, port) of each listening socket these processes hold."""
    table = listening_inodes()
    found = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in table:
                    found.add((pid, *table[inode]))
    return found


@dataclass
class Watched:
    """A command's process tree and every socket it listened on while watched."""

    proc: subprocess.Popen
    seen: dict[int, int] = field(default_factory=dict)  # pid -> start time, every descendant seen
    listened: set[tuple[int, str, int]] = field(default_factory=set)

    def sample(self) -> None:
        tree = descendants(self.proc.pid) | {self.proc.pid}
        for pid in tree - {self.proc.pid}:
            if pid not in self.seen and (start := start_time(pid)) is not None:
                self.seen[pid] = start
        self.listened |= listeners(tree)

    def until(self, condition, timeout_s: float = 120) -> None:
        """Sample every 20 ms until `condition(self)` holds; fail if the command ends or time runs out first."""
        deadline = time.monotonic() + timeout_s
        while not condition(self):
            assert self.proc.poll() is None, f"ended early ({self.proc.returncode}): {self._err()}"
            assert time.monotonic() < deadline, "timed out"
            self.sample()
            time.sleep(0.02)

    def _err(self) -> str:
        if self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()[-3000:]

    def survivors(self, wait_s: float = 20) -> list[str]:
        """The descendants seen that are still running `wait_s` after the command ended (their command lines)."""
        deadline = time.monotonic() + wait_s
        while True:
            left = [pid for pid, start in self.seen.items() if process_alive(pid) and start_time(pid) == start]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        out = []
        for pid in left:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read()[:160].replace(b"\0", b" ").decode(errors="replace")
                out.append(f"{pid}: {command}")
            except OSError:
                continue
            os.kill(pid, signal.SIGKILL)  # the test fails; nothing of it is left on the machine
        return out


def off_loopback(listened: set[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    return sorted(x for x in listened if x[1] not in LOOPBACK_ADDRESSES)
