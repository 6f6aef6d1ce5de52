"""`checkpoint --workload`'s record (`kind` "checkpoint_workload"): an MLPerf checkpointing workload's layout as it was
written here (the model, its layers kept, the ranks of the layout measured) and every rank's seconds for every
checkpoint written and read, raw: the answer (the time a checkpoint takes, the slowest rank's; GB/s a rank, the
slowest; GB/s together) is derived again from them where it is said (`iobench.judge.workload`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from iobench.results.checked import MAX_MEASURED, RecordError, checked, mapping, parsed
from iobench.results.record_base import BASE_PARTS, RecordBase, base_json, base_of

WORKLOAD = "checkpoint_workload"
SCHEMA_VERSION = 1
MAX_RANKS = 4096
MAX_CHECKPOINTS = 100


@dataclass(frozen=True, kw_only=True)
class WorkloadRecord(RecordBase):
    """One `checkpoint --workload` measurement: `write_s[rank][k]` and `read_s[rank][k]` the seconds rank `rank` took
    for checkpoint k (its files saved and fsynced; read back cold), `rank_bytes[rank]` what it writes a checkpoint."""

    kind: str = WORKLOAD
    workload: str  # llama3-8b ...
    layers: int  # the transformer layers written (--scale)
    layers_whole: int  # the model's
    layout_ranks: int  # TP x PP x DP: the processes of a CLOSED run
    whole_bytes: int  # one checkpoint of the whole model, every rank
    cold: str  # how the reads were made cold: "fadvise" (each rank's files dropped from the page cache)
    source: str  # the benchmark's files the workload comes from
    write_s: list[list[float]] = field(default_factory=list)
    read_s: list[list[float]] = field(default_factory=list)
    rank_bytes: list[int] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def ranks(self) -> int:
        return len(self.rank_bytes)

    @property
    def checkpoint_bytes(self) -> int:
        """One checkpoint's bytes over the ranks measured."""
        return sum(self.rank_bytes)

    def identity(self) -> tuple[str, int, int]:
        """What two records must share to be compared: the workload, its layers, its ranks."""
        return (self.workload, self.layers, self.ranks)

    def to_json(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in BASE_PARTS}
        return {**own, **base_json(self)}

    @classmethod
    def from_json(cls, data: object) -> WorkloadRecord:
        d = mapping(data, "checkpoint workload record")
        if d.get("kind") != WORKLOAD:
            raise RecordError("no checkpoint_workload kind")
        if d.get("schema_version") != SCHEMA_VERSION:
            raise RecordError(f"schema_version {d.get('schema_version')!r:.20} is not one this iobench reads")
        required = ("workload", "layers", "layers_whole", "layout_ranks", "whole_bytes", "write_s", "read_s")
        record = parsed(cls, d, (*required, "rank_bytes"))
        record = replace(record, **base_of(d))
        _check(record)
        return record


def _check(r: WorkloadRecord) -> None:
    if not (0 < len(r.workload) <= 40 and r.workload.isprintable() and r.source.isprintable()):
        raise RecordError(f"'workload' holds {r.workload!r:.40}")
    if not (1 <= r.layers <= r.layers_whole <= 10_000) or not (1 <= r.ranks <= min(r.layout_ranks, MAX_RANKS)):
        raise RecordError("layers or ranks out of their bounds")
    for name in ("write_s", "read_s"):
        rows = checked(getattr(r, name), list[list[float]], name)
        if len(rows) != r.ranks or len({len(x) for x in rows}) != 1 or not 1 <= len(rows[0]) <= MAX_CHECKPOINTS:
            raise RecordError(f"{name} is not a row of checkpoints a rank")
        if not all(0 < x <= MAX_MEASURED for row in rows for x in row):
            raise RecordError(f"{name} holds a time that is not one")
    if not all(0 < b <= r.whole_bytes for b in r.rank_bytes) or r.whole_bytes > 10**17:
        raise RecordError("a rank's bytes are not a share of the checkpoint")
