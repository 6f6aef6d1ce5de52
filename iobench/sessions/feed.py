"""`iobench feed`, whole: how many accelerators of a workload this storage keeps busy, MLPerf Storage's question on
the user's own format and loader. N emulated accelerators are N ranks on this machine (`iobench run` started as ranks:
their store a file of this user's, every rank ended with this process), each with its own loader over its shard and the
workload's step (a sleep of its compute time a batch); N is searched (`iobench.feed.search`) and judged
(`iobench.judge.feed`) from each run's record. Prints nothing: the command line prints the outcome."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from iobench.data.dlio_records import Records
from iobench.errors import IobenchError
from iobench.events import Events
from iobench.feed import defaults as default
from iobench.feed.search import estimate_words, search
from iobench.feed.workloads import CUSTOM, VERSION, Workload, closed_of
from iobench.judge.feed import FEED_RULES, RULES, FeedAnswer, dlio_au, record_answer
from iobench.judge.rules import rules_line
from iobench.results.feed_record import FEED, FeedPoint, FeedRecord, point_of_run, runs_path
from iobench.results.record import RunRecord
from iobench.results.record_base import HostLoad
from iobench.results.store import append_line, check_writable

if TYPE_CHECKING:
    from iobench.storage.remote.profiles import Profile
    from iobench.storage.remote.requests_log import Requests
    from iobench.storage.remote.targets import RemoteTarget

RANK_MEMORY_SHARE = 0.6  # of the memory available, what the ranks and their batches in flight may hold
PROCESS_BYTES = 150 * 2**20  # a rank or a worker's own memory (torch imported; a forked worker shares the rest)
COLD_RAM_FACTOR = 5  # MLPerf's rule: a dataset under 5x the RAM is read from the page cache unless evicted


@dataclass(frozen=True)
class FeedRequest:
    workload: Workload
    format: str
    loader: str
    data_dir: Path
    results: Path  # the feed record's file; each count's run records go beside it (`runs_path`)
    dataset: str | None = None  # the user's prepared dataset; None: one of the workload's sample size, made here
    size: int | None = None  # samples of the dataset made here (default: the workload's `default_size`)
    epochs: int = default.EPOCHS  # measured, after a warm-up epoch
    cache: str | None = None  # cold where iobench can evict (root), else warm; said either way
    most: int = default.MOST  # --max-accelerators
    num_workers: int | None = None  # the workload's read threads unless given
    what_if: tuple[float, ...] = ()  # other steps (ms) searched after the workload's: a faster accelerator
    timeout_s: float = 1800.0  # one count's run
    rules: str = FEED_RULES  # how AU is counted to rank the counts (`iobench.judge.feed.RULES`)
    remote: Profile | None = None  # the dataset served as S3 on loopback through this profile, read from there
    endpoint_url: str | None = None  # or the store at this URL, the dataset uploaded there (`iobench upload`)

    def __post_init__(self) -> None:
        if self.rules not in RULES:
            raise IobenchError(f"--rules: {' or '.join(RULES)}, got {self.rules!r}")
        if self.remote is not None and self.endpoint_url is not None:
            raise IobenchError("--endpoint-url reads a store as it is: not with --remote (iobench's own)")

    @property
    def store(self) -> str:
        """Where the ranks read, as the record says it: "" the data folder, a profile's name, or "external"."""
        if self.endpoint_url is not None:
            return "external"
        return self.remote.name if self.remote is not None else ""


@dataclass
class FeedOutcome:
    workload: Workload
    dataset_dir: Path
    sample_bytes: int
    cache: str
    record: FeedRecord | None = None  # what was measured, as stored in the results
    answer: FeedAnswer | None = None  # the judgement's, from the record
    rules: str | None = None  # whether the answer would stand as a CLOSED MLPerf Storage result, and why not
    what_if: list[FeedRecord] = field(default_factory=list)  # the same searched with each --what-if step
    notes: list[str] = field(default_factory=list)

    @property
    def demand_mb_per_s(self) -> float:
        """One accelerator's need on this dataset: a batch of its samples every step."""
        return replace(self.workload, sample_bytes=self.sample_bytes).demand_mb_per_s

    @property
    def points(self) -> dict[int, FeedPoint]:
        return self.record.point_map() if self.record else {}


def default_size(workload: Workload) -> int:
    """Samples of the dataset feed makes: enough batches for 16 ranks' shards (two batches each and a warm-up), at
    most about 4 GB (a unet3d sample is 147 MB: 28 of them, four batches)."""
    batch = workload.batch_size
    by_bytes = max(4 * batch, int(4e9 // workload.sample_bytes) // batch * batch)
    return min(by_bytes, max(32 * batch, 20_000))


def feed_session(request: FeedRequest, events: Events) -> FeedOutcome:
    """The dataset found or made, the counts searched, the record appended to the results, the answer."""
    _check_names(request)
    check_writable(request.results, kinds=(FEED,))
    check_writable(runs_path(request.results))
    data = _dataset(request, events)
    dataset_dir, sample_bytes, n_samples = data.folder, data.read_bytes, data.n_samples
    cache, notes = _cache(request, dataset_dir, n_samples * sample_bytes)
    w = request.workload
    most, why_most = _most(request, data.handed_bytes * w.batch_size, n_samples)
    outcome = FeedOutcome(w, dataset_dir, sample_bytes, cache, notes=notes)
    for note in notes:
        events.say(note)
    events.say(
        f"feed: {w.name} on {w.accelerator} ({_definition(w)}batch {w.batch_size}, step {w.compute_s * 1000:g} "
        f"ms, AU at least {w.au:.2f}: {outcome.demand_mb_per_s:,.0f} MB/s an accelerator) over {request.format} "
        f"read by {request.loader}, {cache}{_from_store(request)}; searching 1 to {most} accelerators ({why_most}); "
        + estimate_words(w, n_samples, most, request.epochs, 1 + len(request.what_if))
    )

    from iobench.run.serving import served

    with served(request.remote, request.endpoint_url, dataset_dir) as store:
        search_of = _Search(request, outcome, n_samples, (most, why_most), store, events)
        outcome.record = search_of(w)
        outcome.answer = record_answer(outcome.record)
        outcome.rules = rules_line(outcome.record, closed_of(outcome.record.workload))
        for ms in request.what_if:
            events.say(f"what if a batch's compute took {ms:g} ms (a faster accelerator): searching again")
            outcome.what_if.append(search_of(replace(w, compute_s=ms / 1000)))
    return outcome


@dataclass
class _Search:
    """The counts searched with a workload's step, its record appended to the results; each count's requests by the
    store's count where iobench serves the dataset."""

    request: FeedRequest
    outcome: FeedOutcome
    n_samples: int
    most: tuple[int, str]
    store: RemoteTarget | None
    events: Events

    def __call__(self, workload: Workload) -> FeedRecord:
        runs: list[RunRecord] = []

        def measure(n: int) -> FeedPoint:
            from iobench.storage.remote import requests_log
            from iobench.system.waits import WaitMeter

            log = self.store.access_log if self.store is not None else None  # iobench's store's own count
            mark = requests_log.mark(log)
            with WaitMeter() as meter:  # the ranks and their workers: what they used and waited for
                runs.append(_run(self.request, workload, self.outcome.dataset_dir, self.outcome.cache, n, self.store))
            point = _with_requests(point_of_run(runs[-1], n, meter.figures), requests_log.since(log, mark))
            dlio = dlio_au(point)
            self.events.say(
                f"{n} accelerator(s): least rank AU {point.au:.3f}"
                + (f" (as DLIO counts it {dlio:.3f})" if dlio is not None else "")
                + f", {point.mb_per_s:,.0f} MB/s together, "
                f"{point.wait_ms_per_batch:,.0f} ms waited a batch"
                + (f", {point.requests:,} requests" if point.requests is not None else "")
            )
            return point

        points = search(measure, workload.au, self.most[0], self.request.rules)
        record = _record(self.request, workload, self.outcome, self.n_samples, self.most, points, runs)
        append_line(self.request.results, json.dumps(record.to_json(), allow_nan=False))
        return record


def _with_requests(point: FeedPoint, seen: Requests | None) -> FeedPoint:
    """The count with the requests its ranks made and the bytes the store sent, by the store's count."""
    return point if seen is None else replace(point, requests=seen.total, request_bytes=seen.bytes_sent)


def _record(
    request: FeedRequest,
    w: Workload,
    outcome: FeedOutcome,
    n_samples: int,
    most: tuple[int, str],
    points: dict[int, FeedPoint],
    runs: list[RunRecord],
) -> FeedRecord:
    """The answer's measurements as stored: the workload, where it was asked, every count; the machine's load from
    before the first count's run to after the last's."""
    first, last = runs[0], runs[-1]
    return FeedRecord(
        workload=w.key,
        accelerator=w.accelerator,
        workloads=VERSION if w.name != CUSTOM else "",
        rules=request.rules,
        store=request.store,
        sample_bytes=outcome.sample_bytes,
        batch_size=w.batch_size,
        compute_s=w.compute_s,
        threshold=w.au,
        format=request.format,
        loader=request.loader,
        dataset=outcome.dataset_dir.name,
        samples=n_samples,
        cache=outcome.cache,
        most=most[0],
        why_most=most[1],
        points=[points[n] for n in sorted(points)],
        environment=last.environment,
        host=HostLoad(
            load_before=first.host.load_before,
            other_cpu_before=first.host.other_cpu_before,
            load_after=last.host.load_after,
            other_cpu_after=last.host.other_cpu_after,
        ),
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )


class FeedData(NamedTuple):
    folder: Path
    read_bytes: int  # what a sample's read takes from the storage: the demand and the MB/s delivered count these
    handed_bytes: int  # what the loader hands over a sample: the batches in flight hold these
    n_samples: int


def _dataset(request: FeedRequest, events: Events) -> FeedData:
    """The dataset's folder, what a sample's read takes (`read_bytes`) and its samples: the user's, or one made of
    the workload's samples: files of DLIO's sizes where it draws them and the format is files, else uint8 samples
    of the workload's mean."""
    from iobench.data.manifest import Manifest
    from iobench.data.prepare import check_dataset_folder
    from iobench.formats import FORMATS

    w = request.workload
    if request.dataset is not None:
        folder = request.data_dir / request.dataset
        check_dataset_folder(folder)
    else:
        sized = w.records is not None and request.format == "files"
        size = request.size or default_size(w)
        folder = request.data_dir / f"feed-{w.name}-{size}{'-dlio-sizes' if sized else ''}"
        check_dataset_folder(folder)  # a predictable name: a link planted there is refused, not written through
        if w.records is not None and not sized:
            events.say(
                f"every {w.name} sample is its mean, {w.sample_bytes:,} bytes of data (and a label): DLIO's sizes "
                f"(stdev {w.records.stdev_bytes:,}) are written by --format files (a file a sample, as DLIO's npz)"
            )
        if not (folder / "manifest.json").is_file() or request.format not in Manifest.load(folder).formats:
            _prepare(request, folder, size, w.records if sized else None, events)
    if not (folder / "manifest.json").is_file():
        raise IobenchError(f"feed: {folder} is no prepared dataset (`iobench prepare --data-dir ... --dataset ...`)")
    manifest = Manifest.load(folder)
    if request.format not in manifest.formats:
        raise IobenchError(f"feed: {folder} has no {request.format} (it has {', '.join(manifest.formats)})")
    fmt, spec = FORMATS[request.format], manifest.spec
    read_bytes = fmt.read_bytes(spec, fmt.options_from_json(manifest.formats[request.format].options))
    return FeedData(folder, read_bytes, spec.sample_bytes, spec.n_samples)


def _prepare(request: FeedRequest, folder: Path, size: int, records: Records | None, events: Events) -> None:
    """The workload's dataset written: with `records`, DLIO's files of its sizes (the sample it hands over, read with
    its filler); without, uint8 samples of the workload's mean."""
    from iobench.data.spec_options import SpecOptions
    from iobench.sessions.prepare import PrepareRequest, prepare_session

    shape = records.handed_bytes if records else request.workload.sample_bytes
    options = {"files": records.files_options} if records else {}
    spec = SpecOptions(size=str(size), shape=str(shape), dtype="uint8", classes=2)
    prepare_session(PrepareRequest(spec, request.format, request.data_dir, folder.name, format_options=options), events)


def _cache(request: FeedRequest, folder: Path, dataset_bytes: int) -> tuple[str, list[str]]:
    """Cold where iobench can evict (root) and the user did not ask for warm; a note where the epochs are warm and
    the dataset is under COLD_RAM_FACTOR x the RAM (read from the page cache: not the storage's answer)."""
    if request.store:  # the store's cache is its own: no eviction here reaches it
        if request.cache == "cold":
            raise IobenchError("feed: --cache cold evicts this machine's files; from object storage read warm")
        return "warm", []
    cache = request.cache or ("cold" if os.geteuid() == 0 else "warm")
    notes = []
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if cache == "warm" and dataset_bytes < COLD_RAM_FACTOR * ram:
        notes.append(
            f"warm epochs over {dataset_bytes / 1e9:,.1f} GB, under {COLD_RAM_FACTOR}x the RAM ({ram / 1e9:,.0f} GB): "
            "the page cache answers, not the storage (MLPerf's rule; `--cache cold` as root evicts it)"
        )
    return cache, notes


def _check_names(request: FeedRequest) -> None:
    """The format and the loader known, installed and going together, checked as `run` checks them, before anything
    is made (`--loader dataloder` wrote the dataset and started a rank before "unknown loader")."""
    from iobench.plan.selection import parse_pairs

    pairs, _ = parse_pairs(request.format, request.loader)
    if len(pairs) != 1:
        raise IobenchError(f"feed reads one --format with one --loader, got {request.format} and {request.loader}")


def _most(request: FeedRequest, batch_bytes: int, n_samples: int) -> tuple[int, str]:
    """The most ranks this machine can start: --max-accelerators, the memory each takes (its processes, and its
    batches in flight: prefetch_factor 2 a worker, the rank's own and the one it steps on), and two batches a shard."""
    from iobench.system.memory import memory_room

    workers = request.num_workers if request.num_workers is not None else request.workload.read_threads
    per_rank = batch_bytes * (2 * workers + 2) + PROCESS_BYTES * (workers + 1)
    available = memory_room().available  # MemAvailable, or less where a memory cgroup above iobench leaves less
    by_memory = int(available * RANK_MEMORY_SHARE // per_rank)
    if by_memory < 1:
        raise IobenchError(
            f"feed: one rank takes about {per_rank / 1e9:,.1f} GB (its {workers + 1} processes and batches in flight) "
            f"and {available / 1e9:,.1f} GB is available; give fewer --num-workers"
        )
    by_shards = max(1, n_samples // (2 * request.workload.batch_size))
    most = min(request.most, by_memory, by_shards)
    if most == by_memory and by_memory < request.most:
        return most, (
            f"a rank takes about {per_rank / 1e9:,.1f} GB (its {workers + 1} processes and batches in flight) and "
            f"{available / 1e9:,.1f} GB is available"
        )
    if most == by_shards and by_shards < request.most:
        return most, f"the dataset's {n_samples:,} samples give {by_shards} shards of two batches (a larger --size)"
    return most, f"--max-accelerators {request.most}"


def _run(request: FeedRequest, w: Workload, folder: Path, cache: str, n: int, store: RemoteTarget | None) -> RunRecord:
    """`iobench run` as n ranks with the workload's step, started from its request (`RunRequest.to_argv`); its
    record read back from a results file of its own in a private folder (never found by counting the lines of a
    shared file), then appended to the runs file beside feed's results."""
    from iobench.plan.config import RunConfig
    from iobench.plan.place import RunPlace
    from iobench.results.store import append_record, read_records
    from iobench.run.launch import rank_argv
    from iobench.sessions.run import RunRequest
    from iobench.settings import LoaderSettings
    from iobench.system.private import private_folder
    from iobench.system.ranks import run_ranks

    workers = request.num_workers if request.num_workers is not None else w.read_threads
    # workers kept between epochs, as DLIO's PyTorch loader keeps them and a training job does: an epoch's start is
    # its first reads, not its workers starting again
    settings = LoaderSettings(batch_size=w.batch_size, num_workers=workers, persistent_workers=workers > 0)
    config = RunConfig(
        format=request.format,
        loader=request.loader,
        settings=settings,
        step=f"sleep:{w.compute_s * 1000:g}",
        runs=1,
        epochs=request.epochs,
        warmup=1,
        cache=cache,
    )
    with private_folder("feed-count") as own:
        results = own / "run.jsonl"
        # from a store: its URL to the ranks (iobench's store: no bucket in it, the dataset's own), its keys in their
        # environment, never on a command line
        url = None if store is None else (request.endpoint_url or store.endpoint.url)
        env = None if store is None else {**os.environ, **store.endpoint.environment()}
        place = RunPlace(folder.parent, folder.name, "cpu", results, endpoint_url=url)
        argv = RunRequest.of_one(config, place, printing=("--quiet",)).to_argv()
        try:
            exits = run_ranks(rank_argv(argv), n, env=env, capture=True, timeout_s=request.timeout_s)
        except TimeoutError as exc:
            raise IobenchError(f"feed: {exc}") from None
        failed = [e for e in exits if e.code != 0]
        if failed:
            first = failed[0]
            said = [line for line in (first.stderr or first.stdout).splitlines() if line.strip()]
            raise IobenchError(
                f"feed: rank {first.rank} of {n} exited {first.code}: {said[-1][:300] if said else 'nothing said'}"
            )
        records = read_records(results) if results.is_file() else []
        if len(records) != 1:
            raise IobenchError(f"feed: the run of {n} rank(s) wrote {len(records)} records, not one")
    append_record(runs_path(request.results), records[0])
    return records[0]


def _from_store(request: FeedRequest) -> str:
    if request.endpoint_url is not None:
        return f", from the store at {request.endpoint_url}"
    return f", from iobench's store on 127.0.0.1 ({request.store})" if request.store else ""


def _definition(w: Workload) -> str:
    """Whose workload this is, said before its figures: the benchmark's version, or the user's own."""
    return f"{VERSION}'s, from {w.source}: " if w.name != CUSTOM else "your own: "
