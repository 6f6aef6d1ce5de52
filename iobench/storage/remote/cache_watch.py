"""The largest size the readers' own cache folders reach during an epoch. A cache that evicts (LitData's
`max_cache_size` smaller than the dataset deletes each chunk once read) is small at the epoch's end whatever it
held on the way, so its size then says nothing of the disk it needs: a thread held for the run samples the
folders every INTERVAL_S, and each snapshot takes the peak since the previous one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from iobench.system.ownership import MARKER

INTERVAL_S = 0.05


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under a folder (0 once it is gone): a library's cache as it stands. A library may
    remove its folder while it is walked (datasets' at the end of a stream): what was counted by then."""
    total = 0
    with suppress(OSError):
        for path in folder.rglob("*") if folder.is_dir() else ():
            with suppress(OSError):
                if path.is_file() and not path.is_symlink() and path.name != MARKER:  # iobench's own marker
                    total += path.stat().st_size
    return total


class CachePeak:
    """The caches' total size now, and the most it reached since the last `take` (sampled by `watching`, and at
    every `take`). `folders` is the storage's list: a reader made later adds its folder."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders
        self._peak = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a storage handed to a worker process carries it, not its lock
        return {"folders": self.folders, "_peak": self._peak}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def sample(self) -> int:
        size = sum(map(folder_bytes, list(self.folders)))
        with self._lock:
            self._peak = max(self._peak, size)
        return size

    def take(self) -> tuple[int, int]:
        """(size now, peak since the last take); the next peak starts from the size now."""
        now = self.sample()
        with self._lock:
            peak, self._peak = self._peak, now
        return now, peak

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Sampled in a thread of this process until the block ends (a run's controls)."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(INTERVAL_S):
                if self.folders:
                    self.sample()

        thread = threading.Thread(target=run, name="iobench-cache-peak", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
