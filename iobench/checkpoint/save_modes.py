"""How a job saves a checkpoint over its last one: in place (the same folder or prefix written again, as every library
here does when a job names one path), safely (step N+1 written beside step N, made durable, then a `latest` pointer
swapped to it and its folder's entry made durable; step N removed after), or keeping the last K (`keep:K`: saved and
published as safely, in a folder of its own, the oldest removed once more than K exist, as Lightning's `save_top_k`
and torchtitan's `keep_latest_k` do: each save new files beside the K kept, not written over the step just freed). A
kill during a safe or keep save leaves step N whole; a kill during an in-place save can leave neither.

Locally the pointer is a file written `O_EXCL | O_NOFOLLOW`, fsynced and renamed over the old one, the folder then
fsynced; on object storage it is one small object (a PUT replaces an object whole). A pointer is read as data: at most
64 bytes, naming a step folder (`step-N`) of the checkpoint's own, nothing else."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from iobench.results.checkpoint_record import SAVE_MODES, SaveMode
from iobench.storage.checkpoints import CheckpointPlace
from iobench.system.fsutil import fsync_path, fsync_tree

INPLACE, SAFE = (SaveMode(m) for m in SAVE_MODES)  # the record's names, kept there once
CURRENT = "current"  # an in-place checkpoint's folder
POINTER = "latest"
STEP = re.compile(r"step-[0-9]{1,12}")
POINTER_BYTES = 64


class NoCheckpoint(Exception):
    """No checkpoint where one was looked for (a pointer missing, unreadable or naming something else)."""


def root_of(place: CheckpointPlace, mode: SaveMode | str) -> CheckpointPlace:
    """Where a mode's steps and pointer live: the library's place, or, for keep:K, a folder of its own in it."""
    kept = SaveMode(mode).kept  # the value itself where it is one (a request's, a job's)
    return place if kept is None else place.child(f"keep-{kept}")


def save_place(place: CheckpointPlace, mode: str) -> CheckpointPlace:
    """Where the next save writes: the in-place folder, or the step after the one `latest` names."""
    if mode == INPLACE:
        return place.child(CURRENT)
    root = root_of(place, mode)
    try:
        step = int(_name(current(place, mode)).removeprefix("step-")) + 1
    except NoCheckpoint:
        step = 1
    return root.child(f"step-{step}")


def _name(place: CheckpointPlace) -> str:
    return (place.folder or place.url or "").rstrip("/").rsplit("/", 1)[-1]


def make_durable(saved: CheckpointPlace) -> None:
    """A local checkpoint's files and folders flushed, and its own entry in its parent (a completed upload is
    durable as it is)."""
    if saved.local:
        fsync_tree(Path(saved.folder))
        fsync_path(Path(saved.folder).parent)


def publish(place: CheckpointPlace, saved: CheckpointPlace) -> None:
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


def current(
    place: CheckpointPlace, mode: str, read: Callable[[CheckpointPlace, str, int], bytes] | None = None
) -> CheckpointPlace:
    """The checkpoint a restore reads: the in-place folder, or the step `latest` names. `read(place, name, limit)`:
    how the pointer's first bytes are read (the trial's own way by default; the session's target has its own)."""
    if mode == INPLACE:
        return place.child(CURRENT)
    place = root_of(place, mode)
    try:
        text = (read or read_pointer)(place, POINTER, POINTER_BYTES + 1)
    except OSError as exc:
        raise NoCheckpoint(f"no {POINTER} pointer ({exc.strerror or str(exc)[:100]})") from None
    name = text.decode("ascii", "replace")
    if len(text) > POINTER_BYTES or not STEP.fullmatch(name):
        raise NoCheckpoint(f"{POINTER} names {name[:POINTER_BYTES]!r}, not a step of this checkpoint")
    return place.child(name)


def read_pointer(place: CheckpointPlace, name: str, limit: int) -> bytes:
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


def remove_beyond(root: CheckpointPlace, keep: int) -> int:
    """After the pointer moved (outside the clock): the steps in `root` older than its newest `keep` removed (safe
    keeps 1, keep:K K); how many were removed."""
    if root.local:
        steps = [e for e in Path(root.folder).iterdir() if STEP.fullmatch(e.name) and not e.is_symlink()]
        old = sorted(steps, key=lambda e: int(e.name.removeprefix("step-")))[:-keep]
        for entry in old:
            shutil.rmtree(entry, ignore_errors=True)
        return len(old)
    client, (bucket, key) = _client(root), root.bucket_key
    by_step: dict[str, list[str]] = {}
    for info in client.list_objects(bucket, f"{key}/step-"):
        for item in info.object_info:
            name = item.key.removeprefix(f"{key}/").split("/", 1)[0]
            if STEP.fullmatch(name):
                by_step.setdefault(name, []).append(item.key)
    old = sorted(by_step, key=lambda n: int(n.removeprefix("step-")))[:-keep]
    for name in old:
        for object_key in by_step[name]:
            client.delete_object(bucket, object_key)
    return len(old)


def _client(place: CheckpointPlace) -> object:
    from s3torchconnector import S3ClientConfig
    from s3torchconnector._s3client import S3Client

    return S3Client(place.region, endpoint=place.endpoint, s3client_config=S3ClientConfig(force_path_style=True))
