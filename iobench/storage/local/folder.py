"""`LocalStorage`: a format's files in a folder on this machine (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.errors import IobenchError
from iobench.storage import Applied, Counters, Storage
from iobench.storage.local.page_cache import Eviction, evict, resident_fraction
from iobench.storage.local.traffic import Traffic
from iobench.system.environment import can_drop_caches, mount_of
from iobench.system.memory import memory_room

if TYPE_CHECKING:  # confine imports the helpers run as `python -m` (the governor, the janitor): not at import
    from iobench.storage.local.confine import Confinement


@dataclass(frozen=True)
class StorageCeilings:
    """How fast the disk reads, the fastest way found for each pattern (None: not storage, e.g. tmpfs)."""

    sequential_mb_per_s: float
    sequential_method: str
    random_iops: dict[tuple[int, int], float | None]  # (read size, queue depth) -> reads per second


class LocalStorage(Storage):
    """A format's files in a folder of a prepared dataset on this machine."""

    kind = "local"

    def __init__(
        self,
        paths: list[Path] | None,
        folder: Path,
        dataset_dir: Path | None = None,
        *,
        eviction: Eviction = Eviction.AUTO,
        confinement: Confinement | None = None,
    ) -> None:
        """`paths`: the format's files, checked to lie inside `folder` (the manifest's `inside`); None: every
        regular file in the folder, listed when first asked for (a reader alone never asks)."""
        self._paths, self.folder = paths, folder
        self.dataset_dir = dataset_dir or folder.parent
        self.eviction = Eviction.parse(eviction, "--eviction")
        from iobench.storage.local.confine import Confinement

        self.confinement = confinement or Confinement()

    @property
    def paths(self) -> list[Path]:
        if self._paths is None:
            self._paths = sorted(p for p in self.folder.rglob("*") if p.is_file() and not p.is_symlink())
        return self._paths

    @property
    def where(self) -> str:
        return str(self.folder)

    def files(self) -> list[str]:
        return [p.relative_to(self.folder).as_posix() for p in self.paths]

    def local_folder(self) -> Path:
        return self.folder

    def check(self, cold: bool) -> None:
        if cold and self.eviction is Eviction.DROP_CACHES and not can_drop_caches():
            raise IobenchError("--eviction drop_caches needs root (sudo iobench ...); or use --eviction fadvise")
        if self.confinement.cache_budget_bytes is not None:
            fstype, _ = mount_of(self.dataset_dir)
            if fstype in ("tmpfs", "ramfs"):
                raise IobenchError(
                    f"--cache-budget: {self.dataset_dir} is on {fstype}, whose files are memory, not cache"
                )
        from iobench.storage.local.confine import check_can_confine

        check_can_confine(self.confinement, self.dataset_dir)

    def make_cold(self) -> str:
        """Every file evicted (nothing may map them: a mapped page survives eviction); the method used. As root
        `auto` and `drop_caches` drop the whole page cache: the dataset's metadata and pages mapped by other
        processes go too, and so do the pages of iobench's own code and libraries (`primes_cold`)."""
        return evict(self.paths, self.eviction.value)

    primes_cold = True

    def make_dataset_cold(self) -> str:
        return evict(self.paths, "fadvise")

    def residency(self) -> float:
        return resident_fraction(self.paths)

    def counters(self) -> Counters:
        return Traffic(self.dataset_dir)

    @contextmanager
    def controls(self) -> Iterator[Applied]:
        from iobench.storage.local.confine import confined

        with confined(self.confinement, self.dataset_dir) as applied:
            yield applied

    @property
    def larger_than_memory(self) -> bool:
        budget, size = self.confinement.cache_budget_bytes, sum(p.stat().st_size for p in self.paths)
        return (budget is not None and budget < size) or size > memory_room().total

    def probe_ceilings(self, probe: Path, blocks: tuple[int, ...]) -> StorageCeilings:
        """The disk's sequential read and random reads of each block size at queue depths 1 and 32, on `probe`
        (a large file on the same disk, evicted first), under this storage's read throttle."""
        from iobench.storage.local.disk_limits import random_read_iops, storage_read_mb_per_s

        evict([probe], "fadvise")  # an unmapped, fsynced file: fadvise is enough, no root needed
        from iobench.storage.local.confine import Confinement, confined

        with confined(Confinement(read_limit_mb_per_s=self.confinement.read_limit_mb_per_s), self.dataset_dir):
            sequential, method = storage_read_mb_per_s(probe)
            iops = {(b, q): random_read_iops(probe, b, q) for b in dict.fromkeys(blocks) for q in (1, 32)}
        return StorageCeilings(sequential, method, {k: None if v != v else v for k, v in iops.items()})  # NaN: none
