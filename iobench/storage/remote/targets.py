"""Where a run's formats are served (`RemoteTarget`) and how a FUSE mount reads them (`FuseOptions`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from iobench.storage.remote.endpoint import Endpoint
from iobench.storage.remote.profiles import Profile

# rclone mount's defaults: the first GET of an object asks this much, the next ones double it (no limit); and
# what it reads ahead of each open file (its --buffer-size), which a seek elsewhere throws away
FUSE_CHUNK = "128M"
FUSE_READ_AHEAD = "16M"
PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")  # a bucket, prefix or file name handed to fsspec as it is


@dataclass(frozen=True)
class FuseOptions:
    """How a FUSE mount reads objects: `chunk`, its first ranged GET of an object; `read_ahead`, what it reads
    ahead of each open file (None: none for a reader that reads samples at random, where every seek would throw
    it away, and rclone's own otherwise)."""

    chunk: str = FUSE_CHUNK
    read_ahead: str | None = None

    def read_ahead_for(self, at_random: bool) -> str:
        if self.read_ahead is not None:
            return self.read_ahead
        return "0" if at_random else FUSE_READ_AHEAD


@dataclass(frozen=True)
class RemoteTarget:
    """Where a run's formats are served, and what serves them (None for a store iobench did not start)."""

    endpoint: Endpoint
    profile: Profile | None
    access_log: Path | None = None  # the shaper's log: requests and bytes by the server's count
    server_pids: tuple[int, ...] = ()  # the server's and shaper's processes, for their CPU time
    served: Path | None = None  # the local folder the emulator serves (its files are kept warm)
    fuse: FuseOptions = FuseOptions()  # how a FUSE mount reads the objects (iobench.storage.remote.mount)
    server: str | None = None  # what serves, iobench's emulator's settings (None: a store iobench did not start)
