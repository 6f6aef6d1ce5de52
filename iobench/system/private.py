"""iobench's own folder in the shared temp folder, and what lives there: servers' state, pinned names, library
caches, an unsaved record. Another user of the machine can create names in /tmp before iobench does (a folder
holding a `pids` file that names someone else's process, a link to a file root would then overwrite); so the
folder is used only once `lstat` says it is a directory, owned by this user, mode 0700, not a link, and every
file made in it is created `O_EXCL | O_NOFOLLOW`. Each folder made inside it is named after the process that
made it and holds its marker (`ownership`: host, boot, PID namespace, PID and start time), so a later start can tell
what a killed run left behind even after its PID was reused, and never takes a live run's folder in another
container sharing the temp folder for one of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system import ownership
from iobench.system.processes import start_time

CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def state_root() -> Path:
    """`$TMPDIR/iobench-<uid>`, made here with mode 0700 or checked to be this user's own: a folder someone else
    made, a link or a folder others can write into is refused in one line."""
    root = Path(tempfile.gettempdir()) / f"iobench-{os.geteuid()}"
    try:
        os.mkdir(root, 0o700)
        os.chmod(root, 0o700)  # a umask may have taken more than the group's and others' bits
    except FileExistsError:
        pass
    except OSError as exc:
        raise IobenchError(f"cannot make iobench's folder {root}: {exc.strerror or exc}") from None
    check_own_folder(root)
    return root


def check_own_folder(path: Path) -> None:
    """A directory (not a link), owned by this user, that nobody else may enter: else one line saying why."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise IobenchError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        problem = "it is a link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a folder"
    elif st.st_uid != os.geteuid():
        problem = f"it belongs to uid {st.st_uid}"
    elif stat.S_IMODE(st.st_mode) != 0o700:
        problem = f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700"
    else:
        return
    raise IobenchError(f"{path} is not iobench's own folder ({problem}); remove it, or set TMPDIR to a folder of yours")


def owner_tag(pid: int | None = None) -> str:
    """`<pid>-<start time>`: who made a folder, in a form that survives PID reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_time(pid) or 0}"


def private_dir(kind: str) -> Path:
    """A fresh folder `<kind>-<pid>-<start>-XXXX` of this process in the state root (mkdtemp: 0700, O_EXCL).
    What a process of the same kind left behind when it was killed is removed first."""
    root = state_root()
    remove_stale(kind, root)
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-{owner_tag()}-", dir=root))
    ownership.mark(folder)
    return folder


@contextlib.contextmanager
def private_folder(kind: str) -> Iterator[Path]:
    """A private folder of iobench's while the block runs (`private_dir`), removed after (or by the next of `kind`
    where this process was killed)."""
    folder = private_dir(kind)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def library_temp(kind: str) -> Iterator[Path]:
    """`tempfile`'s folder a private folder of iobench's while the block runs (removed after): what a library makes
    with `tempfile` then (LitData downloads an index into a `TemporaryDirectory`) is not in the shared temp folder."""
    with private_folder(kind) as folder:
        before = tempfile.tempdir
        tempfile.tempdir = str(folder)
        try:
            yield folder
        finally:
            tempfile.tempdir = before


@contextlib.contextmanager
def children_temp(kind: str) -> Iterator[Path]:
    """TMPDIR of the processes started while the block runs: a private folder of iobench's (removed after, or by the
    next run of `kind` where this one was killed), so that what they leave there (DCP's process checkpointer left a
    `pymp-*` folder a trial) is not left in the shared temp folder."""
    with private_folder(kind) as folder:
        before = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = str(folder)
        try:
            yield folder
        finally:
            if before is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = before


def stale_dirs(kind: str, root: Path | None = None) -> list[Path]:
    """The folders of `kind` whose marker names a process of this host that is gone (`ownership.stale`): never a
    folder that merely has such a name."""
    root = state_root() if root is None else root
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if entry.name.startswith(f"{kind}-") and ownership.stale(Path(entry.path)):
                found.append(Path(entry.path))
    return found


def remove_stale(kind: str, root: Path | None = None) -> list[Path]:
    """Remove the folders of `kind` left by processes that are gone (never a link: the root holds none of
    anyone else's)."""
    removed = stale_dirs(kind, root)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def create_exclusive(path: Path, data: bytes, mode: int = 0o600) -> None:
    """A new file with `data`: never an existing name, never through a link."""
    fd = os.open(path, CREATE_FLAGS, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def replace_exclusive(path: Path, data: bytes) -> None:
    """`path` now holds `data`: written to a fresh name beside it (O_EXCL), then renamed over it (a rename
    replaces a link itself, never what it points to)."""
    fresh = path.with_name(f".{path.name}.{os.getpid()}.new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    create_exclusive(fresh, data)
    os.replace(fresh, path)
