"""`iobench feed`'s record (`kind` "feed"): the workload asked about, the dataset, format and loader it was asked on,
and every count of accelerators measured with its raw values (each rank's utilisation per measured epoch, MB/s, the
wait, the cores busy, the access pattern's limit, the load beside it). No verdict is stored: `report` and `compare`
decide them again from these values (`iobench.judge.feed`), so a file judged later is judged by the same rule.

Read back like every record: each stored value checked against its type, finite, within what a measurement can be;
a line that is not one is skipped with the reason. The run records of each count go to a file of their own beside it
(`runs_path`): a results file holds one kind of record."""

from __future__ import annotations

import math
import statistics
import typing
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from iobench.results.checked import MAX_MEASURED, RecordError, checked, mapping, parsed
from iobench.results.record import RunRecord
from iobench.results.record_base import BASE_PARTS, RecordBase, base_json, base_of

FEED = "feed"
SCHEMA_VERSION = 1
MAX_COUNT = 4096  # accelerators of one answer
MAX_NAME = 200
MAX_CORES = 1 << 16
CACHES = ("warm", "cold")
# how AU was counted to rank an answer's counts: feed's whole epochs or DLIO's (`iobench.judge.feed` counts them)
RULES = ("feed", "dlio")


# a count's fields of 0.3.1 (cores: 0.3.3, requests and request_bytes: from object storage), left out when None
LATER = ("own_cores", "cpu_wait_share", "cores", "requests", "request_bytes")
ROWS = ("rank_au", "rank_au_after_first", "rank_loop_wait", "rank_worker_wait", "rank_loop_cpu")  # a rank, an epoch
FROM_NOW = ROWS[1:]  # rows empty in answers made before them: left out when empty


@dataclass(frozen=True)
class FeedPoint:
    """One count of accelerators measured: each rank's utilisation per measured epoch, and the run's other figures."""

    n: int
    rank_au: tuple[tuple[float, ...], ...]
    mb_per_s: float  # all ranks together, the median epoch
    wait_ms_per_batch: float
    cpu_utilisation: float | None = None
    limit_name: str | None = None
    limit_mb_per_s: float | None = None
    percent_of_limit: float | None = None
    cache: str = "warm"
    first_batch_share: float = 0.0  # of an epoch, its first batch (its first reads, the prefetch filling)
    others_cores: float | None = None  # cores other programs used beside the run (during it where measured)
    # the count's own processes (its ranks and their workers), measured by feed around them: the cores' worth of CPU
    # they used, and the share of their runnable time they waited for a CPU (None in answers made before 0.3.1)
    own_cores: float | None = None
    cpu_wait_share: float | None = None
    # each rank's utilisation per epoch as DLIO counts it, each epoch's first step left out (empty before 0.3.2)
    rank_au_after_first: tuple[tuple[float, ...], ...] = ()
    # each rank's step loop's wait for a CPU per epoch, a share of its epoch (empty before 0.3.3)
    rank_loop_wait: tuple[tuple[float, ...], ...] = ()
    cores: int | None = None  # the machine's cores the count ran on
    # each rank's mean loader worker's wait for a CPU per epoch, a share of its epoch (empty in answers made before
    # it was recorded)
    rank_worker_wait: tuple[tuple[float, ...], ...] = ()
    # each rank's step loop's time on a CPU per epoch, a share of its epoch (likewise)
    rank_loop_cpu: tuple[tuple[float, ...], ...] = ()
    # from iobench's store on loopback (`feed --remote`): the requests the count's ranks made and the bytes the store
    # sent, by the store's own count (None from local storage, or a store iobench did not start)
    requests: int | None = None
    request_bytes: int | None = None

    @property
    def au(self) -> float:
        """The least fed rank's median utilisation (MLPerf's rule is every rank's)."""
        return min(statistics.median(r) for r in self.rank_au) if self.rank_au else 0.0

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)} | {
            name: [list(r) for r in getattr(self, name)] for name in ROWS
        }
        for name in LATER:  # not measured: left out, as answers made before them stored them
            if out[name] is None:
                del out[name]
        for name in FROM_NOW:  # likewise
            if not out[name]:
                del out[name]
        return out

    @classmethod
    def from_json(cls, data: object) -> FeedPoint:
        d = mapping(data, "feed count")
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {
            name: tuple(map(tuple, checked(d.get(name, []), list[list[float]], name))) for name in ROWS
        }
        for f in fields(cls):
            if f.name in d and f.name not in ROWS:
                values[f.name] = checked(d[f.name], hints[f.name], f.name)
        if "n" not in values:
            raise RecordError("the field 'n' is missing")
        point = cls(**values)
        if point.cores is not None and not 1 <= point.cores <= MAX_CORES:
            raise RecordError(f"a count's cores are {point.cores!r:.20}")
        if not 1 <= point.n <= MAX_COUNT or len(point.rank_au) != point.n:
            raise RecordError(f"count {point.n!r:.20} with {len(point.rank_au)} ranks' utilisation")
        if any(not r or not all(0 <= x <= 1 for x in r) for r in point.rank_au):
            raise RecordError("a rank's utilisation is not a fraction between 0 and 1")
        for name in FROM_NOW:
            rows = getattr(point, name)
            if rows and (len(rows) != point.n or not all(0 <= x <= 1 for r in rows for x in r)):
                raise RecordError(f"{name} is not a fraction a rank")
        _check_numbers(point, ("mb_per_s", "wait_ms_per_batch", "cpu_utilisation", "limit_mb_per_s"))
        _check_numbers(point, ("percent_of_limit", "first_batch_share", "others_cores", "own_cores", "cpu_wait_share"))
        _check_numbers(point, ("requests", "request_bytes"))
        if point.cache not in CACHES or (point.limit_name is not None and not _name(point.limit_name)):
            raise RecordError(f"a count's cache or limit is {point.cache!r:.20}, {point.limit_name!r:.40}")
        return point


@dataclass(frozen=True, kw_only=True)
class FeedRecord(RecordBase):
    """One feed answer's measurements: the workload (DLIO's parameters, or the user's custom ones), where it was asked
    and every count measured; `most` and `why_most`: the most ranks this machine could start, and why."""

    kind: str = FEED
    workload: str  # the workload's key: resnet50_h100, custom
    accelerator: str
    sample_bytes: int  # the dataset's sample, what the demand is computed from
    batch_size: int
    compute_s: float  # a batch's emulated compute
    threshold: float  # the utilisation every rank must keep
    format: str
    loader: str
    dataset: str
    samples: int
    cache: str
    most: int
    why_most: str = ""
    # whose definition of the workload: the benchmark's version (feed.workloads.VERSION) for a named workload; "" for
    # a custom one, and in answers made before 0.3.2 (DLIO's repository's resnet50/h100: batch 64, 0.103 s)
    workloads: str = ""
    rules: str = RULES[0]  # how AU was counted to rank the counts (`RULES`)
    # where the ranks read: "" the local data folder; object storage: iobench's store's profile (s3-like), or
    # "external" for the store at --endpoint-url
    store: str = ""
    points: list[FeedPoint] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def demand_mb_per_s(self) -> float:
        """One accelerator's need: a batch of the dataset's samples every step."""
        return self.sample_bytes * self.batch_size / self.compute_s / 1e6

    def point_map(self) -> dict[int, FeedPoint]:
        return {p.n: p for p in self.points}

    def identity(self) -> tuple[str, str, str, str, float, str]:
        """What two answers must share to be compared: the workload, format, loader, cache, step and store."""
        return (self.workload, self.format, self.loader, self.cache, self.compute_s, self.store)

    def to_json(self) -> dict[str, Any]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in BASE_PARTS}
        return {**own, "points": [p.to_json() for p in self.points], **base_json(self)}

    @classmethod
    def from_json(cls, data: object) -> FeedRecord:
        d = mapping(data, "feed record")
        if d.get("kind") != FEED:
            raise RecordError("no feed kind")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise RecordError(f"schema_version {version!r:.20} is not one this iobench reads ({SCHEMA_VERSION})")
        raw = checked(d.get("points"), list[dict], "points")
        if len(raw) > MAX_COUNT:
            raise RecordError(f"{len(raw)} counts measured")
        required = ("workload", "accelerator", "sample_bytes", "batch_size", "compute_s", "threshold", "most")
        record = parsed(cls, {k: v for k, v in d.items() if k != "points"}, required)
        record = replace(record, **base_of(d), points=[FeedPoint.from_json(p) for p in raw])
        _check_record(record)
        return record


def _check_record(record: FeedRecord) -> None:
    if len({p.n for p in record.points}) != len(record.points):
        raise RecordError("a count measured twice")
    if not (0 < record.threshold <= 1) or not (0 < record.compute_s <= MAX_MEASURED):
        raise RecordError(f"threshold {record.threshold!r:.20} or step {record.compute_s!r:.20} is not one")
    if min(record.sample_bytes, record.batch_size, record.most) < 1 or record.samples < 0:
        raise RecordError("a sample, batch or count below one")
    if record.cache not in CACHES:
        raise RecordError(f"'cache' holds {record.cache!r:.20}")
    if record.rules not in RULES:
        raise RecordError(f"'rules' holds {record.rules!r:.20}")
    if record.store and not _name(record.store):
        raise RecordError(f"'store' holds {record.store!r:.40}, not a name")
    for name in ("workload", "accelerator", "format", "loader", "dataset"):
        if not _name(getattr(record, name)):
            raise RecordError(f"{name!r} holds {getattr(record, name)!r:.40}, not a name")


def _name(text: str) -> bool:
    return 0 < len(text) <= MAX_NAME and text.isprintable()


def _check_numbers(point: FeedPoint, names: tuple[str, ...]) -> None:
    for name in names:
        x = getattr(point, name)
        if x is not None and not (math.isfinite(x) and 0 <= x <= MAX_MEASURED):
            raise RecordError(f"{name!r} holds {x!r}, not a measurement")


def runs_path(results: Path) -> Path:
    """Where feed's counts' run records go: beside its results, `<stem>-runs.jsonl`."""
    return results.with_name(f"{results.stem}-runs.jsonl")


def point_of_run(record: RunRecord, n: int, waits: Any = None) -> FeedPoint:
    """One count as its run of n ranks measured it: every rank's AU per epoch, the median epoch's figures; `waits`
    (`iobench.system.waits.WaitFigures` of the ranks' processes, measured around them): their CPU and its wait."""
    e, limit = record.epochs, record.limit
    starts = [f / s for f, s in zip(e.first_batch_seconds, e.epoch_seconds, strict=False) if s > 0]
    return FeedPoint(
        n,
        tuple(tuple(r) for r in record.ranks.rank_au),
        e.mb_per_s,
        e.wait_ms_per_batch,
        record.system.cpu_utilisation,
        limit.limit_name,
        limit.limit_mb_per_s,
        limit.percent_of_limit,
        record.config.cache,
        statistics.median(starts) if starts else 0.0,
        waits.others_cores if waits is not None and waits.others_cores is not None else record.host.busy,
        waits.cores if waits is not None else None,
        waits.wait_share if waits is not None else None,
        tuple(tuple(r) for r in record.ranks.rank_au_after_first),
        tuple(tuple(r) for r in record.ranks.rank_loop_wait),
        record.environment.cpu_count,
        tuple(tuple(r) for r in record.ranks.rank_worker_wait),
        tuple(tuple(r) for r in record.ranks.rank_loop_cpu),
    )
