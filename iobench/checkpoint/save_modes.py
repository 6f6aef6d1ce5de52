"""How a job saves a checkpoint over its last one: in place (the same folder or prefix written again, as every library
here does when a job names one path), or safely (step N+1 written beside step N, made durable, then a `latest` pointer
swapped to it and its folder's entry made durable; step N removed after). A kill during a safe save leaves step N
whole; a kill during an in-place save can leave neither.

Locally the pointer is a file written `O_EXCL | O_NOFOLLOW`, fsynced and renamed over the old one, the folder then
fsynced; on object storage it is one small object (a PUT replaces an object whole). A pointer is read as data: at most
64 bytes, naming a step folder (`step-N`) of the checkpoint's own, nothing else."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from iobench.results.checkpoint_record import SAVE_MODES
from iobench.storage.checkpoints import Place
from iobench.system.fsutil import fsync_path, fsync_tree

INPLACE, SAFE = SAVE_MODES  # the record's names, kept there once
CURRENT = "current"  # an in-place checkpoint's folder
POINTER = "latest"
STEP = re.compile(r"step-[0-9]{1,12}")
POINTER_BYTES = 64


class NoCheckpoint(Exception):
    """No checkpoint where one was looked for (a pointer missing, unreadable or naming something else)."""


def save_place(place: Place, mode: str) -> Place:
    """Where the next save writes: the in-place folder, or the step after the one `latest` names."""
    if mode == INPLACE:
        return place.child(CURRENT)
    try:
        step = int(_name(current(place, SAFE)).removeprefix("step-")) + 1
    except NoCheckpoint:
        step = 1
    return place.child(f"step-{step}")


def _name(place: Place) -> str:
    return (place.folder or place.url or "").rstrip("/").rsplit("/", 1)[-1]


def make_durable(saved: Place) -> None:
    """A local checkpoint's files and folders flushed, and its own entry in its parent (a completed upload is
    durable as it is)."""
    if saved.local:
        fsync_tree(Path(saved.folder))
        fsync_path(Path(saved.folder).parent)


def publish(place: Place, saved: Place) -> None:
    """Safe mode: `latest` now names `saved` (durable when this returns)."""
    name = _name(saved)
    if place.local:
        folder = Path(place.folder)
        temp = folder / f".{POINTER}-{os.getpid()}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, name.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, folder / POINTER)
        fsync_path(folder)
        return
    client, (bucket, key) = _client(place), place.bucket_key
    stream = client.put_object(bucket, f"{key}/{POINTER}")
    stream.write(name.encode())
    stream.close()


def current(place: Place, mode: str, read: Callable[[Place, str, int], bytes] | None = None) -> Place:
    """The checkpoint a restore reads: the in-place folder, or the step `latest` names. `read(place, name, limit)`:
    how the pointer's first bytes are read (the trial's own way by default; the session's target has its own)."""
    if mode == INPLACE:
        return place.child(CURRENT)
    try:
        text = (read or read_pointer)(place, POINTER, POINTER_BYTES + 1)
    except OSError as exc:
        raise NoCheckpoint(f"no {POINTER} pointer ({exc.strerror or str(exc)[:100]})") from None
    name = text.decode("ascii", "replace")
    if len(text) > POINTER_BYTES or not STEP.fullmatch(name):
        raise NoCheckpoint(f"{POINTER} names {name[:POINTER_BYTES]!r}, not a step of this checkpoint")
    return place.child(name)


def read_pointer(place: Place, name: str, limit: int) -> bytes:
    """At most `limit` bytes of a small file of the checkpoint (never through a link); OSError where it is not
    there."""
    if place.local:
        fd = os.open(Path(place.folder) / name, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)
    client, (bucket, key) = _client(place), place.bucket_key
    try:
        return client.get_object(bucket, f"{key}/{name}").read(limit)
    except Exception as exc:  # the S3 client's error for a missing object
        raise OSError(str(exc)[:100]) from None


def remove_before(place: Place, keep: Place) -> None:
    """Safe mode, after the pointer moved: the steps other than `keep` removed (outside the clock)."""
    keep_name = _name(keep)
    if place.local:
        for entry in Path(place.folder).iterdir():
            if STEP.fullmatch(entry.name) and entry.name != keep_name and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
        return
    client, (bucket, key) = _client(place), place.bucket_key
    for info in client.list_objects(bucket, f"{key}/step-"):
        for item in info.object_info:
            if not item.key.startswith(f"{key}/{keep_name}/"):
                client.delete_object(bucket, item.key)


def _client(place: Place) -> object:
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client

    return S3Client(place.region, endpoint=place.endpoint, s3client_config=S3ClientConfig(force_path_style=True))
