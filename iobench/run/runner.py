"""One run of a resolved configuration: cache preparation, warm-up, timed epochs, the record."""

from __future__ import annotations

import cProfile
import datetime as dt
import gc
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from iobench.errors import RunFailed, UserExit, one_line, reason
from iobench.events import QUIET, Events
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader
from iobench.loaders import LOADERS
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.device import synchronize
from iobench.loaders.factory import make_loader
from iobench.loaders.transforms import CALIBRATION_SAMPLES, Transform, TransformOn, make_transform
from iobench.measuring.clocks import EpochTiming
from iobench.measuring.steps import Step, make_step
from iobench.plan.config import Cache, RunConfig
from iobench.plan.resolve import ResolvedRun
from iobench.results.ceilings import RemoteLimits
from iobench.results.record import MachineLimits, RunRecord
from iobench.results.shuffle_quality import score
from iobench.run.epoch_log import EpochLog, record_of
from iobench.run.epochs import DeviceTransform, EpochLoop
from iobench.run.prime import PRIME_BATCHES, primed
from iobench.storage.remote import check_fork_safe
from iobench.system.contention import RECENT_SECONDS, contending, other_cores_busy, torch_threads
from iobench.system.sysmetrics import CpuCounters
from iobench.system.world import World


def build_loader(resolved: ResolvedRun, stateful: bool = False) -> Loader:
    """A fresh loader over a fresh reader of the resolved format (one per run, and per cold epoch; `stateful`: the
    resume check's); a file that cannot be opened as checked (swapped mid-run, truncated) ends the run in one line."""
    try:
        return _build_loader(resolved, stateful)
    except (OSError, ValueError) as exc:
        raise RunFailed(f"opening {resolved.config.format} failed: {type(exc).__name__}: {one_line(exc)}") from None


def _build_loader(resolved: ResolvedRun, stateful: bool) -> Loader:
    c = resolved.config
    # torch imports a profiler module lazily at the first batch of any DataLoader (record_function's first use): a
    # worker killed then made it log a 23-line traceback beside the run's one line. Imported here, before workers.
    with torch.autograd.profiler.record_function("iobench"):
        pass
    check_fork_safe(resolved.storage, c.settings.num_workers if LOADERS[c.loader].forks else 0)
    reader = open_reader(resolved)
    host = _transform_on(resolved, TransformOn.HOST)
    ctx = LoaderContext(
        reader, resolved.epoch_order(), c.settings, resolved.device, transform=host,
        cold=c.cache is Cache.COLD, format_name=c.format, format_options=resolved.entry.options, stateful=stateful,
    )  # fmt: skip
    return make_loader(c.loader, ctx)


def open_reader(resolved: ResolvedRun) -> FormatReader:
    """The format's reader over the run's storage, told how it will read (in order; larger than the cache)."""
    FORMATS.import_library(resolved.config.format)  # before workers fork: not imported again each epoch
    fmt, entry, storage = FORMATS[resolved.config.format], resolved.entry, resolved.storage
    hints = storage.hints(sequential=not resolved.config.shuffle)
    reader = fmt.reader(storage, resolved.manifest.spec, fmt.options_from_json(entry.options), hints)
    reader.import_libraries()
    return reader


def _transform_on(resolved: ResolvedRun, side: TransformOn) -> Transform | None:
    """The run's transform when it runs on that side; None without one."""
    c, spec = resolved.config, resolved.manifest.spec
    if c.transform == "none" or c.transform_on is not side:
        return None
    return make_transform(c.transform, spec.shape, spec.dtype)


def _device_transform(resolved: ResolvedRun) -> DeviceTransform:
    transform = _transform_on(resolved, TransformOn.DEVICE)
    return transform.batch if transform is not None else None


def _transform_cost(resolved: ResolvedRun) -> float | None:
    """Microseconds one sample's transform costs on the host, on the dataset's first samples, with the torch threads
    it runs with: one in each DataLoader worker, the run's in this process. Calibrated with torch's threads beside
    busy programs it read 34,360 µs a sample where the run's 2 workers delivered 337 samples/s (at most 5,900)."""
    c = resolved.config
    transform = _transform_on(resolved, c.transform_on)
    if transform is None:
        return None
    spec, n = resolved.manifest.spec, min(resolved.manifest.spec.n_samples, CALIBRATION_SAMPLES)
    if resolved.storage.kind != "local":  # read here, object storage would be read before the workers fork
        features = np.random.default_rng(0).integers(0, 256, (n, *spec.shape)).astype(spec.np_dtype)
    else:
        with open_reader(resolved) as reader:
            features, _ = reader.read_range(0, n)
    in_workers = c.transform_on is TransformOn.HOST and c.settings.num_workers > 0 and LOADERS[c.loader].forks
    with torch_threads(1 if in_workers else c.torch_threads):
        return transform.microseconds_per_sample(torch.from_numpy(features))


def possible_cost(cost: float | None, log: EpochLog, config: RunConfig) -> float | None:
    """The transform's calibrated cost, or None where the timed epochs rule it out: its samples cannot have cost
    more than the epoch's time over the processes that transformed them."""
    if cost is None or not log.timings:
        return cost
    processes = max(1, config.settings.num_workers) if config.transform_on is TransformOn.HOST else 1
    timing = sorted(log.timings, key=lambda t: t.seconds)[len(log.timings) // 2]
    bound = timing.seconds * 1e6 * processes / max(1, timing.samples)
    return cost if cost <= 1.25 * bound else None


def run(
    resolved: ResolvedRun,
    limits: MachineLimits | RemoteLimits | None = None,
    profile_dir: Path | None = None,
    events: Events = QUIET,
) -> RunRecord:
    """Measure one configuration, all its runs; returns its record (the same on every rank).

    Per timed epoch: `cold` closes the loader (nothing may stay mapped), has the storage make the files
    cold and says how cold they are (`Storage.make_cold`, `residency`) before building a fresh loader;
    `warm` follows at least one untimed epoch; `as-is` touches nothing. Residency and what moved from the
    storage are recorded for every timed epoch, whatever the mode. Under torchrun one process per node
    makes the files cold while the others wait, and every rank starts each timed epoch together. The
    storage's controls (local: a read throttle and a cache budget, a cgroup around the run and every
    process it starts) hold for each run.
    """
    measuring = Measuring(resolved, limits, profile_dir, events)
    for _ in range(resolved.config.runs):
        measuring.one_run()
    return measuring.record()


class Measuring:
    """One configuration measured run by run: `one_run` (a fresh loader, its warm-up and timed epochs), then `record`
    of the runs done. `run` does all of a configuration's runs at once; `iobench run` interleaves several
    configurations' runs (A, B, A, B ...) so that a minute's drift of a shared machine is in each one's interval,
    not between them, and an interruption keeps a record of the runs each had finished."""

    def __init__(self, resolved: ResolvedRun, limits: MachineLimits | RemoteLimits | None = None,
                 profile_dir: Path | None = None, events: Events = QUIET) -> None:  # fmt: skip
        config, device = resolved.config, resolved.device
        spec = resolved.manifest.spec
        self.resolved, self.limits, self.events = resolved, limits, events
        self.step = make_step(config.step, spec.features_per_sample, spec.n_classes, device, config.seed)
        self.log = EpochLog(resolved.storage.counters(), CpuCounters())
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.transform = _device_transform(resolved)
        self.transform_cost = _transform_cost(resolved)
        self.subject = FormatEpochs(resolved, self.log, self.step, self.transform, profile_dir)
        self.runs_done, self.seconds = 0, 0.0
        self.before: tuple[float, float | None] | None = None  # load average and other programs' cores
        self.after: tuple[float, float | None] | None = None
        self.peak_cache: int | None = None
        self.method: str | None = None

    def one_run(self) -> None:
        """The configuration's next run, under its storage's controls and the CPU contention it asked for."""
        config = self.resolved.config
        with contending(config.cpu_contention) as rivals, torch_threads(config.torch_threads):
            if self.before is None:
                self.before = (os.getloadavg()[0], other_cores_busy(rivals=rivals, recent=RECENT_SECONDS))
            with self.resolved.storage.controls() as applied:
                started = time.perf_counter()
                self.subject.run(1, config.warmup, config.epochs, self.step, self.transform, config.max_seconds,
                                 self.events, first_run=self.runs_done)  # fmt: skip
                self.seconds += time.perf_counter() - started
            self.after = (os.getloadavg()[0], other_cores_busy(rivals=rivals))
        self.runs_done += 1
        if applied.peak_cache_bytes is not None:
            self.peak_cache = max(self.peak_cache or 0, applied.peak_cache_bytes)
        self.method = applied.method

    def record(self) -> RunRecord:
        """The record of the runs done (all of them, or those an interruption left); the resume check after the
        last of all."""
        config = replace(self.resolved.config, runs=self.runs_done)
        resolved = replace(self.resolved, config=config)
        if config.resume_check and self.runs_done == self.resolved.config.runs:  # after the clock
            from iobench.run.resume_check import resume_check

            with resolved.storage.controls():
                last = config.runs * (config.warmup + config.epochs) - 1
                self.log.resume = resume_check(resolved, last, build_loader).fields()
        cost = possible_cost(self.transform_cost, self.log, config)
        record = record_of(resolved, self.log, cost, self.seconds, self.subject.profile_path)
        (load_before, other_before), (load_after, other_after) = self.before, self.after  # type: ignore[misc]
        cores = dict(load_before=load_before, load_after=load_after, other_cpu_before=other_before,
                     other_cpu_after=other_after)  # fmt: skip
        record = replace(record, system=replace(record.system, **cores))
        if self.resolved.confinement:
            budget = self.resolved.confinement.cache_budget_bytes
            system = replace(record.system, cache_budget_bytes=budget,
                             cache_peak_bytes=self.peak_cache if budget is not None else None,
                             confinement_method=self.method)  # fmt: skip
            record = replace(record, system=system)
        return record.with_limits(self.limits)


class ConfigEpochs(EpochLoop):
    """Epochs of a configuration's loader: every sample delivered, a failure said as one line naming it."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def delivered(self, loader: Loader, timing: EpochTiming) -> None:
        _check_delivered(loader, timing, self.config.label)

    def failure(self, exc: Exception, epoch: int) -> RunFailed:
        return _failure(exc, self.config)


class FormatEpochs(ConfigEpochs):
    """A prepared format through a loader: each timed epoch with its residency and counters; cold, the storage
    makes the files cold first (one process per node, every rank waiting) and the loader is rebuilt."""

    def __init__(
        self, resolved: ResolvedRun, log: EpochLog, step: Step, transform: DeviceTransform, profile_dir: Path | None
    ) -> None:
        super().__init__(resolved.config)
        self.resolved, self.log, self.step, self.transform = resolved, log, step, transform
        self.world, self.storage = resolved.world, resolved.storage
        self.cold = self.config.cache is Cache.COLD
        self.profile_dir, self.profile_path = profile_dir, None
        self.before: tuple = ()

    def build(self) -> Loader:
        loader = build_loader(self.resolved)
        self.log.setup.append(loader.setup_seconds())
        return loader

    def prepare(self, loader: Loader, epoch: int) -> None:
        _prepare(loader, epoch, self.log, self.config)

    def make_cold(self, epoch: int) -> None:
        world, config = self.world, self.config
        world.barrier()  # no rank on this node still maps the files
        method = _evicted(self.storage.make_cold, config) if world.is_node_main else ""
        world.barrier()
        if self.storage.primes_cold:  # the program's own files may be cold too: read back before the clock
            _prime(self.resolved, epoch, self.step, self.transform)
            world.barrier()
            if world.is_node_main:  # the record's method: "drop_caches+prime+fadvise"
                method = f"{method}+prime+{_evicted(self.storage.make_dataset_cold, config)}"
            world.barrier()
        if method:
            self.log.eviction_methods.add(method)

    def starting(self, epoch: int) -> None:
        self.log.resident_before.append(self.storage.residency())

    def started(self, loader: Loader, epoch: int) -> None:
        if loader.read_method is not None:
            self.log.read_methods.add(loader.read_method.value)
        self.world.barrier()  # every rank starts the epoch together
        self.before = self.log.snapshot(loader.process_ids())

    def ended(self, loader: Loader, epoch: int, timing: EpochTiming) -> None:
        self.world.barrier()  # the node's counters cover every rank's epoch
        self.log.add(timing, self.before, self.log.snapshot(loader.process_ids()), self.storage.residency())
        # after the clock: scoring the order costs the epoch nothing
        delivered = loader.delivered(epoch, timing.samples)
        self.log.shuffle.append(score(delivered, loader.order.n_samples, self.config.settings.batch_size))
        c = self.config
        last = epoch == c.runs * (c.warmup + c.epochs) - 1  # the record keeps the last timed epoch's coverage
        if last and self.world.size > 1 and loader.order.max_batches is None and c.max_seconds is None:
            self.log.coverage = rank_coverage(self.world, delivered, loader.order.n_samples, timing)

    def run_done(self, loader: Loader, run: int, next_epoch: int) -> None:
        if self.profile_dir is not None and run == self.config.runs - 1 and self.world.is_main:
            self.profile_path = _profile_epoch(self, loader, next_epoch, self.profile_dir)


def rank_coverage(world: World, delivered: np.ndarray, n: int, timing: EpochTiming) -> dict:
    """What the ranks delivered together in one epoch, after its clock: each rank's samples and batches, samples
    delivered more than once across ranks and samples none delivered (every rank calls it: collectives)."""
    counts = world.index_counts(delivered, n)
    shares = world.gather([float(timing.samples), float(timing.batches)])
    return {
        "rank_samples": [int(row[0]) for row in shares],
        "rank_batches": [int(row[1]) for row in shares],
        "duplicated_samples": int(np.maximum(counts.astype(np.int64) - 1, 0).sum()),
        "missing_samples": int((counts == 0).sum()),
    }


def _prepare(loader: Loader, epoch: int, log: EpochLog, config: RunConfig) -> None:
    """The loader's before-the-loop work for the epoch, outside its clock, timed as setup (`setup_seconds`)."""
    from iobench.storage.remote.bounds import forget, refused

    started = time.perf_counter()
    forget()
    try:
        loader.prepare(epoch)
    except (OSError, ValueError) as exc:
        said = refused() or f"{type(exc).__name__}: {one_line(exc)}"
        raise RunFailed(f"opening {config.format} failed: {said}") from None
    log.setup.append(time.perf_counter() - started)


def _evicted(evict: Callable[[], str], config: RunConfig) -> str:
    try:
        return evict()
    except OSError as exc:  # a data file swapped mid-run: refused, not waited on
        raise RunFailed(f"evicting {config.format} failed: {one_line(exc)}") from None


def _prime(resolved: ResolvedRun, epoch: int, step: Step, transform: DeviceTransform) -> None:
    """An untimed pass of a few batches through a loader of its own after the cold eviction: the code, libraries and
    lazily imported modules a cold epoch runs are read back now, not inside the timed epoch (as root, drop_caches
    made a cold epoch read 36-45 MB of iobench and torch beside a 520 MB dataset, its first batch 0.11 s instead of
    0.01 s; with fadvise, what an earlier drop or the VM's pageout took was read the same way: 51 MB for 10 MB).
    It reads a tiny twin of the dataset in the same format (`iobench.run.prime`): a few shuffled batches of the dataset
    itself, each row's fault pulling in the disk's read-ahead, read much of the file (a cold command read 2.01x its
    dataset). The storage then evicts the dataset alone."""
    loader = build_loader(primed(resolved))
    try:
        for k, batch in enumerate(loader.epoch(epoch)):
            moved = loader.to_device(batch)
            step(moved if transform is None else (transform(moved[0]), moved[1]))
            if k + 1 >= PRIME_BATCHES:
                break
        synchronize(loader.device)
    finally:
        loader.close()
        gc.collect()


def _profile_epoch(subject: FormatEpochs, loader: Loader, epoch: int, directory: Path) -> Path:
    """One extra epoch under cProfile (and torch.profiler on CUDA); not part of the timings."""
    config = subject.config
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stamp}-{config.format}-{config.loader}.prof"
    profiler = cProfile.Profile()

    def one_epoch() -> None:
        subject.clock(loader, epoch, subject.step, subject.transform, config.max_seconds)

    if loader.device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
            profiler.enable()
            one_epoch()
            profiler.disable()
        trace.export_chrome_trace(str(path.with_suffix(".trace.json")))
    else:
        profiler.enable()
        one_epoch()
        profiler.disable()
    profiler.dump_stats(path)
    return path


def _failure(exc: Exception, config: RunConfig) -> RunFailed:
    """A run's epoch that failed, in one line: a worker that died, a read that broke, what a store refused."""
    from iobench.storage.remote.bounds import refused

    label = config.label
    if isinstance(exc, UserExit):
        return RunFailed(f"{label}: code it ran {exc}")
    if isinstance(exc, RuntimeError):
        text = reason(exc)
        if "DataLoader worker" in text:
            return RunFailed(f"a DataLoader worker died during {label}: {text}")
        return RunFailed(f"{label} failed: {text}")
    if not isinstance(exc, (OSError, EOFError, ValueError, KeyError, IndexError)):
        raise exc
    # a batch's handover broken mid-way (its worker's socket reset) can be seen before the killed worker is
    # a zombie: wait for it a moment then, and not for an error of the read itself
    handover = isinstance(exc, (ConnectionError, EOFError))
    killed = _killed_child(HANDOVER_WAIT_S if handover else 0.0)
    if killed:  # the read broke because the worker handing the batch over was killed
        return RunFailed(f"a DataLoader worker died during {label}: {killed}")
    said = refused()  # an answer a library read through a file object, refused in its own words
    return RunFailed(f"reading {config.format} failed: {said or reason(exc)}")


HANDOVER_WAIT_S = 1.0


def _check_delivered(loader: Loader, timing: EpochTiming, label: str) -> None:
    """An epoch that was not cut short (--max-batches, --max-seconds) delivers every sample of the dataset: a
    library that skips what it cannot read (a damaged shard) made a record of 1,500 of 2,000 samples labelled
    partial, as if the user had asked for less. One rank's share is its pipeline's own; it is not checked."""
    order = loader.order
    if timing.partial or order.max_batches is not None or order.world > 1:
        return
    if timing.samples < order.n_samples:
        raise RunFailed(f"{label} delivered {timing.samples:,} of the {order.n_samples:,} samples of an epoch (a file "
                        "its library could not read and skipped?); `iobench verify` checks the dataset")  # fmt: skip


def _killed_child(wait_s: float = 0.0) -> str | None:
    """A child process killed by a signal and not yet reaped (left for its owner to reap), looked for during
    `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        if info is not None and info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            return f"worker (pid {info.si_pid}) was killed by {signal.Signals(info.si_status).name}"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
