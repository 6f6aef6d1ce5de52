"""How the format registry (`iobench.formats.FORMATS`) holds formats: entries by name, each built on first
access; plug-ins from the `iobench.formats` entry-point group; the capabilities a loader may need."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iobench.formats.base import StorageFormat


# What a loader may need of a format, as the format's class declares it (`capabilities`): its library's own
# pipeline (`StorageFormat.pipeline`), samples at fixed offsets (`FormatReader.fixed_layout`).
PIPELINE, FIXED_LAYOUT = "pipeline", "fixed_layout"


@dataclass(frozen=True)
class Registered:
    """A format by name: where its class lives, and whether a plain `iobench prepare` writes it."""

    name: str
    target: str  # "module:Class"
    default: bool = True
    needs: str | None = None  # the library (module and pip extra) the format's writer and reader import
    # A built-in format's capabilities, restated here so that listing which loader reads it imports nothing
    # (tests/formats/test_formats.py checks them against the class); None: a plug-in, asked once it loads.
    declares: frozenset[str] | None = frozenset()


class Registry(Mapping[str, "StorageFormat"]):
    """Names in registration order; each format is built on first access."""

    def __init__(self, entries: tuple[Registered, ...]) -> None:
        self._entries = {e.name: e for e in entries}
        self._built: dict[str, StorageFormat] = {}
        self.refused: list[str] = []  # plug-ins left out, each with the reason (said when formats are chosen)

    def loads(self, name: str) -> str | None:
        """None when the format can be built; otherwise why not, in one line (a plug-in that fails to load)."""
        from iobench.errors import IobenchError

        try:
            self[name]
        except IobenchError as exc:
            return str(exc)
        return None

    def __getitem__(self, name: str) -> StorageFormat:
        if name not in self._built:
            self._built[name] = _build(self._entries[name])
        return self._built[name]

    def installed(self, name: str) -> bool:
        """Whether the format's library can be imported (found, not imported: listing stays light)."""
        needs = self._entries[name].needs
        return needs is None or importlib.util.find_spec(needs) is not None

    def import_library(self, name: str) -> None:
        """The format's library imported in this process, as a training script imports it at its top: DataLoader
        workers forked each epoch inherit it instead of importing it again (datasets 0.57 s, litdata 0.19 s,
        zarr 0.15 s a worker an epoch here)."""
        if (library := self._entries[name].needs) is not None:
            importlib.import_module(library)

    def missing(self, name: str) -> str:
        return missing(self._entries[name])

    def capable(self, name: str, capability: str) -> bool:
        """Whether the format has the capability: a built-in by its entry (nothing imported), a plug-in by its
        class (built; one that fails to load has none)."""
        declared = self._entries[name].declares
        if declared is not None:
            return capability in declared
        return self.loads(name) is None and capability in capabilities(self[name])

    @property
    def native(self) -> tuple[str, ...]:
        """Formats read by their library's own pipeline as well (`--loader native`), plug-ins included."""
        return tuple(n for n in self._entries if self.capable(n, PIPELINE))

    def register(self, entry: Registered) -> None:
        """Add a format (a plug-in); a built-in name is never replaced."""
        self._entries.setdefault(entry.name, entry)

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


ENTRY_POINT_GROUP = "iobench.formats"


def missing(entry: Registered) -> str:
    """The one line that refuses a format whose library is not installed."""
    return (
        f"format {entry.name} needs the {entry.needs} library: pip install 'iobench[{entry.needs}]' "
        "(or 'iobench[formats]' for every format)"
    )


def capabilities(fmt: StorageFormat) -> frozenset[str]:
    """What the format's class declares: a `pipeline` of its library's own, a reader with `fixed_layout`."""
    from iobench.formats.base import FormatReader

    found = {PIPELINE} if fmt.has_pipeline else set()
    if fmt.reader_type.fixed_layout is not FormatReader.fixed_layout:
        found.add(FIXED_LAYOUT)
    return frozenset(found)


def _build(entry: Registered) -> StorageFormat:
    from iobench.errors import IobenchError
    from iobench.formats.base import StorageFormat

    if entry.needs is not None and importlib.util.find_spec(entry.needs) is None:
        raise IobenchError(missing(entry))
    module, _, cls = entry.target.partition(":")
    try:
        fmt = getattr(importlib.import_module(module), cls)()
    except (Exception, SystemExit) as exc:  # a plug-in's own failure (even sys.exit): named, in one line
        raise IobenchError(
            f"format {entry.name!r} ({entry.target}) could not be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(fmt, StorageFormat) or fmt.name != entry.name:
        raise IobenchError(f"format {entry.name!r} ({entry.target}) is not a StorageFormat named {entry.name!r}")
    return fmt


PLUG_IN_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")


def plug_ins(
    points: Iterable[metadata.EntryPoint] | None = None, refused: list[str] | None = None
) -> tuple[Registered, ...]:
    """Formats other packages registered (entry points are read, nothing is imported). A name that a command
    line could not name alone (`all`, `a,b`) is left out, with the reason in `refused`."""
    found = metadata.entry_points(group=ENTRY_POINT_GROUP) if points is None else points
    accepted = []
    for p in found:
        if PLUG_IN_NAME.fullmatch(p.name) and p.name != "all":
            accepted.append(Registered(p.name, p.value, default=False, declares=None))
        elif refused is not None:
            refused.append(
                f"plug-in format {p.name!r} ({p.value}): a format's name is lowercase letters, digits, "
                "- and _, and not 'all'"
            )
    return tuple(accepted)
