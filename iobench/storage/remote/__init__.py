"""A format's files in S3-compatible object storage as a run's storage: an endpoint, a bucket (a dataset) and a
prefix (the format's folder). Cold is nothing cached on the client (a reader with a cache of its own empties
it); what moved is the server's count, one access-log line per request (`requests_log`), when the server is
iobench's own emulator on loopback (`emulator`). Light on purpose: obstore is imported by the readers that use it.
"""

from __future__ import annotations

from iobench.storage.remote.objects import ObjectStorage, RequestCounters, check_fork_safe, obstore_started_here
from iobench.storage.remote.targets import FUSE_CHUNK, FUSE_READ_AHEAD, PLAIN, FuseOptions, RemoteTarget

__all__ = [
    "FUSE_CHUNK",
    "FUSE_READ_AHEAD",
    "PLAIN",
    "FuseOptions",
    "ObjectStorage",
    "RemoteTarget",
    "RequestCounters",
    "check_fork_safe",
    "obstore_started_here",
]
