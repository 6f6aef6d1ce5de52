"""`iobench checkpoint`'s records as typed values: one save or restore (`kind` "checkpoint"), or one library's kill-test
counts (`kind` "checkpoint-kill"). Read back like run records: every stored value checked against its field's type,
finite, within what a measurement can be; a line that is not one is skipped with the reason (`report` and `compare`
took `"seconds": 0`, Infinity, strings and lists where numbers belong, and ended in tracebacks).

Both share the run record's base (`RecordBase`: environment with the torch threads the trial had, the machine's load
before and after, time, schema version), stored flat in the record's object as a run record stores it. Schema 1 (no
version, no environment, `load_before` alone) reads as it was."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from iobench.errors import IobenchError
from iobench.results.checked import MAX_MEASURED, RecordError, mapping, parsed
from iobench.results.record_base import BASE_PARTS, RecordBase, base_json, base_of

MEASURED = "checkpoint"
KILLED = "checkpoint-kill"
KINDS = (MEASURED, KILLED)
KILL_OUTCOMES = ("N intact", "N+1 intact", "clean error", "silent corruption", "restore crashed")
OPS = ("save", "restore", "restart")  # restart: a fresh process to its first training step
CACHES = ("warm", "cold")
SAVE_MODES = ("inplace", "safe")  # and keep:K (`SaveMode`)
KEEP = "keep:"  # keep:K: each save a new step, published as safe's, the oldest removed beyond the newest K
MAX_KEEP = 16
TARGETS = ("local", "object")
LOST = ("clean error", "silent corruption", "restore crashed")  # a kill's outcomes that leave no step to resume from
SCHEMA_VERSION = 2
MAX_PARAMS = 10**15  # a quadrillion parameters: no state a machine holds
MAX_NAME = 200
FREE_TEXT = ("differences", "packages", "cpu_model", "kernel", "hostname", "data_device")  # escaped where shown


def _kept(mode: str) -> int | None:
    """K of `keep:K` (1..MAX_KEEP, written without a leading zero: one spelling a mode); None for any other text."""
    digits = mode.removeprefix(KEEP) if mode.startswith(KEEP) else ""
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 2 and digits[0] != "0"):
        return None
    if not 1 <= int(digits) <= MAX_KEEP:
        return None
    return int(digits)


class SaveMode(str):
    """A save mode, parsed once where it enters (the command line, a job, a record) with one spelling each: inplace,
    safe, or keep:K (1..MAX_KEEP, no leading zero: `keep:01` had become a mode of its own). A str, as records store it;
    what it means is asked of it (`kept`, `saves`), never of its text by the code that holds it."""

    __slots__ = ()

    def __new__(cls, text: object) -> SaveMode:
        if isinstance(text, SaveMode):
            return text
        if not cls.valid(text):
            raise ValueError(f"not a save mode: {str(text)[:40]!r} (inplace, safe or keep:K, K 1..{MAX_KEEP})")
        return super().__new__(cls, text)

    @staticmethod
    def valid(text: object) -> bool:
        return isinstance(text, str) and (text in SAVE_MODES or _kept(text) is not None)

    @property
    def inplace(self) -> bool:
        return self == SAVE_MODES[0]

    @property
    def kept(self) -> int | None:
        """K of keep:K; None for inplace and safe."""
        return _kept(self)

    @property
    def steps_kept(self) -> int:
        """The steps a save leaves: K for keep:K, one otherwise (safe keeps the newest; inplace has one)."""
        return self.kept or 1

    @property
    def saves(self) -> int:
        """The saves a trial makes: the first, then the steady one; keep:K's steady save is the (K+1)th, made while
        K checkpoints are kept."""
        return 2 if self.kept is None else self.kept + 1

    @classmethod
    def keeping(cls, k: int) -> SaveMode:
        """keep:K, spelt the one way."""
        return cls(f"{KEEP}{k}")

    @classmethod
    def parse_list(cls, text: object) -> tuple[SaveMode, ...]:
        """--save-mode's comma list, each mode once; a mistake refused in one line."""
        modes = tuple(dict.fromkeys(m.strip() for m in str(text).split(",") if m.strip()))
        if not modes or not all(cls.valid(m) for m in modes):
            bad = next((m for m in modes if m.startswith(KEEP)), None)
            why = f": keep:K keeps K from 1 to {MAX_KEEP}, written without a leading zero" if bad is not None else ""
            raise IobenchError(f"--save-mode: inplace, safe or keep:K, a comma list, got {text!r}{why}")
        return tuple(cls(m) for m in modes)


@dataclass(frozen=True, kw_only=True)
class CheckpointTrial(RecordBase):
    """One save or restore of one library, in one round."""

    kind: str = MEASURED
    library: str
    saver: str = ""  # whose save wrote the checkpoint it restores, where another library's ("": its own)
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
    target: str = "local"  # local | object
    store: str = ""  # the object store, in words (iobench's on loopback with its profile, or --endpoint-url's host)
    save_mode: str = "inplace"  # a save's: inplace | safe | keep:K (a restore's: the mode of the checkpoint it read)
    bytes_on_disk: int  # what the checkpoint holds (files, or objects)
    seconds: float  # the steady save until the call returned, a restore until the last byte
    done_seconds: float | None = None  # a save: until an asynchronous save's future completed
    durable_seconds: float | None = None  # a save: until every file, folder and its entry were fsynced
    first_seconds: float | None = None  # the process's first save until it returned (set-up and planning inside)
    first_durable_seconds: float | None = None  # the first save until durable
    removed_seconds: float | None = None  # safe, keep:K: the old steps' removal after the steady save's clock
    step: str = "none"  # a save: the training step run beside it (--step)
    blocked_seconds: float | None = None  # with a step: how long the save kept the loop from stepping
    background_seconds: float | None = None  # with a step: an asynchronous save's time after it returned, until done
    step_rate: float | None = None  # with a step: steps a second with no save running
    step_rate_during: float | None = None  # with a step: steps a second while the save ran in the background
    # a restart's parts (its whole is `seconds`, the process's start to its end, as iobench saw it):
    started_seconds: float | None = None  # the process started, Python, torch and the library imported
    allocated_seconds: float | None = None  # the model's and optimizer's state allocated
    restored_seconds: float | None = None  # the checkpoint read into it
    stepped_seconds: float | None = None  # its first training step (--step, or an optimizer step over the state)
    gb_per_s: float | None = None
    durable_gb_per_s: float | None = None
    peak_rss_bytes: int | None = None
    anon_bytes: int | None = None
    file_bytes: int | None = None
    read_bytes: int | None = None
    resident_before: float | None = None
    onto_device: bool | None = None  # a restore to a device: straight there (True), or through the host
    exact: bool | None = None  # a checked restore: the state came back bit for bit
    differences: list[str] = field(default_factory=list)
    requests: dict[str, int] | None = None  # object storage: requests by method (the server's count)
    bytes_sent: int | None = None  # object storage: bytes the server sent, and received
    bytes_received: int | None = None
    schema_version: int = SCHEMA_VERSION

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

    @property
    def load_before(self) -> float | None:
        return self.host.load_before

    def key(self) -> tuple:
        """What makes two trials the same measurement: the library, the state, the operation and its cache, the ranks,
        how it saved and where."""
        mode = self.save_mode if self.op == "save" else None
        return (self.library, self.params, self.layout, self.op, self.cache, self.ranks, mode, self.target, self.step)

    def to_json(self) -> dict[str, Any]:
        return _flat(self)

    @classmethod
    def from_json(cls, data: object) -> CheckpointTrial:
        record = _parsed(cls, data, "checkpoint record", ("library", "op", "params", "seconds"))
        if not record.seconds > 0:
            raise RecordError(f"'seconds' holds {record.seconds!r}: a save or restore takes time")
        if record.op not in OPS:
            raise RecordError(f"'op' holds {record.op!r}, not save, restore or restart")
        if record.cache not in (None, *CACHES):
            raise RecordError(f"'cache' holds {record.cache!r}, not warm or cold")
        if not SaveMode.valid(record.save_mode) or record.target not in TARGETS:
            raise RecordError(f"'save_mode' or 'target' holds {record.save_mode!r:.20}/{record.target!r:.20}")
        if not 1 <= record.params <= MAX_PARAMS or not 1 <= record.ranks <= 10**6 or not 1 <= record.nproc <= 10**6:
            raise RecordError("'params', 'ranks' or 'nproc' is outside what a run can have")
        return record


@dataclass(frozen=True, kw_only=True)
class CheckpointKills(RecordBase):
    """One library's kill test in one save mode: a save of step N+1 over step N killed `kills` times, and what each
    restore found."""

    kind: str = KILLED
    library: str
    save_mode: str = "inplace"
    params: int
    layout: str = "llama"
    state_bytes: int = 0
    kills: int
    counts: dict[str, int]
    schema_version: int = SCHEMA_VERSION

    @property
    def lost(self) -> int:
        """Kills after which no step could be resumed from (a clean error loses step N too)."""
        return sum(self.counts.get(o, 0) for o in LOST)

    def to_json(self) -> dict[str, Any]:
        return _flat(self)

    @classmethod
    def from_json(cls, data: object) -> CheckpointKills:
        record = _parsed(cls, data, "kill-test record", ("library", "params", "kills", "counts"))
        unknown = set(record.counts) - set(KILL_OUTCOMES)
        if unknown:
            raise RecordError(f"'counts' names {sorted(unknown)[0]!r:.40}, not an outcome of the kill test")
        if any(not 0 <= n <= 10**6 for n in record.counts.values()) or sum(record.counts.values()) != record.kills:
            raise RecordError("'counts' do not add up to 'kills'")
        if not SaveMode.valid(record.save_mode):
            raise RecordError(f"'save_mode' holds {record.save_mode!r:.20}")
        return record


def _flat(record: RecordBase) -> dict[str, Any]:
    """The record's own fields, then the base's flat beside them (as a run record stores them)."""
    own = {f.name: getattr(record, f.name) for f in fields(record) if f.name not in BASE_PARTS}
    return {**own, **base_json(record)}


def _parsed(cls: type, data: object, what: str, required: tuple[str, ...]) -> Any:
    d = mapping(data, what)
    version = d.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise RecordError(f"schema_version {version!r:.20} is not one this iobench reads (1-{SCHEMA_VERSION})")
    record = replace(parsed(cls, d, required), **base_of(d), schema_version=version)
    _check_numbers(record)
    for part in BASE_PARTS:
        _check_numbers(getattr(record, part))
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
            if isinstance(x, str) and (len(x) > MAX_NAME or not x.isprintable()) and f.name not in FREE_TEXT:
                raise RecordError(f"{f.name!r} holds {x!r:.40}, not a name")


def checkpoint_record(data: object) -> CheckpointTrial | CheckpointKills:
    """A stored checkpoint line as its type; RecordError names what is wrong."""
    kind = mapping(data, "checkpoint record").get("kind")
    if kind == MEASURED:
        return CheckpointTrial.from_json(data)
    if kind == KILLED:
        return CheckpointKills.from_json(data)
    raise RecordError("no checkpoint kind")
