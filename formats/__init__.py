"""The registry of storage formats: name -> format. Nothing else lives here.

A format's module is imported when the format is first used, not when the registry is: listing the
names (for `--help`, for parsing `--formats`) must not load torch, tensordict, h5py or lmdb.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iobench.formats.base import StorageFormat


@dataclass(frozen=True)
class Registered:
    """A format by name: where its class lives, and whether a plain `iobench prepare` writes it."""

    name: str
    target: str  # "module:Class"
    default: bool = True


class Registry(Mapping[str, "StorageFormat"]):
    """Names in registration order; each format is built on first access."""

    def __init__(self, entries: tuple[Registered, ...]) -> None:
        self._entries = {e.name: e for e in entries}
        self._built: dict[str, StorageFormat] = {}

    def __getitem__(self, name: str) -> StorageFormat:
        if name not in self._built:
            module, _, cls = self._entries[name].target.partition(":")
            self._built[name] = getattr(importlib.import_module(module), cls)()
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @property
    def defaults(self) -> tuple[str, ...]:
        """What a plain `iobench prepare` writes, and what commands that read 'every format' read."""
        return tuple(n for n, e in self._entries.items() if e.default)


FORMATS = Registry(
    (
        Registered("npy", "iobench.formats.npy:NpyFormat"),
        Registered("hdf5", "iobench.formats.hdf5:Hdf5Format"),
        Registered("lmdb", "iobench.formats.lmdb:LmdbFormat"),
        Registered("memmap", "iobench.formats.memmap:MemmapFormat"),
        # one file per sample: a million files for the default size, so written only when named
        Registered("files", "iobench.formats.files:FilesFormat", default=False),
    )
)
DEFAULT_FORMATS = FORMATS.defaults
