"""How a job saves a checkpoint over its last one: in place (the same folder or prefix written again, as every library
here does when a job names one path), safely (step N+1 written beside step N, made durable, then a `latest` pointer
swapped to it and its folder's entry made durable; step N removed after), or keeping the last K (`keep:K`: saved and
published as safely, in a folder of its own, the oldest removed once more than K exist, as Lightning's `save_top_k`
and torchtitan's `keep_latest_k` do: each save new files beside the K kept, not written over the step just freed). A
kill during a safe or keep save leaves step N whole; a kill during an in-place save can leave neither.

The pointer is written, read and the steps listed and removed by the checkpoint's target (`CheckpointTarget`: locally
a file written `O_EXCL | O_NOFOLLOW`, fsynced and renamed over the old one, the folder then fsynced; on object
storage one small object, a PUT replacing it whole). A pointer is read as data: at most 64 bytes, naming a step
folder (`step-N`) of the checkpoint's own, nothing else."""

from __future__ import annotations

import re

from iobench.results.checkpoint_record import SAVE_MODES, SaveMode
from iobench.storage.checkpoints import CheckpointPlace, CheckpointTarget

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


def save_place(target: CheckpointTarget, place: CheckpointPlace, mode: str) -> CheckpointPlace:
    """Where the next save writes: the in-place folder, or the step after the one `latest` names."""
    if mode == INPLACE:
        return place.child(CURRENT)
    root = root_of(place, mode)
    try:
        step = int(_name(current(target, place, mode)).removeprefix("step-")) + 1
    except NoCheckpoint:
        step = 1
    return root.child(f"step-{step}")


def _name(place: CheckpointPlace) -> str:
    return (place.folder or place.url or "").rstrip("/").rsplit("/", 1)[-1]


def publish(target: CheckpointTarget, root: CheckpointPlace, saved: CheckpointPlace) -> None:
    """Safe mode: `latest` in `root` now names `saved` (durable when this returns)."""
    target.write_small(root, POINTER, _name(saved).encode())


def current(target: CheckpointTarget, place: CheckpointPlace, mode: str) -> CheckpointPlace:
    """The checkpoint a restore reads: the in-place folder, or the step `latest` names (read as data: its first
    bytes, naming a step of this checkpoint's own)."""
    if mode == INPLACE:
        return place.child(CURRENT)
    place = root_of(place, mode)
    try:
        text = target.read_small(place, POINTER, POINTER_BYTES + 1)
    except OSError as exc:
        raise NoCheckpoint(f"no {POINTER} pointer ({exc.strerror or str(exc)[:100]})") from None
    name = text.decode("ascii", "replace")
    if len(text) > POINTER_BYTES or not STEP.fullmatch(name):
        raise NoCheckpoint(f"{POINTER} names {name[:POINTER_BYTES]!r}, not a step of this checkpoint")
    return place.child(name)


def remove_beyond(target: CheckpointTarget, root: CheckpointPlace, keep: int) -> int:
    """After the pointer moved (outside the clock): the steps in `root` older than its newest `keep` removed (safe
    keeps 1, keep:K K); how many were removed."""
    steps = [name for name in target.names(root) if STEP.fullmatch(name)]
    old = sorted(steps, key=lambda name: int(name.removeprefix("step-")))[:-keep]
    for name in old:
        target.remove(root.child(name))
    return len(old)
