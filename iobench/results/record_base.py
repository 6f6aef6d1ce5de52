"""What every record of iobench holds, whatever it measured (a run's epochs, a checkpoint's save or restore): its
schema version and when it was made, where it was measured (`Environment`: versions of every library on its path, the
CPU, the torch threads the measurement had) and the machine's load around it (`HostLoad`). A run record and a
checkpoint record share this one base: `compare` and `report` read both through it."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field, fields
from typing import Any

from iobench.results.checked import checked, parsed
from iobench.results.record_parts import Environment


@dataclass(frozen=True, kw_only=True)
class HostLoad:
    """Sharing the cores: the 1-minute load average, and the cores' worth of CPU other programs used in a quarter of
    a second (not this measurement, not its --cpu-contention rivals), just before and after it."""

    load_before: float | None = None
    load_after: float | None = None
    other_cpu_before: float | None = None
    other_cpu_after: float | None = None

    @property
    def busy(self) -> float | None:
        """The most cores other programs used around it (before or after), None where it was not measured."""
        seen = [x for x in (self.other_cpu_before, self.other_cpu_after) if x is not None]
        return max(seen) if seen else None


@dataclass(frozen=True, kw_only=True)
class RecordBase:
    environment: Environment = field(default_factory=Environment)
    host: HostLoad = field(default_factory=HostLoad)
    timestamp: str = ""
    schema_version: int = 1


BASE_PARTS = {"environment": Environment, "host": HostLoad}  # the base's parts, stored flat in a record's object


def base_json(record: RecordBase) -> dict[str, Any]:
    """The base as stored: its parts' fields flat in the record's object (the keys of a run record of schema 1)."""
    out: dict[str, Any] = {"schema_version": record.schema_version, "timestamp": record.timestamp}
    for name in BASE_PARTS:
        part = getattr(record, name)
        out.update({f.name: deepcopy(getattr(part, f.name)) for f in fields(part)})
    return out


def base_of(data: dict) -> dict[str, Any]:
    """The base's values from a stored object, each checked against its type (RecordError names what is wrong)."""
    parts = {name: parsed(part, data) for name, part in BASE_PARTS.items()}
    return {**parts, "timestamp": checked(data.get("timestamp", ""), str, "timestamp")}


def base_field_names() -> set[str]:
    """The keys the base takes in a stored object."""
    return {f.name for part in BASE_PARTS.values() for f in fields(part)} | {"schema_version", "timestamp"}
