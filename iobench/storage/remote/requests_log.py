"""What the shaper's access log says moved: requests by method, bytes sent, error statuses, and how long the
server took, between two offsets of the log (an epoch's start and end). The client's own count would miss
retries its library made and hid; the server's line for every request does not."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Requests:
    by_method: dict[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    client_errors: int = 0  # 4xx
    server_errors: int = 0  # 5xx
    connections: int = 0  # distinct connections that carried them
    median_seconds: float | None = None  # nginx's request time (first byte of the request to the last sent)
    retries: int = 0  # attempts a client made again (its own count; a server sees each as a request)
    bytes_received: int = 0  # the requests' own bytes, headers and bodies (a checkpoint's upload)

    @property
    def total(self) -> int:
        return sum(self.by_method.values())


def size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0


def mark(log: Path | None) -> int | None:
    """Where a log stands before an interval; None where there is no log of iobench's server to read."""
    return size(log) if log is not None else None


def since(log: Path | None, start: int | None) -> Requests | None:
    """The requests logged since `mark` gave `start`; None where nothing was counted."""
    return read(log, start) if log is not None and start is not None else None


def read(log: Path, start: int, stop: int | None = None) -> Requests:
    """The requests logged between byte offsets `start` and `stop` (None: the end); a torn last line is left
    for the next interval."""
    try:
        with open(log, "rb") as f:
            f.seek(start)
            data = f.read() if stop is None else f.read(max(0, stop - start))
    except OSError:
        return Requests()
    methods: Counter[str] = Counter()
    sent = received = client = server = 0
    connections, seconds = set(), []
    for line in data.split(b"\n")[:-1] if not data.endswith(b"\n") else data.splitlines():
        parts = line.decode("ascii", "replace").split(maxsplit=8)
        if len(parts) not in (6, 8, 9):  # 6: logs written before the list-type and URI were; 8: before the length
            continue
        _, method, status, bytes_sent, request_time, connection = parts[:6]
        listing = len(parts) >= 8 and method == "GET" and parts[6] != "-"
        received += int(parts[7]) if len(parts) == 9 and parts[7].isdigit() else 0
        methods["LIST" if listing else method] += 1
        sent += int(bytes_sent)
        client += status.startswith("4")
        server += status.startswith("5")
        connections.add(connection)
        seconds.append(float(request_time))
    return Requests(
        dict(methods),
        sent,
        client,
        server,
        len(connections),
        statistics.median(seconds) if seconds else None,
        bytes_received=received,
    )
