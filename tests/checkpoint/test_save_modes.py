"""Save modes (`iobench.checkpoint.save_modes`): keep:K writes every save into a new step folder of new files beside the
K kept, publishes it as safe does, and removes the oldest beyond K after the clock; in place writes over its file."""

from __future__ import annotations

import array
import fcntl
import os
import struct
from pathlib import Path

import pytest

from iobench.checkpoint import save_modes
from iobench.errors import IobenchError
from iobench.results.checkpoint_record import MAX_KEEP, SaveMode
from iobench.storage.checkpoints import CheckpointPlace
from iobench.storage.trial_targets import trial_target

FS_IOC_FIEMAP = 0xC020660B
EXTENTS = 64


def extents(path: Path) -> list[tuple[int, int]] | None:
    """The file's physical extents (start, length) in bytes; None where the file system has no FIEMAP."""
    head = struct.pack("=QQIIII", 0, 2**64 - 1, 1, 0, EXTENTS, 0)  # FIEMAP_FLAG_SYNC: allocated before it answers
    buf = array.array("B", head + bytes(56 * EXTENTS))
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    except OSError:
        return None
    finally:
        os.close(fd)
    mapped = struct.unpack_from("=QQIIII", buf)[3]
    return [struct.unpack_from("=QQQ", buf, 32 + 56 * k)[1:3] for k in range(mapped)]


def _save(place: CheckpointPlace, mode: SaveMode, payload: bytes) -> CheckpointPlace:
    """What a trial's save does around the library's call, with a file of `payload` for the library's."""
    store = trial_target(place)
    target = save_modes.save_place(store, place, mode)
    os.makedirs(target.folder, mode=0o700, exist_ok=True)
    with open(Path(target.folder) / "state.pt", "wb") as f:
        f.write(payload)
    store.make_durable(target)
    save_modes.publish(store, save_modes.root_of(place, mode), target)
    return target


@pytest.mark.parametrize(("text", "k"), [("keep:1", 1), ("keep:3", 3), (f"keep:{MAX_KEEP}", MAX_KEEP)])
def test_keep_k_is_a_save_mode_with_its_k(text, k):
    mode = SaveMode(text)
    assert mode == text and mode.kept == k and mode.saves == k + 1 and mode.steps_kept == k and not mode.inplace
    assert SaveMode.keeping(k) == mode and SaveMode(mode) is mode
    assert SaveMode("inplace").inplace and SaveMode("safe").kept is None and SaveMode("safe").saves == 2


@pytest.mark.parametrize(
    "text", ["keep:0", f"keep:{MAX_KEEP + 1}", "keep:", "keep:x", "keep:03x", "keep:١", "all", "keep:01"]
)
def test_a_keep_outside_its_bounds_is_refused_in_one_line(text):
    assert not SaveMode.valid(text)
    with pytest.raises(ValueError, match="not a save mode"):
        SaveMode(text)
    with pytest.raises(IobenchError, match="--save-mode") as caught:
        SaveMode.parse_list(f"inplace,{text}")
    assert "\n" not in str(caught.value)


def test_keep_k_keeps_the_last_k_each_save_a_new_step_of_new_files(tmp_path):
    """keep:2 over six saves: each save a new folder of new files (no inode of a file alive at its start) beside the
    two kept, the pointer naming it, the oldest removed after it. Where the blocks go is the file system's: on ext4
    here, a save after a removal can land in the blocks the removed step freed (a 8 MiB file did), which is what a
    job keeping K meets too; scripts/bench_keep_loop.py reads it per pattern."""
    place, k, payload = CheckpointPlace(folder=str(tmp_path)), 2, os.urandom(2**20)
    store = trial_target(place)
    names = []
    for n in range(1, 7):
        alive = {p.stat().st_ino for p in tmp_path.rglob("*") if p.is_file()}
        target = _save(place, SaveMode.keeping(k), payload)
        names.append(Path(target.folder).name)
        assert names[-1] == f"step-{n}"
        assert (Path(target.folder) / "state.pt").stat().st_ino not in alive  # not written over a kept file
        assert save_modes.current(store, place, SaveMode.keeping(k)).folder == target.folder
        root = save_modes.root_of(place, SaveMode.keeping(k))
        assert save_modes.remove_beyond(store, root, k) == (1 if n > k else 0)
        kept = sorted(p.name for p in (tmp_path / "keep-2").glob("step-*"))
        assert kept == sorted(names[-k:])


def test_an_inplace_save_writes_over_the_file_it_had(tmp_path):
    """The contrast the check above rests on: in place, the steady save's file is the first one's (the same inode)."""
    place = CheckpointPlace(folder=str(tmp_path))
    first = save_modes.save_place(trial_target(place), place, SaveMode("inplace"))
    os.makedirs(first.folder)
    for _ in range(2):
        with open(Path(first.folder) / "state.pt", "wb") as f:  # as torch.save opens its path: truncated
            f.write(b"x" * 4096)
        inode = (Path(first.folder) / "state.pt").stat().st_ino
        alive = {p.stat().st_ino for p in tmp_path.rglob("*") if p.is_file()}
    assert inode in alive


def test_where_a_file_lies_is_read_where_the_file_system_says_it(tmp_path):
    """FIEMAP (the benchmark script's `filefrag`) answers on this file system, or says it cannot."""
    path = tmp_path / "f"
    path.write_bytes(os.urandom(2**20))
    found = extents(path)
    assert found is None or (found and sum(n for _, n in found) >= 2**20)


def test_safe_keeps_one_and_inplace_writes_over_the_last(tmp_path):
    place = CheckpointPlace(folder=str(tmp_path))
    for _ in range(3):
        target = _save(place, SaveMode("safe"), b"x" * 4096)
        save_modes.remove_beyond(trial_target(place), place, 1)
    assert [p.name for p in tmp_path.glob("step-*")] == ["step-3"] == [Path(target.folder).name]
    assert save_modes.save_place(trial_target(place), place, SaveMode("inplace")).folder == str(tmp_path / "current")
