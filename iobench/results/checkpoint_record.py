"""`iobench checkpoint`'s records as typed values: one save or restore (`kind` "checkpoint"), or one library's kill-test
counts (`kind` "checkpoint-kill"). Read back like run records: every stored value checked against its field's type,
finite, within what a measurement can be; a line that is not one is skipped with the reason (`report` and `compare`
took `"seconds": 0`, Infinity, strings and lists where numbers belong, and ended in tracebacks)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from iobench.results.checked import MAX_MEASURED, RecordError, mapping, parsed

MEASURED = "checkpoint"
KILLED = "checkpoint-kill"
KINDS = (MEASURED, KILLED)
KILL_OUTCOMES = ("N intact", "N+1 intact", "clean error", "silent corruption", "restore crashed")
OPS = ("save", "restore")
CACHES = ("warm", "cold")
MAX_PARAMS = 10**15  # a quadrillion parameters: no state a machine holds
MAX_NAME = 200


@dataclass(frozen=True, kw_only=True)
class CheckpointTrial:
    """One save or restore of one library, in one round."""

    kind: str = MEASURED
    library: str
    ceiling: bool = False  # the raw reference, not a checkpoint library
    op: str  # save | restore
    cache: str | None = None  # a restore's: warm | cold
    trial: int = 0  # the round
    params: int
    layout: str = "llama"
    device: str = "cpu"
    nproc: int = 1
    ranks: int = 1
    state_bytes: int
    seed: int = 0
    source: str | None = None
    bytes_on_disk: int
    seconds: float  # until the call returned (a save), until the last byte (a restore)
    done_seconds: float | None = None  # a save: until an asynchronous save's future completed
    durable_seconds: float | None = None  # a save: until every file and folder was fsynced
    gb_per_s: float | None = None
    durable_gb_per_s: float | None = None
    peak_rss_bytes: int | None = None
    anon_bytes: int | None = None
    file_bytes: int | None = None
    read_bytes: int | None = None
    resident_before: float | None = None
    exact: bool | None = None  # a checked restore: the state came back bit for bit
    differences: list[str] = field(default_factory=list)
    load_before: float | None = None
    timestamp: str = ""

    @property
    def who(self) -> str:
        """The library, with its ranks where several saved and restored together (--nproc)."""
        return self.library + (f" x{self.ranks} ranks" if self.ranks > 1 else "")

    @property
    def timed_seconds(self) -> float:
        """What compare and the answer time: a save until durable, a restore until its last byte."""
        if self.op == "save" and self.durable_seconds is not None:
            return self.durable_seconds
        return self.seconds

    def key(self) -> tuple:
        """What makes two trials the same measurement: the library, the state, the operation and its cache."""
        return (self.library, self.params, self.layout, self.op, self.cache, self.ranks)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> CheckpointTrial:
        record = parsed(cls, mapping(data, "checkpoint record"), ("library", "op", "params", "seconds"))
        _check_numbers(record)
        if not record.seconds > 0:
            raise RecordError(f"'seconds' holds {record.seconds!r}: a save or restore takes time")
        if record.op not in OPS:
            raise RecordError(f"'op' holds {record.op!r}, not save or restore")
        if record.cache not in (None, *CACHES):
            raise RecordError(f"'cache' holds {record.cache!r}, not warm or cold")
        if not 1 <= record.params <= MAX_PARAMS or not 1 <= record.ranks <= 10**6 or not 1 <= record.nproc <= 10**6:
            raise RecordError("'params', 'ranks' or 'nproc' is outside what a run can have")
        return record


@dataclass(frozen=True, kw_only=True)
class CheckpointKills:
    """One library's kill test: a save of step N+1 over step N killed `kills` times, and what each restore found."""

    kind: str = KILLED
    library: str
    params: int
    layout: str = "llama"
    state_bytes: int = 0
    kills: int
    counts: dict[str, int]
    timestamp: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> CheckpointKills:
        record = parsed(cls, mapping(data, "kill-test record"), ("library", "params", "kills", "counts"))
        _check_numbers(record)
        unknown = set(record.counts) - set(KILL_OUTCOMES)
        if unknown:
            raise RecordError(f"'counts' names {sorted(unknown)[0]!r:.40}, not an outcome of the kill test")
        if any(not 0 <= n <= 10**6 for n in record.counts.values()) or sum(record.counts.values()) != record.kills:
            raise RecordError("'counts' do not add up to 'kills'")
        return record


def _check_numbers(record: object) -> None:
    """Every number finite, >= 0 and within what a measurement can be; every name short and printable."""
    for f in fields(record):
        value = getattr(record, f.name)
        values = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
        for x in values:
            if isinstance(x, bool) or x is None:
                continue
            if isinstance(x, int | float) and not (math.isfinite(x) and 0 <= x <= MAX_MEASURED * 1e6):
                raise RecordError(f"{f.name!r} holds {x!r}, not a measurement")
            if isinstance(x, str) and (len(x) > MAX_NAME or not x.isprintable()) and f.name != "differences":
                raise RecordError(f"{f.name!r} holds {x!r:.40}, not a name")


def checkpoint_record(data: object) -> CheckpointTrial | CheckpointKills:
    """A stored checkpoint line as its type; RecordError names what is wrong."""
    kind = mapping(data, "checkpoint record").get("kind")
    if kind == MEASURED:
        return CheckpointTrial.from_json(data)
    if kind == KILLED:
        return CheckpointKills.from_json(data)
    raise RecordError("no checkpoint kind")
