"""The storage protocol (see the package's docstring): what a run asks of where a format's bytes live."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from iobench.errors import IobenchError

# A cold epoch that starts with more of its files cached than this is flagged in the record (`cold_not_cold`).
COLD_RESIDENCY_LIMIT = 0.05


@dataclass
class Applied:
    """How a storage's controls were applied for a run (for the record): the method, and what a cache budget
    held at most."""

    method: str = ""
    peak_cache_bytes: int = 0


class Counters(ABC):
    """What moved between two snapshots, by the storage's own count: `delta` is a dict of record fields
    (bytes read from the storage, bytes this process tree read from it, requests where it counts them)."""

    @abstractmethod
    def snapshot(self, pids: Sequence[int] = ()) -> Any:
        """The counters now; `pids` are processes that read for the run but are not its children."""

    @abstractmethod
    def delta(self, before: Any, after: Any) -> dict:
        """The record's fields for the interval between two snapshots."""


@dataclass(frozen=True)
class ReadHints:
    """What a reader is told when it is built, for the way it reads: samples in order, and files larger than
    the cache that could hold them (read-ahead then evicts what a shuffled epoch still needs)."""

    sequential: bool = False
    larger_than_memory: bool = False


NO_HINTS = ReadHints()  # a reader read at random, its files fitting in the cache


class Storage(ABC):
    """One prepared format's files for one run: where they are, what cold means, what moved, its ceilings."""

    kind: ClassVar[str]
    libraries: ClassVar[tuple[str, ...]] = ()  # what reaches it (distribution names), for the record's packages

    @property
    @abstractmethod
    def where(self) -> str:
        """Where the files are, for messages and records (a folder, an endpoint and bucket)."""

    @abstractmethod
    def files(self) -> list[str]:
        """The format's files, relative to its folder."""

    def local_folder(self) -> Path:
        """The format's folder on this machine, for a format whose library reads local paths only."""
        raise IobenchError(f"{self.where} is not a folder on this machine")

    def url(self, name: str) -> str:
        """How a library addresses one of the files."""
        return str(self.local_folder() / name)

    def check(self, cold: bool) -> None:
        """Refuse, before any work, what cannot be done here (cold without permission, a budget on tmpfs)."""
        return None

    @abstractmethod
    def make_cold(self) -> str:
        """Nothing of the files left nearer than the storage itself; returns how (the record's method)."""

    # Whether the program's own files (its code, its libraries, what it imports lazily) share the cache that `make_cold`
    # empties: drop_caches evicts them, and memory pressure or these VMs' DAMON pageout may have. The runner then
    # brings back what the program reads with an untimed pass after `make_cold` and calls `make_dataset_cold`, so
    # that a cold epoch's reads from the storage are the dataset's.
    primes_cold: ClassVar[bool] = False

    def make_dataset_cold(self) -> str:
        """The dataset's files alone evicted again, after the untimed pass; how (added to the record's method)."""
        return ""

    @abstractmethod
    def residency(self) -> float | None:
        """The share of the files cached nearer than the storage (0.0 to 1.0); None where none can be."""

    def cold_enough(self, residency: float | None) -> bool:
        """Whether an epoch that starts with this residency is cold (a record flags it otherwise)."""
        return residency is None or residency <= COLD_RESIDENCY_LIMIT

    @abstractmethod
    def counters(self) -> Counters:
        """A counter of what moves from the storage (take its snapshots around each epoch)."""

    @contextmanager
    def controls(self) -> Iterator[Applied]:
        """The storage's own controls held around a run (a local read throttle and cache budget); none by
        default."""
        yield Applied()

    @property
    def larger_than_memory(self) -> bool:
        """The cache nearer than the storage cannot hold the files (a reader's read-ahead then hurts)."""
        return False

    def hints(self, sequential: bool) -> ReadHints:
        return ReadHints(sequential=sequential, larger_than_memory=self.larger_than_memory)
