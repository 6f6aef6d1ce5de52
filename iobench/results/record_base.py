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
class Waits:
    """What each unit of the measurement (a run, a checkpoint trial, a feed count) waited for, raw, one value a unit
    in the order measured (`iobench.system.waits`): the wall time, the CPU time its processes used and the time they
    were runnable but waited for a CPU, the cores other programs used meanwhile, the CPU and IO pressure (seconds some
    task stalled: the machine's, or the job's own cgroup's, `psi_source`). Records measured in turn with others share
    `turn_session` (an id of that session), and `turn_positions` holds this configuration's place in each round (its
    unit k is in round k): the judgement pairs units of one round. Empty in records made before 0.3.1; before
    `exits_reported`, a DataLoader worker that lived less than a poll went uncounted."""

    unit_wall_s: list[float] = field(default_factory=list)
    unit_cpu_s: list[float] = field(default_factory=list)
    unit_cpu_wait_s: list[float] = field(default_factory=list)
    unit_others_cores: list[float | None] = field(default_factory=list)
    unit_psi_cpu_s: list[float | None] = field(default_factory=list)
    unit_psi_io_s: list[float | None] = field(default_factory=list)
    psi_source: str = ""
    turn_session: str = ""
    turn_positions: list[int] = field(default_factory=list)
    exits_reported: bool = False  # children started by multiprocessing reported their totals as they exited

    def with_unit(self, figures: Any) -> Waits:
        """These waits and one more unit's (`iobench.system.waits.WaitFigures`)."""
        return Waits(
            unit_wall_s=[*self.unit_wall_s, figures.wall_s],
            unit_cpu_s=[*self.unit_cpu_s, figures.cpu_s],
            unit_cpu_wait_s=[*self.unit_cpu_wait_s, figures.wait_s],
            unit_others_cores=[*self.unit_others_cores, figures.others_cores],
            unit_psi_cpu_s=[*self.unit_psi_cpu_s, figures.psi_cpu_s],
            unit_psi_io_s=[*self.unit_psi_io_s, figures.psi_io_s],
            psi_source=figures.psi_source or self.psi_source,
            turn_session=self.turn_session,
            turn_positions=self.turn_positions,
            exits_reported=figures.exits_reported,
        )


@dataclass(frozen=True, kw_only=True)
class RecordBase:
    environment: Environment = field(default_factory=Environment)
    host: HostLoad = field(default_factory=HostLoad)
    waits: Waits = field(default_factory=Waits)
    timestamp: str = ""
    schema_version: int = 1


# the base's parts, stored flat in a record's object
BASE_PARTS = {"environment": Environment, "host": HostLoad, "waits": Waits}


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
