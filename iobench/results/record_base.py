"""What every record of iobench holds, whatever it measured (a run's epochs, a checkpoint's save or restore): its
schema version and when it was made, where it was measured (`Environment`: versions of every library on its path, the
CPU, the torch threads the measurement had) and the machine's load around it (`HostLoad`). A run record and a
checkpoint record share this one base: `compare` and `report` read both through it."""

from __future__ import annotations

from dataclasses import dataclass, field

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
