"""What the circumstances of a measurement say of its figures, judged the same way for every command: other programs
on the cores beside it (its records' load), and how many units it has."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from iobench.results.record import RunRecord

BUSY_CORES = 0.25  # other programs' cores beside a measurement above which its figures are a shared machine's


@dataclass(frozen=True)
class Load:
    """The cores other programs used beside some measurements: the least and the most of them."""

    low: float
    high: float

    @property
    def busy(self) -> bool:
        return self.high > BUSY_CORES

    def text(self) -> str:
        return f"{self.high:.1f}" if self.high - self.low < 0.1 else f"{self.low:.1f}-{self.high:.1f}"


def load_of(cores: Iterable[float | None]) -> Load | None:
    """The load of measurements that each read the cores other programs used (None: not read); None where none did."""
    seen = [c for c in cores if c is not None]
    return Load(min(seen), max(seen)) if seen else None


def records_load(records: Iterable[RunRecord]) -> Load | None:
    """The cores other programs used around each record's runs (just before and after) and during them (each run's
    waits, where recorded): the most of them."""
    return load_of(_most(r.host.busy, *r.waits.unit_others_cores) for r in records)


def _most(*cores: float | None) -> float | None:
    seen = [c for c in cores if c is not None]
    return max(seen) if seen else None


def busy(cores: float | None) -> bool:
    return cores is not None and cores > BUSY_CORES
