"""The epochs of a prepared format through a loader: residency and counters around each timed epoch, the cold
eviction and untimed prime before it, the shuffle score and rank coverage after its clock, a profiled epoch."""

from __future__ import annotations

import cProfile
import datetime as dt
import gc
import marshal
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from iobench.errors import RunFailed, one_line
from iobench.loaders.base import Loader
from iobench.loaders.device import synchronize
from iobench.measuring.clocks import EpochTiming
from iobench.measuring.steps import Step
from iobench.plan.config import Cache, RunConfig
from iobench.plan.resolve import ResolvedRun
from iobench.results.shuffle_quality import score
from iobench.run.building import build_loader
from iobench.run.epoch_log import EpochLog
from iobench.run.epochs import DeviceTransform, EpochLoop
from iobench.run.failures import check_delivered, failure
from iobench.run.prime import PRIME_BATCHES, primed
from iobench.system.fsutil import PARTIAL_PREFIX, atomic_write_bytes, output_folder
from iobench.system.world import World


class ConfigEpochs(EpochLoop):
    """Epochs of a configuration's loader: every sample delivered, a failure said as one line naming it."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    def delivered(self, loader: Loader, timing: EpochTiming) -> None:
        check_delivered(loader, timing, self.config.label)

    def failure(self, exc: Exception, epoch: int) -> RunFailed:
        return failure(exc, self.config)


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
        prepare_epoch(loader, epoch, self.log, self.config)

    def make_cold(self, epoch: int) -> None:
        world, config = self.world, self.config
        world.barrier()  # no rank on this node still maps the files
        method = evicted(self.storage.make_cold, config) if world.is_node_main else ""
        world.barrier()
        if self.storage.primes_cold:  # the program's own files may be cold too: read back before the clock
            prime(self.resolved, epoch, self.step, self.transform)
            world.barrier()
            if world.is_node_main:  # the record's method: "drop_caches+prime+fadvise"
                method = f"{method}+prime+{evicted(self.storage.make_dataset_cold, config)}"
            world.barrier()
        if method:
            self.log.eviction_methods.add(method)

    def starting(self, epoch: int) -> None:
        self.log.resident_before.append(self.storage.residency())

    def started(self, loader: Loader, epoch: int) -> None:
        self.world.barrier()  # every rank starts the epoch together
        self.before = self.log.snapshot(loader.process_ids())

    def ended(self, loader: Loader, epoch: int, timing: EpochTiming) -> None:
        self.world.barrier()  # the node's counters cover every rank's epoch
        if loader.read_method is not None:  # known once it has read (preload tries O_DIRECT in its first epoch)
            self.log.read_methods.add(loader.read_method.value)
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
            self.profile_path = profile_epoch(self, loader, next_epoch, self.profile_dir)


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


def prepare_epoch(loader: Loader, epoch: int, log: EpochLog, config: RunConfig) -> None:
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


def evicted(evict: Callable[[], str], config: RunConfig) -> str:
    try:
        return evict()
    except OSError as exc:  # a data file swapped mid-run: refused, not waited on
        raise RunFailed(f"evicting {config.format} failed: {one_line(exc)}") from None


def prime(resolved: ResolvedRun, epoch: int, step: Step, transform: DeviceTransform) -> None:
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


def profile_epoch(subject: FormatEpochs, loader: Loader, epoch: int, directory: Path) -> Path:
    """One extra epoch under cProfile (and torch.profiler on CUDA); not part of the timings."""
    config = subject.config
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    output_folder(directory, "--profile")
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
        fd, fresh = tempfile.mkstemp(dir=directory, prefix=PARTIAL_PREFIX, suffix=".trace.json")
        os.close(fd)
        try:
            trace.export_chrome_trace(fresh)  # into a fresh name, renamed over a link rather than through it
            os.replace(fresh, path.with_suffix(".trace.json"))
        finally:
            Path(fresh).unlink(missing_ok=True)
    else:
        profiler.enable()
        one_epoch()
        profiler.disable()
    profiler.create_stats()
    atomic_write_bytes(path, marshal.dumps(profiler.stats))  # what dump_stats writes, without following a link
    return path
