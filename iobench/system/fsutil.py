"""Durable, atomic file-system steps: nothing half-written may ever look complete."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from iobench.errors import IobenchError
from iobench.system.private import private_dir
from iobench.system.processes import process_alive

PARTIAL_PREFIX = ".partial-"
# A data file is opened without following a final link (a planted link must not lead outside) and
# without blocking (open() of a FIFO waits for a writer forever); anything but a regular file is refused.
DATA_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
# A folder of a dataset, opened to open what lies beneath it: never through a link.
FOLDER_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
HASH_BLOCK = 8 * 2**20


def fsync_path(path: Path) -> None:
    """fsync a file or directory (a directory fsync makes renames and creations durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MANY_FILES = 256  # above this, one syncfs() of the file system beats an fsync per file


def fsync_tree(root: Path) -> None:
    """fsync every file and directory below root, files first (one syncfs for a tree of many files)."""
    tree = list(os.walk(root, topdown=False))
    if sum(len(files) for _, _, files in tree) > MANY_FILES and _syncfs(root):
        return
    for dirpath, _dirnames, filenames in tree:
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def _syncfs(path: Path) -> bool:
    """Flush the whole file system holding path (Linux syncfs); False where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
    except (OSError, AttributeError):
        return False
    try:
        return getattr(libc, "syncfs", None) is not None and libc.syncfs(fd) == 0
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def shared_mode(path: Path, base: int) -> None:
    """Permissions as a plain open()/mkdir() would give them (mkstemp and mkdtemp use 0600/0700), so
    that colleagues can read a dataset or results under the usual umask."""
    os.chmod(path, base & ~_umask())


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file, fsync, rename: readers see the old or the new file, never half."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a fresh temporary file (mkstemp: O_EXCL), fsync, rename: readers see the old or the new file, never
    half, and a link at `path` is replaced, never written through. Its folder is made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=PARTIAL_PREFIX + path.name + ".")
    try:
        shared_mode(Path(tmp), 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def missing_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet (a link, even a dangling one, exists), deepest first:
    what making `path` with its parents would make."""
    missing = []
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            break
        missing.append(folder)
    return missing


def output_folder(path: Path, option: str) -> Path:
    """A folder iobench writes its outputs into (a report's): made if missing, refused in one line when it is a link
    (planted in a shared folder, it would lead root's writes elsewhere) or not a folder."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise IobenchError(f"cannot create {path}: {exc.strerror or exc}") from None
        return path
    except OSError as exc:
        raise IobenchError(f"{option} {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise IobenchError(f"{option} {path} is a link; give the folder it points to")
    if not stat.S_ISDIR(st.st_mode):
        raise IobenchError(f"{option} {path} is not a folder")
    return path


def atomic_write_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


# A library's metadata file; a manifest lists every file (140 MB for a million files of one per sample) and
# passes its own bound.
MAX_JSON_BYTES = 64 * 2**20


def read_json(path: Path, max_bytes: int = MAX_JSON_BYTES) -> object:
    """A JSON file a dataset brought: a regular file (no FIFO, no link), of bounded size, parsed without
    letting its depth crash the parser (200,000 nested brackets raise RecursionError). ValueError names
    what is wrong; OSError when it cannot be opened."""
    with os.fdopen(open_regular(path), "rb") as f:
        return parse_json(f.read(max_bytes + 1), path, max_bytes)


def parse_json(data: bytes, where: Path | str, max_bytes: int = MAX_JSON_BYTES) -> object:
    """JSON a dataset brought, read by the caller (`read_json`); `where` names it in errors."""
    if len(data) > max_bytes:
        raise ValueError(f"{where}: larger than {max_bytes / 2**20:,.0f} MiB")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"{where}: nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 ({exc.reason})") from None


def make_partial_dir(parent: Path, name: str) -> Path:
    """A scratch directory whose name marks it as incomplete until it is renamed into place."""
    path = Path(tempfile.mkdtemp(dir=parent, prefix=f"{PARTIAL_PREFIX}{name}-"))
    shared_mode(path, 0o777)
    return path


def remove(path: Path) -> None:
    """Delete a folder with its contents, or a file; a link is removed itself, never what it points to."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_partials(parent: Path) -> list[Path]:
    """Remove what an interrupted run left behind (it never looked complete, but takes space)."""
    removed = []
    if parent.is_dir():
        for p in parent.iterdir():
            if p.name.startswith(PARTIAL_PREFIX):
                remove(p)
                removed.append(p)
    return removed


PROBE_KINDS = ("limits-probe", "doctor")  # `.partial-<kind>-<pid>.bin`: probe files of limits and doctor


def probe_owner(name: str) -> int | None:
    """The PID in a probe file's name, or None if the name is not a probe's."""
    for kind in PROBE_KINDS:
        pid = name.removeprefix(f"{PARTIAL_PREFIX}{kind}-").removesuffix(".bin")
        if pid != name and pid.isdigit():
            return int(pid)
    return None


def remove_stale_probes(folder: Path) -> None:
    """Probe files left by a killed `limits` or `doctor` (up to 1 GiB each), once their process is gone."""
    for p in folder.glob(f"{PARTIAL_PREFIX}*.bin") if folder.is_dir() else []:
        pid = probe_owner(p.name)
        if pid is not None and pid != os.getpid() and not process_alive(pid):
            with contextlib.suppress(OSError):
                p.unlink()


RENAME_EXCHANGE = 2  # linux/fs.h: renameat2 swaps the two names in one step


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing names atomically (Linux renameat2 RENAME_EXCHANGE): at no moment is either name
    missing. False where the kernel, libc or file system cannot (the caller then renames twice)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_cwd = -100  # AT_FDCWD
    done = renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), RENAME_EXCHANGE) == 0
    if done:
        fsync_path(a.parent)
        if b.parent != a.parent:
            fsync_path(b.parent)
    return done


def swap_in(new: Path, dst: Path) -> Path:
    """Put the finished folder `new` at `dst`; returns where the folder that was at `dst` now is (the caller
    removes it). Atomic where the kernel can swap two names; otherwise `dst` is missing between two renames,
    and put back if the second fails."""
    if exchange(new, dst):
        return new  # `new` now names the old folder
    old = dst.with_name(f"{PARTIAL_PREFIX}old-{os.getpid()}-{dst.name}")
    os.replace(dst, old)
    try:
        os.replace(new, dst)
    except BaseException:
        os.replace(old, dst)
        raise
    fsync_path(dst.parent)
    return old


def pread_full(fd: int, view: memoryview, offset: int) -> int:
    """preadv until the view is full or the file ends (a regular file reads short only at its end);
    returns the bytes read."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            break
        done += n
    return done


def sha256_file(path: Path, on_bytes: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    buf = bytearray(HASH_BLOCK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            if on_bytes is not None:
                on_bytes(n)
    return h.hexdigest()


def free_bytes(path: Path) -> int:
    """Free space for an unprivileged writer on the file system holding path (or its parent)."""
    p = path
    while not p.exists():
        p = p.parent
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def open_regular(path: Path | str, dir_fd: int | None = None, extra: int = 0) -> int:
    """A read-only descriptor of a regular file (OSError for a link, FIFO, device or folder); `extra`
    flags (O_DIRECT) are added to the safe ones."""
    fd = os.open(path, DATA_OPEN_FLAGS | extra, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


class Pinned:
    """Files (or folders) opened once and checked, then named for a library by links in a private folder (of
    iobench's own folder, `iobench.system.private`: one a killed run left is removed by the next) to
    `/proc/self/fd/N`. Whatever the library opens through a name, in this process or in a forked worker, is
    the checked file: one swapped for a FIFO or a link mid-run is never seen, and the names hold nothing a
    library could read as a URL, a pattern or a command (`pipe:`, `#`, `?`, `{}`, `::`)."""

    def __init__(self, files: dict[str, Path] | None = None, folders: dict[str, Path] | None = None) -> None:
        self.folder = private_dir("pinned")
        self._fds: list[int] = []
        self._names: list[str] = []
        try:
            for name, path in (files or {}).items():
                self._link(name, open_regular(path))
            for name, path in (folders or {}).items():
                self._link(name, os.open(path, FOLDER_OPEN_FLAGS))
        except BaseException:
            self.close()
            raise

    def read(self, name: str, limit: int = MAX_JSON_BYTES) -> bytes:
        """Up to `limit` + 1 bytes of a pinned file, from its checked descriptor."""
        fd = self._fds[self._names.index(name)]
        data = bytearray(limit + 1)
        return bytes(memoryview(data)[: pread_full(fd, memoryview(data), 0)])

    def add(self, name: str, path: Path) -> str:
        """One more file, checked and linked; its name for the library."""
        self._link(name, open_regular(path))
        return self.path(name)

    def _link(self, name: str, fd: int) -> None:
        self._fds.append(fd)
        self._names.append(name)
        os.symlink(f"/proc/self/fd/{fd}", self.folder / name)

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def pattern(self, template: str) -> str:
        """A `str.format` pattern of names in the folder (the folder's own braces escaped)."""
        return str(self.folder).replace("{", "{{").replace("}", "}}") + "/" + template

    _close_fd = staticmethod(os.close)  # held here: at interpreter exit `os` may already be torn down
    _remove = staticmethod(shutil.rmtree)

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            self._close_fd(fd)
        self._remove(self.folder, ignore_errors=True)

    def __del__(self) -> None:  # a reader dropped without close() holds nothing open, as before
        if hasattr(self, "_fds"):
            self.close()

    def __enter__(self) -> Pinned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


PLAIN_PATH = re.compile(r"/[A-Za-z0-9/._-]*")


@contextlib.contextmanager
def plain_alias(folder: Path) -> Iterator[Path]:
    """A name for `folder` that no library can read as anything but a local path, for as long as the block runs:
    `<private folder>/d/<folder's name>`, where `d` is a link to the folder's parent (resolved) in a private folder
    of iobench's own folder. A writer is handed it, not the folder's own path, which may hold what a library
    parses (`pipe:` runs a shell in webdataset's opener, `#` and `?` cut fsspec's paths, `{}` is a brace pattern,
    `%` a shard pattern). The folder's name must be plain (a partial folder's is); the link is the kernel's to
    follow, and the writer's child processes see it too. Files a writer stages beside its folder land beside
    it, in the dataset's folder."""
    holder = private_dir("alias")
    try:
        alias = holder / "d" / folder.name
        if not PLAIN_PATH.fullmatch(str(alias)):
            raise IobenchError(
                f"{alias}: a name a library could read as a URL or a pattern (set TMPDIR to a plain path)"
            )
        os.symlink(folder.resolve().parent, holder / "d")
        yield alias
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def check_regular(path: Path | str) -> None:
    """Refuse, before a library opens it by name, a path that is a link, FIFO, device or folder."""
    os.close(open_regular(path))


def open_beneath(root_fd: int, relative: str) -> int:
    """A regular file below an open folder, every component opened without following links: a folder
    swapped for a link mid-run cannot lead outside (O_NOFOLLOW alone covers only the last one)."""
    *folders, name = relative.split("/")
    fd = root_fd
    try:
        for part in folders:
            if part in ("", ".", ".."):
                raise OSError(f"{relative}: not a plain relative path")
            nxt = os.open(part, FOLDER_OPEN_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = nxt
        return open_regular(name, dir_fd=fd)
    finally:
        if fd != root_fd:
            os.close(fd)
