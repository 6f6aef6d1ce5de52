"""What every request to a store is held to: a time (to connect, between two bytes, attempts in all) and a size
(no answer larger than the object the manifest lists). A store that stalls, drips a byte every few seconds,
announces 100 GiB or streams without end must end a run in one line, never hang it or exhaust its memory.

Each client iobench builds is given the times (obstore's `client_options`, botocore's `Config`, s3fs's
`config_kwargs`, rclone's `--timeout`); the botocore clients it builds (boto3's, s3fs's aiobotocore) also check the
size a GET or HEAD announces, before its body is read, against the object's size in the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from iobench.errors import IobenchError

CONNECT_TIMEOUT_S = 5.0  # a store must accept a connection within this
READ_TIMEOUT_S = 30.0  # ... and send a byte within this of the last one (the record's remote_timeout_s)
TIMEOUT_VARIABLE = "IOBENCH_REMOTE_TIMEOUT_S"  # sets READ_TIMEOUT_S (a slow link; the tests' stalling stores)
ATTEMPTS = 3  # tries of one request in all (the clients' own default is 5-10, obstore's over 3 minutes)
REQUEST_TIMEOUT_S = 600.0  # one whole request (obstore's overall bound; a 1 GiB object at 2 MB/s)


def read_timeout_s() -> float:
    """The seconds a store may go without sending a byte: READ_TIMEOUT_S, or IOBENCH_REMOTE_TIMEOUT_S."""
    text = os.environ.get(TIMEOUT_VARIABLE)
    if not text:
        return READ_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise IobenchError(f"{TIMEOUT_VARIABLE}={text!r}: expected seconds, more than 0 and at most 3600")
    return value


class AnswerTooLarge(OSError):
    """A store announced (or sent) more bytes than the object holds by the manifest."""


# What this process refused last: a library that reads through a file object (h5py, pyarrow) turns the refusal
# into its own words ("file signature not found", "File is too small"); its reader and the runner say this instead.
_REFUSED: list[str] = []


def refused() -> str | None:
    """The last refusal of an answer in this process since `forget()`, or None."""
    return _REFUSED[-1] if _REFUSED else None


def forget() -> None:
    _REFUSED.clear()


def refuse(message: str) -> AnswerTooLarge:
    _REFUSED.append(message)
    return AnswerTooLarge(message)


def obstore_client_options(url: str) -> dict:
    return {
        "allow_http": url.startswith("http://"),
        "connect_timeout": f"{CONNECT_TIMEOUT_S:g}s",
        "read_timeout": f"{read_timeout_s():g}s",
        "timeout": f"{REQUEST_TIMEOUT_S:g}s",
    }


def obstore_retry_config() -> dict:
    return {"max_retries": ATTEMPTS - 1, "retry_timeout": timedelta(seconds=2 * read_timeout_s())}


def botocore_config(**extra: Any) -> Any:
    """botocore's Config with the bounds (boto3, and LitData's own client through its `storage_options`)."""
    from botocore.config import Config

    retries = {"max_attempts": ATTEMPTS, "mode": "standard"}
    return Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=read_timeout_s(), retries=retries, **extra)


def request_deadline_s() -> float:
    """The longest one request may take when its client has no time bound of its own to set (s3torchconnector):
    every attempt's connection and first byte."""
    return ATTEMPTS * (CONNECT_TIMEOUT_S + read_timeout_s())


class Deadline:
    """Calls made in a daemon thread of its own and waited for at most `request_deadline_s()`: a client whose call
    never returns (s3torchconnector's native client waited 102 s on a store that stalled, and has no timeout to set)
    is abandoned, not waited on, and the read fails in one line naming the object. One thread per process (made again
    after a fork) and per reader: calls from threads sharing it take turns."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._lock: Any = None

    def call(self, function: Callable[[], Any], what: str) -> Any:
        import queue
        import threading

        if self._pid != os.getpid():
            self._pid, self._lock = os.getpid(), threading.Lock()
            self._jobs: queue.Queue = queue.Queue()
            threading.Thread(target=self._serve, args=(self._jobs,), name="iobench-deadline", daemon=True).start()
        with self._lock:
            done: queue.Queue = queue.Queue(1)
            self._jobs.put((function, done))
            limit = request_deadline_s()
            try:
                ok, value = done.get(timeout=limit)
            except queue.Empty:
                self._pid = None  # the thread is stuck in the call: the next call starts another
                raise TimeoutError(
                    f"{what}: no answer within {limit:g} s ({ATTEMPTS} attempts of "
                    f"{CONNECT_TIMEOUT_S:g} + {read_timeout_s():g} s)"
                ) from None
        if not ok:
            raise value
        return value

    @staticmethod
    def _serve(jobs: Any) -> None:
        while True:
            function, done = jobs.get()
            try:
                done.put((True, function()))
            except BaseException as exc:  # handed to the caller, raised there
                done.put((False, exc))

    def __getstate__(self) -> dict:
        return {"_pid": None, "_lock": None}


S3TRANSFER_ATTEMPTS = 1  # s3transfer's own tries of a download, on top of botocore's ATTEMPTS (5 by default)
_BOUNDED_S3TRANSFER: list[bool] = []


def bounded_s3transfer() -> None:
    """boto3's `TransferConfig` with its download attempts at S3TRANSFER_ATTEMPTS, in this process: LitData downloads
    each chunk by `download_file(..., Config=TransferConfig(use_threads=False))`, whose 5 download attempts each
    make botocore's ATTEMPTS: a store that stalled held one chunk for 125 s at a 5 s bound."""
    if _BOUNDED_S3TRANSFER:
        return
    import boto3.s3.transfer as transfer

    class BoundedTransferConfig(transfer.TransferConfig):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("num_download_attempts", S3TRANSFER_ATTEMPTS)
            super().__init__(*args, **kwargs)

    transfer.TransferConfig = BoundedTransferConfig  # type: ignore[misc]
    _BOUNDED_S3TRANSFER.append(True)


S3FS_RETRIES = 1  # s3fs's own tries of a failed call (5 by default, twice nested), on top of botocore's ATTEMPTS
_BOUNDED_S3FS: list[type] = []


def bounded_s3fs() -> type:
    """s3fs's file system with its own tries at S3FS_RETRIES, registered as fsspec's `s3` implementation in this
    process (fsspec's `register_implementation`), so that a library making its own (datasets) gets it too. s3fs
    retries a failed read 5 times inside 5 retries of the call, each with botocore's attempts: a store that stalled
    held one read for 75 attempts (219 s at a 2 s timeout)."""
    if not _BOUNDED_S3FS:
        import fsspec
        import s3fs

        bounded = type("BoundedS3FileSystem", (s3fs.S3FileSystem,), {"retries": S3FS_RETRIES})
        fsspec.register_implementation("s3", bounded, clobber=True)
        _BOUNDED_S3FS.append(bounded)
    return _BOUNDED_S3FS[0]


def s3fs_config_kwargs() -> dict:
    return {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": read_timeout_s(),
        "retries": {"max_attempts": ATTEMPTS, "mode": "standard"},
    }


def rclone_flags() -> list[str]:
    """rclone's own bounds for a FUSE mount's reads: its --timeout is the idle time of a transfer, and a read the
    kernel asks again is another attempt (with rclone's 10 low-level retries, a library's open of a stalled file
    took minutes)."""
    return [
        "--contimeout",
        f"{CONNECT_TIMEOUT_S:g}s",
        "--timeout",
        f"{read_timeout_s():g}s",
        "--low-level-retries",
        "1",
        "--retries",
        "1",
    ]


def bound_answers(events: Any, bound: Callable[[str, str], int | None]) -> None:
    """On a botocore (or aiobotocore) event system: a HEAD of `bucket/key` must announce the object's size by the
    manifest, `bound(bucket, key)`, and a GET at most that (a range asks less); an answer without a length, or one
    that says otherwise, fails before its body is read. `bound` is None for an object the manifest does not list
    (not checked)."""

    def remember(params: dict, context: dict, **_: Any) -> None:
        context["iobench_bound"] = bound(str(params.get("Bucket")), str(params.get("Key")))
        context["iobench_object"] = f"s3://{params.get('Bucket')}/{params.get('Key')}"

    def check(http_response: Any, context: dict, model: Any = None, **_: Any) -> None:
        limit = context.get("iobench_bound")
        if limit is None or http_response.status_code >= 300:
            return
        length = http_response.headers.get("content-length")
        if length is None or not length.isdigit():
            raise refuse(
                f"{context['iobench_object']}: the store answered without a length (the manifest lists {limit:,} bytes)"
            )
        head = getattr(model, "name", "") == "HeadObject"
        if int(length) > limit or (head and int(length) != limit):
            raise refuse(
                f"{context['iobench_object']}: the store announced {int(length):,} bytes; the manifest lists {limit:,}"
            )

    for operation in ("GetObject", "HeadObject"):
        events.register(f"before-parameter-build.s3.{operation}", remember)  # the call's own Bucket and Key
        events.register(f"after-call.s3.{operation}", check)
