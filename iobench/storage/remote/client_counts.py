"""Requests counted by the client, for a store iobench does not run (`--endpoint-url`), where no server log is
iobench's to read. Counted where they are made: botocore's event system (boto3, s3fs's aiobotocore, LitData's
client through the session it is given: every attempt, retries included), iobench's own obstore calls (npy's and
memmap's ranged reader, zarr through a counting store), curl's transfer of each shard, s3torchconnector's GET of
each object. The cells are shared memory made before DataLoader workers fork, so a worker's requests count too.
A FUSE mount's requests are rclone's own and are not counted (the record says so: `requests_counted_by`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Mapping
from typing import Any

from iobench.storage.remote.requests_log import Requests

KINDS = ("GET", "HEAD", "LIST", "PUT", "DELETE", "OTHER")
BYTES, RETRIES, CLIENT_ERRORS, SERVER_ERRORS = range(len(KINDS), len(KINDS) + 4)
CELLS = len(KINDS) + 4
OPERATIONS = {
    "GetObject": "GET",
    "HeadObject": "HEAD",
    "HeadBucket": "HEAD",
    "ListObjectsV2": "LIST",
    "ListObjects": "LIST",
    "PutObject": "PUT",
    "DeleteObject": "DELETE",
}


class ClientCounts:
    """Counts of requests by kind, bytes received, retries and error answers, shared with forked workers."""

    def __init__(self) -> None:
        self.cells = multiprocessing.RawArray("q", CELLS)
        self.lock = multiprocessing.Lock()

    def add(self, kind: str, received: int = 0, retry: bool = False, status: int = 200) -> None:
        with self.lock:
            self.cells[KINDS.index(kind) if kind in KINDS else KINDS.index("OTHER")] += 1
            self.cells[BYTES] += max(0, received)
            self.cells[RETRIES] += int(retry)
            self.cells[CLIENT_ERRORS] += int(400 <= status < 500)
            self.cells[SERVER_ERRORS] += int(status >= 500)

    def snapshot(self) -> tuple[int, ...]:
        with self.lock:
            return tuple(self.cells)

    @staticmethod
    def delta(a: tuple[int, ...], b: tuple[int, ...]) -> Requests:
        d = [y - x for x, y in zip(a, b, strict=True)]
        methods = {kind: d[k] for k, kind in enumerate(KINDS) if d[k]}
        return Requests(methods, d[BYTES], d[CLIENT_ERRORS], d[SERVER_ERRORS], retries=d[RETRIES])

    def count_botocore(self, events: Any) -> None:
        """Every attempt of every call a botocore client (or session) makes, by the operation, with the bytes its
        answer announces and whether it was a retry (botocore's `amz-sdk-request: attempt=N` header)."""

        def created(request: Any, operation_name: str = "", **_: Any) -> None:
            attempt = str(request.headers.get("amz-sdk-request", "attempt=1")).split(";")[0]
            request.context["iobench_retry"] = attempt.strip() not in ("attempt=1", "")
            request.context["iobench_kind"] = OPERATIONS.get(operation_name, "OTHER")

        def received(response_dict: Any = None, context: Any = None, **_: Any) -> None:
            kind, retry = (context or {}).get("iobench_kind", "OTHER"), bool((context or {}).get("iobench_retry"))
            if response_dict is None:  # the attempt got no answer (a timeout, a reset): made all the same
                self.add(kind, 0, retry, 0)
                return
            headers = response_dict.get("headers", {})
            length = headers.get("content-length") or headers.get("Content-Length") or "0"
            self.add(
                kind, int(length) if str(length).isdigit() else 0, retry, int(response_dict.get("status_code", 200))
            )

        events.register("request-created.s3", created)
        events.register("response-received.s3", received)


_SHARED: list[tuple[int, ClientCounts]] = []


def shared() -> ClientCounts:
    """This process's counts: made by the process that runs the epochs (before its workers fork, which inherit
    them); a process forked from it shares its cells."""
    import os

    if not _SHARED:
        _SHARED.append((os.getpid(), ClientCounts()))
    return _SHARED[0][1]


def add(kind: str, received: int = 0) -> None:
    """One request iobench's own code made (obstore, curl, s3torchconnector), where counts were made."""
    if _SHARED:
        _SHARED[0][1].add(kind, received)


def botocore_session(bound: Any = None) -> Any:
    """A botocore session whose clients are counted (and, with `bound`, held to the manifest's sizes), for a
    library that takes a session rather than a client (LitData's `session_options`)."""
    import botocore.session

    from iobench.storage.remote import bounds

    session = botocore.session.get_session()
    shared().count_botocore(session)
    if bound is not None:
        bounds.bound_answers(session, bound)
    return session


class FreshSessions(Mapping):
    """LitData's `session_options` (`boto3.Session(**session_options)`, once per client it makes): each time it is
    unpacked it hands out a fresh counted botocore session (boto3 injects its methods into a session's clients
    once; a second `boto3.Session` over the same botocore session refuses)."""

    def __init__(self, bound: Any = None) -> None:
        self.bound = bound

    def __getitem__(self, key: str) -> Any:
        if key != "botocore_session":
            raise KeyError(key)
        return botocore_session(self.bound)

    def __iter__(self) -> Iterator[str]:
        return iter(("botocore_session",))

    def __len__(self) -> int:
        return 1
