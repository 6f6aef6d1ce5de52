"""Where `iobench checkpoint` writes: a target. A local folder of iobench's own under `--dir` (0700, marked as this
process's, removed on every exit path with the parents made for it; what a killed run of this host left is swept
first, never a folder merely named like one, nor one of a run in another container or on another node sharing the
folder; a run whose folder vanishes says so and stops), or a prefix of a bucket at an S3
store (iobench's own writable store on loopback with `--remote PROFILE`, or the store at `--endpoint-url`), emptied
at the end and checked empty.

A library saves to a `CheckpointPlace` (a folder, or an `s3://bucket/prefix`); the target says how many bytes a
checkpoint holds, makes it cold (a local checkpoint's pages evicted and its residency checked; an object store keeps
nothing on this machine), removes it and counts the requests that moved it (the shaper's access log of iobench's
store)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iobench.errors import IobenchError
from iobench.storage.remote.endpoint import REGION, Endpoint
from iobench.storage.remote.requests_log import Requests
from iobench.system import ownership
from iobench.system.fsutil import fsync_path, fsync_tree, missing_folders
from iobench.system.private import CREATE_FLAGS, owner_tag, stale_dirs

if TYPE_CHECKING:
    from iobench.storage.object_clients import ObjectClient

WORK_KIND = ".iobench-checkpoint"  # `<kind>-<pid>-<start>-XXXX`: whose work folder it is, after a PID is reused
COLD_LEFT = 0.05  # more of a checkpoint than this still cached after eviction: cold is not cold


@dataclass(frozen=True)
class CheckpointPlace:
    """One checkpoint's place: a local folder, or a prefix of a bucket (`s3://bucket/prefix`) at `endpoint`, whose
    keys a trial finds in its environment (never on a command line)."""

    folder: str | None = None
    url: str | None = None
    endpoint: str | None = None
    region: str = REGION

    @property
    def local(self) -> bool:
        return self.folder is not None

    def child(self, name: str) -> CheckpointPlace:
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"not a checkpoint's name: {name!r}")
        if self.folder is not None:
            return replace(self, folder=str(Path(self.folder) / name))
        return replace(self, url=f"{self.url}/{name}")

    def file(self, name: str) -> str:
        """A file of the checkpoint: a local path, or an object's s3:// URL."""
        return str(Path(self.folder) / name) if self.folder is not None else f"{self.url}/{name}"

    @property
    def bucket_key(self) -> tuple[str, str]:
        bucket, _, key = (self.url or "").removeprefix("s3://").partition("/")
        return bucket, key

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_json(cls, data: dict) -> CheckpointPlace:
        return cls(**{k: data.get(k) for k in ("folder", "url", "endpoint")}, region=data.get("region") or REGION)


class CheckpointTarget(ABC):
    kind: str  # "local" or "object"

    @abstractmethod
    def where(self) -> str:
        """Where, in words (a record's `target`)."""

    @abstractmethod
    def place(self, name: str) -> CheckpointPlace:
        """A fresh, empty place for one library's checkpoint."""

    @abstractmethod
    def size(self, place: CheckpointPlace) -> int:
        """Bytes the checkpoint holds (files on disk, or objects stored)."""

    @abstractmethod
    def make_cold(self, place: CheckpointPlace) -> float:
        """Nothing of it cached on this machine; the fraction still resident after."""

    @abstractmethod
    def residency(self, place: CheckpointPlace) -> float | None:
        """The fraction of it in this machine's page cache."""

    @abstractmethod
    def remove(self, place: CheckpointPlace) -> None: ...

    def check(self) -> None:
        """One line where the target is no longer iobench's (its folder removed under the run)."""
        return None  # an object store's prefix: what removes it fails the next request, in one line

    @abstractmethod
    def read_small(self, place: CheckpointPlace, name: str, limit: int) -> bytes:
        """At most `limit` bytes of a small file of the checkpoint (a pointer); OSError where it is not there."""

    @abstractmethod
    def write_small(self, place: CheckpointPlace, name: str, data: bytes) -> None:
        """A small file of the checkpoint (a pointer) replaced whole, durable when this returns."""

    @abstractmethod
    def names(self, place: CheckpointPlace) -> list[str]:
        """The names directly in `place` (its steps; never through a link)."""

    def make_durable(self, place: CheckpointPlace) -> None:
        """A saved checkpoint made durable (a completed upload is durable as it is)."""
        return None

    def environment(self) -> dict[str, str]:
        """What a trial needs in its environment to reach the target (an S3 store's keys)."""
        return {}

    def requests_mark(self) -> int | None:
        return None

    def requests_since(self, mark: int | None) -> Requests | None:
        """What moved since `mark`, by the server's count; None where the target does not count."""
        return None


class LocalCheckpoints(CheckpointTarget):
    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root
        self._identity = _identity(root)

    def where(self) -> str:
        return "local"

    def check(self) -> None:
        if _identity(self.root) != self._identity or not ownership.is_ours(self.root):
            raise IobenchError(
                f"checkpoint: iobench's folder {self.root} was removed or replaced during the run "
                "(another run's sweep of a shared --dir, or a user); what was measured in it since is "
                "void"
            )

    def place(self, name: str) -> CheckpointPlace:
        self.check()
        folder = self.root / name
        folder.mkdir(mode=0o700)
        return CheckpointPlace(folder=str(folder))

    def files(self, place: CheckpointPlace) -> list[Path]:
        return sorted(p for p in Path(place.folder).rglob("*") if p.is_file() and not p.is_symlink())

    def size(self, place: CheckpointPlace) -> int:
        return sum(p.stat().st_size for p in self.files(place))

    def make_cold(self, place: CheckpointPlace) -> float:
        from iobench.storage.local.page_cache import evict, resident_fraction

        files = self.files(place)
        evict(files, "fadvise")
        left = resident_fraction(files)
        if left > COLD_LEFT:
            raise IobenchError(
                f"checkpoint: {left:.0%} of the checkpoint stayed cached after eviction; cold is not cold"
            )
        return left

    def residency(self, place: CheckpointPlace) -> float | None:
        from iobench.storage.local.page_cache import resident_fraction

        return resident_fraction(self.files(place))

    def remove(self, place: CheckpointPlace) -> None:
        shutil.rmtree(place.folder, ignore_errors=True)

    def read_small(self, place: CheckpointPlace, name: str, limit: int) -> bytes:
        fd = os.open(Path(place.folder) / name, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)

    def write_small(self, place: CheckpointPlace, name: str, data: bytes) -> None:
        """Written `O_EXCL | O_NOFOLLOW` beside, fsynced, renamed over the old one, the folder then fsynced."""
        folder = Path(place.folder)
        temp = folder / f".{name}-{os.getpid()}"
        fd = os.open(temp, CREATE_FLAGS, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, folder / name)
        fsync_path(folder)

    def names(self, place: CheckpointPlace) -> list[str]:
        return [e.name for e in Path(place.folder).iterdir() if not e.is_symlink()]

    def make_durable(self, place: CheckpointPlace) -> None:
        """Its files and folders flushed, and its own entry in its parent."""
        fsync_tree(Path(place.folder))
        fsync_path(Path(place.folder).parent)


class ObjectCheckpoints(CheckpointTarget):
    """A prefix of a bucket, through either client (`iobench.storage.object_clients`): the session's, with the keys
    it hands a trial's environment and the store's request log, or a trial's own, its keys in its environment."""

    kind = "object"

    def __init__(
        self,
        client: ObjectClient,
        place: CheckpointPlace,
        what: str,
        keys: dict[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        bucket, key = place.bucket_key
        self.client, self.bucket, self.prefix, self.what = client, bucket, f"{key}/" if key else "", what
        self.endpoint_url, self.region, self.keys, self.log = place.endpoint, place.region, keys or {}, log

    def where(self) -> str:
        return self.what

    def place(self, name: str) -> CheckpointPlace:
        return CheckpointPlace(
            url=f"s3://{self.bucket}/{self.prefix}{name}", endpoint=self.endpoint_url, region=self.region
        )

    def objects(self, prefix: str) -> dict[str, int]:
        """Every object under `prefix`, with its size."""
        return self.client.objects(self.bucket, prefix)

    def size(self, place: CheckpointPlace) -> int:
        return sum(self.objects(place.bucket_key[1] + "/").values())

    def make_cold(self, place: CheckpointPlace) -> float:
        return 0.0  # an object store's answers come over the network: nothing of them is cached here

    def residency(self, place: CheckpointPlace) -> float | None:
        return 0.0

    def remove(self, place: CheckpointPlace) -> None:
        self.remove_prefix(place.bucket_key[1] + "/")

    def read_small(self, place: CheckpointPlace, name: str, limit: int) -> bytes:
        return self.client.read(self.bucket, f"{place.bucket_key[1]}/{name}", limit)

    def write_small(self, place: CheckpointPlace, name: str, data: bytes) -> None:
        self.client.write(self.bucket, f"{place.bucket_key[1]}/{name}", data)  # one PUT: the object whole

    def names(self, place: CheckpointPlace) -> list[str]:
        under = place.bucket_key[1] + "/"
        return sorted({key.removeprefix(under).split("/", 1)[0] for key in self.objects(under)})

    def remove_prefix(self, prefix: str) -> None:
        self.client.delete(self.bucket, list(self.objects(prefix)))

    def environment(self) -> dict[str, str]:
        return dict(self.keys)

    def requests_mark(self) -> int | None:
        from iobench.storage.remote import requests_log

        return requests_log.mark(self.log)

    def requests_since(self, mark: int | None) -> Requests | None:
        from iobench.storage.remote import requests_log

        return requests_log.since(self.log, mark)


@contextmanager
def local_target(directory: Path) -> Iterator[LocalCheckpoints]:
    with work_folder(directory) as root:
        yield LocalCheckpoints(root)


@contextmanager
def object_target(endpoint: Endpoint, what: str, log: Path | None = None) -> Iterator[ObjectCheckpoints]:
    """A prefix of the endpoint's bucket of this run's own, emptied at the end and checked empty (one line where
    something stayed)."""
    if endpoint.bucket is None:
        raise IobenchError(
            "checkpoint --endpoint-url: name the bucket the checkpoints go to: http(s)://host:port/bucket"
        )
    from iobench.storage.object_clients import Boto3Objects

    root = CheckpointPlace(
        url=f"s3://{endpoint.bucket}/iobench-checkpoint-{owner_tag()}", endpoint=endpoint.url, region=endpoint.region
    )
    target = ObjectCheckpoints(Boto3Objects(endpoint), root, what, endpoint.environment(), log)
    try:
        yield target
    finally:
        target.remove_prefix(target.prefix)
    if left := target.objects(target.prefix):
        raise IobenchError(f"checkpoint: {len(left)} objects stayed under s3://{endpoint.bucket}/{target.prefix}")


@contextmanager
def work_folder(directory: Path) -> Iterator[Path]:
    """A folder of iobench's own under `directory` (0700, made here), removed on every exit path, with the folders
    above it that were made for it; what a killed checkpoint left there (its process gone) is removed first. A
    `directory` that is a link, not a folder or not writable is refused in one line."""
    made = _made_parents(directory)
    try:
        for stale in stale_dirs(WORK_KIND, directory):
            shutil.rmtree(stale, ignore_errors=True)
        try:
            folder = Path(tempfile.mkdtemp(prefix=f"{WORK_KIND}-{owner_tag()}-", dir=directory))
            ownership.mark(folder)
        except OSError as exc:
            raise IobenchError(f"--dir {directory}: cannot write there: {exc.strerror or exc}") from None
        identity = _identity(folder)
        try:
            yield folder
        finally:
            if _identity(folder) == identity and ownership.is_ours(folder):  # never one that replaced it
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        for parent in made:  # deepest first; a folder something else now holds stays
            with contextlib.suppress(OSError):
                parent.rmdir()


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder's device and inode (lstat), None where it is gone: a folder removed and made again is another."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def check_directory(directory: Path) -> None:
    """--dir checked before anything is said or made: not a link, a folder (or missing below one), writable."""
    for path in (directory, *directory.parents):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):  # missing, or below a file (said when the file is reached)
            continue
        except OSError as exc:
            raise IobenchError(f"--dir {directory}: {exc.strerror or exc}") from None
        if path == directory and stat.S_ISLNK(st.st_mode):
            raise IobenchError(f"--dir {directory} is a link; give the folder it points to")
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise IobenchError(f"--dir {directory}: {path} is not a folder")
        if not os.access(path, os.W_OK):
            read_only = os.statvfs(path).f_flag & os.ST_RDONLY
            why = "Read-only file system" if read_only else "permission denied"
            raise IobenchError(f"--dir {directory}: cannot write in {path}: {why}")
        return


def _made_parents(directory: Path) -> list[Path]:
    """`directory` checked and made with its missing parents; those made, deepest first."""
    check_directory(directory)
    missing = missing_folders(directory)
    made: list[Path] = []
    try:
        for path in reversed(missing):
            path.mkdir(mode=0o777)
            made.append(path)
    except OSError as exc:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()
        raise IobenchError(f"--dir {directory}: cannot make {path}: {exc.strerror or exc}") from None
    return list(reversed(made))
