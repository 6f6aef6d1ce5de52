"""One run of a resolved configuration: cache preparation, warm-up, timed epochs, the record."""

from __future__ import annotations

import cProfile
import datetime as dt
import gc
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from iobench.errors import RunFailed, one_line, reason
from iobench.events import QUIET, Events
from iobench.formats import FORMATS
from iobench.formats.base import FormatReader
from iobench.loaders import LOADERS
from iobench.loaders.base import Loader, LoaderContext
from iobench.loaders.device import synchronize
from iobench.loaders.factory import make_loader
from iobench.loaders.transforms import CALIBRATION_SAMPLES, Transform, TransformOn, make_transform
from iobench.measuring.clocks import time_epoch
from iobench.measuring.steps import Step, make_step
from iobench.plan.config import Cache, RunConfig
from iobench.plan.resolve import ResolvedRun
from iobench.results.record import EpochTiming, MachineLimits, RunRecord
from iobench.results.remote_limits import RemoteLimits
from iobench.results.shuffle_quality import score
from iobench.run.epoch_log import EpochLog, record_of
from iobench.storage.remote import check_fork_safe
from iobench.system.contention import RECENT_SECONDS, contending, other_cores_busy, torch_threads
from iobench.system.sysmetrics import CpuCounters

DeviceTransform = Callable[[torch.Tensor], torch.Tensor] | None  # batched, after the copy


def build_loader(resolved: ResolvedRun) -> Loader:
    """A fresh loader over a fresh reader of the resolved format (one per run, and per cold epoch); a file
    that cannot be opened as checked (swapped mid-run, truncated) ends the run in one line."""
    try:
        return _build_loader(resolved)
    except (OSError, ValueError) as exc:
        raise RunFailed(f"opening {resolved.config.format} failed: {type(exc).__name__}: {one_line(exc)}") from None


def _build_loader(resolved: ResolvedRun) -> Loader:
    c = resolved.config
    check_fork_safe(resolved.storage, c.settings.num_workers if LOADERS[c.loader].forks else 0)
    reader = open_reader(resolved)
    host = _transform_on(resolved, TransformOn.HOST)
    ctx = LoaderContext(
        reader, resolved.epoch_order(), c.settings, resolved.device, transform=host,
        cold=c.cache is Cache.COLD, format_name=c.format, format_options=resolved.entry.options,
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
    """Microseconds one sample's transform costs on the host, on the dataset's first samples."""
    transform = _transform_on(resolved, resolved.config.transform_on)
    if transform is None:
        return None
    spec, n = resolved.manifest.spec, min(resolved.manifest.spec.n_samples, CALIBRATION_SAMPLES)
    if resolved.storage.kind != "local":  # read here, object storage would be read before the workers fork
        features = np.random.default_rng(0).integers(0, 256, (n, *spec.shape)).astype(spec.np_dtype)
    else:
        with open_reader(resolved) as reader:
            features, _ = reader.read_range(0, n)
    return transform.microseconds_per_sample(torch.from_numpy(features))


def run(
    resolved: ResolvedRun,
    limits: MachineLimits | RemoteLimits | None = None,
    profile_dir: Path | None = None,
    events: Events = QUIET,
) -> RunRecord:
    """Measure one configuration; returns its record (the same on every rank).

    Per timed epoch: `cold` closes the loader (nothing may stay mapped), has the storage make the files
    cold and says how cold they are (`Storage.make_cold`, `residency`) before building a fresh loader;
    `warm` follows at least one untimed epoch; `as-is` touches nothing. Residency and what moved from the
    storage are recorded for every timed epoch, whatever the mode. Under torchrun one process per node
    makes the files cold while the others wait, and every rank starts each timed epoch together. The
    storage's controls (local: a read throttle and a cache budget, a cgroup around the run and every
    process it starts) hold for the whole run.
    """
    confinement, config = resolved.confinement, resolved.config
    with contending(config.cpu_contention) as rivals, torch_threads(config.torch_threads):
        load_before, other_before = os.getloadavg()[0], other_cores_busy(rivals=rivals, recent=RECENT_SECONDS)
        with resolved.storage.controls() as applied:
            record = _measure(resolved, events, profile_dir)
        load_after, other_after = os.getloadavg()[0], other_cores_busy(rivals=rivals)
    cores = dict(load_before=load_before, load_after=load_after, other_cpu_before=other_before)
    record = replace(record, system=replace(record.system, **cores, other_cpu_after=other_after))
    if confinement:
        budget = confinement.cache_budget_bytes
        system = replace(
            record.system,
            cache_budget_bytes=budget,
            cache_peak_bytes=applied.peak_cache_bytes if budget is not None else None,
            confinement_method=applied.method,
        )
        record = replace(record, system=system)
    return record.with_limits(limits)


def _measure(resolved: ResolvedRun, events: Events, profile_dir: Path | None) -> RunRecord:
    config, world, device = resolved.config, resolved.world, resolved.device
    spec = resolved.manifest.spec
    step = make_step(config.step, spec.features_per_sample, spec.n_classes, device, config.seed)
    log = EpochLog(resolved.storage.counters(), CpuCounters())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    epochs_per_run = config.warmup + config.epochs
    transform = _device_transform(resolved)
    transform_cost = _transform_cost(resolved)
    started = time.perf_counter()
    profile_path = None
    for r in range(config.runs):
        loader = build_loader(resolved)
        try:
            log.setup.append(loader.setup_seconds())
            for e in range(epochs_per_run):
                epoch = r * epochs_per_run + e
                if e < config.warmup:
                    _prepare(loader, epoch, log, config)
                    timing = _epoch(loader, epoch, step, config, transform)
                else:
                    loader, timing = _timed_epoch(resolved, loader, epoch, step, transform, log)
                events.epoch_done(r, e, e < config.warmup, timing.seconds)
            if profile_dir is not None and r == config.runs - 1 and world.is_main:
                profile_path = _profile_epoch(loader, (r + 1) * epochs_per_run, step, config, profile_dir, transform)
        finally:
            loader.close()
    return record_of(resolved, log, transform_cost, time.perf_counter() - started, profile_path)


def _timed_epoch(
    resolved: ResolvedRun, loader: Loader, epoch: int, step: Step, transform: DeviceTransform, log: EpochLog
) -> tuple[Loader, EpochTiming]:
    """One timed epoch with its residency and counters; cold, the storage makes the files cold first and
    the loader is rebuilt (it is returned: the caller closes the one in use)."""
    config, world, storage = resolved.config, resolved.world, resolved.storage
    cold = config.cache is Cache.COLD
    if cold:
        loader.close()
        gc.collect()  # drop any mapping still referenced from a cycle
        world.barrier()  # no rank on this node still maps the files
        method = _evicted(storage.make_cold, config) if world.is_node_main else ""
        world.barrier()
        if storage.primes_cold:  # the program's own files may be cold too: read back before the clock
            _prime(resolved, epoch, step, transform)
            world.barrier()
            if world.is_node_main:  # the record's method: "drop_caches+prime+fadvise"
                method = f"{method}+prime+{_evicted(storage.make_dataset_cold, config)}"
            world.barrier()
        if method:
            log.eviction_methods.add(method)
    log.resident_before.append(storage.residency())
    if cold:
        loader = build_loader(resolved)
        log.setup.append(loader.setup_seconds())
    if loader.read_method is not None:
        log.read_methods.add(loader.read_method.value)
    _prepare(loader, epoch, log, config)
    world.barrier()  # every rank starts the epoch together
    a = log.snapshot(loader.process_ids())
    with harness_out_of_the_collector():
        timing = _epoch(loader, epoch, step, config, transform)
    world.barrier()  # the node's counters cover every rank's epoch
    log.add(timing, a, log.snapshot(loader.process_ids()), storage.residency())
    # after the clock: scoring the order costs the epoch nothing
    log.shuffle.append(
        score(loader.delivered(epoch, timing.samples), loader.order.n_samples, config.settings.batch_size)
    )
    return loader, timing


@contextmanager
def harness_out_of_the_collector() -> Iterator[None]:
    """The objects that exist before the clock starts (iobench's own: its modules, its records, its CLI; and the
    pipeline's setup) frozen out of Python's garbage collector for the timed epoch (`gc.freeze`), which collects what
    the epoch allocates as it would in any loop. Without it a full collection inside the epoch scanned iobench's heap:
    LitData's remote path, whose chunk download builds a boto3 client, took 0.26 s instead of 0.08 s for that client
    and ran at 0.67-0.79x of its own loop's samples/s (1.2x with the collector off in both)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


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


PRIME_BATCHES = 2  # batches of the untimed pass that brings back what a cold eviction took of the program itself


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
    The storage then evicts the dataset alone."""
    loader = build_loader(resolved)
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


def _profile_epoch(
    loader: Loader, epoch: int, step: Step, config: RunConfig, directory: Path, transform: DeviceTransform
) -> Path:
    """One extra epoch under cProfile (and torch.profiler on CUDA); not part of the timings."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stamp}-{config.format}-{config.loader}.prof"
    profiler = cProfile.Profile()
    if loader.device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
            profiler.enable()
            _epoch(loader, epoch, step, config, transform)
            profiler.disable()
        trace.export_chrome_trace(str(path.with_suffix(".trace.json")))
    else:
        profiler.enable()
        _epoch(loader, epoch, step, config, transform)
        profiler.disable()
    profiler.dump_stats(path)
    return path


def _epoch(loader: Loader, epoch: int, step: Step, config: RunConfig, transform: DeviceTransform = None) -> EpochTiming:
    from iobench.storage.remote.bounds import forget, refused

    label = config.label
    forget()
    try:
        timing = time_epoch(loader, epoch, step, config.max_seconds, transform)
        _check_delivered(loader, timing, label)
        return timing
    except RuntimeError as exc:
        text = reason(exc)
        if "DataLoader worker" in text:
            raise RunFailed(f"a DataLoader worker died during {label}: {text}") from None
        raise RunFailed(f"{label} failed: {text}") from None
    except (OSError, EOFError, ValueError, KeyError, IndexError) as exc:
        # a batch's handover broken mid-way (its worker's socket reset) can be seen before the killed worker is
        # a zombie: wait for it a moment then, and not for an error of the read itself
        handover = isinstance(exc, (ConnectionError, EOFError))
        killed = _killed_child(HANDOVER_WAIT_S if handover else 0.0)
        if killed:  # the read broke because the worker handing the batch over was killed
            raise RunFailed(f"a DataLoader worker died during {label}: {killed}") from None
        said = refused()  # an answer a library read through a file object, refused in its own words
        raise RunFailed(f"reading {config.format} failed: {said or reason(exc)}") from None


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
